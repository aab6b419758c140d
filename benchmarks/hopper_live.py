"""The Hopper kernels tuned live on a GPU (issue 16): each shape tuned by ``--strategy`` from a cold
Triton cache and an empty store within ``--seconds``, its output checked against PyTorch, then
timed interleaved with the PyTorch call in ``--rounds`` rounds (``do_bench(warmup=25, rep=100)``
each; ratios per round, medians reported).

    python benchmarks/hopper_live.py --seconds 120 --json OUT/hopper_live.json

Shapes: GEMM bf16 4096x4096x4096, 64x8192x8192 and 8192x8192x256 against ``torch.matmul``
(cuBLAS); attention bf16 (batch, heads, sequence, head_dim) 4x32x4096x128 causal and
1x16x16384x128 against ``F.scaled_dot_product_attention``. The tuning's wall time counts from
the first call to its return: compiles (the Triton cache is empty), benchmarks and the
strategy's own time. Before any tuning, a few configs of each kernel are launched once at small
ragged shapes and checked (``smoke``), so that a kernel that does not run on this GPU stops the run
in seconds. Needs a Hopper GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from types import ModuleType

import torch
import triton
import triton.testing
from tunekit.kernels import attention_hopper, matmul_hopper

import tunekit
from tunekit.check import default_tolerance, relative_error
from tunekit.config import config_json

GEMMS = [(4096, 4096, 4096), (64, 8192, 8192), (8192, 8192, 256)]
ATTENTIONS = [(4, 32, 4096, 128, True), (1, 16, 16384, 128, False)]


#: Configs launched by ``smoke``: each schedule and knob of the Hopper GEMM once, both attention
#: orders; each a config of its H200 Space.
SMOKE_GEMMS = [dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, PERSISTENT=0, WARP_SPECIALIZE=0, FLATTEN=0,
                    EPILOGUE_SUBTILE=0, num_warps=4, num_stages=3),
               dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, PERSISTENT=1, WARP_SPECIALIZE=0, FLATTEN=1,
                    EPILOGUE_SUBTILE=1, num_warps=8, num_stages=2),
               dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, PERSISTENT=1, WARP_SPECIALIZE=1, FLATTEN=0,
                    EPILOGUE_SUBTILE=0, num_warps=8, num_stages=3),
               dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=1, PERSISTENT=1, WARP_SPECIALIZE=0, FLATTEN=0,
                    EPILOGUE_SUBTILE=0, num_warps=4, num_stages=4, num_ctas=2)]
SMOKE_ATTENTIONS = [dict(BLOCK_M=128, BLOCK_N=64, WARP_SPECIALIZE=0, HEAVY_FIRST=heavy_first, num_warps=8, num_stages=3)
                    for heavy_first in (0, 1)]


def _smoke(label: str, launch: Callable[[], None], output: torch.Tensor, expected: torch.Tensor) -> bool:
    """One smoke launch on a NaN-filled ``output``: prints its error or failure; whether it was right."""
    try:
        output.fill_(float("nan"))
        launch()
        error = relative_error(output, expected)
    except Exception as failure:  # noqa: BLE001 - each failure is printed; the run goes on
        print(f"smoke {label}: {type(failure).__name__}: {str(failure)[-300:]}", flush=True)
        return False
    print(f"smoke {label}: relative error {error:.1e}", flush=True)
    return error <= default_tolerance(output.dtype)


def smoke() -> bool:
    """Each config of ``SMOKE_GEMMS`` and ``SMOKE_ATTENTIONS`` launched once at a ragged shape and
    checked against PyTorch; prints every outcome and says whether each kernel ran right at least once."""
    a, b, c = matmul_hopper.inputs(1000, 1024, 520, device="cuda")
    expected = torch.matmul(a, b)
    gemm_ok = [_smoke(f"gemm {config}", lambda: matmul_hopper.launch(matmul_hopper.matmul_hopper_kernel, a, b, c,
                                                                     **config), c, expected)
               for config in SMOKE_GEMMS]
    q, k, v, o = attention_hopper.inputs(1, 2, 1000, 128, device="cuda")
    attention_ok = []
    for causal in (False, True):
        expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        attention_ok += [_smoke(f"attention causal={causal} {config}", lambda: attention_hopper.launch(
            attention_hopper.attention_hopper_kernel, q, k, v, o, causal=causal, **config), o, expected)
            for config in SMOKE_ATTENTIONS]
    return any(gemm_ok) and any(attention_ok)


def tuned(module: ModuleType, kernel: triton.JITFunction, key: list[str], args: argparse.Namespace, scratch: str,
          name: str) -> tunekit.Autotuner:
    """A fresh copy of ``kernel`` under tunekit, with its own cold Triton cache and store."""
    os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, f"cache-{name}")
    return tunekit.autotune(space=module.space(), key=key, strategy=args.strategy, seed=args.seed,
                            budget=tunekit.Budget(seconds=args.seconds), store=os.path.join(scratch, f"{name}.db"),
                            warmup=5, rep=25)(triton.jit(kernel.fn))


def interleaved(calls: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Each call's ``do_bench`` time in each of ``rounds`` rounds, the calls taking turns."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            times[name].append(triton.testing.do_bench(call, warmup=25, rep=100))
    return times


def measure(name: str, kernel: tunekit.Autotuner, launch: Callable[[], None], output: torch.Tensor,
            expected: torch.Tensor, baseline: Callable[[], object], args: argparse.Namespace) -> dict:
    """Tune through the first ``launch`` (timed), check its output, then time it against ``baseline``."""
    output.fill_(float("nan"))
    start = time.perf_counter()
    launch()
    torch.cuda.synchronize()
    wall = time.perf_counter() - start
    error = relative_error(output, expected)
    measured = [t for t in kernel.trials if t.source == "measured"]
    times = interleaved({"tunekit": launch, "torch": baseline}, args.rounds)
    ratios = [a / b for a, b in zip(times["tunekit"], times["torch"])]
    row = {"shape": name, "tuning_seconds": wall, "evaluations": len(measured),
           "failed": sum(not t.ok for t in measured), "winner": config_json(kernel.best_config),
           "relative_error": error, "tunekit_ms": statistics.median(times["tunekit"]),
           "torch_ms": statistics.median(times["torch"]), "ratio_median": statistics.median(ratios),
           "ratio_min": min(ratios), "ratio_max": max(ratios)}
    print(f"{name}: tuned in {wall:.1f} s, {len(measured)} evaluations ({row['failed']} failed), error {error:.1e}; "
          f"{row['tunekit_ms']:.4f} ms against torch {row['torch_ms']:.4f} ms: ratio {row['ratio_median']:.3f} "
          f"({row['ratio_min']:.3f}-{row['ratio_max']:.3f} over {args.rounds} rounds); {kernel.best_config}",
          flush=True)
    return row


def gemm(m: int, n: int, k: int, args: argparse.Namespace, scratch: str) -> dict:
    """One GEMM shape tuned and timed against ``torch.matmul``."""
    a, b, c = matmul_hopper.inputs(m, n, k, device="cuda")
    expected = torch.matmul(a, b)
    kernel = tuned(matmul_hopper, matmul_hopper.matmul_hopper_kernel, ["M", "N", "K"], args, scratch,
                   f"gemm-{m}x{n}x{k}")
    return measure(f"gemm {m}x{n}x{k}", kernel, lambda: matmul_hopper.launch(kernel, a, b, c), c, expected,
                   lambda: torch.matmul(a, b), args)


def attention(batch: int, heads: int, seq_len: int, head_dim: int, causal: bool, args: argparse.Namespace,
              scratch: str) -> dict:
    """One attention shape tuned and timed against SDPA."""
    q, k, v, o = attention_hopper.inputs(batch, heads, seq_len, head_dim, device="cuda")
    sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    kernel = tuned(attention_hopper, attention_hopper.attention_hopper_kernel, ["seq_len", "HEAD_DIM", "CAUSAL"],
                   args, scratch, f"attention-{batch}x{heads}x{seq_len}x{head_dim}-{int(causal)}")
    return measure(f"attention {batch}x{heads}x{seq_len}x{head_dim} causal={causal}", kernel,
                   lambda: attention_hopper.launch(kernel, q, k, v, o, causal=causal), o, sdpa(), sdpa, args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategy", default="default")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--only", choices=["gemm", "attention"], default=None)
    parser.add_argument("--json")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="tunekit-hopper-")
    print(f"{torch.cuda.get_device_name()}, triton {triton.__version__}, torch {torch.__version__}; GEMM space "
          f"{len(matmul_hopper.space())} configs, attention space {len(attention_hopper.space())}", flush=True)
    if not smoke():
        raise SystemExit("a Hopper kernel ran with none of its smoke configs: nothing tuned")
    rows = []
    if args.only in (None, "gemm"):
        rows += [gemm(m, n, k, args, scratch) for m, n, k in GEMMS]
    if args.only in (None, "attention"):
        rows += [attention(*shape, args, scratch) for shape in ATTENTIONS]
    if args.json:
        with open(args.json, "w") as sink:
            json.dump({"device": torch.cuda.get_device_name(), "triton": triton.__version__, "seconds": args.seconds,
                       "strategy": args.strategy, "rows": rows}, sink, indent=1)


if __name__ == "__main__":
    main()
