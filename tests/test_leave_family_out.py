"""The leave-family-out protocol (experiments/leave_family_out.py): each family is judged by the
design chosen on the other families, and by nothing else."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

from tunekit.metrics import Run, SpaceStats
from tunekit.recorded import read_space

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.fixture
def experiment(monkeypatch):
    """Loads the script ``experiments/NAME.py`` as a module, dropped from ``sys.modules`` after the test."""
    loaded = []

    def load(name: str):
        monkeypatch.syspath_prepend(str(EXPERIMENTS))
        loaded.append(name)
        return importlib.import_module(name)

    yield load
    for name in loaded:
        sys.modules.pop(name, None)


@pytest.fixture
def protocol(experiment):
    return experiment("leave_family_out")


def stats_of(tmp_path: Path, name: str, times: tuple[float, ...] = (16.0, 8.0, 4.0, 2.0, 1.0)) -> SpaceStats:
    """A 5-config space of these times (by default, an optimum of 1 ms: 16, 8, 4, 2, 1 ms)."""
    import json

    path = tmp_path / f"{name}.json"
    cache = {str(i): {"x": i, "time": t, "compile_time": 900.0, "benchmark_time": 100.0}
             for i, t in enumerate(times)}
    path.write_text(json.dumps({"device_name": "hand", "kernel_name": name, "problem_size": 1,
                                "tune_params_keys": ["x"], "tune_params": {"x": list(range(5))}, "cache": cache}))
    return SpaceStats.of(read_space(path, name=name))


def run(space: str, strategy: str, seed: int, times: list[float], budget: int = 20) -> Run:
    return Run(space, strategy, seed, budget, np.array(times), np.arange(1.0, len(times) + 1))


def write_manifest(tmp_path: Path, families: dict[str, str]) -> Path:
    """A corpus manifest listing each space (name -> family) of ``tmp_path``, without digests."""
    import json

    manifest = tmp_path / "corpus.json"
    manifest.write_text(json.dumps({"version": "t", "spaces": [
        {"name": name, "root": "shared", "file": f"{name}.json", "family": family, "digest": "-"}
        for name, family in families.items()]}))
    return manifest


def write_runs(path: Path, lines: list[tuple[str, str, int, list[float]]], budget: int) -> Path:
    """A runs file (``runs.jsonl.gz``) of (space, label, seed, times) lines, one second each."""
    import gzip
    import json

    with gzip.open(path, "wt") as sink:
        for space, label, seed, times in lines:
            sink.write(json.dumps({"space": space, "strategy": label, "seed": seed, "budget": budget,
                                   "times_ms": times, "seconds": [float(i + 1) for i in range(len(times))]}) + "\n")
    return path


def test_each_family_is_judged_by_the_design_chosen_on_the_others(protocol, tmp_path):
    """``near`` finds the optimum on family A's spaces, ``far`` on family B's; each family's
    held-out design must be the one that did well on the *other* family."""
    from learned_search import Table

    families = {"A": ["a1", "a2"], "B": ["b1"]}
    good, bad = [1.0], [16.0, 8.0]
    runs = [run(space, design, seed, good if (design == "near") == (space != "b1") else bad)
            for space in ("a1", "a2", "b1") for design in ("near", "far") for seed in range(3)]
    table = Table(runs, {name: stats_of(tmp_path, name) for name in ("a1", "a2", "b1")}, budget=20)
    choices = protocol.cross_validate(table, families, ["near", "far"])
    chosen = {family: choice.label for family, choice in choices.items()}
    assert chosen == {"A": "far", "B": "near"}  # never the design that did well on the family itself
    assert protocol.selection_score(table, "near", ["a1", "a2"]) == 0.0  # log(1 / 1) at every checkpoint
    found = protocol.figures(table, "near", ["a1", "a2", "b1"])
    assert (found["reached"], found["runs"]) == (6, 9)


def test_an_incumbent_is_kept_unless_the_lead_over_it_is_more_than_the_seeds_move(protocol, tmp_path):
    """``steady`` is 2x the optimum in every seed. ``clear`` finds the optimum in every seed: its
    lead is the same in each, and it is chosen. ``lucky`` finds it in 6 of 10 seeds and is 4x in the
    others: its mean is ahead (log 4 x 0.4 < log 2), but a seed's difference is +-log 2, and the
    bootstrap's interval includes 0: the incumbent is kept, and chosen without one."""
    from learned_search import Table

    spaces = ["s1", "s2"]
    runs = [run(space, "steady", seed, [2.0]) for space in spaces for seed in range(10)]
    runs += [run(space, "clear", seed, [1.0]) for space in spaces for seed in range(10)]
    runs += [run(space, "lucky", seed, [1.0] if seed < 6 else [4.0])
             for space in spaces for seed in range(10)]
    table = Table(runs, {name: stats_of(tmp_path, name) for name in spaces}, budget=20)

    clear = protocol.choose(table, ["steady", "clear"], spaces, incumbent="steady")
    assert clear.label == "clear" and clear.leader == "clear"
    assert clear.lead == pytest.approx((-np.log(2), -np.log(2), -np.log(2)))
    assert "more than the seeds move" in clear.note()

    lucky = protocol.choose(table, ["steady", "lucky"], spaces, incumbent="steady")
    difference, low, high = lucky.lead
    assert lucky.label == "steady" and lucky.leader == "lucky"
    assert difference == pytest.approx(0.4 * np.log(4) - np.log(2)) and low < difference < 0 < high
    assert "kept: lucky scored better" in lucky.note()
    assert protocol.choose(table, ["steady", "lucky"], spaces).label == "lucky"  # no incumbent: any lead wins
    assert protocol.choose(table, ["steady", "lucky"], spaces, incumbent="lucky") == protocol.Choice("lucky")
    # a design clearly ahead is chosen though a noisier one scores better still
    both = protocol.choose(table, ["steady", "lucky", "clear"], spaces, incumbent="steady")
    assert both == protocol.choose(table, ["steady", "clear"], spaces, incumbent="steady")

    one_seed = Table([r for r in runs if r.seed == 0], table.stats, budget=20)
    alone = protocol.choose(one_seed, ["steady", "clear"], spaces, incumbent="steady")
    assert alone.label == "steady" and alone.lead[1:] == (-np.inf, np.inf)  # one seed shows no lead


def test_an_incumbent_is_weighed_on_the_seeds_both_designs_ran(protocol, tmp_path):
    """``other`` ran seeds 0-9 alone, 1.5 times the optimum; the incumbent all 20, the optimum on
    seeds 0-9 and 4 times it on 10-19. Over all their runs ``other`` scores better; on the seeds
    both ran it is behind, and that is the difference the choice weighs and reports. A design
    that only ties the incumbent is no lead; one named that is not a design, or that lacks runs,
    is said not to have been weighed."""
    from learned_search import Table

    spaces = ["s1", "s2"]
    halves = [(space, seed, [1.0] if seed < 10 else [4.0]) for space in spaces for seed in range(20)]
    runs = [run(space, label, seed, times)
            for space, seed, times in halves for label in ("incumbent", "twin")]
    runs += [run(space, "other", seed, [1.5]) for space in spaces for seed in range(10)]
    table = Table(runs, {name: stats_of(tmp_path, name) for name in spaces}, budget=20)
    score = protocol.selection_score
    assert score(table, "other", spaces) < score(table, "incumbent", spaces)
    found = protocol.choose(table, ["other", "incumbent"], spaces, incumbent="incumbent")
    assert found.label == "incumbent" and found.lead == pytest.approx((np.log(1.5),) * 3)
    assert protocol.choose(table, ["twin", "incumbent"], spaces, incumbent="incumbent") == \
        protocol.Choice("incumbent")  # listed first and as good: no lead
    assert protocol.choose(table, ["twin", "other"], spaces, incumbent="incumbent").remark
    partial = Table([r for r in runs if not (r.strategy == "incumbent" and r.space == "s2")], table.stats, 20)
    unweighed = protocol.choose(partial, ["other", "incumbent"], spaces, incumbent="incumbent")
    assert unweighed.label == "other" and "lacks runs" in unweighed.note()


