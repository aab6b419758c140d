"""Split-K GEMM: the K dimension is shared among SPLIT_K programs that add into a float32 output.

For skinny, decode-like shapes (small M) an ordinary GEMM has too few output tiles to fill the
GPU; splitting K gives it more programs. The output must start at zero (``reset_to_zero``), and
the additions make the result depend on their order by rounding only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from tunekit.space import Space

from .matmul import H200_SHARED_MEMORY


@triton.jit
def matmul_splitk_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                         stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         SPLIT_K: tl.constexpr):
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = pid // num_pid_n, pid % num_pid_n
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K * SPLIT_K)):
        k_left = K - (k * SPLIT_K + pid_k) * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (tl.arange(0, BLOCK_K)[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(tl.arange(0, BLOCK_K)[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * SPLIT_K * stride_ak
        b_ptrs += BLOCK_K * SPLIT_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if SPLIT_K == 1:
        tl.store(c_ptrs, acc, mask=mask)
    else:
        tl.atomic_add(c_ptrs, acc, mask=mask)


def fits_shared_memory(config: Mapping[str, Any], element_bytes: int = 2) -> bool:
    tiles = (config["BLOCK_M"] + config["BLOCK_N"]) * config["BLOCK_K"] * element_bytes
    return tiles * config["num_stages"] <= H200_SHARED_MEMORY


def space() -> Space:
    """Tiles for skinny M (at most 64 rows), deep K tiles, and 1 to 16 splits of K."""
    return Space(BLOCK_M=[16, 32, 64], BLOCK_N=[32, 64, 128, 256], BLOCK_K=[64, 128, 256],
                 SPLIT_K=[1, 2, 4, 8, 16], num_warps=[4, 8], num_stages=[3, 4, 5],
                 constraints=[fits_shared_memory])


def inputs(m: int, n: int, k: int, dtype=torch.bfloat16, device: str = "cpu", seed: int = 0):
    generator = torch.Generator(device="cpu").manual_seed(seed)
    a = torch.randn(m, k, generator=generator).to(device=device, dtype=dtype)
    b = torch.randn(k, n, generator=generator).to(device=device, dtype=dtype)
    return a, b, torch.zeros(m, n, device=device, dtype=torch.float32)


def launch(kernel, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, **meta) -> None:
    """``c`` is float32 and must be zero before the launch (``reset_to_zero=["c_ptr"]`` when tuning)."""
    m, k = a.shape
    n = b.shape[1]
    grid = lambda config: (triton.cdiv(m, config["BLOCK_M"]) * triton.cdiv(n, config["BLOCK_N"]),  # noqa: E731
                           config["SPLIT_K"])
    kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                 **meta)


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.float() @ b.float()
