"""Tuned configs that travel: exports imported into a store, and winners files served as a store."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

import tunekit
from tunekit.cli import main
from tunekit.kernels import vector_add
from tunekit.shipping import ExportError, read_export, winners_store
from tunekit.store import ResultsStore, StoreError

SIZES = (1024, 3000)


def make(store):
    return tunekit.autotune(space=vector_add.space(), key=["n"], strategy="random", budget=tunekit.Budget(evals=3),
                            store=str(store))(vector_add.add_kernel)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A store with two tuned keys, its winners exported as JSONL and its trials as CSV and JSONL."""
    directory = tmp_path_factory.mktemp("tuned")
    kernel = make(directory / "tuned.db")
    for n in SIZES:
        x, y, out = vector_add.inputs(n)
        vector_add.launch(kernel, x, y, out)
    kernel.store.close()
    for args in (["--winners", str(directory / "winners.jsonl")], [str(directory / "trials.csv")],
                 [str(directory / "trials.jsonl")]):
        assert main(["store", "export", "--store", str(directory / "tuned.db"), *args]) == 0
    return directory


def test_imported_winners_and_trials_equal_the_exported_store_and_a_second_import_adds_nothing(tuned, tmp_path,
                                                                                                capsys):
    original = ResultsStore(tuned / "tuned.db", read_only=True)
    target = tmp_path / "fresh.db"
    for name in ("winners.jsonl", "trials.csv"):
        assert main(["store", "import", str(tuned / name), "--store", str(target)]) == 0
    imported = ResultsStore(target, read_only=True)
    assert imported.winner_rows() == original.winner_rows()
    strip = lambda rows: [{k: v for k, v in row.items() if k != "id"} for row in rows]  # noqa: E731
    assert strip(imported.rows()) == strip(original.rows())  # the CSV's text typed back exactly
    capsys.readouterr()
    assert main(["store", "import", str(tuned / "trials.jsonl"), "--store", str(target)]) == 0
    assert "added 0 trials and 0 winners" in capsys.readouterr().out
    assert len(ResultsStore(target, read_only=True).rows()) == len(original.rows())


def test_a_winners_file_serves_offline_without_a_database_and_is_left_untouched(tuned, tmp_path, monkeypatch):
    winners = tuned / "winners.jsonl"
    before = winners.read_bytes()
    monkeypatch.setenv("TUNEKIT_MODE", "offline")
    monkeypatch.chdir(tmp_path)
    original = {json.loads(row["key"])["args"]["n"]: json.loads(row["config"])
                for row in read_export(winners)}
    served = make(winners)
    for n in SIZES:
        x, y, out = vector_add.inputs(n)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a stored winner: no fallback warning
            vector_add.launch(served, x, y, out)
        assert torch.equal(out, x + y)
        assert served.best_config.kwargs["BLOCK"] == original[n]["BLOCK"]
    assert served.trials == [] and winners.read_bytes() == before
    assert list(tmp_path.iterdir()) == []


def test_a_winners_file_in_normal_mode_tunes_a_missing_key_in_memory_only(tuned, tmp_path):
    winners = tuned / "winners.jsonl"
    before = winners.read_bytes()
    served = make(winners)
    x, y, out = vector_add.inputs(2048)
    vector_add.launch(served, x, y, out)
    assert torch.equal(out, x + y) and len(served.trials) == 3
    assert winners.read_bytes() == before


@pytest.mark.parametrize("text, message", [
    ('{"a": 1}\nnot json\n', "line 2: not JSON"),
    ("[1, 2]\n", "line 1: a row is a JSON object"),
    ('{"kernel_name": "k"}\n', "row 1: neither a trial"),
    ('{"status": "ok", "config": "{}"}\n', "row 1: missing"),
])
def test_a_bad_export_is_refused_naming_the_problem_and_nothing_is_imported(tmp_path, text, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    store = ResultsStore(tmp_path / "s.db")
    with pytest.raises(StoreError, match=message):
        store.merge(read_export(path), source=str(path))
    assert store.rows() == [] and store.winner_rows() == []


def test_a_trials_export_is_not_a_winners_file(tuned):
    with pytest.raises(ExportError, match="holds trials, not winners"):
        winners_store(tuned / "trials.jsonl")


def test_a_row_with_a_wrong_type_names_the_column(tuned, tmp_path):
    rows = read_export(tuned / "trials.jsonl")
    rows[1]["median_ms"] = "fast"
    with pytest.raises(StoreError, match="row 2: median_ms 'fast' is not a float"):
        ResultsStore(tmp_path / "s.db").merge(rows, source="edited")


def test_a_missing_winners_file_falls_back_offline_and_is_an_error_online(tmp_path, monkeypatch):
    missing = tmp_path / "missing.jsonl"
    x, y, out = vector_add.inputs(1024)
    with pytest.raises(ExportError, match="could not be read"):
        vector_add.launch(make(missing), x, y, out)
    monkeypatch.setenv("TUNEKIT_MODE", "offline")
    with pytest.warns(RuntimeWarning, match="using the default config"):
        vector_add.launch(make(missing), x, y, out)
    assert torch.equal(out, x + y) and list(tmp_path.iterdir()) == []


def test_a_winners_file_of_another_triton_build_says_so(tuned, tmp_path, monkeypatch, caplog):
    rows = read_export(tuned / "winners.jsonl")
    for row in rows:
        row["triton_version"] = "9.9.9+other"
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps(row) + "\n" for row in rows))
    monkeypatch.setenv("TUNEKIT_MODE", "offline")
    x, y, out = vector_add.inputs(1024)
    with pytest.warns(RuntimeWarning, match="using the default config"):
        vector_add.launch(make(other), x, y, out)
    assert "holds no winner for this Triton build and device" in caplog.text and "9.9.9+other" in caplog.text


