"""Grouped GEMM: G independent products C_g = A_g @ B_g of one N and K and different M, in one launch.

The rows of every A_g are concatenated into one (M_TOTAL, K) tensor (tokens sorted by expert, as
mixture-of-experts layers and grouped LoRA hold them), B is (G, K, N), and C is (M_TOTAL, N). A
fixed number of persistent programs walks the tiles of all groups in turn, as the tile scheduler
of Triton's grouped GEMM tutorial does: program p takes tiles p, p + NUM_PROGRAMS, ... of the
concatenated tile list, finding each tile's group by the running count of the groups' tiles.
The group sizes live on the device (``m_sizes``), so a group may be empty, and one compiled
binary serves every routing; ``M_TOTAL`` is passed for the autotuner's key only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from tunekit.space import Space

from .matmul import H200_SHARED_MEMORY

#: The H200's streaming multiprocessors: the persistent grid is one or two programs per SM.
H200_SMS = 132


@triton.jit
def grouped_gemm_kernel(
    a_ptr, b_ptr, c_ptr, m_sizes_ptr, G, N, K, M_TOTAL,
    stride_am, stride_ak, stride_bg, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_PROGRAMS: tl.constexpr,
):
    tile = tl.program_id(0)
    num_n_tiles = tl.cdiv(N, BLOCK_N)
    tiles_before = 0  # tiles of the groups before g
    a_group = a_ptr  # group g's first row of A, its B, its first row of C
    b_group = b_ptr
    c_group = c_ptr
    for g in range(G):
        m = tl.load(m_sizes_ptr + g)
        num_tiles = tl.cdiv(m, BLOCK_M) * num_n_tiles
        while (tile >= tiles_before) & (tile < tiles_before + num_tiles):
            local = tile - tiles_before
            pid_m = local // num_n_tiles
            pid_n = local % num_n_tiles
            offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            offs_k = tl.arange(0, BLOCK_K)
            a_ptrs = a_group + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
            b_ptrs = b_group + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k in range(tl.cdiv(K, BLOCK_K)):
                k_left = K - k * BLOCK_K
                a = tl.load(a_ptrs, mask=(offs_m[:, None] < m) & (offs_k[None, :] < k_left), other=0.0)
                b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
                acc = tl.dot(a, b, acc)
                a_ptrs += BLOCK_K * stride_ak
                b_ptrs += BLOCK_K * stride_bk
            c_ptrs = c_group + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
            tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < m) & (offs_n[None, :] < N))
            tile += NUM_PROGRAMS
        tiles_before += num_tiles
        a_group += m * stride_am
        b_group += stride_bg
        c_group += m * stride_cm


def fits_registers(config: Mapping[str, Any]) -> bool:
    """At most 128 float32 accumulators per thread (a 128x256 tile needs 8 warps)."""
    return config["BLOCK_M"] * config["BLOCK_N"] <= 128 * 32 * config["num_warps"]


def may_fit_shared_memory(config: Mapping[str, Any], element_bytes: int = 2) -> bool:
    """A lower bound of the pipelined tiles' shared memory (``num_stages - 1`` buffers of the A and B
    tiles, what Triton 3.9 allocates for sm_90) against the H200's limit: what cannot fit is left out;
    configs between this bound and the real allocation (Triton 3.6 may add the epilogue's scratch)
    remain, and fail on the device with out of resources."""
    tiles = (config["BLOCK_M"] + config["BLOCK_N"]) * config["BLOCK_K"] * element_bytes
    return tiles * (config["num_stages"] - 1) <= H200_SHARED_MEMORY


def space() -> Space:
    """Tiles from decode-sized groups (16 rows) to 128x256, 1 or 2 persistent programs per SM: 178 configs."""
    return Space(
        BLOCK_M=[16, 32, 64, 128], BLOCK_N=[64, 128, 256], BLOCK_K=[64, 128],
        NUM_PROGRAMS=[H200_SMS, 2 * H200_SMS], num_warps=[4, 8], num_stages=[3, 4],
        constraints=[fits_registers, may_fit_shared_memory],
    )


def group_sizes(groups: int, m_total: int, seed: int = 0) -> list[int]:
    """Rows per group: ``m_total`` tokens routed to ``groups`` experts by skewed random preferences
    (some experts get many tokens, some none), reproducibly."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    preference = torch.softmax(1.5 * torch.randn(groups, generator=generator), dim=0)
    routed = torch.multinomial(preference, m_total, replacement=True, generator=generator)
    return torch.bincount(routed, minlength=groups).tolist()


def inputs(groups: int, m_total: int, n: int, k: int, dtype=torch.float16, device: str = "cpu", seed: int = 0):
    """A (m_total, k) and B (groups, k, n), drawn on ``device``, the group sizes (int32, on the
    device), and C (m_total, n) poisoned with NaN."""
    generator = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(m_total, k, generator=generator, device=device).to(dtype)
    b = (torch.randn(groups, k, n, generator=generator, device=device) / k**0.25).to(dtype)
    m_sizes = torch.tensor(group_sizes(groups, m_total, seed), dtype=torch.int32, device=device)
    return a, b, m_sizes, torch.full((m_total, n), float("nan"), device=device, dtype=dtype)


def launch(kernel, a: torch.Tensor, b: torch.Tensor, m_sizes: torch.Tensor, c: torch.Tensor, **meta) -> None:
    groups, k, n = b.shape
    kernel[lambda config: (config["NUM_PROGRAMS"],)](
        a, b, c, m_sizes, groups, n, k, a.shape[0], a.stride(0), a.stride(1), b.stride(0), b.stride(1), b.stride(2),
        c.stride(0), c.stride(1), **meta)


def reference(a: torch.Tensor, b: torch.Tensor, m_sizes: torch.Tensor) -> torch.Tensor:
    """The products in float32, group by group, in A's dtype."""
    pieces = torch.split(a.float(), m_sizes.tolist())
    return torch.cat([piece @ b[g].float() for g, piece in enumerate(pieces)]).to(a.dtype)


#: Whether ``torch._grouped_mm`` took operands of a (device, dtype): tried once, then remembered.
_GROUPED_MM_TAKES: dict[tuple[str, torch.dtype], bool] = {}


def torch_grouped(a: torch.Tensor, b: torch.Tensor, m_sizes: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """PyTorch's grouped GEMM, ``torch._grouped_mm`` (CUTLASS, bf16 on Hopper), where it takes the
    operands; else one ``torch.matmul`` per group, with the sizes copied to the host."""
    grouped_mm = getattr(torch, "_grouped_mm", None)
    kind = (str(a.device), a.dtype)
    if grouped_mm is not None and a.is_cuda and _GROUPED_MM_TAKES.get(kind, True):
        try:
            return grouped_mm(a, b, offs=torch.cumsum(m_sizes, 0, dtype=torch.int32))
        except (RuntimeError, TypeError, ValueError):
            _GROUPED_MM_TAKES[kind] = False
    return torch.cat([piece @ b[g] for g, piece in enumerate(torch.split(a, m_sizes.tolist()))])
