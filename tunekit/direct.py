"""Launch a tuned config's compiled kernel directly on a cached call, guarded by its specialisation.

``JITFunction.run`` spends most of a cached launch on what cannot change between calls of one
tuned config (options, cache keys, hooks that are not set). A ``DirectLaunch`` keeps, per device,
the compiled kernels its config launched through ``JITFunction.run`` and the specialisation each
was compiled for, and launches one of them through Triton's launcher on the current device and
stream when a later call has that specialisation. Two guards say whether it has:

* for a call by position of tensors, integers, floats, booleans, None and constexpr values on
  the CUDA backend, a function generated for the kept call that compares what the specialisation
  is made of: each tensor's class, dtype and 16-byte alignment, each integer's equality to 1,
  divisibility by 16 and width, each None, each constexpr's class, value and text. It is
  stricter than Triton where a parameter is not specialised (a call it refuses goes to the next
  guard);
* for any other call, Triton's own binder, whose specialisation is compared with the kept ones
  as text (``LaunchAdapter.specialisation_text``).

A kept kernel also carries the compile options ``JITFunction.run`` adds to every call (``debug``,
``instrumentation_mode``, ...), which a call must share. Anything else (another specialisation or
option, compile options passed with the call, another device, a launch hook, pre-run hook or
pipeline-stage hook, a changed global the kernel reads, Triton's caches cleared, a Triton release
``tunekit.compat`` does not know) takes ``JITFunction.run``, whose kernel is then kept, up to
``MAX_KEEPS_PER_DEVICE`` times.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import settings
from .compat import LaunchAdapter

#: Specialisations kept per device: a config called with both aligned and misaligned views, or
#: with n == 1 now and then, launches directly in each without one pushing the other out.
KEPT_PER_DEVICE = 4
#: Kernels kept per device before a DirectLaunch gives up there: calls that cycle through more
#: specialisations than it keeps would pay a keep on top of every ``JITFunction.run``.
MAX_KEEPS_PER_DEVICE = 16

_INT32 = (-(2**31), 2**31 - 1)


class Kept:
    """One compiled kernel of a DirectLaunch and how a call is matched to it and launched."""

    __slots__ = ("specialisation", "options", "kernel", "launcher", "function", "packed", "guard", "arity", "tail",
                 "names")

    def __init__(self, specialisation: str, options: tuple, kernel: Any, parts: tuple[Any, Any, Any],
                 bound: Mapping[str, Any], guard: Callable[..., bool] | None, arity: int) -> None:
        self.specialisation, self.options, self.kernel = specialisation, options, kernel
        self.launcher, self.function, self.packed = parts
        self.guard, self.arity = guard, arity
        # the parameters after the call's positional ones, fixed for a positional call (constants,
        # defaults); none kept otherwise, where they may be the caller's tensors
        self.tail = tuple(list(bound.values())[arity:]) if guard is not None else ()
        self.names = tuple(bound)


class DirectLaunch:
    """The compiled kernels of one JIT function under one config's values, by device."""

    __slots__ = ("_adapter", "_jit", "_constants", "_kept", "_binders", "_keeps", "_parameters", "_positional")

    def __init__(self, adapter: LaunchAdapter, jit_function: Any, constants: Mapping[str, Any]) -> None:
        self._adapter = adapter
        self._jit = jit_function
        self._constants = dict(constants)  # the config's meta-parameters and options
        self._kept: dict[int, list[Kept]] = {}
        self._binders: dict[int, Any] = {}  # device -> the JIT function's binder there when kept
        self._keeps: dict[int, int] = {}  # device -> kernels kept there so far
        self._parameters = frozenset(jit_function.arg_names)
        # every parameter bindable by position: a positional call binds one value to each
        self._positional = all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
                               for p in jit_function.signature.parameters.values())

    @staticmethod
    def for_function(fn: Any, constants: Mapping[str, Any]) -> DirectLaunch | None:
        """A DirectLaunch for ``fn`` under ``constants``, or None where ``fn`` is not a plain
        ``JITFunction`` (a ``triton.heuristics`` computes values per call), this Triton has no
        adapter, or ``TUNEKIT_DIRECT_LAUNCH=0``."""
        from triton.runtime.jit import JITFunction

        if type(fn) is not JITFunction or not settings.direct_launch():
            return None
        adapter = LaunchAdapter.for_this_triton()
        return None if adapter is None else DirectLaunch(adapter, fn, constants)

    def __call__(self, args: tuple, kwargs: Mapping[str, Any], grid: Any) -> Any:
        """Launch ``args`` (and the call's keyword arguments, ``kwargs``) directly and return the
        compiled kernel, as ``JITFunction.run`` does; None, having launched nothing, where the
        call must go through ``JITFunction.run``."""
        adapter, jit = self._adapter, self._jit
        device = adapter.current_device()
        kept = self._kept.get(device)
        if not kept or jit.pre_run_hooks or not adapter.plain() or self._globals_changed():
            return None
        if adapter.binder_now(jit, device) is not self._binders[device]:  # Triton's caches were cleared
            kept.clear()
            return None
        options = adapter.options(jit)
        if not kwargs:
            for entry in kept:
                if entry.guard is not None and len(args) == entry.arity and entry.options == options \
                        and entry.guard(*args):
                    return self._launch(entry, (*args, *entry.tail), grid, device)
        elif not kwargs.keys() <= self._parameters:
            return None  # a compile option with the call (``num_warps=``...): another kernel's key
        bound, specialisation, _ = self._binders[device](*args, **kwargs, **self._constants)
        text = adapter.specialisation_text(specialisation)
        for entry in kept:
            if entry.specialisation == text and entry.options == options:
                return self._launch(entry, tuple(bound.values()), grid, device)
        return None

    def _launch(self, entry: Kept, values: tuple, grid: Any, device: int) -> Any:
        if callable(grid):
            grid = grid(dict(zip(entry.names, values)))
        size = len(grid)
        entry.launcher(grid[0], grid[1] if size > 1 else 1, grid[2] if size > 2 else 1,
                       self._adapter.current_stream(device), entry.function, entry.packed, None, None, None, *values)
        return entry.kernel

    def keep(self, args: tuple, kwargs: Mapping[str, Any], kernel: Any) -> None:
        """Keep ``kernel``, which ``JITFunction.run`` just launched for this call, under the
        call's specialisation and compile options on the current device."""
        adapter, jit = self._adapter, self._jit
        parts = adapter.launcher(kernel)
        if parts is None or jit.pre_run_hooks or not adapter.plain() or not kwargs.keys() <= self._parameters:
            return
        device = adapter.current_device()
        keeps = self._keeps[device] = self._keeps.get(device, 0) + 1
        if keeps > MAX_KEEPS_PER_DEVICE:
            self._kept[device] = []  # given up here: every call goes through JITFunction.run
            return
        binder = adapter.binder(jit, device)
        if binder is not self._binders.get(device):
            self._binders[device] = binder
            self._kept[device] = []  # kept under another binder: Triton's caches were cleared
        bound, specialisation, _ = binder(*args, **kwargs, **self._constants)
        guard = None
        if not kwargs and self._positional and adapter.backend(jit, device) == "cuda":
            guard = positional_guard(args, [param.is_constexpr for param in jit.params])
        text = adapter.specialisation_text(specialisation)
        kept = self._kept.setdefault(device, [])
        options = adapter.options(jit)
        kept[:] = [entry for entry in kept if (entry.specialisation, entry.options) != (text, options)
                   ][-(KEPT_PER_DEVICE - 1):]
        kept.append(Kept(text, options, kernel, parts, bound, guard, len(args)))

    def _globals_changed(self) -> bool:
        """Whether a global the kernel read when it compiled has changed (``JITFunction.run``
        then raises, which the slow path lets it do)."""
        for (name, _), (value, namespace) in self._jit.used_global_vals.items():
            if namespace.get(name, _MISSING) != value:
                return True
        return False


