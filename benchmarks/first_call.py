"""The first call of a tuned kernel, tuning included: tunekit vs stock ``triton.autotune`` (issue 11).

A user meets an autotuner's cost on a kernel's first call in a new process: compiles and
benchmarks, and for tunekit also its worker processes, output checks and store. Every measured
call here runs in a fresh Python process with an empty Triton cache of its own (and a fresh
tunekit store); its time is wall-clock from before the call to after it, with
``torch.cuda.synchronize()`` on both sides, so the process's start and imports are not in it.

Contestants, ``KIND:VARIANT``:

* KIND ``vadd``: vector add, n = 4,096, the 2-config list of ``shared/bench/first_call.py``,
  decorated before the process's first CUDA tensor; ``vadd_late``: the same decorated after it
  (lazy imports, notebooks, serving frameworks); ``gemm8``: bf16 GEMM 4096³, the 8 configs of Triton's matmul tutorial; ``gemm24``, ``gemm48``:
  those 8 plus configs drawn (seed 0) from the rest of the GEMM's constrained Space
  (``matmul.space()``), 24 and 48 configs in all; ``gemm16``: 16 so.
* VARIANT ``stock``: ``triton.autotune(configs, key=...)``; ``tk``: ``tunekit.autotune(configs,
  key=..., store=FRESH)``, its defaults (isolation and output checks on); ``tk_noiso``: also
  ``isolate=False``.

The driver (the default mode) runs ``--runs`` rounds per kind, each variant once a round in a
process of its own, stock first in even rounds and last in odd ones (timings drift), and reports
per variant the median, the range, the ratio of its median to stock's and the median of the
per-round ratios. With ``--space-budget-runs N`` it then runs, N times per shape, tunekit over the
GEMM's whole Space with a 60 s budget and its default strategy: wall time of the first call,
evaluations, whether the call returned within the budget + max(1 s, 2 %), and the winner's time
in the shipped H200 recording relative to that shape's recorded optimum.

    python benchmarks/first_call.py [--kinds vadd gemm8 gemm24 gemm48] [--variants stock tk] [--runs 5]
        [--space-budget-runs 0] [--space-shapes square large_k small_k decode] [--json OUT.json]
    python benchmarks/first_call.py --one gemm8:tk                         # one process, one JSON line
    python benchmarks/first_call.py --space-budget --shape 4096 4096 4096  # one process, one JSON line
    python benchmarks/first_call.py --interpreter --kinds vadd --runs 3    # on a CPU, TRITON_INTERPRET=1

Needs a GPU, except with ``--interpreter`` (``vadd`` only): CPU tensors, Triton's interpreter,
stock timed with ``tunekit.benchmark.host_clock_bench``, tunekit with its defaults.
"""

from __future__ import annotations

import os
import sys
import tempfile

if __name__ == "__main__":
    # Every process of this script, the measured ones above all, compiles into an empty Triton
    # cache of its own; both variables must be set before triton is imported.
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="first-call-cache-")
    if "--interpreter" in sys.argv[1:]:
        os.environ["TRITON_INTERPRET"] = "1"

import argparse  # noqa: E402
import contextlib  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402

import tunekit  # noqa: E402
from tunekit.benchmark import host_clock_bench  # noqa: E402
from tunekit.config import config_json  # noqa: E402
from tunekit.kernels import matmul, shipped, vector_add  # noqa: E402
from tunekit.recorded import RecordedSpace  # noqa: E402

VADD_N = 4096
GEMM_SIZE = 4096
#: configs in each GEMM list: the tutorial's 8, then configs drawn from the Space with DRAW_SEED
GEMM_CONFIGS = {"gemm8": 8, "gemm16": 16, "gemm24": 24, "gemm48": 48}
DRAW_SEED = 0
KINDS = ("vadd", "vadd_late", *GEMM_CONFIGS)
#: tunekit.autotune's options per variant beside configs, key and a fresh store; None: stock
VARIANTS: dict[str, dict[str, Any] | None] = {
    "stock": None, "tk": {}, "tk_noiso": {"isolate": False},
    # what each part of tunekit's first call costs (the anatomy of the default ``tk``)
    "tk_nocheck": {"check": False}, "tk_fin1": {"finalists": 1},
}
SPACE_KEY = ["M", "N", "K"]


