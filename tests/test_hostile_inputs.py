"""Inputs a hostile pass found mishandled: each is refused with a message that names the problem,
and loses or creates nothing. Store imports, store locations, keys, manifests and the terminal's
encoding."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import torch
import triton

import tunekit
from tunekit.cli import main
from tunekit.kernels import vector_add
from tunekit.store import ResultsStore, StoreError, open_store


@pytest.fixture
def exported_trial(store_path, tmp_path):
    """One real trial exported as JSONL: the row every import case below changes one field of."""
    kernel = tunekit.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"],
                              store=str(store_path))(vector_add.add_kernel)
    x, y, out = vector_add.inputs(256)
    kernel[vector_add.grid(256)](x, y, out, 256)
    assert main(["store", "export", str(tmp_path / "all.jsonl"), "--store", str(store_path)]) == 0
    rows = [json.loads(line) for line in (tmp_path / "all.jsonl").read_text().splitlines()]
    return next(row for row in rows if row["status"] == "ok")


def write_rows(path, rows) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


@pytest.mark.parametrize("field,value,message", [
    ("median_ms", 10 ** 400, "out of range"),
    ("median_ms", float("nan"), "not a time > 0"),
    ("median_ms", -1.0, "not a time > 0"),
    ("median_ms", 0.0, "not a time > 0"),
    ("compile_seconds", float("inf"), "not a finite number"),
    ("status", "bogus_status", "is not one of ok, compile_error"),
    ("config", json.dumps({"BLOCK": "abc", "num_warps": -3}), "num_warps -3 is not a whole number"),
    ("config", json.dumps({"BLOCK": [1, 2]}), "not a parameter value"),
], ids=["huge-time", "nan-time", "negative-time", "zero-time", "infinite-compile", "unknown-status",
        "negative-warps", "list-parameter"])
def test_an_import_with_an_impossible_value_is_refused_and_creates_no_store(exported_trial, tmp_path, capsys,
                                                                             field, value, message):
    row = dict(exported_trial, **{field: value})
    source = write_rows(tmp_path / "bad.jsonl", [exported_trial, row])
    target = tmp_path / "new.db"
    assert main(["store", "import", source, "--store", str(target)]) == 2
    error = capsys.readouterr().err
    assert message in error and "row 2" in error and field.split("_")[0] in error, error
    assert not target.exists()


def test_an_import_with_nothing_in_it_creates_no_store(tmp_path, capsys):
    (tmp_path / "empty.jsonl").write_text("\n")
    assert main(["store", "import", str(tmp_path / "empty.jsonl"), "--store", str(tmp_path / "new.db")]) == 2
    assert "holds no rows" in capsys.readouterr().err
    assert not (tmp_path / "new.db").exists()


def test_imported_trials_bring_their_runs_so_that_the_store_lists_them(store_path, tmp_path, capsys):
    """An import added trials but no runs: ``store ls`` of the new store was empty."""
    kernel = tunekit.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"],
                              store=str(store_path))(vector_add.add_kernel)
    x, y, out = vector_add.inputs(256)
    kernel[vector_add.grid(256)](x, y, out, 256)
    for what in ([], ["--winners"]):
        assert main(["store", "export", str(tmp_path / f"export{len(what)}.jsonl"), "--store", str(store_path),
                     *what]) == 0
    target = str(tmp_path / "new.db")
    for what in (0, 1, 0):  # importing again adds no second run
        assert main(["store", "import", str(tmp_path / f"export{what}.jsonl"), "--store", target]) == 0
    [run] = ResultsStore(target).runs()
    [original] = ResultsStore(store_path).runs()
    assert run["run_id"] == original["run_id"] == kernel.run_id
    assert run["evaluations"] == original["evaluations"] == 2 and run["kernel_name"] == "add_kernel"
    assert run["key"] == original["key"]
    capsys.readouterr()
    assert main(["store", "ls", "--store", target]) == 0
    listed = capsys.readouterr().out
    assert kernel.run_id[:12] in listed and "imported" in listed


def test_an_export_saved_with_a_byte_order_mark_imports(exported_trial, tmp_path):
    source = tmp_path / "bom.jsonl"
    source.write_bytes("\ufeff".encode() + (json.dumps(exported_trial) + "\n").encode())
    assert main(["store", "import", str(source), "--store", str(tmp_path / "new.db")]) == 0
    with ResultsStore(str(tmp_path / "new.db")) as store:
        assert len(store.rows()) == 1


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_a_store_path_naming_sqlites_side_file_is_refused(store_path, suffix):
    ResultsStore(str(store_path)).close()
    with pytest.raises(StoreError, match=f"names the {suffix} file SQLite keeps beside the database"):
        open_store(str(store_path) + suffix)
    assert not os.path.exists(str(store_path) + suffix) or suffix != "-journal"


@pytest.mark.parametrize("url", ["postgresql://u:p@host:notaport/db", "postgresql://u:p@[::1/db"])
def test_a_store_url_with_a_bad_port_is_one_message_with_the_password_masked(url, capsys):
    assert main(["store", "ls", "--store", url]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1 and "not a valid SQLAlchemy URL" in error, error
    assert ":p@" not in error


def test_exporting_winners_keeps_to_the_kernel_and_run_asked_for(store_path, tmp_path):
    kernel = tunekit.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"],
                              store=str(store_path))(vector_add.add_kernel)
    runs = []
    for n in (256, 512):
        x, y, out = vector_add.inputs(n)
        kernel[vector_add.grid(n)](x, y, out, n)
        runs.append(kernel.run_id)
    assert main(["store", "export", str(tmp_path / "all.jsonl"), "--store", str(store_path), "--winners"]) == 0
    assert len((tmp_path / "all.jsonl").read_text().splitlines()) == 2
    assert main(["store", "export", str(tmp_path / "one.jsonl"), "--store", str(store_path), "--winners",
                 "--run", runs[1]]) == 0
    [row] = [json.loads(line) for line in (tmp_path / "one.jsonl").read_text().splitlines()]
    assert row["run_id"] == runs[1]
    for winners in (["--winners"], []):  # a filter nothing matches: an error naming it, and no file
        with pytest.raises(SystemExit, match="no (winners|trials) of kernel no_such_kernel .*Kernels there: add_kernel"):
            main(["store", "export", str(tmp_path / "none.jsonl"), "--store", str(store_path), *winners,
                  "--kernel", "no_such_kernel"])
        assert not (tmp_path / "none.jsonl").exists()


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".json"])
def test_a_new_store_with_an_exports_suffix_is_refused_and_nothing_is_created(tmp_path, suffix):
    """A store is a database: ``store="winners.csv"`` used to create an SQLite file under that name."""
    path = tmp_path / f"results{suffix}"
    with pytest.raises(StoreError, match=f"ends in {suffix}, the suffix of an export"):
        open_store(str(path))
    assert not path.exists()


@pytest.mark.parametrize("command", [["demo", "--replay"], ["compare", "--space", "no/such/space.json", "--strategy", "random"]])
def test_an_output_directory_that_is_a_file_is_refused_before_anything_runs(tmp_path, command, capsys):
    """``--out`` naming a file ended, after the whole replay, in a raw ``[Errno 17] File exists``."""
    existing = tmp_path / "notes.txt"
    existing.write_text("the user's")
    with pytest.raises(SystemExit, match="is a file, not a directory"):
        main([*command, "--out", str(existing)])
    assert existing.read_text() == "the user's"


def test_a_tuned_parameter_as_the_key_is_refused_with_a_space_and_left_out_as_stock_does_with_configs(store_path):
    """With a Space (tunekit's own API) it is refused at decoration. With a config list it is what
    stock accepts, and real libraries do it (flash-linear-attention's key=['BK'] with BK in its
    configs): the key is what stock's would be, without it."""
    with pytest.raises(ValueError, match="key of add_kernel names 'BLOCK', which the autotuner sets"):
        tunekit.autotune(space=tunekit.Space(BLOCK=[64, 128]), key=["BLOCK"])(vector_add.add_kernel)
    kernel = tunekit.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})],
                              key=["n", "BLOCK"], store=str(store_path))(vector_add.add_kernel)
    x, y, out = vector_add.inputs(256)
    kernel[vector_add.grid(256)](x, y, out, 256)
    assert list(kernel.cache) == [(256, *(str(t.dtype) for t in (x, y, out)))]


