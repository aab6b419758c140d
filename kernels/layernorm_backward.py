"""Layer-norm backward: dx, and dw, db through a partial-sum buffer and a second reduction kernel.

As in Triton's layer-norm tutorial: the first kernel computes dx row by row and adds each
program's share of dw = sum(dy * xhat) and db = sum(dy) into one of GROUP_SIZE_M rows of a float32
partial-sum buffer, taking that row's spin lock (``atomic_cas``) for the addition; the first
program to take a row stores instead of adding, and marks it in a count array. The second kernel
sums the marked rows into dw and db. Unlike the tutorial, which holds a whole row in registers,
the first kernel walks the columns in BLOCK_N tiles (one pass for the row sums, one for dx, one
under the lock for the partial sums), and a program takes ROWS rows, so that one space serves
every hidden size: BLOCK_N, ROWS, GROUP_SIZE_M and the warps of the first kernel are tuned; the
second kernel's launch is fixed. Locks and counts must be zero before each launch
(``reset_to_zero=["lock_ptr"]``; ``launch`` zeroes them).

dx, dw and db are written into one (n_rows + 2, n_cols) tensor of x's dtype: rows 0..n_rows-1
hold dx, the last two dw and db (so that one output holds every result of the backward pass).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from tunekit.space import Space

#: Rows of the partial-sum buffers: the largest GROUP_SIZE_M of the space. The lock array holds
#: GROUPS locks, then GROUPS counts.
GROUPS = 256
MAX_GROUPS = tl.constexpr(GROUPS)
EPS = 1e-5


@triton.jit
def layernorm_bwd_dx_kernel(
    dx_ptr, dy_ptr, dw_partial_ptr, db_partial_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, lock_ptr,
    n_rows, n_cols, stride,
    BLOCK_N: tl.constexpr, ROWS: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    row_offsets = rows.to(tl.int64)[:, None] * stride
    cols = tl.arange(0, BLOCK_N)
    mean = tl.load(mean_ptr + rows, mask=row_mask, other=0.0)
    rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
    # pass 1: the row sums c1 = mean(xhat * w * dy) and c2 = mean(w * dy)
    c1 = tl.zeros((ROWS,), dtype=tl.float32)
    c2 = tl.zeros((ROWS,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        col_mask = (start + cols) < n_cols
        mask = row_mask[:, None] & col_mask[None, :]
        x = tl.load(x_ptr + row_offsets + (start + cols)[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row_offsets + (start + cols)[None, :], mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=col_mask, other=0.0).to(tl.float32)
        xhat = tl.where(mask, (x - mean[:, None]) * rstd[:, None], 0.0)
        wdy = w[None, :] * dy
        c1 += tl.sum(xhat * wdy, axis=1)
        c2 += tl.sum(wdy, axis=1)
    c1 = c1 / n_cols
    c2 = c2 / n_cols
    # pass 2: dx
    for start in range(0, n_cols, BLOCK_N):
        col_mask = (start + cols) < n_cols
        mask = row_mask[:, None] & col_mask[None, :]
        x = tl.load(x_ptr + row_offsets + (start + cols)[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row_offsets + (start + cols)[None, :], mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=col_mask, other=0.0).to(tl.float32)
        xhat = (x - mean[:, None]) * rstd[:, None]
        dx = (w[None, :] * dy - (xhat * c1[:, None] + c2[:, None])) * rstd[:, None]
        tl.store(dx_ptr + row_offsets + (start + cols)[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)
    # pass 3, under the lock of partial-sum row lock_id: add this program's sums of dy * xhat and dy
    lock_id = pid % GROUP_SIZE_M
    lock = lock_ptr + lock_id
    count = lock_ptr + MAX_GROUPS + lock_id
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    # the columns already holding sums: every one once a program stored into this row, else none
    filled = tl.where(tl.load(count) != 0, n_cols, 0)
    for start in range(0, n_cols, BLOCK_N):
        col_mask = (start + cols) < n_cols
        mask = row_mask[:, None] & col_mask[None, :]
        x = tl.load(x_ptr + row_offsets + (start + cols)[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row_offsets + (start + cols)[None, :], mask=mask, other=0.0).to(tl.float32)
        xhat = tl.where(mask, (x - mean[:, None]) * rstd[:, None], 0.0)
        partial = lock_id * n_cols + start + cols
        add = (start + cols) < filled
        dw = tl.sum(dy * xhat, axis=0) + tl.load(dw_partial_ptr + partial, mask=add, other=0.0)
        db = tl.sum(dy, axis=0) + tl.load(db_partial_ptr + partial, mask=add, other=0.0)
        tl.store(dw_partial_ptr + partial, dw, mask=col_mask)
        tl.store(db_partial_ptr + partial, db, mask=col_mask)
    tl.atomic_xchg(count, 1)
    tl.debug_barrier()
    tl.atomic_xchg(lock, 0)


@triton.jit
def layernorm_bwd_dwdb_kernel(dw_partial_ptr, db_partial_ptr, count_ptr, dw_ptr, db_ptr, n_groups, n_cols,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Sum the partial-sum rows marked in ``count_ptr`` into dw and db, BLOCK_N columns per program."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    dw = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start in range(0, n_groups, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        used = tl.load(count_ptr + rows, mask=rows < n_groups, other=0) != 0
        mask = used[:, None] & (cols[None, :] < n_cols)
        offsets = rows[:, None] * n_cols + cols[None, :]
        dw += tl.load(dw_partial_ptr + offsets, mask=mask, other=0.0)
        db += tl.load(db_partial_ptr + offsets, mask=mask, other=0.0)
    tl.store(dw_ptr + cols, tl.sum(dw, axis=0).to(dw_ptr.dtype.element_ty), mask=cols < n_cols)
    tl.store(db_ptr + cols, tl.sum(db, axis=0).to(db_ptr.dtype.element_ty), mask=cols < n_cols)


def fits_registers(config: Mapping[str, Any]) -> bool:
    """Keep one tile within what a program can hold: at most 64 elements per thread."""
    return config["BLOCK_N"] * config["ROWS"] <= 64 * 32 * config["num_warps"]


def space() -> Space:
    """Column tile, rows per program, partial-sum rows (locks) and warps of the dx kernel: 164 configs."""
    return Space(
        BLOCK_N=[512, 1024, 2048, 4096, 8192], ROWS=[1, 2, 4], GROUP_SIZE_M=[32, 64, 128, 256],
        num_warps=[4, 8, 16],
        constraints=[fits_registers],
    )


def inputs(n_rows: int, n_cols: int, dtype=torch.float16, device: str = "cpu", seed: int = 0):
    """x, dy, w, the forward pass's mean and rstd (float32), the float32 partial-sum buffers,
    the int32 locks and counts, and the output (n_rows + 2, n_cols) poisoned with NaN."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    x = (2 * torch.randn(n_rows, n_cols, generator=generator) + 0.5).to(dtype)
    dy = torch.randn(n_rows, n_cols, generator=generator).to(dtype)
    w = (1 + 0.1 * torch.randn(n_cols, generator=generator)).to(dtype)
    mean = x.float().mean(dim=1)
    rstd = torch.rsqrt(x.float().var(dim=1, unbiased=False) + EPS)
    partial = torch.zeros(2, GROUPS, n_cols, dtype=torch.float32)
    locks = torch.zeros(2 * GROUPS, dtype=torch.int32)
    out = torch.full((n_rows + 2, n_cols), float("nan"), dtype=dtype)
    return tuple(t.to(device) for t in (x, dy, w, mean, rstd, partial[0], partial[1], locks, out))


