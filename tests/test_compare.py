"""``tunekit compare`` end to end: outputs, counting, and numbers checked against hand calculation."""

import csv
import json
from pathlib import Path

import pytest

from tunekit.cli import main
from tunekit.compare import replay, run_comparison
from tunekit.recorded import read_space

SHARED = Path(__file__).resolve().parents[2] / "shared" / "spaces" / "kerneltuner"
REQUIRED = ["space", "strategy", "seed", "budget", "n_valid", "optimum_ms", "best_ms", "best_over_optimum",
            "evals_to_1.02", "evals_to_1.05", "seconds_to_1.02", "score"]


def hand_space(path: Path, times=(16.0, 8.0, 4.0, 2.0, 1.0), failed=()) -> Path:
    """Five configs in this file order, each costing 1 s (compile 900 ms + benchmark 100 ms)."""
    cache = {}
    for i, t in enumerate(times):
        cache[str(i)] = {"x": i, "time": "RuntimeFailedConfig" if i in failed else t, "compile_time": 900.0,
                         "benchmark_time": 100.0, "verification_time": 0}
    path.write_text(json.dumps({"device_name": "hand", "kernel_name": "k", "problem_size": 1,
                                "tune_params_keys": ["x"], "tune_params": {"x": list(range(len(times)))},
                                "cache": cache}))
    return path


def read_csv(path):
    with open(path) as handle:
        return list(csv.DictReader(handle))


