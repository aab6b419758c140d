"""``tunekit compare --strategy``: registered names, ``module:Class`` beside the user, entry points,
and Kernel Tuner's strategies (``kt:NAME``), in the same report; bad ones refused before any work."""

import csv
import hashlib
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import pytest

import tunekit.strategy
from tunekit.cli import main

STRATEGIES = '''
import tunekit


class Reverse(tunekit.Strategy):
    """The space's configs last to first."""

    adaptive = False

    def start(self, context):
        super().start(context)
        self._queue = context.space.configs()[::-1]

    def ask(self, n):
        batch, self._queue = self._queue[:n], self._queue[n:]
        return batch


class NeedsArguments(Reverse):
    def __init__(self, width):
        self.width = width


NOT_A_STRATEGY = 3
'''


def space_file(path: Path, n: int = 6) -> Path:
    """``n`` configs, the fastest last: exhaustive search finds it last, its reverse first."""
    cache = {str(i): {"x": i, "time": float(n - i), "compile_time": 900.0, "benchmark_time": 100.0,
                      "verification_time": 0} for i in range(n)}
    path.write_text(json.dumps({"device_name": "hand", "kernel_name": "k", "problem_size": 1,
                                "tune_params_keys": ["x"], "tune_params": {"x": list(range(n))}, "cache": cache}))
    return path


def summary(out: Path) -> list[dict]:
    with open(out / "summary.csv") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture
def beside_the_user(tmp_path, monkeypatch):
    """A directory holding the user's strategies as a module and a package, made the current one;
    the import path, imported modules and the strategy registry are restored afterwards."""
    (tmp_path / "tk_user_strategies.py").write_text(STRATEGIES)
    (tmp_path / "tk_user_pkg").mkdir()
    (tmp_path / "tk_user_pkg" / "__init__.py").write_text("")
    (tmp_path / "tk_user_pkg" / "sub.py").write_text("from tk_user_strategies import Reverse as Again\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(tunekit.strategy, "_REGISTRY", dict(tunekit.strategy._REGISTRY))
    yield tmp_path
    for name in ("tk_user_strategies", "tk_user_pkg", "tk_user_pkg.sub", "tk_entry_point_strategies"):
        sys.modules.pop(name, None)


def test_a_strategy_class_beside_the_user_and_an_entry_point_run_in_the_worker_processes(beside_the_user):
    # an installed plugin: a distribution on the import path with an entry point in tunekit's group
    site = beside_the_user / "site"
    (site / "tk_plugin-0.1.dist-info").mkdir(parents=True)
    (site / "tk_plugin-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: tk-plugin\nVersion: 0.1\n")
    (site / "tk_plugin-0.1.dist-info" / "entry_points.txt").write_text(
        f"[{tunekit.strategy.ENTRY_POINT_GROUP}]\ntk-reverse = tk_entry_point_strategies:Reverse\n")
    (site / "tk_entry_point_strategies.py").write_text(STRATEGIES)
    sys.path.append(str(site))
    space = space_file(beside_the_user / "space.json")
    specs = ["random", "tk_user_strategies:Reverse", "tk_user_pkg.sub:Again", "tk-reverse"]
    assert main(["compare", "--space", str(space), *(a for s in specs for a in ("--strategy", s)), "--seeds", "2",
                 "--budget", "3", "--jobs", "2", "--out", "out"]) == 0
    rows = summary(beside_the_user / "out")
    assert sorted({row["strategy"] for row in rows}) == sorted(specs)  # named as the user gave them
    for spec in specs[1:]:  # the user's class ran: the fastest config first
        assert [row["evals_to_1.02"] for row in rows if row["strategy"] == spec] == ["1", "1"]
    report = (beside_the_user / "out" / "report.md").read_text()
    assert "| tk_user_strategies:Reverse |" in report and "| tk_user_pkg.sub:Again |" in report


@pytest.mark.parametrize("spec, problem", [
    ("tk_no_such_module:Reverse", "no module named 'tk_no_such_module' on the import path"),
    ("tk_user_strategies:Missing", "has no attribute 'Missing'"),
    ("tk_user_strategies:NOT_A_STRATEGY", "not a subclass of tunekit.Strategy"),
    ("tk_user_strategies:NeedsArguments", "cannot be made without arguments"),
    ("annealing", "Unknown strategy 'annealing'"),
])
def test_a_bad_strategy_is_a_usage_error_naming_it_before_any_work(beside_the_user, capsys, spec, problem):
    with pytest.raises(SystemExit) as exited:
        main(["compare", "--space", str(space_file(beside_the_user / "space.json")), "--strategy", "random",
              "--strategy", spec, "--out", "out"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert f"'{spec}'" in error and problem in error
    assert not (beside_the_user / "out").exists()


def test_help_lists_the_registered_strategies_and_the_other_forms(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["compare", "--help"])
    assert exited.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert f"a registered name: {', '.join(tunekit.strategy.available())};" in shown
    assert "module:Class" in shown and "kt:NAME" in shown and "`" not in shown


def test_without_kernel_tuner_a_kt_strategy_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "kernel_tuner" else
                        find_spec(name, *a))
    with pytest.raises(SystemExit) as exited:
        main(["compare", "--space", str(space_file(tmp_path / "space.json")), "--strategy", "kt:random_sample",
              "--out", str(tmp_path / "out")])
    assert exited.value.code == 2
    assert 'pip install "tunekit[experiments]"' in capsys.readouterr().err


def test_kernel_tuners_strategy_runs_beside_tunekits_in_one_report(tmp_path, monkeypatch):
    pytest.importorskip("kernel_tuner")
    space = space_file(tmp_path / "space.json")
    held = hashlib.sha256(space.read_bytes()).hexdigest()
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # where Kernel Tuner's copies go
    monkeypatch.chdir(tmp_path)
    assert main(["compare", "--space", str(space), "--strategy", "random", "--strategy", "kt:random_sample",
                 "--seeds", "2", "--budget", "4", "--out", "out"]) == 0
    rows = summary(tmp_path / "out")
    kt = [row for row in rows if row["strategy"] == "kt:random_sample"]
    assert [row["seed"] for row in kt] == ["0", "1"] and {row["evaluations"] for row in kt} == {"4"}
    with open(tmp_path / "out" / "curves.csv") as handle:
        visited = [[row["time_ms"] for row in csv.DictReader(handle) if row["strategy"] == "kt:random_sample"
                    and row["seed"] == seed] for seed in "01"]
    assert visited[0] != visited[1]  # each seed its own sample
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| kt:random_sample |" in report and "| random |" in report
    assert hashlib.sha256(space.read_bytes()).hexdigest() == held  # the user's file untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "space.json", "tmp"]
    assert list((tmp_path / "tmp").iterdir()) == []  # Kernel Tuner's copies removed


def test_an_unknown_kernel_tuner_strategy_lists_kernel_tuners(tmp_path, capsys):
    pytest.importorskip("kernel_tuner")
    with pytest.raises(SystemExit) as exited:
        main(["compare", "--space", str(space_file(tmp_path / "space.json")), "--strategy", "kt:annealing",
              "--out", str(tmp_path / "out")])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "Kernel Tuner has no strategy 'annealing'" in error and "kt:genetic_algorithm" in error
