"""How far the seeds alone move a protocol round's figures: a paired bootstrap over seeds of the
difference between two labels' runs on every space of a corpus, or of one label's own figures.

Each replicate draws the seeds (with replacement) once and takes those seeds' runs of both labels
on every space, as the protocol's figures take every space's runs of each seed. It prints the
observed difference of each figure (runs within 2 %, geometric mean of best / optimum at each
checkpoint, and the selection score, the mean over spaces of log best / optimum averaged over the
checkpoints: lower is better) and its 95 % percentile interval.

    python experiments/seed_bootstrap.py --runs OUT/runs.jsonl.gz --corpus experiments/corpus/v2.json \\
        --label default-gp15-stalled50-c512-local-forest --against default-gp15-stalled50-c512

With ``--by-family``, per family of the corpus that both labels ran on (every space of it), each
label's score and the differences of the figures the report compares families by: the score
(``tunekit.metrics``, the mean over the family's spaces; higher is better) and runs within 2 %.
Whether a baseline that scores higher on a family does so by more than the seeds move it.

Without ``--against``, one label's own figures and their intervals, beside issue 31's targets:
whether a figure misses its target by more than the seeds move it. ``--larger-than-budget``, with
or without ``--against`` (not with ``--by-family``, which takes whole families), takes only the
spaces of more configs than the budget (the report's second table). ``--first-seed N`` takes seeds
N to N + ``--seeds`` - 1 instead of 0 on: a round on fresh seeds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus
from learned_search import Table, as_run, read_runs
from leave_family_out import TARGETS, _spaces, checkpoints

from tunekit.metrics import SpaceStats, score_over_evaluations


def per_run(table: Table, spaces: list[str], label: str, seeds: int, first: int = 0) -> dict[str, np.ndarray]:
    """Each (space, seed) run's figures of ``label``, ``seeds`` seeds from ``first`` on (a label run on
    more seeds is compared on these with one run on fewer): within 2 % (0 or 1), its score (NaN where
    the space's score range starts past the budget; a space's score is the mean of its runs') and
    log best / optimum at each checkpoint (spaces x seeds, and spaces x seeds x checkpoints)."""
    points = checkpoints(table)
    within = np.empty((len(spaces), seeds))
    scores = np.empty((len(spaces), seeds))
    logs = np.empty((len(spaces), seeds, len(points)))
    for row, space in enumerate(spaces):
        runs = {run.seed: run for run in table.runs.get((space, label), [])}
        wanted = range(first, first + seeds)
        missing = sorted(set(wanted) - set(runs))
        if missing:
            raise ValueError(f"{label} on {space}: no runs of seeds {missing} (runs of seeds {sorted(runs)}, "
                             f"expected {first}-{first + seeds - 1})")
        single = Table([runs[seed] for seed in wanted], table.stats, table.budget)
        within[row] = single.within(space, label)
        scores[row] = [score_over_evaluations(table.stats[space], [table.best(runs[seed])], table.budget)
                       for seed in wanted]
        for column, n in enumerate(points):
            logs[row, :, column] = np.log(single.ratio_after(space, label, n))
    return {"within": within, "scores": scores, "logs": logs}


def family_figures(run: dict[str, np.ndarray], rows: list[int], chosen: np.ndarray) -> np.ndarray:
    """The family's (``rows``: its spaces) score and runs within 2 % (%) over the runs of the
    ``chosen`` seeds (replicates x seeds), as the report gives them: the score is the mean over the
    family's spaces with a score."""
    scores = np.nanmean(run["scores"][rows][:, chosen].mean(axis=2), axis=0)  # spaces x replicates -> replicates
    within = run["within"][rows][:, chosen].mean(axis=(0, 2)) * 100
    return np.column_stack([scores, within])


def by_family(label: dict[str, np.ndarray], against: dict[str, np.ndarray], families: dict[str, list[int]],
              seeds: int, drawn: np.ndarray) -> list[str]:
    """Markdown rows: per family, both labels' scores over every seed, and the observed difference
    (label minus against) of its score and runs within 2 %, each with its 95 % percentile interval
    over the replicates ``drawn``."""
    everything = np.arange(seeds)[None]
    lines = []
    for family, rows in sorted(families.items()):
        ours, theirs = family_figures(label, rows, everything)[0], family_figures(against, rows, everything)[0]
        observed = ours - theirs
        differences = family_figures(label, rows, drawn) - family_figures(against, rows, drawn)
        cells = [f"{ours[0]:.3f}", f"{theirs[0]:.3f}"]
        for value, column, digits in zip(observed, differences.T, (3, 1)):
            low, high = np.percentile(column, [2.5, 97.5])
            cells.append(f"{value:+.{digits}f} ({low:+.{digits}f} to {high:+.{digits}f})")
        lines.append(f"| {family} | {len(rows)} | {' | '.join(cells)} |")
    return lines


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
    parser.add_argument("--against", help="the label to compare with (without it: --label's own figures)")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="the seeds are this one and the next --seeds - 1 (a round on fresh seeds)")
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--replicates", type=int, default=2000)
    parser.add_argument("--by-family", action="store_true",
                        help="per family that both labels ran on: both labels' scores, and the differences of "
                             "the score and of runs within 2 %%")
    parser.add_argument("--larger-than-budget", action="store_true",
                        help="only the spaces of more configs than the budget")
    args = parser.parse_args()
    if args.by_family and not args.against:
        parser.error("--by-family compares two labels: add --against")
    if args.by_family and args.larger_than_budget:
        parser.error("--by-family takes every space of a family: leave out --larger-than-budget")
    recorded = _spaces(str(args.corpus))
    spaces = sorted(name for name in recorded if not args.larger_than_budget or len(recorded[name]) > args.budget)
    if not spaces:
        parser.error(f"no space of {args.corpus} has more than {args.budget} configs" if args.larger_than_budget
                     else f"{args.corpus} lists no space")
    runs = [as_run(r) for r in read_runs(args.runs)
            if r["strategy"] in (args.label, args.against) and r["space"] in spaces]
    for name in filter(None, (args.label, args.against)):
        if not any(run.strategy == name for run in runs):
            parser.error(f"{args.runs} holds no runs of {name!r} on these spaces")
    table = Table(runs, {name: SpaceStats.of(recorded[name]) for name in spaces}, args.budget)
    drawn = np.random.default_rng(0).integers(0, args.seeds, size=(args.replicates, args.seeds))
    if args.by_family:
        members: dict[str, list[str]] = {}
        for entry in corpus.entries(args.corpus):
            members.setdefault(entry.family, []).append(entry.name)
        ran = {family: names for family, names in members.items()
               if all((name, label) in table.runs for name in names for label in (args.label, args.against))}
        if not ran:
            parser.error(f"no family of {args.corpus} has runs of both {args.label!r} and {args.against!r} "
                         "on every space")
        spaces = sorted(name for names in ran.values() for name in names)
        label, against = (per_run(table, spaces, name, args.seeds, args.first_seed)
                          for name in (args.label, args.against))
        rows = {family: [spaces.index(name) for name in names] for family, names in ran.items()}
        print(f"{args.label} minus {args.against}: {args.seeds} seeds, {args.replicates} replicates over the "
              "seeds; 95 % intervals in brackets\n")
        print("| family | spaces | score | score of the other | score difference | runs within 2 % (points) |\n"
              "|---|---|---|---|---|---|")
        print("\n".join(by_family(label, against, rows, args.seeds, drawn)))
        return
    names = ["runs within 2 % (points)", *(f"geomean best/opt @{n}" for n in checkpoints(table)),
             "selection score (lower is better)"]
    everything = np.arange(args.seeds)[None]
    if not args.against:
        alone = per_run(table, spaces, args.label, args.seeds, args.first_seed)
        goals = [f">= {100 * TARGETS['within']:g}",
                 *(f"<= {TARGETS[n]}" if n in TARGETS else "" for n in checkpoints(table)), ""]
        print(f"{args.label}: {len(spaces)} spaces, {args.seeds} seeds, {args.replicates} replicates over the seeds")
        for name, value, column, goal in zip(names, figures(alone, everything)[0], figures(alone, drawn).T, goals):
            low, high = np.percentile(column, [2.5, 97.5])
            print(f"{name.replace(' (points)', ' (%)')}: {value:.4f} (95 % interval {low:.4f} to {high:.4f})"
                  + (f"; target {goal}" if goal else ""))
        return
    label, against = (per_run(table, spaces, name, args.seeds, args.first_seed)
                      for name in (args.label, args.against))
    observed = figures(label, everything)[0] - figures(against, everything)[0]
    differences = figures(label, drawn) - figures(against, drawn)
    print(f"{args.label} minus {args.against}: {len(spaces)} spaces, {args.seeds} seeds, "
          f"{args.replicates} replicates over the seeds")
    for name, value, column in zip(names, observed, differences.T):
        low, high = np.percentile(column, [2.5, 97.5])
        print(f"{name}: {value:+.4f} (95 % interval {low:+.4f} to {high:+.4f})")


if __name__ == "__main__":
    main()
