import multiprocessing
import os
import sqlite3

import pytest

from tunekit.store import ResultsStore, StoreError, export_rows, open_store
from tunekit.testing.stores import IDENTITY, KEY, StoreConformance, hammer, ok_trial


class TestSQLiteFileStore(StoreConformance):
    @pytest.fixture
    def store(self, store_path):
        return ResultsStore(store_path)


class TestInMemoryStore(StoreConformance):
    @pytest.fixture
    def store(self):
        return open_store(None)


def test_a_store_persists_across_opens(store_path):
    ResultsStore(store_path).record(IDENTITY, KEY, ok_trial(64, 1.0), strategy="s", run_id="r")
    assert len(ResultsStore(store_path).history(IDENTITY)) == 1


def test_a_file_that_is_not_a_database_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "notes.db"
    path.write_bytes(b"my precious notes\n" * 100)
    with pytest.raises(StoreError, match="not a tunekit store .*left untouched"):
        ResultsStore(path)
    assert path.read_bytes() == b"my precious notes\n" * 100


def test_another_programs_sqlite_database_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "other.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE accounts (id INTEGER, balance REAL)")
    connection.execute("INSERT INTO accounts VALUES (1, 10.0)")
    connection.commit()
    connection.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not a tunekit store .*accounts"):
        ResultsStore(path)
    assert path.read_bytes() == before


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


def test_concurrent_writers_lose_nothing(store_path):
    """Injected: 4 processes writing 150 trials each into one SQLite file at once.
    Survives: all 600 trials, no 'database is locked' error."""
    ResultsStore(store_path)
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=hammer, args=(str(store_path), w, 150)) for w in range(4)]
    for p in writers:
        p.start()
    for p in writers:
        p.join(120)
    assert [p.exitcode for p in writers] == [0, 0, 0, 0]
    rows = ResultsStore(store_path).rows()
    assert len(rows) == 600
    assert sorted({r["strategy"] for r in rows}) == [f"writer{w}" for w in range(4)]


def test_export_writes_csv_and_jsonl_and_never_overwrites(tmp_path):
    rows = [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    assert export_rows(rows, tmp_path / "t.csv").read_text().splitlines() == ["a,b", "1,x", "2,y"]
    assert len(export_rows(rows, tmp_path / "t.jsonl").read_text().splitlines()) == 2
    (tmp_path / "mine.csv").write_text("keep me")
    with pytest.raises(FileExistsError):
        export_rows(rows, tmp_path / "mine.csv")
    assert (tmp_path / "mine.csv").read_text() == "keep me"
