"""How far the seeds alone move a protocol round's figures: a paired bootstrap over seeds of the
difference between two labels' runs on every space of a corpus.

Each replicate draws the seeds (with replacement) once and takes those seeds' runs of both labels
on every space, as the protocol's figures take every space's runs of each seed. It prints the
observed difference of each figure (runs within 2 %, geometric mean of best / optimum at each
checkpoint, and the selection score, the mean over spaces of log best / optimum averaged over the
checkpoints: lower is better) and its 95 % percentile interval.

    python experiments/seed_bootstrap.py --runs OUT/runs.jsonl.gz --corpus experiments/corpus/v2.json \\
        --label default-gp15-stalled50-c512-local-forest --against default-gp15-stalled50-c512
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learned_search import Table, as_run, read_runs
from leave_family_out import _spaces, checkpoints

from tunekit.metrics import SpaceStats


def per_run(table: Table, spaces: list[str], label: str, seeds: int) -> dict[str, np.ndarray]:
    """Each (space, seed) run's figures of ``label``: within 2 % (0 or 1) and log best / optimum at
    each checkpoint (spaces x seeds, and spaces x seeds x checkpoints)."""
    points = checkpoints(table)
    within = np.empty((len(spaces), seeds))
    logs = np.empty((len(spaces), seeds, len(points)))
    for row, space in enumerate(spaces):
        runs = {run.seed: run for run in table.runs.get((space, label), [])}
        if sorted(runs) != list(range(seeds)):
            raise ValueError(f"{label} on {space}: runs of seeds {sorted(runs)}, expected 0-{seeds - 1}")
        single = Table([runs[seed] for seed in range(seeds)], table.stats, table.budget)
        within[row] = single.within(space, label)
        for column, n in enumerate(points):
            logs[row, :, column] = np.log(single.ratio_after(space, label, n))
    return {"within": within, "logs": logs}


def figures(run: dict[str, np.ndarray], chosen: np.ndarray) -> np.ndarray:
    """The figures over the runs of the ``chosen`` seeds (replicates x seeds): runs within 2 % (%),
    geomean best / optimum at each checkpoint, and the selection score."""
    within = run["within"][:, chosen].mean(axis=(0, 2)) * 100  # spaces x replicates x seeds
    logs = run["logs"][:, chosen]  # spaces x replicates x seeds x checkpoints
    geomeans = np.exp(logs.mean(axis=(0, 2)))  # replicates x checkpoints
    selection = logs.mean(axis=(2, 3)).mean(axis=0)
    return np.column_stack([within, geomeans, selection])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parent / "corpus" / "v2.json")
    parser.add_argument("--label", required=True)
    parser.add_argument("--against", required=True)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--replicates", type=int, default=2000)
    args = parser.parse_args()
    recorded = _spaces(str(args.corpus))
    spaces = sorted(recorded)
    runs = [as_run(r) for r in read_runs(args.runs) if r["strategy"] in (args.label, args.against)]
    table = Table(runs, {name: SpaceStats.of(recorded[name]) for name in spaces}, args.budget)
    label, against = (per_run(table, spaces, name, args.seeds) for name in (args.label, args.against))
    everything = np.arange(args.seeds)[None]
    drawn = np.random.default_rng(0).integers(0, args.seeds, size=(args.replicates, args.seeds))
    observed = figures(label, everything)[0] - figures(against, everything)[0]
    differences = figures(label, drawn) - figures(against, drawn)
    names = ["runs within 2 % (points)", *(f"geomean best/opt @{n}" for n in checkpoints(table)),
             "selection score (lower is better)"]
    print(f"{args.label} minus {args.against}: {len(spaces)} spaces, {args.seeds} seeds, "
          f"{args.replicates} replicates over the seeds")
    for name, value, column in zip(names, observed, differences.T):
        low, high = np.percentile(column, [2.5, 97.5])
        print(f"{name}: {value:+.4f} (95 % interval {low:+.4f} to {high:+.4f})")


if __name__ == "__main__":
    main()
