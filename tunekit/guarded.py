"""Guarded copies of a launch's tensor arguments: what configs are checked and timed on.

A config whose mask is one tile too loose stores past the end of its output. On the caller's
tensors that store lands in whatever memory follows (another of the caller's tensors), and an
output check that compares only the arguments passes it. So configs run on copies. For each
storage the arguments use, the *region* is copied once: the span from the arguments' first used
byte to their last, widened by a guard band's size on each side but never beyond the caller's
allocation (the storage). Where the region reaches an end of the allocation, a guard band filled
with ``GUARD_BYTE`` borders it in the copy; a store there is out of bounds for any kernel, hurts
nothing, and ``GuardedTensors.verify`` reports it. Where the allocation goes on past the span, the
region's bytes there are the caller's (a kernel that reads them reads the same values), and so
are the bytes between the elements of strided arguments (``big[:, :40]``): a store into any of
them would change the caller's allocation outside every argument (a neighbouring slice of one
buffer, a KV cache around its view), so ``verify`` reports it too, unless the kernel declares that
it writes such padding (``padding=True``: ``torch.empty(1024)[:1000]`` written whole by an
unmasked kernel). Every argument is viewed into its copy with the caller's size, strides, dtype,
device and misalignment to 16 bytes (Triton specialises on alignment); arguments that share
memory in the call (views of one buffer, one tensor passed as input and output) share it in the
copies too, at the same distances apart.

``GuardedTensors.originals`` are the tensors the copies were made from, which a config writes
only through arguments that are not copied (tensors in tuples, TensorDescriptor bases): the
check's pristine values, so that they need no copy of their own. ``ship`` turns the tensors
into a ``ShippedTensors`` for a benchmark worker (each region's bytes once, on the CPU, with its
members' layouts); ``ShippedTensors.land`` builds the same copies there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

#: What guard bands are filled with: the byte the MSVC debug heap puts around every allocation
#: ("no man's land"). As float32 or bfloat16 it is about -4.2e37, as integers a negative number:
#: not a value kernels store by accident.
GUARD_BYTE = 0xFD
#: Bounds of each guard band, in bytes (see ``guard_bytes``).
MIN_GUARD = 64 << 10
MAX_GUARD = 64 << 20
#: Triton specialises a pointer argument on whether it is divisible by this many bytes.
ALIGNMENT = 16


def guard_bytes(span: int) -> int:
    """Bytes of each guard band (and of the margin copied beside a span where the caller's
    allocation goes on) around a span of ``span`` bytes: a quarter of the span, at least 64 KiB
    and at most 64 MiB, rounded up to 16 bytes.

    An overrun that a mask lets through is at most about one tile past the tensor's end (or
    before its start): for a 1-D tile, BLOCK elements (64 KiB holds a 16K-element float32 tile);
    for a 2-D tile whose row mask is missing, up to BLOCK_M rows of the tensor, which is a small
    fraction of any tensor large enough to need many tiles (a quarter covers 64 of 256 rows). The
    64 MiB cap bounds the memory added to a large tensor (at most 2 x 64 MiB, an eighth of a 1 GiB
    span). A store beyond the band (or beyond the margin, where there is no band) is not caught
    and lands past the copy, in other memory of the process that runs the config: in a benchmark
    worker, the worker's own; in the caller's process, which shares its allocator with the
    caller's tensors, possibly one of them.
    """
    quarter = -(-(span // 4) // ALIGNMENT) * ALIGNMENT
    return min(MAX_GUARD, max(MIN_GUARD, quarter))


def out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` says an allocation failed for lack of memory (device or host)."""
    if isinstance(error, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and any(
        words in text for words in ("out of memory", "can't allocate memory", "not enough memory"))


@dataclass(frozen=True)
class Member:
    """One argument within a copied region: its name, where it starts (bytes from the region's
    start) and its layout."""

    name: str
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype

    @property
    def extent(self) -> int:
        """Bytes from its first element to just past its last (0 when it has no elements)."""
        if any(n == 0 for n in self.size):
            return 0
        return (1 + sum((n - 1) * s for n, s in zip(self.size, self.stride))) * self.dtype.itemsize


@dataclass(frozen=True)
class Region:
    """What is copied of one storage: its members' span, widened by up to ``guard`` bytes on
    each side within the caller's allocation, with a guard band of ``guard`` bytes on each side
    where the region reached the allocation's end."""

    data: torch.Tensor  # the region's bytes (uint8): a view of the caller's memory, or a CPU copy when shipped
    misalignment: int  # the region's start modulo 16 bytes in the caller's process
    device: str
    members: tuple[Member, ...]
    guard: int
    band_before: bool  # the region starts where the caller's allocation does
    band_after: bool  # the region ends where the caller's allocation does

    @property
    def span(self) -> tuple[int, int]:
        """Where the members' span starts and ends, in bytes from the region's start."""
        return min(m.offset for m in self.members), max(m.offset + m.extent for m in self.members)


@dataclass(frozen=True)
class ShippedTensors:
    """Named tensors on their way to a benchmark worker: each storage's region once (a CPU copy,
    so it pickles by value), with the layouts of the arguments in it."""

    regions: tuple[Region, ...]

    def land(self, *, guarded: bool = True, padding: bool = False) -> GuardedTensors:
        """The copies in this process, on the tensors' devices, with their guard bands (none if
        not ``guarded``: what a worker falls back to when the bands do not fit); ``padding``: as in
        ``GuardedTensors.copy_of``. The regions' bytes landed on the devices are the copies' ``originals``."""
        copies, originals = [], {}
        for region in self.regions:
            landed = region.data.to(region.device)  # no copy when it is there already
            if (landed.data_ptr() - region.misalignment) % ALIGNMENT:
                buffer, start = _place(landed, region.misalignment, region.device, 0, 0)
                landed = buffer[start:start + landed.numel()]
            originals.update(_views(landed, region.members))
            copies.append(_GuardedRegion.copy(replace(region, data=landed), guarded, padding))
        return GuardedTensors(copies, originals)


class _GuardedRegion:
    """One region copied into a buffer between its guard bands, and its members' views into the copy."""

    def __init__(self, buffer: torch.Tensor, start: int, region: Region, guarded: bool, padding: bool) -> None:
        self.buffer = buffer  # uint8: guard band (or alignment slack), the region, guard band (or slack)
        self.start = start
        self.length = region.data.numel()
        self.members = region.members
        self.span = region.span
        self.sides = [side for side, band in (("before", region.band_before), ("after", region.band_after))
                      if guarded and band]
        self.tensors = _views(buffer[start:start + self.length], region.members)
        #: The caller's bytes of the region (the copy's source, which no config writes), where the
        #: copy must keep them: outside every argument, unless the kernel writes padding.
        self.original = None if padding or not guarded else region.data
        self.gaps = _gaps(region) if self.original is not None else None

    @classmethod
    def copy(cls, region: Region, guarded: bool, padding: bool = False) -> _GuardedRegion:
        """A new buffer on the region's device holding its bytes at its misalignment to 16 bytes,
        its guard bands (if ``guarded``) filled."""
        guard = region.guard if guarded else 0
        buffer, start = _place(region.data, region.misalignment, region.device,
                               guard if region.band_before else 0, guard if region.band_after else 0)
        guarded_region = cls(buffer, start, region, guarded, padding)
        guarded_region.reset()
        return guarded_region

    def bands(self) -> dict[str, torch.Tensor]:
        """The guard bands by side (``before``, ``after``; the alignment slack included); a side
        where the caller's allocation goes on past the region has none."""
        slices = {"before": self.buffer[:self.start], "after": self.buffer[self.start + self.length:]}
        return {side: slices[side] for side in self.sides}

    def reset(self) -> None:
        """Fill the guard bands with ``GUARD_BYTE``."""
        for band in self.bands().values():
            band.fill_(GUARD_BYTE)

    def written(self) -> list[str]:
        """What was stored into the guard bands and into the caller's bytes outside every argument,
        one phrase per place written; those places are reset."""
        return self._written_into_bands() + self._written_outside()

    def _written_outside(self) -> list[str]:
        """What was stored into the region's bytes outside every argument (the caller's allocation
        around and between them); those bytes get the caller's values back."""
        if self.original is None:
            return []
        copy, original = self.buffer[self.start:self.start + self.length], self.original
        first, end = self.span
        places = {"before": slice(0, first), "after": slice(end, self.length)}
        changed = {side: copy[where] != original[where] for side, where in places.items() if where.stop > where.start}
        if self.gaps is not None:
            changed["between"] = (copy[first:end] != original[first:end]) & self.gaps
        if not changed:
            return []
        counts = torch.stack([torch.count_nonzero(c) for c in changed.values()]).tolist()  # one wait for the device
        found = []
        names = "/".join(m.name for m in self.members)
        for (side, mark), count in zip(changed.items(), counts):
            if not count:
                continue
            if side == "between":
                found.append(f"changed {count} bytes of the caller's allocation between the elements of {names}")
                span = copy[first:end]
                assert self.gaps is not None  # "between" is compared only where there are gaps
                span.copy_(torch.where(self.gaps, original[first:end], span))
                continue
            where = places[side]
            as_bytes = mark.view(torch.uint8)
            if side == "before":
                reach, what = first - int(as_bytes.argmax()), "before the start of"
            else:
                reach, what = int(mark.numel() - as_bytes.flip(0).argmax()), "past the end of"
            found.append(f"changed {count} bytes of the caller's allocation {what} {names}, up to {reach} bytes away")
            copy[where].copy_(original[where])
        return found

    def _written_into_bands(self) -> list[str]:
        bands = self.bands()
        if not bands:
            return []
        marks = {side: band != GUARD_BYTE for side, band in bands.items()}
        counts = torch.stack([torch.count_nonzero(m) for m in marks.values()]).tolist()  # one wait for the device
        found = []
        first, end = self.span
        for (side, mark), count in zip(marks.items(), counts):
            if not count:
                continue
            as_bytes = mark.view(torch.uint8)
            if side == "before":  # from the band's first written byte to the first member's start
                reach = self.start - int(as_bytes.argmax()) + first
                names, where = [m.name for m in self.members if m.offset == first], "before its start"
            else:  # from the last member's end to the band's last written byte
                reach = self.length - end + as_bytes.numel() - int(as_bytes.flip(0).argmax())
                names, where = [m.name for m in self.members if m.offset + m.extent == end], "past its end"
            found.append(f"wrote {count} bytes into the guard band {side} {'/'.join(names)}, up to {reach} bytes {where}")
            bands[side].fill_(GUARD_BYTE)
        return found


class GuardedTensors:
    """Copies of named tensors, each storage's region once, with guard bands where the regions
    reach the ends of the caller's allocations.

    Build it with ``copy_of`` (in the caller's process) or ``ShippedTensors.land`` (in a worker);
    ``tensors`` are the copies by name; ``originals`` the tensors they were copied from (the
    caller's, or the worker's landed bytes), which launches on the copies do not write; ``verify``
    after a launch says whether it stored into a guard band.
    """

    def __init__(self, regions: Sequence[_GuardedRegion], originals: Mapping[str, torch.Tensor]) -> None:
        self._regions = list(regions)
        self.tensors: dict[str, torch.Tensor] = {name: t for r in self._regions for name, t in r.tensors.items()}
        self.originals = dict(originals)

    @classmethod
    def copy_of(cls, tensors: Mapping[str, torch.Tensor], *, padding: bool = False) -> GuardedTensors:
        """Copies of ``tensors`` on their own devices; ``tensors`` are their originals. ``padding``:
        the kernel may write the bytes of the tensors' allocations outside the tensors (not an
        overrun). Raises what the allocator raises when the memory for them is lacking (see
        ``out_of_memory``)."""
        return cls([_GuardedRegion.copy(_region_of(members), guarded=True, padding=padding)
                    for members in _by_storage(tensors)], tensors)

    def verify(self) -> str | None:
        """None if no guard band and no byte of the caller's allocation outside the arguments was
        written since the last ``verify``; else a message naming the arguments next to each place
        written, how many bytes were written and how far from the argument they reached. What was
        written is reset."""
        found = [phrase for r in self._regions for phrase in r.written()]
        return "out-of-bounds store: it " + "; ".join(found) if found else None


def ship(tensors: Mapping[str, torch.Tensor]) -> ShippedTensors:
    """``tensors`` as a benchmark worker needs them: each storage's region once, on the CPU."""
    regions = (_region_of(members) for members in _by_storage(tensors))
    return ShippedTensors(tuple(replace(r, data=r.data.to("cpu", copy=True)) for r in regions))


def with_tensors(arg_names: Sequence[str], args: tuple, kwargs: Mapping[str, Any],
                 tensors: Mapping[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """``args`` and ``kwargs`` (of a kernel with parameters ``arg_names``) with the arguments that
    ``tensors`` names replaced by its values."""
    args = tuple(tensors[arg_names[i]] if i < len(arg_names) and arg_names[i] in tensors else value
                 for i, value in enumerate(args))
    return args, {name: tensors.get(name, value) for name, value in kwargs.items()}


def _allocate(nbytes: int, device: str | torch.device) -> torch.Tensor:
    """A new uint8 buffer: the one allocation of each guarded copy."""
    return torch.empty(nbytes, dtype=torch.uint8, device=device)


def _place(data: torch.Tensor, misalignment: int, device: str | torch.device, before: int,
           after: int) -> tuple[torch.Tensor, int]:
    """A new buffer on ``device`` holding ``before`` bytes, then ``data`` (uint8) at ``misalignment``
    to 16 bytes (after up to 15 bytes of slack), then ``after`` bytes; and where ``data`` starts in it."""
    buffer = _allocate(before + ALIGNMENT - 1 + data.numel() + after, device)
    start = before + (misalignment - buffer.data_ptr() - before) % ALIGNMENT
    buffer[start:start + data.numel()].copy_(data)
    return buffer, start


def _views(region: torch.Tensor, members: Sequence[Member]) -> dict[str, torch.Tensor]:
    """Each member viewed into ``region`` (uint8, its bytes at the members' alignment), by name."""
    storage, base = region.untyped_storage(), region.storage_offset()
    views = {}
    for member in members:
        element = member.dtype.itemsize
        where = base + member.offset
        if where % element:
            raise ValueError(f"{member.name} is not aligned to its {element}-byte elements, so it cannot be "
                             "copied with its alignment")
        views[member.name] = torch.empty(0, dtype=member.dtype, device=region.device).set_(
            storage, where // element, member.size, member.stride)
    return views


def _by_storage(tensors: Mapping[str, torch.Tensor]) -> list[list[tuple[str, torch.Tensor]]]:
    """The tensors grouped by the storage they view (device and base address)."""
    groups: dict[tuple[str, int], list[tuple[str, torch.Tensor]]] = {}
    for name, tensor in tensors.items():
        groups.setdefault((str(tensor.device), tensor.untyped_storage().data_ptr()), []).append((name, tensor))
    return list(groups.values())


def _region_of(members: list[tuple[str, torch.Tensor]]) -> Region:
    """The region of one storage's ``members`` (its bytes a uint8 view of the caller's memory):
    their span, widened by a guard band's size on each side within the storage."""
    storage = members[0][1].untyped_storage()
    device = members[0][1].device
    first = min(t.data_ptr() for _, t in members)
    span = tuple(Member(name, t.data_ptr() - first, tuple(t.shape), tuple(t.stride()), t.dtype) for name, t in members)
    end = first + max(m.offset + m.extent for m in span)
    guard = guard_bytes(end - first)
    allocation_start, allocation_end = storage.data_ptr(), storage.data_ptr() + storage.nbytes()
    start = min(first, max(allocation_start, first - guard))
    stop = max(end, min(allocation_end, end + guard))
    layouts = tuple(replace(m, offset=m.offset + first - start) for m in span)
    data = torch.empty(0, dtype=torch.uint8, device=device).set_(storage, start - allocation_start, (stop - start,),
                                                                  (1,))
    return Region(data, start % ALIGNMENT, str(device), layouts, guard, band_before=start <= allocation_start,
                  band_after=stop >= allocation_end)


def _gaps(region: Region) -> torch.Tensor | None:
    """Where the members' span holds no element of any member (bool, one per byte of the span),
    or None when their elements cover it (dense members side by side, the usual case)."""
    first, end = region.span
    dense = all(m.extent == m.dtype.itemsize * math.prod(m.size) for m in region.members)
    covered_to = first
    for start, stop in sorted((m.offset, m.offset + m.extent) for m in region.members if m.extent):
        if start > covered_to:
            break
        covered_to = max(covered_to, stop)
    if dense and covered_to >= end:
        return None
    marks, at = _place(torch.zeros(region.data.numel(), dtype=torch.uint8, device=region.device),
                       region.misalignment, region.device, 0, 0)
    storage, base = marks.untyped_storage(), marks.storage_offset() + at
    for member in region.members:
        width = min(member.dtype.itemsize, 8)  # complex128 (16 bytes): two int64 per element
        parts = member.dtype.itemsize // width
        unit = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[width]
        where = base + member.offset
        if where % width:
            return None  # not aligned to its elements: _views refuses such a member anyway
        size = (*member.size, parts)
        stride = (*(s * parts for s in member.stride), 1)
        torch.empty(0, dtype=unit, device=region.device).set_(storage, where // width, size, stride).fill_(-1)
    return marks[at + first:at + end] == 0

