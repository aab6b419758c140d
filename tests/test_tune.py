"""``tunekit tune``: manifests, tuning a manifest ahead of time, and hosts that share a store."""

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
import torch

from tunekit.ahead import ManifestTuning, plan
from tunekit.cli import main
from tunekit.manifest import ManifestError, load_manifest
from tunekit.store import ResultsStore
from tunekit.testing import tune as tune_manifest

TINY = "tunekit.kernels:manifests/tiny.toml"


@pytest.mark.interpreter_loops
def test_the_shipped_tiny_manifest_tunes_every_suite_kernel_and_a_second_run_tunes_nothing(tmp_path, capsys):
    store = tmp_path / "store.db"
    assert main(["tune", TINY, "--store", str(store), "--no-progress"]) == 0
    first = capsys.readouterr().out
    entries = load_manifest(TINY)
    shapes = sum(len(e.shapes) for e in entries)
    assert first.count(" tuned ") == shapes
    with ResultsStore(store) as opened:
        winners = opened.winner_rows()
    assert {w["kernel_name"] for w in winners} == {e.kernel.kernel_name for e in entries}
    assert len(winners) == shapes
    assert main(["tune", TINY, "--store", str(store), "--no-progress"]) == 0
    second = capsys.readouterr().out
    assert second.count(" stored ") == shapes and " tuned " not in second
    assert main(["tune", TINY, "--store", str(store), "--dry-run"]) == 0
    assert capsys.readouterr().out.count(" winner {") == shapes


def test_a_dry_run_on_a_missing_store_creates_nothing(tmp_path, capsys):
    missing = tmp_path / "missing.db"
    assert main(["tune", TINY, "--store", str(missing), "--dry-run"]) == 0
    assert capsys.readouterr().out.count("nothing (no store yet)") == sum(len(e.shapes) for e in load_manifest(TINY))
    assert not missing.exists()


def test_a_dry_run_prints_its_plan_as_json_for_scripts(tmp_path, capsys):
    assert main(["tune", TINY, "--store", str(tmp_path / "missing.db"), "--dry-run", "--json"]) == 0
    plan_rows = json.loads(capsys.readouterr().out)
    entries = load_manifest(TINY)
    assert len(plan_rows) == sum(len(e.shapes) for e in entries)
    assert {row["kernel"] for row in plan_rows} == {e.kernel.kernel_name for e in entries}
    assert all(isinstance(row["key"], dict) and "args" in row["key"] for row in plan_rows)


@pytest.mark.parametrize("text, message", [
    ('[[kernels]]\nkernel = "tunekit.kernels.tuned:matmul"\n', "missing inputs, shapes"),
    ('[[kernels]]\nkernel = "tunekit.kernels.matmul:matmul_kernel"\ninputs = "tunekit.kernels.matmul:inputs"\n'
     'shapes = [{m = 1, n = 1, k = 1}]\n', "not a kernel decorated with tunekit.autotune"),
    ('[[kernels]]\nkernel = "tunekit.kernels.tuned:matmul"\ninputs = "tunekit.kernels.matmul:inputs"\n'
     'shapes = [{m = 1, n = 1, kk = 1}]\n', "shape argument 'kk' is taken by neither"),
    ('[[kernels]]\nkernel = "tunekit.kernels.tuned:nope"\ninputs = "tunekit.kernels.matmul:inputs"\n'
     'shapes = [{m = 1}]\n', "tunekit.kernels.tuned has no nope"),
    ('[[kernels]]\nkernel = "tunekit.kernels.tuned:matmul"\ninputs = "tunekit.kernels.matmul:inputs"\n'
     'budget = {evals = 0}\nshapes = [{m = 1, n = 1, k = 1}]\n', "evals"),
    ("kernels = [", "not valid TOML"),
    ('[kernel]\nx = 1\n', "unknown top-level entries kernel"),
])
def test_a_bad_manifest_is_refused_with_what_is_wrong(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ManifestError, match=message):
        load_manifest(path)
    assert path.read_text() == text


@pytest.mark.parametrize("text, message", [
    ("def broken(:\n", "failed to run: SyntaxError"),
    ("import tunekit_no_such_module\n", "failed to run: ModuleNotFoundError"),
    ("MANIFEST = []\n", "lists no kernels"),
    ("X = 1\n", "defines no MANIFEST list"),
])
def test_a_bad_python_manifest_is_refused_with_what_is_wrong(tmp_path, text, message):
    path = tmp_path / "bad.py"
    path.write_text(text)
    with pytest.raises(ManifestError, match=message):
        load_manifest(path)


