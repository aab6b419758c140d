"""Replay tunings of a protocol's runs file on this machine and say whether each measures the same
times in the same order: replays over evaluations should not depend on the machine, Python or
library versions they ran on, or on which commit of a design's code, where a runs file mixes them.
A difference names the first evaluation that differs. Designs with configs in flight (a
``"batch"``) feed the forest made-up trials. Before tunekit `987f671` those came from NumPy's
``exp``, which differs on CPUs with AVX-512, and 4 of 8 of such replays made on an H100 host
differed on an AMD machine from their 31st to 42nd evaluation on; for runs made before that, a
difference says the machines differ, not that the code does. Since, 8 of 8 replay the same
(``results/in-flight/``).

    python experiments/same_replays.py --runs OUT/runs.jsonl.gz --designs experiments/corpus/designs-alignment.json \\
        --pick h200/gemv-n4k_k4k default-alignment 0 --pick h200/gemv-n4k_k4k optuna-gp 0

A transfer runs file (``transfer_cv.py``'s) takes ``--candidates FILE --base LABEL`` too: its
candidates' labels are replayed with the store holding the kernel's other shapes, and
``"without the store"`` as the base design without it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learned_search import read_runs
from leave_family_out import _spaces, _tuning, batches, contenders
from transfer_cv import WITHOUT, candidate_options

from tunekit.compare import same_kernel_elsewhere


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parent / "corpus" / "v2.json")
    parser.add_argument("--designs", type=Path, required=True, help="the designs file the runs were made with")
    parser.add_argument("--pick", nargs=3, action="append", required=True, metavar=("SPACE", "LABEL", "SEED"))
    parser.add_argument("--candidates", type=Path, help="a transfer runs file's candidates (transfer_cv.py)")
    parser.add_argument("--base", help="with --candidates: the design of --designs they change")
    args = parser.parse_args()
    if bool(args.candidates) != bool(args.base):
        parser.error("--candidates and --base go together")
    picked = {(space, label, int(seed)) for space, label, seed in args.pick}
    recorded = {(r["space"], r["strategy"], r["seed"]): r for r in read_runs(args.runs)
                if (r["space"], r["strategy"], r["seed"]) in picked}
    stored = " + store"  # a label replayed with the store holding the kernel's other shapes
    designs = json.loads(args.designs.read_text())
    transfer: dict[str, tuple[str, str]] = {}
    if args.candidates:
        made = candidate_options(designs[args.base], json.loads(args.candidates.read_text()))
        transfer = {label: (strategy, json.dumps(options)) for label, (strategy, options) in made.items()}
        transfer[WITHOUT] = (designs[args.base]["strategy"], json.dumps(designs[args.base]["options"]))
    labels = {**contenders(designs, sorted({label.removesuffix(stored) for _, label, _ in picked
                                            if label not in transfer})), **transfer}
    try:
        batch_of = batches(designs)
    except ValueError as error:
        parser.error(f"--designs {args.designs}: {error}")
    elsewhere = same_kernel_elsewhere(_spaces(str(args.corpus)))
    same = 0
    for space, label, seed in sorted(picked):
        if (space, label, seed) not in recorded:
            print(f"{space} {label} seed {seed}: not in {args.runs}")
            continue
        run = recorded[space, label, seed]
        with_store = label.endswith(stored) or (label in transfer and label != WITHOUT)
        history = tuple(elsewhere[space]) if with_store else ()
        design = label.removesuffix(stored)
        batch = batch_of.get(design, 1)
        if run.get("batch", batch) != batch:  # lines written before runs recorded their batch have none
            print(f"{space} {label} seed {seed}: recorded with {run['batch']} in flight (asks told together "
                  f"before 36757e4), replayed as {args.designs} says, {batch}")
        again = _tuning(str(args.corpus), space, label, *labels[design], seed, run["budget"], history, batch)
        match = again["times_ms"] == run["times_ms"]
        same += match
        first = next((n for n, (a, b) in enumerate(zip(again["times_ms"], run["times_ms"]), 1) if a != b),
                     min(len(again["times_ms"]), len(run["times_ms"])) + 1)
        print(f"{space} {label} seed {seed}: {'the same' if match else f'DIFFERENT from evaluation {first}'} "
              f"({len(again['times_ms'])} evaluations, recorded {len(run['times_ms'])})", flush=True)
    print(f"{same} of {len(picked)} the same")


if __name__ == "__main__":
    main()
