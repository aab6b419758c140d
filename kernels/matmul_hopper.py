"""A Hopper GEMM: tensor descriptors (TMA), persistent scheduling over the SMs, warp specialization,
loop flattening, a subtiled epilogue and clusters, each a knob of its Space.

The kernel builds its tensor descriptors on the device (``tl.make_tensor_descriptor``), so it takes
plain pointers (tunekit checks and times configs on guarded copies of them) and needs Triton's
allocator for the descriptors' scratch memory on a GPU (``launch`` sets one unless the caller has;
tunekit's benchmark workers set the same when the caller had one). One program walks the output tiles
``tl.num_programs(0)`` apart: with ``PERSISTENT`` the grid is one program per SM and each program
takes many tiles, otherwise one program per tile. With ``EPILOGUE_SUBTILE`` the result is stored in
two halves, from half a tile of shared memory where the loop keeps no second output tile (see
``shared_memory``). It needs a Hopper or newer GPU; ``launch`` says so on an older one.

Where a feature cannot run, the Space says so: ``space(device="interpreter")`` keeps what the Triton
interpreter runs (descriptors, persistence, flattening and subtiling are emulated there;
warp specialization and clusters are compile options it ignores, so they are left out), and the
default, ``device="h200"``, keeps the configs that fit an H200's shared memory and registers and
that Triton compiles for it (``compiles``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from tunekit.space import Space

from . import matmul
from ._descriptors import check_tensors, prepare_launch
from .matmul import H200_SHARED_MEMORY

#: Shared memory beside the tiles: the pipeline's barriers (8 bytes per stage and direction; warp
#: specialization adds its own), rounded up.
BARRIER_BYTES = 1024
#: Programs of the persistent grid under the interpreter (on a GPU: one per SM, see ``programs``).
INTERPRETER_PROGRAMS = 4


@triton.jit
def _tile_position(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(row, column) of output tile ``tile`` in grouped order: GROUP_M rows of tiles at a time,
    so that programs running together share the A and B tiles they read in L2."""
    num_pid_in_group = GROUP_M * num_pid_n
    first_m = (tile // num_pid_in_group) * GROUP_M
    group_size = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % num_pid_in_group) % group_size
    pid_n = (tile % num_pid_in_group) // group_size
    return pid_m, pid_n


