import importlib.util
import inspect
import json

import pytest

import tunekit
from tunekit.cli import main
from tunekit.kernels import vector_add


@pytest.fixture
def tuned_store(store_path):
    kernel = tunekit.autotune(space=vector_add.space(), key=["n"], strategy="random",
                              budget=tunekit.Budget(evals=3), store=store_path)(vector_add.add_kernel)
    for n in (1024, 4096):
        x, y, out = vector_add.inputs(n)
        kernel[vector_add.grid(n)](x, y, out, n)
    return store_path, kernel


def test_ls_lists_every_run(tuned_store, capsys):
    path, kernel = tuned_store
    assert main(["store", "ls", "--store", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:2] == ["run", "kernel"]
    assert len([line for line in lines if "add_kernel" in line]) == 2
    assert kernel.run_id[:12] in "\n".join(lines)


def test_show_prints_a_runs_trials(tuned_store, capsys):
    path, kernel = tuned_store
    assert main(["store", "show", kernel.run_id[:8], "--store", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.count("measured") == 3 and '"BLOCK"' in out
    assert "rel_error" in out and "0.0e+00" in out  # the output check's error of each measured config


def test_export_trials_and_winners(tuned_store, tmp_path):
    path, kernel = tuned_store
    assert main(["store", "export", str(tmp_path / "t.jsonl"), "--store", str(path), "--run", kernel.run_id]) == 0
    rows = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert {r["run_id"] for r in rows} == {kernel.run_id} and len(rows) >= 3
    assert main(["store", "export", str(tmp_path / "w.csv"), "--store", str(path), "--winners"]) == 0
    assert len((tmp_path / "w.csv").read_text().splitlines()) == 1 + 2  # header + one winner per key


def test_export_never_overwrites(tuned_store, tmp_path, usage_error):
    path, _ = tuned_store
    (tmp_path / "mine.csv").write_text("keep")
    assert "does not overwrite" in usage_error(["store", "export", str(tmp_path / "mine.csv"), "--store", str(path)])
    assert (tmp_path / "mine.csv").read_text() == "keep"


def test_a_foreign_file_is_refused_with_a_message(tmp_path, capsys):
    (tmp_path / "x.db").write_text("not a database")
    assert main(["store", "ls", "--store", str(tmp_path / "x.db")]) == 2
    assert "not a tunekit store" in capsys.readouterr().err


@pytest.mark.slow  # 50-63 s on 2 cores
def test_demo_replays_the_shipped_h200_spaces_without_a_gpu(tmp_path, capsys):
    from tunekit.kernels import shipped

    out_dir = tmp_path / "demo"
    assert main(["demo", "--replay", "--strategy", "random", "--seeds", "2", "--budget", "5", "--jobs", "1",
                 "--out", str(out_dir)]) == 0
    out = capsys.readouterr().out
    index = shipped.index()
    assert f"{2 * len(index['spaces'])} tunings (1 strategies x 2 seeds x {len(index['spaces'])} spaces" in out
    for entry in index["spaces"]:  # one row per shipped space, with its recorded best time
        assert f"{entry['kernel']}/{entry['shape']}" in out and f"{entry['best_ms']:.4f}" in out
    assert (out_dir / "curves.png").stat().st_size > 0 and (out_dir / "summary.csv").exists()


@pytest.mark.slow  # 46 s on 2 cores
def test_demo_shows_the_default_strategy_with_the_store_holding_the_other_shapes(tmp_path, capsys):
    assert main(["demo", "--replay", "--strategy", "default", "--seeds", "1", "--budget", "2", "--jobs", "1",
                 "--out", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("space "))
    assert header.split()[-4:] == ["default", "default", "+", "store"]  # without, then with the store
    assert (tmp_path / "demo" / "with-store" / "summary.csv").exists()


def test_reading_commands_never_create_a_store(tmp_path, capsys):
    typo = tmp_path / "stor.db"
    for command in (["store", "ls"], ["store", "show", "abc"], ["store", "export", str(tmp_path / "t.csv")]):
        assert main([*command, "--store", str(typo)]) == 2
        assert capsys.readouterr().err.strip() == f"tunekit: Store {typo} does not exist: check the path " \
            "(tunekit creates a store only to record tunings into it)."
    assert list(tmp_path.iterdir()) == []


def test_a_store_in_a_read_only_location_is_listed_shown_and_exported(tuned_store, tmp_path, make_read_only, capsys):
    path, kernel = tuned_store
    kernel.store.close()  # the tuning process is gone: nothing writes the store any more
    make_read_only(path.parent)
    assert main(["store", "ls", "--store", str(path)]) == 0
    assert kernel.run_id[:12] in capsys.readouterr().out
    assert main(["store", "show", kernel.run_id[:8], "--store", str(path)]) == 0
    out = tmp_path.parent / f"{tmp_path.name}-export.csv"
    assert main(["store", "export", str(out), "--store", str(path)]) == 0
    out.unlink()


@pytest.mark.parametrize("url, expected", [
    ("foo://bar", "tunekit: Store URL foo://bar: SQLAlchemy knows no database 'foo'"),
    ("mysql://tuner:s3cret@dbhost/tunekit", "tunekit: Store URL mysql://tuner:***@dbhost/tunekit needs the Python "
                                            "module 'MySQLdb', which is not installed: pip install mysqlclient"),
])
def test_a_store_url_that_cannot_be_opened_is_one_line(url, expected, monkeypatch, capsys):
    if "mysql" in url and importlib.util.find_spec("MySQLdb"):
        pytest.skip("a MySQL driver is installed here")
    monkeypatch.setenv("TUNEKIT_STORE", url)
    assert main(["store", "ls"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(expected) and err.count("\n") == 1 and "s3cret" not in err


def test_ls_counts_the_stored_trials_of_an_unfinished_run(store_path, capsys):
    from tunekit.store import ResultsStore
    from tunekit.testing.stores import IDENTITY, KEY, ok_trial

    with ResultsStore(store_path) as store:
        store.start_run(IDENTITY, KEY, strategy="random", budget=None, run_id="killed0000000")
        for i in range(3):
            store.record(IDENTITY, KEY, ok_trial(64 << i, 1.0), strategy="random", run_id="killed0000000")
    assert main(["store", "ls", "--store", str(store_path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("killed"))
    assert row.split()[-4:-2] == ["3", "unfinished"]


def test_rm_refuses_to_run_without_a_filter_and_names_them(tuned_store, capsys):
    path, _ = tuned_store
    with pytest.raises(SystemExit) as exited:
        main(["store", "rm", "--store", str(path)])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == "tunekit store rm: error: give at least one filter: --run, --kernel, --key or --status " \
                  "(nothing was deleted)"
    assert main(["store", "ls", "--store", str(path)]) == 0
    assert len([line for line in capsys.readouterr().out.splitlines() if "add_kernel" in line]) == 2


def test_rm_deletes_by_run_kernel_key_or_status_and_says_how_many(tuned_store, capsys):
    from tunekit.store import ResultsStore

    path, kernel = tuned_store
    kernel.store.close()
    with ResultsStore(path, read_only=True) as store:
        rows = store.rows(run_id=kernel.run_id)  # 3 measured, the finalists re-timed
    spaced = json.dumps(json.loads(rows[0]["key"]), indent=1)  # the key as a user may type it
    with pytest.raises(SystemExit):  # kernels share keys: a key alone would reach every kernel's trials
        main(["store", "rm", "--store", str(path), "--key", spaced])
    assert "--key needs --kernel" in capsys.readouterr().err
    assert main(["store", "rm", "--store", str(path), "--kernel", "add_kernel", "--key", spaced, "--dry-run"]) == 0
    # the claim: the key's tuning took one, finished with its winner (processes sharing a store tune a key once)
    assert capsys.readouterr().out == f"would delete {len(rows)} trials, 1 run, 1 winner and 1 claim from " \
        f"sqlite:///{path} (--dry-run: nothing was deleted)\n"
    assert main(["store", "rm", "--store", str(path), "--kernel", "add_kernel", "--status", "runtime_error"]) == 0
    assert capsys.readouterr().out.startswith("deleted 0 trials, 0 runs and 0 winners from ")
    assert main(["store", "rm", "--store", str(path), "--run", kernel.run_id[:8]]) == 0
    assert capsys.readouterr().out.startswith(f"deleted {len(rows)} trials, 1 run and 1 winner from ")
    with ResultsStore(path, read_only=True) as store:
        assert len(store.runs()) == 1 and kernel.run_id not in {r["run_id"] for r in store.runs()}
        assert len(store.winner_rows()) == 1
        left = len(store.rows())
    assert main(["store", "rm", "--store", str(path), "--kernel", "add_kernel"]) == 0
    # both keys' claims: --run leaves a claim (it names no key), which tunes again once its winner is gone
    assert capsys.readouterr().out.startswith(f"deleted {left} trials, 1 run, 1 winner and 2 claims from ")


def test_rm_refuses_a_key_that_is_not_json_and_a_missing_store(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["store", "rm", "--key", "n=4096", "--store", str(tmp_path / "store.db")])
    assert "argument --key: not a tuning key in JSON" in capsys.readouterr().err
    assert main(["store", "rm", "--kernel", "k", "--store", str(tmp_path / "store.db")]) == 2
    assert "does not exist" in capsys.readouterr().err and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt", ["csv", "kerneltuner"])
def test_export_into_a_missing_directory_is_one_line(tuned_store, tmp_path, fmt, usage_error):
    path, _ = tuned_store
    target = tmp_path / "nowhere" / f"out.{'json' if fmt == 'kerneltuner' else 'csv'}"
    extra = ["--format", "kerneltuner", "--kernel", "add_kernel", "--key", '{"args": {"n": 1024}, "dtypes": '
             '["torch.float32", "torch.float32", "torch.float32"]}'] if fmt == "kerneltuner" else []
    assert usage_error(["store", "export", str(target), "--store", str(path), *extra]) == f"tunekit: cannot write {target}: directory {target.parent} does not exist; " \
                                "create it first or choose another path."
    assert not target.parent.exists()


def test_export_into_a_read_only_location_is_one_line(tuned_store, tmp_path, make_read_only, usage_error):
    path, kernel = tuned_store
    kernel.store.close()
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "keep.txt").write_text("keep")
    make_read_only(locked)
    error = usage_error(["store", "export", str(locked / "t.csv"), "--store", str(path)])
    assert error.startswith(f"tunekit: cannot write {locked / 't.csv'}: ") and error.endswith("; choose another path.")
    assert sorted(p.name for p in locked.iterdir()) == ["keep.txt"]


@pytest.mark.parametrize("budget", ["0", "-3", "two"])
@pytest.mark.parametrize("command", [["compare", "--space", "x.json", "--strategy", "random", "--out", "out"],
                                     ["demo", "--replay"]])
def test_a_budget_that_is_not_a_positive_int_is_refused(command, budget, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main([*command, "--budget", budget])
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        f"error: argument --budget: must be an int >= 1 (evaluations per tuning). Got {budget!r} instead.")
    assert list(tmp_path.iterdir()) == []


def test_version_names_tunekit_and_triton(capsys):
    with pytest.raises(SystemExit) as exit_status:
        main(["--version"])
    assert exit_status.value.code == 0
    assert capsys.readouterr().out.startswith(f"tunekit {tunekit.__version__} (Triton ")


def _exit_code(argv: list[str]) -> int:
    """What the command line exits with: main's return, or argparse's exit."""
    try:
        return main(argv)
    except SystemExit as exited:
        return exited.code if isinstance(exited.code, int) else 1


def test_listing_commands_print_json_and_csv_with_every_field_and_tables_cut_only_without_wide(tuned_store, capsys):
    import csv
    import io

    path, kernel = tuned_store
    assert main(["store", "ls", "--store", str(path), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)  # nothing but JSON on stdout
    assert {run["run_id"] for run in runs} >= {kernel.run_id}
    assert all(isinstance(run["key"], dict) and run["key"]["args"]["n"] in (1024, 4096) for run in runs)
    assert main(["store", "show", kernel.run_id[:8], "--store", str(path), "--format", "json"]) == 0
    trials = json.loads(capsys.readouterr().out)
    (won,) = [t for t in trials if t["winner"]]
    (run,) = [r for r in runs if r["run_id"] == kernel.run_id]
    assert won["config"] == run["winner"] and won["status"] == "ok"
    assert main(["store", "show", kernel.run_id[:8], "--store", str(path), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [row["id"] for row in rows] == [str(t["id"]) for t in trials]
    key = json.dumps(run["key"])
    assert main(["store", "ls", "--store", str(path)]) == 0
    assert key not in capsys.readouterr().out  # cut in a table...
    assert main(["store", "ls", "--store", str(path), "--wide"]) == 0
    assert key in capsys.readouterr().out  # ...shown in full with --wide


def test_show_marks_the_trial_the_winner_was_chosen_by(tuned_store, capsys):
    path, kernel = tuned_store
    assert main(["store", "show", kernel.run_id[:8], "--store", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    marked = [line for line in lines if line.startswith("*")]
    assert len(marked) == 1 and kernel.tuning_report and json.dumps(
        tunekit.config.config_to_dict(kernel.best_config), sort_keys=True) in marked[0]


def test_show_says_why_a_run_has_no_winner_and_where_a_winner_not_timed_in_the_run_came_from(store_path, capsys):
    from tunekit.store import ResultsStore
    from tunekit.testing.stores import IDENTITY, KEY, ok_trial
    from tunekit.trial import Status, Trial

    store = ResultsStore(store_path)

    def winner_line(run_id: str) -> str:
        assert main(["store", "show", run_id, "--store", str(store_path)]) == 0
        return capsys.readouterr().out.splitlines()[1]

    def run(run_id: str, trials: list, winner=None) -> str:
        store.start_run(IDENTITY, KEY, strategy="s", budget=None, run_id=run_id)
        for trial in trials:
            store.record(IDENTITY, KEY, trial, strategy="s", run_id=run_id)
        store.finish_run(IDENTITY, KEY, run_id=run_id, winner=winner, evaluations=len(trials), tuning_seconds=1.0,
                         space_hash="h")
        return winner_line(run_id)

    assert run("empty", []) == "winner: none (the run ended before any config was measured)"
    failed = Trial(ok_trial(64, 1.0).config, Status.COMPILE_ERROR, error="no")
    assert run("failed", [failed]) == "winner: none (every config failed)"
    earlier = ok_trial(128, 1.0)
    assert run("earlier", [ok_trial(64, 2.0)], winner=earlier) == f"winner: {earlier.config_id} (measured in an earlier run)"
    store.start_run(IDENTITY, KEY, strategy="s", budget=None, run_id="open")
    assert winner_line("open") == "winner: none yet"
    assert run("won", [ok_trial(256, 0.5)], winner=ok_trial(256, 0.5)).startswith("winner (*): ")


def test_show_marks_the_winner_of_a_run_whose_winners_were_imported_after_its_trials(tuned_store, tmp_path, capsys):
    path, kernel = tuned_store
    copy = str(tmp_path / "copy.db")
    for what, extra in (("trials", []), ("winners", ["--winners"])):
        assert main(["store", "export", str(tmp_path / f"{what}.jsonl"), "--store", str(path), *extra]) == 0
        assert main(["store", "import", str(tmp_path / f"{what}.jsonl"), "--store", copy]) == 0
    capsys.readouterr()
    assert main(["store", "show", kernel.run_id, "--store", copy]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == f"winner (*): {json.dumps(tunekit.config.config_to_dict(kernel.best_config), sort_keys=True)}"
    assert len([line for line in lines if line.startswith("*")]) == 1


def test_export_to_dash_writes_rows_to_stdout_that_import_reads_back(tuned_store, tmp_path, monkeypatch, capsys):
    path, _ = tuned_store
    monkeypatch.chdir(tmp_path)
    assert main(["store", "export", "-", "--store", str(path), "--winners"]) == 0
    text = capsys.readouterr().out
    assert not (tmp_path / "-").exists()
    assert len([json.loads(line) for line in text.splitlines()]) == 2  # one winner per key, JSONL
    (tmp_path / "w.jsonl").write_text(text)
    assert main(["store", "import", "w.jsonl", "--store", str(tmp_path / "copy.db")]) == 0
    assert "added 0 trials and 2 winners" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["store", "show", "no-such-run"],
    ["store", "plot", "no-such-run"],
    ["store", "export", "EXISTING"],
    ["store", "export", "x.json", "--format", "t4"],
    ["store", "rm"],
    ["store", "heuristics", "EXISTING", "--kernel", "add_kernel"],
    ["tune", "no_such_manifest.toml"],
    ["store", "ls", "--format", "yaml"],
])
def test_every_usage_error_exits_with_code_2_and_one_line_naming_it(argv, tuned_store, tmp_path, monkeypatch,
                                                                       capsys):
    path, _ = tuned_store
    monkeypatch.chdir(tmp_path)
    (tmp_path / "existing.py").write_text("kept = True\n")
    argv = [str(tmp_path / "existing.py") if a == "EXISTING" else a for a in argv]
    assert _exit_code([*argv, "--store", str(path)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(("tunekit: ", "usage:", "tunekit "))
    assert (tmp_path / "existing.py").read_text() == "kept = True\n"


def test_store_plot_draws_a_runs_history_to_a_png_and_never_overwrites(tuned_store, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path, kernel = tuned_store
    out = tmp_path / "history.png"
    assert main(["store", "plot", kernel.run_id[:8], "--store", str(path), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    before = out.read_bytes()
    assert _exit_code(["store", "plot", kernel.run_id[:8], "--store", str(path), "--out", str(out)]) == 2
    assert "does not overwrite" in capsys.readouterr().err and out.read_bytes() == before
    assert main(["store", "plot", kernel.run_id[:8], "--store", str(path), "--out", str(tmp_path / "h.svg")]) == 0
    assert (tmp_path / "h.svg").read_text().lstrip().startswith("<?xml")
    assert _exit_code(["store", "plot", kernel.run_id[:8], "--store", str(path), "--out",
                       str(tmp_path / "h.unknown")]) == 2
    assert ".png" in capsys.readouterr().err and not (tmp_path / "h.unknown").exists()


def test_store_plot_with_a_matplotlib_that_fails_to_import_is_a_usage_error(tuned_store, tmp_path, monkeypatch,
                                                                            capsys):
    """Injected: matplotlib is found but its import raises ImportError (as a wheel built for
    another Python does)."""
    import builtins

    pytest.importorskip("matplotlib")
    path, kernel = tuned_store
    real_import = builtins.__import__

    def broken(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("matplotlib's C extension is for another Python")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", broken)
    assert _exit_code(["store", "plot", kernel.run_id[:8], "--store", str(path), "--out",
                       str(tmp_path / "h.png")]) == 2
    assert "another Python" in capsys.readouterr().err.splitlines()[-1]


def test_store_plot_counts_the_searchs_evaluations_and_draws_the_finalists_re_timings_apart(tuned_store, capsys,
                                                                                            tmp_path, monkeypatch):
    """The finalists' re-timings are stored as trials of the run; they are not evaluations."""
    monkeypatch.chdir(tmp_path)
    from tunekit.history_plot import split_history
    from tunekit.store import ResultsStore

    path, kernel = tuned_store
    rows = ResultsStore(path).rows(run_id=kernel.run_id)
    evaluations, retimed = split_history(rows)
    assert retimed and len(evaluations) == kernel.tuning_report.evaluations == 3
    assert all(evaluations[position - 1]["config"] == row["config"] for position, row in retimed)
    assert main(["store", "plot", kernel.run_id, "--store", str(path)]) == 0
    assert f"3 evaluations and {len(retimed)} finalists re-timed" in capsys.readouterr().out
    assert (tmp_path / f"tunekit-run-{kernel.run_id[:12]}.png").exists()


def test_every_command_and_option_has_help_in_plain_text_and_help_lists_strategies_and_spaces(capsys):
    import argparse

    from tunekit.cli import build_parser
    from tunekit.kernels import shipped
    from tunekit.strategy import available

    assert _exit_code(["--help"]) == 0
    top = capsys.readouterr().out
    assert all(name in top for name in available()) and str(shipped.DIRECTORY) in top
    assert all(path.name.removesuffix(".json.gz") in top for path in shipped.paths())
    assert _exit_code(["tune", "--help"]) == 0
    assert "(default: 60.0)" in capsys.readouterr().out  # --lease
    parser = build_parser()

    def parsers(p: argparse.ArgumentParser):
        yield p
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    yield from parsers(child)

    for p in parsers(parser):
        assert p.description, f"{p.prog} has no description"
        for action in p._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            assert action.help, f"{p.prog} {'/'.join(action.option_strings) or action.dest} has no help"
            assert "``" not in action.help and "``" not in p.description


def test_a_tunings_report_reads_as_python_and_the_log_says_how_to_pin_the_winner(store_path, caplog):
    import logging

    import triton

    from tunekit.config import config_json, config_source

    kernel = tunekit.autotune(space=vector_add.space(), key=["n"], strategy="random",
                              budget=tunekit.Budget(evals=3), store=store_path)(vector_add.add_kernel)
    x, y, out = vector_add.inputs(1024)
    with caplog.at_level(logging.INFO, logger="tunekit"):
        kernel[vector_add.grid(1024)](x, y, out, 1024)
    report = kernel.tuning_report
    assert "object at 0x" not in repr(report) and config_source(report.winner) in repr(report)
    assert config_json(eval(config_source(report.winner), {"triton": triton})) == config_json(report.winner)
    assert any(report.pin in record.getMessage() for record in caplog.records)
    pinned = eval(report.pin.removeprefix("configs="), {"triton": triton})
    assert [config_json(c) for c in pinned] == [config_json(kernel.best_config)]


def reset_output(nargs):
    nargs["out"].zero_()


def test_a_pinned_config_keeps_its_pre_hook_by_name_and_its_ir_override():
    import triton

    from tunekit.config import config_source

    config = triton.Config({"BLOCK": 64}, num_warps=8, num_stages=2, pre_hook=reset_output)
    assert config_source(config) == "triton.Config({'BLOCK': 64}, num_warps=8, num_stages=2, pre_hook=reset_output)"
    rebuilt = eval(config_source(config), {"triton": triton, "reset_output": reset_output})
    assert rebuilt.pre_hook is reset_output
    if "ir_override" in inspect.signature(triton.Config).parameters:
        overridden = triton.Config({"BLOCK": 64}, ir_override="kernel.ttgir")
        assert eval(config_source(overridden), {"triton": triton}).ir_override == "kernel.ttgir"


def _strict_json(text: str):
    """JSON as parsers other than Python's read it: NaN and Infinity are errors."""
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_json_output_and_exports_are_strict_json_and_an_infinite_error_survives_the_round_trip(
        tuned_store, tmp_path, capsys):
    """Injected: a wrong output with an infinite relative error in the store. Python's json writes
    it as ``Infinity``, which jq and JavaScript refuse; here --json gives null and the export
    "inf", which the import reads back as infinity."""
    import math

    from tunekit.store import ResultsStore
    from tunekit.testing.stores import IDENTITY, KEY, ok_trial
    from tunekit.trial import Status, Trial

    path, _ = tuned_store
    store = ResultsStore(path)
    store.start_run(IDENTITY, KEY, strategy="s", budget=None, run_id="wrong-run")
    store.record(IDENTITY, KEY, Trial(ok_trial(64, 1.0).config, Status.WRONG, error="inf", relative_error=math.inf),
                 strategy="s", run_id="wrong-run")
    assert main(["store", "show", "wrong-run", "--store", str(path), "--json"]) == 0
    (shown,) = _strict_json(capsys.readouterr().out)
    assert shown["status"] == "wrong" and shown["relative_error"] is None
    assert main(["store", "export", "-", "--store", str(path), "--format", "jsonl"]) == 0
    exported = capsys.readouterr().out
    assert [_strict_json(line) for line in exported.splitlines()]
    (tmp_path / "all.jsonl").write_text(exported)
    assert main(["store", "import", str(tmp_path / "all.jsonl"), "--store", str(tmp_path / "copy.db")]) == 0
    (copied,) = [row for row in ResultsStore(tmp_path / "copy.db").rows() if row["status"] == "wrong"]
    assert copied["relative_error"] == math.inf


def test_a_reader_that_stops_early_gets_no_traceback(tuned_store):
    """``tunekit store ls | head -1``: the pipe closes before the listing is written."""
    import subprocess
    import sys

    path, _ = tuned_store
    listing = subprocess.Popen([sys.executable, "-m", "tunekit.cli", "store", "ls", "--store", str(path), "--wide"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    listing.stdout.close()  # before the command has imported tunekit, let alone written
    _, errors = listing.communicate(timeout=120)
    assert b"Traceback" not in errors and b"BrokenPipeError" not in errors, errors.decode()
    assert listing.returncode == 1
