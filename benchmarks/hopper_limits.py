"""What limits the Hopper kernels where they miss issue 16's targets (one GPU call): the kernels
PyTorch runs for the same calls (cuBLAS's GEMMs, SDPA's backend), by name from the profiler, and
the decode-shaped GEMM's best tile with and without tensor descriptors, timed interleaved.

    python benchmarks/hopper_limits.py --json OUT/hopper_limits.json

The tile is the best config of both recorded decode spaces (64x64x128, 4 warps, 5 stages):
``matmul`` (pointer loads) against ``matmul_hopper`` one program per tile and persistent; 15 rounds
of ``do_bench(warmup=25, rep=100)``, medians of per-round ratios to ``torch.matmul``.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
import triton
import triton.testing
from tunekit.kernels import attention_hopper, matmul, matmul_hopper

from tunekit.check import relative_error


def cuda_kernels(call, repeat: int = 3) -> list[str]:
    """The CUDA kernels ``call`` launches, by name, as the PyTorch profiler sees them."""
    call()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        for _ in range(repeat):
            call()
        torch.cuda.synchronize()
    return sorted({event.key for event in profile.key_averages() if event.device_type.name == "CUDA"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json")
    args = parser.parse_args()
    result: dict = {"device": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__,
                    "kernels": {}}
    for m, n, k in ((4096, 4096, 4096), (64, 8192, 8192), (8192, 8192, 256)):
        a, b, _ = matmul.inputs(m, n, k, dtype=torch.bfloat16, device="cuda")
        result["kernels"][f"torch.matmul {m}x{n}x{k}"] = cuda_kernels(lambda: torch.matmul(a, b))
    for batch, heads, seq_len, causal in ((4, 32, 4096, True), (1, 16, 16384, False)):
        q, k, v, _ = attention_hopper.inputs(batch, heads, seq_len, 128, device="cuda")
        sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        result["kernels"][f"sdpa {batch}x{heads}x{seq_len}x128 causal={causal}"] = cuda_kernels(sdpa)
    for name, kernels in result["kernels"].items():
        print(f"{name}: {kernels}", flush=True)

    a, b, c = matmul.inputs(64, 8192, 8192, dtype=torch.bfloat16, device="cuda")
    expected = torch.matmul(a, b)
    tile = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=128, GROUP_M=1, num_warps=4, num_stages=5)
    hopper = dict(tile, WARP_SPECIALIZE=0, FLATTEN=0, EPILOGUE_SUBTILE=0)
    calls = {"torch.matmul": lambda: torch.matmul(a, b),
             "matmul (pointer loads)": lambda: matmul.launch(matmul.matmul_kernel, a, b, c, **tile),
             "matmul_hopper, a program per tile": lambda: matmul_hopper.launch(
                 matmul_hopper.matmul_hopper_kernel, a, b, c, PERSISTENT=0, **hopper),
             "matmul_hopper, persistent": lambda: matmul_hopper.launch(
                 matmul_hopper.matmul_hopper_kernel, a, b, c, PERSISTENT=1, **hopper)}
    for name, call in calls.items():
        c.fill_(float("nan"))
        call()
        torch.cuda.synchronize()
        if name != "torch.matmul":
            print(f"decode 64x8192x8192, {name}: error {relative_error(c, expected):.1e}", flush=True)
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(args.rounds):
        for name, call in calls.items():
            times[name].append(triton.testing.do_bench(call, warmup=25, rep=100))
    result["decode"] = {}
    for name in calls:
        ratios = [t / base for t, base in zip(times[name], times["torch.matmul"])]
        result["decode"][name] = {"ms": statistics.median(times[name]), "ratio_to_torch": statistics.median(ratios),
                                  "ratio_min": min(ratios), "ratio_max": max(ratios)}
        print(f"decode 64x8192x8192, {name}: {statistics.median(times[name]):.4f} ms, / torch.matmul "
              f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})", flush=True)
    if args.json:
        with open(args.json, "w") as sink:
            json.dump(result, sink, indent=1)


if __name__ == "__main__":
    main()
