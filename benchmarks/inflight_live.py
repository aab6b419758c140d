"""Live GEMM tunings of ``default`` on a GPU by two tunekits side by side: wall time, evaluations
per second, and when each first measured a config within 2 % of the best any of them measured.

    python benchmarks/inflight_live.py tune --tag new --seed 0 --evals 150 --shape square --out DIR
    python benchmarks/inflight_live.py compare DIR

``tune`` runs one tuning with the tunekit it imports (``PYTHONPATH`` picks which) from a cold
Triton cache, on the 984-config space of design.md at a shape of the shipped H200 recording, and
writes ``DIR/TAG-SHAPE-SEED.db`` (its store) and ``.json`` (wall seconds of the tuning launch,
evaluations, the winner). ``compare`` reads every pair: per shape, the best time measured by any
tuning is the target, and each tuning's seconds and evaluations to come within 2 % of it are read
from its store (seconds from the run's start). Times measured in different processes differ by
about 1 % on this GEMM (design.md: drift), so the 2 % is that of the call's best, not an optimum.
``benchmarks/run_h200_inflight.sh`` runs it in one device call.

    python benchmarks/inflight_live.py tune ... --log FILE   # tunekit's debug log, timestamped
    python benchmarks/inflight_live.py timeline FILE

``timeline`` reads such a log: where the process that times configs spent the tuning's wall time
(timing configs; the strategy's asks and tells; the rest between a trial and the next compile
result, mostly waiting for compiles), the configs in flight and wanted in flight at the asks, and
the longest waits between two timed configs with what happened in them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path


def tune(args: argparse.Namespace) -> None:
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="inflight-cache-")  # cold, before triton compiles
    if args.log:
        import logging

        handler = logging.FileHandler(args.log, mode="w")
        handler.setFormatter(logging.Formatter("%(created).4f|%(name)s|%(message)s"))
        logging.getLogger("tunekit").addHandler(handler)
        logging.getLogger("tunekit").setLevel(logging.DEBUG)
    import torch
    import triton

    import tunekit
    from tunekit.kernels import matmul, shipped

    (row,) = [r for r in shipped.index()["spaces"] if (r["kernel"], r["shape"]) == ("matmul", args.shape)]
    m, n, k = row["dims"]
    a, b, c = matmul.inputs(m, n, k, dtype=torch.bfloat16, device="cuda")
    name = f"{args.tag}-{args.shape}-{args.seed}"
    store = Path(args.out) / f"{name}.db"
    kernel = tunekit.autotune(space=matmul.space(), key=["M", "N", "K"], strategy="default", seed=args.seed,
                              budget=tunekit.Budget(evals=args.evals), store=str(store), warmup=5,
                              rep=25)(triton.jit(matmul.matmul_kernel.fn))
    start = time.perf_counter()
    matmul.launch(kernel, a, b, c)
    torch.cuda.synchronize()
    wall = time.perf_counter() - start
    measured = [t for t in kernel.trials if t.source == "measured"]
    result = {"tag": args.tag, "shape": args.shape, "seed": args.seed, "tunekit": str(Path(tunekit.__file__).parent),
              "wall_seconds": wall, "evaluations": len(measured), "failed": sum(not t.ok for t in measured),
              "winner": str(kernel.best_config), "store": store.name}
    (Path(args.out) / f"{name}.json").write_text(json.dumps(result))
    print(f"{name}: {wall:.1f} s, {len(measured)} evaluations ({result['failed']} failed)", flush=True)


def _measured(store_path: Path) -> tuple[float, list[tuple[float, float]]]:
    """The run's start, and (seconds since then, median ms or inf) per measured trial, in order."""
    from tunekit import ResultsStore

    store = ResultsStore(store_path, read_only=True)
    (run,) = store.runs()
    rows = [r for r in store.rows(run_id=run["run_id"]) if r["source"] == "measured"]
    return run["started_at"], [(r["created_at"] - run["started_at"],
                                r["median_ms"] if r["median_ms"] is not None else float("inf")) for r in rows]