def test_the_report_keeps_the_incumbent_in_every_fold_and_on_the_whole_corpus(protocol, monkeypatch, tmp_path,
                                                                               capsys):
    """``--report-only --incumbent``: ``lucky``'s lead over ``steady`` (as in the test above) is
    within the seeds on every family's training spaces and on the whole corpus, so each keeps
    ``steady``, and says so; without ``--incumbent``, ``lucky`` wins everywhere."""
    import json

    families = {"a1": "A", "a2": "A", "b1": "B"}
    manifest = write_manifest(tmp_path, families)
    spaces = {}
    for name in families:
        stats_of(tmp_path, name)  # writes the space's file
        spaces[name] = read_space(tmp_path / f"{name}.json", name=name)
    monkeypatch.setattr(protocol, "_spaces", lambda manifest: spaces)
    out = tmp_path / "out"
    out.mkdir()
    lines = [(name, "steady", seed, [2.0]) for name in families for seed in range(10)]
    lines += [(name, "lucky", seed, [1.0] if seed < 6 else [4.0]) for name in families for seed in range(10)]
    write_runs(out / "runs.jsonl.gz", lines, budget=20)
    designs = tmp_path / "designs.json"
    designs.write_text(json.dumps({label: {"strategy": "default"} for label in ("steady", "lucky")}))
    command = ["leave_family_out.py", "--corpus", str(manifest), "--designs", str(designs), "--no-baselines",
               "--seeds", "10", "--budget", "20", "--report-only", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", [*command, "--incumbent", "steady"])
    protocol.main()
    text = (out / "report.md").read_text()
    assert text.count("chosen without it: steady; kept: lucky scored better") == 2
    assert "Chosen on the whole corpus (what ships): steady (kept: lucky scored better" in text
    monkeypatch.setattr(sys, "argv", command)
    protocol.main()
    text = (out / "report.md").read_text()
    assert text.count("chosen without it: lucky)") == 2 and "(what ships): lucky." in text
    capsys.readouterr()


def test_the_lead_over_the_incumbent_is_the_seed_bootstraps_selection_score_interval(experiment, protocol,
                                                                                     tmp_path):
    """The choice's bootstrap is ``seed_bootstrap``'s (the same draws of the seeds, the same
    selection score): what that script prints for two labels is what a fold weighs."""
    from learned_search import Table

    bootstrap = experiment("seed_bootstrap")
    spaces = ["a1", "a2", "a3"]
    rng = np.random.default_rng(5)
    runs = [run(space, label, seed, [8.0, float(rng.choice([1.0, 2.0, 4.0]))])
            for space in spaces for label in ("one", "other") for seed in range(6)]
    table = Table(runs, {name: stats_of(tmp_path, name) for name in spaces}, budget=20)
    difference, low, high = protocol.lead(table, "one", "other", spaces)
    one, other = (bootstrap.per_run(table, spaces, label, 6) for label in ("one", "other"))
    drawn = np.random.default_rng(0).integers(0, 6, size=(protocol.LEAD_REPLICATES, 6))
    replicated = bootstrap.figures(one, drawn)[:, -1] - bootstrap.figures(other, drawn)[:, -1]
    assert (low, high) == pytest.approx(tuple(np.percentile(replicated, [2.5, 97.5])))
    assert difference == pytest.approx(bootstrap.figures(one, np.arange(6)[None])[0, -1]
                                       - bootstrap.figures(other, np.arange(6)[None])[0, -1])
    assert low < high


def test_an_incumbent_that_is_not_a_design_is_refused(protocol, monkeypatch, tmp_path, capsys):
    designs = tmp_path / "designs.json"
    designs.write_text('{"default-a": {"strategy": "default", "options": {"gp_fraction": 0.0}}}')
    monkeypatch.setattr(sys, "argv", ["leave_family_out.py", "--designs", str(designs), "--no-baselines",
                                      "--incumbent", "default-b", "--out", str(tmp_path / "out")])
    with pytest.raises(SystemExit):
        protocol.main()
    assert "--incumbent 'default-b'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_seed_bootstrap_takes_every_space_s_runs_of_the_seeds_it_draws(experiment, protocol, tmp_path):
    """``seed_bootstrap``'s figures over all seeds are the protocol's (runs within 2 %, the
    selection score); a replicate of one seed drawn 4 times takes that seed's runs on every space
    of both labels."""
    from learned_search import Table

    bootstrap = experiment("seed_bootstrap")
    spaces = ["a1", "a2"]
    # "sure" finds the optimum (1 ms) in every run; "lucky" on seeds 0 and 1 alone (else 2 ms)
    runs = [run(space, "sure", seed, [4.0, 1.0]) for space in spaces for seed in range(4)]
    runs += [run(space, "lucky", seed, [4.0, 1.0 if seed < 2 else 2.0])
             for space in spaces for seed in range(4)]
    table = Table(runs, {name: stats_of(tmp_path, name) for name in spaces}, budget=20)
    sure, lucky = (bootstrap.per_run(table, spaces, label, 4) for label in ("sure", "lucky"))
    everything = np.arange(4)[None]
    within, *_, selection = bootstrap.figures(lucky, everything)[0]
    assert within == 50.0
    assert selection == pytest.approx(protocol.selection_score(table, "lucky", spaces))
    drawn = np.array([[0, 0, 0, 0], [3, 3, 3, 3], [0, 1, 2, 3]])
    assert (bootstrap.figures(lucky, drawn)[:, 0] == [100.0, 0.0, 50.0]).all()
    differences = bootstrap.figures(lucky, drawn) - bootstrap.figures(sure, drawn)
    assert (differences[:, 0] == [0.0, -100.0, -50.0]).all()  # paired: the same seeds of both labels
    with pytest.raises(ValueError, match=r"sure on a1: no runs of seeds \[4\]"):
        bootstrap.per_run(table, spaces, "sure", 5)
    with pytest.raises(ValueError, match=r"absent on a1: no runs of seeds \[0, 1, 2, 3\]"):
        bootstrap.per_run(table, spaces, "absent", 4)
    # fewer seeds than were run: the first ones ("lucky" on seeds 0 and 1 finds the optimum every time)
    assert bootstrap.figures(bootstrap.per_run(table, spaces, "lucky", 2), np.arange(2)[None])[0][0] == 100.0
    # a round on later seeds (--first-seed): seeds 2 and 3, where "lucky" never finds it
    later = bootstrap.per_run(table, spaces, "lucky", 2, first=2)
    assert bootstrap.figures(later, np.arange(2)[None])[0][0] == 0.0
    with pytest.raises(ValueError, match=r"no runs of seeds \[4\] .*expected 3-4"):
        bootstrap.per_run(table, spaces, "sure", 2, first=3)


def test_the_seed_bootstrap_by_family_gives_the_report_s_family_figures(experiment, protocol, tmp_path):
    """``--by-family``: over all seeds, a family's score and runs within 2 % are the report's
    (``figures`` over the family's spaces; a space without a score, all of whose configs take the
    same time, left out of the mean); the rows give each family's figures apart, and intervals
    paired by seed (a seed drawn 4 times: no difference where both labels found the optimum)."""
    from learned_search import Table

    bootstrap = experiment("seed_bootstrap")
    spaces = ["a1", "a2", "flat", "b1"]
    families = {"A": [0, 1, 2], "B": [3]}
    stats = {name: stats_of(tmp_path, name) for name in ("a1", "a2", "b1")}
    stats["flat"] = stats_of(tmp_path, "flat", (1.0,) * 5)
    runs = [run(space, "sure", seed, [4.0, 1.0]) for space in spaces for seed in range(4)]
    # "lucky" finds the optimum on seeds 0 and 1 of family A, on seed 0 alone of family B
    runs += [run(space, "lucky", seed, [4.0, 1.0 if seed < (1 if space == "b1" else 2) else 2.0])
             for space in spaces for seed in range(4)]
    table = Table(runs, stats, budget=20)
    assert np.isnan(table.score("flat", "lucky"))
    sure, lucky = (bootstrap.per_run(table, spaces, label, 4) for label in ("sure", "lucky"))
    everything = np.arange(4)[None]
    for rows in families.values():
        names = [spaces[row] for row in rows]
        for label, figures in (("lucky", lucky), ("sure", sure)):
            score, within = bootstrap.family_figures(figures, rows, everything)[0]
            expected = protocol.figures(table, label, names)
            assert score == pytest.approx(expected["score"])
            assert within == pytest.approx(100 * expected["within"])
    drawn = np.array([[0, 0, 0, 0]] * 20 + [[3, 3, 3, 3]] * 20)  # the interval's ends: these two replicates
    rows = bootstrap.by_family(lucky, sure, families, 4, drawn)
    seed_3 = Table([r for r in runs if r.seed == 3], stats, budget=20)
    lucky_b, sure_b = (protocol.figures(table, label, ["b1"])["score"] for label in ("lucky", "sure"))
    missed = seed_3.score("b1", "lucky") - seed_3.score("b1", "sure")
    assert rows[1] == (f"| B | 1 | {lucky_b:.3f} | {sure_b:.3f} | {lucky_b - sure_b:+.3f} ({missed:+.3f} to +0.000) "
                       "| -75.0 (-100.0 to +0.0) |")
    assert rows[0].startswith("| A | 3 | ") and rows[0].endswith("| -50.0 (-100.0 to +0.0) |")


def test_the_seed_bootstrap_command_by_family_leaves_out_a_family_one_label_lacks(experiment, monkeypatch, tmp_path,
                                                                                 capsys):
    """``seed_bootstrap.py --by-family``: a row per family whose every space has both labels' runs
    (family B's one space lacks ``sure``'s: no row), each family's own spaces in it; and a clear
    error where no family has, or where a label has no runs at all."""
    bootstrap = experiment("seed_bootstrap")
    families = {"a1": "A", "a2": "A", "b1": "B"}
    manifest = write_manifest(tmp_path, families)
    for name in families:
        stats_of(tmp_path, name)  # writes the space's file
    spaces = {name: read_space(tmp_path / f"{name}.json", name=name) for name in families}
    monkeypatch.setattr(bootstrap, "_spaces", lambda manifest: spaces)
    # "lucky" misses on a2 alone, at seeds 2 and 3; "sure" never ran on b1, "part" on a1 alone
    runs = write_runs(tmp_path / "runs.jsonl.gz", [
        (name, label, seed, times) for name in families for seed in range(4)
        for label, times in (("lucky", [4.0, 2.0 if name == "a2" and seed >= 2 else 1.0]), ("sure", [4.0, 1.0]),
                             ("part", [4.0, 1.0]))
        if (name, label) != ("b1", "sure") and (label != "part" or name == "a1")], budget=20)
    command = ["seed_bootstrap.py", "--runs", str(runs), "--corpus", str(manifest), "--seeds", "4",
               "--budget", "20", "--replicates", "50", "--by-family"]
    monkeypatch.setattr(sys, "argv", command + ["--label", "lucky", "--against", "sure"])
    bootstrap.main()
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "family" not in line]
    assert len(rows) == 1 and rows[0].startswith("| A | 2 | ")
    assert rows[0].endswith(" | -25.0 (-50.0 to +0.0) |")  # 2 of a2's 4 runs missed: 6 of 8 within 2 %
    for against, message in (("part", "no family of"), ("absent", "holds no runs of 'absent'")):
        monkeypatch.setattr(sys, "argv", command + ["--label", "lucky", "--against", against])
        with pytest.raises(SystemExit):
            bootstrap.main()
        assert message in capsys.readouterr().err


