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


def test_recordings_are_appended_to_an_index_without_overwriting_a_file(tmp_path, monkeypatch):
    """``--export DIR --append`` adds a new recording's spaces to DIR's index; a space whose file
    DIR already has, or one that two recordings hold, stops the export before anything is written."""
    import importlib.util
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "experiments" / "record_spaces.py"
    for name, kernel in (("first", "vector_add"), ("second", "softmax")):
        recorded = subprocess.run([sys.executable, str(script), "--quick", "--kernel", kernel, "--out",
                                   str(tmp_path / name)], capture_output=True, text=True, timeout=600)
        assert recorded.returncode == 0, recorded.stderr[-2000:]
    spec = importlib.util.spec_from_file_location("record_spaces", script)
    record_spaces = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "record_spaces", record_spaces)  # its dataclasses look themselves up there
    spec.loader.exec_module(record_spaces)
    first, second, spaces = tmp_path / "first", tmp_path / "second", tmp_path / "spaces"

    record_spaces.export([first], spaces)
    with pytest.raises(FileExistsError, match="--append"):
        record_spaces.export([second], spaces)
    record_spaces.export([second], spaces, append=True)
    index = json.loads((spaces / "index.json").read_text())
    assert [(row["kernel"], row["file"]) for row in index["spaces"]] == [
        ("vector_add", "vector_add-tiny.json.gz"), ("softmax", "softmax-tiny.json.gz")]
    before = {path.name: path.read_bytes() for path in spaces.iterdir()}
    with pytest.raises(FileExistsError, match="softmax-tiny.json.gz: recorded more than once or already in"):
        record_spaces.export([second], spaces, append=True)
    assert {path.name: path.read_bytes() for path in spaces.iterdir()} == before
    with pytest.raises(FileExistsError, match="vector_add-tiny.json.gz: recorded more than once"):
        record_spaces.export([first, first], tmp_path / "new")
    assert not (tmp_path / "new").exists()  # refused before anything was written
    (tmp_path / "zipped").mkdir()
    (tmp_path / "zipped" / "recorded.json").write_bytes((first / "recorded.json").read_bytes())
    with pytest.raises(FileNotFoundError, match="has no store.db"):
        record_spaces.export([tmp_path / "zipped"], tmp_path / "new")
    assert sorted(p.name for p in (tmp_path / "zipped").iterdir()) == ["recorded.json"]  # no empty store made there
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "vector_add-tiny.json.gz").symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileExistsError, match="already in"):  # a dangling link is a file the user made
        record_spaces.export([first], tmp_path / "linked")


def test_each_shipped_space_holds_its_kernels_whole_space_and_the_index_counts_it():
    """The shipped recordings are complete (every config of the kernel's Space as it is now, so a
    change of a Space's constraints must come with a new recording) and ``index.json`` says what
    the files hold: valid and wrong configs, the best time. The Hopper GEMM's 20 wrong configs are
    those Triton 3.6 compiled into code whose output tunekit's check rejected."""
    import importlib
    import json

    from tunekit.config import config_to_dict
    from tunekit.kernels import shipped
    from tunekit.trial import Status

    for row in shipped.index()["spaces"]:
        space = shipped.load(row["kernel"], row["shape"])
        module = importlib.import_module(f"tunekit.kernels.{row['kernel']}")
        expected = sorted(json.dumps(config_to_dict(c), sort_keys=True) for c in module.space().configs())
        recorded = sorted(json.dumps(r.params, sort_keys=True) for r in space.records)
        assert recorded == expected, row["file"]
        assert (len(space), sum(r.ok for r in space.records)) == (row["configs"], row["valid"])
        assert sum(r.status is Status.WRONG for r in space.records) == row["wrong"]
        assert space.optimum_ms == pytest.approx(row["best_ms"])
    wrong = [r.params for r in shipped.load("matmul_hopper", "square").records if r.status is Status.WRONG]
    assert len(wrong) == 20 and all(c["WARP_SPECIALIZE"] and c["num_warps"] == 4 and c["num_stages"] == 5
                                    and c["BLOCK_M"] >= 128 for c in wrong)