# -- one measured process ------------------------------------------------------------------


def vadd_configs() -> list[triton.Config]:
    """The 2-config list of the reference script."""
    return [triton.Config({"BLOCK": 1024}, num_warps=4), triton.Config({"BLOCK": 512}, num_warps=4)]


def gemm_configs(total: int, seed: int = DRAW_SEED) -> list[triton.Config]:
    """The tutorial's 8 configs, then ``total - 8`` others drawn (seeded) from the constrained Space."""
    tutorial = matmul.tutorial_configs()
    taken = {config_json(c) for c in tutorial}
    others = [c for c in matmul.space().configs() if config_json(c) not in taken]
    return tutorial + random.Random(seed).sample(others, total - len(tutorial))


def fresh_store() -> str:
    """A SQLite path in a new empty directory."""
    return os.path.join(tempfile.mkdtemp(prefix="first-call-store-"), "store.db")


def autotune_decorator(
    variant: str, configs: list[triton.Config], key: list[str], interpreter: bool
) -> Callable[[Any], Any]:
    """The autotune decorator of ``variant`` over ``configs``."""
    options = VARIANTS[variant]
    if options is None:
        return triton.autotune(configs, key=key, do_bench=host_clock_bench if interpreter else None)
    return tunekit.autotune(configs, key=key, store=fresh_store(), **options)


def timed(call: Callable[[], None], synchronize: Callable[[], None]) -> float:
    """Seconds from before ``call`` to after it, the device idle at both ends."""
    synchronize()
    start = time.perf_counter()
    call()
    synchronize()
    return time.perf_counter() - start


def device_name(interpreter: bool) -> str:
    return "CPU (TRITON_INTERPRET=1)" if interpreter else torch.cuda.get_device_name()


def plain_report(kernel: Any) -> Any:
    """``kernel.tuning_report`` as JSON-ready data where tunekit has one (None where it has not)."""
    report = getattr(kernel, "tuning_report", None)
    if report is None or isinstance(report, (dict, list, str, int, float)):
        return report
    try:
        return dataclasses.asdict(report) if dataclasses.is_dataclass(report) else vars(report)
    except Exception:  # a report of a shape this script does not know: its text
        return str(report)


def tunekit_details(kernel: Any) -> dict[str, Any]:
    """What a tunekit kernel says about its tuning: run id, trial statuses, tuning report."""
    return {"run_id": kernel.run_id, "statuses": dict(Counter(t.status.value for t in kernel.trials)),
            "tuning_report": plain_report(kernel)}


def measure_first_call(kind: str, variant: str, interpreter: bool) -> dict[str, Any]:
    """Build ``kind``'s kernel under ``variant`` and time its first call."""
    device = "cpu" if interpreter else "cuda"
    synchronize = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if kind in ("vadd", "vadd_late"):
        configs = vadd_configs()
        if kind == "vadd_late":  # the device is up before the kernel is decorated
            x, y, out = vector_add.inputs(VADD_N, device=device)
            synchronize()
        jit = triton.jit(vector_add.add_kernel.fn)
        kernel = autotune_decorator(variant, configs, ["n"], interpreter)(jit)
        if kind == "vadd":
            x, y, out = vector_add.inputs(VADD_N, device=device)
        seconds = timed(lambda: vector_add.launch(kernel, x, y, out), synchronize)
    else:
        configs = gemm_configs(GEMM_CONFIGS[kind])
        jit = triton.jit(matmul.matmul_kernel.fn)
        kernel = autotune_decorator(variant, configs, SPACE_KEY, interpreter)(jit)
        a, b, c = matmul.inputs(GEMM_SIZE, GEMM_SIZE, GEMM_SIZE, dtype=torch.bfloat16, device=device)
        seconds = timed(lambda: matmul.launch(kernel, a, b, c), synchronize)
    record = {"name": f"{kind}:{variant}", "configs": len(configs), "first_call_s": seconds,
              "best": str(kernel.best_config), "device": device_name(interpreter)}
    if VARIANTS[variant] is not None:
        record.update(tunekit_details(kernel))
    return record