def test_compare_writes_the_four_outputs_with_hand_checked_numbers(tmp_path, capsys):
    space = hand_space(tmp_path / "hand.json")
    out = tmp_path / "out"
    assert main(["compare", "--space", str(space), "--strategy", "exhaustive", "--strategy", "random",
                 "--seeds", "3", "--budget", "5", "--threshold", "3", "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} >= {"summary.csv", "curves.csv", "report.md", "curves.png"}
    summary = read_csv(out / "summary.csv")
    assert set(REQUIRED) <= set(summary[0])
    exhaustive = [r for r in summary if r["strategy"] == "exhaustive"]
    # exhaustive visits the file order 16, 8, 4, 2, 1: best-so-far 16, 8, 4, 2, 1
    assert [r["evals_to_1.02"] for r in exhaustive] == ["5"] * 3
    # 1 s a config + the strategy's time, measured for real: a garbage collection there took 0.15 s
    assert 5.0 <= float(exhaustive[0]["seconds_to_1.02"]) < 5.5
    # score range 3..5 evaluations; at 3 and 4: (1.6 - 4) / 0.6 = -4 and (1.2 - 2) / 0.2 = -4 (test_metrics)
    assert float(exhaustive[0]["score"]) == pytest.approx(-4.0)
    assert float(exhaustive[0]["best_over_optimum"]) == 1.0 and exhaustive[0]["n_valid"] == "5"
    curves = read_csv(out / "curves.csv")
    assert [float(r["best_ms"]) for r in curves if r["strategy"] == "exhaustive" and r["seed"] == "0"] == [
        16, 8, 4, 2, 1]
    report = (out / "report.md").read_text()
    assert "| random (calculated) | 3 | expected |" in report  # (5 + 1) / (1 + 1) draws to reach the optimum
    assert "| exhaustive | 5 | 3/3 | 5 | 3/3 | 4 | 3/3 |" in report  # within 3x of the optimum (3 ms): 2 ms, 4th
    assert [r["evals_to_3.0"] for r in exhaustive] == ["4"] * 3
    assert "exhaustive" in capsys.readouterr().out


def test_failures_count_as_evaluations_and_first_visits_only(tmp_path):
    space = read_space(hand_space(tmp_path / "hand.json", failed=(0, 1)))
    run = replay(space, "exhaustive", seed=0, evals=5)
    assert len(run.times_ms) == 5 and list(run.times_ms[:2]) == [float("inf")] * 2
    assert run.seconds[-1] == pytest.approx(5.0, abs=0.05)
    short = replay(space, "random", seed=0, evals=3)
    assert len(short.times_ms) == 3


def test_a_seconds_budget_cuts_a_replayed_tuning(tmp_path):
    run = replay(read_space(hand_space(tmp_path / "hand.json")), "exhaustive", seed=0, evals=5, seconds=2.5)
    assert len(run.times_ms) == 3  # the third config takes the clock past 2.5 s; no fourth is started


def test_refuses_an_output_directory_with_other_files(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "thesis.tex").write_text("keep")
    with pytest.raises(SystemExit, match="files tunekit did not write"):
        main(["compare", "--space", str(hand_space(tmp_path / "h.json")), "--strategy", "random", "--seeds", "1",
              "--out", str(tmp_path / "out")])
    assert (tmp_path / "out" / "thesis.tex").read_text() == "keep"


def test_bad_arguments_fail_before_any_work(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:  # a usage error (more in test_compare_strategies.py)
        main(["compare", "--space", str(hand_space(tmp_path / "h.json")), "--strategy", "annealing",
              "--out", str(tmp_path / "o")])
    assert exited.value.code == 2 and "Unknown strategy 'annealing'" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no such file"):
        main(["compare", "--space", str(tmp_path / "missing.json"), "--strategy", "random", "--out", str(tmp_path)])


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/spaces is not beside this checkout")
def test_random_search_scores_about_zero_on_a_shared_space():
    """The calculated baseline is random search's expectation: 60 seeds of it score near 0."""
    comparison = run_comparison([SHARED / "kt_data" / "pnpoly" / "RTX_3090.json.gz"], ["random"], seeds=60)
    from tunekit.compare import _score

    (space,) = comparison.spaces
    assert abs(_score(comparison, space, "random")) < 0.15
    assert comparison.budgets[space] == 230  # where calculated random search reaches the p = 0.96 cutoff


def test_a_comparison_is_read_back_from_its_curves_and_scores_the_same(tmp_path):
    """``runs_from_curves`` inverts ``curves.csv``: failed evaluations included, the runs and so
    every score come back (what ``kernel_tuner_side_by_side.py --report-only`` scores again)."""
    from tunekit.compare import _score, runs_from_curves, write_outputs

    comparison = run_comparison([hand_space(tmp_path / "hand.json", failed=(1,))], ["random", "exhaustive"],
                                seeds=3, budget=5)
    write_outputs(comparison, tmp_path / "out")
    runs = runs_from_curves(tmp_path / "out" / "curves.csv", comparison.budgets)
    key = lambda run: (run.strategy, run.seed)  # noqa: E731
    for again, first in zip(sorted(runs, key=key), sorted(comparison.runs, key=key)):
        assert (again.space, again.strategy, again.seed, again.budget) == (first.space, first.strategy, first.seed,
                                                                           first.budget)
        assert list(again.times_ms) == list(first.times_ms) and list(again.seconds) == pytest.approx(first.seconds)
    assert any(float("inf") in list(run.times_ms) for run in runs)
    before = [_score(comparison, s, "random", seconds=True) for s in comparison.spaces]
    comparison.runs, comparison._tables = runs, {}
    assert [_score(comparison, s, "random", seconds=True) for s in comparison.spaces] == pytest.approx(before)


def test_without_matplotlib_the_tables_are_written_and_the_missing_figures_said(tmp_path, monkeypatch, caplog):
    """matplotlib is an extra (``tunekit[plots]``): without it a comparison still writes its tables."""
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else
                        find_spec(name, *a))
    assert main(["compare", "--space", str(hand_space(tmp_path / "h.json")), "--strategy", "random", "--seeds", "1",
                 "--out", str(tmp_path / "out")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".tunekit-outputs", "curves.csv", "report.md",
                                                                  "summary.csv"]
    assert "pip install 'tunekit[plots]'" in caplog.text
