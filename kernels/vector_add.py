"""Vector addition: the smallest real kernel, launch-bound at small sizes (hot-path benchmark)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from tunekit.space import Space


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def space() -> Space:
    return Space(BLOCK=[128, 256, 512, 1024, 2048], num_warps=[1, 2, 4, 8])


def grid(n: int):
    """The launch grid for ``n`` elements. It closes over ``n`` instead of reading ``meta["n"]``:
    Triton 3.6's interpreter passes scalar arguments to grid functions as its own tensors,
    which recent numpy refuses to turn into an int."""
    return lambda meta: (triton.cdiv(n, meta["BLOCK"]),)


def inputs(n: int, device: str = "cpu", seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(n, generator=generator).to(device)
    y = torch.randn(n, generator=generator).to(device)
    return x, y, torch.full_like(x, float("nan"))


def launch(kernel, x: torch.Tensor, y: torch.Tensor, out: torch.Tensor, **meta) -> None:
    kernel[grid(x.numel())](x, y, out, x.numel(), **meta)


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y