def recorded_matmul(dims: list[int]) -> tuple[str, RecordedSpace] | None:
    """The shipped H200 recording of the GEMM at ``dims``, with its shape's name; None if not recorded."""
    for row in shipped.index()["spaces"]:
        if row["kernel"] == "matmul" and list(row["dims"]) == dims:
            return row["shape"], shipped.load("matmul", row["shape"])
    return None


def measure_space_budget(dims: list[int], seconds: float) -> dict[str, Any]:
    """tunekit over the GEMM's whole Space with a ``seconds`` budget: its first call at ``dims``."""
    m, n, k = dims
    kernel = tunekit.autotune(space=matmul.space(), key=SPACE_KEY, budget=tunekit.Budget(seconds=seconds),
                              store=fresh_store())(triton.jit(matmul.matmul_kernel.fn))
    a, b, c = matmul.inputs(m, n, k, dtype=torch.bfloat16, device="cuda")
    wall = timed(lambda: matmul.launch(kernel, a, b, c), torch.cuda.synchronize)
    run = next((r for r in kernel.store.runs() if r["run_id"] == kernel.run_id), None)
    evaluations = run["evaluations"] if run else sum(t.source == "measured" for t in kernel.trials)
    allowed = seconds + max(1.0, 0.02 * seconds)
    record = {"name": f"space:{m}x{n}x{k}", "shape": dims, "budget_s": seconds, "first_call_s": wall,
              "allowed_s": allowed, "within_budget": wall <= allowed, "evaluations": evaluations,
              "best": str(kernel.best_config), "device": device_name(False), "recorded_shape": None,
              "winner_recorded_ms": None, "recorded_optimum_ms": None, "winner_over_optimum": None}
    recorded = recorded_matmul(dims)
    if recorded is not None:
        shape, space = recorded
        winner = space.lookup(kernel.best_config)
        winner_ms = winner.time_ms if winner is not None and winner.ok else None
        over = winner_ms / space.optimum_ms if winner_ms is not None else None
        record.update(recorded_shape=shape, winner_recorded_ms=winner_ms,
                      recorded_optimum_ms=space.optimum_ms, winner_over_optimum=over)
    record.update(tunekit_details(kernel))
    return record


# -- the driver ----------------------------------------------------------------------------


def run_process(arguments: list[str], timeout: float) -> dict[str, Any]:
    """This script in a fresh process with ``arguments``: its JSON line, or what went wrong.

    The process leads a process group of its own, so that what it started (tunekit's workers)
    is ended with it on a timeout; ``left_processes`` says whether any outlived it anyway."""
    command = [sys.executable, os.path.abspath(__file__), *arguments]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate()
        return {"error": f"no answer within {timeout:g} s", "stderr_tail": stderr[-3000:]}
    finally:
        time.sleep(0.5)  # what dies with its parent (tunekit's workers check every 0.1 s) has gone by now
        survivors = processes_in_group(process.pid)
        left_processes = bool(survivors)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                return {**json.loads(line), "left_processes": left_processes, "survivors": survivors}
    return {"error": f"exit status {process.returncode} without a JSON line", "stderr_tail": stderr[-3000:],
            "left_processes": left_processes, "survivors": survivors}


