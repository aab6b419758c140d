"""2D convolution as an implicit GEMM, channels-last (NHWC), with stride and padding.

y[n, p, q, k] = sum over r, s, c of x[n, p * stride - pad + r, q * stride - pad + s, c] * w[k, r, s, c]:
a GEMM of M = N * P * Q output pixels by K output channels over R * S * C, whose A tiles are
gathered from x on the fly (no im2col buffer), the padding read as zeros. The reduction is one
flat loop over (r, s, channel tile), so that Triton pipelines it however small C is. The weight is
(K, R, S, C), the layout of a channels-last ``nn.Conv2d`` weight, so both operands are read along C.

Channels and filter size are specialised like any argument; the batch-dependent and spatial sizes
and the stride and padding are not (``do_not_specialize``), so one binary serves every input size
of a layer, as in serving code where the batch and the image size change between calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from tunekit.space import Space

from .matmul import H200_SHARED_MEMORY, grouped_tile


@triton.jit(do_not_specialize=["M", "H", "W", "P", "Q", "stride", "pad"])
def conv2d_nhwc_kernel(
    x_ptr, w_ptr, y_ptr, M, H, W, C, K, P, Q, R, S, stride, pad,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    # grouped tile order (8 row tiles per group) for L2 reuse of the weight and input tiles
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(K, BLOCK_N)
    pid_m, pid_n = grouped_tile(pid, num_pid_m, num_pid_n, 8)

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # output pixels (n, p, q)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # output channels
    offs_c = tl.arange(0, BLOCK_K)
    n = offs_m // (P * Q)
    p = (offs_m // Q) % P
    q = offs_m % Q
    ih0 = p * stride - pad
    iw0 = q * stride - pad
    image = n.to(tl.int64) * H * W * C
    w_rows = w_ptr + offs_n[None, :].to(tl.int64) * (R * S * C)
    c_tiles = tl.cdiv(C, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for step in range(R * S * c_tiles):
        rs = step // c_tiles
        c = (step % c_tiles) * BLOCK_K + offs_c
        ih = ih0 + rs // S
        iw = iw0 + rs % S
        inside = (offs_m < M) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a = tl.load(x_ptr + image[:, None] + ((ih * W + iw) * C)[:, None] + c[None, :],
                    mask=inside[:, None] & (c[None, :] < C), other=0.0)
        b = tl.load(w_rows + rs * C + c[:, None], mask=(c[:, None] < C) & (offs_n[None, :] < K), other=0.0)
        acc = tl.dot(a, b, acc)
    y_ptrs = y_ptr + offs_m[:, None].to(tl.int64) * K + offs_n[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < K))


def fits_registers(config: Mapping[str, Any]) -> bool:
    """At most 128 float32 accumulators per thread."""
    return config["BLOCK_M"] * config["BLOCK_N"] <= 128 * 32 * config["num_warps"]


def may_fit_shared_memory(config: Mapping[str, Any], element_bytes: int = 2) -> bool:
    """A lower bound (``num_stages - 1`` A and B tiles) against the H200's shared memory; configs
    between it and the real allocation stay, and fail on the device."""
    tiles = (config["BLOCK_M"] + config["BLOCK_N"]) * config["BLOCK_K"] * element_bytes
    return tiles * (config["num_stages"] - 1) <= H200_SHARED_MEMORY


def space() -> Space:
    """Pixel and channel tiles, the channel depth of a reduction step, warps and stages: 150 configs."""
    return Space(
        BLOCK_M=[32, 64, 128], BLOCK_N=[64, 128, 256], BLOCK_K=[32, 64, 128],
        num_warps=[4, 8], num_stages=[2, 3, 4],
        constraints=[fits_registers, may_fit_shared_memory],
    )


def output_size(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def inputs(batch: int, h: int, w: int, c: int, k: int, r: int, s: int, stride: int, pad: int,
           dtype=torch.float16, device: str = "cpu", seed: int = 0):
    """x (batch, h, w, c) and the weight (k, r, s, c), channels-last and contiguous, and y
    (batch, p, q, k) poisoned with NaN; ``launch`` takes the stride and padding by name."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(batch, h, w, c, generator=generator).to(device=device, dtype=dtype)
    weight = (torch.randn(k, r, s, c, generator=generator) / (r * s * c) ** 0.5).to(device=device, dtype=dtype)
    p, q = output_size(h, r, stride, pad), output_size(w, s, stride, pad)
    return x, weight, torch.full((batch, p, q, k), float("nan"), device=device, dtype=dtype)


def launch(kernel, x: torch.Tensor, weight: torch.Tensor, y: torch.Tensor, stride: int = 1, pad: int = 0,
           **meta) -> None:
    batch, h, w, c = x.shape
    k, r, s, _ = weight.shape
    _, p, q, _ = y.shape
    m = batch * p * q
    kernel[lambda config: (triton.cdiv(m, config["BLOCK_M"]) * triton.cdiv(k, config["BLOCK_N"]),)](
        x, weight, y, m, h, w, c, k, p, q, r, s, stride, pad, **meta)


def reference(x: torch.Tensor, weight: torch.Tensor, stride: int = 1, pad: int = 0) -> torch.Tensor:
    """``F.conv2d`` in float32 (TF32 off: cuDNN uses it for float32 by default), channels-last (batch, p, q, k)."""
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        y = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2).float(), weight.permute(0, 3, 1, 2).float(),
                                       stride=stride, padding=pad)
    return y.permute(0, 2, 3, 1)


def torch_conv(x: torch.Tensor, weight: torch.Tensor, y: torch.Tensor, stride: int = 1, pad: int = 0) -> torch.Tensor:
    """cuDNN's convolution in the kernel's dtype on channels-last tensors (the layout it is fastest in)."""
    return torch.nn.functional.conv2d(x.permute(0, 3, 1, 2), weight.permute(0, 3, 1, 2), stride=stride, padding=pad)
