"""Guarded copies of a launch's tensor arguments: what configs are checked and timed on.

A config whose mask is one tile too loose stores past the end of its output. On the caller's
tensors that store lands in whatever memory follows (another of the caller's tensors), and an
output check that compares only the arguments passes it. So configs run on copies: each storage
the arguments use is copied once (the span from its first used byte to its last), between two
guard bands filled with ``GUARD_BYTE``, and every argument is viewed into its copy with the
caller's size, strides, dtype, device and misalignment to 16 bytes (Triton specialises on
alignment). Arguments that share memory in the call (views of one buffer, one tensor passed as
input and output) share it in the copies too, at the same distances apart. A store into a guard
band hurts nothing, and ``GuardedTensors.verify`` reports it.

``ship`` turns the same tensors into a ``ShippedTensors`` for a benchmark worker (each span's
bytes once, on the CPU, with its members' layouts); ``ShippedTensors.land`` builds the guarded
copies there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
    """Bytes of each guard band around a copied span of ``span`` bytes: a quarter of the span,
    at least 64 KiB and at most 64 MiB, rounded up to 16 bytes.

    An overrun that a mask lets through is at most about one tile past the tensor's end (or
    before its start): for a 1-D tile, BLOCK elements (64 KiB holds a 16K-element float32 tile);
    for a 2-D tile whose row mask is missing, up to BLOCK_M rows of the tensor, which is a small
    fraction of any tensor large enough to need many tiles (a quarter covers 64 of 256 rows). The
    64 MiB cap bounds the memory added to a large tensor (at most 2 x 64 MiB, an eighth of a 1 GiB
    span); a store past the guard band is not caught, and lands in other memory of the copy's
    process, never in the caller's tensors.
    """
    quarter = -(-(span // 4) // ALIGNMENT) * ALIGNMENT
    return min(MAX_GUARD, max(MIN_GUARD, quarter))


def out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` says an allocation failed for lack of memory (device or host)."""
    if isinstance(error, torch.OutOfMemoryError):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and any(
        words in text for words in ("out of memory", "can't allocate memory", "not enough memory"))


@dataclass(frozen=True)
class Member:
    """One argument within a copied span: its name, where it starts (bytes from the span's
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
class ShippedSpan:
    """One storage's used span on its way to a benchmark worker."""

    data: torch.Tensor  # the span's bytes (uint8), on the CPU
    misalignment: int  # the span's start modulo 16 bytes in the caller's process
    device: str
    members: tuple[Member, ...]


@dataclass(frozen=True)
class ShippedTensors:
    """Named tensors on their way to a benchmark worker: each storage's used span once (a CPU
    copy, so it pickles by value), with the layouts of the arguments in it."""

    spans: tuple[ShippedSpan, ...]

    def land(self, *, guarded: bool = True) -> GuardedTensors:
        """The copies in this process, on the tensors' devices, between guard bands (without
        them if not ``guarded``: what a worker falls back to when the bands do not fit)."""
        return GuardedTensors([_GuardedSpan.copy(s.data, s.misalignment, s.device, s.members, guarded)
                               for s in self.spans])


