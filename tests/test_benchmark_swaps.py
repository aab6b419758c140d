"""The library benchmarks' variants (``benchmarks/swaps.py``) through the pytest plugin that
``benchmarks/library_tests.py`` runs a library's own tests with: each variant reaches what it says
and no more, on a made-up library whose module decorates a kernel with ``triton.autotune`` and
subclasses Triton's ``Autotuner`` (as FlagGems' ``LibTuner`` does). CPU only: nothing is launched."""

from __future__ import annotations

import json
import os
import subprocess
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
import sys

def test_what_the_library_got():
    import made_up_library
    print("DECORATOR", made_up_library.DECORATOR.__module__, file=sys.stderr)
"""


def run_plugin(tmp_path: Path, variant: str | None, imports: str = "") -> tuple[subprocess.CompletedProcess, dict]:
    """pytest on the made-up library's test file with the plugin loaded as the driver loads it;
    the plugin's first log line (what it collected and what the library was decorated with)."""
    (tmp_path / "made_up_library.py").write_text(textwrap.dedent(LIBRARY))
    (tmp_path / "test_library.py").write_text(textwrap.dedent(TESTS))
    log = tmp_path / f"log-{variant}.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("LIBTESTS_VARIANT", "LIBTESTS_IMPORTS")}
    env.update(LIBTESTS_LOG=str(log), LIBTESTS_IMPORTS=imports, TUNEKIT_STORE=str(tmp_path / "store.db"),
               PYTHONPATH=os.pathsep.join([str(BENCHMARKS), str(tmp_path)]))
    if variant is not None:
        env["LIBTESTS_VARIANT"] = variant
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "libtests_plugin", "-p", "no:cacheprovider",
                           str(tmp_path / "test_library.py")], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=300)
    first = json.loads(log.read_text().splitlines()[0]) if log.exists() else {}
    return done, first


@pytest.mark.parametrize(("variant", "decorator", "on_tunekit_base"), [
    (None, "triton.runtime.autotuner", False),
    ("stock", "triton.runtime.autotuner", False),
    ("tk", "tunekit.autotuner", False),
    ("tk_patch", "tunekit.autotuner", True),
])
def test_each_variant_reaches_what_it_says(tmp_path, variant, decorator, on_tunekit_base):
    """``stock`` (and no variant) leaves Triton's; ``tk`` switches the decorator but not the
    library's own subclass; ``tk_patch`` reaches both, and the run's record names the subclass."""
    done, first = run_plugin(tmp_path, variant, imports="made_up_library" if variant == "tk_patch" else "")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"DECORATOR {decorator}" in done.stderr + done.stdout
    assert first["collected"] == ["test_library.py::test_what_the_library_got"]
    assert ("made_up_library.OwnTuner" in first["autotune"]) is on_tunekit_base, first["autotune"]


def test_the_patch_variant_refuses_to_run_as_stock_under_another_name(tmp_path):
    """``tk_patch`` with no module to import in the block would decorate nothing with tunekit:
    the plugin stops pytest with an error that says so, and no test runs."""
    done, first = run_plugin(tmp_path, "tk_patch", imports="")
    assert done.returncode != 0
    assert "LIBTESTS_VARIANT=tk_patch needs LIBTESTS_IMPORTS" in done.stdout + done.stderr
    assert first == {}


def test_an_unknown_variant_is_named(tmp_path):
    done, _ = run_plugin(tmp_path, "tk-patch")
    assert done.returncode != 0
    assert "unknown variant 'tk-patch'" in done.stdout + done.stderr
