"""``transfer_cv.py``'s report (the leave-kernel-out choice and the evaluations to within 5 %
with the store beside those without it) for runs the protocol made: ``leave_family_out.py
--transfer LABEL`` replays a design with the store as ``"LABEL + store"``, and keeps configs in
flight where the design names a ``"batch"``, which ``transfer_cv.py``'s own replays do not.

    python experiments/transfer_from_protocol.py --runs OUT/runs.jsonl.gz --base BASE \\
        --candidate BASE --candidate OTHER --seeds 5 --out DIR

``--base`` is the design whose runs without the store are the comparison; each ``--candidate``
names a design whose ``"+ store"`` runs are compared (``--base`` itself among them, as what
ships). Only seeds below ``--seeds`` and runs of ``--budget`` are read, and every label must have
the same tunings (spaces and seeds), else it stops naming the label that lacks some. Writes
``DIR/runs.jsonl.gz`` (the runs relabelled as ``transfer_cv.py`` labels them) and
``DIR/report.md``, and prints the report.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learned_search import read_runs  # noqa: E402
from transfer_cv import WITHOUT, report  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, required=True, help="a protocol's runs file")
    parser.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parent / "corpus" / "v2.json")
    parser.add_argument("--base", required=True, help="the design whose runs without the store are compared")
    parser.add_argument("--candidate", action="append", required=True, help="a design with '+ store' runs; repeat")
    parser.add_argument("--seeds", type=int, required=True)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    relabel = {args.base: WITHOUT, **{f"{label} + store": label for label in args.candidate}}
    kept = [{**run, "strategy": relabel[run["strategy"]]} for run in read_runs(args.runs)
            if run["strategy"] in relabel and run["seed"] < args.seeds and run["budget"] == args.budget]
    tunings = {label: {(run["space"], run["seed"]) for run in kept if run["strategy"] == label}
               for label in relabel.values()}
    wanted = set().union(*tunings.values())
    for protocol_label, label in relabel.items():
        if tunings[label] != wanted:  # transfer_cv's report would drop spaces or take medians over fewer seeds
            raise SystemExit(f"{args.runs}: {protocol_label!r} lacks {len(wanted - tunings[label])} of the "
                             f"{len(wanted)} tunings (space, seed below {args.seeds}, budget {args.budget}) "
                             "the other labels have")
    args.out.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.out / "runs.jsonl.gz", "wt") as file:
        file.writelines(json.dumps(run) + "\n" for run in kept)
    text = report(args.corpus, args.out, args.candidate, args.budget, args.seeds, args.base)
    (args.out / "report.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
