"""Per space and label of a protocol's runs file, the geometric mean over seeds of best / optimum
after a few evaluations, and the protocol's score (``learned_search.Table``'s, within the runs'
budget): where a design is ahead or behind early.

    python experiments/early_curve.py --runs OUT/runs.jsonl.gz [--corpus experiments/corpus/v2.json]
        [--label L ...] [--family F ...] [--after 3 5 10 20 50] [--over LABEL] [--first N]

Best found is the report's: a failed evaluation counts as the space's slowest working config.
``--over LABEL``: each label's best over LABEL's at the same space and seed instead of over the
optimum, and its score minus LABEL's; the last lines give each label's geometric mean over all
its tunings. ``--first N``: each label's first N runs in the file's order, after ``--family``
(a look at a replay still running); LABEL's runs are all kept. A run repeated in the file (merged
files) counts once, its first copy, as in the report.
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

from tunekit.metrics import Run, SpaceStats


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
    wanted = set(args.label) | ({args.over} if args.over else set())
    kept_runs: dict[tuple[str, str, int], Run] = {}
    taken: dict[str, int] = defaultdict(int)
    for row in read_runs(args.runs):
        if "times_ms" not in row or (args.family and family.get(row["space"]) not in args.family):
            continue
        label, key = row["strategy"], (row["space"], row["strategy"], row["seed"])
        if (args.label and label not in wanted) or key in kept_runs:
            continue
        if row["space"] not in spaces:
            raise SystemExit(f"{args.runs}: space {row['space']!r} is not in {args.corpus}")
        if label != args.over and args.first is not None:
            if taken[label] >= args.first:
                continue
            taken[label] += 1
        kept_runs[key] = as_run(row)
    found = {label for _, label, _ in kept_runs}
    missing = sorted(wanted - found)
    if missing:
        raise SystemExit(f"{args.runs} holds no runs of {', '.join(map(repr, missing))}"
                         + (" in those families" if args.family else ""))
    if not kept_runs:
        raise SystemExit(f"{args.runs} holds no runs" + (" in those families" if args.family else ""))
    budgets = sorted({run.budget for run in kept_runs.values()})
    if len(budgets) > 1:
        raise SystemExit(f"{args.runs} holds runs of budgets {budgets}: one budget at a time is scored")
    stats = {space: SpaceStats.of(spaces[space]) for space, _, _ in kept_runs}
    table = Table(list(kept_runs.values()), stats, budgets[0])
    seeds_of = {space_and_label: {run.seed: run for run in runs}
                for space_and_label, runs in table.runs.items()}
    labels = args.label or sorted(found - {args.over})

    print(f"{'space':45s} {'label':60s} seeds  " + " ".join(f"@{n:<5d}" for n in args.after) + " score")
    overall: dict[str, list[list[float]]] = defaultdict(list)
    for space in sorted(stats):
        over_runs = seeds_of.get((space, args.over), {}) if args.over else {}
        for label in labels:
            label_runs = seeds_of.get((space, label), {})
            seeds = sorted(set(label_runs) & set(over_runs)) if args.over else sorted(label_runs)
            if not seeds:
                continue
            ratios = [[np.log(table.run_ratio_after(label_runs[seed], n)
                              / (table.run_ratio_after(over_runs[seed], n) if args.over else 1.0))
                       for n in args.after] for seed in seeds]
            overall[label] += ratios
            # the report's score, on the seeds of this row
            row_runs = [label_runs[seed] for seed in seeds] + [over_runs[seed] for seed in seeds if args.over]
            on_seeds = Table(row_runs, stats, budgets[0])
            score = on_seeds.score(space, label) - (on_seeds.score(space, args.over) if args.over else 0.0)
            print(f"{space:45s} {label:60s} {len(seeds):5d}  "
                  + " ".join(f"{x:6.3f}" for x in np.exp(np.mean(ratios, axis=0))) + f" {score:+.3f}")
    if args.over:
        for label, ratios in overall.items():
            print(f"{'every space (tunings)':45s} {label:60s} {len(ratios):5d}  "
                  + " ".join(f"{x:6.3f}" for x in np.exp(np.mean(ratios, axis=0))))


if __name__ == "__main__":
    main()
