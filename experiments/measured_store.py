"""The transfer comparison of ``transfer_cv.py`` with a store of earlier tunings' measurements
instead of whole recorded spaces, in one command:

    python experiments/measured_store.py --corpus experiments/corpus/v2.json \\
        --designs experiments/corpus/designs-local-order.json --base default-gp15-stalled50-c512-local-forest \\
        --candidates experiments/corpus/transfer-designs-worst.json --seeds 5 --store-budget 64 --jobs 2 --out DIR

``transfer_cv.py``'s store holds every config of the kernel's other shapes, since the corpus
records whole spaces. A user's store holds what earlier tunings measured. Here, for each kernel
recorded at several shapes and each seed, every shape is tuned first by ``--base`` with an empty
store within ``--store-budget`` evaluations (64: ``tunekit.autotune``'s default budget for a
Space); then each shape is tuned by ``--base`` with an empty store and by each candidate with the
store holding, of every other shape of the kernel (``same_kernel_elsewhere``), the trials of the
configs that shape's first tuning measured (failures too, as a store keeps them), within
``--budget``, at the same seed. The other shapes' tunings did not use the store themselves: a
store filled shape by shape, each tuning using the last, is not modelled.

Each tuning is appended to ``OUT/runs.jsonl.gz`` as ``transfer_cv.py`` writes its own, with
``"store": "measured within N evaluations"``; an OUT holding runs of another store, budget or
more seeds is refused. ``OUT/report.md`` is ``transfer_cv.py``'s report of them (its per-kernel
choice included), followed by how many configs the stores held. ``--same-as RUNS`` says how many
tunings without the store measure the times of a ``transfer_cv.py`` runs file's.
"""

from __future__ import annotations

import argparse
import gzip
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
from transfer_cv import WITHOUT, base_and_candidates, report

from tunekit.compare import replay_search, same_kernel_elsewhere
from tunekit.config import config_json
from tunekit.options import DEFAULT_SEARCH_BUDGET
from tunekit.strategy import make_strategy
from tunekit.trial import Trial

#: The ``"strategy"`` of the lines of ``stores.jsonl.gz``: how many configs a store held.
STORED = "stored configs"


def _line(space: str, label: str, seed: int, budget: int, store: str, steps: list, cpu_seconds: float) -> dict:
    """A runs.jsonl.gz line, as ``leave_family_out._tuning`` writes it (one config asked at a
    time: no ``"batch"``, which readers take as 1), and which store it had."""
    times = [step.trial.time_ms for step in steps]
    return {"space": space, "strategy": label, "seed": seed, "budget": budget, "store": store,
            "times_ms": [t if math.isfinite(t) else None for t in times],
            "seconds": [step.seconds for step in steps], "cpu_seconds": cpu_seconds}


def _timed(recorded, strategy: tuple[str, str], seed: int, budget: int, stored: list[Trial]) -> tuple[list, float]:
    """One tuning's steps and the CPU seconds of its search alone (the strategy is made, and the
    Space built, before the clock starts, as ``leave_family_out._tuning`` times it)."""
    made = make_strategy(strategy[0], **json.loads(strategy[1]))
    recorded.space()
    started = time.process_time()
    result = replay_search(recorded, made, seed, budget, stored=stored)
    return result.steps, time.process_time() - started


def store_name(store_budget: int) -> str:
    """What a line's ``"store"`` says its store held."""
    return f"measured within {store_budget} evaluations"


def kernel_tunings(manifest: str, shapes: tuple[str, ...], base: tuple[str, str],
                   candidates: dict[str, tuple[str, str]], seed: int, budget: int, store_budget: int) -> list[dict]:
    """Every shape of one kernel tuned by ``base`` with an empty store within ``store_budget``
    (what the store will hold), then by ``base`` with an empty store and by each candidate with the
    store holding what those first tunings measured at the other shapes, within ``budget``. Also
    one line per shape (``"strategy": STORED``) giving how many configs its store held
    and how many of them were measured at every other shape."""
    spaces = _spaces(manifest)
    elsewhere = same_kernel_elsewhere({name: spaces[name] for name in shapes})
    store = store_name(store_budget)
    measured: dict[str, list[Trial]] = {}
    for name in shapes:
        steps, _ = _timed(spaces[name], base, seed, store_budget, [])
        tried = {config_json(step.trial.config) for step in steps}
        measured[name] = [t for t in spaces[name].trials() if config_json(t.config) in tried]
    lines = []
    for name in shapes:
        steps, cpu = _timed(spaces[name], base, seed, budget, [])
        lines.append(_line(name, WITHOUT, seed, budget, store, steps, cpu))
        stored = [trial for other in elsewhere[name] for trial in measured[other]]
        for label, strategy in candidates.items():
            steps, cpu = _timed(spaces[name], strategy, seed, budget, stored)
            lines.append(_line(name, label, seed, budget, store, steps, cpu))
        at_every = set.intersection(*({config_json(t.config) for t in measured[o]} for o in elsewhere[name]))
        lines.append({"space": name, "strategy": STORED, "seed": seed, "budget": budget, "store": store,
                      "configs": len({config_json(t.config) for t in stored}), "at_every_shape": len(at_every),
                      "space_size": len(spaces[name])})
    return lines


