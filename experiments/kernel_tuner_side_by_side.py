"""tunekit's strategies and Kernel Tuner's, on the same recorded spaces, budgets and seeds, in one report.

Kernel Tuner's strategies run through ``tunekit compare``'s ``kt:NAME`` (``tunekit.kerneltuner``
says how the two tuners are made comparable); this script adds the defaults below, a
``run.json`` naming what ran, and ``--report-only``, which scores a finished run again.

    python experiments/kernel_tuner_side_by_side.py --quick            # 3 spaces, 5 seeds: a few minutes
    python experiments/kernel_tuner_side_by_side.py --out results/kt   # every shared space, 20 seeds
    python experiments/kernel_tuner_side_by_side.py --out results/kt --report-only   # score it again

Needs ``pip install kernel_tuner`` (tested with 1.5.0).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

from tunekit.compare import run_comparison, runs_from_curves, write_outputs
from tunekit.kerneltuner import PREFIX
from tunekit.metrics import Comparison, SpaceStats
from tunekit.recorded import read_space

SHARED = Path(__file__).resolve().parents[2] / "shared" / "spaces" / "kerneltuner"
QUICK_SPACES = ["kt_data/pnpoly/RTX_3090.json.gz", "kt_data/convolution/RTX_3090.json.gz",
                "convolution_milo/A100.json.gz"]
KT_STRATEGIES = ["random_sample", "greedy_ils", "genetic_algorithm", "dual_annealing", "simulated_annealing",
                 "pso", "mls"]


def rescore(out: Path) -> Comparison:
    """The comparison a finished run wrote to ``out`` (``run.json``, ``summary.csv`` for the
    budgets, ``curves.csv`` for every evaluation), to be scored again with the current metrics."""
    meta = json.loads((out / "run.json").read_text())
    spaces = {space.name: space for space in (read_space(path) for path in meta["spaces"])}
    with open(out / "summary.csv", newline="") as handle:
        budgets = {row["space"]: int(row["budget"]) for row in csv.DictReader(handle)}
    strategies = list(meta["tunekit"]) + [PREFIX + name for name in meta["kernel_tuner_strategies"]]
    comparison = Comparison(spaces, {name: SpaceStats.of(space) for name, space in spaces.items()}, budgets,
                            strategies, meta["seeds"])
    comparison.runs = runs_from_curves(out / "curves.csv", budgets)
    return comparison


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--space", action="append", help="recorded space files (default: every shared space)")
    parser.add_argument("--quick", action="store_true", help=f"{len(QUICK_SPACES)} spaces, 5 seeds")
    parser.add_argument("--tunekit-strategy", action="append", help="default: random")
    parser.add_argument("--kt-strategy", action="append", help=f"default: {', '.join(KT_STRATEGIES)}")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--budget", type=int, default=None, help="default: per space, the end of the score range")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", default="experiments/results/kernel_tuner_side_by_side")
    parser.add_argument("--report-only", action="store_true",
                        help="score the run in --out again (its curves.csv) and rewrite its report and figures")
    args = parser.parse_args()
    if args.report_only:
        written = write_outputs(rescore(Path(args.out)), args.out,
                                " ".join(["python", *sys.argv]) + "  (scored again from the run's curves.csv)")
        print(written["report"].read_text())
        return

    import kernel_tuner

    if args.space:
        paths = args.space
    elif args.quick:
        paths = [str(SHARED / p) for p in QUICK_SPACES]
    else:
        paths = sorted(str(p) for p in SHARED.glob("**/*.json.gz") if "t4_example" not in str(p))
    seeds = args.seeds or (5 if args.quick else 20)
    ours = args.tunekit_strategy or ["random"]
    theirs = args.kt_strategy or KT_STRATEGIES
    started = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if done == total or done % 100 == 0:
            print(f"{done}/{total} tunings replayed ({time.perf_counter() - started:.0f} s)", file=sys.stderr)

    comparison = run_comparison(paths, [*ours, *(PREFIX + s for s in theirs)], seeds, args.budget, jobs=args.jobs,
                                progress=progress)
    command = " ".join(["python", *sys.argv])
    written = write_outputs(comparison, args.out, f"{command}  (Kernel Tuner {kernel_tuner.__version__})")
    meta = {"kernel_tuner": kernel_tuner.__version__, "spaces": paths, "seeds": seeds, "tunekit": ours,
            "kernel_tuner_strategies": theirs, "seconds": time.perf_counter() - started}
    (Path(args.out) / "run.json").write_text(json.dumps(meta, indent=1))
    report = written["report"].read_text().splitlines()
    start = report.index("## Aggregate over spaces")
    print("\n".join(report[start: start + 5 + len(comparison.strategies)]))


if __name__ == "__main__":
    main()