@triton.jit
def matmul_hopper_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PERSISTENT: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, FLATTEN: tl.constexpr,
    EPILOGUE_SUBTILE: tl.constexpr,
):
    """C = A @ B for row-major A (M x K), B (K x N) and C (M x N); ``PERSISTENT`` only shapes the
    grid (see ``grid``), the loop below serves both."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    STORE_N: tl.constexpr = BLOCK_N // 2 if EPILOGUE_SUBTILE else BLOCK_N
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, STORE_N])
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, tl.num_programs(0), flatten=FLATTEN,
                         warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _tile_position(tile, num_pid_m, num_pid_n, GROUP_M)
        offs_m = pid_m * BLOCK_M
        offs_n = pid_n * BLOCK_N
        accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(k_tiles):
            a = a_desc.load([offs_m, k * BLOCK_K])
            b = b_desc.load([k * BLOCK_K, offs_n])
            accumulator = tl.dot(a, b, accumulator)
        if EPILOGUE_SUBTILE:
            halves = tl.permute(tl.reshape(accumulator, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            left, right = tl.split(halves)
            c_desc.store([offs_m, offs_n], left.to(c_desc.dtype))
            c_desc.store([offs_m, offs_n + BLOCK_N // 2], right.to(c_desc.dtype))
        else:
            c_desc.store([offs_m, offs_n], accumulator.to(c_desc.dtype))


def shared_memory(config: Mapping[str, Any], element_bytes: int = 2) -> int:
    """An upper estimate of a config's shared memory: the pipelined A and B tiles, the tile the
    epilogue stores from (half of it when subtiled), and the barriers. A warp-specialized loop, and
    a flattened one with a subtiled epilogue, keep a second output tile besides, so that the
    epilogue overlaps the next tile's loads (Triton 3.6 for sm_90 allocated up to that much:
    ``experiments/hopper_compile_sweep.py``)."""
    tile = config["BLOCK_M"] * config["BLOCK_N"] * element_bytes
    pipeline = (config["BLOCK_M"] + config["BLOCK_N"]) * config["BLOCK_K"] * element_bytes * config["num_stages"]
    store = tile // 2 if config["EPILOGUE_SUBTILE"] else tile
    if config["WARP_SPECIALIZE"] or (config["FLATTEN"] and config["EPILOGUE_SUBTILE"]):
        store += tile
    return pipeline + store + BARRIER_BYTES


def fits_h200(config: Mapping[str, Any]) -> bool:
    """Shared memory within an H200's block limit, and at most 128 float32 accumulators per thread
    (more spills registers: a 256 x 256 tile needs 8 warps' worth twice over)."""
    accumulators_per_thread = config["BLOCK_M"] * config["BLOCK_N"] // (32 * config["num_warps"])
    return shared_memory(config) <= H200_SHARED_MEMORY and accumulators_per_thread <= 128


def meaningful(config: Mapping[str, Any]) -> bool:
    """Flattening merges the tile loop with the K loop, which only a persistent program has; and
    Triton's warp specialization does not take a flattened loop on Hopper (its tutorial turns
    flattening off there)."""
    return not (config["FLATTEN"] and (not config["PERSISTENT"] or config["WARP_SPECIALIZE"]))


def compiles(config: Mapping[str, Any]) -> bool:
    """The knob combinations Triton 3.6 compiles for sm_90 (the H200's Triton; compiling the whole
    space, ``experiments/hopper_compile_sweep.py``, found these rules exact): a cluster
    (``num_ctas=2``) takes neither a subtiled epilogue nor warp specialization with one warp group,
    and warp specialization with one warp group fails for 256-wide tiles and for a subtiled
    epilogue of 128 rows or more."""
    one_warp_group_specialized = config["WARP_SPECIALIZE"] and config["num_warps"] == 4
    if config["num_ctas"] > 1 and (config["EPILOGUE_SUBTILE"] or one_warp_group_specialized):
        return False
    return not (one_warp_group_specialized
                and (config["BLOCK_N"] == 256 or (config["EPILOGUE_SUBTILE"] and config["BLOCK_M"] >= 128)))


def space(device: str = "h200", constrained: bool = True) -> Space:
    """The Hopper GEMM's Space on ``device``: ``"h200"`` (every knob, constrained to what fits the
    H200 and what Triton compiles for it) or ``"interpreter"`` (small tiles, no warp
    specialization or clusters). ``constrained=False`` keeps the configs that fit but do not
    compile (the space ``experiments/hopper_compile_sweep.py`` compiles)."""
    if device == "interpreter":
        return Space(BLOCK_M=[16, 32], BLOCK_N=[16, 32], BLOCK_K=[16, 32], GROUP_M=[1, 8], PERSISTENT=[0, 1],
                     WARP_SPECIALIZE=[0], FLATTEN=[0, 1], EPILOGUE_SUBTILE=[0, 1], num_warps=[4], num_stages=[2],
                     constraints=[meaningful])
    if device != "h200":
        raise ValueError(f"matmul_hopper.space(device=...) knows 'h200' and 'interpreter'. Got {device!r} instead.")
    return Space(
        BLOCK_M=[64, 128, 256], BLOCK_N=[64, 128, 256], BLOCK_K=[32, 64, 128], GROUP_M=[1, 8],
        PERSISTENT=[0, 1], WARP_SPECIALIZE=[0, 1], FLATTEN=[0, 1], EPILOGUE_SUBTILE=[0, 1],
        num_warps=[4, 8], num_stages=[2, 3, 4, 5], num_ctas=[1, 2],
        constraints=[meaningful, fits_h200] + ([compiles] if constrained else []),
    )


def programs(device: torch.device | str) -> int:
    """The persistent grid's size: the device's SMs (``INTERPRETER_PROGRAMS`` on the CPU)."""
    device = torch.device(device)
    if device.type != "cuda":
        return INTERPRETER_PROGRAMS
    return torch.cuda.get_device_properties(device).multi_processor_count


def grid(m: int, n: int, sms: int) -> Callable[[dict], tuple[int]]:
    """One program per output tile, or at most one per SM for a persistent config."""
    def size(meta):
        tiles = triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])
        return (min(tiles, sms) if meta["PERSISTENT"] else tiles,)

    return size


def inputs(m: int, n: int, k: int, dtype: torch.dtype = torch.bfloat16, device: str = "cpu",
           seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``matmul.inputs``, in bf16 by default."""
    return matmul.inputs(m, n, k, dtype, device, seed)


def launch(kernel, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, **meta) -> None:
    """C = A @ B. Tensor descriptors need row-major tensors whose rows are multiples of 16 bytes."""
    if a.dim() != 2 or b.dim() != 2 or b.shape[0] != a.shape[1] or tuple(c.shape) != (a.shape[0], b.shape[1]):
        raise ValueError(f"matmul_hopper needs a (M, K), b (K, N) and c (M, N); got a {tuple(a.shape)}, "
                         f"b {tuple(b.shape)}, c {tuple(c.shape)}")
    m, k = a.shape
    n = b.shape[1]
    check_tensors("matmul_hopper", a=a, b=b, c=c)
    prepare_launch("matmul_hopper", a)
    kernel[grid(m, n, programs(a.device))](a, b, c, m, n, k, **meta)


reference = matmul.reference
