import json
import multiprocessing
import os
import sqlite3
from pathlib import Path

import pytest

from tunekit.opening import open_store
from tunekit.store import ResultsStore, StoreError, export_rows
from tunekit.testing.stores import IDENTITY, KEY, StoreConformance, finish_runs, hammer, ok_trial
from tunekit.trial import Status, Trial


class TestSQLiteFileStore(StoreConformance):
    @pytest.fixture
    def store(self, store_path):
        return ResultsStore(store_path)


class TestPostgreSQLStore(StoreConformance):
    @pytest.fixture
    def store(self, postgres_url):
        store = ResultsStore(postgres_url)
        yield store
        store.close()


class TestInMemoryStore(StoreConformance):
    @pytest.fixture
    def store(self):
        return open_store(None)


def test_a_store_persists_across_opens(store_path):
    ResultsStore(store_path).record(IDENTITY, KEY, ok_trial(64, 1.0), strategy="s", run_id="r")
    assert len(ResultsStore(store_path).history(IDENTITY)) == 1


def assert_refused_and_untouched(path, match: str) -> None:
    """Opening ``path`` as a store fails with an error matching ``match``; not a byte of it changes."""
    before = path.read_bytes()
    with pytest.raises(StoreError, match=match):
        ResultsStore(path)
    assert path.read_bytes() == before


def test_a_file_that_is_not_a_database_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "notes.db"
    path.write_bytes(b"my precious notes\n" * 100)
    assert_refused_and_untouched(path, "not a tunekit store .*left untouched")


def test_another_programs_sqlite_database_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "other.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE accounts (id INTEGER, balance REAL)")
    connection.execute("INSERT INTO accounts VALUES (1, 10.0)")
    connection.commit()
    connection.close()
    assert_refused_and_untouched(path, "not a tunekit store .*accounts")


def test_missing_directory_and_directory_paths_are_refused(tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        ResultsStore(tmp_path / "nowhere" / "store.db")
    with pytest.raises(StoreError, match="is a directory"):
        ResultsStore(tmp_path)
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_unwritable_directory_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(StoreError, match="not writable"):
        ResultsStore(locked / "store.db")


def test_default_store_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TUNEKIT_STORE", str(tmp_path / "env.db"))
    assert open_store(True).url.endswith("env.db")


def run_at_once(target, arguments: list[tuple]) -> list[int | None]:
    """Start one spawned process per argument tuple, all at once; their exit codes."""
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=target, args=args) for args in arguments]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
    return [process.exitcode for process in processes]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_concurrent_writers_lose_nothing(backend, tmp_path, request):
    """Injected: 4 processes writing 150 trials each into one store at once, each opening it
    (creating its tables) at the same moment. Survives: all 600 trials, no lock error."""
    url = str(tmp_path / "store.db") if backend == "sqlite" else request.getfixturevalue("postgres_url")
    assert run_at_once(hammer, [(url, w, 150) for w in range(4)]) == [0, 0, 0, 0]
    rows = ResultsStore(url).rows()
    assert len(rows) == 600
    assert sorted({r["strategy"] for r in rows}) == [f"writer{w}" for w in range(4)]


def test_a_store_of_schema_1_is_migrated_and_keeps_every_trial(tmp_path):
    """tests/data/store_v1.db was written by tunekit at commit 53fa05b (schema 1: no
    relative_error column). Opening it migrates it in place: its 3 trials, run and winner are
    kept, and new trials carry the new column."""
    import shutil

    path = tmp_path / "old.db"
    shutil.copy(Path(__file__).parent / "data" / "store_v1.db", path)
    before = sqlite3.connect(path).execute("SELECT id, config, status, median_ms FROM trials ORDER BY id").fetchall()
    store = ResultsStore(path)
    assert sqlite3.connect(path).execute("SELECT value FROM tunekit_meta WHERE name='schema_version'").fetchone() \
        == ("3",)
    rows = store.rows()
    assert [(r["id"], r["config"], r["status"], r["median_ms"]) for r in rows] == before
    assert len(before) == 3 and all(r["relative_error"] is None for r in rows)
    (winner,) = store.winner_rows()
    assert json.loads(winner["config"])["BLOCK"] == 256 and store.runs()[0]["evaluations"] == 3
    trial = Trial(ok_trial(64, 1.0).config, Status.WRONG, error="differs", relative_error=0.5)
    store.record(IDENTITY, KEY, trial, strategy="s", run_id="r")
    assert ResultsStore(path).rows(run_id="r")[0]["relative_error"] == 0.5


def test_a_store_of_a_newer_schema_is_refused_and_left_untouched(store_path):
    ResultsStore(store_path).close()
    connection = sqlite3.connect(store_path)
    connection.execute("UPDATE tunekit_meta SET value='99' WHERE name='schema_version'")
    connection.commit()
    connection.close()
    assert_refused_and_untouched(store_path, "schema version 99, newer than this tunekit's 3: upgrade tunekit")


