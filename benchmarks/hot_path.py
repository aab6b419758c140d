"""Host cost per call of a cached (already tuned) kernel: tunekit vs stock triton.autotune vs a bare launch.

Vector addition of 4,096 float32 elements is launch-bound, so the time per call is the host's
cost of getting the launch out. The three contestants are interleaved round by round (timings
drift, design.md) and the ratios are medians over rounds, measured in this one run.

    python benchmarks/hot_path.py [--rounds 21] [--calls 2000] [--json OUT.json]

Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import triton

import tunekit
from tunekit.kernels import vector_add


def per_call_us(launch, calls: int) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        launch()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--json")
    args = parser.parse_args()

    n = args.n
    x, y, out = vector_add.inputs(n, device="cuda")
    configs = [triton.Config({"BLOCK": 1024}, num_warps=4), triton.Config({"BLOCK": 512}, num_warps=4)]
    # separate JITFunction objects so that no contestant shares the others' launch caches
    bare = triton.jit(vector_add.add_kernel.fn)
    stock = triton.autotune(configs, key=["n"])(triton.jit(vector_add.add_kernel.fn))
    ours = tunekit.autotune(configs, key=["n"], store=None)(triton.jit(vector_add.add_kernel.fn))
    grid = vector_add.grid(n)

    contestants = {
        "bare_jit": lambda: bare[grid](x, y, out, n, BLOCK=1024, num_warps=4),
        "stock_autotune": lambda: stock[grid](x, y, out, n),
        "tunekit": lambda: ours[grid](x, y, out, n),
    }
    for launch in contestants.values():  # tune, compile and warm every path
        launch()
        torch.testing.assert_close(out, x + y)
        per_call_us(launch, 200)

    samples: dict[str, list[float]] = {name: [] for name in contestants}
    for _ in range(args.rounds):
        for name, launch in contestants.items():
            samples[name].append(per_call_us(launch, args.calls))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    ratio_stock = statistics.median(t / s for t, s in zip(samples["tunekit"], samples["stock_autotune"]))
    ratio_bare = statistics.median(t / b for t, b in zip(samples["tunekit"], samples["bare_jit"]))

    print(f"host cost per call, vector add n={n}, {args.rounds} interleaved rounds x {args.calls} calls")
    for name, median in medians.items():
        spread = (max(samples[name]) - min(samples[name])) / median
        print(f"  {name:<16} {median:7.2f} us/call (median; range {spread:.0%} of it)")
    print(f"  tunekit / stock_autotune: {ratio_stock:.3f}  (median of per-round ratios)")
    print(f"  tunekit / bare_jit:       {ratio_bare:.3f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"n": n, "rounds": args.rounds, "calls": args.calls, "samples_us": samples,
                       "median_us": medians, "ratio_tunekit_over_stock": ratio_stock,
                       "ratio_tunekit_over_bare": ratio_bare, "device": torch.cuda.get_device_name(),
                       "triton": triton.__version__, "torch": torch.__version__}, handle, indent=1)


if __name__ == "__main__":
    main()
