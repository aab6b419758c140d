"""A cached call's host cost and correctness with the direct launch (``tunekit.direct``), on a GPU.

Three parts, JSON lines on stdout:

* ``hotpath_us``: cached calls of a tuned vector add (n = 4096, launch-bound), as
  ``hotpath_store.py`` measures them (21 interleaved rounds of 2,000 calls; medians of per-round
  ratios): bare JIT with a grid tuple and with a grid function, stock ``triton.autotune``,
  tunekit with ``store=None``, with a store and a Space, with ``key_buckets="pow2"``, and with
  ``TUNEKIT_DIRECT_LAUNCH=0`` (every call through ``JITFunction.run``); beside them the compiled
  kernel's own launcher called by hand, the floor under any Python launch;
* ``gemm_us``: the same for a 12-argument GEMM launch (64 x 64 x 64, fp16): bare JIT, stock,
  tunekit, tunekit through ``JITFunction.run``;
* ``guard``: a matrix of calls that change one item of the guard at a time, each checked against
  stock's output, with whether the call went through ``JITFunction.run`` (counted by wrapping
  it) beside whether it must; then CUDA graph capture and ``torch.compile``.

    python benchmarks/direct_launch.py

Needs a GPU.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time

import torch
import triton
import triton.language as tl
from triton import knobs

import tunekit
from hotpath_store import per_call_us  # the reference hot-path script's timer (benchmarks/ is on the path)
from tunekit.kernels import matmul, vector_add

ROUNDS = 21


def interleaved(calls: dict, per_round: int, reference: str, name: str) -> None:
    """Time every call in ``ROUNDS`` interleaved rounds; print medians and per-round ratios."""
    for f in calls.values():
        per_call_us(f, 300)
    samples: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(ROUNDS):
        for k, f in calls.items():
            samples[k].append(per_call_us(f, per_round))
    median = {k: round(statistics.median(v), 2) for k, v in samples.items()}
    ratios = {f"{k}/{reference}": round(statistics.median(a / b for a, b in zip(samples[k], samples[reference])), 3)
              for k in calls}
    if "stock_autotune" in calls:
        ratios.update({f"{k}/stock_autotune": round(statistics.median(
            a / b for a, b in zip(samples[k], samples["stock_autotune"])), 3) for k in calls})
    print(json.dumps({"kind": name, "median_us": median, "ratios": ratios}), flush=True)


def without_direct_launch(decorate):
    """A tunekit kernel whose cached calls all go through ``JITFunction.run``: the switch is read
    when a key's winner is first launched."""
    os.environ["TUNEKIT_DIRECT_LAUNCH"] = "0"
    try:
        return decorate()
    finally:
        os.environ.pop("TUNEKIT_DIRECT_LAUNCH")


def hot_path(store: str) -> None:
    n = 4096
    x, y, out = vector_add.inputs(n, device="cuda")
    configs = [triton.Config({"BLOCK": 1024}, num_warps=4), triton.Config({"BLOCK": 512}, num_warps=4)]
    fn = vector_add.add_kernel.fn
    bare = triton.jit(fn)
    stock = triton.autotune(configs, key=["n"])(triton.jit(fn))
    direct_none = tunekit.autotune(configs, key=["n"], store=None)(triton.jit(fn))
    direct_space = tunekit.autotune(space=vector_add.space(), key=["n"], store=store, isolate=False)(triton.jit(fn))
    direct_pow2 = tunekit.autotune(space=vector_add.space(), key=["n"], store=store, key_buckets="pow2",
                                   isolate=False)(triton.jit(fn))
    through_run = tunekit.autotune(configs, key=["n"], store=None)(triton.jit(fn))
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    compiled = bare[(4,)](x, y, out, n, BLOCK=1024, num_warps=4)
    stream = torch.cuda.current_stream().cuda_stream
    calls = {
        "bare_jit": lambda: bare[(4,)](x, y, out, n, BLOCK=1024, num_warps=4),
        "bare_jit_grid_function": lambda: bare[grid](x, y, out, n, BLOCK=1024, num_warps=4),
        "stock_autotune": lambda: stock[grid](x, y, out, n),
        "tunekit_store_none": lambda: direct_none[grid](x, y, out, n),
        "tunekit_space_store": lambda: direct_space[grid](x, y, out, n),
        "tunekit_space_store_pow2": lambda: direct_pow2[grid](x, y, out, n),
        "tunekit_through_jit_run": lambda: through_run[grid](x, y, out, n),
        "compiled_kernel_launcher": lambda: compiled.run(4, 1, 1, stream, compiled.function, compiled.packed_metadata,
                                                         None, None, None, x, y, out, n, 1024),
    }
    for name, call in calls.items():
        out.zero_()
        started = time.perf_counter()
        if name == "tunekit_through_jit_run":
            without_direct_launch(call)
        else:
            call()
        torch.cuda.synchronize()
        print(json.dumps({"kind": "first_call", "name": name, "seconds": round(time.perf_counter() - started, 3)}),
              flush=True)
        call()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x + y)
    interleaved(calls, 2000, "bare_jit", "hotpath_us")


