"""pytest plugin of ``library_tests.py``, loaded with ``-p libtests_plugin`` (``benchmarks/`` on the path).

At import, which pytest does for ``-p`` plugins before any conftest (and so before the library):

* ``LIBTESTS_VARIANT``: one of ``swaps.VARIANTS`` (unset: ``stock``). ``tk`` makes the one-line
  switch a library user makes; ``tk_patch`` imports the modules named in ``LIBTESTS_IMPORTS``
  (comma-separated) inside ``tunekit.patch_triton()``, as a user of a library with its own
  ``Autotuner`` subclasses does. tunekit's store is ``TUNEKIT_STORE``, which the driver points at
  a fresh file;
* ``LIBTESTS_STUBS``: comma-separated module names made importable as empty stand-ins when their top
  package is not installed (a helper module imports them; the selected tests never use them).

During the run: ``LIBTESTS_LOG`` gets one JSON line with the collected node ids (and what
``triton.autotune`` is), then one per test phase report (the driver's record when the run is
killed before pytest writes its junit XML); after ``LIBTESTS_SOFT_S`` seconds no further test is
started (pytest stops as ``-x`` stops it, and still writes the XML).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import types
from typing import Any

from swaps import classes_on_tunekit_base, import_swapped

_STARTED = time.monotonic()


class _Stub(types.ModuleType):
    """An empty module whose every public attribute is a fresh empty class."""

    __version__ = "0.0.0"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = type(name, (), {})
        setattr(self, name, value)
        return value


def _install_stubs(names: list[str]) -> None:
    """Stand-ins for ``names`` (dotted; parents first) whose top package is not installed."""
    missing = {name.split(".")[0] for name in names if importlib.util.find_spec(name.split(".")[0]) is None}
    for name in names:
        if name.split(".")[0] not in missing:
            continue
        module = sys.modules.setdefault(name, _Stub(name))
        module.__path__ = []  # a package, so that submodules import
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules.setdefault(parent, _Stub(parent)), child, module)


_install_stubs([name for name in os.environ.get("LIBTESTS_STUBS", "").split(",") if name])

_VARIANT = os.environ.get("LIBTESTS_VARIANT", "stock")
_IMPORTS = [name for name in os.environ.get("LIBTESTS_IMPORTS", "").split(",") if name]
if _VARIANT == "tk_patch" and not _IMPORTS:  # the block would reach nothing: the run would be stock's under another name
    raise RuntimeError("libtests_plugin: LIBTESTS_VARIANT=tk_patch needs LIBTESTS_IMPORTS, the library's modules")
import_swapped(_VARIANT, lambda: [importlib.import_module(module) for module in _IMPORTS])


def _swap() -> str:
    """What the library was decorated with: ``triton.autotune``; under the block, the modules it
    imported; with tunekit, the library's classes built on tunekit's ``Autotuner`` (none for
    ``tk``, whose switch does not reach them)."""
    import triton

    found = f"{triton.autotune.__module__}.{triton.autotune.__qualname__}"
    if _VARIANT == "tk_patch":
        found += f" after tunekit.patch_triton() around {', '.join(_IMPORTS)}"
    if _VARIANT != "stock":
        found += f"; on tunekit's Autotuner: {', '.join(classes_on_tunekit_base()) or 'no class of the library'}"
    return found


def _log(record: dict[str, Any]) -> None:
    """One JSON line to ``LIBTESTS_LOG``, written as it happens (a killed run keeps what it did)."""
    path = os.environ.get("LIBTESTS_LOG")
    if path:
        with open(path, "a") as file:
            file.write(json.dumps(record) + "\n")


def pytest_collection_finish(session: Any) -> None:
    """The selected tests, and what the library was decorated with (``_swap``)."""
    _log({"collected": [item.nodeid for item in session.items], "autotune": _swap()})


def pytest_runtest_logreport(report: Any) -> None:
    _log({"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
          "seconds": round(report.duration, 3)})


def pytest_runtest_teardown(item: Any, nextitem: Any) -> None:
    """Past the soft limit, stop before the next test (pytest still reports and writes its XML)."""
    soft = float(os.environ.get("LIBTESTS_SOFT_S", "inf"))
    if nextitem is not None and time.monotonic() - _STARTED > soft:
        item.session.shouldstop = f"libtests_plugin: past LIBTESTS_SOFT_S={soft:.0f} s, no further test"