def test_a_truncated_store_is_refused_and_left_untouched(store_path):
    """Injected: a store with 200 trials cut to its first 8 KiB (a copy interrupted mid-way).
    Survives: the file, byte for byte; the error names the file and says what is wrong."""
    store = ResultsStore(store_path)
    for i in range(200):
        store.record(IDENTITY, KEY, ok_trial(i, 1.0), strategy="s", run_id="r")
    store.close()
    sqlite3.connect(store_path).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
    store_path.write_bytes(store_path.read_bytes()[:8192])
    for suffix in ("-wal", "-shm"):
        Path(f"{store_path}{suffix}").unlink(missing_ok=True)
    assert_refused_and_untouched(store_path, f"{store_path.name}.*(malformed|not a database|could not be opened)")


def test_export_writes_csv_and_jsonl_and_never_overwrites(tmp_path):
    rows = [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    assert export_rows(rows, tmp_path / "t.csv").read_text().splitlines() == ["a,b", "1,x", "2,y"]
    assert len(export_rows(rows, tmp_path / "t.jsonl").read_text().splitlines()) == 2
    (tmp_path / "mine.csv").write_text("keep me")
    with pytest.raises(FileExistsError):
        export_rows(rows, tmp_path / "mine.csv")
    assert (tmp_path / "mine.csv").read_text() == "keep me"


def test_an_export_that_fails_part_way_leaves_no_half_file(tmp_path):
    rows = [{"a": 1}, {"b": 2}]  # the second row has a column the CSV header lacks
    with pytest.raises(ValueError):
        export_rows(rows, tmp_path / "t.csv")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_runs_finishing_the_same_keys_at_once_all_succeed(backend, tmp_path, request):
    """Injected: 4 processes finishing a run with a winner for each of 40 keys at the same moments
    (on a server, two of them can both find a key without a winner and both insert one).
    Survives: every process, every run finished, one winner per key, from one of those runs."""
    url = str(tmp_path / "store.db") if backend == "sqlite" else request.getfixturevalue("postgres_url")
    assert run_at_once(finish_runs, [(url, w, 40) for w in range(4)]) == [0, 0, 0, 0]
    store = ResultsStore(url)
    runs = store.runs()
    assert len(runs) == 160 and all(run["finished_at"] is not None for run in runs)
    winners = store.winners(IDENTITY)
    assert len(winners) == 40
    assert {json.loads(config)["BLOCK"] for config, _, _ in winners.values()} <= {64 << w for w in range(4)}


TUNING_PROCESS = """
import json, sys, time
import tunekit
from tunekit import Space
from tunekit.kernels import vector_add
from tunekit.testing import faults

kernel_name, url = sys.argv[1], sys.argv[2]
def slow_bench(fn, **_):
    fn(); time.sleep(0.05); return 1.0
if kernel_name == "add":
    kernel = tunekit.autotune(space=vector_add.space(), key=["n"], strategy="exhaustive", store=url,
                              do_bench=slow_bench)(vector_add.add_kernel)
else:
    kernel = tunekit.autotune(space=Space(BLOCK=[*faults.GOOD_BLOCKS, 4096]), key=["n"], strategy="exhaustive",
                              store=url, do_bench=slow_bench)(faults.faulty_add)
x, y, out = vector_add.inputs(4096)
vector_add.launch(kernel, x, y, out)
assert (out == x + y).all()
print(json.dumps({"run_id": kernel.run_id, "measured": sum(t.source == "measured" for t in kernel.trials)}))
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_processes_tuning_at_once_into_one_store_lose_nothing(backend, tmp_path, request):
    """Injected: three processes started together against one new store: two tune the same
    kernel at the same key, one another kernel. Survives: every process finishes; of the two at
    one key, one tunes it and the other launches its winner (claims); every trial each one
    measured is in the store under its run, and each kernel has its winner."""
    import subprocess
    import sys

    url = str(tmp_path / "store.db") if backend == "sqlite" else request.getfixturevalue("postgres_url")
    env = dict(os.environ, TRITON_INTERPRET="1")
    processes = [subprocess.Popen([sys.executable, "-c", TUNING_PROCESS, name, url], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for name in ("add", "add", "faulty")]
    outputs = [p.communicate(timeout=300) for p in processes]
    assert [p.returncode for p in processes] == [0, 0, 0], [err[-2000:] for _, err in outputs]
    reports = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    store = ResultsStore(url)
    assert sorted(r["measured"] > 0 for r in reports[:2]) == [False, True] and reports[2]["measured"] > 0
    for report in [r for r in reports if r["measured"]]:
        assert len([r for r in store.rows(run_id=report["run_id"]) if r["source"] == "measured"]) == report["measured"]
    assert {r["kernel_name"] for r in store.winner_rows()} == {"add_kernel", "faulty_add"}
    assert all(run["finished_at"] is not None for run in store.runs()) and len(store.runs()) == 2


EXITING_WRITER = """
import sys, threading, time
from tunekit.store import ResultsStore
from tunekit.testing.stores import IDENTITY, KEY, ok_trial

store = ResultsStore(sys.argv[1])
for i in range(50):
    store.record(IDENTITY, KEY, ok_trial(i, 1.0), strategy="s", run_id="r")
# A thread that still holds the store at exit, as a worker thread may: Python never closes it.
threading.Thread(target=lambda held=store: time.sleep(3600), daemon=True).start()
"""


def test_after_a_normal_exit_the_db_file_alone_holds_every_trial(tmp_path):
    """Injected: a process records 50 trials and exits normally while a thread still holds its store
    (so nothing closes the store's connections). Survives: a copy of the .db file alone, without
    its -wal, holds all 50 trials."""
    import shutil
    import subprocess
    import sys

    path = tmp_path / "store.db"
    done = subprocess.run([sys.executable, "-c", EXITING_WRITER, str(path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    copy = tmp_path / "elsewhere" / "copy.db"
    copy.parent.mkdir()
    shutil.copy(path, copy)
    assert len(ResultsStore(copy, read_only=True).rows()) == 50


def test_runs_count_the_stored_trials_of_a_run_that_never_finished(store_path):
    """A run killed mid-way is never finished; one interrupted (Ctrl-C) is closed with 0 evaluations.
    Either way its measured trials are in the store, and the runs listing counts them."""
    from dataclasses import replace

    store = ResultsStore(store_path)
    for run in ("killed", "interrupted", "finished"):
        store.start_run(IDENTITY, KEY, strategy="s", budget=None, run_id=run)
        for i in range(3):
            store.record(IDENTITY, KEY, ok_trial(64 << i, 1.0), strategy="s", run_id=run)
        store.record(IDENTITY, KEY, replace(ok_trial(64, 1.0), source="retimed"), strategy="s", run_id=run)
    store.finish_run(IDENTITY, KEY, run_id="interrupted", winner=None, evaluations=0, tuning_seconds=1.0,
                     space_hash="h")
    store.finish_run(IDENTITY, KEY, run_id="finished", winner=ok_trial(64, 1.0), evaluations=3, tuning_seconds=1.0,
                     space_hash="h")
    assert {r["run_id"]: r["evaluations"] for r in store.runs()} == {"killed": 3, "interrupted": 3, "finished": 3}


def _three_runs(store: ResultsStore) -> None:
    """Run a: kernel k at KEY, two ok trials and a runtime error, a winner; run b: kernel k at
    another key, one ok trial, a winner; run c: another kernel at KEY, one runtime error."""
    from tunekit.store import KernelIdentity

    other_kernel = KernelIdentity("other", "hash9", "3.x", "interpreter", "host_clock")
    other_key = KEY.replace('"n": 8', '"n": 16')
    failed = Trial(ok_trial(8, 1.0).config, Status.RUNTIME_ERROR, error="boom")
    for run, identity, key, trials in (("a", IDENTITY, KEY, [ok_trial(64, 1.0), ok_trial(128, 2.0), failed]),
                                       ("b", IDENTITY, other_key, [ok_trial(64, 1.0)]),
                                       ("c", other_kernel, KEY, [failed])):
        store.start_run(identity, key, strategy="s", budget=None, run_id=run)
        for trial in trials:
            store.record(identity, key, trial, strategy="s", run_id=run)
        winner = next((t for t in trials if t.ok), None)
        store.finish_run(identity, key, run_id=run, winner=winner, evaluations=len(trials), tuning_seconds=1.0,
                         space_hash="h")


def test_delete_by_status_removes_only_those_trials(store_path):
    store = ResultsStore(store_path)
    _three_runs(store)
    deleted = store.delete(kernel="k", status="runtime_error")
    assert (deleted.trials, deleted.runs, deleted.winners) == (1, 0, 0)
    assert [r["status"] for r in store.rows()] == ["ok", "ok", "ok", "runtime_error"]
    assert len(store.runs()) == 3 and len(store.winner_rows()) == 2


def test_delete_by_run_kernel_or_key_removes_trials_runs_and_their_winners(store_path):
    store = ResultsStore(store_path)
    _three_runs(store)
    assert store.delete(run_id="a", dry_run=True) == store.delete(run_id="a", dry_run=True)
    counted = store.delete(run_id="a", dry_run=True)
    assert (counted.trials, counted.runs, counted.winners) == (3, 1, 1)
    assert len(store.rows()) == 5 and len(store.runs()) == 3  # a dry run deletes nothing
    assert store.delete(run_id="a") == counted
    assert {r["run_id"] for r in store.rows()} == {"b", "c"} and [w["run_id"] for w in store.winner_rows()] == ["b"]
    deleted = store.delete(key=KEY)  # what is left at KEY: run c
    assert (deleted.trials, deleted.runs, deleted.winners) == (1, 1, 0)
    deleted = store.delete(kernel="k")
    assert (deleted.trials, deleted.runs, deleted.winners) == (1, 1, 1)
    assert store.rows() == [] and store.runs() == [] and store.winner_rows() == []


def test_delete_needs_a_filter(store_path):
    store = ResultsStore(store_path)
    _three_runs(store)
    with pytest.raises(ValueError, match="at least one of run_id, kernel, key, status"):
        store.delete()
    assert len(store.rows()) == 5
