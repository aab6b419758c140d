"""A GEMM written like Triton's matmul tutorial, with the 1,152-config space of design.md."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from tunekit.space import Space

#: The H200's shared memory per block, in bytes (227 KiB).
H200_SHARED_MEMORY = 232448


@triton.jit
def grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """The (row, column) tile of program ``pid`` in grouped order: ``GROUP_M`` row tiles walk the
    column tiles together, so the tiles of B they read stay in L2 (Triton's matmul tutorial)."""
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M)
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = accumulator.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def fits_shared_memory(config: Mapping[str, Any], element_bytes: int = 2,
                       limit: int = H200_SHARED_MEMORY) -> bool:
    """Upper estimate of the shared memory of the pipelined tiles against the device's limit."""
    tiles = (config["BLOCK_M"] + config["BLOCK_N"]) * config["BLOCK_K"] * element_bytes
    return tiles * config["num_stages"] <= limit


def space(constrained: bool = True) -> Space:
    """The 1,152-config GEMM space of design.md (constraint: shared memory). ``constrained=False``
    drops the constraint: the space a user writes before learning the device's limit, where the
    configs that do not fit fail at launch (a space to measure how well a strategy avoids failures on)."""
    return Space(
        BLOCK_M=[32, 64, 128, 256], BLOCK_N=[32, 64, 128, 256], BLOCK_K=[32, 64, 128],
        GROUP_M=[1, 8], num_warps=[2, 4, 8], num_stages=[2, 3, 4, 5],
        constraints=[fits_shared_memory] if constrained else [],
    )


def tutorial_configs() -> list[triton.Config]:
    """The 8 configs of Triton's matmul tutorial (CUDA, fp16), the stock baseline."""
    def c(m, n, k, g, s, w):
        return triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": g}, num_stages=s, num_warps=w)

    return [
        c(128, 256, 64, 8, 3, 8), c(64, 256, 32, 8, 4, 4), c(128, 128, 32, 8, 4, 4), c(128, 64, 32, 8, 4, 4),
        c(64, 128, 32, 8, 4, 4), c(128, 32, 32, 8, 4, 4), c(64, 32, 32, 8, 5, 2), c(32, 64, 32, 8, 5, 2),
    ]


def grid(m: int, n: int):
    """The launch grid of an m x n product (closes over the sizes: see ``vector_add.grid``)."""
    return lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)


def inputs(m: int, n: int, k: int, dtype=torch.float16, device: str = "cpu", seed: int = 0):
    generator = torch.Generator(device="cpu").manual_seed(seed)
    a = torch.randn(m, k, generator=generator).to(device=device, dtype=dtype)
    b = torch.randn(k, n, generator=generator).to(device=device, dtype=dtype)
    return a, b, torch.full((m, n), float("nan"), device=device, dtype=dtype)


def launch(kernel, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, **meta) -> None:
    m, k = a.shape
    n = b.shape[1]
    kernel[grid(m, n)](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1), **meta)


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.float() @ b.float()).to(a.dtype)