def processes_in_group(group: int) -> list[str]:
    """Command lines of the live (not zombie) processes of a process group, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z" and int(fields[2]) == group:
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200])
    return found


def round_order(variants: list[str], round_index: int) -> list[str]:
    """Stock first in even rounds, last in odd rounds; the tunekit variants in their given order."""
    others = [v for v in variants if v != "stock"]
    stock = ["stock"] if "stock" in variants else []
    return stock + others if round_index % 2 == 0 else others + stock


def summarize(records: list[dict[str, Any]], kinds: list[str], variants: list[str]) -> list[dict[str, Any]]:
    """Per kind and variant: runs, failures, median and range, and ratios to stock."""
    rows = []
    for kind in kinds:
        times = {v: {r["round"]: r["first_call_s"] for r in records
                     if (r["kind"], r["variant"]) == (kind, v) and "first_call_s" in r} for v in variants}
        stock = times.get("stock", {})
        for variant in variants:
            mine = times[variant]
            failed = sum((r["kind"], r["variant"]) == (kind, variant) and "error" in r for r in records)
            row = {"kind": kind, "variant": variant, "runs": len(mine), "failed": failed,
                   "median_s": None, "min_s": None, "max_s": None, "median_over_stock": None,
                   "median_of_round_ratios": None}
            if mine:
                row.update(median_s=statistics.median(mine.values()), min_s=min(mine.values()),
                           max_s=max(mine.values()))
            if mine and stock and variant != "stock":
                row["median_over_stock"] = row["median_s"] / statistics.median(stock.values())
                ratios = [mine[r] / stock[r] for r in mine if r in stock]
                row["median_of_round_ratios"] = statistics.median(ratios) if ratios else None
            rows.append(row)
    return rows


def number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_summary(rows: list[dict[str, Any]]) -> None:
    print(f"{'kind':<7} {'variant':<9} {'runs':>4} {'failed':>6} {'median s':>9} {'min-max s':>15} "
          f"{'median/stock':>12} {'per-round ratio':>15}")
    for row in rows:
        spread = f"{number(row['min_s'])}-{number(row['max_s'])}" if row["runs"] else "-"
        print(f"{row['kind']:<7} {row['variant']:<9} {row['runs']:>4} {row['failed']:>6} "
              f"{number(row['median_s']):>9} {spread:>15} {number(row['median_over_stock']):>12} "
              f"{number(row['median_of_round_ratios']):>15}")


def print_space_budget(records: list[dict[str, Any]]) -> None:
    print(f"{'shape':<16} {'first call s':>12} {'within':>6} {'evals':>5} {'winner/optimum':>14}  winner")
    for r in records:
        if "error" in r:
            print(f"{'x'.join(map(str, r['shape'])):<16} failed: {r['error']}")
            continue
        print(f"{'x'.join(map(str, r['shape'])):<16} {r['first_call_s']:>12.1f} {str(r['within_budget']):>6} "
              f"{r['evaluations']:>5} {number(r['winner_over_optimum'], 3):>14}  {r['best']}")


def git_commit() -> str | None:
    """``$TUNEKIT_COMMIT`` (the commit the tunekit wheel was built from, which the device scripts
    set from ``.whl/COMMIT``: a device's copy of the checkout may carry stale git metadata), else
    the checkout's short HEAD, or None where this copy is not a git repository."""
    if os.environ.get("TUNEKIT_COMMIT"):
        return os.environ["TUNEKIT_COMMIT"]
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True, cwd=os.path.dirname(os.path.abspath(__file__)))
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip()


def save(report: dict[str, Any], path: str | None) -> None:
    """Write the report so far (rewritten after every process: a run cut short keeps what it measured)."""
    if path:
        with open(path, "w") as handle:
            json.dump(report, handle, indent=1, default=str)


def describe(record: dict[str, Any]) -> str:
    if "error" in record:
        tail = record.get("stderr_tail")
        return f"failed: {record['error']}" + (f"\n{tail}" if tail else "")
    return f"{record['first_call_s']:.2f} s, best {record['best']}"


def drive(args: argparse.Namespace) -> None:
    """Every kind's rounds, then the space-budget runs; tables on stdout, everything in ``--json``."""
    interpreter = ["--interpreter"] if args.interpreter else []
    report: dict[str, Any] = {
        "environment": {"triton": triton.__version__, "torch": torch.__version__,
                        "tunekit_commit": git_commit(), "device": None, "interpreter": args.interpreter},
        "arguments": vars(args), "records": [], "summary": [], "space_budget": [],
    }
    print(f"first call, fresh process, cold Triton cache; triton {triton.__version__}, "
          f"torch {torch.__version__}, tunekit {report['environment']['tunekit_commit']}", flush=True)
    for kind in args.kinds:
        for round_index in range(args.runs):
            for variant in round_order(args.variants, round_index):
                record = run_process(["--one", f"{kind}:{variant}", *interpreter], args.timeout)
                record = {**record, "name": f"{kind}:{variant}", "kind": kind, "variant": variant,
                          "round": round_index}
                report["environment"]["device"] = report["environment"]["device"] or record.get("device")
                report["records"].append(record)
                report["summary"] = summarize(report["records"], args.kinds, args.variants)
                save(report, args.json)
                print(f"  round {round_index} {kind}:{variant}: {describe(record)}", flush=True)
    if args.kinds:
        print(f"\n{report['environment']['device'] or 'no process answered'}: first call in seconds, "
              f"{args.runs} rounds")
        print_summary(report["summary"])
    budget = ["--space-seconds", str(args.space_seconds)]
    for round_index in range(args.space_budget_runs):
        for dims in args.space_shapes:
            arguments = ["--space-budget", "--shape", *map(str, dims), *budget]
            record = {**run_process(arguments, args.timeout), "shape": dims, "round": round_index}
            report["space_budget"].append(record)
            save(report, args.json)
            shape = "x".join(map(str, dims))
            print(f"  space budget {shape} round {round_index}: {describe(record)}", flush=True)
    if report["space_budget"]:
        print(f"\ntunekit over the GEMM's whole Space ({len(matmul.space())} configs), "
              f"budget {args.space_seconds:g} s, default strategy")
        print_space_budget(report["space_budget"])