def test_the_seed_bootstrap_of_one_label_gives_its_figures_on_the_spaces_larger_than_the_budget(
        experiment, monkeypatch, tmp_path, capsys):
    """Without ``--against``: the label's own figures beside the targets; with
    ``--larger-than-budget``, over the spaces of more configs than the budget alone (``big``, 5
    configs, budget 4, where 2 of 4 runs miss; not ``small``, 3 configs, where none does).
    ``--by-family`` needs ``--against``, and takes whole families; where no space is larger than
    the budget, a clear error."""
    bootstrap = experiment("seed_bootstrap")
    manifest = write_manifest(tmp_path, {"big": "A", "small": "A"})
    stats_of(tmp_path, "big")
    stats_of(tmp_path, "small", (4.0, 2.0, 1.0))
    spaces = {name: read_space(tmp_path / f"{name}.json", name=name) for name in ("big", "small")}
    assert (len(spaces["big"]), len(spaces["small"])) == (5, 3)
    monkeypatch.setattr(bootstrap, "_spaces", lambda manifest: spaces)
    runs = write_runs(tmp_path / "runs.jsonl.gz", [
        (name, "d", seed, [4.0, 2.0 if name == "big" and seed >= 2 else 1.0]) for name in spaces for seed in range(4)],
        budget=4)
    command = ["seed_bootstrap.py", "--runs", str(runs), "--corpus", str(manifest), "--seeds", "4",
               "--budget", "4", "--replicates", "50", "--label", "d"]
    found = {}
    for extra in ([], ["--larger-than-budget"]):
        monkeypatch.setattr(sys, "argv", command + extra)
        bootstrap.main()
        found[bool(extra)] = capsys.readouterr().out.splitlines()
    assert found[False][0].startswith("d: 2 spaces") and found[True][0].startswith("d: 1 spaces")
    assert found[False][1].startswith("runs within 2 % (%): 75.0000") and found[False][1].endswith("target >= 92")
    assert found[True][1].startswith("runs within 2 % (%): 50.0000 (95 % interval ")
    for extra, message in ((["--by-family"], "--by-family compares two labels"),
                           (["--by-family", "--against", "d", "--larger-than-budget"], "every space of a family"),
                           (["--larger-than-budget", "--budget", "5"], "no space of")):
        monkeypatch.setattr(sys, "argv", command + extra)
        with pytest.raises(SystemExit):
            bootstrap.main()
        assert message in capsys.readouterr().err


def test_the_turn_schedule_candidate_draws_its_own_random_configs_where_default_draws_none(experiment):
    """``turn_schedule.OwnTurnsDefault``, the candidate of ``results/turn-schedule/``: asked one
    config at a time with neighbours always open, its random configs get their tenth (turns 10,
    20, 30 and 40 of the 40 after the start) where ``DefaultSearch`` gives each such turn to the
    local proposals; a local and a random share over every turn refused, as it was."""
    from tunekit.strategies import DefaultSearch
    from tunekit.testing.strategies import drive, toy_space

    schedule = experiment("turn_schedule")
    drawn = {}
    for made in (schedule.OwnTurnsDefault, DefaultSearch):
        counts = drawn.setdefault(made.__name__, [])

        class Counting(made):
            def _neighbours_of_best(self, count):
                return self._take(np.flatnonzero(~self._tried)[:count])  # always open

            def _random_untried(self, count):
                counts.append(count)
                return super()._random_untried(count)

        assert len(drive(Counting(initial=5, min_evals=10**6), toy_space(), evals=45, seed=1, batch=1)) == 45
    assert {name: sum(counts) for name, counts in drawn.items()} == {"OwnTurnsDefault": 4, "DefaultSearch": 0}
    with pytest.raises(ValueError, match="together more than every turn"):
        drive(schedule.OwnTurnsDefault(local_fraction=0.6, random_fraction=0.5), toy_space(), evals=2)


def test_family_replays_that_family_s_spaces_alone_and_only_without_a_report(protocol, monkeypatch, tmp_path, capsys):
    """``--family A``: the tunings of family A's spaces reach the replay, no other; without
    ``--replay-only`` (a report needs every space) or with a family the corpus lacks, refused."""
    import json

    manifest = write_manifest(tmp_path, {"a1": "A", "a2": "A", "b1": "B"})
    monkeypatch.setattr(protocol, "_spaces", lambda manifest: {"a1": [0] * 3, "a2": [0] * 4, "b1": [0] * 5})
    monkeypatch.setattr(protocol, "same_kernel_elsewhere", lambda spaces: {name: [] for name in spaces})
    replayed = []
    monkeypatch.setattr(protocol, "replay_missing", lambda tasks, *rest: replayed.extend(tasks))
    protocol.replay_all(manifest, {"d": ("default", "{}")}, tmp_path / "out", 2, 5, 1, None, families=["A"])
    assert sorted({task[1] for task in replayed}) == ["a1", "a2"] and len(replayed) == 4
    replayed.clear()
    protocol.replay_all(manifest, {"d": ("default", "{}")}, tmp_path / "out", 2, 5, 1, None)
    assert sorted({task[1] for task in replayed}) == ["a1", "a2", "b1"]
    replayed.clear()

    designs = tmp_path / "designs.json"
    designs.write_text(json.dumps({"d": {"strategy": "default"}}))
    common = ["leave_family_out.py", "--corpus", str(manifest), "--designs", str(designs), "--out", str(tmp_path / "o")]
    for extra, message in ((["--family", "A"], "a report needs every space's runs; add --replay-only"),
                           (["--family", "C", "--replay-only"], "--family 'C': not a family of")):
        monkeypatch.setattr(sys, "argv", common + extra)
        with pytest.raises(SystemExit):
            protocol.main()
        assert message in capsys.readouterr().err
    assert not replayed
    passed = []
    monkeypatch.setattr(protocol, "replay_all", lambda *args, **options: passed.append(args[-1]))
    monkeypatch.setattr(sys, "argv", common + ["--family", "A", "--replay-only"])
    protocol.main()
    assert passed == [["A"]]  # the command hands its families to the replay


def test_no_baselines_replays_the_designs_alone(protocol, monkeypatch, tmp_path, capsys):
    """``--no-baselines``: only the designs reach the replay (without it, the default baselines
    do too); with ``--baseline`` as well, refused."""
    import json

    designs = tmp_path / "designs.json"
    designs.write_text(json.dumps({"d": {"strategy": "default"}}))
    labels = []
    monkeypatch.setattr(protocol, "replay_all", lambda manifest, contenders, *rest, **options: labels.append(sorted(contenders)))
    common = ["leave_family_out.py", "--designs", str(designs), "--out", str(tmp_path / "o"), "--replay-only"]
    for extra in (["--no-baselines"], []):
        monkeypatch.setattr(sys, "argv", common + extra)
        protocol.main()
    assert labels == [["d"], sorted(["d", *protocol.BASELINES])]
    monkeypatch.setattr(sys, "argv", common + ["--no-baselines", "--baseline", "rf"])
    with pytest.raises(SystemExit):
        protocol.main()
    assert "--no-baselines with --baseline" in capsys.readouterr().err


def test_a_budget_under_the_first_checkpoint_is_its_own_checkpoint(protocol, tmp_path):
    from learned_search import Table

    table = Table([run("a1", "near", 0, [8.0, 1.0], budget=5)], {"a1": stats_of(tmp_path, "a1")}, budget=5)
    assert protocol.checkpoints(table) == [5]
    assert protocol.selection_score(table, "near", ["a1"]) == 0.0


def test_a_design_over_the_time_limit_is_not_chosen_unless_every_design_is(protocol):
    limit = protocol.MAX_MS_PER_CONFIG
    timed = {"slow": limit + 1, "quick": limit / 2}
    assert protocol.affordable(timed, ["slow", "quick", "untimed"]) == ["quick", "untimed"]
    assert protocol.affordable({"slow": limit + 1, "slower": limit + 5}, ["slow", "slower"]) == ["slow", "slower"]
    assert protocol.affordable({"exact": limit}, ["exact"]) == ["exact"]  # within: at most the limit


def test_the_transfer_table_counts_slower_spaces_over_every_kernel_with_other_shapes(protocol, tmp_path):
    """Issue 31's item 4: within 10 evaluations to 5 % on every space of a kernel of 3+ shapes,
    never slower with the store on any space of a kernel recorded at other shapes. A kernel at 3
    shapes, one at 2 and one alone; runs that reach the optimum at a chosen evaluation."""
    import json

    from learned_search import Table

    from tunekit.recorded import read_space

    def space(name: str, kernel: str, size: int):
        path = tmp_path / f"{name}.json"
        cache = {str(i): {"x": i, "time": t} for i, t in enumerate((16.0, 8.0, 4.0, 2.0, 1.0))}
        path.write_text(json.dumps({"device_name": "hand", "kernel_name": kernel, "problem_size": size,
                                    "tune_params_keys": ["x"], "tune_params": {"x": list(range(5))},
                                    "cache": cache}))
        return read_space(path, name=name)

    spaces = {"s1": space("s1", "k3", 1), "s2": space("s2", "k3", 2), "s3": space("s3", "k3", 3),
              "t1": space("t1", "k2", 1), "t2": space("t2", "k2", 2), "u": space("u", "alone", 1)}
    reached = {"s1": (12, 1), "s2": (3, 11), "s3": (5, 5), "t1": (2, 4), "t2": (8, 1), "u": (4, 4)}
    runs = [run(name, label, 0, [16.0] * (at - 1) + [1.0])
            for name, (alone, stored) in reached.items() for label, at in (("d", alone), ("d + store", stored))]
    table = Table(runs, {name: SpaceStats.of(s) for name, s in spaces.items()}, budget=20)
    lines = protocol.transfer_rows(table, spaces)
    assert lines[2] == ("2 of the 3 spaces of kernels of 3+ shapes within 10 evaluations with the store; slower "
                        "with it than without on 2 of all 5 spaces of kernels recorded at other shapes.")
    assert "| t1 | 2 | 2.0 | 4.0 |" in lines and not any(line.startswith("| u |") for line in lines)


