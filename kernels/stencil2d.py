"""One Jacobi step of the 2D heat equation: a five-point stencil on a float32 grid.

``out[i, j] = (1 - 4 alpha) x[i, j] + alpha (x[i-1, j] + x[i+1, j] + x[i, j-1] + x[i, j+1])``,
with zero outside the grid. A program takes BLOCK_X columns and ITER_Y strips of BLOCK_Y rows,
one strip after another (the strips' rows above and below come from L1 or L2, not from
registers); the tile's shape trades the reuse of the stencil's neighbours against parallelism.
Memory-bound, with no reduction and no tensor-core work.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from tunekit.space import Space

ALPHA = 0.2


@triton.jit
def stencil2d_kernel(
    x_ptr, out_ptr, H, W, stride, alpha,
    BLOCK_Y: tl.constexpr, BLOCK_X: tl.constexpr, ITER_Y: tl.constexpr,
):
    pid_x = tl.program_id(0)
    pid_y = tl.program_id(1)
    cols = pid_x * BLOCK_X + tl.arange(0, BLOCK_X)
    col_mask = cols < W
    left_mask = col_mask & (cols > 0)
    right_mask = (cols + 1) < W
    for strip in range(ITER_Y):
        rows = (pid_y * ITER_Y + strip) * BLOCK_Y + tl.arange(0, BLOCK_Y)
        row_mask = rows < H
        offsets = rows.to(tl.int64)[:, None] * stride + cols[None, :]
        mask = row_mask[:, None] & col_mask[None, :]
        centre = tl.load(x_ptr + offsets, mask=mask, other=0.0)
        up = tl.load(x_ptr + offsets - stride, mask=mask & (rows > 0)[:, None], other=0.0)
        down = tl.load(x_ptr + offsets + stride, mask=mask & ((rows + 1) < H)[:, None], other=0.0)
        left = tl.load(x_ptr + offsets - 1, mask=row_mask[:, None] & left_mask[None, :], other=0.0)
        right = tl.load(x_ptr + offsets + 1, mask=row_mask[:, None] & right_mask[None, :], other=0.0)
        result = (1 - 4 * alpha) * centre + alpha * (up + down + left + right)
        tl.store(out_ptr + offsets, result, mask=mask)


def fits_tile(config: Mapping[str, Any]) -> bool:
    """Between 1 and 32 points per thread in a strip."""
    points = config["BLOCK_Y"] * config["BLOCK_X"]
    return 32 * config["num_warps"] <= points <= 32 * 32 * config["num_warps"]


def space() -> Space:
    """Strips of 1 to 32 rows by 32 to 512 columns, 1 to 8 strips per program, 1 to 8 warps, 1 or 3 stages
    (the strips' loop pipelined or not)."""
    return Space(
        BLOCK_Y=[1, 2, 4, 8, 16, 32], BLOCK_X=[32, 64, 128, 256, 512], ITER_Y=[1, 2, 4, 8],
        num_warps=[1, 2, 4, 8], num_stages=[1, 3],
        constraints=[fits_tile],
    )


def inputs(h: int, w: int, dtype=torch.float32, device: str = "cpu", seed: int = 0):
    """The grid x (h, w) and the output poisoned with NaN."""
    generator = torch.Generator(device=device).manual_seed(seed)
    x = torch.rand(h, w, generator=generator, device=device).to(dtype)
    return x, torch.full_like(x, float("nan"))


def launch(kernel, x: torch.Tensor, out: torch.Tensor, **meta) -> None:
    h, w = x.shape
    if x.stride(1) != 1 or out.shape != x.shape or out.stride() != x.stride():
        raise ValueError(f"stencil2d: x with contiguous rows and out of its shape and strides; got x strides "
                         f"{x.stride()}, out {tuple(out.shape)} strides {out.stride()}")
    kernel[lambda config: (triton.cdiv(w, config["BLOCK_X"]), triton.cdiv(h, config["BLOCK_Y"] * config["ITER_Y"]))](
        x, out, h, w, x.stride(0), ALPHA, **meta)


def reference(x: torch.Tensor) -> torch.Tensor:
    padded = torch.nn.functional.pad(x.float(), (1, 1, 1, 1))
    neighbours = padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:]
    return (1 - 4 * ALPHA) * x.float() + ALPHA * neighbours


def torch_conv(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """The same step as a single-channel 3x3 ``F.conv2d`` with zero padding: a PyTorch equivalent,
    not the fastest PyTorch can do (a single-channel convolution is a slow path; in float32 it
    may use TF32)."""
    return torch.nn.functional.conv2d(x[None, None], stencil_filter(x.device, x.dtype), padding=1)[0, 0]


@functools.cache
def stencil_filter(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """The step as a (1, 1, 3, 3) filter, made once per device and dtype (not in the timed calls)."""
    return torch.tensor([[0, ALPHA, 0], [ALPHA, 1 - 4 * ALPHA, ALPHA], [0, ALPHA, 0]], device=device,
                        dtype=dtype)[None, None]
