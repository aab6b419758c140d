"""A Hopper attention forward: tensor descriptors (TMA) for Q, K, V and O, the softmax in base 2
with the scale folded into one multiply, the causal loop split into the tiles below the
diagonal (no mask) and the tiles on it, and a causal launch that can start with the heaviest query
tiles (``HEAVY_FIRST``).

Q, K and V are (batch, heads, sequence, head_dim) and contiguous; the kernel sees them as
(batch x heads, sequence, head_dim), so that a tile past a sequence's end reads zeros (the
descriptor clips it) instead of the next head's rows. Only the last key tile of a sequence whose
length is not a multiple of ``BLOCK_N`` is masked; in the causal case the diagonal masks it.

``WARP_SPECIALIZE`` specializes the unmasked key loop's warps, but neither Space tries it: for
sm_90, the warp-specialization pass of Triton 3.6 (the H200's) and 3.9 fails on this kernel
(``tests/test_attention_hopper.py`` compiles it to show that), and Triton's own attention tutorial
turns it on only for Blackwell. ``HEAVY_FIRST`` reverses the query tiles within each head, since
the grid's fastest axis runs over them; on the H200 it changed no config's time beyond the
recording's noise (docs/research/h200-spaces.md), and without ``CAUSAL`` it compiles to the same
code, so the non-causal space holds each kernel twice.
``space("interpreter")`` keeps tiles small; the default, ``space("h200")``, keeps the configs that
fit an H200's shared memory and registers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from tunekit.space import Space

from . import attention
from ._descriptors import check_tensors, prepare_launch
from .attention import PLANNED_HEAD_DIM
from .matmul import H200_SHARED_MEMORY
from .matmul_hopper import BARRIER_BYTES


@triton.jit
def _key_tiles(acc, row_sum, row_max, q, k_desc, v_desc, bh, start, end, seq_len, qk_scale, offs_m,
               BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, MASK: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    """The online softmax over key tiles ``start`` to ``end``. ``MASK``: 0 none, 1 the diagonal
    (keys after the query), 2 keys past ``seq_len``."""
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in tl.range(start, end, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        k = k_desc.load([bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        scores = tl.dot(q, tl.trans(k))
        if MASK == 1:
            keep = offs_m[:, None] >= (start_n + offs_n)[None, :]
        if MASK == 2:
            keep = (start_n + offs_n)[None, :] < seq_len
        if MASK == 0:
            new_max = tl.maximum(row_max, tl.max(scores, 1) * qk_scale)
            scores = scores * qk_scale - new_max[:, None]
        else:
            scores = tl.where(keep, scores * qk_scale, float("-inf"))
            new_max = tl.maximum(row_max, tl.max(scores, 1))
            scores = scores - new_max[:, None]
        p = tl.math.exp2(scores)
        alpha = tl.math.exp2(row_max - new_max)
        row_sum = row_sum * alpha + tl.sum(p, 1)
        v = v_desc.load([bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        row_max = new_max
    return acc, row_sum, row_max


@triton.jit
def attention_hopper_kernel(q_ptr, k_ptr, v_ptr, o_ptr, sm_scale, batch_heads, seq_len,
                            HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                            BLOCK_N: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, HEAVY_FIRST: tl.constexpr):
    """One program per (query tile, batch x head). With ``HEAVY_FIRST`` a causal launch starts
    each head's last query tiles, which see the most keys, first, so that the light ones fill
    the last wave instead of leaving SMs idle behind a heavy one."""
    if CAUSAL and HEAVY_FIRST:
        start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        start_m = tl.program_id(0)
    bh = tl.program_id(1)
    head_stride = seq_len * HEAD_DIM
    q_desc = tl.make_tensor_descriptor(q_ptr, shape=[batch_heads, seq_len, HEAD_DIM], strides=[head_stride, HEAD_DIM, 1],
                                       block_shape=[1, BLOCK_M, HEAD_DIM])
    k_desc = tl.make_tensor_descriptor(k_ptr, shape=[batch_heads, seq_len, HEAD_DIM], strides=[head_stride, HEAD_DIM, 1],
                                       block_shape=[1, BLOCK_N, HEAD_DIM])
    v_desc = tl.make_tensor_descriptor(v_ptr, shape=[batch_heads, seq_len, HEAD_DIM], strides=[head_stride, HEAD_DIM, 1],
                                       block_shape=[1, BLOCK_N, HEAD_DIM])
    o_desc = tl.make_tensor_descriptor(o_ptr, shape=[batch_heads, seq_len, HEAD_DIM], strides=[head_stride, HEAD_DIM, 1],
                                       block_shape=[1, BLOCK_M, HEAD_DIM])
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q = q_desc.load([bh, start_m * BLOCK_M, 0]).reshape(BLOCK_M, HEAD_DIM)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e): exp(x) = exp2(x * log2(e)), one multiply
    row_max = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    row_sum = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    if CAUSAL:
        # the key tiles wholly below the diagonal need no mask; BLOCK_N divides BLOCK_M
        band = start_m * BLOCK_M
        acc, row_sum, row_max = _key_tiles(acc, row_sum, row_max, q, k_desc, v_desc, bh, 0, band, seq_len,
                                           qk_scale, offs_m, BLOCK_N, HEAD_DIM, 0, WARP_SPECIALIZE)
        acc, row_sum, row_max = _key_tiles(acc, row_sum, row_max, q, k_desc, v_desc, bh, band,
                                           tl.minimum(band + BLOCK_M, seq_len), seq_len, qk_scale, offs_m,
                                           BLOCK_N, HEAD_DIM, 1, False)
    else:
        whole = (seq_len // BLOCK_N) * BLOCK_N
        acc, row_sum, row_max = _key_tiles(acc, row_sum, row_max, q, k_desc, v_desc, bh, 0, whole, seq_len,
                                           qk_scale, offs_m, BLOCK_N, HEAD_DIM, 0, WARP_SPECIALIZE)
        acc, row_sum, row_max = _key_tiles(acc, row_sum, row_max, q, k_desc, v_desc, bh, whole, seq_len, seq_len,
                                           qk_scale, offs_m, BLOCK_N, HEAD_DIM, 2, False)
    out = acc / row_sum[:, None]
    o_desc.store([bh, start_m * BLOCK_M, 0], out.to(o_desc.dtype).reshape(1, BLOCK_M, HEAD_DIM))


def shared_memory(config: Mapping[str, Any], element_bytes: int = 2) -> int:
    """An upper estimate at the planned head dimension: the query tile, the pipelined key and
    value tiles, and the barriers."""
    tiles = config["BLOCK_M"] + 2 * config["BLOCK_N"] * config["num_stages"]
    return tiles * PLANNED_HEAD_DIM * element_bytes + BARRIER_BYTES


def fits_h200(config: Mapping[str, Any]) -> bool:
    """Shared memory within an H200's block limit, and at most 256 float32 values per thread for
    the output accumulator and the score tile (more spills registers)."""
    per_thread = config["BLOCK_M"] * (PLANNED_HEAD_DIM + config["BLOCK_N"]) // (32 * config["num_warps"])
    return shared_memory(config) <= H200_SHARED_MEMORY and per_thread <= 256


def diagonal_fits(config: Mapping[str, Any]) -> bool:
    """The causal split walks the diagonal in key tiles: ``BLOCK_N`` must divide ``BLOCK_M``."""
    return config["BLOCK_M"] % config["BLOCK_N"] == 0


def space(device: str = "h200") -> Space:
    """The Hopper attention's Space on ``device``: ``"h200"`` (constrained to what fits the H200)
    or ``"interpreter"`` (small tiles)."""
    if device == "interpreter":
        return Space(BLOCK_M=[16, 32], BLOCK_N=[16, 32], WARP_SPECIALIZE=[0], HEAVY_FIRST=[0, 1], num_warps=[4],
                     num_stages=[2], constraints=[diagonal_fits])
    if device != "h200":
        raise ValueError(f"attention_hopper.space(device=...) knows 'h200' and 'interpreter'. Got {device!r} instead.")
    return Space(BLOCK_M=[64, 128, 256], BLOCK_N=[32, 64, 128], WARP_SPECIALIZE=[0], HEAVY_FIRST=[0, 1],
                 num_warps=[4, 8], num_stages=[2, 3, 4, 5], constraints=[diagonal_fits, fits_h200])


def inputs(batch: int, heads: int, seq_len: int, head_dim: int, dtype: torch.dtype = torch.bfloat16,
           device: str = "cpu", seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``attention.inputs``, in bf16 by default."""
    return attention.inputs(batch, heads, seq_len, head_dim, dtype, device, seed)


def launch(kernel, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, causal: bool = False,
           **meta) -> None:
    """O = softmax(Q K^T / sqrt(head_dim)) V, per batch and head."""
    if q.dim() != 4 or any(tensor.shape != q.shape for tensor in (k, v, o)):
        raise ValueError(f"attention_hopper needs q, k, v and o of one shape (batch, heads, sequence, head_dim); got "
                         f"{', '.join(str(tuple(tensor.shape)) for tensor in (q, k, v, o))}")
    batch, heads, seq_len, head_dim = q.shape
    if head_dim < 16 or head_dim & (head_dim - 1):
        raise ValueError(f"attention_hopper needs a head_dim that is a power of two, 16 or more; got {head_dim}")
    check_tensors("attention_hopper", q=q, k=k, v=v, o=o)
    prepare_launch("attention_hopper", q)
    grid = lambda config: (triton.cdiv(seq_len, config["BLOCK_M"]), batch * heads)
    kernel[grid](q, k, v, o, 1.0 / math.sqrt(head_dim), batch * heads, seq_len, HEAD_DIM=head_dim, CAUSAL=causal,
                 **meta)


reference = attention.reference
