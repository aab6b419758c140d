"""Issue 31's figures from two ``tunekit compare`` outputs on the same spaces and seeds: one of the
strategies with an empty store, one of ``default`` with the store holding the kernel's other
shapes (``--transfer``).

    tunekit compare --space 'experiments/results/heuristics/spaces/*.json.gz' --strategy default \\
        --strategy random --strategy rf --strategy lfbo --strategy optuna-gp --strategy kt:genetic_algorithm \\
        --seeds 10 --budget 200 --jobs 2 --out ALONE
    tunekit compare --space 'experiments/results/heuristics/spaces/*.json.gz' --strategy default --transfer \\
        --seeds 10 --budget 200 --jobs 2 --out STORED
    python experiments/heldout_figures.py ALONE STORED [--also MORE]

Prints, per strategy, the runs within 2 % of the optimum in the budget and the geometric mean of
best / optimum after 20, 50 and 200 evaluations, over all spaces and per kernel family (a space's
file name up to its first ``-``, as record_spaces.py names them), and the same of ``default`` with
the store; then, per space, the median
evaluations to within 5 % without the store and with it. ``--also`` adds the strategies of other
compare outputs with an empty store on the same spaces and seeds (a strategy replayed elsewhere).
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
from collections import defaultdict
from pathlib import Path

CHECKPOINTS = (20, 50, 200)


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def family(space: str) -> str:
    return space.rsplit("/", 1)[-1].split("-", 1)[0]


def read_curves(outs: list[Path]) -> dict[tuple, list[float]]:
    """(space, strategy, seed) -> best / optimum after each evaluation, from every output."""
    curves: dict[tuple, list[float]] = defaultdict(list)
    for out in outs:
        with open(out / "curves.csv") as lines:
            for row in csv.DictReader(lines):
                ratio = float(row["best_over_optimum"]) if row["best_over_optimum"] else math.inf
                curves[row["space"], row["strategy"], int(row["seed"])].append(ratio)
    return curves


def strategy_rows(curves: dict[tuple, list[float]], spaces: set[str] | None = None) -> list[str]:
    """The table of every strategy over ``spaces`` (default: all)."""
    found: dict[str, dict] = defaultdict(lambda: defaultdict(list))
    for (space, strategy, _), curve in curves.items():
        if spaces is not None and space not in spaces:
            continue
        found[strategy]["within"].append(curve[-1] <= 1.02)
        for n in CHECKPOINTS:
            found[strategy][n].append(curve[min(n, len(curve)) - 1])
    rows = ["| strategy | runs within 2 % | after 20 | after 50 | after 200 |", "|---|---|---|---|---|"]
    for strategy, figures in found.items():
        within = figures["within"]
        rows.append(f"| {strategy} | {100 * statistics.fmean(within):.1f} % ({sum(within)} of {len(within)}) | "
                    + " | ".join(f"{geomean(figures[n]):.3f}" for n in CHECKPOINTS) + " |")
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
    args = parser.parse_args()
    curves = read_curves([args.alone, *args.also])
    print("\n".join(strategy_rows(curves)), "\n")
    families: dict[str, set[str]] = defaultdict(set)
    for space, _, _ in curves:
        families[family(space)].add(space)
    if len(families) > 1:
        for name, spaces in sorted(families.items()):
            print(f"{name} ({len(spaces)} spaces):\n" + "\n".join(strategy_rows(curves, spaces)), "\n")
    print("`default` with the store, over the same spaces and seeds:\n"
          + "\n".join(strategy_rows(read_curves([args.stored]))), "\n")
    without, stored = evals_to_5(args.alone), evals_to_5(args.stored)
    print("| space | without the store | with it |\n|---|---|---|")
    for space in sorted(without):
        print(f"| {space.rsplit('/', 1)[-1]} | {without[space]:g} | {stored[space]:g} |")
    slower = [space for space in without if stored[space] > without[space]]
    finite = [stored[s] / without[s] for s in without if math.isfinite(stored[s]) and math.isfinite(without[s])]
    print(f"\nWith the store: within 10 evaluations on {sum(v <= 10 for v in stored.values())} of {len(stored)} "
          f"spaces, slower than without it on {len(slower)}; geometric mean with / without "
          f"{geomean(finite) if finite else math.nan:.3f} over the {len(finite)} spaces reached both ways.")


if __name__ == "__main__":
    main()
