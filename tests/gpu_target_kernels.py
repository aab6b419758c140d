"""Kernels for the compile-pool tests: compiled for an H100/H200 target on a CPU-only machine."""

import triton
import triton.language as tl


@triton.jit
def slow_to_compile(x_ptr, STEPS: tl.constexpr):
    # unrolled at compile time: STEPS large enough makes the compiler run for minutes
    acc = tl.load(x_ptr)
    for i in tl.static_range(STEPS):
        acc = acc * 1.0001 + i
    tl.store(x_ptr, acc)
