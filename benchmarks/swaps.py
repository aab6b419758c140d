"""How the library benchmarks put tunekit in Triton's place: the variants that ``real_libraries.py``,
``library_tests.py`` and its pytest plugin compare, defined once.

* ``stock``: Triton's autotuner, untouched;
* ``tk``: ``triton.autotune = tunekit.autotune`` before the library is imported, the one-line
  switch a library user makes (it does not reach a library's own subclasses of Triton's
  ``Autotuner``, such as FlagGems' ``LibTuner``);
* ``tk_patch``: the library imported inside ``tunekit.patch_triton()``, which also makes tunekit's
  ``Autotuner`` the base of those subclasses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

Imported = TypeVar("Imported")

#: each variant, and what it does before the library is imported
VARIANTS: dict[str, str] = {
    "stock": "Triton's autotuner",
    "tk": "triton.autotune = tunekit.autotune",
    "tk_patch": "the library imported inside tunekit.patch_triton()",
}


def import_swapped(variant: str, import_library: Callable[[], Imported]) -> Imported:
    """Call ``import_library`` (which imports the library and returns what the caller needs of it)
    with ``variant``'s autotuner in Triton's place. ``tk``'s switch stays for the rest of the
    process, as a user's would."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}: one of {', '.join(VARIANTS)}")
    if variant == "stock":
        return import_library()
    import tunekit

    if variant == "tk":
        import triton

        triton.autotune = tunekit.autotune
        return import_library()
    with tunekit.patch_triton():
        return import_library()


def classes_on_tunekit_base() -> list[str]:
    """The classes outside tunekit built on tunekit's ``Autotuner`` in this process: a library's
    subclasses of Triton's ``Autotuner`` made under ``patch_triton`` (empty where tunekit is not
    imported)."""
    import sys

    tunekit = sys.modules.get("tunekit")
    if tunekit is None:
        return []
    found, stack = set(), list(tunekit.Autotuner.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if not cls.__module__.startswith("tunekit"):
            found.add(f"{cls.__module__}.{cls.__qualname__}")
    return sorted(found)
