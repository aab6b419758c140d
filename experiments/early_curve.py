"""Per space and label of a protocol's runs file, the geometric mean over seeds of best / optimum
after a few evaluations, and the protocol's score (``learned_search.Table``'s, within the runs'
budget): where a design is ahead or behind early.

    python experiments/early_curve.py --runs OUT/runs.jsonl.gz [--corpus experiments/corpus/v2.json]
        [--label L ...] [--family F ...] [--after 3 5 10 20 50] [--over LABEL] [--first N]

``--over LABEL``: each label's best over LABEL's at the same space and seed instead of over the
optimum (the scores' column is then the difference of the two). ``--first N``: only each label's
first N runs in the file's order (a look at a replay still running), and the tunings of their
spaces and seeds. With ``--over``, the last lines sum up every space.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402
from learned_search import Table, as_run, read_runs  # noqa: E402
from leave_family_out import _spaces  # noqa: E402

from tunekit.metrics import SpaceStats


def best_after(times_ms: list, evaluations: int) -> float:
    """The fastest time among the first ``evaluations`` (all of them where the run is shorter)."""
    times = np.array([np.inf if t is None else t for t in times_ms], dtype=float)
    return float(np.minimum.accumulate(times)[min(evaluations, len(times)) - 1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--corpus", default="experiments/corpus/v2.json")
    parser.add_argument("--label", action="append", default=[], help="these labels only (repeat)")
    parser.add_argument("--family", action="append", default=[], help="these families' spaces only (repeat)")
    parser.add_argument("--after", type=int, nargs="+", default=[3, 5, 10, 20, 50])
    parser.add_argument("--over", help="the label each run is compared with, seed by seed")
    parser.add_argument("--first", type=int, help="each label's first N runs in the file")
    args = parser.parse_args()

    family = {entry.name: entry.family for entry in corpus.entries(args.corpus)}
    spaces = _spaces(args.corpus)
    runs: dict[tuple[str, str], dict[int, list]] = defaultdict(dict)
    kept: list[dict] = []
    taken: dict[str, int] = defaultdict(int)
    for run in read_runs(args.runs):
        if "times_ms" not in run or (args.family and family.get(run["space"]) not in args.family):
            continue
        label = run["strategy"]
        if label != args.over and args.first is not None:
            if taken[label] >= args.first:
                continue
            taken[label] += 1
        runs[(run["space"], label)][run["seed"]] = run["times_ms"]
        kept.append(run)
    budgets = sorted({run["budget"] for run in kept})
    if len(budgets) > 1:
        raise SystemExit(f"{args.runs} holds runs of budgets {budgets}: one budget at a time is scored")
    labels = args.label or sorted({label for _, label in runs} - {args.over})
    print(f"{'space':45s} {'label':60s} seeds  " + " ".join(f"@{n:<5d}" for n in args.after) + " score")
    overall: dict[str, list[list[float]]] = defaultdict(list)
    stats_of = {space: SpaceStats.of(spaces[space]) for space, _ in runs}
    for space in sorted(stats_of):
        stats = stats_of[space]
        base = runs.get((space, args.over), {}) if args.over else {}
        for label in labels:
            mine = runs.get((space, label), {})
            seeds = sorted(set(mine) & set(base)) if args.over else sorted(mine)
            if not seeds:
                continue
            ratios = [[np.log(best_after(mine[s], n)
                              / (best_after(base[s], n) if args.over else stats.optimum)) for n in args.after]
                      for s in seeds]
            overall[label] += ratios
            # the report's score (within the budget), on the seeds of this row
            table = Table([as_run(run) for run in kept if run["space"] == space and run["seed"] in seeds],
                          {space: stats}, budgets[0])
            scored = table.score(space, label) - (table.score(space, args.over) if args.over else 0.0)
            print(f"{space:45s} {label:60s} {len(seeds):5d}  "
                  + " ".join(f"{x:6.3f}" for x in np.exp(np.mean(ratios, axis=0))) + f" {scored:+.3f}")
    if args.over:
        for label, ratios in overall.items():
            print(f"{'every space':45s} {label:60s} {len(ratios):5d}  "
                  + " ".join(f"{x:6.3f}" for x in np.exp(np.mean(ratios, axis=0))))


if __name__ == "__main__":
    main()
