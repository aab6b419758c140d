"""Where a cached call's host time goes with the direct launch: each step timed alone on a tuned
vector add (n = 4096), in microseconds per call (medians of 7 rounds of 5,000 calls).

    python benchmarks/direct_launch_anatomy.py

Needs a GPU.
"""

from __future__ import annotations

import json
import statistics
import time

import torch
import triton

import tunekit
from tunekit.kernels import vector_add


def us(f, calls: int = 5000, rounds: int = 7) -> float:
    samples = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(calls):
            f()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - started) / calls * 1e6)
    return round(statistics.median(samples), 2)


def main() -> None:
    n = 4096
    x, y, out = vector_add.inputs(n, device="cuda")
    configs = [triton.Config({"BLOCK": 1024}, num_warps=4)]
    bare = triton.jit(vector_add.add_kernel.fn)
    tuned = tunekit.autotune(configs, key=["n"], store=None)(triton.jit(vector_add.add_kernel.fn))
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    tuned[grid](x, y, out, n)
    tuned[grid](x, y, out, n)
    key = (n, x.dtype, y.dtype, out.dtype)
    config, constants, direct = tuned._tuned[key]
    adapter = direct._adapter
    binder = direct._binders[0]
    entry = direct._kept[0][0]
    launcher, function, packed = entry.launcher, entry.function, entry.packed
    stream = adapter.current_stream(0)
    args = (x, y, out, n)
    steps = {
        "bare_jit_grid_tuple": lambda: bare[(4,)](x, y, out, n, BLOCK=1024, num_warps=4),
        "tunekit_call": lambda: tuned[grid](x, y, out, n),
        "tunekit_run": lambda: tuned.run(x, y, out, n, grid=grid, warmup=False),
        "getitem_partial": lambda: tuned[grid],
        "key": lambda: (*[args[i] for i in tuned._key_positions], *[a.dtype for a in args if hasattr(a, "dtype")]),
        "direct_call": lambda: direct(args, {}, grid),
        "direct_call_grid_tuple": lambda: direct(args, {}, (4,)),
        "positional_guard": lambda: entry.guard(*args),
        "current_device": adapter.current_device,
        "current_stream": lambda: adapter.current_stream(0),
        "binder": lambda: binder(x, y, out, n, **constants),
        "plain": adapter.plain,
        "globals_changed": direct._globals_changed,
        "grid_function": lambda: grid({"BLOCK": 1024}),
        "launcher": lambda: launcher(4, 1, 1, stream, function, packed, None, None, None, x, y, out, n, 1024),
        "launcher_launch_c": lambda: launcher.launch(4, 1, 1, stream, function, launcher.launch_cooperative_grid,
                                                     launcher.launch_pdl, None, None, packed, None, None, None,
                                                     x, y, out, n, 1024)
        if hasattr(launcher, "launch") else None,
    }
    print(json.dumps({"kind": "anatomy_us", "triton": triton.__version__,
                      **{name: us(step) for name, step in steps.items()}}), flush=True)


if __name__ == "__main__":
    main()
