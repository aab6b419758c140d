"""Fused mixture-of-experts GEMM, written like vLLM's ``fused_moe_kernel``.

Each token is routed to TOP_K of E experts. The (token, expert) pairs are sorted by expert and
each expert's run padded to a multiple of ALIGN_M rows (``align``, vLLM's
``moe_align_block_size``); a program takes BLOCK_M rows of that sorted list and BLOCK_N output
columns, gathers the rows' tokens from A (M, K), multiplies them by its expert's weight, read
from W (E, N, K) in ``nn.Linear``'s layout, scales each row by its routing weight and scatters
the rows to C (M * TOP_K, N) at their pair's position. Blocks made only of padding stop at once.

vLLM aligns the runs to the config's own BLOCK_M, recomputing the sorted list per config; a tuned
launch cannot, so the runs are aligned once to the largest BLOCK_M of the space and a block finds
its expert at ``block_start // ALIGN_M``: smaller blocks skip the padding they fall into.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from tunekit.space import Space

from .grouped_gemm import fits_registers, may_fit_shared_memory
from .matmul import grouped_tile

#: Each expert's run of sorted rows is padded to a multiple of this: the largest BLOCK_M.
ALIGN = 128
ALIGN_M = tl.constexpr(ALIGN)


@triton.jit
def fused_moe_kernel(
    a_ptr, w_ptr, c_ptr, topk_weights_ptr, sorted_token_ids_ptr, expert_ids_ptr,
    N, K, EM, num_valid_tokens,
    stride_am, stride_ak, stride_we, stride_wn, stride_wk, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    TOP_K: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(EM, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M)

    offs_token_id = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_token = tl.load(sorted_token_ids_ptr + offs_token_id)
    token_mask = offs_token < num_valid_tokens
    if tl.load(sorted_token_ids_ptr + pid_m * BLOCK_M) >= num_valid_tokens:
        return  # a block of padding only: the valid rows of a run come first
    expert = tl.load(expert_ids_ptr + (pid_m * BLOCK_M) // ALIGN_M).to(tl.int64)
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_token[:, None] // TOP_K) * stride_am + offs_k[None, :] * stride_ak
    w_ptrs = w_ptr + expert * stride_we + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < k_left), other=0.0)
        w = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, w, acc)
        a_ptrs += BLOCK_K * stride_ak
        w_ptrs += BLOCK_K * stride_wk
    routing = tl.load(topk_weights_ptr + offs_token, mask=token_mask, other=0.0)
    acc = acc * routing[:, None]
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_token[:, None].to(tl.int64) * stride_cm + offs_cn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=token_mask[:, None] & (offs_cn[None, :] < N))


def space() -> Space:
    """vLLM's tuning parameters (BLOCK_SIZE_M/N/K, GROUP_SIZE_M, warps, stages) over a smaller range:
    178 configs; the constraints are the grouped GEMM's (accumulators per thread, shared memory)."""
    return Space(
        BLOCK_M=[16, 32, 64, 128], BLOCK_N=[64, 128, 256], BLOCK_K=[64, 128], GROUP_M=[1, 16],
        num_warps=[4, 8], num_stages=[3, 4],
        constraints=[fits_registers, may_fit_shared_memory],
    )


