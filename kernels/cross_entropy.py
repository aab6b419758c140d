"""Cross-entropy over a large vocabulary: the loss per row and the gradient of the mean loss, fused.

One program takes ROWS rows of logits. A first pass over the vocabulary in BLOCK_V tiles keeps an
online max and sum of exponentials (and picks up the target's logit); the second pass writes the
gradient of the mean loss, (softmax - one_hot(target)) / n_valid, as Liger-Kernel's and
FlagGems' fused cross-entropy kernels do, so that the backward pass needs no second read of the
loss. Rows whose target is ``ignore_index`` get a zero loss and a zero gradient, and do not count
in n_valid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from tunekit.space import Space

IGNORE_INDEX = -100


@triton.jit
def cross_entropy_kernel(
    logits_ptr, targets_ptr, loss_ptr, grad_ptr, n_rows, n_cols, stride_logits, stride_grad, ignore_index,
    inv_n_valid,
    BLOCK_V: tl.constexpr, ROWS: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    target = tl.load(targets_ptr + rows, mask=row_mask, other=ignore_index).to(tl.int32)
    valid = row_mask & (target != ignore_index)
    logits_rows = logits_ptr + rows.to(tl.int64)[:, None] * stride_logits
    grad_rows = grad_ptr + rows.to(tl.int64)[:, None] * stride_grad
    cols = tl.arange(0, BLOCK_V)
    running_max = tl.full((ROWS,), float("-inf"), tl.float32)
    running_sum = tl.zeros((ROWS,), tl.float32)
    target_logit = tl.zeros((ROWS,), tl.float32)
    for start in range(0, n_cols, BLOCK_V):
        mask = row_mask[:, None] & ((start + cols) < n_cols)[None, :]
        x = tl.load(logits_rows + (start + cols)[None, :], mask=mask, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(running_max, tl.max(x, axis=1))
        safe_max = tl.where(new_max == float("-inf"), 0.0, new_max)  # rows past the end: all -inf
        running_sum = running_sum * tl.exp(running_max - safe_max) + tl.sum(tl.exp(x - safe_max[:, None]), axis=1)
        running_max = new_max
        target_logit += tl.sum(tl.where((start + cols)[None, :] == target[:, None], x, 0.0), axis=1)
    safe_max = tl.where(running_max == float("-inf"), 0.0, running_max)
    lse = safe_max + tl.log(tl.where(running_sum == 0.0, 1.0, running_sum))
    tl.store(loss_ptr + rows, tl.where(valid, lse - target_logit, 0.0), mask=row_mask)
    scale = tl.where(valid, inv_n_valid, 0.0)
    for start in range(0, n_cols, BLOCK_V):
        mask = row_mask[:, None] & ((start + cols) < n_cols)[None, :]
        x = tl.load(logits_rows + (start + cols)[None, :], mask=mask, other=float("-inf")).to(tl.float32)
        probability = tl.exp(x - lse[:, None])
        grad = tl.where((start + cols)[None, :] == target[:, None], probability - 1.0, probability) * scale[:, None]
        tl.store(grad_rows + (start + cols)[None, :], grad.to(grad_ptr.dtype.element_ty), mask=mask)


def fits_registers(config: Mapping[str, Any]) -> bool:
    """From 4 to 128 elements of a tile per thread: fewer leaves threads idle, more spills."""
    per_thread = config["BLOCK_V"] * config["ROWS"] // (32 * config["num_warps"])
    return 4 <= per_thread <= 128


def space() -> Space:
    """Vocabulary tile, rows per program and warps (num_stages left out: it does not change a
    loop without a dot, as the recorded softmax and RMSNorm spaces showed): 96 configs."""
    return Space(
        BLOCK_V=[512, 1024, 2048, 4096, 8192, 16384, 32768], ROWS=[1, 2, 4, 8], num_warps=[2, 4, 8, 16, 32],
        constraints=[fits_registers],
    )


def inputs(n_rows: int, n_cols: int, dtype=torch.bfloat16, device: str = "cpu", seed: int = 0):
    """Logits (n_rows, n_cols), drawn on ``device`` (hundreds of millions at the real shapes), int64
    targets with about 1 in 16 ignored, the float32 loss per row and the gradient (of the logits'
    dtype), both poisoned with NaN."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    device_generator = torch.Generator(device=device).manual_seed(seed)
    logits = (4 * torch.randn(n_rows, n_cols, generator=device_generator, device=device)).to(dtype)
    targets = torch.randint(0, n_cols, (n_rows,), generator=generator)
    targets[torch.rand(n_rows, generator=generator) < 1 / 16] = IGNORE_INDEX
    loss = torch.full((n_rows,), float("nan"), device=device, dtype=torch.float32)
    return logits, targets.to(device), loss, torch.full_like(logits, float("nan"))


def launch(kernel, logits: torch.Tensor, targets: torch.Tensor, loss: torch.Tensor, grad: torch.Tensor,
           **meta) -> None:
    n_rows, n_cols = logits.shape
    n_valid = max(int((targets != IGNORE_INDEX).sum()), 1)
    kernel[lambda config: (triton.cdiv(n_rows, config["ROWS"]),)](
        logits, targets, loss, grad, n_rows, n_cols, logits.stride(0), grad.stride(0), IGNORE_INDEX, 1.0 / n_valid,
        **meta)


def reference(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The loss per row and the gradient of the mean loss, in float32 (autograd of ``F.cross_entropy``)."""
    x = logits.float().requires_grad_()
    loss = torch.nn.functional.cross_entropy(x, targets, ignore_index=IGNORE_INDEX, reduction="none")
    n_valid = max(int((targets != IGNORE_INDEX).sum()), 1)
    (loss.sum() / n_valid).backward()
    assert x.grad is not None
    return loss.detach(), x.grad


def torch_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, loss: torch.Tensor,
                        grad: torch.Tensor) -> torch.Tensor:
    """What PyTorch runs for the same: the loss and its gradient (log-softmax forward and backward)."""
    x = logits.detach().requires_grad_()
    torch.nn.functional.cross_entropy(x, targets, ignore_index=IGNORE_INDEX).backward()
    assert x.grad is not None
    return x.grad
