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
    path.parent.mkdir(parents=True, exist_ok=True)
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


def test_a_strategy_instance_with_its_own_options_replays_as_its_name_does(tmp_path):
    """experiments/design_variants.py replays strategy instances built with other options."""
    from tunekit.strategies import RandomSearch

    space = read_space(hand_space(tmp_path / "hand.json"))
    by_instance = replay(space, RandomSearch(), seed=3, evals=4)
    assert by_instance.strategy == "random"
    assert list(by_instance.times_ms) == list(replay(space, "random", seed=3, evals=4).times_ms)


def test_a_seconds_budget_cuts_a_replayed_tuning(tmp_path):
    run = replay(read_space(hand_space(tmp_path / "hand.json")), "exhaustive", seed=0, evals=5, seconds=2.5)
    assert len(run.times_ms) == 3  # the third config takes the clock past 2.5 s; no fourth is started


def test_refuses_an_output_directory_with_other_files(tmp_path, usage_error):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "thesis.tex").write_text("keep")
    assert "files tunekit did not write" in usage_error(
        ["compare", "--space", str(hand_space(tmp_path / "h.json")), "--strategy", "random", "--seeds", "1",
         "--out", str(tmp_path / "out")])
    assert (tmp_path / "out" / "thesis.tex").read_text() == "keep"


def test_bad_arguments_fail_before_any_work(tmp_path, usage_error):
    assert "Unknown strategy 'annealing'" in usage_error(
        ["compare", "--space", str(hand_space(tmp_path / "h.json")), "--strategy", "annealing",
         "--out", str(tmp_path / "o")])
    assert "no such file" in usage_error(
        ["compare", "--space", str(tmp_path / "missing.json"), "--strategy", "random", "--out", str(tmp_path)])
    assert not (tmp_path / "o").exists()


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


def test_a_replay_does_not_depend_on_where_the_space_file_lies(tmp_path):
    """The seed comes from the space's content and the user's seed: a space file moved to other
    folders (so read under another name) is replayed the same way."""
    times = [float(t) for t in range(1, 41)]
    first = hand_space(tmp_path / "lab" / "gpu-a" / "space.json", times=times)
    moved = tmp_path / "copies" / "elsewhere" / "space.json"
    moved.parent.mkdir(parents=True)
    moved.write_bytes(first.read_bytes())
    spaces = [read_space(first), read_space(moved)]
    assert spaces[0].name != spaces[1].name
    for seed in (0, 1):
        runs = [replay(space, "random", seed=seed, evals=10) for space in spaces]
        assert list(runs[0].times_ms) == list(runs[1].times_ms)
    assert spaces[0].digest == spaces[1].digest


def test_a_reused_output_directory_keeps_no_outputs_of_the_earlier_comparison(tmp_path):
    """``--out`` written before: the figures of spaces no longer compared are removed, so that
    every file there belongs to the new comparison; files tunekit did not write stay refused."""
    pytest.importorskip("matplotlib")
    spaces = [hand_space(tmp_path / name / "space.json") for name in ("first", "second")]
    out = tmp_path / "out"
    arguments = ["compare", "--strategy", "random", "--seeds", "1", "--budget", "3", "--out", str(out)]
    assert main([*arguments, "--space", str(spaces[0]), "--space", str(spaces[1])]) == 0
    earlier = sorted(p.name for p in out.glob("curves-*.png"))
    assert len(earlier) == 2
    (out / "run.json").write_text("{}")  # experiments/kernel_tuner_side_by_side.py's, beside the outputs
    assert main([*arguments, "--space", str(spaces[0])]) == 0
    (now,) = out.glob("curves-*.png")
    assert now.name in earlier and "second" not in now.name
    assert (out / "run.json").read_text() == "{}"
    assert "second/space" not in (out / "summary.csv").read_text()


def test_a_marked_subdirectory_is_tunekits_and_cleared_outputs_leave_others_files(tmp_path):
    """``tunekit demo`` writes ``with-store/`` inside its ``--out``: a second run accepts it."""
    from tunekit.compare import OUTPUTS_MARKER, clear_outputs, output_directory

    out = output_directory(tmp_path / "demo")
    inner = output_directory(out / "with-store")
    (inner / "report.md").write_text("tunekit's")
    assert output_directory(out) == out
    clear_outputs(inner)
    assert not inner.exists()
    kept = output_directory(tmp_path / "kept")
    (kept / "summary.csv").write_text("tunekit's")
    (kept / "notes.txt").write_text("mine")
    clear_outputs(kept)
    assert sorted(p.name for p in kept.iterdir()) == [OUTPUTS_MARKER, "notes.txt"]


