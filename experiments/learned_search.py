"""Learned search against random search and Kernel Tuner: evaluations to come within 2 % and 5 %
of each space's optimum, medians over seeds, on the shared spaces and the shipped H200 spaces.

    python experiments/learned_search.py --seeds 20 --jobs 2 --out experiments/results/learned_search

1. The 25 shared Kernel Tuner files: tunekit's strategies replayed here; Kernel Tuner's
   strategies read from the side-by-side run already committed
   (``experiments/results/kernel_tuner_side_by_side/summary.csv``: same files, same seeds count,
   their budgets), so that Kernel Tuner's best strategy per space is the bar.
2. The 12 H200 spaces without the store (each tuning starts from nothing), and with it: leave one
   shape out, each tuning starting with the store holding the kernel's other shapes.

Every tuning's budget is ``min(the space's default budget, --budget-cap)``; a seed that does not
reach a target within it counts as not reached (censored medians), Kernel Tuner's included. The
spaces used while choosing the default strategy's design and options are marked "selection";
every other space is held out. Random search's expected evaluations are exact: (N+1)/(k+1) for N
valid configs of which k are within the target.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
import time
from pathlib import Path

from tunekit.kernels import shipped

from tunekit.compare import run_comparison, summary_rows, write_outputs
from tunekit.metrics import SpaceStats
from tunekit.recorded import read_space

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[1] / "shared" / "spaces" / "kerneltuner"
KT_SUMMARY = HERE / "results" / "kernel_tuner_side_by_side" / "summary.csv"
STRATEGIES = ["random", "optuna", "rf", "default"]
#: The spaces looked at while the default strategy was designed and its options chosen.
SELECTION = {f"kt_data/{kernel}/{gpu}" for kernel in ("convolution", "gemm", "pnpoly")
             for gpu in ("RTX_3090", "RTX_2080_Ti")}
THRESHOLDS = (1.02, 1.05)


def shared_paths() -> list[Path]:
    return sorted(p for p in SHARED.rglob("*.json.gz") if "t4_example" not in p.parts)


def censored_median(values: list[float]) -> float:
    return statistics.median(sorted(values))


def medians(rows: list[dict], threshold: float, cap: int) -> dict[tuple[str, str], float]:
    """(space, strategy) -> median over seeds of evaluations to the threshold, inf if not reached."""
    found: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        value = row[f"evals_to_{threshold}"]
        reached = float(value) if value not in ("", None) and float(value) <= cap else math.inf
        found.setdefault((row["space"], row["strategy"]), []).append(reached)
    return {key: censored_median(values) for key, values in found.items()}


def random_expectation(space_stats: SpaceStats, threshold: float) -> float:
    valid = len(space_stats.sorted_times)
    within = int((space_stats.sorted_times <= space_stats.optimum * threshold).sum())
    return (valid + 1) / (within + 1)


def fmt(value: float) -> str:
    return f"{value:g}" if math.isfinite(value) else "not reached"


def table(title: str, stats: dict[str, SpaceStats], rows: list[dict], strategies: list[str], cap: int,
          kt: dict | None, threshold: float) -> tuple[list[str], dict]:
    ours = medians(rows, threshold, cap)
    kt_medians = medians(kt["rows"], threshold, cap) if kt else {}
    header = ["space", "selection", "valid", "random expected", *strategies] + (["best Kernel Tuner"] if kt else [])
    lines = [f"### {title}: evaluations to within {round((threshold - 1) * 100)} % of the optimum", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    per_space = {}
    for name, space_stats in stats.items():
        expected = random_expectation(space_stats, threshold)
        cells = [name, "yes" if name in SELECTION else "", str(len(space_stats.sorted_times)), f"{expected:.1f}"]
        cells += [fmt(ours[(name, s)]) for s in strategies]
        best_kt = (math.inf, "")
        if kt:
            candidates = [(v, s.removeprefix("kt:")) for (space, s), v in kt_medians.items()
                          if space == name and s.startswith("kt:") and s != "kt:random_sample"]
            best_kt = min(candidates) if candidates else (math.inf, "")
            cells.append(f"{fmt(best_kt[0])} ({best_kt[1]})" if best_kt[1] else "")
        per_space[name] = {"expected": expected, **{s: ours[(name, s)] for s in strategies}, "kt": best_kt[0]}
        lines.append("| " + " | ".join(cells) + " |")
    return lines, per_space


def aggregate(per_space: dict, strategies: list[str], kt: bool) -> list[str]:
    """Medians over spaces, over all of them and, where some were used to choose the default,
    over the held-out ones alone."""
    subsets = {"all": list(per_space)}
    if any(name in SELECTION for name in per_space):
        subsets["held out"] = [name for name in per_space if name not in SELECTION]
    lines = ["", "| spaces | strategy | median over spaces | spaces reached (median seed) "
             "| median of random expected / strategy " + ("| spaces where it needs no more than Kernel Tuner's best |"
                                                          if kt else "|"),
             "|---|---|---|---|---|" + ("---|" if kt else "")]
    for label, names in subsets.items():
        rows = [per_space[name] for name in names]
        for strategy in strategies:
            values = [row[strategy] for row in rows]
            speedups = [row["expected"] / row[strategy] if math.isfinite(row[strategy]) else 0.0 for row in rows]
            cells = [f"{label} ({len(rows)})", strategy, fmt(statistics.median(values)),
                     f"{sum(math.isfinite(v) for v in values)} of {len(values)}", f"{statistics.median(speedups):.1f}x"]
            if kt:
                cells.append(f"{sum(row[strategy] <= row['kt'] for row in rows)} of {len(rows)}")
            lines.append("| " + " | ".join(cells) + " |")
        if kt:
            best = [row["kt"] for row in rows]
            lines.append(f"| {label} ({len(rows)}) | Kernel Tuner's best per space | {fmt(statistics.median(best))} "
                         f"| {sum(math.isfinite(v) for v in best)} of {len(best)} | | |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget-cap", type=int, default=300)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--strategy", action="append", help=f"default: {' '.join(STRATEGIES)}")
    parser.add_argument("--part", action="append", choices=["shared", "h200", "transfer"],
                        help="default: all three")
    parser.add_argument("--from-results", action="store_true",
                        help="rebuild report.md from the summary.csv files already in --out; replay nothing")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    strategies = args.strategy or STRATEGIES
    out = Path(args.out)
    parts = args.part or ["shared", "h200", "transfer"]
    report = [f"# Learned search: {args.seeds} seeds, budgets capped at {args.budget_cap} evaluations", ""]
    kt = {"rows": list(csv.DictReader(KT_SUMMARY.open()))} if KT_SUMMARY.exists() else None
    h200 = shipped.paths()
    runs = {"shared": (shared_paths(), strategies, False, kt),
            "h200": (h200, strategies, False, None),
            "transfer": (h200, [s for s in strategies if s != "random"], True, None)}
    for part in parts:
        paths, names, transfer, kernel_tuner = runs[part]
        started = time.perf_counter()
        if args.from_results:
            rows = list(csv.DictReader((out / part / "summary.csv").open()))
            names = list(dict.fromkeys(row["strategy"] for row in rows))
            stats = {space.name: SpaceStats.of(space) for space in map(read_space, paths)}
        else:
            comparison = run_comparison(paths, names, args.seeds, jobs=args.jobs, transfer=transfer,
                                        budget_cap=args.budget_cap)
            write_outputs(comparison, out / part, " ".join(["python", *sys.argv]))
            rows, stats = summary_rows(comparison), comparison.stats
        title = {"shared": "Shared Kernel Tuner spaces", "h200": "H200 spaces, empty store",
                 "transfer": "H200 spaces, store holding the kernel's other shapes"}[part]
        for threshold in THRESHOLDS:
            lines, per_space = table(title, stats, rows, names, args.budget_cap, kernel_tuner, threshold)
            report += lines + aggregate(per_space, names, kernel_tuner is not None) + [""]
        if not args.from_results:
            report.append(f"({len(rows)} tunings in {time.perf_counter() - started:.0f} s)")
        report.append("")
        print("\n".join(report), flush=True)
    (out / "report.md").write_text("\n".join(report) + "\n")


if __name__ == "__main__":
    main()