def replay_all(manifest: Path, base: dict, candidates: dict[str, tuple[str, dict]], out: Path, seeds: int,
               budget: int, store_budget: int, jobs: int) -> None:
    """Replay every (kernel, seed) that ``out/runs.jsonl.gz`` lacks a line of (and write what its
    stores held to ``out/stores.jsonl.gz``); ``ValueError`` for an OUT holding runs of another
    store, budget or more seeds."""
    target = out / "runs.jsonl.gz"
    out.mkdir(parents=True, exist_ok=True)
    store = store_name(store_budget)
    lines = read_runs(target, repair=True)
    other = [line for line in lines if line.get("store") != store or line["budget"] != budget or line["seed"] >= seeds]
    if other:
        raise ValueError(f"{target} holds {len(other)} runs of another store, budget or seed than {store}, budget "
                         f"{budget}, seeds 0-{seeds - 1} (the first: {other[0]['space']} {other[0]['strategy']} seed "
                         f"{other[0]['seed']}, store {other[0].get('store')!r}): give another --out")
    done = {(line["space"], line["strategy"], line["seed"]) for line in lines}
    spaces = _spaces(str(manifest))
    elsewhere = same_kernel_elsewhere(spaces)
    kernels = sorted({tuple(sorted([name, *elsewhere[name]])) for name in spaces if elsewhere[name]})
    labels = {label: (strategy, json.dumps(options, sort_keys=True)) for label, (strategy, options) in candidates.items()}
    base_spec = (base["strategy"], json.dumps(base["options"], sort_keys=True))
    tasks = [(str(manifest), shapes, base_spec, labels, seed, budget, store_budget)
             for shapes in kernels for seed in range(seeds)
             if not all((name, label, seed) in done for name in shapes for label in [WITHOUT, *labels])]
    print(f"{len(tasks)} (kernel, seed) tasks to replay", flush=True)
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
        for made in pool.map(kernel_tunings, *zip(*tasks)) if tasks else ():
            new = [line for line in made if (line["space"], line["strategy"], line["seed"]) not in done]
            for path, kept in ((out / "stores.jsonl.gz", [line for line in new if line["strategy"] == STORED]),
                               (target, [line for line in new if line["strategy"] != STORED])):
                with gzip.open(path, "at") as runs:
                    runs.writelines(json.dumps(line) + "\n" for line in kept)


def stored_sizes(out: Path) -> list[str]:
    """Markdown lines: per kernel, the median over its shapes and seeds of the configs each store
    held, of those measured at every other shape, and of the space's size."""
    import statistics

    from learned_search import markdown

    by_kernel: dict[str, list[dict]] = {}
    for line in read_runs(out / "stores.jsonl.gz"):
        if line["strategy"] == STORED:
            by_kernel.setdefault(line["space"].rsplit("-", 1)[0], []).append(line)
    rows = [[kernel, *(f"{statistics.median(line[key] for line in found):g}"
                       for key in ("configs", "at_every_shape", "space_size"))]
            for kernel, found in sorted(by_kernel.items())]
    return ["", "## What the stores held (median over shapes and seeds)", "",
            *markdown(["spaces", "configs in the store", "measured at every other shape", "configs of the space"],
                      rows)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parent / "corpus" / "v2.json")
    parser.add_argument("--designs", type=Path, required=True, help="the protocol's designs file")
    parser.add_argument("--base", required=True, help="the design of --designs that tunes without the store")
    parser.add_argument("--candidates", type=Path, required=True, help="transfer_cv.py's candidates file")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--store-budget", type=int, default=DEFAULT_SEARCH_BUDGET.evals,
                        help="evaluations of the tunings whose measurements the store holds (default: tunekit's "
                             "default budget for a Space)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--same-as", type=Path, metavar="RUNS",
                        help="a transfer_cv.py runs file: say how many tunings without the store measure its times")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    base, candidates = base_and_candidates(parser, args)
    try:
        if not args.report_only:
            replay_all(args.corpus, base, candidates, args.out, args.seeds, args.budget,
                       args.store_budget, args.jobs)
    except ValueError as error:
        parser.error(str(error))
    if args.same_as:
        theirs = {(r["space"], r["seed"]): r["times_ms"] for r in read_runs(args.same_as) if r["strategy"] == WITHOUT}
        ours = {(r["space"], r["seed"]): r["times_ms"] for r in read_runs(args.out / "runs.jsonl.gz")
                if r["strategy"] == WITHOUT}
        compared = [run for run in ours if run in theirs]
        same = sum(theirs[run] == ours[run] for run in compared)
        print(f"without the store: {same} of {len(compared)} tunings measure the times of {args.same_as}'s")
    text = report(args.corpus, args.out, list(candidates), args.budget, args.seeds, args.base)
    text = text.replace("# Transfer:", f"# Transfer with a store of earlier tunings' measurements "
                                       f"({store_name(args.store_budget)}):", 1)
    text += "\n".join(stored_sizes(args.out)) + "\n"
    (args.out / "report.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