def test_importing_into_a_winners_file_is_refused(tuned, tmp_path, capsys):
    target = tmp_path / "out.jsonl"
    assert main(["store", "import", str(tuned / "winners.jsonl"), "--store", str(target)]) == 2
    assert "is a winners file" in capsys.readouterr().err and not target.exists()


@pytest.mark.parametrize("column, value, message", [
    ("config", "BLOCK=64", "config 'BLOCK=64' is not a JSON object"),
    ("median_ms", True, "median_ms True is not a float"),
    ("compile_seconds", "1,5", "compile_seconds '1,5' is not a float"),
])
def test_an_unusable_value_is_refused_by_column(tuned, tmp_path, column, value, message):
    rows = read_export(tuned / "trials.jsonl")
    rows[0][column] = value
    store = ResultsStore(tmp_path / "s.db")
    with pytest.raises(StoreError, match=message):
        store.merge(rows, source="edited")
    assert store.rows() == []


def test_a_winners_file_with_one_malformed_row_falls_back_offline_naming_the_row(tuned, tmp_path, monkeypatch,
                                                                                 caplog):
    """Injected: one winner row of a shipped file edited to a status-less, space_hash-less row.
    Survives: offline, the production call falls back with a warning that names the file and the
    row (as for a file that cannot be read), instead of raising; online it is an error."""
    lines = (tuned / "winners.jsonl").read_text().splitlines()
    lines[1] = json.dumps({"kernel_name": "add_kernel"})
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines) + "\n")
    x, y, out = vector_add.inputs(1024)
    with pytest.raises(StoreError, match="row 2: neither a trial"):
        vector_add.launch(make(broken), x, y, out)
    monkeypatch.setenv("TUNEKIT_MODE", "offline")
    with pytest.warns(RuntimeWarning, match="using the default config"):
        vector_add.launch(make(broken), x, y, out)
    assert torch.equal(out, x + y)
    assert any("broken.jsonl, row 2" in record.getMessage() and "using no store" in record.getMessage()
               for record in caplog.records)


def test_commands_read_a_winners_file_as_a_store_and_refuse_to_change_it(tuned, capsys):
    """``--store winners.jsonl`` is served from memory, as ``store=`` is for a kernel: the reading
    commands read it; one that would change it is refused (the change would be kept nowhere)."""
    winners = tuned / "winners.jsonl"
    before = winners.read_bytes()
    assert main(["store", "export", "--store", str(winners), "--winners", str(winners.with_name("again.jsonl"))]) == 0
    assert {(r["key"], r["config"]) for r in read_export(winners.with_name("again.jsonl"))} == \
        {(r["key"], r["config"]) for r in read_export(winners)}
    for command in (["store", "rm", "--kernel", "add_kernel"], ["store", "rm", "--kernel", "add_kernel", "--dry-run"],
                    ["tune", "tunekit.kernels:manifests/tiny.toml"],
                    ["tune", "tunekit.kernels:manifests/tiny.toml", "--dry-run"]):
        assert main([*command, "--store", str(winners)]) == 2, command  # a dry run is refused as its command is
        assert "is a winners file" in capsys.readouterr().err and winners.read_bytes() == before


def test_a_script_closing_its_winners_store_leaves_the_kernels_serving_the_file_working(tuned):
    """Injected: a script opens the winners file kernels serve and closes it. Survives: the
    kernels' shared copy, which still answers."""
    winners = tuned / "winners.jsonl"
    kernel = make(winners)
    with tunekit.open_store(winners) as own:
        assert own is not kernel.store and _winners(own) == _winners(read_export(winners))
    assert _winners(kernel.store) >= _winners(read_export(winners))  # and keys kernels tuned beside them
    x, y, out = vector_add.inputs(SIZES[0])
    vector_add.launch(kernel, x, y, out)
    torch.testing.assert_close(out, x + y)


def test_a_winners_file_inside_a_zipped_package_or_named_by_the_environment_is_served(tuned, tmp_path, monkeypatch):
    """``store=`` takes a package resource (``importlib.resources.files(...)``, a ``zipfile.Path``
    when the package is zipped) and ``$TUNEKIT_STORE`` naming a winners file, as a path is."""
    import zipfile

    archive = tmp_path / "package.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.write(tuned / "winners.jsonl", "mypackage/winners.jsonl")
    expected = _winners(read_export(tuned / "winners.jsonl"))
    with tunekit.open_store(zipfile.Path(archive, "mypackage/winners.jsonl")) as served:
        assert _winners(served) == expected
    monkeypatch.setenv("TUNEKIT_STORE", str(tuned / "winners.jsonl"))
    with tunekit.open_store() as served:
        assert _winners(served) == expected
    assert _winners(make_default().store) >= expected  # the kernels' shared copy


def _winners(rows_or_store) -> set[tuple[str, str, str]]:
    rows = rows_or_store.winner_rows() if isinstance(rows_or_store, ResultsStore) else rows_or_store
    return {(row["kernel_name"], row["key"], row["config"]) for row in rows}


def make_default():
    return tunekit.autotune(space=vector_add.space(), key=["n"], strategy="random",
                            budget=tunekit.Budget(evals=3))(vector_add.add_kernel)
