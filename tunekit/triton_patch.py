"""``tunekit.patch_triton()``: a library imported in the block tunes its kernels with tunekit.

A user's ``triton.autotune = tunekit.autotune`` reaches a library's ``@triton.autotune`` sites,
not its own subclasses of Triton's ``Autotuner`` (flash-linear-attention's ``CachedAutotuner``,
behind ``fla_cache_autotune``, holds most of its kernels). A subclass takes its base when its
module is imported, so while the block runs, Triton's ``Autotuner`` and ``autotune`` are
tunekit's under every name Triton exports them by, and after it they are Triton's again:
code that recognises Triton's autotuners by the class it imports at call time (PyTorch's
Dynamo, Inductor) still finds Triton's class, of which tunekit's is a subclass.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import triton
import triton.runtime
import triton.runtime.autotuner

from .autotuner import Autotuner, autotune

logger = logging.getLogger(__name__)

#: Where Triton exports its autotuner: (module, attribute, tunekit's stand-in).
_NAMES: tuple[tuple[object, str, object], ...] = (
    (triton, "autotune", autotune),
    (triton.runtime, "autotune", autotune),
    (triton.runtime, "Autotuner", Autotuner),
    (triton.runtime.autotuner, "autotune", autotune),
    (triton.runtime.autotuner, "Autotuner", Autotuner),
)
_MISSING = object()


@contextlib.contextmanager
def patch_triton() -> Iterator[None]:
    """While the block runs, ``triton.autotune`` and ``triton.runtime.autotuner.Autotuner``
    (and their other exported names) are tunekit's; after it, what they were before::

        with tunekit.patch_triton():
            import fla.ops  # its @triton.autotune sites and its Autotuner subclasses tune with tunekit

    A module imported before the block, or that the library imports later (at its first call),
    keeps Triton's; subclasses of Triton's ``Autotuner`` already defined are named in a warning.
    A name the block sets to something else (a library's own ``triton.autotune = ...``) is left
    as the block set it. The names are the process's: enter the block from one thread, around
    imports, with no other thread checking Triton's classes meanwhile."""
    _warn_of_subclasses_defined_before()
    before = [(module, name, getattr(module, name, _MISSING)) for module, name, _ in _NAMES]
    for module, name, ours in _NAMES:
        setattr(module, name, ours)
    try:
        yield
    finally:
        for (module, name, value), (_, _, ours) in zip(before, _NAMES):
            if getattr(module, name, _MISSING) is not ours:  # the block set its own: that stays
                continue
            if value is _MISSING:
                delattr(module, name)
            else:
                setattr(module, name, value)


def _warn_of_subclasses_defined_before() -> None:
    """Say which subclasses of Triton's ``Autotuner`` (other than tunekit's) exist already: their
    modules were imported before the block, so their kernels tune with Triton's."""
    base = triton.runtime.autotuner.Autotuner
    found, seen = [], set()
    stack = list(base.__subclasses__())
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        stack.extend(cls.__subclasses__())
        if not issubclass(cls, Autotuner) and not cls.__module__.startswith(("triton.", "tunekit.")):
            found.append(f"{cls.__module__}.{cls.__qualname__}")
    if found:
        logger.warning("patch_triton(): %s subclass Triton's Autotuner and were defined before the block, so the "
                       "kernels they wrap tune with Triton's; import their modules inside the block",
                       ", ".join(sorted(found)))
