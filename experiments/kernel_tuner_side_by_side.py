"""tunekit's strategies and Kernel Tuner's, on the same recorded spaces, budgets and seeds, in one report.

Kernel Tuner runs in its simulation mode on a decompressed temporary copy of each file (the
shared files are never touched). The recorded files store no restrictions, so the restriction
given is "the config is in the file", failed configs included: both tuners then search the same
configs and both count a failed config as an evaluation. Kernel Tuner's ``seed`` is ignored by
most of its strategies, so Python's and NumPy's generators are seeded before every run. Kernel
Tuner may revisit a config; only first visits count, as in tunekit, up to the same budget.
Simulated seconds are the recorded compile + benchmark + verification times of the configs
visited (tunekit adds its strategy's measured time too, microseconds for random search).

    python experiments/kernel_tuner_side_by_side.py --quick            # 3 spaces, 5 seeds: a few minutes
    python experiments/kernel_tuner_side_by_side.py --out results/kt   # every shared space, 20 seeds
    python experiments/kernel_tuner_side_by_side.py --out results/kt --report-only   # score it again

Needs ``pip install kernel_tuner`` (tested with 1.5.0).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import random
import shutil
import sys
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from tunekit.compare import Run, run_comparison, runs_from_curves, slug, write_outputs
from tunekit.metrics import Comparison, SpaceStats
from tunekit.recorded import RecordedSpace, read_space

SHARED = Path(__file__).resolve().parents[2] / "shared" / "spaces" / "kerneltuner"
QUICK_SPACES = ["kt_data/pnpoly/RTX_3090.json.gz", "kt_data/convolution/RTX_3090.json.gz",
                "convolution_milo/A100.json.gz"]
KT_STRATEGIES = ["random_sample", "greedy_ils", "genetic_algorithm", "dual_annealing", "simulated_annealing",
                 "pso", "mls"]


def kernel_tuner_run(recorded: RecordedSpace, strategy: str, seed: int, budget: int, scratch: Path) -> Run:
    """One Kernel Tuner tuning in simulation mode, as a tunekit ``Run``."""
    from constraint import FunctionConstraint
    from kernel_tuner import tune_kernel
    from kernel_tuner import util as kt_util

    scratch.mkdir(parents=True, exist_ok=True)
    copy = scratch / (slug(recorded.name) + ".json")  # names repeat across kernels (RTX_3090.json.gz)
    if not copy.exists():
        opener = gzip.open if recorded.source.endswith(".gz") else open
        with opener(recorded.source, "rb") as source, open(copy, "wb") as target:
            shutil.copyfileobj(source, target)
        data = json.loads(copy.read_text())
        if isinstance(data.get("problem_size"), str):
            # tunekit's recordings keep their key there as JSON, which Kernel Tuner takes for a
            # callable's name; simulation mode reads no size, so any will do
            data["problem_size"] = [1]
            copy.write_text(json.dumps(data))
    cache = kt_util.read_cache(str(copy), open_cache=False)
    names = cache["tune_params_keys"]
    tune_args = kt_util.infer_args_from_cache(cache)
    order = list(tune_args["tune_params"])  # Kernel Tuner hands restrictions values in this order
    recorded_configs = {tuple(entry[p] for p in order) for entry in cache["cache"].values()}

    def in_file(*values) -> bool:
        return values in recorded_configs

    random.seed(seed)
    np.random.seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results, _ = tune_kernel(**tune_args, cache=str(copy), simulation_mode=True,
                                 restrictions=[FunctionConstraint(in_file)], strategy=strategy,
                                 strategy_options={"max_fevals": budget}, quiet=True, seed=seed)
    times, seconds, seen, clock = [], [], set(), 0.0
    for result in results:
        config = tuple(result[p] for p in names)
        if config in seen:
            continue
        seen.add(config)
        record = recorded.lookup(dict(zip(names, config)))
        if record is None:  # outside the file (some strategies skip the restriction): a failed evaluation
            value = None
        else:
            clock += record.evaluation_seconds
            value = result.get("time")
        times.append(float(value) if isinstance(value, (int, float)) and value < 1e20 else float("inf"))
        seconds.append(clock)
        if len(times) == budget:
            break
    return Run(recorded.name, f"kt:{strategy}", seed, budget, np.array(times), np.array(seconds))


_spaces: dict[str, RecordedSpace] = {}


def _kt_task(path: str, strategy: str, seed: int, budget: int, scratch: str) -> Run:
    """One Kernel Tuner run in a worker process (each worker reads a file once)."""
    from tunekit.recorded import read_space

    if path not in _spaces:
        _spaces[path] = read_space(path)
    return kernel_tuner_run(_spaces[path], strategy, seed, budget, Path(scratch) / f"worker-{os.getpid()}")


def rescore(out: Path) -> Comparison:
    """The comparison a finished run wrote to ``out`` (``run.json``, ``summary.csv`` for the
    budgets, ``curves.csv`` for every evaluation), to be scored again with the current metrics."""
    meta = json.loads((out / "run.json").read_text())
    spaces = {space.name: space for space in (read_space(path) for path in meta["spaces"])}
    with open(out / "summary.csv", newline="") as handle:
        budgets = {row["space"]: int(row["budget"]) for row in csv.DictReader(handle)}
    strategies = list(meta["tunekit"]) + [f"kt:{name}" for name in meta["kernel_tuner_strategies"]]
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
    comparison = run_comparison(paths, ours, seeds, args.budget, jobs=args.jobs)
    with tempfile.TemporaryDirectory() as scratch, ProcessPoolExecutor(args.jobs,
                                                                         mp_context=get_context("spawn")) as pool:
        for name, recorded in comparison.spaces.items():
            futures = [pool.submit(_kt_task, recorded.source, strategy, seed, comparison.budgets[name],
                                   scratch)
                       for strategy in theirs for seed in range(seeds)]
            comparison.runs.extend(future.result() for future in futures)
            print(f"{name}: Kernel Tuner done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    comparison.strategies += [f"kt:{s}" for s in theirs]
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
