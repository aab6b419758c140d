"""RMSNorm forward: y = x / sqrt(mean(x^2) + eps) * weight, one or more rows per program."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import _rows


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y, eps,
                   BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    columns = tl.arange(0, BLOCK_N)
    squares = tl.zeros((ROWS,), tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        mask = row_mask[:, None] & ((start + columns) < n_cols)[None, :]
        x = tl.load(x_ptr + rows[:, None] * stride_x + (start + columns)[None, :], mask=mask, other=0.0)
        x = x.to(tl.float32)
        squares += tl.sum(x * x, axis=1)
    scale = 1.0 / tl.sqrt(squares / n_cols + eps)
    for start in range(0, n_cols, BLOCK_N):
        column_mask = (start + columns) < n_cols
        mask = row_mask[:, None] & column_mask[None, :]
        x = tl.load(x_ptr + rows[:, None] * stride_x + (start + columns)[None, :], mask=mask, other=0.0)
        w = tl.load(w_ptr + start + columns, mask=column_mask, other=0.0).to(tl.float32)
        y = x.to(tl.float32) * scale[:, None] * w[None, :]
        tl.store(y_ptr + rows[:, None] * stride_y + (start + columns)[None, :], y.to(y_ptr.dtype.element_ty),
                 mask=mask)


space = _rows.space
grid = _rows.grid


def inputs(n_rows: int, n_cols: int, dtype=torch.float16, device: str = "cpu", seed: int = 0):
    generator = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(n_rows, n_cols, generator=generator).to(device=device, dtype=dtype)
    w = (1 + 0.1 * torch.randn(n_cols, generator=generator)).to(device=device, dtype=dtype)
    return x, w, torch.full_like(x, float("nan"))


EPS = 1e-6


def launch(kernel, x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, **meta) -> None:
    n_rows, n_cols = x.shape
    kernel[grid(n_rows)](x, w, y, n_rows, n_cols, x.stride(0), y.stride(0), EPS, **meta)


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(x.dtype)