@pytest.fixture
def transfer(experiment):
    return experiment("transfer_cv")


def test_a_transfer_candidate_may_change_only_what_acts_with_the_store(transfer):
    """A candidate that changed an option acting without the store too would not be the base
    design there, and "slower than without the store" would compare two designs."""
    base = {"strategy": "default", "options": {"local_radius": 2, "warm_spread": 0}}
    made = transfer.candidate_options(base, {"spread3": {"warm_spread": 3}})
    assert made == {"spread3": ("default", {"local_radius": 2, "warm_spread": 3})}
    made = transfer.candidate_options(base, {"robust": {"warm_robust": True}})
    assert made == {"robust": ("default", {"local_radius": 2, "warm_spread": 0, "warm_robust": True})}
    with pytest.raises(ValueError, match="'wider' changes local_radius: a candidate may change only options of default"):
        transfer.candidate_options(base, {"wider": {"warm_spread": 3, "local_radius": 3}})


def test_the_transfer_score_counts_slowed_spaces_before_the_mean_gain(transfer):
    """A candidate that never slows a space is chosen over one with a larger mean gain that slows
    one, and the count of 3+ shape spaces over 10 evaluations comes before the mean."""
    names, shapes = ["a", "b", "c"], {"a": 4, "b": 4, "c": 2}
    evals = {("a", transfer.WITHOUT): 20.0, ("b", transfer.WITHOUT): 4.0, ("c", transfer.WITHOUT): 8.0,
             ("a", "bold"): 1.0, ("b", "bold"): 6.0, ("c", "bold"): 1.0,
             ("a", "careful"): 12.0, ("b", "careful"): 4.0, ("c", "careful"): 8.0,
             ("a", "near"): 10.0, ("b", "near"): 4.0, ("c", "near"): 8.0}
    scores = {label: transfer.transfer_score(evals, label, names, shapes) for label in ("bold", "careful", "near")}
    assert scores["bold"][0] == 1 and scores["careful"][0] == 0
    assert scores["careful"][1] == 1 and scores["near"][1] == 0
    assert min(scores, key=scores.get) == "near"


def test_only_names_a_label_to_replay_or_is_refused(protocol, monkeypatch, tmp_path, capsys):
    """``--only`` with a label the command would not replay (a typo, or a transfer label without
    its ``--transfer``) stops before anything is replayed or written, naming the label."""
    designs = tmp_path / "designs.json"
    designs.write_text('{"default-a": {"strategy": "default", "options": {"gp_fraction": 0.0}}}')
    for only in ("defualt-a", "default-a + store"):
        monkeypatch.setattr(sys, "argv", ["leave_family_out.py", "--designs", str(designs), "--baseline", "random",
                                          "--only", only, "--out", str(tmp_path / "out")])
        with pytest.raises(SystemExit):
            protocol.main()
        assert f"--only {only!r}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_time_alone_times_the_designs_in_turns_seed_by_seed(protocol, monkeypatch, tmp_path):
    """A slow spell of a shared machine must fall on every design, not on whichever was being timed:
    after one untimed tuning that warms the process, each seed times every tunekit label once
    before the next seed begins, on the largest space; Kernel Tuner's strategies are not timed;
    each label's times keep their seeds' order; a design's batch is timed as it asks."""
    import json

    calls = []

    def fake_tuning(manifest, space, label, strategy, options, seed, budget, history=(), batch=1):
        calls.append((space, label, seed, batch))
        return {"times_ms": [1.0] * 10, "cpu_seconds": 0.01 * (seed + 1)}

    monkeypatch.setattr(protocol, "_tuning", fake_tuning)
    monkeypatch.setattr(protocol, "_spaces", lambda manifest: {"small": [0] * 3, "large": [0] * 9})
    labels = {"a": ("default", "{}"), "b": ("random", "{}"), "kt": ("kt:genetic_algorithm", "{}")}
    protocol.time_alone(Path("corpus.json"), labels, tmp_path, seeds=3, batch_of={"a": 32})  # "a" has 32 in flight
    assert calls == [("large", "a", 3, 32)] + [("large", label, seed, 32 if label == "a" else 1)
                                               for seed in range(3) for label in ("a", "b")]
    timing = json.loads((tmp_path / "timing.json").read_text())
    assert timing["space"] == "large"
    assert timing["seconds_per_config"] == {label: pytest.approx([0.001, 0.002, 0.003]) for label in ("a", "b")}


def test_every_design_names_the_options_that_changed(protocol):
    """Designs replay as they were run whatever DefaultSearch's defaults become: each names
    ``warm_spread``, which changed after the first rounds ran (0 in theirs: the option did not
    exist), those of later rounds every option whose default changed before them, and every
    design of ``DefaultSearch`` names ``alignment``, off in every file before the one that judged
    it (``designs-alignment.json``, whose ``default-alignment`` is ``alignment_all``'s) and on in
    every file after it; and every design of ``DefaultSearch`` or a subclass names ``gp_fraction``
    (0 in every design but the GP share's candidates), whose default may change, and
    ``stalled_gp_fraction`` (None but in the stalled share's candidates: 0.5 by default since
    ``designs-gp-stalled-c256.json``'s round), every design with a GP share names
    ``gp_candidates``, every design names ``warm_interleaved``, off in every file before its
    transfer cross-validation (``transfer-designs-interleaved.json``; on by default since),
    ``local_order``, ``"forest"`` in the candidate of ``designs-local-order.json`` and the designs
    built on it (``designs-local-best.json``, ``designs-turns.json``; the default since that
    round), and ``warm_robust``, off in every file but ``designs-batch.json``, which replays what
    ships in batches (on by default since the transfer screens' ``worst3``), and which names
    ``believer`` (on in its candidate alone; it acts only with configs pending), and
    ``designs-inflight.json``, what ships with configs in flight (and its two labels alone,
    ``designs-inflight6.json`` and ``-inflight18.json``; ``-inflight18-warm-cap.json`` and
    ``-inflight18-gp-pending.json`` add a candidate to it; ``designs-size-products.json`` and
    ``-size-products-varying.json`` hold what ships with the same options named, asked one config at
    a time, as ``designs-initial.json`` does beside two sizes of its start and ``designs-gp-refit.json``
    beside two growths before the GP's kernel is fitted again, which ``-inflight18-gp-refit.json``
    puts beside what ships with 18 in flight). The probes of ``designs-earned.json``,
    ``-early.json`` and ``-gp-early-earned.json`` are what ships with one option more. What ships
    is the last rounds' choices."""
    import json

    from tunekit.strategies import DefaultSearch
    from tunekit.strategy import make_strategy

    steps = {"refit_trees": 8, "refit_trees_after": 50, "random_fraction": 0.1, "local_radius": 2, "warm_spread": 3}
    later = {"designs-steps.json": {**steps, "alignment": False},
             "designs-gp-share.json": {**steps, "alignment": True},
             "designs-gp-checked.json": {**steps, "alignment": True},
             "designs-gp-known-failures.json": {**steps, "alignment": True},
             "designs-gp-candidates.json": {**steps, "alignment": True},
             "designs-gp-stalled.json": {**steps, "alignment": True},
             "designs-gp-stalled-c512.json": {**steps, "alignment": True},
             "designs-gp-stalled-c256.json": {**steps, "alignment": True},
             "designs-random-start.json": {**steps, "alignment": True},
             "designs-local-order.json": {**steps, "alignment": True},
             "designs-local-best.json": {**steps, "alignment": True, "local_order": "forest"},
             "designs-turns.json": {**steps, "alignment": True, "local_order": "forest"},
             "designs-batch.json": {**steps, "alignment": True, "local_order": "forest", "warm_interleaved": True,
                                    "warm_robust": True},
             "designs-inflight.json": {**steps, "alignment": True, "local_order": "forest", "warm_interleaved": True,
                                       "warm_robust": True, "believer": True},
             **{f"designs-{probe}.json": {**steps, "alignment": True, "local_order": "forest"}
                for probe in ("earned", "early", "gp-early-earned")}}
    # what ships with the believer named (it acts only with configs pending; the last file asks one at a time)
    believer_named = ("designs-inflight.json", "designs-inflight6.json", "designs-inflight18.json",
                      "designs-inflight18-warm-cap.json", "designs-inflight18-gp-pending.json",
                      "designs-size-products.json", "designs-size-products-varying.json",
                      "designs-initial.json", "designs-gp-refit.json", "designs-inflight18-gp-refit.json",
                      "designs-prior-target.json", "designs-inflight18-prior-target.json",
                      "designs-latin-start.json", "designs-inflight18-latin-start.json", "designs-kappa.json",
                      "designs-hamming.json", "designs-hamming-stalled.json")
    later.update({name: later["designs-inflight.json"] for name in believer_named})
    shares = {"default-gp15": 0.15, "default-gp15-checked": 0.15, "default-gp15-known-failures": 0.15,
              "default-gp30-c512": 0.3, "default-gp15-stalled50": 0.15, "default-gp15-stalled50-c512": 0.15,
              "default-gp15-stalled50-c256": 0.15, "default-gp15-c512": 0.15,
              "default-stalled-c512-random-start": 0.15, "default-gp15-stalled50-c512-local-forest": 0.15,
              "default-gp15-stalled50-c512-local-forest-best2": 0.15,
              "default-gp15-stalled50-c512-local-forest-best3": 0.15,
              "default-gp15-stalled50-c512-local-forest-turns": 0.15,
              **{f"default-gp15-stalled50-c512-local-forest-batch{size}": 0.15 for size in (1, 4, 32)},
              **{f"default-gp15-stalled50-c512-local-forest-believer-batch{size}": 0.15 for size in (4, 32)},
              "default-gp15-stalled50-c512-local-forest-believer-inflight18": 0.15,
              "default-gp15-stalled50-c512-local-forest-believer-inflight6": 0.15,
              "default-gp15-stalled50-c512-local-forest-believer-inflight18-gp-pending": 0.15,
              **{f"default-gp15-stalled50-c512-local-forest-believer-inflight18-{variant}": 0.15
                 for variant in ("refit10", "refit25", "prior-slowdown", "latin-start",
                                 "latin-maximin-start")},
              **{f"default-gp15-stalled50-c512-local-forest-believer{variant}": 0.15
                 for variant in ("", "-size-products", "-varying-size-products", "-initial6", "-initial15",
                                 "-refit10", "-refit25", "-prior-slowdown", "-latin-start",
                                 "-latin-maximin-start", "-kappa05", "-kappa2", "-hamming",
                                 "-hamming-stalled")},
              **{f"default-gp15-stalled50-c512-local-forest-believer-inflight18-warm-cap{cap}": 0.15
                 for cap in ("3-until20", "6-until30")},
              **{f"default-gp15-stalled50-c512-local-forest-{probe}{share}": 0.15
                 for probe in ("earned", "early") for share in (50, 100)}}
    before_interleaved = {"designs.json", "designs-v2.json", "designs-v3.json", "designs-v4.json", "designs-v5.json",
                          "designs-shipped.json", "designs-steps.json", "designs-alignment.json",
                          "designs-gp-share.json", "designs-gp-checked.json", "designs-gp-known-failures.json",
                          "designs-gp-candidates.json", "designs-gp-stalled.json", "designs-gp-stalled-c512.json",
                          "designs-gp-stalled-c256.json", "designs-random-start.json"}
    judged = {"default": {**steps, "alignment": False}, "default-sizes": {**steps, "alignment": True},
              "default-alignment": steps}
    for path in sorted((EXPERIMENTS / "corpus").glob("designs*.json")):
        for label, design in json.loads(path.read_text()).items():
            if path.name == "designs-alignment.json":
                pinned = judged[label]
            else:
                pinned = later.get(path.name, {"warm_spread": 0, "alignment": False})
            assert {name: design["options"].get(name) for name in pinned} == pinned, (path.name, label)
            strategy = make_strategy(design["strategy"], **design["options"])
            if isinstance(strategy, DefaultSearch):  # its subclasses of experiments/ too
                assert "gp_fraction" in design["options"], (path.name, label)
                assert strategy.gp_fraction == shares.get(label, 0.0), (path.name, label)
                assert "stalled_gp_fraction" in design["options"], (path.name, label)
                assert "warm_interleaved" in design["options"], (path.name, label)
                # off in every round before the batches' (what ships since the transfer screens)
                assert design["options"].get("warm_robust") is (path.name in ("designs-batch.json", *believer_named)), \
                    (path.name, label)
                # "forest" in the local-order round's candidate and what follows it (the default since that round)
                assert design["options"].get("local_order") == ("forest" if "-local-forest" in label
                                                                else "random"), (path.name, label)
                if path.name == "designs-batch.json":  # the one round that asked in batches
                    assert design["options"]["believer"] is ("-believer-" in label), (path.name, label)
                if path.name in before_interleaved:
                    assert design["options"]["warm_interleaved"] is False, (path.name, label)
                assert strategy.stalled_gp_fraction == (0.5 if "stalled" in label else None), (path.name, label)
                if strategy.gp_fraction > 0 or strategy.stalled_gp_fraction is not None:
                    scored = next((size for size in (512, 256) if f"c{size}" in label), 2048)  # 2048: the default then
                    assert design["options"].get("gp_candidates") == scored, (path.name, label)
    # what ships is what the last round chose on the whole corpus, with the store's use the last
    # transfer round chose (worst3: the warm variants' subclass with its worst-slowdown order,
    # which is DefaultSearch's own)
    chosen = json.loads((EXPERIMENTS / "corpus" / "designs-local-order.json").read_text())[
        "default-gp15-stalled50-c512-local-forest"]
    with_store = dict(json.loads((EXPERIMENTS / "corpus" / "transfer-designs-worst.json").read_text())["worst3"])
    assert (with_store.pop("strategy"), with_store.pop("robust_by")) == ("warm_variants:WarmVariantsDefault", "worst")
    shipped = DefaultSearch()
    batched = json.loads((EXPERIMENTS / "corpus" / "designs-batch.json").read_text())[
        "default-gp15-stalled50-c512-local-forest-believer-batch32"]["options"]
    options = {**chosen["options"], **with_store, "believer": batched["believer"]}
    assert {name: getattr(shipped, name) for name in options} == options


