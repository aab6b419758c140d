"""The transfer comparison of ``transfer_cv.py`` with a store of earlier tunings' measurements
instead of whole recorded spaces, in one command:

    python experiments/measured_store.py --corpus experiments/corpus/v2.json \\
        --designs experiments/corpus/designs-local-order.json --base default-gp15-stalled50-c512-local-forest \\
        --candidates experiments/corpus/transfer-designs-worst.json --seeds 5 --jobs 2 --out DIR

``transfer_cv.py``'s store holds every config of the kernel's other shapes, since the corpus
records whole spaces. A user's store holds what earlier tunings measured. Here, for each kernel
recorded at several shapes and each seed, every shape is tuned first by ``--base`` with an empty
store (``"without the store"``); then each shape is tuned by each candidate with the store
holding, of every other shape, the trials of the configs that shape's tuning measured (failures
too, as a store keeps them), at the same seed. The other shapes' tunings did not use the store
themselves: a store filled shape by shape, each tuning using the last, was not modelled.

Each tuning is appended to ``OUT/runs.jsonl.gz`` as ``transfer_cv.py`` writes its own, and
``OUT/report.md`` is ``transfer_cv.py``'s report of them (its per-kernel choice included).
The ``without the store`` runs are the same tunings as ``transfer_cv.py``'s.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from leave_family_out import _spaces
from learned_search import read_runs
from transfer_cv import WITHOUT, candidate_options, report

from tunekit.compare import replay_search, same_kernel_elsewhere
from tunekit.config import config_json
from tunekit.strategy import make_strategy
from tunekit.trial import Trial


def _line(space: str, label: str, seed: int, budget: int, trials: list[Trial], cpu_seconds: float,
          seconds: list[float]) -> dict:
    """A runs.jsonl.gz line, as ``leave_family_out._tuning`` writes it."""
    times = [trial.time_ms for trial in trials]
    return {"space": space, "strategy": label, "seed": seed, "budget": budget,
            "times_ms": [t if math.isfinite(t) else None for t in times], "seconds": seconds,
            "cpu_seconds": cpu_seconds}


def kernel_tunings(manifest: str, shapes: tuple[str, ...], base: tuple[str, str],
                   candidates: dict[str, tuple[str, str]], seed: int, budget: int) -> list[dict]:
    """Every shape of one kernel tuned by ``base`` with an empty store, then by each candidate
    with the store holding what the base's tunings of the other shapes measured."""
    spaces = _spaces(manifest)
    measured: dict[str, list[Trial]] = {}
    lines = []
    for name in shapes:
        started = time.process_time()
        result = replay_search(spaces[name], make_strategy(base[0], **json.loads(base[1])), seed, budget)
        cpu = time.process_time() - started
        trials = [step.trial for step in result.steps]
        lines.append(_line(name, WITHOUT, seed, budget, trials, cpu, [step.seconds for step in result.steps]))
        tried = {config_json(trial.config) for trial in trials}
        measured[name] = [t for t in spaces[name].trials() if config_json(t.config) in tried]
    for name in shapes:
        stored = [trial for other in shapes if other != name for trial in measured[other]]
        for label, (strategy, options) in candidates.items():
            started = time.process_time()
            result = replay_search(spaces[name], make_strategy(strategy, **json.loads(options)), seed, budget,
                                   stored=stored)
            cpu = time.process_time() - started
            lines.append(_line(name, label, seed, budget, [step.trial for step in result.steps], cpu,
                               [step.seconds for step in result.steps]))
    return lines


def replay_all(manifest: Path, base: dict, candidates: dict[str, tuple[str, dict]], out: Path, seeds: int,
               budget: int, jobs: int) -> None:
    """Replay every (kernel, seed) that ``out/runs.jsonl.gz`` lacks a line of."""
    import gzip

    target = out / "runs.jsonl.gz"
    out.mkdir(parents=True, exist_ok=True)
    done = {(r["space"], r["strategy"], r["seed"]) for r in read_runs(target, repair=True)}
    spaces = _spaces(str(manifest))
    elsewhere = same_kernel_elsewhere(spaces)
    kernels: dict[str, list[str]] = {}
    for name in sorted(spaces):
        if elsewhere[name]:
            kernels.setdefault(spaces[name].kernel_name, []).append(name)
    labels = {label: (strategy, json.dumps(options, sort_keys=True)) for label, (strategy, options) in candidates.items()}
    base_spec = (base["strategy"], json.dumps(base["options"], sort_keys=True))
    tasks = [(str(manifest), tuple(shapes), base_spec, labels, seed, budget)
             for shapes in kernels.values() for seed in range(seeds)
             if not all((name, label, seed) in done for name in shapes for label in [WITHOUT, *labels])]
    print(f"{len(tasks)} (kernel, seed) tasks to replay", flush=True)
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
        for lines in pool.map(kernel_tunings, *zip(*tasks)) if tasks else ():
            with gzip.open(target, "at") as runs:
                runs.writelines(json.dumps(line) + "\n" for line in lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parent / "corpus" / "v2.json")
    parser.add_argument("--designs", type=Path, required=True, help="the protocol's designs file")
    parser.add_argument("--base", required=True, help="the design of --designs that tunes without the store")
    parser.add_argument("--candidates", type=Path, required=True, help="transfer_cv.py's candidates file")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--same-as", type=Path, metavar="RUNS",
                        help="a transfer_cv.py runs file: say how many tunings without the store measure its times")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    designs = json.loads(args.designs.read_text())
    if args.base not in designs:
        parser.error(f"--base {args.base}: not a design of {args.designs}")
    try:
        candidates = candidate_options(designs[args.base], json.loads(args.candidates.read_text()))
    except ValueError as error:
        parser.error(str(error))
    if not args.report_only:
        replay_all(args.corpus, designs[args.base], candidates, args.out, args.seeds, args.budget, args.jobs)
    if args.same_as:
        theirs = {(r["space"], r["seed"]): r["times_ms"] for r in read_runs(args.same_as) if r["strategy"] == WITHOUT}
        ours = [r for r in read_runs(args.out / "runs.jsonl.gz") if r["strategy"] == WITHOUT]
        compared = [r for r in ours if (r["space"], r["seed"]) in theirs]
        same = sum(theirs[r["space"], r["seed"]] == r["times_ms"] for r in compared)
        print(f"without the store: {same} of {len(compared)} tunings measure the times of {args.same_as}'s")
    text = report(args.corpus, args.out, list(candidates), args.budget, args.seeds, args.base)
    text = text.replace("# Transfer:", "# Transfer with a store of earlier tunings' measurements:", 1)
    (args.out / "report.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