def gemm() -> None:
    m = n = k = 64
    a, b, c = matmul.inputs(m, n, k, device="cuda")
    configs = [triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=4, num_stages=3),
               triton.Config({"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=4, num_stages=3)]
    fn = matmul.matmul_kernel.fn
    bare = triton.jit(fn)
    stock = triton.autotune(configs, key=["M", "N", "K"])(triton.jit(fn))
    direct = tunekit.autotune(configs, key=["M", "N", "K"], store=None)(triton.jit(fn))
    through_run = tunekit.autotune(configs, key=["M", "N", "K"], store=None)(triton.jit(fn))
    grid = matmul.grid(m, n)
    strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    calls = {
        "bare_jit": lambda: bare[(1,)](a, b, c, m, n, k, *strides, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
                                       num_warps=4, num_stages=3),
        "stock_autotune": lambda: stock[grid](a, b, c, m, n, k, *strides),
        "tunekit": lambda: direct[grid](a, b, c, m, n, k, *strides),
        "tunekit_through_jit_run": lambda: through_run[grid](a, b, c, m, n, k, *strides),
    }
    for name, call in calls.items():
        c.fill_(float("nan"))
        without_direct_launch(call) if name == "tunekit_through_jit_run" else call()
        call()
        torch.cuda.synchronize()
        torch.testing.assert_close(c, matmul.reference(a, b), atol=1e-2, rtol=1e-2)
    interleaved(calls, 2000, "bare_jit", "gemm_us")


@triton.jit
def scaled_add(x_ptr, bias_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    value = tl.load(x_ptr + offsets, mask=mask) * 2
    if bias_ptr is not None:
        value += tl.load(bias_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, value, mask=mask)


class CountingRun:
    """``JITFunction.run`` of one kernel, counting its calls (the slow path)."""

    def __init__(self, jit) -> None:
        self.jit, self.run, self.calls = jit, jit.run, 0
        jit.run = self

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.run(*args, **kwargs)


def guard_matrix() -> None:
    configs = [triton.Config({"BLOCK": 1024}, num_warps=4), triton.Config({"BLOCK": 256}, num_warps=2)]
    stock = triton.autotune(configs, key=["n"])(triton.jit(scaled_add.fn))
    tuned = tunekit.autotune(configs, key=["n"], store=None, key_buckets="pow2")(triton.jit(scaled_add.fn))
    counting = CountingRun(tuned.fn)
    rows = []

    def check(name: str, x, bias, out, n, must_take_jit_run: bool, stream=None, **options) -> None:
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
        expected = torch.full_like(out, float("nan"))
        stock[grid](x, bias, expected, n, **options)
        before = counting.calls
        out.fill_(float("nan"))
        if stream is None:
            tuned[grid](x, bias, out, n, **options)
        else:
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                tuned[grid](x, bias, out, n)
            stream.synchronize()
        torch.cuda.synchronize()
        took = counting.calls > before
        rows.append({"call": name, "same_as_stock": bool(torch.equal(out[:n], expected[:n])),
                     "took_jit_run": took, "must_take_jit_run": must_take_jit_run})

    def tensors(n, dtype=torch.float32, offset=0):
        base = torch.randn(n + offset, device="cuda", dtype=dtype)
        return base[offset:], torch.randn(n, device="cuda", dtype=dtype), torch.empty(n, device="cuda", dtype=dtype)

    x, bias, out = tensors(4096)
    check("first call (tunes)", x, bias, out, 4096, True)
    check("the same call", x, bias, out, 4096, False)
    check("other aligned tensors", *tensors(4096), 4096, False)
    check("misaligned view, first", *tensors(4096, offset=1), 4096, True)
    check("misaligned view, again", *tensors(4096, offset=1), 4096, False)
    check("aligned again", x, bias, out, 4096, False)
    check("n = 4095 (same pow2 key, not divisible by 16), first", x, bias, out, 4095, True)
    check("n = 4095, again", x, bias, out, 4095, False)
    check("n = 1 (another key: tunes), first", x, bias, out, 1, True)
    check("n = 1, again", x, bias, out, 1, False)
    check("float16 (another key: tunes), first", *tensors(4096, torch.float16), 4096, True)
    check("float16, again", *tensors(4096, torch.float16), 4096, False)
    check("None bias, first", x, None, out, 4096, True)
    check("None bias, again", x, None, out, 4096, False)
    check("another stream", x, bias, out, 4096, False, stream=torch.cuda.Stream())
    check("a compile option with the call (enable_fp_fusion=False), first", x, bias, out, 4096, True,
          enable_fp_fusion=False)
    check("a compile option with the call, again", x, bias, out, 4096, True, enable_fp_fusion=False)
    check("without it again", x, bias, out, 4096, False)
    hooked = []
    hook = knobs.runtime.launch_enter_hook
    if hasattr(hook, "add"):
        def profiler(metadata) -> None:
            hooked.append(metadata)

        hook.add(profiler)
        check("a launch hook set (a profiler)", x, bias, out, 4096, True)
        hook.remove(profiler)
        check("the hook removed", x, bias, out, 4096, False)
    device_count = torch.cuda.device_count()
    if device_count > 1:
        with torch.cuda.device(1):
            check("another device, first", *[t.to("cuda:1") for t in (x, bias, out)], 4096, True)
    for row in rows:
        print(json.dumps({"kind": "guard", **row}), flush=True)
    wrong = [r["call"] for r in rows if not r["same_as_stock"] or r["took_jit_run"] != r["must_take_jit_run"]]
    print(json.dumps({"kind": "guard_summary", "calls": len(rows), "wrong": wrong, "launch_hook_calls": len(hooked),
                      "devices": device_count}), flush=True)

    # a config with a pre_hook: every call runs it, through JITFunction.run
    pre_hooked = []
    hooked_config = [triton.Config({"BLOCK": 1024}, num_warps=4, pre_hook=lambda nargs: pre_hooked.append(1))]
    with_hook = tunekit.autotune(hooked_config, key=["n"], store=None)(triton.jit(scaled_add.fn))
    grid = lambda meta: (triton.cdiv(4096, meta["BLOCK"]),)  # noqa: E731
    with_hook[grid](x, bias, out, 4096)  # tunes
    counting_hooked = CountingRun(with_hook.fn)
    pre_hooked.clear()
    for _ in range(3):
        with_hook[grid](x, bias, out, 4096)
    torch.cuda.synchronize()
    print(json.dumps({"kind": "pre_hook", "calls": 3, "jit_run_calls": counting_hooked.calls,
                      "pre_hook_calls_after_tuning": len(pre_hooked)}), flush=True)

    # CUDA graph capture of a cached call, then replay on new inputs
    graph = torch.cuda.CUDAGraph()
    capture_stream = torch.cuda.Stream()
    with torch.cuda.stream(capture_stream):
        tuned[grid](x, bias, out, 4096)  # warm on the capture stream
    capture_stream.synchronize()
    with torch.cuda.graph(graph):
        tuned[grid](x, bias, out, 4096)
    x.copy_(torch.randn_like(x))
    out.zero_()
    graph.replay()
    torch.cuda.synchronize()
    print(json.dumps({"kind": "cuda_graph", "right": bool(torch.allclose(out, 2 * x + bias))}), flush=True)

    # torch.compile around a tunekit kernel
    @torch.compile(fullgraph=True)
    def compiled(x, bias):
        result = torch.empty_like(x)
        size = x.numel()
        tuned[lambda meta: (triton.cdiv(size, meta["BLOCK"]),)](x, bias, result, size)
        return result

    try:
        right = bool(torch.allclose(compiled(x, bias), 2 * x + bias))
        print(json.dumps({"kind": "torch_compile", "right": right}), flush=True)
    except Exception as error:  # noqa: BLE001 - reported, not hidden
        print(json.dumps({"kind": "torch_compile", "right": False, "error": repr(error)[:500]}), flush=True)


def main() -> None:
    store = os.path.join(tempfile.mkdtemp(), "direct.db")
    print(json.dumps({"kind": "versions", "triton": triton.__version__, "torch": torch.__version__,
                      "device": torch.cuda.get_device_name()}), flush=True)
    guard_matrix()
    hot_path(store)
    gemm()


if __name__ == "__main__":
    main()
