"""Where a store lives: locations and URLs checked, stores opened read-only, files that are not
tunekit stores refused without a byte or a file changed beside them."""

import importlib.util
import os
import shutil
import subprocess
import sys
import sqlite3
from pathlib import Path

import platformdirs
import pytest

from tunekit import database, settings
from tunekit.store import ResultsStore, StoreError
from tunekit.testing.stores import IDENTITY, KEY, ok_trial

DATA = Path(__file__).parent / "data"


def write_store(path: Path, trials: int = 3) -> None:
    store = ResultsStore(path)
    for i in range(trials):
        store.record(IDENTITY, KEY, ok_trial(64 << i, 1.0 + i), strategy="s", run_id="r")
    store.close()


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file of ``folder``, by name, with its bytes."""
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


# -- URLs -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("url, expected", [
    ("foo://bar", r"^Store URL foo://bar: SQLAlchemy knows no database 'foo'"),
    ("mysql://tuner:s3cret@dbhost/tunekit",
     r"^Store URL mysql://tuner:\*\*\*@dbhost/tunekit needs the Python module 'MySQLdb', which is not installed: "
     r"pip install mysqlclient"),
    ("mysql+pymysql://tuner:s3cret@dbhost/tunekit", r"needs the Python module 'pymysql'.*pip install PyMySQL"),
    ("://tuner:s3cret@dbhost", r"^Store URL ://tuner:\*\*\*@dbhost is not a valid SQLAlchemy URL"),
])
def test_a_url_that_cannot_be_opened_is_one_line_naming_it_with_its_password_masked(url, expected):
    if "mysql" in url and (importlib.util.find_spec("MySQLdb") or importlib.util.find_spec("pymysql")):
        pytest.skip("a MySQL driver is installed here")
    with pytest.raises(StoreError, match=expected) as caught:
        ResultsStore(url)
    assert "s3cret" not in str(caught.value) and "\n" not in str(caught.value)


def test_an_empty_TUNEKIT_STORE_is_unset(monkeypatch):
    monkeypatch.setenv("TUNEKIT_STORE", "")
    assert settings.store_url() == str(Path(platformdirs.user_cache_dir("tunekit")) / "tunekit.db")


# -- reading --------------------------------------------------------------------------------------


def test_reading_a_store_that_does_not_exist_creates_nothing(tmp_path):
    with pytest.raises(StoreError, match=r"typo\.db does not exist"):
        ResultsStore(tmp_path / "typo.db", read_only=True)
    assert list(tmp_path.iterdir()) == []


def test_a_store_in_a_read_only_location_is_read_and_left_as_it_was(tmp_path, make_read_only):
    """A store shipped on read-only media (or made read-only): read, and not a file added beside it."""
    folder = tmp_path / "shipped"
    folder.mkdir()
    write_store(folder / "store.db")
    make_read_only(folder)
    before = snapshot(folder)
    store = ResultsStore(folder / "store.db", read_only=True)
    assert len(store.rows()) == 3 and len(store.history(IDENTITY)) == 3
    store.close()
    assert snapshot(folder) == before


def test_a_store_with_its_write_ahead_log_on_read_only_media_is_read_whole(tmp_path, make_read_only):
    """Injected: a store whose writer was killed before merging its write-ahead log, copied with its
    -wal file (and no -shm) onto read-only media. Survives: every trial, the log's included, is read,
    and not a file changes or is added there."""
    import subprocess
    import sys
    import textwrap

    written = tmp_path / "written"
    written.mkdir()
    script = textwrap.dedent(f"""
        import os
        from tunekit.store import ResultsStore
        from tunekit.testing.stores import IDENTITY, KEY, ok_trial
        store = ResultsStore({str(written / "store.db")!r})
        for index in range(5):
            store.record(IDENTITY, KEY, ok_trial(2 ** index, 1.0 + index), strategy="s", run_id="r")
        os._exit(0)  # killed, as it were: no checkpoint, no clean-up
    """)
    subprocess.run([sys.executable, "-c", script], check=True)
    assert (written / "store.db-wal").stat().st_size > 0
    folder = tmp_path / "shipped"
    folder.mkdir()
    for name in ("store.db", "store.db-wal"):
        shutil.copyfile(written / name, folder / name)
    make_read_only(folder)
    before = snapshot(folder)
    with ResultsStore(folder / "store.db", read_only=True) as store:
        assert len(store.rows()) == 5
    assert snapshot(folder) == before


def test_a_read_only_store_refuses_writes_with_a_message(store_path):
    write_store(store_path)
    store = ResultsStore(store_path, read_only=True)
    with pytest.raises(StoreError, match="opened read-only"):
        store.record(IDENTITY, KEY, ok_trial(8, 1.0), strategy="s", run_id="r")
    assert len(ResultsStore(store_path, read_only=True).rows()) == 3


def test_reading_a_store_of_an_older_schema_leaves_it_as_it_was(tmp_path):
    """tests/data/store_v1.db (schema 1) is read through a migrated copy in memory; the file keeps
    its schema and its bytes."""
    path = tmp_path / "old.db"
    shutil.copy(DATA / "store_v1.db", path)
    before = snapshot(tmp_path)
    store = ResultsStore(path, read_only=True)
    rows = store.rows()
    assert len(rows) == 3 and all(r["relative_error"] is None for r in rows)
    assert store.runs()[0]["evaluations"] == 3 and len(store.winner_rows()) == 1
    store.close()
    assert snapshot(tmp_path) == before


# -- files that are not tunekit stores ------------------------------------------------------------


def _other_programs_database(path: Path, *, wal: bool, tables: bool) -> None:
    connection = sqlite3.connect(path)
    if wal:
        connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("CREATE TABLE accounts (id INTEGER, balance REAL)")
    if tables:
        connection.execute("INSERT INTO accounts VALUES (1, 10.0)")
    else:  # a valid SQLite file that holds no table at all
        connection.execute("DROP TABLE accounts")
    connection.commit()
    connection.close()


def _truncated_store(path: Path) -> None:
    write_store(path, trials=200)
    path.write_bytes(path.read_bytes()[:8192])


FOREIGN = {
    "not a database": (lambda path: path.write_bytes(b"my precious notes\n" * 100), "not an SQLite database"),
    "another program's database": (lambda path: _other_programs_database(path, wal=False, tables=True),
                                   "not a tunekit store .*accounts"),
    "another program's WAL database": (lambda path: _other_programs_database(path, wal=True, tables=True),
                                       "not a tunekit store .*accounts"),
    "another program's empty database": (lambda path: _other_programs_database(path, wal=False, tables=False),
                                         "not a tunekit store .*no tables"),
    "another program's empty WAL database": (lambda path: _other_programs_database(path, wal=True, tables=False),
                                             "not a tunekit store .*no tables"),
    "a damaged (truncated) store": (_truncated_store, "damaged"),
}


@pytest.mark.parametrize("read_only", [False, True], ids=["writing", "reading"])
@pytest.mark.parametrize("kind", list(FOREIGN))
def test_a_file_that_is_not_a_tunekit_store_is_refused_and_nothing_beside_it_changes(tmp_path, kind, read_only):
    make, expected = FOREIGN[kind]
    path = tmp_path / "data.db"
    make(path)
    before = snapshot(tmp_path)
    with pytest.raises(StoreError, match=f"{path}.*{expected}.*left untouched"):
        ResultsStore(path, read_only=read_only)
    assert snapshot(tmp_path) == before


def test_a_reading_torn_by_another_processs_checkpoint_does_not_call_a_sound_store_damaged(tmp_path, monkeypatch):
    """Injected: the first reading of a sound WAL store (read immutable: no write-ahead log beside
    it) fails as SQLite fails when another process checkpoints into the file meanwhile (error 522,
    "unable to get the page"). Survives: the store is read again and opens with its trials; a store
    damaged for good is still refused (the test above)."""
    path = tmp_path / "shared.db"
    write_store(path)
    readings = []
    real_inspect = database._inspect

    def torn_once(at: Path, *, immutable: bool) -> tuple[set[str], list[str]]:
        readings.append(immutable)
        if len(readings) == 1:
            return set(), ["unable to get the page. (522)"]
        return real_inspect(at, immutable=immutable)

    monkeypatch.setattr(database, "_inspect", torn_once)
    assert len(ResultsStore(path).rows()) == 3
    assert readings == [True, True]


#: One process: commits trials into the store argv[1] for argv[2] seconds, opening a second store
#: object on it between commits (as a poll loop does), and prints how many it committed.
WRITER = """
import sys, time
from tunekit.store import ResultsStore
from tunekit.testing.stores import IDENTITY, KEY, ok_trial
path, seconds, first = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
store, committed, end = ResultsStore(path), 0, time.monotonic() + seconds
while time.monotonic() < end:
    store.record(IDENTITY, KEY, ok_trial(first + committed, 1.0), strategy="s", run_id="r")
    committed += 1
    ResultsStore(path).rows()