def test_heldout_figures_from_compare_outputs(experiment, tmp_path):
    """Within 2 % is judged on the run's last best; the checkpoints take the last best of a run that
    stopped early; scores are means over spaces of means over seeds; evaluations to 5 % are medians
    with unreached seeds infinite; a run given twice, a curve out of order and strategies covering
    other seeds are refused."""
    figures = experiment("heldout_figures")
    header = "space,strategy,seed,evaluation,best_over_optimum\n"
    summary = "space,strategy,seed,budget,score,score_seconds,evals_to_1.05\n"

    def output(name: str, curves: dict, scores: dict):
        out = tmp_path / name
        out.mkdir()
        (out / "curves.csv").write_text(header + "".join(
            f"{space},{strategy},{seed},{n},{ratio}\n" for (space, strategy, seed), curve in curves.items()
            for n, ratio in enumerate(curve, 1)))
        (out / "summary.csv").write_text(summary + "".join(
            f"{space},{strategy},{seed},200,{score},{score / 2},{evals}\n"
            for (space, strategy, seed), (score, evals) in scores.items()))
        return out

    early = [1.5] * 29 + [1.01] * 11  # stopped after 40 evaluations
    alone = output("alone", {("d/k1-a", "default", 0): early, ("d/k1-a", "random", 0): [1.2] * 200},
                   {("d/k1-a", "default", 0): (0.5, 30), ("d/k1-a", "random", 0): (0.0, "")})
    more = output("more", {("d/k2-x", "rf", 0): [1.0] * 200}, {("d/k2-x", "rf", 0): (0.8, 1)})
    runs = figures.read_runs([alone])
    rows = figures.strategy_rows(runs)
    assert rows[0].startswith("| strategy | runs within 2 % | after 20 | after 50 | after 200 | score")
    assert rows[2] == "| default | 100.0 % (1 of 1) | 1.500 | 1.010 | 1.010 | 0.500 | 0.250 |"
    assert rows[3] == "| random | 0.0 % (0 of 1) | 1.200 | 1.200 | 1.200 | 0.000 | 0.000 |"
    with pytest.raises(ValueError, match="do not cover the same spaces"):
        figures.read_runs([alone, more])  # rf ran on another space
    with pytest.raises(ValueError, match="repeats runs"):
        figures.read_runs([alone, alone])
    shorter = output("shorter", {("d/k1-a", "rf", 0): [1.0] * 40}, {("d/k1-a", "rf", 0): (0.8, 1)})
    (shorter / "summary.csv").write_text((shorter / "summary.csv").read_text().replace(",200,", ",40,"))
    with pytest.raises(ValueError, match="different budgets"):
        figures.read_runs([alone, shorter])
    # a budget of 40: no column claims a figure after 50 or 200 evaluations
    assert "| after 20 | score" in figures.strategy_rows(figures.read_runs([shorter]))[0]
    disordered = output("disordered", {("d/k1-a", "rf", 0): [1.0]}, {})
    (disordered / "curves.csv").write_text(header + "d/k1-a,rf,0,2,1.0\n")
    with pytest.raises(ValueError, match="out of order"):
        figures.read_runs([disordered])
    assert figures.family("dir/k2-x") == "k2"
    stored = output("stored", {("d/k1-a", "default", s): [1.0] for s in range(3)},
                    {("d/k1-a", "default", 0): (1, 1), ("d/k1-a", "default", 1): (1, 2), ("d/k1-a", "default", 2): (1, 3)})
    both = output("both", {("d/k1-a", "default", s): [1.0] for s in range(3)},
                  {("d/k1-a", "default", 0): (1, 30), ("d/k1-a", "default", 1): (1, ""),
                   ("d/k1-a", "default", 2): (1, 10)})
    assert figures.evals_to_5(both) == {"d/k1-a": 30.0} and figures.evals_to_5(stored) == {"d/k1-a": 2.0}


def test_corpus_versions_extend_each_other_and_their_recordings_are_intact(experiment, tmp_path):
    """v2 holds every space of v1 as v1 froze it (the same name, file, family and digest), plus the
    held-out families; each H200 recording the corpus keeps measures what its manifest froze; and a
    version is never written over."""
    import json

    corpus = experiment("corpus")
    v1, v2 = (corpus.entries(EXPERIMENTS / "corpus" / f"v{n}.json") for n in (1, 2))
    fields = [(e.name, e.root, e.file, e.family, e.digest) for e in v1]
    assert set(fields) <= {(e.name, e.root, e.file, e.family, e.digest) for e in v2}
    added = [e for e in v2 if (e.name, e.root, e.file, e.family, e.digest) not in set(fields)]
    assert {e.root for e in added} == {"heldout"} and len({e.family for e in added}) == 4
    for entry in v2:
        if entry.root in ("corpus", "heldout"):
            assert corpus.read_space(entry.path(EXPERIMENTS / "corpus" / "v2.json")).digest == entry.digest, entry.name
    manifest = tmp_path / "v9.json"
    manifest.write_text(json.dumps({"version": "v9", "spaces": []}))
    with pytest.raises(SystemExit, match="never rewritten"):
        corpus.freeze(manifest)
    assert json.loads(manifest.read_text()) == {"version": "v9", "spaces": []}



