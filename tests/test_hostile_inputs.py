"""Inputs a hostile pass found mishandled: each is refused with a message that names the problem,
and loses or creates nothing. Store imports, store locations, keys, manifests and the terminal's
encoding."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys

import pytest
import torch
import triton

import tunekit
from tunekit.cli import main
from tunekit.kernels import vector_add
from tunekit.opening import open_store
from tunekit.store import ResultsStore, StoreError


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


def test_exporting_winners_keeps_to_the_kernel_and_run_asked_for(store_path, tmp_path, usage_error):
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
        assert re.search("no (winners|trials) of kernel no_such_kernel .*Kernels there: add_kernel", usage_error(
            ["store", "export", str(tmp_path / "none.jsonl"), "--store", str(store_path), *winners,
             "--kernel", "no_such_kernel"]))
        assert not (tmp_path / "none.jsonl").exists()


@pytest.mark.parametrize("suffix, message", [(".csv", "ends in .csv, the suffix of an export"),
                                             (".jsonl", "could not be read: No such file"),  # a winners file
                                             (".json", "ends in .json, the suffix of an export")])
def test_a_new_store_with_an_exports_suffix_is_refused_and_nothing_is_created(tmp_path, suffix, message):
    """A store is a database: ``store="winners.csv"`` used to create an SQLite file under that name."""
    path = tmp_path / f"results{suffix}"
    with pytest.raises(StoreError, match=message):
        open_store(str(path))
    assert not path.exists()


@pytest.mark.parametrize("command", [["demo", "--replay"], ["compare", "--space", "no/such/space.json", "--strategy", "random"]])
def test_an_output_directory_that_is_a_file_is_refused_before_anything_runs(tmp_path, command, usage_error):
    """``--out`` naming a file ended, after the whole replay, in a raw ``[Errno 17] File exists``."""
    existing = tmp_path / "notes.txt"
    existing.write_text("the user's")
    assert "is a file, not a directory" in usage_error([*command, "--out", str(existing)])
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
    # what the message recommends works: the reading commands read it through a copy (they crashed)
    assert main(["store", "ls", "--store", str(store_path)]) == 0
    assert main(["store", "export", str(store_path.parent / "saved.jsonl"), "--store", str(store_path)]) == 0
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


# -- the second hostile pass (issue 28's closing one) -------------------------------------------


def test_a_default_store_whose_directory_cannot_be_created_keeps_results_in_memory(tmp_path, monkeypatch, caplog):
    """A read-only home (a container's root, say): the default store's directory could not be made,
    and a stock-compatible call ended in a raw ``OSError``. Now it tunes with a store in memory."""
    blocker = tmp_path / "home"
    blocker.write_text("a file where the cache directory would go")
    monkeypatch.setenv("TUNEKIT_STORE", str(blocker / "cache" / "tunekit.db"))
    kernel = tunekit.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})],
                              key=["n"])(vector_add.add_kernel)
    x, y, out = vector_add.inputs(256)
    kernel[vector_add.grid(256)](x, y, out, 256)
    assert torch.equal(out, x + y) and kernel.tuning_report.evaluations == 2
    assert "cannot be created" in caplog.text and "reading it into memory" in caplog.text
    assert blocker.read_text() == "a file where the cache directory would go"


def test_a_stores_own_export_of_an_infinite_relative_error_imports_back(store_path, tmp_path):
    """A wrong output of infinity is stored with relative_error inf; its export was refused on import."""
    store = ResultsStore(store_path)
    kernel = tunekit.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"],
                              store=str(store_path))(vector_add.add_kernel)
    x, y, out = vector_add.inputs(256)
    kernel[vector_add.grid(256)](x, y, out, 256)
    rows = store.rows()
    rows[0]["relative_error"] = math.inf
    source = tmp_path / "inf.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert main(["store", "import", str(source), "--store", str(tmp_path / "new.db")]) == 0
    assert ResultsStore(tmp_path / "new.db").rows()[0]["relative_error"] == math.inf


def test_a_config_outside_the_space_is_never_launched_offline(store_path, tmp_path, monkeypatch, exported_trial,
                                                              caplog):
    """An imported winner of BLOCK 10**40 is refused; one of another Space (BLOCK 999) used to be
    launched offline and fail there. It is ignored with a warning and the default config runs."""
    winner = {"kernel_name": "add_kernel", "source_hash": exported_trial["source_hash"],
              "triton_version": exported_trial["triton_version"], "device": exported_trial["device"],
              "timing_method": exported_trial["timing_method"], "key": exported_trial["key"], "median_ms": 1.0,
              "space_hash": "another", "run_id": "r", "created_at": 1.0}
    huge = write_rows(tmp_path / "huge.jsonl", [dict(winner, config=json.dumps({"BLOCK": 10 ** 40}))])
    assert main(["store", "import", huge, "--store", str(tmp_path / "new.db")]) == 2
    odd = write_rows(tmp_path / "odd.jsonl", [dict(winner, config=json.dumps({"BLOCK": 999, "num_warps": 4}))])
    assert main(["store", "import", odd, "--store", str(tmp_path / "odd.db")]) == 0
    monkeypatch.setenv("TUNEKIT_MODE", "offline")
    kernel = tunekit.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"],
                              store=str(tmp_path / "odd.db"))(vector_add.add_kernel)
    x, y, out = vector_add.inputs(256)
    with pytest.warns(RuntimeWarning, match="using the default config"):
        kernel[vector_add.grid(256)](x, y, out, 256)
    assert torch.equal(out, x + y) and kernel.best_config.kwargs == {"BLOCK": 64}
    assert "is not a config of the Space; ignored" in caplog.text


def test_a_claim_of_a_dead_process_of_this_host_is_taken_over_at_once(store_path):
    """``tunekit tune`` run again after a kill waited out the dead run's 60 s lease on every key it held."""
    import socket

    from tunekit.store import Claim, KernelIdentity

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store = ResultsStore(store_path)
    identity = KernelIdentity("k", "hash", "3.x", "interpreter", "host_clock")
    assert store.claim(identity, "space", "{}", owner=f"{socket.gethostname()}:{dead.pid}:cpu",
                       lease=60) is Claim.CLAIMED
    assert store.claim(identity, "space", "{}", owner=f"{socket.gethostname()}:{os.getpid()}:cpu",
                       lease=60) is Claim.CLAIMED
    assert store.claim(identity, "space", "{}", owner="otherhost:1:cpu", lease=60) is Claim.TAKEN  # alive: mine


@pytest.mark.parametrize("name", ["q?mode=ro.db", "a%20b.db", "hash#1.db"])
def test_a_store_path_is_taken_literally(tmp_path, name):
    """'?' began a URL query (a file q was created) and '%20' became a space."""
    path = tmp_path / name
    ResultsStore(str(path)).close()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [name]


@pytest.mark.parametrize("name", ["def.py", "json.py", "tunekit.py"])
def test_a_heuristics_module_that_could_not_be_imported_or_would_hide_another_is_refused(tmp_path, name,
                                                                                          monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        main(["store", "heuristics", name, "--kernel", "add_kernel", "--store", str(tmp_path / "s.db")])
    expected = "cannot be imported" if name == "def.py" else "would hide the module"
    assert expected in capsys.readouterr().err
    assert not (tmp_path / name).exists()


def test_comparison_outputs_never_overwrite_a_users_files_named_as_tunekits(tmp_path):
    """``--out`` holding the user's own report.md and summary.csv: both were replaced."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "report.md").write_text("my notes")
    from tunekit.compare import output_directory

    with pytest.raises(FileExistsError, match="files tunekit did not write"):
        output_directory(out)
    assert (out / "report.md").read_text() == "my notes"
    fresh = output_directory(tmp_path / "fresh")
    (fresh / "report.md").write_text("tunekit's")
    assert output_directory(fresh) == fresh  # a directory tunekit marked is its own to rewrite


@pytest.mark.parametrize("jobs", ["0", "-3"])
def test_a_number_of_processes_below_one_is_a_usage_error(jobs, capsys):
    with pytest.raises(SystemExit) as exit_status:
        main(["compare", "--space", "x.json", "--strategy", "random", "--jobs", jobs])
    assert exit_status.value.code == 2 and "int >= 1 (worker processes)" in capsys.readouterr().err
