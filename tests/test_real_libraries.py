"""A third-party kernel library with ``triton.autotune`` swapped for tunekit's before its import,
as a user swaps it, under the interpreter at small shapes (compatibility only: the GPU figures
come from ``benchmarks/real_libraries.py``).

flash-linear-attention (``fla-core``, about 200 ``triton.autotune`` sites): its global cumulative
sum (48 configs, ``triton.heuristics`` over the autotuner, launched with keyword arguments only)
and its triangular solve (three kernels so wrapped), checked against PyTorch. Its kernels under
its own autotuner subclass (``fla_cache_autotune``) are not swapped by the user's line (stock
Triton's autotuner cannot run under the interpreter, so those ops are made of ``triton.autotune``
kernels alone); imported under ``tunekit.patch_triton()`` they are: its chunk-local cumulative
sum, whose kernel is such a subclass's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

SCRIPT = """
import os
import torch, triton
import tunekit
triton.autotune = tunekit.autotune  # the user's one line, before the library is imported
from fla.ops.utils.cumsum import chunk_global_cumsum
from fla.ops.utils.solve_tril import solve_tril

torch.manual_seed(0)
s = torch.randn(2, 100, 3)
checks = {"cumsum": torch.allclose(chunk_global_cumsum(s), s.cumsum(1), atol=1e-4)}
BT = 16
chunks = torch.randn(1, 64 // BT, 2, BT, BT).tril(-1) * 0.1  # (batch, chunk, head, row, column)
A = chunks.permute(0, 1, 3, 2, 4).reshape(1, 64, 2, BT).contiguous()
inverse = torch.linalg.inv(torch.eye(BT) + chunks).permute(0, 1, 3, 2, 4).reshape(1, 64, 2, BT)
checks["solve_tril"] = torch.allclose(solve_tril(A), inverse, atol=1e-3)
print(json.dumps(checks))
"""


PATCHED = """
import torch, triton, triton.runtime.autotuner
import tunekit
stock = (triton.autotune, triton.runtime.autotuner.Autotuner)
with tunekit.patch_triton():
    from fla.ops.utils.cumsum import chunk_local_cumsum
    from fla.ops.utils.cache import CachedAutotuner
torch.manual_seed(0)
g = torch.randn(2, 64, 3)
checks = {"local_cumsum": torch.allclose(chunk_local_cumsum(g, chunk_size=16), g.reshape(2, 4, 16, 3).cumsum(2).reshape(2, 64, 3), atol=1e-4),
          "subclass": issubclass(CachedAutotuner, tunekit.Autotuner),
          "restored": (triton.autotune, triton.runtime.autotuner.Autotuner) == stock}
print(json.dumps(checks))
"""


def run_script(script: str, tmp_path) -> set[str]:
    """Runs ``script`` under the interpreter with a store of its own; checks its last line (a
    JSON object of checks) is all true and its stderr has nothing of tunekit's; gives the kernels
    with a winner in the store."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEKIT_STORE": str(tmp_path / "store.db")}
    done = subprocess.run([sys.executable, "-c", "import json\n" + textwrap.dedent(script)], capture_output=True,
                          text=True, timeout=600, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    checks = json.loads(done.stdout.splitlines()[-1])
    assert checks and all(value is True for value in checks.values()), checks
    # what reaches stderr is the library's own warning (it finds no GPU), nothing of tunekit's
    assert all(line.endswith("UserWarning: Triton is not supported on current platform, roll back to CPU.")
               or line.strip() == "_cpu_device_warning()" for line in done.stderr.splitlines()), done.stderr

    from tunekit.store import ResultsStore

    with ResultsStore(str(tmp_path / "store.db")) as store:
        return {row["kernel_name"] for row in store.winner_rows()}


def test_flash_linear_attention_ops_under_tunekit(tmp_path):
    pytest.importorskip("fla.ops.utils.cumsum", reason="fla-core is not installed (pip install -e '.[libraries]')")
    tuned = run_script(SCRIPT, tmp_path)
    assert {"chunk_global_cumsum_scalar_kernel", "solve_tril_16x16_kernel"} <= tuned, tuned


def test_flash_linear_attention_autotuner_subclass_under_patch_triton(tmp_path):
    """fla's ``CachedAutotuner`` (``fla_cache_autotune``) subclasses Triton's ``Autotuner`` at
    import: imported under ``tunekit.patch_triton()`` it subclasses tunekit's, its kernel tunes
    and is stored, and Triton's names are Triton's again after the block."""
    pytest.importorskip("fla.ops.utils.cache", reason="fla-core is not installed (pip install -e '.[libraries]')")
    tuned = run_script(PATCHED, tmp_path)
    assert "chunk_local_cumsum_scalar_kernel" in tuned, tuned