def test_sibling_ranks_orders_the_configs_that_ran_at_every_sibling_by_mean_and_worst_slowdown(experiment):
    """``sibling_ranks``' blend (``warm_variants.blend``) and worst-slowdown orders: only configs
    that ran at every sibling, by the sum of the log of their time over that sibling's fastest (a
    config second at both siblings comes before one first at one and slow at the other), or by
    the largest such ratio; and the rank of the first config within reach in an order."""
    from tunekit.strategies.default import worst_slowdown

    ranks = experiment("sibling_ranks")
    # the orders robust_by="mean" and DefaultSearch's warm_robust take
    assert (ranks.blend, ranks.worst_slowdown) == (experiment("warm_variants").blend, worst_slowdown)
    one = {"a": 1.0, "b": 1.1, "c": 5.0, "d": 1.05}
    other = {"a": 9.0, "b": 1.1, "c": 1.0}  # d did not run there: out of the blend
    assert ranks.blend([one, other]) == ["b", "c", "a"]
    assert ranks.worst_slowdown([one, other]) == ["b", "c", "a"]  # worst: 1.1, 5 and 9 times the fastest
    # a: 1 and 2.5 times the fastest, b: 1.6 at both: b's mean slowdown is larger, its worst smaller
    first, second = {"a": 1.0, "b": 1.6, "c": 5.0}, {"a": 2.5, "b": 1.6, "c": 1.0}
    assert ranks.blend([first, second]) == ["a", "b", "c"]  # sums of logs 0.92, 0.94, 1.61
    assert ranks.worst_slowdown([first, second]) == ["b", "a", "c"]  # 1.6, 2.5, 5
    assert ranks.first_within(ranks.blend([one, other]), {"c", "a"}) == 2
    assert ranks.first_within(["b"], {"x"}) is None
    assert ranks.worst_slowdown([one, {}]) == ranks.blend([one, {}]) == []  # a sibling that measured nothing


@pytest.fixture
def variants(experiment):
    return experiment("warm_variants")


def test_robust_by_mean_ranks_warm_robusts_turn_by_the_mean_slowdown(variants):
    """``WarmVariantsDefault(robust_by="mean")`` ranks the configs measured at every alike key by
    their geometric-mean slowdown (``blend``), by default by their worst as ``DefaultSearch`` does
    (whose turn in the warm start ``tests/test_strategies.py`` tests). Config 0 is fastest at two
    keys and 4.2x slower at the third; config 1 is 1.05x at two and 1.25x at the third (mean
    smallest); config 2 is 1.2x, 1.2x and fastest at the third (worst smallest)."""
    from tunekit.strategies import DefaultSearch
    from tunekit.testing.strategies import drive, toy_space

    measured = [{0: 1.0, 1: 1.05, 2: 1.2}, {0: 1.0, 1: 1.05, 2: 1.2}, {0: 5.0, 1: 1.5, 2: 1.2}]
    assert variants.WarmVariantsDefault(robust_by="mean")._robust_ranking(measured) == [1, 2, 0]
    assert variants.WarmVariantsDefault()._robust_ranking(measured) == [2, 1, 0]
    assert DefaultSearch()._robust_ranking(measured) == [2, 1, 0]
    with pytest.raises(ValueError, match="robust_by"):
        drive(variants.WarmVariantsDefault(robust_by="median"), toy_space(), evals=1)


def test_warm_agreeing_follows_the_stored_key_whose_times_order_this_tunings_alike(variants):
    """``warm_agreeing=2``: the store holds every config at M=2 (near), in the toy's order reversed,
    and at M=64 (far), in the toy's order. After the warm start and the spread (6 evaluations,
    timed here as the toy times them), the next 2 configs are M=64's fastest untried ones: its
    times order this tuning's configs alike, M=2's in reverse. With M=2 alone in the store, they
    are M=2's fastest untried (the toy's slowest)."""
    from tunekit.config import config_json
    from tunekit.keys import TuningKey
    from tunekit.testing.strategies import drive, toy_space, toy_time, toy_trial
    from tunekit.trial import Status, Timing, Trial

    ok = [c for c in toy_space().configs() if toy_trial(c).ok]
    near, far = (TuningKey.from_json(f'{{"args": {{"M": {m}}}, "dtypes": []}}') for m in (2, 64))
    reversed_times = tuple(Trial(c, Status.OK, Timing(1 / toy_time(c), 1 / toy_time(c), 1 / toy_time(c)), key=near)
                           for c in ok)
    toy_times = tuple(Trial(c, Status.OK, toy_trial(c).timing, key=far) for c in ok)
    for history, order in ((reversed_times + toy_times, sorted(ok, key=toy_time)),
                           (reversed_times, sorted(ok, key=toy_time, reverse=True))):
        found = drive(variants.WarmVariantsDefault(min_evals=10**6, warm_agreeing=2), toy_space(), evals=8, batch=1,
                      history=history)
        tried = {config_json(c) for c in found[:6]}
        assert [config_json(c) for c in found[6:]] == [config_json(c) for c in order if config_json(c) not in tried][:2]
    with pytest.raises(ValueError, match="warm_agreeing"):
        drive(variants.WarmVariantsDefault(warm_agreeing=-1), toy_space(), evals=1, history=toy_times)


def test_warm_variants_without_the_store_is_default(variants):
    """What ``transfer_cv`` relies on for a candidate naming ``WarmVariantsDefault``: without the
    store, with its options on, it proposes what ``default`` does; with the store (two alike keys,
    so that ``warm_robust``'s turn acts) and its own options at their defaults, too. Invalid
    options are refused by name."""
    from tunekit.config import config_json
    from tunekit.keys import TuningKey
    from tunekit.strategies import DefaultSearch
    from tunekit.testing.strategies import drive, toy_space, toy_trial
    from tunekit.trial import Status, Timing, Trial

    ok = [c for c in toy_space().configs() if toy_trial(c).ok]
    other, third = (TuningKey.from_json(f'{{"args": {{"M": {m}}}, "dtypes": []}}') for m in (64, 16))
    stored = tuple(Trial(c, toy_trial(c).status, toy_trial(c).timing, key=other) for c in ok)
    # a second alike key, whose times order the configs otherwise, so that warm_robust's turn acts
    stored += tuple(Trial(c, Status.OK, Timing(t, t, t), key=third) for t, c in enumerate(reversed(ok[:40]), 1))
    for seed in range(2):
        for history, options in (((), {"robust_by": "mean", "warm_agreeing": 4, "warm_local": 2}), (stored, {})):
            made = drive(variants.WarmVariantsDefault(**options), toy_space(), evals=30, seed=seed, history=history)
            shipped = drive(DefaultSearch(), toy_space(), evals=30, seed=seed, history=history)
            assert [config_json(c) for c in made] == [config_json(c) for c in shipped]
    # the turn acts with this store: without it the first configs differ
    first = [[config_json(c) for c in drive(DefaultSearch(warm_robust=robust), toy_space(), evals=6, history=stored)]
             for robust in (True, False)]
    assert first[0] != first[1]
    with pytest.raises(ValueError, match="warm_agreeing"):
        drive(variants.WarmVariantsDefault(warm_agreeing=1.5), toy_space(), evals=1)


def test_warm_local_takes_a_step_from_the_best_after_the_first_warm_config(variants):
    """``warm_local=1, warm_spread=2``, asked one config at a time as replays ask: with the store,
    the second config measured is the untried neighbour (one parameter one step away) of the
    first, the fastest so far, that the prior ranks best. The store's times are the toy's, save
    (16, 16, 4), made second fastest: without the local turn the warm start's second config is
    that one, far from the first. Asked four at a time, nothing is measured at the local turn,
    which then takes the warm start's next, as without it. A negative or non-integer count is
    refused."""
    from tunekit.config import config_json, config_to_dict
    from tunekit.keys import TuningKey
    from tunekit.testing.strategies import drive, toy_space, toy_time, toy_trial
    from tunekit.trial import Status, Timing, Trial

    space = toy_space()
    ok = [c for c in space.configs() if toy_trial(c).ok]
    far = next(c for c in ok if [config_to_dict(c)[p] for p in ("BLOCK_M", "BLOCK_N", "num_warps")] == [16, 16, 4])
    other = TuningKey.from_json('{"args": {"M": 64}, "dtypes": []}')
    stored = tuple(Trial(c, Status.OK, Timing(*[1.0001 if c is far else toy_time(c)] * 3), key=other) for c in ok)
    for seed in range(2):
        plain = drive(variants.WarmVariantsDefault(warm_spread=0, min_evals=10**6), space, evals=2, seed=seed,
                      batch=1, history=stored)
        around = {config_json(c) for c in space.neighbours(plain[0])}
        assert config_json(plain[1]) == config_json(far) and config_json(far) not in around
        search = variants.WarmVariantsDefault(warm_local=1, warm_spread=2, min_evals=10**6)
        found = drive(search, space, evals=6, seed=seed, batch=1, history=stored)
        assert config_json(found[0]) == config_json(plain[0])
        open_ = [i for i in search._prior_ranking if config_json(space.configs()[i]) in around]
        assert config_json(found[1]) == config_json(space.configs()[open_[0]])
        assert len({config_json(c) for c in found}) == 6
        batched = drive(variants.WarmVariantsDefault(warm_local=1, warm_spread=2, min_evals=10**6), space, evals=6,
                        seed=seed, batch=4, history=stored)
        assert config_json(batched[1]) == config_json(far)
    with pytest.raises(ValueError, match="warm_local"):
        drive(variants.WarmVariantsDefault(warm_local=-1), space, evals=1, history=stored)
    with pytest.raises(ValueError, match="warm_local"):
        drive(variants.WarmVariantsDefault(warm_local=True), space, evals=1, history=stored)


