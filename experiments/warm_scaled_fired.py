"""Where ``DefaultSearch(warm_scaled=True)`` changes the warm start, and how fast the configs it
adds are: for each space of the corpus whose kernel is recorded at other shapes, with the store
holding those shapes (as the protocol's transfer runs), the warm-start configs that the option
brings in and each one's recorded time over the space's optimum. From the recordings alone, in
seconds.

    python experiments/warm_scaled_fired.py --corpus experiments/corpus/v2.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from leave_family_out import _spaces  # noqa: E402

from tunekit.budget import Budget  # noqa: E402
from tunekit.compare import same_kernel_elsewhere  # noqa: E402
from tunekit.config import config_to_dict  # noqa: E402
from tunekit.strategies import DefaultSearch  # noqa: E402
from tunekit.strategy import SearchContext  # noqa: E402


def warm_start(scaled: bool, space, history) -> list:
    """The configs ``default`` measures first at ``space`` with ``history`` in the store."""
    strategy = DefaultSearch(warm_scaled=scaled)
    strategy.start(SearchContext(space.space(), Budget(evals=200), space.key(), 0, history))
    return [strategy._configs[i] for i in strategy._prior_ranking[:strategy.warm_start]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parent / "corpus" / "v2.json")
    args = parser.parse_args()
    spaces = _spaces(str(args.corpus))
    elsewhere = same_kernel_elsewhere(spaces)
    names = [name for name in sorted(spaces) if elsewhere[name]]
    fired = 0
    for name in names:
        space = spaces[name]
        history = tuple(trial for other in elsewhere[name] for trial in spaces[other].trials())
        without = {str(config_to_dict(c)) for c in warm_start(False, space, history)}
        added = [c for c in warm_start(True, space, history) if str(config_to_dict(c)) not in without]
        if not added:
            continue
        fired += 1
        for config in added:
            record = space.lookup(config)
            speed = f"{record.time_ms / space.optimum_ms:.3f}" if record is not None and record.ok else "failed"
            print(f"{name}: {config_to_dict(config)} {speed} x the optimum")
    print(f"the option changed the warm start on {fired} of {len(names)} spaces")


if __name__ == "__main__":
    main()
