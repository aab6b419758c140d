"""Issue 31's figures from two ``tunekit compare`` outputs on the same spaces and seeds: one of the
strategies with an empty store, one of ``default`` with the store holding the kernel's other
shapes (``--transfer``).

    tunekit compare --space 'experiments/results/heuristics/spaces/*.json.gz' --strategy default \\
        --strategy random --strategy rf --strategy lfbo --strategy optuna-gp --strategy kt:genetic_algorithm \\
        --seeds 10 --budget 200 --jobs 2 --out ALONE
    tunekit compare --space 'experiments/results/heuristics/spaces/*.json.gz' --strategy default --transfer \\
        --seeds 10 --budget 200 --jobs 2 --out STORED
    python experiments/heldout_figures.py ALONE STORED [--also MORE] [--spaces 'GLOB']

Prints, per strategy, the runs within 2 % of the optimum in the budget, the geometric mean of
best / optimum after 20, 50 and 200 evaluations (those within the budget) and the mean scores
over evaluations and over simulated seconds (the reports' aggregate: the mean over spaces of the
mean over seeds), over all spaces and per kernel family (a space's file name up to its first
``-``, as record_spaces.py names them), and the same of ``default`` with the store; then, per
space, the median evaluations to within 5 % without the store and with it. ``--also`` adds the
strategies of other compare outputs with an empty store; every strategy must cover the same
spaces and seeds, and no run may be given twice. ``--spaces`` reads the recorded files and says
how hard each family is: the median config over the optimum, and how close to the optimum the
best config of the family's other shapes comes (what reusing a sibling's winner would find).
"""

from __future__ import annotations

import argparse
import csv
import glob
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tunekit.recorded import read_space

CHECKPOINTS = (20, 50, 200)
#: A run: (space, strategy, seed).
Run = tuple[str, str, int]


@dataclass
class Runs:
    """The runs of one or more compare outputs: each run's best / optimum after each evaluation,
    and its scores over evaluations and over simulated seconds."""

    curves: dict[Run, list[float]] = field(default_factory=dict)
    scores: dict[Run, tuple[float, float]] = field(default_factory=dict)
    budget: int = 0


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def family(space: str) -> str:
    return space.rsplit("/", 1)[-1].split("-", 1)[0]


def read_runs(outs: list[Path]) -> Runs:
    """Every run of ``outs``; ``ValueError`` for a run given twice, a curve whose evaluations are
    not 1, 2, ... in order, outputs of different budgets, or strategies that do not cover the same
    spaces and seeds."""
    runs = Runs()
    budgets = set()
    for out in outs:
        seen: dict[Run, list[float]] = defaultdict(list)
        with open(out / "curves.csv") as lines:
            for row in csv.DictReader(lines):
                run = (row["space"], row["strategy"], int(row["seed"]))
                if int(row["evaluation"]) != len(seen[run]) + 1:
                    raise ValueError(f"{out / 'curves.csv'}: evaluation {row['evaluation']} of {run} out of order")
                seen[run].append(float(row["best_over_optimum"]) if row["best_over_optimum"] else math.inf)
        twice = sorted(set(seen) & set(runs.curves))
        if twice:
            raise ValueError(f"{out} repeats runs of an earlier output, e.g. {twice[0]}")
        runs.curves.update(seen)
        with open(out / "summary.csv") as lines:
            for row in csv.DictReader(lines):
                runs.scores[row["space"], row["strategy"], int(row["seed"])] = (float(row["score"]),
                                                                                 float(row["score_seconds"]))
                budgets.add(int(row["budget"]))
    if len(budgets) > 1:
        raise ValueError(f"the outputs ran with different budgets: {sorted(budgets)}")
    runs.budget = budgets.pop() if budgets else 0
    covered: dict[str, set] = defaultdict(set)
    for space, strategy, seed in runs.curves:
        covered[strategy].add((space, seed))
    first = next(iter(covered.values()), set())
    uneven = [strategy for strategy, tasks in covered.items() if tasks != first]
    if uneven:
        raise ValueError(f"strategies {', '.join(uneven)} do not cover the same spaces and seeds as the others")
    return runs


