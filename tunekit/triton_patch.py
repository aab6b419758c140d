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
from collections.abc import Iterator

import triton
import triton.runtime
import triton.runtime.autotuner

from .autotuner import Autotuner, autotune

#: Where Triton exports its autotuner: (module, attribute, tunekit's stand-in).
_NAMES = (
    (triton, "autotune", autotune),
    (triton.runtime, "autotune", autotune),
    (triton.runtime, "Autotuner", Autotuner),
    (triton.runtime.autotuner, "autotune", autotune),
    (triton.runtime.autotuner, "Autotuner", Autotuner),
)


@contextlib.contextmanager
def patch_triton() -> Iterator[None]:
    """While the block runs, ``triton.autotune`` and ``triton.runtime.autotuner.Autotuner``
    (and their other exported names) are tunekit's; after it, what they were before::

        with tunekit.patch_triton():
            import fla.ops  # its @triton.autotune sites and its Autotuner subclasses tune with tunekit

    A module the library imports later, at its first call, is not in the block: it gets Triton's."""
    before = [(module, name, getattr(module, name)) for module, name, _ in _NAMES if hasattr(module, name)]
    for module, name, ours in _NAMES:
        setattr(module, name, ours)
    try:
        yield
    finally:
        for module, name, _ in _NAMES:
            delattr(module, name)
        for module, name, value in before:
            setattr(module, name, value)