def route(m: int, experts: int, top_k: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k routing of m tokens by random router logits with some experts favoured: expert ids
    (m, top_k) int32 and their renormalised softmax weights (m, top_k) float32."""
    bias = 1.0 * torch.randn(experts, generator=generator)
    logits = torch.randn(m, experts, generator=generator) + bias
    weights, ids = torch.topk(torch.softmax(logits, dim=-1), top_k, dim=-1)
    return ids.to(torch.int32), weights / weights.sum(dim=-1, keepdim=True)


def align(topk_ids: torch.Tensor, experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The (token, expert) pairs (flat index token * top_k + slot) sorted by expert, each expert's
    run padded with the invalid index m * top_k to a multiple of ALIGN, and the expert of each
    ALIGN-row block: vLLM's ``moe_align_block_size`` for a block size of ALIGN."""
    flat = topk_ids.flatten().long()
    invalid = flat.numel()
    sorted_ids, expert_ids = [], []
    for expert in range(experts):
        pairs = torch.nonzero(flat == expert).flatten()
        if pairs.numel() == 0:
            continue
        blocks = -(-pairs.numel() // ALIGN)
        sorted_ids.append(torch.cat([pairs, torch.full((blocks * ALIGN - pairs.numel(),), invalid)]))
        expert_ids += [expert] * blocks
    return torch.cat(sorted_ids).to(torch.int32), torch.tensor(expert_ids, dtype=torch.int32)


def inputs(m: int, experts: int, top_k: int, n: int, k: int, dtype=torch.bfloat16, device: str = "cpu",
           seed: int = 0):
    """A (m, k), W (experts, n, k), the routing weights (m * top_k,) float32, the sorted pair
    indices and block experts of ``align``, and C (m * top_k, n) poisoned with NaN. The weights are
    drawn on ``device`` (hundreds of millions of numbers at the real shapes)."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    a = torch.randn(m, k, generator=generator).to(device=device, dtype=dtype)
    device_generator = torch.Generator(device=device).manual_seed(seed)
    w = (torch.randn(experts, n, k, generator=device_generator, device=device) / k**0.5).to(dtype)
    topk_ids, topk_weights = route(m, experts, top_k, generator)
    sorted_ids, expert_ids = align(topk_ids, experts)
    c = torch.full((m * top_k, n), float("nan"), device=device, dtype=dtype)
    return (a, w, topk_weights.flatten().to(device), sorted_ids.to(device), expert_ids.to(device),
            topk_ids.to(device), c)


def launch(kernel, a: torch.Tensor, w: torch.Tensor, topk_weights: torch.Tensor, sorted_ids: torch.Tensor,
           expert_ids: torch.Tensor, topk_ids: torch.Tensor, c: torch.Tensor, **meta) -> None:
    _, n, k = w.shape
    em = sorted_ids.numel()
    top_k = topk_ids.shape[1]
    kernel[lambda config: (triton.cdiv(em, config["BLOCK_M"]) * triton.cdiv(n, config["BLOCK_N"]),)](
        a, w, c, topk_weights, sorted_ids, expert_ids, n, k, em, topk_ids.numel(),
        a.stride(0), a.stride(1), w.stride(0), w.stride(1), w.stride(2), c.stride(0), c.stride(1),
        TOP_K=top_k, **meta)


def reference(a: torch.Tensor, w: torch.Tensor, topk_weights: torch.Tensor, sorted_ids: torch.Tensor,
              expert_ids: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
    """C in float32: row token * top_k + slot is the token's product with its slot's expert, times
    the routing weight."""
    top_k = topk_ids.shape[1]
    flat = topk_ids.flatten().long()
    c = torch.zeros(flat.numel(), w.shape[1], device=a.device, dtype=torch.float32)
    for expert in flat.unique().tolist():
        pairs = torch.nonzero(flat == expert).flatten()
        c[pairs] = (a[pairs // top_k].float() @ w[expert].float().T) * topk_weights[pairs, None]
    return c


def torch_moe(a: torch.Tensor, w: torch.Tensor, topk_weights: torch.Tensor, sorted_ids: torch.Tensor,
              expert_ids: torch.Tensor, topk_ids: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """What a PyTorch MoE layer runs (Hugging Face's loop over experts): per expert, gather its
    tokens, one ``torch.matmul``, scale by the routing weights, scatter."""
    top_k = topk_ids.shape[1]
    flat = topk_ids.flatten().long()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=w.shape[0]).tolist()
    out = torch.empty(flat.numel(), w.shape[1], device=a.device, dtype=c.dtype)
    for expert, pairs in enumerate(torch.split(order, counts)):
        if counts[expert]:
            out[pairs] = ((a[pairs // top_k] @ w[expert].T) * topk_weights[pairs, None]).to(c.dtype)
    return out
