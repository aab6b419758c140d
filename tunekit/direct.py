"""Launch a tuned config's compiled kernel directly on a cached call, guarded by its specialisation.

``JITFunction.run`` spends most of a cached launch on what cannot change between calls of one
tuned config (options, cache keys, hooks that are not set). A ``DirectLaunch`` keeps, per device,
the compiled kernels its config launched through ``JITFunction.run`` and the specialisation each
was compiled for; a later call binds its arguments with Triton's own binder (dtypes, 16-byte
alignment of pointers, integers equal to 1 or divisible by 16, None arguments, constexpr
values) and, where that specialisation is one it holds, launches that kernel through Triton's
launcher on the current device and stream. Anything else (another specialisation, another
device, a launch hook, pre-run hook or pipeline-stage hook, ``knobs.runtime.debug``, a changed
global the kernel reads, a Triton release ``tunekit.compat`` does not know) takes
``JITFunction.run``, whose result it then keeps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import settings
from .compat import LaunchAdapter

#: Specialisations kept per device: a config called with both aligned and misaligned views, or
#: with n == 1 now and then, launches directly in each without one pushing the other out.
KEPT_PER_DEVICE = 4


class DirectLaunch:
    """The compiled kernels of one JIT function under one config's values, by device."""

    __slots__ = ("_adapter", "_jit", "_constants", "_kept", "_binders")

    def __init__(self, adapter: LaunchAdapter, jit_function: Any, constants: Mapping[str, Any]) -> None:
        self._adapter = adapter
        self._jit = jit_function
        self._constants = dict(constants)  # the config's meta-parameters and options
        #: device -> [(specialisation, kernel, launcher, function handle, packed metadata), ...]
        self._kept: dict[int, list[tuple[list, Any, Any, Any, Any]]] = {}
        self._binders: dict[int, Any] = {}  # device -> the JIT function's binder there

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
        if kept is None or jit.pre_run_hooks or not adapter.plain() or self._globals_changed():
            return None
        bound, specialisation, _ = self._binders[device](*args, **kwargs, **self._constants)
        for held, kernel, launcher, function, packed in kept:
            if held == specialisation:
                break
        else:
            return None
        if callable(grid):
            grid = grid(bound)
        size = len(grid)
        launcher(grid[0], grid[1] if size > 1 else 1, grid[2] if size > 2 else 1, adapter.current_stream(device),
                 function, packed, None, None, None, *bound.values())
        return kernel

    def keep(self, args: tuple, kwargs: Mapping[str, Any], kernel: Any) -> None:
        """Keep ``kernel``, which ``JITFunction.run`` just launched for this call, under the
        call's specialisation on the current device."""
        parts = self._adapter.launcher(kernel)
        if parts is None or not self._adapter.plain():  # a debug build, or launched under a hook
            return
        device = self._adapter.current_device()
        binder = self._binders.setdefault(device, self._adapter.binder(self._jit, device))
        _, specialisation, _ = binder(*args, **kwargs, **self._constants)
        kept = self._kept.setdefault(device, [])
        kept[:] = [entry for entry in kept if entry[0] != specialisation][-(KEPT_PER_DEVICE - 1):]
        kept.append((specialisation, kernel, *parts))

    def _globals_changed(self) -> bool:
        """Whether a global the kernel read when it compiled has changed (``JITFunction.run``
        then raises, which the slow path lets it do)."""
        for (name, _), (value, namespace) in self._jit.used_global_vals.items():
            if namespace.get(name, _MISSING) != value:
                return True
        return False


_MISSING = object()