def compare(args: argparse.Namespace) -> None:
    folder = Path(args.folder)
    tunings = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    for shape in sorted({t["shape"] for t in tunings}):
        here = [t for t in tunings if t["shape"] == shape]
        trials = {t["store"]: _measured(folder / t["store"])[1] for t in here}
        best = min(ms for rows in trials.values() for _, ms in rows)
        print(f"matmul {shape}: {len(here)} tunings; target: within {args.within:g} x {best:.4f} ms, the best "
              "any of them measured")
        for t in here:
            rows = trials[t["store"]]
            reached = next((i for i, (_, ms) in enumerate(rows) if ms <= best * args.within), None)
            t["evals_to_target"] = None if reached is None else reached + 1
            t["seconds_to_target"] = None if reached is None else rows[reached][0]
            t["best_over_target"] = min(ms for _, ms in rows) / best
            t["evals_per_second"] = t["evaluations"] / t["wall_seconds"]
        print(f"  {'tag':<6} {'seed':>4} {'wall s':>7} {'evals':>6} {'evals/s':>8} {'to 2 %: s':>10} "
              f"{'evals':>6} {'best/target':>12}")
        for t in sorted(here, key=lambda t: (t["tag"], t["seed"])):
            seconds = "never" if t["seconds_to_target"] is None else f"{t['seconds_to_target']:.1f}"
            evals = "-" if t["evals_to_target"] is None else str(t["evals_to_target"])
            print(f"  {t['tag']:<6} {t['seed']:>4} {t['wall_seconds']:7.1f} {t['evaluations']:6d} "
                  f"{t['evals_per_second']:8.2f} {seconds:>10} {evals:>6} {t['best_over_target']:12.3f}")
        tags = sorted({t["tag"] for t in here})
        for tag in tags:
            mine = [t for t in here if t["tag"] == tag]
            reached = [t for t in mine if t["seconds_to_target"] is not None]
            to_target = (f"{statistics.median(t['seconds_to_target'] for t in reached):.1f} s and "
                         f"{statistics.median(t['evals_to_target'] for t in reached):.0f} evaluations "
                         f"(median of the {len(reached)} of {len(mine)} that reached it)" if reached else "never")
            print(f"  {tag}: median wall {statistics.median(t['wall_seconds'] for t in mine):.1f} s, "
                  f"{statistics.median(t['evals_per_second'] for t in mine):.2f} evaluations/s; to the target "
                  f"{to_target}")
        if len(tags) == 2:  # paired by seed: the first tag's over the second's
            first, second = ({t["seed"]: t for t in here if t["tag"] == tag} for tag in tags)
            seeds = sorted(set(first) & set(second))
            walls = [first[s]["wall_seconds"] / second[s]["wall_seconds"] for s in seeds]
            rates = [first[s]["evals_per_second"] / second[s]["evals_per_second"] for s in seeds]
            print(f"  {tags[0]} over {tags[1]}, paired by seed ({len(seeds)}): wall "
                  f"{', '.join(f'{w:.2f}' for w in walls)} (median {statistics.median(walls):.2f}); evaluations/s "
                  f"{', '.join(f'{r:.2f}' for r in rates)} (median {statistics.median(rates):.2f})")


def _events(log: Path) -> list[tuple[float, str, str]]:
    """(seconds, kind, message) per line of a ``tune --log`` file: kind "compiled" (a compile's
    result taken: its timing starts), "trial" (a config's trial), "ask"/"tell"/"start" (the
    strategy's calls, the line written as each ends, its milliseconds in the message), "pace"
    (the configs in flight at an ask, and how many it asks for), "other"."""
    events = []
    for line in log.read_text().splitlines():
        stamp, _, rest = line.partition("|")
        name, _, message = rest.partition("|")
        try:
            seconds = float(stamp)
        except ValueError:  # a message's second line
            continue
        if name == "tunekit.search" and message.startswith("strategy "):
            kind = message.split()[1].rstrip(":")
        elif name == "tunekit.search" and message.startswith("in flight "):
            kind = "pace"
        elif ": compiled " in message:
            kind = "compiled"
        elif name == "tunekit.session" and "}: [" in message:  # "KERNEL {KEY}: [CONFIG] ..."
            kind = "trial"
        else:
            kind = "other"
        events.append((seconds, kind, message))
    return events


