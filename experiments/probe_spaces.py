"""Designs side by side on a few named spaces of the corpus, same seeds: a look before a protocol round.

    python experiments/probe_spaces.py --designs experiments/corpus/designs-gp-stalled.json \\
        --space kt_data/convolution_milo/mi50 --space convolution_milo/W6600 --baseline optuna-gp \\
        --seeds 6 --jobs 2 --out OUT

Replays every design of ``--designs`` (and each ``--baseline`` strategy) on each ``--space`` of
``--corpus`` with seeds 0 to ``--seeds`` - 1 and the protocol's own tuning
(``leave_family_out._tuning``), appends the runs to ``OUT/runs.jsonl.gz`` (a run started again
replays only what is missing: a row is known by its space, label, seed and budget, not by its
options, so a design whose options change needs a new label or a new ``OUT``) and writes
``OUT/probe.md``: per space and label, runs within 2 % of
the optimum, geometric means of best / optimum after 20, 50 and 200 evaluations, the score (the
protocol's: ``tunekit.metrics``' score of the mean over seeds) and the median strategy CPU time
per proposed config.

A probe chooses nothing. The spaces it is run on are picked after reading results, few seeds
answer little, and the choice between designs is the protocol's
(``experiments/leave_family_out.py``), made with the probed families held out of the folds that
judge them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from leave_family_out import _spaces, batches, contenders, replay_missing  # noqa: E402
from learned_search import Table, as_run, fmt, geomean, markdown, read_runs  # noqa: E402

from tunekit.kerneltuner import is_kernel_tuner  # noqa: E402
from tunekit.metrics import SpaceStats  # noqa: E402
from tunekit.strategies import available  # noqa: E402

CHECKPOINTS = (20, 50, 200)


def probe_report(rows: list[dict], corpus: str, names: list[str], labels: list[str], budget: int) -> str:
    """The markdown table of the runs ``rows`` of ``labels`` on ``names``."""
    spaces = _spaces(corpus)
    table = Table([as_run(r) for r in rows], {n: SpaceStats.of(spaces[n]) for n in names}, budget)
    cpu: dict[tuple[str, str], dict[int, float]] = {}
    for row in rows:  # as Table keeps them: this budget's, the first copy of each seed
        if row["budget"] == budget and row["times_ms"]:
            per_config = 1000 * row["cpu_seconds"] / len(row["times_ms"])
            cpu.setdefault((row["space"], row["strategy"]), {}).setdefault(row["seed"], per_config)
    lines = []
    for name in names:
        cells = []
        for label in labels:
            if (name, label) not in table.runs:
                continue
            within = table.within(name, label)
            cells.append([label, f"{sum(within)} of {len(within)}",
                          *(fmt(geomean(table.ratio_after(name, label, n))) for n in CHECKPOINTS if n <= budget),
                          fmt(table.score(name, label)), fmt(statistics.median(cpu[name, label].values()), 1) if (name, label) in cpu else "-"])
        lines += [f"## {name}", "", *markdown(["label", "runs within 2 %",
                                                *(f"best/opt @{n}" for n in CHECKPOINTS if n <= budget),
                                                "score", "ms per config"], cells), ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(HERE / "corpus" / "v2.json"))
    parser.add_argument("--designs", type=Path, required=True)
    parser.add_argument("--space", action="append", required=True, help="a space of the corpus (repeat)")
    parser.add_argument("--baseline", action="append", default=[], help="a strategy by name (repeat)")
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    for option in ("seeds", "budget", "jobs"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} {getattr(args, option)}: expected at least 1")
    known = _spaces(args.corpus)
    unknown = [name for name in args.space if name not in known]
    if unknown:
        parser.error(f"not spaces of {args.corpus}: {', '.join(unknown)}")
    designs = json.loads(args.designs.read_text())
    clashing = [name for name in args.baseline if name in designs]
    if clashing:
        parser.error(f"--baseline {', '.join(clashing)}: the label of a design of {args.designs}")
    strategies = available()
    unknown = [name for name in args.baseline if name not in strategies and not is_kernel_tuner(name)]
    if unknown:
        parser.error(f"--baseline {', '.join(unknown)}: not a strategy ({', '.join(sorted(strategies))})")
    args.space = list(dict.fromkeys(args.space))
    labels = contenders(designs, args.baseline)
    try:
        batch_of = batches(designs)
    except ValueError as error:
        parser.error(f"--designs {args.designs}: {error}")
    target = args.out / "runs.jsonl.gz"
    args.out.mkdir(parents=True, exist_ok=True)
    done = {(r["space"], r["strategy"], r["seed"], r["budget"]) for r in read_runs(target, repair=True)}
    tasks = [(args.corpus, name, label, strategy, options, seed, args.budget, (), batch_of.get(label, 1))
             for name in args.space for label, (strategy, options) in labels.items() for seed in range(args.seeds)]
    replay_missing(tasks, target, done, args.jobs, None)
    rows = [r for r in read_runs(target) if r["seed"] < args.seeds and r["strategy"] in labels]
    text = probe_report(rows, args.corpus, args.space, list(labels), args.budget)
    (args.out / "probe.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
