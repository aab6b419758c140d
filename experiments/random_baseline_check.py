"""Does random search score 0 against the calculated random-search baseline?

It should, if the baseline is what it claims to be. This replays tunekit's random search on
recorded spaces and scores it against two baselines: the time at the expected rank of the best
draw (autotuning_methodology's calculated baseline) and the expected best time (tunekit's, see
``tunekit/metrics.py``). Strategies' curves are averaged over seeds, so only the second matches.

    python experiments/random_baseline_check.py [--seeds 300] [--jobs 2] [--space FILE ...]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

from tunekit import metrics
from tunekit.compare import _best, _score, run_comparison

SHARED = Path(os.environ.get("TUNEKIT_SHARED_SPACES", Path(__file__).resolve().parents[2] / "shared" / "spaces")) / "kerneltuner"
DEFAULT_SPACES = ["kt_data/pnpoly/RTX_3090.json.gz", "kt_data/convolution/RTX_3090.json.gz",
                  "kt_data/gemm/RTX_3090.json.gz", "convolution_milo/A100.json.gz"]


def time_at_expected_rank(stats: metrics.SpaceStats, evaluations: np.ndarray) -> np.ndarray:
    """The rank-based baseline: the time at rank (N + 1) / (M + 1), failures ranked last."""
    ranked = np.concatenate([stats.sorted_times, np.full(stats.n_total - len(stats.sorted_times), stats.worst)])
    rank = (stats.n_total + 1) / (np.asarray(evaluations, dtype=float) + 1)
    return np.interp(rank - 1, np.arange(stats.n_total), ranked)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--space", action="append")
    parser.add_argument("--seeds", type=int, default=300)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    paths = args.space or [str(SHARED / p) for p in DEFAULT_SPACES]
    comparison = run_comparison(paths, ["random"], args.seeds, jobs=args.jobs)
    print(f"random search, {args.seeds} seeds, scored over each space's score range (evaluations)")
    print(f"{'space':40s} {'expected time':>14s} {'time at expected rank':>22s}")
    for space, stats in comparison.stats.items():
        points = metrics.evaluation_points(stats)
        runs = comparison.runs_of(space, "random")
        mean = np.mean([metrics.curve_at(_best(r, stats), points, stats.worst) for r in runs], axis=0)
        by_rank = metrics.standardised_score(time_at_expected_rank(stats, points), mean, stats.optimum)
        print(f"{space:40s} {_score(comparison, space, 'random'):14.3f} {by_rank:22.3f}")


if __name__ == "__main__":
    main()