def test_a_manifest_module_that_fails_to_import_is_told_apart_from_a_missing_one(tmp_path, monkeypatch):
    with pytest.raises(ManifestError, match="neither a .toml or .py file nor an importable module"):
        load_manifest("tunekit_no_such_package.manifest")
    (tmp_path / "tunekit_test_broken_manifest.py").write_text("import tunekit_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ManifestError, match="failed to import: No module named 'tunekit_no_such_dependency'"):
        load_manifest("tunekit_test_broken_manifest")


def test_a_python_manifest_and_outcomes_in_manifest_order(tmp_path, monkeypatch):
    monkeypatch.setenv("TUNEKIT_TEST_BENCH_SLEEP", "0")
    entries = load_manifest("tunekit.testing.tune")
    with ResultsStore(tmp_path / "store.db") as store:
        outcomes = ManifestTuning(entries, store, [None], progress=False).run()
        assert [json.loads(o.key)["args"]["n"] for o in outcomes] == tune_manifest.SIZES
        assert {o.status for o in outcomes} == {"tuned"} and all(o.evaluations == 5 for o in outcomes)
        rows = plan(entries, store)
    assert all(row["store"].startswith("winner") for row in rows)


def test_a_shape_whose_inputs_fail_is_reported_and_the_others_are_tuned(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TUNEKIT_TEST_BENCH_SLEEP", "0")
    manifest = tmp_path / "m.py"
    manifest.write_text("from tunekit.testing.tune import slow_add\nfrom tunekit.kernels import vector_add\n"
                        "MANIFEST = [{'kernel': slow_add, 'inputs': vector_add.inputs, "
                        "'shapes': [{'n': -5}, {'n': 1000}]}]\n")
    assert main(["tune", str(manifest), "--store", str(tmp_path / "s.db"), "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert " error " in captured.out and " tuned " in captured.out
    assert "n=-5" in captured.err


def test_two_threads_share_the_keys_and_wait_for_other_owners_without_spinning(tmp_path, monkeypatch):
    """Injected: every key claimed by another owner for 1.5 s; two device threads, poll 0.5 s; a
    key's tuning replaced by a 0.1 s stand-in that claims and finishes it (two threads cannot run
    kernels under the interpreter, which is not thread-safe: that is refused, tested below).
    Survives: each key is taken over once its claim expired and finished once; the threads looked
    at the held keys a few times each, not in a loop."""
    from tunekit import ahead
    from tunekit.ahead import Outcome

    entries = load_manifest("tunekit.testing.tune")
    kernel = tune_manifest.slow_add
    keys = [row["key"] for row in plan(entries, None)]
    calls = Counter()
    finished = Counter()
    with ResultsStore(tmp_path / "store.db") as store:
        for key in keys:
            assert store.claim(kernel.identity, kernel.space_hash, key, owner="elsewhere", lease=1.5) == "claimed"

        def stand_in(self, job, device, owner):
            key = keys[job.position]
            calls[key] += 1
            state = store.claim(kernel.identity, kernel.space_hash, key, owner=owner, lease=60)
            if state == "taken":
                return None
            time.sleep(0.1)
            store.release_claim(kernel.identity, kernel.space_hash, key, owner=owner, outcome="winner")
            finished[key] += 1
            return Outcome(kernel.kernel_name, job.shape.label(), key, "tuned", owner)

        monkeypatch.setattr(ahead.settings, "interpreting", lambda: False)
        monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)  # two GPUs posed on the CPU
        monkeypatch.setattr(ManifestTuning, "_tune", stand_in)
        outcomes = ManifestTuning(entries, store, [0, 1], poll=0.5, progress=False).run()
        assert [o.status for o in outcomes] == ["tuned"] * len(keys)
        assert finished == Counter(keys)
        assert all(c["takeovers"] == 1 for c in store.claims(kernel.identity, kernel.space_hash).values())
        assert sum(calls.values()) <= 8 * len(keys), calls


def test_two_threads_under_the_interpreter_are_refused(tmp_path):
    with ResultsStore(tmp_path / "store.db") as store, pytest.raises(ValueError, match="not thread-safe"):
        ManifestTuning(load_manifest("tunekit.testing.tune"), store, [None, 0])


def test_a_key_that_failed_is_reported_and_tuned_again_by_the_next_run(tmp_path, monkeypatch):
    monkeypatch.setenv("TUNEKIT_TEST_BENCH_SLEEP", "0")
    monkeypatch.setenv("TUNEKIT_TEST_BENCH_FAIL", "1")
    entries = load_manifest("tunekit.testing.tune")
    with ResultsStore(tmp_path / "store.db") as store:
        first = ManifestTuning(entries, store, [None], progress=False).run()
        assert {o.status for o in first} == {"failed"} and "injected" in first[0].detail
        monkeypatch.delenv("TUNEKIT_TEST_BENCH_FAIL")
        second = ManifestTuning(entries, store, [None], progress=False).run()
        assert {o.status for o in second} == {"tuned"}


def test_a_store_error_on_one_key_fails_that_key_and_the_others_are_tuned(tmp_path, monkeypatch, capsys):
    """Injected: the store refuses the third claim (ConnectionError). Survives: that key is
    reported as an error, the other five are tuned, the command exits 1 after its table."""
    monkeypatch.setenv("TUNEKIT_TEST_BENCH_SLEEP", "0")
    claims = Counter()
    real_claim = ResultsStore.claim

    def flaky_claim(self, *args, **kwargs):
        claims["n"] += 1
        if claims["n"] == 3:
            raise ConnectionError("injected: the store is unreachable")
        return real_claim(self, *args, **kwargs)

    monkeypatch.setattr(ResultsStore, "claim", flaky_claim)
    assert main(["tune", "tunekit.testing.tune", "--store", str(tmp_path / "s.db"), "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert out.count(" tuned ") == len(tune_manifest.SIZES) - 1 and out.count(" error ") == 1


@pytest.mark.parametrize("argv, message", [
    (["--lease", "0"], "must be a number of seconds > 0"),
    (["--seconds", "0"], "must be a number of seconds > 0"),
    (["--gpus", "0,1"], "names GPUs, but the Triton interpreter runs on the CPU"),
])
def test_bad_options_are_refused_before_anything_is_created(tmp_path, capsys, argv, message):
    store = tmp_path / "s.db"
    try:
        code = main(["tune", "tunekit.testing.tune", "--store", str(store), *argv])
    except SystemExit as exit:  # argparse's refusal
        code = exit.code
    assert code == 2 and message in capsys.readouterr().err
    assert not store.exists()


HOST = [sys.executable, "-m", "tunekit.cli", "tune", "tunekit.testing.tune", "--lease", "2", "--no-progress",
        "--store"]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_hosts_sharing_a_store_measure_every_config_once_and_take_over_a_killed_hosts_keys(backend, tmp_path,
                                                                                             request):
    """Injected: three processes posing as hosts tune one manifest (6 keys x 5 configs, 0.2 s a
    measurement) against one store; the first is killed (SIGKILL) while it holds a key with 2
    configs measured. Survives: the other two finish every key; the killed key is taken over once
    its lease expired; every config of every key is measured, none twice but the one the killed
    host had in flight; each key has its winner."""
    url = str(tmp_path / "store.db") if backend == "sqlite" else request.getfixturevalue("postgres_url")
    env = dict(os.environ, TRITON_INTERPRET="1", TUNEKIT_TEST_BENCH_SLEEP="0.2")
    hosts = [subprocess.Popen(HOST + [url], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    victim = hosts[0]
    store = None
    deadline = time.monotonic() + 120
    killed_key = None
    while killed_key is None and time.monotonic() < deadline and victim.poll() is None:
        time.sleep(0.05)
        try:
            store = store or ResultsStore(url)
            identity = tune_manifest.slow_add.identity
            for key, claim in store.claims(identity, tune_manifest.slow_add.space_hash).items():
                if claim["owner"].split(":")[1] == str(victim.pid) and claim["finished_at"] is None:
                    measured = [r for r in store.rows() if r["key"] == key and r["source"] == "measured"]
                    if len(measured) >= 2:
                        killed_key = key
        except Exception:  # the store's tables may not exist yet
            continue
    assert killed_key is not None, "the first host never held a key with 2 configs measured"
    victim.send_signal(signal.SIGKILL)
    outputs = [host.communicate(timeout=240) for host in hosts]
    assert victim.returncode == -signal.SIGKILL
    assert [h.returncode for h in hosts[1:]] == [0, 0], [err[-2000:] for _, err in outputs[1:]]
    store = ResultsStore(url)
    identity = tune_manifest.slow_add.identity
    claims = store.claims(identity, tune_manifest.slow_add.space_hash)
    assert len(claims) == len(tune_manifest.SIZES) and all(c["finished_at"] is not None for c in claims.values())
    assert claims[killed_key]["takeovers"] == 1
    measured = Counter((r["key"], r["config"]) for r in store.rows() if r["source"] == "measured" and r["status"] == "ok")
    assert len(measured) == len(tune_manifest.SIZES) * len(tune_manifest.BLOCKS)
    twice = [pair for pair, count in measured.items() if count > 1]
    assert len(twice) <= 1 and all(key == killed_key for key, _ in twice), twice
    assert len(store.winners(identity)) == len(tune_manifest.SIZES)
