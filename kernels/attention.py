"""FlashAttention-style forward: online softmax over key tiles, one query tile per program."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from tunekit.space import Space

from .matmul import H200_SHARED_MEMORY

#: The head dimension the space's shared-memory constraint plans for (the largest one tuned).
PLANNED_HEAD_DIM = 128


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, sm_scale, seq_len, n_heads,
                     stride_qb, stride_qh, stride_qm, stride_kb, stride_kh, stride_kn,
                     stride_vb, stride_vh, stride_vn, stride_ob, stride_oh, stride_om,
                     HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    batch_head = tl.program_id(1)
    batch, head = batch_head // n_heads, batch_head % n_heads
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + batch * stride_qb + head * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :],
                mask=offs_m[:, None] < seq_len, other=0.0)
    running_max = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    running_sum = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    end = seq_len
    if CAUSAL:
        end = tl.minimum(seq_len, (start_m + 1) * BLOCK_M)
    for start_n in range(0, end, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_ptr + batch * stride_kb + head * stride_kh + cols[None, :] * stride_kn + offs_d[:, None],
                    mask=cols[None, :] < seq_len, other=0.0)
        scores = tl.dot(q, k) * sm_scale
        valid = cols[None, :] < seq_len
        if CAUSAL:
            valid = valid & (offs_m[:, None] >= cols[None, :])
        scores = tl.where(valid, scores, float("-inf"))
        new_max = tl.maximum(running_max, tl.max(scores, axis=1))
        p = tl.exp(scores - new_max[:, None])
        alpha = tl.exp(running_max - new_max)
        running_sum = running_sum * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + batch * stride_vb + head * stride_vh + cols[:, None] * stride_vn + offs_d[None, :],
                    mask=cols[:, None] < seq_len, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        running_max = new_max
    out = acc / running_sum[:, None]
    tl.store(o_ptr + batch * stride_ob + head * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :],
             out.to(o_ptr.dtype.element_ty), mask=offs_m[:, None] < seq_len)


def fits_shared_memory(config: Mapping[str, Any], element_bytes: int = 2) -> bool:
    """Upper estimate: the query tile plus pipelined key and value tiles, at the planned head dimension."""
    tiles = (config["BLOCK_M"] + 2 * config["BLOCK_N"] * config["num_stages"]) * PLANNED_HEAD_DIM * element_bytes
    return tiles <= H200_SHARED_MEMORY


def space() -> Space:
    return Space(BLOCK_M=[16, 32, 64, 128, 256], BLOCK_N=[16, 32, 64, 128], num_warps=[2, 4, 8],
                 num_stages=[1, 2, 3, 4, 5], constraints=[fits_shared_memory])


def inputs(batch: int, heads: int, seq_len: int, head_dim: int, dtype=torch.float16, device: str = "cpu",
           seed: int = 0):
    generator = torch.Generator(device="cpu").manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, seq_len, head_dim, generator=generator).to(device=device, dtype=dtype)
               for _ in range(3))
    return q, k, v, torch.full_like(q, float("nan"))


def launch(kernel, q, k, v, o, causal: bool = False, **meta) -> None:
    batch, heads, seq_len, head_dim = q.shape
    grid = lambda config: (triton.cdiv(seq_len, config["BLOCK_M"]), batch * heads)  # noqa: E731
    kernel[grid](q, k, v, o, 1.0 / math.sqrt(head_dim), seq_len, heads,
                 q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                 v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
                 HEAD_DIM=head_dim, CAUSAL=causal, **meta)


def reference(q, k, v, causal: bool = False) -> torch.Tensor:
    return torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                            is_causal=causal).to(q.dtype)