# -- arguments -----------------------------------------------------------------------------


def kind_and_variant(text: str) -> tuple[str, str]:
    kind, _, variant = text.partition(":")
    if kind not in KINDS or variant not in VARIANTS:
        raise argparse.ArgumentTypeError(f"{text!r}: KIND is one of {', '.join(KINDS)}, "
                                         f"VARIANT one of {', '.join(VARIANTS)}")
    return kind, variant


def shipped_gemm_shapes() -> dict[str, list[int]]:
    """The GEMM shapes of the shipped H200 recordings, by name."""
    return {row["shape"]: list(row["dims"]) for row in shipped.index()["spaces"] if row["kernel"] == "matmul"}


def gemm_shape(text: str) -> list[int]:
    """A shipped GEMM shape's name (``square``) or ``MxNxK``."""
    named = shipped_gemm_shapes()
    if text in named:
        return named[text]
    try:
        dims = [int(v) for v in text.split("x")]
    except ValueError:
        dims = []
    if len(dims) != 3:
        raise argparse.ArgumentTypeError(f"{text!r}: a shape is MxNxK or one of {', '.join(named)}")
    return dims


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--one", type=kind_and_variant, metavar="KIND:VARIANT",
                      help="time one first call in this process and print one JSON line")
    mode.add_argument("--space-budget", action="store_true",
                      help="time tunekit's first call over the GEMM's whole Space at --shape; one JSON line")
    parser.add_argument("--shape", type=int, nargs=3, default=[GEMM_SIZE] * 3, metavar=("M", "N", "K"),
                        help="the GEMM shape of --space-budget")
    parser.add_argument("--space-seconds", type=float, default=60.0,
                        help="the budget of the space-budget runs")
    parser.add_argument("--kinds", nargs="*", choices=KINDS, default=list(KINDS))
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["stock", "tk"])
    parser.add_argument("--runs", type=int, default=5, help="rounds per kind")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per measured process")
    parser.add_argument("--space-budget-runs", type=int, default=0, help="space-budget runs per shape")
    parser.add_argument("--space-shapes", nargs="+", type=gemm_shape, metavar="SHAPE",
                        default=list(shipped_gemm_shapes().values()),
                        help="shipped GEMM shape names or MxNxK (default: the 4 shipped GEMM shapes)")
    parser.add_argument("--interpreter", action="store_true",
                        help="Triton's interpreter on CPU tensors (vadd only)")
    parser.add_argument("--json", help="write the raw records and the summary here")
    parser.add_argument("--profile", metavar="PATH",
                        help="with --one: profile the process's work with cProfile, write the stats to PATH "
                             "and print the 40 entries of most cumulative time on stderr")
    args = parser.parse_args()
    if args.interpreter and (args.space_budget or args.space_budget_runs
                             or any(k != "vadd" for k in ([args.one[0]] if args.one else args.kinds))):
        parser.error("--interpreter measures the vadd kind only")

    if args.one and args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        record = profiler.runcall(measure_first_call, *args.one, args.interpreter)
        profiler.dump_stats(args.profile)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
        print(json.dumps(record, default=str), flush=True)
    elif args.one:
        print(json.dumps(measure_first_call(*args.one, args.interpreter), default=str), flush=True)
    elif args.space_budget:
        print(json.dumps(measure_space_budget(args.shape, args.space_seconds), default=str), flush=True)
    else:
        # `timeout` ends the driver with SIGTERM: exit through run_process's clean-up of the process running
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
        drive(args)


if __name__ == "__main__":
    main()
