"""Does a tunekit kernel work inside ``torch.compile`` the way a ``triton.autotune`` kernel does?

For each decorator, a vector add over a 4-config list is first tuned by an eager call, then
called from a ``torch.compile``d function. Inductor, when it traces an autotuner, benchmarks
every entry of its ``configs`` itself. Reported: whether the output is right, how many configs
each decorator's own ``do_bench`` timed eagerly and under compile, and how many configs the
decorator offered Inductor.

    python benchmarks/torch_compile_check.py

Needs a GPU.
"""

from __future__ import annotations

import traceback

import torch
import triton

import tunekit
from tunekit.kernels import vector_add


def check(name: str, decorate) -> None:
    timed = []

    def counting_bench(kernel_call, quantiles):
        timed.append(1)
        return triton.testing.do_bench(kernel_call, warmup=5, rep=20, quantiles=quantiles)

    configs = [triton.Config({"BLOCK": b}, num_warps=w) for b in (256, 1024) for w in (2, 4)]
    kernel = decorate(configs, key=["n"], do_bench=counting_bench)(triton.jit(vector_add.add_kernel.fn))

    @torch.compile(fullgraph=True)
    def add(x, y):
        out = torch.empty_like(x)
        n = x.numel()
        kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
        return out

    x, y, eager = vector_add.inputs(1 << 20, device="cuda")
    kernel[vector_add.grid(x.numel())](x, y, eager, x.numel())  # tunes eagerly
    timed_eagerly = len(timed)
    try:
        out = add(x, y)
        again = add(x, y)
        correct = torch.equal(out, x + y) and torch.equal(again, x + y) and torch.equal(eager, x + y)
        print(f"  {name:<16} output correct: {correct}; timed by its own do_bench: eagerly {timed_eagerly}, "
              f"under torch.compile {len(timed) - timed_eagerly}; configs offered to Inductor: {len(kernel.configs)}")
    except Exception:
        print(f"  {name:<16} FAILED under torch.compile:")
        traceback.print_exc(limit=3)


def main() -> None:
    print(f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}")
    check("triton.autotune", triton.autotune)
    check("tunekit.autotune", lambda *a, **k: tunekit.autotune(*a, store=None, **k))


if __name__ == "__main__":
    main()
