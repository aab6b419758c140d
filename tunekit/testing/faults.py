"""Kernels that fail on purpose, for fault-injection tests and the H200 check.

``faulty_add`` adds two vectors under the Triton interpreter, except for some BLOCK sizes,
each failing one way: ``SEGFAULT_BLOCK`` stores far out of bounds (the interpreter's store
then segfaults the process), ``HANG_BLOCK`` never returns, ``WRONG_BLOCK`` skips the last
tile, ``RAISE_BLOCK`` fails a static assertion. ``faulty_add_gpu`` does the same with real
device faults for a GPU: an illegal memory access, a wrong tile, and a spin that never ends.
``overrunning_add`` adds two vectors and, for configs that ask for it, also stores a few
elements past the end of its output or before its start, as a mask one tile too loose or an
offset off by a few elements does: memory that belongs to no argument. ``add_one_unmasked``
stores whole tiles with no mask, legal where the caller pads its allocations. They live at the top
level of an importable module so that benchmark workers can import them.
"""

from __future__ import annotations

import time

import triton
import triton.language as tl

from tunekit.space import Space

SEGFAULT_BLOCK = 128
HANG_BLOCK = 256
WRONG_BLOCK = 512
RAISE_BLOCK = 1024
GOOD_BLOCKS = (64, 2048)
# what the kernels read: compiled kernels may only read globals that are constexpr
_SEGFAULT, _HANG, _WRONG, _RAISE = (tl.constexpr(b) for b in (SEGFAULT_BLOCK, HANG_BLOCK, WRONG_BLOCK, RAISE_BLOCK))


def space() -> Space:
    """Two good configs and one of each fault, in an order that puts a fault first."""
    return Space(BLOCK=[SEGFAULT_BLOCK, HANG_BLOCK, WRONG_BLOCK, RAISE_BLOCK, *GOOD_BLOCKS], num_warps=[4])


def _hang() -> None:  # called from the interpreted kernel body: Python runs it
    time.sleep(3600)


@triton.jit
def _store(out_ptr, offsets, value, mask, n, BLOCK: tl.constexpr):
    """The sum's store: far out of bounds for ``SEGFAULT_BLOCK``, without the last tile for ``WRONG_BLOCK``."""
    if BLOCK == _SEGFAULT:
        tl.store(out_ptr + offsets + (1 << 40), value)
    elif BLOCK == _WRONG:
        tl.store(out_ptr + offsets, value, mask=offsets < n - BLOCK)
    else:
        tl.store(out_ptr + offsets, value, mask=mask)


@triton.jit
def faulty_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.static_assert(BLOCK != _RAISE)
    if BLOCK == _HANG:
        _hang()
    value = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
    _store(out_ptr, offsets, value, mask, n, BLOCK)


@triton.jit
def faulty_add_gpu(x_ptr, y_ptr, out_ptr, flag_ptr, n, BLOCK: tl.constexpr):
    """On a GPU: ``SEGFAULT_BLOCK`` makes an illegal memory access, ``WRONG_BLOCK`` skips the
    last tile, ``HANG_BLOCK`` spins on a flag nobody sets (``flag_ptr`` holds 0)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    value = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
    if BLOCK == _HANG:
        while tl.load(flag_ptr, volatile=True) == 0:
            pass
    _store(out_ptr, offsets, value, mask, n, BLOCK)


#: Elements that ``overrunning_add`` stores past the end of ``out`` (PAST_END) or before its start
#: (BEFORE_START) when a config sets that parameter to it.
OVERRUN = 24


@triton.jit
def overrunning_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, PAST_END: tl.constexpr,
                    BEFORE_START: tl.constexpr):
    """out = x + y; its store's mask lets PAST_END more elements through (the grid must cover
    them: n not a multiple of BLOCK), and BEFORE_START > 0 also stores the first tile's first
    BEFORE_START sums that many elements before out's start."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    value = tl.load(x_ptr + offsets, mask=mask, other=1.0) + tl.load(y_ptr + offsets, mask=mask, other=1.0)
    tl.store(out_ptr + offsets, value, mask=offsets < n + PAST_END)
    if BEFORE_START > 0:
        tl.store(out_ptr + offsets - BEFORE_START, value, mask=offsets < BEFORE_START)


@triton.jit
def add_one_unmasked(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out = x + 1 in whole tiles, with no mask: the caller pads both allocations to a multiple of
    every BLOCK, and ``n`` (the elements it uses) is only the tuning key."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + 1.0)
