"""Split-K matrix-vector product for decode: y = W x, W (N, K) in float16 as ``nn.Linear`` stores it.

A memory-bound kernel with no tensor-core work: each program multiplies BLOCK_N rows of W by x
over one of SPLIT_K slices of K, walking its slice in BLOCK_K tiles with a (BLOCK_N, BLOCK_K)
float32 accumulator that is summed along K once at the end. With SPLIT_K > 1 the slices' sums
meet in y by ``atomic_add``, so y is float32 and must be zero before every launch, not only
while tuning (``reset_to_zero=["y_ptr"]`` there; ``inputs`` zeroes it): with SPLIT_K = 1 the one
slice stores, so a y left unzeroed is right with some configs and wrong with others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from tunekit.space import Space


@triton.jit
def gemv_kernel(
    w_ptr, x_ptr, y_ptr, N, K, stride_wn,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    cols = tl.arange(0, BLOCK_K)
    tiles = tl.cdiv(K, BLOCK_K)
    per_split = tl.cdiv(tiles, SPLIT_K)
    w_rows = w_ptr + rows.to(tl.int64)[:, None] * stride_wn
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for tile in range(pid_k * per_split, tl.minimum((pid_k + 1) * per_split, tiles)):
        offsets = tile * BLOCK_K + cols
        col_mask = offsets < K
        x = tl.load(x_ptr + offsets, mask=col_mask, other=0.0).to(tl.float32)
        w = tl.load(w_rows + offsets[None, :], mask=row_mask[:, None] & col_mask[None, :], other=0.0)
        acc += w.to(tl.float32) * x[None, :]
    total = tl.sum(acc, axis=1)
    if SPLIT_K == 1:
        tl.store(y_ptr + rows, total, mask=row_mask)
    else:
        tl.atomic_add(y_ptr + rows, total, mask=row_mask)


def fits_registers(config: Mapping[str, Any]) -> bool:
    """At most 64 float32 accumulators per thread, and at least two."""
    tile = config["BLOCK_N"] * config["BLOCK_K"]
    return 2 * 32 * config["num_warps"] <= tile <= 64 * 32 * config["num_warps"]


def space() -> Space:
    """Row tiles of 4 to 64, K tiles of 64 to 1024, 1 to 8 slices of K, 1 to 8 warps, 1 to 3 stages."""
    return Space(
        BLOCK_N=[4, 8, 16, 32, 64], BLOCK_K=[64, 128, 256, 512, 1024], SPLIT_K=[1, 2, 4, 8],
        num_warps=[1, 2, 4, 8], num_stages=[1, 2, 3],
        constraints=[fits_registers],
    )


def inputs(n: int, k: int, dtype=torch.float16, device: str = "cpu", seed: int = 0):
    """W (n, k) and x (k,) of ``dtype``, and y (n,) in float32, zeroed (the slices add into it)."""
    generator = torch.Generator(device=device).manual_seed(seed)
    w = (torch.randn(n, k, generator=generator, device=device) / k**0.5).to(dtype)
    x = torch.randn(k, generator=generator, device=device).to(dtype)
    return w, x, torch.zeros(n, device=device, dtype=torch.float32)


def launch(kernel, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, **meta) -> None:
    n, k = w.shape
    if w.stride(1) != 1 or not (x.is_contiguous() and y.is_contiguous()) or x.shape != (k,) or y.shape != (n,):
        raise ValueError(f"gemv: W (n, k) with contiguous rows, x ({k},) and y ({n},) contiguous; got W "
                         f"{tuple(w.shape)} strides {w.stride()}, x {tuple(x.shape)}, y {tuple(y.shape)}")
    kernel[lambda config: (triton.cdiv(n, config["BLOCK_N"]), config["SPLIT_K"])](w, x, y, n, k, w.stride(0), **meta)


def reference(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return w.float() @ x.float()


def torch_mv(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """PyTorch's product in W's dtype (``y`` unused: it returns a new tensor)."""
    return torch.mv(w, x)
