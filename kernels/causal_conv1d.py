"""Depthwise causal 1D convolution with SiLU, as Mamba's blocks run it over the sequence.

``out[b, t, d] = silu(bias[d] + sum_w weight[d, w] x[b, t - WIDTH + 1 + w, d])`` with zero before
the sequence's start, x and out (batch, seqlen, dim) channels-last in float16. A program takes
BLOCK_D channels and ITER_L chunks of BLOCK_L time steps of one sequence, one chunk after another;
each chunk loads its WIDTH shifted windows of x (the overlap comes from L1), so the tile's shape
trades reuse against parallelism. Memory-bound, no reduction across programs.

The batch size is not a kernel argument (it is the grid's third axis), so a tuning key can name
only ``seqlen`` and ``dim``: the recorded shapes differ there, but a user's batch 1 and batch 32
would share one winner, and a perf model would see a batch-32 shape as small. A later version
should pass the batch to key on it (the recorded spaces are of this one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from tunekit.space import Space

#: The filter's width (Mamba's d_conv).
WIDTH = 4


@triton.jit
def causal_conv1d_kernel(
    x_ptr, weight_ptr, bias_ptr, out_ptr, seqlen, dim, stride_b, stride_t,
    WIDTH: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_D: tl.constexpr, ITER_L: tl.constexpr,
):
    pid_l = tl.program_id(0)
    pid_d = tl.program_id(1)
    batch = tl.program_id(2)
    channels = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    channel_mask = channels < dim
    bias = tl.load(bias_ptr + channels, mask=channel_mask, other=0.0).to(tl.float32)
    x_base = x_ptr + batch.to(tl.int64) * stride_b
    out_base = out_ptr + batch.to(tl.int64) * stride_b
    for chunk in range(ITER_L):
        steps = (pid_l * ITER_L + chunk) * BLOCK_L + tl.arange(0, BLOCK_L)
        acc = tl.zeros((BLOCK_L, BLOCK_D), dtype=tl.float32) + bias[None, :]
        for w in tl.static_range(WIDTH):
            source = steps - (WIDTH - 1) + w
            mask = ((source >= 0) & (source < seqlen))[:, None] & channel_mask[None, :]
            x = tl.load(x_base + source[:, None] * stride_t + channels[None, :], mask=mask, other=0.0)
            tap = tl.load(weight_ptr + channels * WIDTH + w, mask=channel_mask, other=0.0)
            acc += x.to(tl.float32) * tap.to(tl.float32)[None, :]
        result = acc / (1 + tl.exp(-acc))
        mask = (steps < seqlen)[:, None] & channel_mask[None, :]
        tl.store(out_base + steps[:, None] * stride_t + channels[None, :], result.to(out_ptr.dtype.element_ty),
                 mask=mask)


def fits_tile(config: Mapping[str, Any]) -> bool:
    """Between 1 and 64 float32 accumulators per thread."""
    points = config["BLOCK_L"] * config["BLOCK_D"]
    return 32 * config["num_warps"] <= points <= 64 * 32 * config["num_warps"]


def space() -> Space:
    """Chunks of 8 to 128 time steps by 32 to 512 channels, 1 to 8 chunks per program, 1 to 8 warps, 1 or 3
    stages (the chunks' loop pipelined or not)."""
    return Space(
        BLOCK_L=[8, 16, 32, 64, 128], BLOCK_D=[32, 64, 128, 256, 512], ITER_L=[1, 2, 4, 8],
        num_warps=[1, 2, 4, 8], num_stages=[1, 3],
        constraints=[fits_tile],
    )


def inputs(batch: int, seqlen: int, dim: int, dtype=torch.float16, device: str = "cpu", seed: int = 0):
    """x (batch, seqlen, dim), weight (dim, WIDTH), bias (dim,), out poisoned with NaN."""
    generator = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(batch, seqlen, dim, generator=generator, device=device).to(dtype)
    weight = (torch.randn(dim, WIDTH, generator=generator, device=device) / WIDTH**0.5).to(dtype)
    bias = (torch.randn(dim, generator=generator, device=device) * 0.1).to(dtype)
    return x, weight, bias, torch.full_like(x, float("nan"))


def launch(kernel, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out: torch.Tensor, **meta) -> None:
    batch, seqlen, dim = x.shape
    if x.stride(2) != 1 or out.shape != x.shape or out.stride() != x.stride() or not weight.is_contiguous():
        raise ValueError(f"causal_conv1d: x channels-last (dim contiguous), out of x's shape and strides, a "
                         f"contiguous weight; got x strides {x.stride()}, out strides {out.stride()}")
    kernel[lambda config: (triton.cdiv(seqlen, config["BLOCK_L"] * config["ITER_L"]),
                           triton.cdiv(dim, config["BLOCK_D"]), batch)](
        x, weight, bias, out, seqlen, dim, x.stride(0), x.stride(1), WIDTH=WIDTH, **meta)


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return torch_conv1d(x.float(), weight.float(), bias.float(), None)


def torch_conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """``F.conv1d`` with one group per channel, padded WIDTH - 1 on the left, then ``F.silu``; x is
    viewed channels-first (strided, as a channels-last caller would pass it); ``out`` is unused (it
    returns a new tensor, a channels-first one viewed channels-last)."""
    seqlen = x.shape[1]
    y = torch.nn.functional.conv1d(x.transpose(1, 2), weight[:, None, :], bias, padding=WIDTH - 1,
                                   groups=x.shape[2])[..., :seqlen]
    return torch.nn.functional.silu(y).transpose(1, 2)