print(committed)
"""


def test_processes_that_open_a_store_again_while_others_write_it_keep_it_whole(tmp_path):
    """Injected: two processes commit trials into one SQLite store and each opens another store
    object on it between its commits. Opening it read its header through a plain file handle, whose
    close dropped the SQLite locks of the process's open connection; the other process's checkpoint
    then overwrote pages under it, and the store became "not a database" within seconds. Survives:
    every trial both committed is in the store."""
    path = tmp_path / "shared.db"
    write_store(path, trials=0)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), "8", str(first)], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for first in (0, 10**6)]
    committed = 0
    for writer in writers:
        out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err[-2000:]
        committed += int(out.split()[-1])
    assert len(ResultsStore(path, read_only=True).rows()) == committed > 0


def test_an_empty_file_becomes_a_store(tmp_path):
    path = tmp_path / "new.db"
    path.touch()
    write_store(path)
    assert len(ResultsStore(path, read_only=True).rows()) == 3


def test_a_server_database_is_read_only_when_asked_and_must_hold_a_store(postgres_url):
    with pytest.raises(StoreError, match="holds no tunekit store"):
        ResultsStore(postgres_url, read_only=True)
    writer = ResultsStore(postgres_url)
    writer.record(IDENTITY, KEY, ok_trial(64, 1.0), strategy="s", run_id="r")
    writer.close()
    reader = ResultsStore(postgres_url, read_only=True)
    assert len(reader.rows()) == 1
    with pytest.raises(StoreError, match="opened read-only"):
        reader.record(IDENTITY, KEY, ok_trial(128, 1.0), strategy="s", run_id="r")
    reader.close()
