"""``background=True`` on a GPU: how long the first call of a new GEMM shape takes, and when the winner is in use.

One shape per fresh process, each from an empty Triton cache and an empty store:

    python benchmarks/background_gemm.py --shape 1024 5120 5120 --seconds 20 --json OUT.json

1. ``plain``: a JITFunction of the same source launched once with the fallback config (cold
   compile + launch; ``torch.cuda.synchronize()`` included), after a vector add has paid the
   process's one-time costs: the time a call can not beat. tunekit then starts from another empty
   cache.
2. ``tunekit.autotune(space=matmul.space(), budget=Budget(seconds=S), background=True,
   fallback=rule.config_for)``, where the rule is what ``tunekit store heuristics`` writes from the
   4 shipped H200 GEMM recordings. Its first call is timed the same way; then the kernel is called
   in a loop (each call synchronised, as a serving step), recording each call's latency and when
   ``best_config`` changes from the fallback to the winner.
3. The fallback and the winner re-timed interleaved (``do_bench``) with ``torch.matmul``.

Prints and writes: first call / plain, seconds until the winner is launched (from the first call),
call latency (median, 99th percentile) while tuning and after, and the two configs' times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

#: --interpret: a check of this script on the CPU under the Triton interpreter (tiny shape, fp16); its times mean nothing.
INTERPRET = "--interpret" in sys.argv
if INTERPRET:
    os.environ["TRITON_INTERPRET"] = "1"
scratch = tempfile.mkdtemp(prefix="tunekit-background-")
os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "cache-plain")  # cold: before triton is imported

import torch  # noqa: E402
import triton  # noqa: E402
import triton.testing  # noqa: E402
from tunekit.kernels import matmul  # noqa: E402

import tunekit  # noqa: E402
from tunekit.config import config_to_dict  # noqa: E402
from tunekit.config_rules import choose_rule, write_module  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
from heuristics import SHIPPED, key_times  # noqa: E402


DEVICE = "cpu" if INTERPRET else "cuda"
DTYPE = torch.float16 if INTERPRET else torch.bfloat16  # the interpreter computes bf16 wrongly


def synchronized(call) -> float:
    start = time.perf_counter()
    call()
    if not INTERPRET:
        torch.cuda.synchronize()
    return time.perf_counter() - start


def bench(call) -> float:
    """do_bench's median ms (on the CPU check: one timed call)."""
    if INTERPRET:
        return 1e3 * synchronized(call)
    return triton.testing.do_bench(call, warmup=25, rep=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", type=int, nargs=3, required=True, metavar=("M", "N", "K"))
    parser.add_argument("--seconds", type=float, default=20.0, help="the tuning's budget")
    parser.add_argument("--loop-seconds", type=float, default=None,
                        help="how long to call the kernel (default: 1.5x the budget + 5)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--interpret", action="store_true", help="check the script on the CPU (interpreter)")
    args = parser.parse_args()
    m, n, k = args.shape
    # the module `tunekit store heuristics` would write from the 4 shipped GEMM recordings, imported as a user would
    rule, assessments = choose_rule([times for _, times in key_times(SHIPPED / "index.json")["matmul"]])
    module_path = write_module(rule, Path(scratch) / "gemm_rule.py", kernel="matmul_kernel",
                               provenance="The 4 shipped H200 GEMM recordings.", assessments=assessments)
    sys.path.insert(0, str(module_path.parent))
    import gemm_rule

    a, b, c = matmul.inputs(m, n, k, dtype=DTYPE, device=DEVICE)
    fallback = gemm_rule.config_for(M=m, N=n, K=k, dtypes=[str(DTYPE)] * 3)

    # the process's one-time costs (CUDA context, Triton's driver utilities) paid before either is timed
    from tunekit.kernels import vector_add

    x, y, out = vector_add.inputs(4096, device=DEVICE)
    vector_add.launch(vector_add.add_kernel, x, y, out, BLOCK=1024)
    synchronized(lambda: None)
    plain = triton.jit(matmul.matmul_kernel.fn)
    plain_seconds = synchronized(lambda: matmul.launch(plain, a, b, c, **fallback))
    os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "cache-tunekit")  # cold again, for tunekit's workers too

    kernel = tunekit.autotune(space=matmul.space(), key=["M", "N", "K"], budget=tunekit.Budget(seconds=args.seconds),
                              background=True, fallback=gemm_rule.config_for,
                              store=os.path.join(scratch, "store.db"))(matmul.matmul_kernel)
    started = time.perf_counter()
    first_seconds = synchronized(lambda: matmul.launch(kernel, a, b, c))
    first_config = config_to_dict(kernel.best_config)
    assert first_config == fallback, (first_config, fallback)
    tuning_latency, after_latency, switched_at = [], [], None
    loop_seconds = args.loop_seconds or 1.5 * args.seconds + 5
    while time.perf_counter() - started < loop_seconds:
        tuned = kernel.wait_for_tuning(timeout=0)  # ended before this call: the call switches to the winner
        latency = synchronized(lambda: matmul.launch(kernel, a, b, c))
        if tuned and switched_at is None:
            switched_at = time.perf_counter() - started
        (after_latency if tuned else tuning_latency).append(latency)
        time.sleep(0.002)
    winner = config_to_dict(kernel.best_config)
    report = kernel.tuning_report
    expected = (a.float() @ b.float())
    error = ((c.float() - expected).norm() / expected.norm()).item()

    def time_of(config: dict) -> float:
        return bench(lambda: matmul.launch(plain, a, b, c, **config))

    rounds = [(time_of(fallback), time_of(winner), bench(lambda: torch.matmul(a, b))) for _ in range(3)]
    fallback_ms, winner_ms, torch_ms = (statistics.median(r[i] for r in rounds) for i in range(3))

    def percentile(values: list[float], q: float) -> float | None:
        return sorted(values)[min(len(values) - 1, int(q * len(values)))] if values else None

    result = {
        "shape": [m, n, k], "budget_seconds": args.seconds, "fallback": fallback, "winner": winner,
        "plain_first_call_s": plain_seconds, "first_call_s": first_seconds,
        "first_call_over_plain": first_seconds / plain_seconds,
        "winner_in_use_after_s": switched_at, "tuning_report": {
            "evaluations": report.evaluations if report else None, "seconds": report.seconds if report else None,
            "stopped_because": report.stopped_because if report else None},
        "calls_while_tuning": len(tuning_latency), "latency_while_tuning_ms": {
            "median": 1e3 * statistics.median(tuning_latency) if tuning_latency else None,
            "p99": 1e3 * percentile(tuning_latency, 0.99) if tuning_latency else None},
        "calls_after": len(after_latency), "latency_after_ms": {
            "median": 1e3 * statistics.median(after_latency) if after_latency else None,
            "p99": 1e3 * percentile(after_latency, 0.99) if after_latency else None},
        "fallback_ms": fallback_ms, "winner_ms": winner_ms, "torch_ms": torch_ms,
        "fallback_over_winner": fallback_ms / winner_ms, "winner_over_torch": winner_ms / torch_ms,
        "winner_relative_error": error,
        "rule": rule.kind, "device": "cpu (interpreter)" if INTERPRET else torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__,
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