def launch(kernel, x: torch.Tensor, dy: torch.Tensor, w: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor,
           dw_partial: torch.Tensor, db_partial: torch.Tensor, locks: torch.Tensor, out: torch.Tensor,
           **meta) -> None:
    """The tuned dx kernel (``kernel``), then the fixed reduction into dw and db."""
    n_rows, n_cols = x.shape
    locks.zero_()
    dx = out[:n_rows]
    kernel[lambda config: (triton.cdiv(n_rows, config["ROWS"]),)](
        dx, dy, dw_partial, db_partial, x, w, mean, rstd, locks, n_rows, n_cols, x.stride(0), **meta)
    layernorm_bwd_dwdb_kernel[(triton.cdiv(n_cols, 128),)](
        dw_partial, db_partial, locks[GROUPS:], out[n_rows], out[n_rows + 1], GROUPS, n_cols,
        BLOCK_M=32, BLOCK_N=128, num_warps=4)


def reference(x: torch.Tensor, dy: torch.Tensor, w: torch.Tensor, mean: torch.Tensor,
              rstd: torch.Tensor) -> torch.Tensor:
    """dx, dw and db in float32 stacked as the kernels write them, (n_rows + 2, n_cols)."""
    x32, dy32, w32 = x.float(), dy.float(), w.float()
    xhat = (x32 - mean[:, None]) * rstd[:, None]
    wdy = w32 * dy32
    c1 = (xhat * wdy).mean(dim=1, keepdim=True)
    c2 = wdy.mean(dim=1, keepdim=True)
    dx = (wdy - (xhat * c1 + c2)) * rstd[:, None]
    return torch.cat([dx, (dy32 * xhat).sum(dim=0)[None], dy32.sum(dim=0)[None]])


def torch_backward(x: torch.Tensor, dy: torch.Tensor, w: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor,
                   *workspace: torch.Tensor) -> tuple:
    """PyTorch's layer-norm backward on the same inputs (``aten.native_layer_norm_backward``: dx, dw,
    db). Its CUDA kernels take the statistics in float32; the CPU's in x's dtype."""
    arguments = (dy, x, [x.shape[1]], mean[:, None], rstd[:, None], w, torch.zeros_like(w), [True, True, True])
    try:
        return torch.ops.aten.native_layer_norm_backward(*arguments)
    except RuntimeError:
        statistics = (mean[:, None].to(x.dtype), rstd[:, None].to(x.dtype))
        return torch.ops.aten.native_layer_norm_backward(*arguments[:3], *statistics, *arguments[5:])