_MISSING = object()


def int_width(value: int) -> str:
    """The integer type Triton gives ``value`` (``runtime/jit.py``'s ``specialize_impl``)."""
    if _INT32[0] <= value <= _INT32[1]:
        return "i32"
    return "u64" if 2**63 <= value <= 2**64 - 1 else "i64"


def positional_guard(args: Sequence[Any], constexpr: Sequence[bool]) -> Callable[..., bool] | None:
    """A function of the call's positional arguments that is true only where each has what
    made its specialisation on the CUDA backend in ``args`` (``constexpr``: per parameter,
    whether it is one); None where an argument is of a kind it does not know (a tuple, a tensor
    descriptor, ...), which Triton's binder then guards."""
    conditions: list[str] = []
    namespace: dict[str, Any] = {"int_width": int_width}
    for i, value in enumerate(args):
        name = f"a{i}"
        if i < len(constexpr) and constexpr[i]:
            namespace[f"v{i}"], namespace[f"t{i}"] = value, type(value)
            condition = f"{name}.__class__ is t{i} and {name} == v{i}"
            if type(value) not in (int, str, bool, type(None)):  # 0.0 and -0.0, (1, 2) and (1.0, 2) apart
                namespace[f"r{i}"] = repr(value)
                condition += f" and repr({name}) == r{i}"
            if isinstance(getattr(value, "cache_key", None), str):  # a JIT function: its source too
                namespace[f"k{i}"] = value.cache_key
                condition += f" and {name}.cache_key == k{i}"
            conditions.append(condition)
        elif value is None:
            conditions.append(f"{name} is None")
        elif type(value) is bool or type(value) is float:
            conditions.append(f"{name}.__class__ is {type(value).__name__}")
        elif type(value) is int:
            equal_one = "==" if value == 1 else "!="
            divisible = "==" if value % 16 == 0 else "!="
            width = (f"{_INT32[0]} <= {name} <= {_INT32[1]}" if int_width(value) == "i32"
                     else f"int_width({name}) == {int_width(value)!r}")
            conditions.append(f"{name}.__class__ is int and {name} {equal_one} 1 and {name} % 16 {divisible} 0 "
                              f"and {width}")
        elif hasattr(value, "data_ptr") and hasattr(value, "dtype"):
            namespace[f"c{i}"], namespace[f"d{i}"] = type(value), value.dtype
            aligned = "==" if value.data_ptr() % 16 == 0 else "!="
            conditions.append(f"{name}.__class__ is c{i} and {name}.dtype is d{i} and {name}.data_ptr() % 16 {aligned} 0")
        else:
            return None
    parameters = ", ".join(f"a{i}" for i in range(len(args)))
    body = " and ".join(f"({condition})" for condition in conditions) or "True"
    exec(f"def guard({parameters}):\n    return {body}\n", namespace)  # noqa: S102 - as Triton makes its binder
    guard: Callable[..., bool] = namespace["guard"]
    return guard
