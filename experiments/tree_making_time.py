"""``default``'s CPU time per proposed config with the forests' trees made directly (as tunekit's
``RandomForest`` makes them) and through scikit-learn's ``clone``, side by side on the corpus's
largest space, one tuning at a time in this process, the two alternating seed by seed.

    python experiments/tree_making_time.py --seeds 3 [--corpus experiments/corpus/v1.json] [--out FILE]

Prints each tuning's milliseconds per config and whether the two ways proposed the same configs
(they must: the trees are the same), then the medians and their ratio; ``--out`` writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from leave_family_out import _processor, _spaces, _tuning  # noqa: E402
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor  # noqa: E402

from tunekit.perfmodels import RandomForest  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(Path(__file__).resolve().parent / "corpus" / "v1.json"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    spaces = _spaces(args.corpus)
    largest = max(spaces, key=lambda name: len(spaces[name]))
    direct_regressor, direct_classifier = RandomForest._default_regressor, RandomForest._default_classifier
    ways = {
        "direct": (direct_regressor, direct_classifier),
        "clone": (lambda model: RandomForestRegressor(**direct_regressor(model).get_params()),
                  lambda model: RandomForestClassifier(**direct_classifier(model).get_params())),
    }
    _tuning(args.corpus, largest, "default", "default", "{}", args.seeds, 10)  # imports and the Space, untimed
    per_config: dict[str, list[float]] = {way: [] for way in ways}
    same = []
    for seed in range(args.seeds):
        proposed = {}
        for way, (regressor, classifier) in ways.items():
            RandomForest._default_regressor, RandomForest._default_classifier = regressor, classifier
            line = _tuning(args.corpus, largest, "default", "default", "{}", seed, args.budget)
            per_config[way].append(1e3 * line["cpu_seconds"] / len(line["times_ms"]))
            proposed[way] = line["times_ms"]
            print(f"seed {seed} {way}: {per_config[way][-1]:.1f} ms per config", flush=True)
        same.append(proposed["direct"] == proposed["clone"])
    RandomForest._default_regressor, RandomForest._default_classifier = direct_regressor, direct_classifier
    medians = {way: statistics.median(values) for way, values in per_config.items()}
    print(f"{largest}: median {medians['direct']:.1f} ms per config made directly, {medians['clone']:.1f} through "
          f"clone (ratio {medians['direct'] / medians['clone']:.3f}); the same configs in {sum(same)} of {len(same)} tunings")
    if args.out:
        args.out.write_text(json.dumps({"space": largest, "machine": platform.node(), "processor": _processor(),
                                        "ms_per_config": per_config, "medians": medians, "same_configs": same},
                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