def test_a_key_of_infinity_beside_other_keys_in_the_store_tunes(store_path):
    """The default strategy learns from the store's other keys; a key argument of inf (a float
    the kernel takes) must not reach scikit-learn as an infinite feature."""
    import triton.language as tl

    @triton.jit
    def scaled_add(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.minimum(tl.load(x_ptr + offs, mask=mask) * 0.0 + scale, 1.0), mask=mask)

    kernel = tunekit.autotune(space=tunekit.Space(BLOCK=[32, 64, 128, 256]), key=["n", "scale"],
                              budget=tunekit.Budget(evals=3), store=str(store_path))(scaled_add)
    x = vector_add.inputs(256)[0]
    for scale in (0.5, 2.0, math.inf):
        out = x.new_empty(256)
        kernel[lambda meta: (triton.cdiv(256, meta["BLOCK"]),)](x, out, 256, scale)
        assert float(out.max()) == min(scale, 1.0)


def test_a_manifest_kernel_given_as_a_file_path_is_named_not_a_traceback(tmp_path, capsys):
    manifest = tmp_path / "tune.toml"
    manifest.write_text('[[kernels]]\nkernel = "../outside/evil.py:k"\ninputs = "x:y"\nshapes = [{n = 1}]\n')
    assert main(["tune", str(manifest)]) == 2
    error = capsys.readouterr().err
    assert "is not an import path" in error and "Traceback" not in error, error