def test_warm_in_flight_keeps_few_configs_pending_until_enough_are_told(variants):
    """``warm_in_flight=3, warm_in_flight_until=12`` with the store and 8 in flight: after every ask
    before 12 trials are told, at most 3 configs are pending, those the tuning said are late
    (``overdue``) not counted; later up to 8 are. Without the store
    it changes nothing (``test_warm_variants_without_the_store_is_default``'s check, here with 8 in
    flight). Invalid counts are refused by name."""
    from tunekit.config import config_json
    from tunekit.keys import TuningKey
    from tunekit.strategies import DefaultSearch
    from tunekit.testing.strategies import drive, toy_space, toy_trial
    from tunekit.trial import Trial

    ok = [c for c in toy_space().configs() if toy_trial(c).ok]
    other = TuningKey.from_json('{"args": {"M": 64}, "dtypes": []}')
    stored = tuple(Trial(c, toy_trial(c).status, toy_trial(c).timing, key=other) for c in ok)

    class Watched(variants.WarmVariantsDefault):
        def ask(self, n):
            picks = super().ask(n)
            self.pending_after.append((len(self._here), int(self._pending().sum())))
            return picks

    for history, early_limit in ((stored, 3), ((), 8)):
        search = Watched(warm_in_flight=3, warm_in_flight_until=12)
        search.pending_after = []
        drive(search, toy_space(), evals=40, batch=8, history=history)
        early = [pending for told, pending in search.pending_after if told < 12]
        late = [pending for told, pending in search.pending_after if told >= 12]
        assert early and max(early) == early_limit
        assert max(late) == 8
    # configs the tuning says are late hold no slot: asked again, it proposes as many more
    from tunekit.budget import Budget
    from tunekit.strategy import SearchContext
    from tunekit.testing.strategies import TOY_KEY

    search = variants.WarmVariantsDefault(warm_in_flight=3, warm_in_flight_until=12)
    search.start(SearchContext(toy_space(), Budget(evals=40), TOY_KEY, 0, stored))
    first = search.ask(8)
    assert len(first) == 3 and search.ask(8) == []
    search.overdue()
    assert len(search.ask(8)) == 3
    for seed in range(2):
        made = drive(variants.WarmVariantsDefault(warm_in_flight=3), toy_space(), evals=30, seed=seed, batch=8)
        shipped = drive(DefaultSearch(), toy_space(), evals=30, seed=seed, batch=8)
        assert [config_json(c) for c in made] == [config_json(c) for c in shipped]
    with pytest.raises(ValueError, match="warm_in_flight_until"):
        drive(variants.WarmVariantsDefault(warm_in_flight=2, warm_in_flight_until=-1), toy_space(), evals=1)
    with pytest.raises(ValueError, match="warm_in_flight"):
        drive(variants.WarmVariantsDefault(warm_in_flight=1.5), toy_space(), evals=1)


def test_a_transfer_candidate_may_name_a_subclass_with_its_own_store_only_options(transfer):
    """``warm_variants:WarmVariantsDefault`` is a ``DefaultSearch`` whose ``warm_agreeing`` acts
    only with the store; a candidate naming it may change that, and a strategy that is not a
    subclass of the base's is refused."""
    base = {"strategy": "default", "options": {"local_radius": 2}}
    made = transfer.candidate_options(base, {"agreeing": {"strategy": "warm_variants:WarmVariantsDefault",
                                                          "warm_agreeing": 2}})
    assert made == {"agreeing": ("warm_variants:WarmVariantsDefault", {"local_radius": 2, "warm_agreeing": 2})}
    with pytest.raises(ValueError, match="'plain' changes warm_agreeing: a candidate may change only options of default"):
        transfer.candidate_options(base, {"plain": {"warm_agreeing": 2}})
    with pytest.raises(ValueError, match="not a subclass of the base's DefaultSearch"):
        transfer.candidate_options(base, {"other": {"strategy": "lfbo"}})


def test_measured_store_holds_only_what_the_other_shapes_tunings_measured(experiment, monkeypatch, tmp_path):
    """``measured_store.kernel_tunings``: each shape of a kernel tuned by the base within the store
    budget, then each shape tuned by each candidate with the store holding, of both other shapes,
    exactly the trials of the configs their tunings measured at that seed (a failure too), at
    their keys; the lines are transfer_cv's; and an OUT of another store is refused."""
    import gzip
    import json

    from tunekit.compare import replay_search
    from tunekit.config import config_json
    from tunekit.recorded import read_space

    measured = experiment("measured_store")
    spaces = {}
    for size in (1, 2, 3):
        cache = {str(x): {"x": x, "time": "RuntimeFailedConfig" if x % 5 == 2 else 1.0 + (x * size) % 7,
                          "compile_time": 10.0, "benchmark_time": 1.0, "verification_time": 0} for x in range(20)}
        path = tmp_path / f"k{size}.json"
        path.write_text(json.dumps({"device_name": "hand", "kernel_name": "k", "problem_size": size,
                                    "tune_params_keys": ["x"], "tune_params": {"x": list(range(20))}, "cache": cache}))
        spaces[f"k{size}"] = read_space(path)
    monkeypatch.setattr(measured, "_spaces", lambda manifest: spaces)
    given = []
    names = {id(space): name for name, space in spaces.items()}

    def recording(recorded, strategy, seed, evals, seconds=None, stored=()):
        given.append((names[id(recorded)], evals, list(stored)))
        return replay_search(recorded, strategy, seed, evals, seconds, stored)

    monkeypatch.setattr(measured, "replay_search", recording)
    seed = 3
    lines = measured.kernel_tunings("m", ("k1", "k2", "k3"), ("random", "{}"), {"again": ("random", "{}")}, seed,
                                    budget=8, store_budget=5)
    runs = [line for line in lines if line["strategy"] != measured.STORED]
    assert [(line["space"], line["strategy"]) for line in runs] == [
        (name, label) for name in ("k1", "k2", "k3") for label in ("without the store", "again")]
    assert {line["store"] for line in lines} == {"measured within 5 evaluations"}
    assert all(len(line["times_ms"]) == 8 for line in runs)
    tried = {name: {config_json(step.trial.config) for step in replay_search(spaces[name], "random", seed, 5).steps}
             for name in spaces}
    assert all(len(configs) == 5 for configs in tried.values())
    by_candidate = [(name, stored) for name, evals, stored in given if evals == 8 and stored]
    assert [name for name, _ in by_candidate] == ["k1", "k2", "k3"]
    for name, stored in by_candidate:
        others = [other for other in spaces if other != name]
        assert sorted((t.key.json, config_json(t.config)) for t in stored) == sorted(
            (spaces[other].key().json, config) for other in others for config in tried[other])
        failed = sorted(c for other in others for c in tried[other] if json.loads(c)["x"] % 5 == 2)
        assert failed and sorted(config_json(t.config) for t in stored if not t.ok) == failed  # failures stored too
    out = tmp_path / "out"  # a transfer_cv.py runs file (whole spaces in the store) is not this one's
    out.mkdir()
    with gzip.open(out / "runs.jsonl.gz", "wt") as runs_file:
        runs_file.write(json.dumps({"space": "k1", "strategy": "without the store", "seed": 0, "budget": 8,
                                    "times_ms": [1.0]}) + "\n")
    with pytest.raises(ValueError, match="another store"):
        measured.replay_all(tmp_path / "m.json", {"strategy": "random", "options": {}}, {}, out, 1, 8, 5, 1)


def test_a_design_may_ask_in_batches(protocol, monkeypatch, tmp_path, capsys):
    """A design's ``"batch"`` reaches its replays (``batches``, then each of ``replay_all``'s
    tasks, with the store too); the baselines and the designs without one ask for one config at a
    time. A batch that is not an int of at least 1, or one
    given to a Kernel Tuner strategy, is refused before any replay, naming the design."""
    import json

    assert protocol.batches({"one": {"strategy": "default"}, "many": {"strategy": "default", "batch": 8}}) == {"many": 8}
    # replay_all gives each task its label's batch, with the store too
    manifest = write_manifest(tmp_path, {"a1": "A", "a2": "A"})
    monkeypatch.setattr(protocol, "_spaces", lambda manifest: {"a1": [0] * 3, "a2": [0] * 4})
    monkeypatch.setattr(protocol, "same_kernel_elsewhere", lambda spaces: {"a1": ["a2"], "a2": ["a1"]})
    tasks = []
    monkeypatch.setattr(protocol, "replay_missing", lambda found, *rest: tasks.extend(found))
    protocol.replay_all(manifest, {"d": ("default", "{}"), "e": ("default", "{}")}, tmp_path / "out", 1, 5, 1, None,
                        transfer=["d"], batch_of={"d": 8})
    assert sorted((task[2], task[-1]) for task in tasks) == [("d", 8)] * 2 + [("d + store", 8)] * 2 + [("e", 1)] * 2
    replayed = []
    monkeypatch.setattr(protocol, "replay_all", lambda *args, **kwargs: replayed.append(kwargs["batch_of"]))
    designs = tmp_path / "designs.json"
    designs.write_text(json.dumps({"d": {"strategy": "default", "batch": 8}, "e": {"strategy": "default"}}))
    monkeypatch.setattr(sys, "argv", ["leave_family_out.py", "--designs", str(designs), "--out", str(tmp_path / "o"),
                                      "--replay-only"])
    protocol.main()
    assert replayed == [{"d": 8}]
    for bad in ({"d": {"strategy": "default", "batch": 0}}, {"d": {"strategy": "default", "batch": "8"}},
                {"d": {"strategy": "kt:random_sample", "batch": 2}}):
        designs.write_text(json.dumps(bad))
        with pytest.raises(SystemExit):
            protocol.main()
        assert "design 'd'" in capsys.readouterr().err
    assert len(replayed) == 1


