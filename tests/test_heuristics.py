"""Rules for keys never tuned: fitted from a store's winners, written as a module that needs no
tunekit, and used by the decorator as ``fallback=``; and the round trip of shipped configs."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import warnings

import pytest
import torch

import tunekit
from tunekit.cli import main
from tunekit.config import config_to_dict
from tunekit.config_rules import KeyTimes, choose_rule, fit_rule, key_times_from_store, leave_one_out, write_module
from tunekit.keys import TuningKey
from tunekit.kernels import vector_add
from tunekit.store import ResultsStore

SMALL = json.dumps({"BLOCK": 64, "num_warps": 1}, sort_keys=True)
LARGE = json.dumps({"BLOCK": 1024, "num_warps": 8}, sort_keys=True)
MIDDLE = json.dumps({"BLOCK": 256, "num_warps": 4}, sort_keys=True)


def synthetic(sizes=(16, 32, 64, 256, 1024, 4096), dtype="torch.float16") -> list[KeyTimes]:
    """Keys where BLOCK 64 wins up to M=64 and BLOCK 1024 above (3x slower on the wrong side), and
    BLOCK 256 is 1.3x everywhere."""
    data = []
    for m in sizes:
        for n in (1024, 8192):
            small = m <= 64
            data.append(KeyTimes(TuningKey.from_dict({"args": {"M": m, "N": n}, "dtypes": [dtype]}), SMALL if small else LARGE,
                                 {SMALL: 1.0 if small else 3.0, LARGE: 3.0 if small else 1.0, MIDDLE: 1.3}))
    return data


def load(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_tree_finds_the_size_that_decides_and_beats_one_config_and_the_nearest_key(tmp_path):
    data = synthetic()
    rule, assessments = choose_rule(data)
    by_kind = {a.kind: a for a in assessments}
    assert rule.kind == "tree-1"  # the simplest rule with no slowdown left
    assert by_kind["tree-1"].geomean == pytest.approx(1.0) and by_kind["tree-1"].worst == pytest.approx(1.0)
    assert by_kind["constant"].geomean == pytest.approx(1.3)  # BLOCK 256: never 3x, never best
    assert by_kind["nearest"].worst == pytest.approx(3.0)  # M=256's nearest tie is M=64, on the wrong side
    module = load(write_module(rule, tmp_path / "rule.py", kernel="k", provenance="synthetic",
                               assessments=assessments))
    for m, expected in ((8, SMALL), (64, SMALL), (100, SMALL), (200, LARGE), (1 << 20, LARGE)):  # split at 2**7
        config = module.config_for(M=m, N=2048, dtypes=["torch.float16"])
        assert json.dumps(config, sort_keys=True) == expected == json.dumps(
            rule.config_for(TuningKey.from_dict({"args": {"M": m, "N": 2048}, "dtypes": ["torch.float16"]})), sort_keys=True)


def test_leave_one_out_scores_failures_and_configs_never_measured_at_the_left_out_key():
    data = synthetic(sizes=(16, 32, 1024, 4096))
    data[0] = KeyTimes(data[0].key, SMALL, {SMALL: 1.0, LARGE: None})  # LARGE failed at M=16; MIDDLE not measured
    slowdowns = leave_one_out(data, "constant")
    assert slowdowns[0] is None  # the others' single best (MIDDLE) was never measured at M=16
    assert leave_one_out([data[0]] + synthetic(sizes=(4096,)) * 2, "constant")[0] == float("inf")


def test_dtypes_split_a_tree_and_the_nearest_rule_prefers_keys_of_the_same_dtypes(tmp_path):
    data = [KeyTimes(k.key, SMALL, {SMALL: 1.0, LARGE: 2.0}) for k in synthetic(dtype="torch.float16")]
    data += [KeyTimes(k.key, LARGE, {SMALL: 2.0, LARGE: 1.0}) for k in synthetic(dtype="torch.float32")]
    rule, _ = choose_rule(data)
    assert rule.tree is not None
    for kind in ("tree-1", "nearest"):
        module = load(write_module(fit_rule(data, kind), tmp_path / f"{kind.replace('-', '_')}.py", kernel="k",
                                   provenance="synthetic"))
        assert module.config_for(M=48, N=1024, dtypes=["torch.float32"]) == json.loads(LARGE)
        assert module.config_for(M=48, N=1024, dtypes=["torch.float16"]) == json.loads(SMALL)


def test_the_module_is_never_written_over_an_existing_file(tmp_path):
    existing = tmp_path / "rule.py"
    existing.write_text("mine = 1\n")
    with pytest.raises(FileExistsError, match="does not overwrite"):
        write_module(fit_rule(synthetic(), "constant"), existing, kernel="k", provenance="synthetic")
    assert existing.read_text() == "mine = 1\n"


def test_heuristics_names_what_the_store_lacks(tmp_path, usage_error):
    store = tmp_path / "s.db"
    ResultsStore(store).close()
    assert "holds no winner of kernel 'add_kernel'" in usage_error(
        ["store", "heuristics", str(tmp_path / "rule.py"), "--kernel", "add_kernel", "--store", str(store)])
    assert not (tmp_path / "rule.py").exists()


# -- the round trip of issue 15: tune, export, import, serve offline, heuristics without tunekit ------

TUNED = (1024, 2048, 4096, 16384, 65536)
UNSEEN = (512, 3000, 10000, 1 << 20)


def make(store, **options):
    return tunekit.autotune(space=vector_add.space(), key=["n"], strategy="random", budget=tunekit.Budget(evals=4),
                            store=str(store), **options)(vector_add.add_kernel)


def run(kernel, n):
    x, y, out = vector_add.inputs(n)
    vector_add.launch(kernel, x, y, out)
    assert torch.equal(out, x + y)
    return kernel.best_config


def test_round_trip_tune_export_import_serve_offline_and_a_rule_that_needs_no_tunekit(tmp_path, monkeypatch,
                                                                                     capsys):
    tuned_store = tmp_path / "tuned.db"
    kernel = make(tuned_store)
    tuned = {n: run(kernel, n) for n in TUNED}
    kernel.store.close()
    winners = tmp_path / "winners.jsonl"
    assert main(["store", "export", "--store", str(tuned_store), "--winners", str(winners)]) == 0
    fresh = tmp_path / "fresh.db"
    assert main(["store", "import", str(winners), "--store", str(fresh)]) == 0
    rule_path = tmp_path / "shipped" / "add_rule.py"
    rule_path.parent.mkdir()
    assert main(["store", "heuristics", str(rule_path), "--kernel", "add_kernel", "--store", str(tuned_store)]) == 0
    assert "leaving each of the 5 tuned keys out" in capsys.readouterr().out

    monkeypatch.setenv("TUNEKIT_MODE", "offline")
    for store in (fresh, winners):  # the imported store and the winners file serve the tuned configs
        served = make(store)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert {n: config_to_dict(run(served, n)) for n in TUNED} == {n: config_to_dict(c)
                                                                         for n, c in tuned.items()}
        assert served.trials == []

    # the module alone, in an interpreter that cannot import tunekit (no site-packages, nothing else on the path)
    keys = [{"n": n, "dtypes": ["torch.float32"] * 3} for n in TUNED + UNSEEN]
    script = ("import json, sys; sys.path[:0] = [sys.argv[1]]\n"
              "try:\n    import tunekit\n    sys.exit('tunekit was importable')\nexcept ImportError:\n    pass\n"
              "import add_rule\nprint(json.dumps([add_rule.config_for(**dict(k)) for k in json.loads(sys.argv[2])]))")
    alone = subprocess.run([sys.executable, "-I", "-S", "-c", script, str(rule_path.parent), json.dumps(keys)],
                           capture_output=True, text=True, cwd=tmp_path)
    assert alone.returncode == 0, alone.stderr + alone.stdout
    configs_alone = json.loads(alone.stdout)
    rule = load(rule_path)
    assert configs_alone == [rule.config_for(**dict(k)) for k in keys]

    # offline, a key no store holds launches the rule's config, with the warning that says so
    served = make(winners, fallback=rule.config_for)
    for n, expected in zip(UNSEEN, configs_alone[len(TUNED):]):
        with pytest.warns(RuntimeWarning, match="the fallback rule's config"):
            config = run(served, n)
        assert config_to_dict(config) == expected


def test_a_fallback_that_gives_a_config_outside_the_space_is_ignored_with_a_warning(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("TUNEKIT_MODE", "offline")
    served = make(tmp_path / "none.db", fallback=lambda **key: {"BLOCK": 3})
    with pytest.warns(RuntimeWarning, match="the default config"):
        run(served, 1000)
    assert "which is not a config of the Space; ignored" in caplog.text
    with pytest.raises(TypeError, match="fallback must be a function"):
        make(tmp_path / "none.db", fallback="rule.py")


def test_tunekit_heuristics_is_still_tritons_decorator_once_the_rules_module_is_imported():
    import triton

    import tunekit.config_rules  # noqa: F401
    from tunekit import cli  # noqa: F401 - imports the rules module for `store heuristics`

    assert tunekit.heuristics is triton.heuristics


def test_a_module_with_bool_and_none_values_imports_and_agrees_with_the_rule(tmp_path):
    on = json.dumps({"BLOCK": 64, "EVEN_K": True, "maxnreg": None}, sort_keys=True)
    off = json.dumps({"BLOCK": 64, "EVEN_K": False, "maxnreg": None}, sort_keys=True)
    data = [KeyTimes(TuningKey.from_dict({"args": {"M": m, "TRANS": trans}, "dtypes": ["torch.float16"]}), on if trans else off,
                     {on: 1.0 if trans else 2.0, off: 2.0 if trans else 1.0})
            for m in (16, 64, 256, 1024) for trans in (True, False)]
    for kind in ("tree-1", "nearest"):
        rule = fit_rule(data, kind)
        module = load(write_module(rule, tmp_path / f"{kind.replace('-', '_')}.py", kernel="k", provenance="bools"))
        for m in (8, 100, 4096):
            for trans in (True, False):
                key = TuningKey.from_dict({"args": {"M": m, "TRANS": trans}, "dtypes": ["torch.float16"]})
                assert module.config_for(M=m, TRANS=trans, dtypes=["torch.float16"]) == rule.config_for(key)
                assert module.config_for(M=m, TRANS=trans, dtypes=["torch.float16"])["EVEN_K"] is trans