def test_listing_a_store_on_a_terminal_that_cannot_show_the_kernels_name(store_path, tmp_path, monkeypatch):
    (tmp_path / "umlaut_kernels.py").write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def add_\u00e4(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + tl.load(y_ptr + offs, mask=offs < n),"
        " mask=offs < n)\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    import umlaut_kernels

    kernel = tunekit.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"],
                              store=str(store_path))(getattr(umlaut_kernels, "add_\u00e4"))
    x, y, out = vector_add.inputs(256)
    kernel[vector_add.grid(256)](x, y, out, 256)
    done = subprocess.run([sys.executable, "-m", "tunekit.cli", "store", "ls", "--store", str(store_path)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONIOENCODING": "ascii"}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "add_\\xe4" in done.stdout


def test_reading_commands_leave_nothing_beside_a_writable_store(store_path, tmp_path):
    """``store ls``, ``show`` and ``export`` on a store this user may write: no -wal or -shm file
    is left beside it (a read-only SQLite handle makes them and cannot remove them)."""
    kernel = tunekit.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"],
                              store=str(store_path))(vector_add.add_kernel)
    x, y, out = vector_add.inputs(256)
    kernel[vector_add.grid(256)](x, y, out, 256)
    kernel.store.close()  # the tuning's last handle: SQLite merges and removes its -wal and -shm
    before = sorted(p.name for p in store_path.parent.iterdir())
    assert before == [store_path.name], before
    assert main(["store", "ls", "--store", str(store_path)]) == 0
    assert main(["store", "show", kernel.run_id[:8], "--store", str(store_path)]) == 0
    (tmp_path / "out").mkdir()
    assert main(["store", "export", str(tmp_path / "out" / "x.csv"), "--store", str(store_path)]) == 0
    after = sorted(p.name for p in store_path.parent.iterdir() if p.name != "out")
    assert after == before, after


def test_a_store_missing_a_column_is_refused_by_name_before_tuning(store_path):
    """Injected: a tunekit store whose trials table lost a column (``ALTER TABLE ... DROP COLUMN``,
    as another program might). Survives: the store, byte for byte; the call raises one StoreError
    naming the column, not a database traceback from the middle of a tuning."""
    import sqlite3

    ResultsStore(str(store_path)).close()
    with sqlite3.connect(store_path) as connection:
        connection.execute("ALTER TABLE trials DROP COLUMN relative_error")
    connection.close()
    before = store_path.read_bytes()
    kernel = tunekit.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"],
                              store=str(store_path))(vector_add.add_kernel)
    x, y, out = vector_add.inputs(256)
    with pytest.raises(StoreError, match=r"lacks the column trials\.relative_error of its schema"):
        kernel[vector_add.grid(256)](x, y, out, 256)
    assert store_path.read_bytes() == before


@pytest.mark.parametrize("value", ["nan", "inf", "0.9", "1", "fast"])
def test_a_compare_threshold_that_is_no_ratio_above_one_is_a_usage_error(value, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["compare", "--space", "x.json", "--threshold", value])
    assert exited.value.code == 2 and "must be a ratio to the optimum > 1" in capsys.readouterr().err


def test_a_heuristics_module_name_python_cannot_import_is_refused_before_anything_is_written(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["store", "heuristics", str(tmp_path / "my-rule.py"), "--kernel", "add_kernel",
              "--store", str(tmp_path / "missing.db")])
    assert exited.value.code == 2 and "cannot be imported as a module" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_tensor_as_a_key_is_stored_by_shape_and_dtype_not_by_its_printed_values(store_path, caplog):
    """``key=["x_ptr"]`` stored the tensor's printed values: two tensors with the same first
    elements shared a key, others of one shape did not, and the store held the data. Now: one
    tuning per shape and dtype, the reason said once."""
    kernel = tunekit.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["x_ptr"],
                              store=str(store_path))(vector_add.add_kernel)
    for n in (256, 256, 512):
        x, y, out = vector_add.inputs(n)
        kernel[vector_add.grid(n)](x, y, out, n)
        assert torch.equal(out, x + y)
    keys = {json.loads(row["key"])["args"]["x_ptr"] for row in ResultsStore(store_path).rows()}
    assert keys == {"tensor(shape=[256], dtype=torch.float32)", "tensor(shape=[512], dtype=torch.float32)"}
    assert caplog.text.count("a tensor: stored by its shape and dtype") == 1
