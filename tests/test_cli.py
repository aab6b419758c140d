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


def test_export_never_overwrites(tuned_store, tmp_path):
    path, _ = tuned_store
    (tmp_path / "mine.csv").write_text("keep")
    with pytest.raises(SystemExit, match="does not overwrite"):
        main(["store", "export", str(tmp_path / "mine.csv"), "--store", str(path)])
    assert (tmp_path / "mine.csv").read_text() == "keep"


def test_a_foreign_file_is_refused_with_a_message(tmp_path, capsys):
    (tmp_path / "x.db").write_text("not a database")
    assert main(["store", "ls", "--store", str(tmp_path / "x.db")]) == 2
    assert "not a tunekit store" in capsys.readouterr().err


def test_demo_replays_the_shipped_h200_spaces_without_a_gpu(tmp_path, capsys):
    from tunekit.kernels import shipped

    out_dir = tmp_path / "demo"
    assert main(["demo", "--replay", "--strategy", "random", "--seeds", "2", "--budget", "5", "--jobs", "1",
                 "--out", str(out_dir)]) == 0
    out = capsys.readouterr().out
    index = shipped.index()
    assert f"24 tunings (1 strategies x 2 seeds x {len(index['spaces'])} spaces" in out
    for entry in index["spaces"]:  # one row per shipped space, with its recorded best time
        assert f"{entry['kernel']}/{entry['shape']}" in out and f"{entry['best_ms']:.4f}" in out
    assert (out_dir / "curves.png").stat().st_size > 0 and (out_dir / "summary.csv").exists()


def test_demo_shows_the_default_strategy_with_the_store_holding_the_other_shapes(tmp_path, capsys):
    assert main(["demo", "--replay", "--strategy", "default", "--seeds", "1", "--budget", "2", "--jobs", "1",
                 "--out", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("space "))
    assert header.split()[-4:] == ["default", "default", "+", "store"]  # without, then with the store
    assert (tmp_path / "demo" / "with-store" / "summary.csv").exists()
