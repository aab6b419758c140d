"""Weight-only int4 GEMM (W4A16): C = A @ dequant(B), A in float16, B packed eight 4-bit values to an int32.

As GPTQ- and AWQ-style inference kernels run a quantised ``nn.Linear``: B (K, N) is stored as
int32 words of eight unsigned 4-bit values along K (word ``k // 8`` of column ``n``, value
``k % 8`` in bits ``4 (k % 8)`` to ``4 (k % 8) + 3``), symmetric around 8, with one float16 scale per
group of GROUP_SIZE rows of K and column. Each K tile is unpacked and scaled in registers and
fed to ``tl.dot`` against A's tile; the tile order is grouped (``GROUP_M``) for L2 reuse. A K tile
lies inside one scale group (``BLOCK_K`` divides ``GROUP_SIZE``), so a tile loads one row of scales.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl
from torch.utils.weak import WeakIdKeyDictionary

from tunekit.space import Space

from .matmul import H200_SHARED_MEMORY, grouped_tile

#: Rows of K that share a scale (GPTQ's and AWQ's usual group).
GROUP_SIZE = 128
#: 4-bit values per int32 word.
PACK = 8


@triton.jit
def w4a16_gemm_kernel(
    a_ptr, b_ptr, scales_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_sg, stride_sn, stride_cm, stride_cn,
    GROUP_SIZE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    tl.static_assert(GROUP_SIZE % BLOCK_K == 0, "a K tile must lie inside one scale group")
    tl.static_assert(BLOCK_K % 8 == 0, "a K tile must hold whole int32 words of eight values")
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M)
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    # each word is loaded by the eight rows of the tile it holds; they differ in the shift
    b_ptrs = b_ptr + (offs_k // 8)[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    shifts = ((offs_k % 8) * 4)[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs)
        words = tl.load(b_ptrs)
        scale = tl.load(scales_ptr + (k * BLOCK_K // GROUP_SIZE) * stride_sg + offs_bn * stride_sn)
        b = (((words >> shifts) & 0xF) - 8).to(a.dtype) * scale[None, :]
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += (BLOCK_K // 8) * stride_bk
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def within_scale_group(config: Mapping[str, Any]) -> bool:
    """A K tile inside one scale group (the kernel loads one row of scales per tile)."""
    return GROUP_SIZE % config["BLOCK_K"] == 0


def fits_registers(config: Mapping[str, Any]) -> bool:
    """At most 128 float32 accumulators per thread."""
    return config["BLOCK_M"] * config["BLOCK_N"] <= 128 * 32 * config["num_warps"]


def may_fit_shared_memory(config: Mapping[str, Any]) -> bool:
    """A lower bound (``num_stages - 1`` buffers of A's two-byte tile and B's half-byte one) against
    the H200's shared memory; configs above the real allocation but under it fail on the device."""
    tile_bytes = config["BLOCK_M"] * config["BLOCK_K"] * 2 + config["BLOCK_K"] * config["BLOCK_N"] // 2
    return tile_bytes * (config["num_stages"] - 1) <= H200_SHARED_MEMORY


def space() -> Space:
    """Tiles from decode-sized M (16 rows) to 128x256, K tiles of 32 to 128 rows (inside one scale
    group), grouped or row-major order, 4 or 8 warps, 2 to 5 stages."""
    return Space(
        BLOCK_M=[16, 32, 64, 128], BLOCK_N=[32, 64, 128, 256], BLOCK_K=[32, 64, 128], GROUP_M=[1, 8],
        num_warps=[4, 8], num_stages=[2, 3, 4, 5],
        constraints=[within_scale_group, fits_registers, may_fit_shared_memory],
    )