def strategy_rows(runs: Runs, spaces: set[str] | None = None) -> list[str]:
    """The table of every strategy over ``spaces`` (default: all)."""
    checkpoints = [n for n in CHECKPOINTS if n <= runs.budget] or [runs.budget]
    found: dict[str, dict] = defaultdict(lambda: defaultdict(list))
    per_space: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for (space, strategy, seed), curve in runs.curves.items():
        if spaces is not None and space not in spaces:
            continue
        found[strategy]["within"].append(curve[-1] <= 1.02)
        for n in checkpoints:
            found[strategy][n].append(curve[min(n, len(curve)) - 1])  # a run that stopped early keeps its best
        if (space, strategy, seed) in runs.scores:
            per_space[strategy][space].append(runs.scores[space, strategy, seed])
    rows = ["| strategy | runs within 2 % | " + " | ".join(f"after {n}" for n in checkpoints)
            + " | score (evaluations) | score (seconds) |", "|---" * (4 + len(checkpoints)) + "|"]
    for strategy, figures in found.items():
        within = figures["within"]
        means = [statistics.fmean(statistics.fmean(s[i] for s in seeds) for seeds in per_space[strategy].values())
                 if per_space[strategy] else math.nan for i in (0, 1)]
        rows.append(f"| {strategy} | {100 * statistics.fmean(within):.1f} % ({sum(within)} of {len(within)}) | "
                    + " | ".join(f"{geomean(figures[n]):.3f}" for n in checkpoints)
                    + f" | {means[0]:.3f} | {means[1]:.3f} |")
    return rows


def landscape_rows(pattern: str) -> list[str]:
    """Per space of the recorded files matching ``pattern``: the median valid config over the
    optimum, and the best, over the family's other shapes, of their fastest config's time here over
    the optimum (inf where it fails here)."""
    recorded = [read_space(Path(path)) for path in sorted(glob.glob(pattern))]
    times = [{tuple(sorted(r.params.items())): r.time_ms for r in space.records if r.ok and r.time_ms} for space in recorded]
    rows = ["| space | configs | median / optimum | the best sibling winner / optimum |", "|---|---|---|---|"]
    for index, space in enumerate(recorded):
        optimum = min(times[index].values())
        siblings = [i for i, other in enumerate(recorded) if i != index and family(other.name) == family(space.name)]
        winners = [min(times[i], key=times[i].__getitem__) for i in siblings]
        reuse = min((times[index].get(w, math.inf) / optimum for w in winners), default=math.nan)
        rows.append(f"| {space.name.rsplit('/', 1)[-1]} | {len(space.records)} | "
                    f"{statistics.median(times[index].values()) / optimum:.2f} | {reuse:.3f} |")
    return rows


def evals_to_5(out: Path) -> dict[str, float]:
    """Space -> median over seeds of ``default``'s evaluations to within 5 % (unreached: infinite)."""
    reached: dict[str, list[float]] = defaultdict(list)
    with open(out / "summary.csv") as lines:
        for row in csv.DictReader(lines):
            if row["strategy"] == "default":
                reached[row["space"]].append(float(row["evals_to_1.05"]) if row["evals_to_1.05"] else math.inf)
    return {space: statistics.median(values) for space, values in reached.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("alone", type=Path, help="the compare output with an empty store")
    parser.add_argument("stored", type=Path, help="the compare output of default --transfer")
    parser.add_argument("--also", type=Path, action="append", default=[],
                        help="another compare output with an empty store on the same spaces and seeds (repeatable)")
    parser.add_argument("--spaces", help="the recorded files (a glob pattern): how hard each space is")
    args = parser.parse_args()
    runs = read_runs([args.alone, *args.also])
    print(*strategy_rows(runs), "", sep="\n")
    families: dict[str, set[str]] = defaultdict(set)
    for space, _, _ in runs.curves:
        families[family(space)].add(space)
    if len(families) > 1:
        for name, spaces in sorted(families.items()):
            print(f"{name} ({len(spaces)} spaces):", *strategy_rows(runs, spaces), "", sep="\n")
    print("`default` with the store, over the same spaces and seeds:",
          *strategy_rows(read_runs([args.stored])), "", sep="\n")
    without, stored = evals_to_5(args.alone), evals_to_5(args.stored)
    print("| space | without the store | with it |\n|---|---|---|")
    for space in sorted(without):
        print(f"| {space.rsplit('/', 1)[-1]} | {without[space]:g} | {stored[space]:g} |")
    slower = [space for space in without if stored[space] > without[space]]
    finite = [stored[s] / without[s] for s in without if math.isfinite(stored[s]) and math.isfinite(without[s])]
    print(f"\nWith the store: within 10 evaluations on {sum(v <= 10 for v in stored.values())} of {len(stored)} "
          f"spaces, slower than without it on {len(slower)}; geometric mean with / without "
          f"{geomean(finite) if finite else math.nan:.3f} over the {len(finite)} spaces reached both ways.")
    if args.spaces:
        print("", *landscape_rows(args.spaces), sep="\n")


if __name__ == "__main__":
    main()
