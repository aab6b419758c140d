"""The library benchmarks' variants (``benchmarks/swaps.py``) through the driver that runs a
library's own tests (``benchmarks/library_tests.py``'s ``run_pytest``) and its pytest plugin: each
variant reaches what it says and no more, on a made-up library whose module decorates with
``triton.autotune`` and subclasses Triton's ``Autotuner`` (as FlagGems' ``LibTuner`` does). CPU
only: nothing is launched."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

LIBRARY = """
import triton
from triton.runtime.autotuner import Autotuner

class OwnTuner(Autotuner):  # a library's own tuner, as FlagGems' LibTuner
    pass

DECORATOR = triton.autotune  # what the library's decorators are made with at its import
"""

TESTS = """
import os

def test_what_the_library_got():
    import made_up_library
    with open(os.environ["MADE_UP_LIBRARY_SAW"], "w") as file:
        file.write(made_up_library.DECORATOR.__module__)
"""


@pytest.fixture
def driver(tmp_path, monkeypatch):
    """``library_tests`` with one made-up library, ``made_up``, in place of the real ones."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    library_tests = importlib.import_module("library_tests")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "made_up_library.py").write_text(textwrap.dedent(LIBRARY))
    (tmp_path / "libtests" / "made_up").mkdir(parents=True)
    (tmp_path / "libtests" / "made_up" / "test_library.py").write_text(textwrap.dedent(TESTS))
    monkeypatch.setattr(library_tests, "LIBTESTS", tmp_path / "libtests")
    monkeypatch.setitem(library_tests.LIBRARIES, "made_up", library_tests.Library(
        ("test_library.py",), "what_the_library_got", imports=("made_up_library",)))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "lib"))
    monkeypatch.setenv("MADE_UP_LIBRARY_SAW", str(tmp_path / "saw.txt"))
    (tmp_path / "scratch").mkdir()
    return library_tests


@pytest.mark.parametrize(("variant", "decorator", "on_tunekit_base"), [
    ("stock", "triton.runtime.autotuner", None),
    ("tk", "tunekit.autotuner", False),
    ("tk_patch", "tunekit.autotuner", True),
])
def test_each_variant_reaches_what_it_says(driver, tmp_path, variant, decorator, on_tunekit_base):
    """``stock`` leaves Triton's; ``tk`` switches the decorator but does not reach the library's
    own subclass; ``tk_patch`` reaches both. The run's record says which classes are on tunekit's
    base (nothing of tunekit's in stock's)."""
    run = driver.run_pytest("made_up", variant, 120, str(tmp_path / "scratch"))
    assert run["counts"]["passed"] == 1 and run["returncode"] == 0, run["output_tail"]
    assert (tmp_path / "saw.txt").read_text() == decorator
    if on_tunekit_base is None:
        assert "tunekit" not in run["autotune"]
    else:
        assert ("made_up_library.OwnTuner" in run["autotune"]) is on_tunekit_base, run["autotune"]
        assert "on tunekit's Autotuner" in run["autotune"]


def test_the_patch_variant_refuses_to_run_as_stock_under_another_name(driver, tmp_path, monkeypatch):
    """``tk_patch`` with no module to import in the block would decorate nothing with tunekit: the
    driver refuses it, and so does the plugin if run without the list; no test runs."""
    monkeypatch.setitem(driver.LIBRARIES, "made_up", driver.Library(("test_library.py",), "what_the_library_got"))
    with pytest.raises(SystemExit, match="tk_patch needs the library's modules"):
        driver.run_pytest("made_up", "tk_patch", 120, str(tmp_path / "scratch"))
    import subprocess

    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "libtests_plugin", "-p", "no:cacheprovider",
                           str(tmp_path / "libtests" / "made_up" / "test_library.py")], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "LIBTESTS_VARIANT": "tk_patch",
                               "PYTHONPATH": f"{BENCHMARKS}:{tmp_path / 'lib'}",
                               "MADE_UP_LIBRARY_SAW": str(tmp_path / "saw.txt"), "HOME": str(tmp_path)})
    assert done.returncode != 0
    assert "LIBTESTS_VARIANT=tk_patch needs LIBTESTS_IMPORTS" in done.stdout + done.stderr
    assert not (tmp_path / "saw.txt").exists()


def test_an_unknown_variant_is_named():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        swaps = importlib.import_module("swaps")
    finally:
        sys.path.remove(str(BENCHMARKS))
    with pytest.raises(ValueError, match="unknown variant 'tk-patch': one of stock, tk, tk_patch"):
        swaps.import_swapped("tk-patch", lambda: None)


SWAPPED = """
import importlib, json, sys
import triton
from swaps import classes_on_tunekit_base, import_swapped
module = import_swapped(sys.argv[1], lambda: importlib.import_module("made_up_library"))
print(json.dumps({"decorator": module.DECORATOR.__module__, "on_tunekit_base": classes_on_tunekit_base(),
                  "after": triton.autotune.__module__}))
"""


@pytest.mark.parametrize(("variant", "decorator", "on_tunekit_base", "after"), [
    ("stock", "triton.runtime.autotuner", [], "triton.runtime.autotuner"),
    ("tk", "tunekit.autotuner", [], "tunekit.autotuner"),
    ("tk_patch", "tunekit.autotuner", ["made_up_library.OwnTuner"], "triton.runtime.autotuner"),
])
def test_import_swapped_imports_the_library_as_each_variant_says(tmp_path, variant, decorator, on_tunekit_base, after):
    """What ``real_libraries.py`` imports a library with: ``tk``'s switch stays for the process and
    leaves the library's own subclass on Triton's base; ``tk_patch`` puts it on tunekit's and gives
    Triton's decorator back after the block."""
    import json
    import subprocess

    (tmp_path / "made_up_library.py").write_text(textwrap.dedent(LIBRARY))
    done = subprocess.run([sys.executable, "-c", SWAPPED, variant], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                            "PYTHONPATH": f"{BENCHMARKS}:{tmp_path}"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {"decorator": decorator, "on_tunekit_base": on_tunekit_base,
                                                        "after": after}
