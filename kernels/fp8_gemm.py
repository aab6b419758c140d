"""FP8 GEMM with per-tensor scales: C = (scale_a * A) @ (scale_b * B)^T in bfloat16.

A (M, K) holds activations and B (N, K) the weight in ``nn.Linear``'s layout, both
``float8_e4m3fn``, each with one float32 scale (the dequantisation factor, as vLLM's and
torch's ``_scaled_mm`` take them). B is read along K, the operand layout Hopper's FP8 tensor-core
instructions want; the product accumulates in float32 and the scales are applied once, in the
epilogue. The tile order is grouped (``GROUP_M``) for L2 reuse, as in Triton's matmul tutorial.

The H200 runs the FP8 ``tl.dot`` natively. The Triton interpreter (3.9) runs it too, in float32
numpy on FP8 values, so the CPU tests use FP8 inputs as well; they check the kernel's indexing
and scaling, not the tensor-core path, which only the GPU compiles and runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from tunekit.space import Space

from .matmul import H200_SHARED_MEMORY, grouped_tile

#: The largest magnitude ``float8_e4m3fn`` holds.
FP8_MAX = 448.0


@triton.jit
def fp8_gemm_kernel(
    a_ptr, b_ptr, c_ptr, a_scale_ptr, b_scale_ptr, M, N, K,
    stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M)
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    # B^T's tile (BLOCK_K, BLOCK_N) read from B (N, K): K is the contiguous dimension of both operands
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    acc = acc * (tl.load(a_scale_ptr) * tl.load(b_scale_ptr))
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def fits_registers(config: Mapping[str, Any]) -> bool:
    """At most 128 float32 accumulators per thread."""
    return config["BLOCK_M"] * config["BLOCK_N"] <= 128 * 32 * config["num_warps"]


def may_fit_shared_memory(config: Mapping[str, Any]) -> bool:
    """A lower bound (``num_stages - 1`` one-byte A and B tiles) against the H200's shared memory;
    configs above the real allocation but under this bound stay, and fail on the device."""
    tiles = (config["BLOCK_M"] + config["BLOCK_N"]) * config["BLOCK_K"]
    return tiles * (config["num_stages"] - 1) <= H200_SHARED_MEMORY


def space() -> Space:
    """Tiles for decode-sized M (32 rows) to 128x256, deep FP8 K tiles (128 or 256 bytes), grouped or
    row-major tile order, 3 to 5 stages: 184 configs."""
    return Space(
        BLOCK_M=[32, 64, 128], BLOCK_N=[64, 128, 256], BLOCK_K=[128, 256], GROUP_M=[1, 8],
        num_warps=[4, 8], num_stages=[3, 4, 5],
        constraints=[fits_registers, may_fit_shared_memory],
    )


def quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor FP8 quantisation: ``x ~ q * scale`` with the largest magnitude at FP8_MAX."""
    scale = x.abs().max().clamp(min=1e-12) / FP8_MAX
    return (x / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale.reshape(1).to(torch.float32)


def inputs(m: int, n: int, k: int, dtype=torch.bfloat16, device: str = "cpu", seed: int = 0):
    """A and B in FP8 with their scales, drawn and quantised on ``device``, and C (m, n) of ``dtype``
    poisoned with NaN."""
    generator = torch.Generator(device=device).manual_seed(seed)
    a, a_scale = quantize(torch.randn(m, k, generator=generator, device=device))
    b, b_scale = quantize(torch.randn(n, k, generator=generator, device=device) / k**0.5)
    return a, b, a_scale, b_scale, torch.full((m, n), float("nan"), device=device, dtype=dtype)


def launch(kernel, a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor,
           c: torch.Tensor, **meta) -> None:
    m, k = a.shape
    n = b.shape[0]
    kernel[lambda config: (triton.cdiv(m, config["BLOCK_M"]) * triton.cdiv(n, config["BLOCK_N"]),)](
        a, b, c, a_scale, b_scale, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
        c.stride(1), **meta)


def reference(a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor) -> torch.Tensor:
    """The product of the dequantised operands in float32."""
    return (a.float() * a_scale) @ (b.float() * b_scale).T


def torch_scaled_mm(a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor,
                    c: torch.Tensor) -> torch.Tensor:
    """PyTorch's FP8 GEMM (cuBLASLt) on the same operands: ``torch._scaled_mm`` with B column-major."""
    return torch._scaled_mm(a, b.T, scale_a=a_scale.reshape(()), scale_b=b_scale.reshape(()), out_dtype=c.dtype)