def pack(values: torch.Tensor) -> torch.Tensor:
    """(K, N) integers in [0, 16) to (K // 8, N) int32 words, value ``k % 8`` in bits 4 (k % 8) up."""
    k, n = values.shape
    grouped = values.to(torch.int64).reshape(k // PACK, PACK, n)
    words = torch.zeros(k // PACK, n, dtype=torch.int64, device=values.device)
    for i in range(PACK):
        words |= grouped[:, i] << (4 * i)
    return (words - ((words >> 31) << 32)).to(torch.int32)  # the top bit is int32's sign


def dequantize(words: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """The float32 (K, N) weight that ``words`` and ``scales`` stand for."""
    shifts = torch.arange(PACK, device=words.device, dtype=torch.int32) * 4
    values = (words[:, None, :] >> shifts[None, :, None]) & 0xF
    values = values.reshape(-1, words.shape[1]).float() - 8
    return values * scales.float().repeat_interleave(GROUP_SIZE, dim=0)


def inputs(m: int, n: int, k: int, dtype=torch.float16, device: str = "cpu", seed: int = 0):
    """A (m, k), B's words (k // 8, n) and scales (k // GROUP_SIZE, n), C (m, n) poisoned with NaN."""
    if k % GROUP_SIZE:
        raise ValueError(f"K = {k} is not a multiple of the scale group ({GROUP_SIZE})")
    generator = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(m, k, generator=generator, device=device).to(dtype)
    values = torch.randint(0, 16, (k, n), generator=generator, device=device)
    scales = (torch.rand(k // GROUP_SIZE, n, generator=generator, device=device) + 0.5) / (8 * k**0.5)
    return a, pack(values), scales.to(dtype), torch.full((m, n), float("nan"), device=device, dtype=dtype)


def launch(kernel, a: torch.Tensor, words: torch.Tensor, scales: torch.Tensor, c: torch.Tensor, **meta) -> None:
    """C = A @ dequant(B); K must be a multiple of GROUP_SIZE (the kernel does not mask K)."""
    m, k = a.shape
    n = words.shape[1]
    if k % GROUP_SIZE:
        raise ValueError(f"w4a16_gemm: K = {k} is not a multiple of the scale group ({GROUP_SIZE})")
    if words.shape[0] * PACK != k or scales.shape[0] * GROUP_SIZE != k:
        raise ValueError(f"w4a16_gemm: A's K = {k} needs {k // PACK} rows of words and {k // GROUP_SIZE} of scales, "
                         f"got {words.shape[0]} and {scales.shape[0]}")
    if scales.shape[1] != n or c.shape != (m, n):
        raise ValueError(f"w4a16_gemm: words of {n} columns need scales of {n} and C of ({m}, {n}); got scales "
                         f"{tuple(scales.shape)}, C {tuple(c.shape)}")
    kernel[lambda config: (triton.cdiv(m, config["BLOCK_M"]) * triton.cdiv(n, config["BLOCK_N"]),)](
        a, words, scales, c, m, n, k, a.stride(0), a.stride(1), words.stride(0), words.stride(1), scales.stride(0),
        scales.stride(1), c.stride(0), c.stride(1), GROUP_SIZE=GROUP_SIZE, **meta)


def reference(a: torch.Tensor, words: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """A times the dequantised weight, in float32."""
    return a.float() @ dequantize(words, scales)


def torch_dequantized_matmul(a: torch.Tensor, words: torch.Tensor, scales: torch.Tensor,
                             c: torch.Tensor) -> torch.Tensor:
    """What runs without an int4 kernel: ``torch.matmul`` (cuBLAS) against the weight dequantised
    once beforehand, in A's dtype (the dequantisation is not timed). A benchmark's helper: the copy
    is kept per weight and scales object, so a weight or scales changed in place are not seen."""
    kept = _DEQUANTIZED.get(words)
    if kept is None or kept[0] is not scales or kept[1].dtype != a.dtype:
        kept = _DEQUANTIZED[words] = (scales, dequantize(words, scales).to(a.dtype))
    return torch.matmul(a, kept[1])


#: Each packed weight's scales and dequantised copy, dropped with the weight.
_DEQUANTIZED = WeakIdKeyDictionary()