def test_a_batch_replay_is_the_tuning_asked_in_batches(protocol, tmp_path):
    """``_tuning(batch=B)`` replays the design with B configs in flight: on a recorded gemv
    space, where ``default`` refits between asks, 32 in flight measure the same space-filling
    start (its first 10 configs either way) and then other configs than one at a time."""
    import json

    from tunekit.compare import replay

    manifest = tmp_path / "corpus.json"
    manifest.write_text(json.dumps({"version": "t", "spaces": [
        {"name": "gemv", "root": "heldout", "file": "gemv-lm_head_128k.json.gz", "family": "triton-gemv",
         "digest": "bf1d40d0db1ef52ad8edb17031852f7892449224d451a86619155463632eaaa3"}]}))
    one = protocol._tuning(str(manifest), "gemv", "d", "default", "{}", 0, 40)
    batched = protocol._tuning(str(manifest), "gemv", "d", "default", "{}", 0, 40, batch=32)
    recorded = protocol._spaces(str(manifest))["gemv"]
    assert batched["times_ms"] == replay(recorded, "default", 0, 40, batch=32).times_ms.tolist()
    assert one["times_ms"] == replay(recorded, "default", 0, 40).times_ms.tolist()
    assert batched["times_ms"][:10] == one["times_ms"][:10]
    assert batched["times_ms"] != one["times_ms"]
    assert (batched["batch"], one["batch"]) == (32, 1)  # each runs line says how it asked


def test_transfer_from_protocol_relabels_the_protocols_runs_as_transfer_cv_reads_them(experiment, monkeypatch,
                                                                                      tmp_path, capsys):
    """The base's runs without the store become ``transfer_cv``'s "without the store", each
    candidate's ``"+ store"`` runs its own label (each run keeps its own times); seeds at or past
    ``--seeds``, other budgets and other labels are left out; a label that lacks some of the others'
    tunings (a partial replay) is named before anything is written."""
    import gzip
    import json

    module = experiment("transfer_from_protocol")
    runs = tmp_path / "runs.jsonl.gz"
    strategies = ("base", "base + store", "cap + store", "other + store", "cap")
    rows = [{"space": space, "strategy": strategy, "seed": seed, "budget": budget,
             "times_ms": [float(strategies.index(strategy))], "seconds": [1.0]}
            for space in ("s", "t") for strategy in strategies for seed in (0, 1, 2) for budget in (200, 60)]
    with gzip.open(runs, "wt") as file:
        file.writelines(json.dumps(row) + "\n" for row in rows)
    called = []
    monkeypatch.setattr(module, "report", lambda *args: called.append(args) or "the report\n")
    argv = ["transfer_from_protocol.py", "--runs", str(runs), "--base", "base", "--candidate", "base",
            "--candidate", "cap", "--seeds", "2", "--out", str(tmp_path / "out")]
    monkeypatch.setattr(sys, "argv", argv)
    module.main()
    with gzip.open(tmp_path / "out" / "runs.jsonl.gz", "rt") as file:
        kept = sorted((row["strategy"], row["space"], row["seed"], row["budget"], row["times_ms"][0])
                      for row in map(json.loads, file))
    # the times say which protocol label each run came from: 0 base, 1 base + store, 2 cap + store
    assert kept == sorted((label, space, seed, 200, float(origin)) for label, origin in
                          ((module.WITHOUT, 0), ("base", 1), ("cap", 2)) for space in ("s", "t") for seed in (0, 1))
    assert called[0][2:] == (["base", "cap"], 200, 2, "base")
    assert (tmp_path / "out" / "report.md").read_text() == "the report\n" and "the report" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", [*argv[:-2], "--candidate", "absent", "--out", str(tmp_path / "out2")])
    with pytest.raises(SystemExit, match="'absent \\+ store' lacks 4 of the 4 tunings"):
        module.main()
    partial = [row for row in rows if not (row["strategy"] == "cap + store" and row["space"] == "t" and row["seed"] == 1)]
    with gzip.open(runs, "wt") as file:
        file.writelines(json.dumps(row) + "\n" for row in partial)
    monkeypatch.setattr(sys, "argv", [*argv[:-1], str(tmp_path / "out3")])
    with pytest.raises(SystemExit, match="'cap \\+ store' lacks 1 of the 4 tunings"):
        module.main()
    assert not (tmp_path / "out2").exists() and not (tmp_path / "out3").exists()


def test_size_products_add_the_log2_of_each_pair_of_sizes_product_to_every_forest(experiment):
    """``feature_variants``: on a Space of three sizes (one a single value) and a compile option,
    ``SizeProductsForest`` adds the three pairs' log2 products (a missing value: -1) and the
    ``Varying`` form the one pair of the two sizes that vary; ``SizeProductsDefault``'s forests,
    the refreshed ones too, are of that class, and its tuning runs."""
    from tunekit.perfmodels import RandomForest
    from tunekit.space import Space
    from tunekit.testing.strategies import drive, toy_space

    variants = experiment("feature_variants")
    space = Space(BLOCK_M=[16, 32, 64], BLOCK_N=[48, 64], ONE=[8], num_warps=[2, 4])
    encoded = space.encode([{"BLOCK_M": 32, "BLOCK_N": 48, "ONE": 8, "num_warps": 4},
                            {"BLOCK_M": 16, "BLOCK_N": 64, "num_warps": 2}])
    base = RandomForest(space).features_of_encoded(encoded, None)
    added = variants.SizeProductsForest(space).features_of_encoded(encoded, None)[:, base.shape[1]:]
    log2 = np.log2
    assert added[0].tolist() == pytest.approx([log2(32 * 48), log2(32 * 8), log2(48 * 8)])
    assert added[1].tolist() == pytest.approx([log2(16 * 64), -1.0, -1.0])  # ONE missing
    varying = variants.VaryingSizeProductsForest(space).features_of_encoded(encoded, None)[:, base.shape[1]:]
    assert varying[:, 0].tolist() == pytest.approx([log2(32 * 48), log2(16 * 64)]) and varying.shape == (2, 1)

    fitted = []

    class Watched(variants.SizeProductsDefault):
        def _fit(self):
            super()._fit()
            fitted.append(type(self._model))

    found = drive(Watched(initial=5, min_evals=10**6, refit_trees_after=8), toy_space(), evals=14, batch=1)
    assert len(found) == 14 and len(fitted) >= 5
    assert set(fitted) == {variants.SizeProductsForest}


def test_early_curve_gives_each_label_s_best_after_n_evaluations_over_the_optimum_or_another_label(
        experiment, monkeypatch, tmp_path, capsys):
    """``early_curve.py`` on a space of optimum 1 ms and slowest 16 ms: ``slow`` measures 4, 2, 2 ms
    at seed 0 and 16, 4, 4 at seed 1, ``fast`` 1 ms at once, ``failing`` fails first, then 2 ms.
    After 1, 2, 3 evaluations ``slow`` is sqrt(4 x 16), sqrt(2 x 4), sqrt(2 x 4) times the optimum,
    and as many times ``fast`` with ``--over fast``, its score the report's and below fast's; a
    failure counts as the slowest config, as in the report. ``--first 1`` keeps ``slow``'s first
    run in the file (seed 0) and every run of ``fast`` (whose seed 1 comes first); a label with no
    runs is refused."""
    early_curve = experiment("early_curve")
    manifest = write_manifest(tmp_path, {"a1": "A"})
    assert stats_of(tmp_path, "a1").optimum == 1.0  # writes the space's file
    space = read_space(tmp_path / "a1.json", name="a1")
    monkeypatch.setattr(early_curve, "_spaces", lambda manifest: {"a1": space})
    lines = [("a1", "fast", 1, [1.0, 1.0, 1.0]), ("a1", "fast", 0, [1.0, 1.0, 1.0]),
             ("a1", "slow", 0, [4.0, 2.0, 2.0]), ("a1", "slow", 1, [16.0, 4.0, 4.0]),
             ("a1", "failing", 0, [None, 2.0, 2.0])]
    runs = write_runs(tmp_path / "runs.jsonl.gz", lines, budget=3)
    command = ["early_curve.py", "--runs", str(runs), "--corpus", str(manifest), "--after", "1", "2", "3"]

    def rows(*options: str) -> dict[str, list[str]]:
        monkeypatch.setattr(sys, "argv", command + list(options))
        early_curve.main()
        return {line.split()[1] if line.startswith("a1") else "every " + line.split()[3]: line.split()
                for line in capsys.readouterr().out.splitlines()[1:]}

    plain = rows()
    assert plain["slow"][2:6] == ["2", "8.000", "2.828", "2.828"]
    assert plain["fast"][2:6] == ["2", "1.000", "1.000", "1.000"]
    assert plain["failing"][2:6] == ["1", "16.000", "2.000", "2.000"]
    # the score is the report's, within the runs' budget (a run is not scored past its end)
    slow_runs = [run("a1", "slow", seed, times, budget=3) for seed, times in ((0, [4.0, 2.0, 2.0]),
                                                                            (1, [16.0, 4.0, 4.0]))]
    table = experiment("learned_search").Table(slow_runs, {"a1": SpaceStats.of(space)}, 3)
    assert plain["slow"][6] == f"{table.score('a1', 'slow'):+.3f}"
    over = rows("--over", "fast")
    assert "fast" not in over and over["slow"][2:6] == ["2", "8.000", "2.828", "2.828"]
    assert float(over["slow"][6]) < 0  # slow's score is below fast's
    assert over["every slow"][4:8] == ["2", "8.000", "2.828", "2.828"]
    first = rows("--over", "fast", "--first", "1")
    assert first["slow"][2:6] == ["1", "4.000", "2.000", "2.000"]  # seed 0, beside fast's seed 0
    monkeypatch.setattr(sys, "argv", command + ["--label", "absent"])
    with pytest.raises(SystemExit, match="holds no runs of 'absent'"):
        early_curve.main()