def test_a_budget_that_ends_inside_the_score_range_is_warned_about(tmp_path, caplog):
    """Below the end of the score range a strategy is scored against random search on evaluations
    it never made, and its score goes negative: the log and the report say so, and which budget
    would cover the range."""
    import logging
    import math

    from tunekit.metrics import SpaceStats

    path = hand_space(tmp_path / "hand.json")
    stats = SpaceStats.of(read_space(path))
    covering = math.ceil(stats.score_range()[1])  # equal costs: the range over seconds ends with it
    arguments = ["compare", "--space", str(path), "--strategy", "exhaustive", "--seeds", "1"]
    with caplog.at_level(logging.WARNING, logger="tunekit.compare"):
        assert main([*arguments, "--budget", str(covering - 2), "--out", str(tmp_path / "short")]) == 0
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    name = read_space(path).name
    assert "inside the score range" in warning and name in warning and f"--budget {covering}" in warning
    report = (tmp_path / "short" / "report.md").read_text()
    assert "inside the score range" in report and f"--budget {covering}" in report
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tunekit.compare"):
        assert main([*arguments, "--budget", str(covering), "--out", str(tmp_path / "enough")]) == 0
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "inside the score range" not in (tmp_path / "enough" / "report.md").read_text()
    caplog.clear()  # a seconds limit that stops the tunings first: every config costs 1 s
    with caplog.at_level(logging.WARNING, logger="tunekit.compare"):
        assert main([*arguments, "--budget", str(covering), "--seconds", str(covering - 2),
                     "--out", str(tmp_path / "seconds")]) == 0
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "inside the score range" in warning and f"--seconds {covering}" in warning


def test_progress_is_a_bar_on_stderr_and_off_where_stderr_is_not_a_terminal(tmp_path, capsys):
    arguments = ["compare", "--space", str(hand_space(tmp_path / "h.json")), "--strategy", "random",
                 "--strategy", "exhaustive", "--seeds", "2", "--budget", "5"]
    assert main([*arguments, "--out", str(tmp_path / "quiet")]) == 0
    assert capsys.readouterr().err == ""  # pytest's stderr is no terminal
    assert main([*arguments, "--progress", "--out", str(tmp_path / "shown")]) == 0
    err = capsys.readouterr().err
    assert "4/4" in err and "tuning" in err and "\n" in err  # the bar's last state is left


def test_the_aggregate_figure_shows_the_random_baseline_the_score_uses(tmp_path, monkeypatch):
    """curves.png: beside the strategies, calculated random search's expected best over the
    optimum, the median over spaces at each fraction of their budgets, dashed."""
    pytest.importorskip("matplotlib")
    import numpy as np
    from matplotlib.figure import Figure

    from tunekit.compare import write_outputs

    saved = {}
    monkeypatch.setattr(Figure, "savefig", lambda figure, path, **options: saved.update({Path(path).name: figure}))
    paths = [hand_space(tmp_path / "a.json"), hand_space(tmp_path / "b.json", times=(3.0, 1.0, 9.0, 2.0, 5.0, 4.0))]
    comparison = run_comparison(paths, ["random"], seeds=2, budget=4)
    write_outputs(comparison, tmp_path / "out")
    figure = saved["curves.png"]
    for axis, seconds in zip(figure.axes, (False, True)):
        (line,) = [line for line in axis.get_lines() if line.get_label().startswith("random (")]
        assert line.get_linestyle() == "--"
        fractions = line.get_xdata()
        expected = []
        for name, stats in comparison.stats.items():
            at = fractions * comparison.budgets[name]  # every config costs 1 s: seconds = evaluations
            done = np.floor(at + 1e-9) if seconds else np.maximum(1, np.ceil(at))
            expected.append(np.where(done >= 1, stats.random_curve(np.maximum(done, 1)), stats.worst) / stats.optimum)
        assert list(line.get_ydata()) == pytest.approx(list(np.median(expected, axis=0)))
    assert "random (calculated), median over spaces" in [t.get_text() for t in figure.axes[0].get_legend().get_texts()]


