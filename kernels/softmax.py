"""Row softmax with an online (single-pass) max and sum over column tiles, then a normalising pass.

Tiling the columns makes any row length work with a bounded register footprint, and makes the
tile width, the rows per program and the warps real trade-offs: a space worth tuning.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import _rows


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y, BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    columns = tl.arange(0, BLOCK_N)
    running_max = tl.full((ROWS,), float("-inf"), tl.float32)
    running_sum = tl.zeros((ROWS,), tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        mask = row_mask[:, None] & ((start + columns) < n_cols)[None, :]
        x = tl.load(x_ptr + rows[:, None] * stride_x + (start + columns)[None, :], mask=mask,
                    other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(running_max, tl.max(x, axis=1))
        # rows that are entirely masked keep -inf; guard the rescale against inf - inf
        safe_max = tl.where(new_max == float("-inf"), 0.0, new_max)
        running_sum = running_sum * tl.exp(running_max - safe_max) + tl.sum(tl.exp(x - safe_max[:, None]), axis=1)
        running_max = new_max
    safe_max = tl.where(running_max == float("-inf"), 0.0, running_max)
    running_sum = tl.where(running_sum == 0.0, 1.0, running_sum)  # rows past the end: never stored
    for start in range(0, n_cols, BLOCK_N):
        mask = row_mask[:, None] & ((start + columns) < n_cols)[None, :]
        x = tl.load(x_ptr + rows[:, None] * stride_x + (start + columns)[None, :], mask=mask,
                    other=float("-inf")).to(tl.float32)
        y = tl.exp(x - safe_max[:, None]) / running_sum[:, None]
        tl.store(y_ptr + rows[:, None] * stride_y + (start + columns)[None, :], y.to(y_ptr.dtype.element_ty),
                 mask=mask)


space = _rows.space
grid = _rows.grid


def inputs(n_rows: int, n_cols: int, dtype=torch.float16, device: str = "cpu", seed: int = 0):
    generator = torch.Generator(device="cpu").manual_seed(seed)
    x = (torch.randn(n_rows, n_cols, generator=generator) * 3).to(device=device, dtype=dtype)
    return x, torch.full_like(x, float("nan"))


def launch(kernel, x: torch.Tensor, y: torch.Tensor, **meta) -> None:
    n_rows, n_cols = x.shape
    kernel[grid(n_rows)](x, y, n_rows, n_cols, x.stride(0), y.stride(0), **meta)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