def timeline(args: argparse.Namespace) -> None:
    events = _events(Path(args.log))
    compiled = [i for i, e in enumerate(events) if e[1] == "compiled"]
    if not compiled:
        raise SystemExit(f"{args.log}: no compile results logged (was it a tune --log on a GPU?)")
    start, end = events[0][0], events[-1][0]
    strategy_ms = {kind: [float(m.split(": ")[-1].split()[0]) for _, k, m in events if k == kind]
                   for kind in ("start", "ask", "tell")}
    timing = waits = 0.0
    gaps = []
    for before, after in zip(compiled, compiled[1:] + [None]):
        trial = next((i for i in range(before, after or len(events)) if events[i][1] == "trial"), None)
        if trial is None:
            continue
        timing += events[trial][0] - events[before][0]
        if after is None:
            continue
        between = events[trial + 1:after]
        strategy = sum(float(m.split(": ")[-1].split()[0]) for _, k, m in between if k in ("ask", "tell")) / 1e3
        wait = events[after][0] - events[trial][0] - strategy
        waits += wait
        gaps.append((wait, events[trial][0] - start, strategy, [m for _, k, m in between if k == "other"]))
    print(f"{args.log}: {end - start:.2f} s from the first line to the last; {len(compiled)} compile results taken")
    print(f"  timing configs (compile result taken to trial logged): {timing:.2f} s")
    for kind, values in strategy_ms.items():
        if values:
            print(f"  strategy {kind}: {len(values)} calls, {sum(values) / 1e3:.2f} s, median "
                  f"{statistics.median(values):.1f} ms, largest {max(values):.1f} ms")
    print(f"  between a trial and the next compile result, less the strategy's calls: {waits:.2f} s")
    # "in flight N, wanted W; asking for M", at every ask after the first
    paced = [(int(m.split()[2].rstrip(",")), int(m.split()[4].rstrip(";"))) for _, k, m in events if k == "pace"]
    if len(paced) > 1:
        flight, wanted = [n for n, _ in paced[1:]], [w for _, w in paced[1:]]
        print(f"  at the {len(flight)} asks after the first: configs in flight median {statistics.median(flight):g} "
              f"({min(flight)} to {max(flight)}), wanted median {statistics.median(wanted):g} "
              f"({min(wanted)} to {max(wanted)})")
    late = [at - start for at, kind, message in events if kind == "other" and "the configs in flight are late" in message]
    if late:
        print(f"  said the configs in flight were late {len(late)} times, first at {late[0]:.2f} s")
    for wait, at, strategy, others in sorted(gaps, reverse=True)[:args.longest]:
        print(f"  at {at:7.2f} s: {wait:.3f} s waiting (strategy {1e3 * strategy:.1f} ms)"
              + "".join(f"\n      {m[:160]}" for m in others[:4]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("tune", help="one tuning with the tunekit imported")
    one.add_argument("--tag", required=True, help="which tunekit this is (names the files)")
    one.add_argument("--seed", type=int, default=0)
    one.add_argument("--evals", type=int, default=150)
    one.add_argument("--shape", default="square", help="a matmul shape of the shipped H200 recording")
    one.add_argument("--out", required=True)
    one.add_argument("--log", help="write tunekit's debug log here, timestamped (for timeline)")
    table = commands.add_parser("compare", help="the table of every tuning in a folder")
    table.add_argument("folder")
    table.add_argument("--within", type=float, default=1.02)
    lines = commands.add_parser("timeline", help="where a tuning's wall time went, from its --log")
    lines.add_argument("log")
    lines.add_argument("--longest", type=int, default=8, help="waits to list")
    args = parser.parse_args()
    {"tune": tune, "compare": compare, "timeline": timeline}[args.command](args)


if __name__ == "__main__":
    main()