def test_replay_search_gives_every_measured_trial_and_hands_the_stored_trials_to_the_strategy(tmp_path):
    """``replay_search`` is ``replay``'s tuning with the trials it measured (which configs, not
    only their times), and the strategy starts with ``stored`` as the store's trials."""
    from tunekit.compare import replay_search
    from tunekit.strategies import Exhaustive

    space = read_space(hand_space(tmp_path / "hand.json"))
    seen = []

    class Recording(Exhaustive):
        def start(self, context):
            seen.append(context.history)
            super().start(context)

    stored = space.trials()[:2]
    result = replay_search(space, Recording(), seed=0, evals=5, stored=stored)
    assert [step.trial.config.kwargs["x"] for step in result.steps] == [0, 1, 2, 3, 4]  # the file's order
    assert [step.trial.time_ms for step in result.steps] == list(replay(space, "exhaustive", seed=0, evals=5).times_ms)
    assert seen == [tuple(stored)]


def test_replay_search_keeps_a_batch_in_flight_and_tells_each_trial_as_it_comes(tmp_path):
    """``replay_search(batch=B)`` asks the strategy for B configs, then tells it each trial as it
    comes and asks for one more, so that B - 1 are pending at every later ask, as a live tuning
    keeps its compile workers busy; the asks stop where the budget is spent. A batch of 1 is the
    replays' one at a time. A batch under 1, or one given to Kernel Tuner's strategies, is refused."""
    from tunekit.compare import replay_search
    from tunekit.strategies import Exhaustive

    space = read_space(hand_space(tmp_path / "hand.json", times=tuple(float(t) for t in range(9, 0, -1))))
    asks, tells = [], []

    class Recording(Exhaustive):
        def ask(self, n):
            asks.append((n, sum(tells)))  # configs asked for, trials told before
            return super().ask(n)

        def tell(self, trials):
            tells.append(len(trials))
            super().tell(trials)

    result = replay_search(space, Recording(), seed=0, evals=7, batch=3)
    assert asks == [(3, 0), (1, 1), (1, 2), (1, 3), (1, 4)]  # 2 pending at each; 7 asked: the budget
    assert tells == [1] * 7
    assert [step.trial.time_ms for step in result.steps] == list(replay(space, "exhaustive", seed=0, evals=7).times_ms)
    asks.clear()
    replay_search(space, Recording(), seed=0, evals=3)
    assert [n for n, _ in asks] == [1, 1, 1]
    for batch in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="batch"):
            replay_search(space, "random", seed=0, evals=3, batch=batch)
    with pytest.raises(ValueError, match="one config at a time"):
        replay(space, "kt:random_sample", seed=0, evals=3, batch=4)


def test_compare_batch_asks_each_strategy_in_batches_and_refuses_kernel_tuner_s(tmp_path, capsys):
    """``run_comparison(batch=8)`` replays ``default`` with 8 configs in flight, as
    ``replay`` does (on a recorded gemv space its proposals differ from one at a time), and
    ``tunekit compare --batch 3`` says so in its report; Kernel Tuner's strategies, which ask for
    one, and a batch of 0 are refused with the reason."""
    recorded = Path(__file__).resolve().parents[1] / "experiments" / "corpus" / "h200-heldout" / "gemv-lm_head_128k.json.gz"
    one, batched = (run_comparison([recorded], ["default"], seeds=1, budget=40, batch=batch) for batch in (1, 8))
    assert batched.batch == 8
    assert list(batched.runs[0].times_ms) == list(replay(read_space(recorded), "default", 0, 40, batch=8).times_ms)
    assert list(batched.runs[0].times_ms) != list(one.runs[0].times_ms)
    space = hand_space(tmp_path / "hand.json", times=tuple(float(t) for t in range(12, 0, -1)))
    out = tmp_path / "out"
    assert main(["compare", "--space", str(space), "--strategy", "random", "--seeds", "2", "--budget", "6",
                 "--batch", "3", "--out", str(out)]) == 0
    assert "had 3 configs in flight" in (out / "report.md").read_text()
    with pytest.raises(ValueError, match="one config at a time"):
        run_comparison([space], ["kt:random_sample"], seeds=1, budget=4, batch=2)
    assert main(["compare", "--space", str(space), "--strategy", "kt:random_sample", "--batch", "2",
                 "--out", str(tmp_path / "o2")]) == 2
    assert "Kernel Tuner's strategies are replayed one config at a time" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["compare", "--space", str(space), "--strategy", "random", "--batch", "0", "--out", str(tmp_path / "o3")])
    assert "must be an int >= 1 (configs in flight)" in capsys.readouterr().err
