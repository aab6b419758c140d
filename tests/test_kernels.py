"""Every kernel of the suite, tuned by tunekit under the interpreter, against its PyTorch reference."""

import pytest
import torch

import tunekit
from tunekit import Budget
from tunekit.kernels import attention, matmul, matmul_splitk, rmsnorm, softmax

pytestmark = pytest.mark.interpreter_loops


def tune(module, kernel, key, **options):
    return tunekit.autotune(space=module.space(), key=key, strategy="random", budget=Budget(evals=2), store=None,
                            seed=1, **options)(kernel)


@pytest.mark.parametrize("module", [softmax, rmsnorm, attention, matmul_splitk, matmul])
def test_spaces_are_worth_tuning_and_constrained(module):
    space = module.space()
    assert 200 <= len(space) <= 5000  # exhaustive tuning hurts at real compile times
    assert len(space) < space.cartesian_size  # the constraints remove configs that cannot work


def test_softmax():
    kernel = tune(softmax, softmax.softmax_kernel, ["n_rows", "n_cols"])
    x, y = softmax.inputs(9, 300)
    softmax.launch(kernel, x, y)
    torch.testing.assert_close(y, softmax.reference(x), rtol=2e-3, atol=1e-3)


def test_rmsnorm():
    kernel = tune(rmsnorm, rmsnorm.rmsnorm_kernel, ["n_rows", "n_cols"])
    x, w, y = rmsnorm.inputs(9, 300)
    rmsnorm.launch(kernel, x, w, y)
    torch.testing.assert_close(y, rmsnorm.reference(x, w), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("causal", [False, True])
def test_attention(causal):
    kernel = tune(attention, attention.attention_kernel, ["seq_len", "HEAD_DIM", "CAUSAL"])
    q, k, v, o = attention.inputs(1, 2, 40, 32)
    attention.launch(kernel, q, k, v, o, causal=causal)
    torch.testing.assert_close(o, attention.reference(q, k, v, causal), rtol=2e-2, atol=2e-2)


def test_split_k_matmul_adds_into_a_zeroed_output_across_configs():
    kernel = tune(matmul_splitk, matmul_splitk.matmul_splitk_kernel, ["M", "N", "K"], reset_to_zero=["c_ptr"])
    a, b, c = matmul_splitk.inputs(8, 40, 300, dtype=torch.float32)
    matmul_splitk.launch(kernel, a, b, c)  # tuning ran every config on c: reset_to_zero keeps the sum right
    torch.testing.assert_close(c, matmul_splitk.reference(a, b), rtol=1e-4, atol=1e-3)


def test_recording_script_quick_mode_writes_replayable_spaces(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    from tunekit.recorded import read_space

    script = Path(__file__).resolve().parents[1] / "experiments" / "record_spaces.py"
    done = subprocess.run([sys.executable, str(script), "--quick", "--kernel", "matmul", "--kernel", "vector_add",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    recorded = json.loads((tmp_path / "recorded.json").read_text())["spaces"]
    assert [(r["kernel"], r["configs"], r["statuses"], r["wrong"]) for r in recorded] == [
        ("matmul", 3, {"ok": 3}, 0), ("vector_add", 3, {"ok": 3}, 0)]
    assert all(r["winner_relative_error"] < 1e-3 for r in recorded)
    assert all(len(r["errors"]) == 3 and max(r["errors"].values()) < 1e-3 for r in recorded)
    exported = subprocess.run([sys.executable, str(script), "--out", str(tmp_path), "--export",
                               str(tmp_path / "spaces")], capture_output=True, text=True, timeout=600)
    assert exported.returncode == 0, exported.stderr[-2000:]
    space = read_space(tmp_path / "spaces" / "matmul-tiny.json.gz")
    assert len(space) == 3 and all(r.ok and r.extra["relative_error"] < 1e-3 for r in space.records)
    assert all(r.extra["time_p20"] <= r.time_ms <= r.extra["time_p80"] for r in space.records)
    again = subprocess.run([sys.executable, str(script), "--quick", "--kernel", "vector_add", "--out", str(tmp_path)],
                           capture_output=True, text=True, timeout=600)
    assert again.returncode != 0 and "does not overwrite" in again.stderr
