"""Per space, each seed's evaluations to within 5 % with the store beside those without it, from
a transfer runs file (``experiments/transfer_cv.py``'s): the medians the cross-validation compares,
how the runs with the store are spread over the first evaluations, and a one-sided Mann-Whitney
test of "slower with the store" where the median is higher. It chooses nothing.

    python experiments/transfer_seeds.py --runs OUT/runs.jsonl.gz --label store-3-spread3 [--only-slower]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.stats import mannwhitneyu

sys.path.insert(0, str(Path(__file__).resolve().parent))
from leave_family_out import _spaces  # noqa: E402
from learned_search import Table, as_run, read_runs  # noqa: E402
from transfer_cv import WITHOUT, median_evals  # noqa: E402

from tunekit.compare import same_kernel_elsewhere  # noqa: E402
from tunekit.metrics import SpaceStats  # noqa: E402

#: Evaluations counted one by one in the spread of the runs with the store; later ones share a column.
FIRST = 7


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--label", required=True, help="the label of the runs with the store")
    parser.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parent / "corpus" / "v2.json")
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--only-slower", action="store_true", help="only the spaces slower with the store")
    args = parser.parse_args()
    spaces = _spaces(str(args.corpus))
    elsewhere = same_kernel_elsewhere(spaces)
    runs = [as_run(r) for r in read_runs(args.runs) if r["strategy"] in (WITHOUT, args.label)]
    table = Table(runs, {name: SpaceStats.of(space) for name, space in spaces.items()}, args.budget)
    print(f"space | median without | median with | runs with the store reaching 5 % at 1..{FIRST}, later "
          f"| one-sided p (slower with)")
    for name in sorted(n for n in spaces if elsewhere[n] and all((n, label) in table.runs
                                                                 for label in (WITHOUT, args.label))):
        without, with_store = (np.asarray(table.evals_to_per_seed(name, label, 1.05)) for label in (WITHOUT, args.label))
        medians = [median_evals(table, name, label, args.budget) for label in (WITHOUT, args.label)]
        slower = medians[1] > medians[0]
        if args.only_slower and not slower:
            continue
        spread = np.bincount(np.minimum(with_store, FIRST + 1).astype(int), minlength=FIRST + 2)[1:]
        p = f"{mannwhitneyu(with_store, without, alternative='greater').pvalue:.3f}" if slower else "-"
        print(f"{name} | {medians[0]:.1f} | {medians[1]:.1f} | {' '.join(map(str, spread))} | {p}")


if __name__ == "__main__":
    main()