class _GuardedSpan:
    """One storage's used span copied into a buffer between two guard bands, and its members'
    views into the copy."""

    def __init__(self, buffer: torch.Tensor, start: int, length: int, members: tuple[Member, ...]) -> None:
        self.buffer = buffer  # uint8: guard band, the span, guard band
        self.start = start
        self.length = length
        self.members = members
        storage = buffer.untyped_storage()
        self.tensors: dict[str, torch.Tensor] = {}
        for member in members:
            element = member.dtype.itemsize
            where = start + member.offset
            if where % element:
                raise ValueError(f"{member.name} is not aligned to its {element}-byte elements, so it cannot be "
                                 "copied with its alignment")
            self.tensors[member.name] = torch.empty(0, dtype=member.dtype, device=buffer.device).set_(
                storage, where // element, member.size, member.stride)

    @classmethod
    def copy(cls, data: torch.Tensor, misalignment: int, device: str | torch.device, members: tuple[Member, ...],
             guarded: bool) -> _GuardedSpan:
        """A new buffer on ``device`` holding ``data`` (uint8) at ``misalignment`` to 16 bytes,
        its guard bands (if ``guarded``) filled."""
        length = data.numel()
        guard = guard_bytes(length) if guarded else 0
        buffer = _allocate(guard + ALIGNMENT - 1 + length + guard, device)
        start = guard + (misalignment - buffer.data_ptr() - guard) % ALIGNMENT
        buffer[start:start + length].copy_(data)
        span = cls(buffer, start, length, members)
        span.reset()
        return span

    def bands(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The guard band before the span and the one after it (the alignment slack included)."""
        return self.buffer[:self.start], self.buffer[self.start + self.length:]

    def reset(self) -> None:
        """Fill both guard bands with ``GUARD_BYTE``."""
        for band in self.bands():
            band.fill_(GUARD_BYTE)

    def written(self) -> list[str]:
        """What was stored into either guard band, one phrase per band; those bands are reset."""
        found = []
        bands = self.bands()
        counts = torch.stack([(band != GUARD_BYTE).sum() for band in bands]).tolist()  # one wait for the device
        for band, side, count in zip(bands, ("before", "after"), counts):
            if not count:
                continue
            positions = (band != GUARD_BYTE).nonzero()
            if side == "before":
                reach, where = band.numel() - int(positions.min()), "before its start"
            else:
                reach, where = int(positions.max()) + 1, "past its end"
            found.append(f"{count} bytes into the guard band {side} {self._edge(side)}, up to {reach} bytes {where}")
            band.fill_(GUARD_BYTE)
        return found

    def _edge(self, side: str) -> str:
        """The arguments that start (``before``) or end (``after``) where the span does."""
        at_edge = [m.name for m in self.members
                   if (m.offset == 0 if side == "before" else m.offset + m.extent == self.length)]
        return "/".join(at_edge or [m.name for m in self.members])


class GuardedTensors:
    """Copies of named tensors, each storage's used span once, between guard bands.

    Build it with ``copy_of`` (in the caller's process) or ``ShippedTensors.land`` (in a worker);
    ``tensors`` are the copies by name; ``verify`` after a launch says whether it stored into a
    guard band.
    """

    def __init__(self, spans: Sequence[_GuardedSpan]) -> None:
        self._spans = list(spans)
        self.tensors: dict[str, torch.Tensor] = {name: t for s in self._spans for name, t in s.tensors.items()}

    @classmethod
    def copy_of(cls, tensors: Mapping[str, torch.Tensor]) -> GuardedTensors:
        """Copies of ``tensors`` on their own devices. Raises what the allocator raises when the
        memory for them is lacking (see ``out_of_memory``)."""
        return cls([_GuardedSpan.copy(*_span_of(members), guarded=True) for members in _by_storage(tensors)])

    def verify(self) -> str | None:
        """None if no guard band was written since the last ``verify``; else a message naming the
        arguments next to each band written, how many bytes were written and how far from the
        argument they reached. Written bands are reset."""
        found = [phrase for s in self._spans for phrase in s.written()]
        return "out-of-bounds store: it wrote " + "; ".join(found) if found else None


def ship(tensors: Mapping[str, torch.Tensor]) -> ShippedTensors:
    """``tensors`` as a benchmark worker needs them: each storage's used span once, on the CPU."""
    spans = []
    for members in _by_storage(tensors):
        data, misalignment, device, layout = _span_of(members)
        spans.append(ShippedSpan(data.to("cpu", copy=True), misalignment, str(device), layout))
    return ShippedTensors(tuple(spans))


def with_tensors(arg_names: Sequence[str], args: tuple, kwargs: Mapping[str, Any],
                 tensors: Mapping[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """``args`` and ``kwargs`` (of a kernel with parameters ``arg_names``) with the arguments that
    ``tensors`` names replaced by its values."""
    args = tuple(tensors[arg_names[i]] if i < len(arg_names) and arg_names[i] in tensors else value
                 for i, value in enumerate(args))
    return args, {name: tensors.get(name, value) for name, value in kwargs.items()}


def _allocate(nbytes: int, device: str | torch.device) -> torch.Tensor:
    """A new uint8 buffer: the one allocation of guarded copies."""
    return torch.empty(nbytes, dtype=torch.uint8, device=device)


def _by_storage(tensors: Mapping[str, torch.Tensor]) -> list[list[tuple[str, torch.Tensor]]]:
    """The tensors grouped by the storage they view (device and base address)."""
    groups: dict[tuple[str, int], list[tuple[str, torch.Tensor]]] = {}
    for name, tensor in tensors.items():
        groups.setdefault((str(tensor.device), tensor.untyped_storage().data_ptr()), []).append((name, tensor))
    return list(groups.values())


def _span_of(members: list[tuple[str, torch.Tensor]]) -> tuple[torch.Tensor, int, torch.device, tuple[Member, ...]]:
    """The used span of one storage's ``members``: its bytes (a uint8 view of the caller's memory),
    its start's misalignment, its device, and the members' layouts relative to its start."""
    first = min(t.data_ptr() for _, t in members)
    layouts = tuple(Member(name, t.data_ptr() - first, tuple(t.shape), tuple(t.stride()), t.dtype)
                    for name, t in members)
    length = max(m.offset + m.extent for m in layouts)
    storage = members[0][1].untyped_storage()
    device = members[0][1].device
    data = torch.empty(0, dtype=torch.uint8, device=device).set_(storage, first - storage.data_ptr(), (length,), (1,))
    return data, first % ALIGNMENT, device, layouts
