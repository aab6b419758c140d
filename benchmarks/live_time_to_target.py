"""When each live tuning of ``live_gemm.py`` first measured a config within 2 % of the recorded
optimum: seconds from the start of its run and evaluations, read from the stores it kept.

    python benchmarks/live_time_to_target.py benchmarks/results/h200-live/run2-*.db.gz
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import tempfile
from pathlib import Path

import tunekit
from tunekit.kernels import shipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stores", nargs="+", help="store files, gzipped or not")
    parser.add_argument("--shape", default="square")
    parser.add_argument("--within", type=float, default=1.02)
    args = parser.parse_args()
    optimum = shipped.load("matmul", args.shape).optimum_ms
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.stores:
            path = Path(name)
            if path.suffix == ".gz":  # a copy: tunekit opens stores it may write to
                copy = Path(scratch) / path.stem
                with gzip.open(path) as source, copy.open("wb") as target:
                    shutil.copyfileobj(source, target)
                path = copy
            store = tunekit.ResultsStore(path)
            (run,) = store.runs()
            measured = [r for r in store.rows(run_id=run["run_id"]) if r["source"] == "measured"]
            reached = next((i for i, r in enumerate(measured, 1)
                            if r["median_ms"] is not None and r["median_ms"] <= optimum * args.within), None)
            when = "never"
            if reached:
                when = f"{measured[reached - 1]['created_at'] - run['started_at']:.1f} s, {reached} evaluations"
            print(f"{Path(name).name}: {len(measured)} evaluations; first within {args.within:g} x the optimum: {when}")


if __name__ == "__main__":
    main()
