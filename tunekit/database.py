"""Where a results store lives and how its database is opened.

A store's location is a file path (SQLite) or an SQLAlchemy URL. This module checks a location
before anything is written there (``location_url``, ``validate_url``), refuses files that are not
tunekit stores without touching them or anything beside them (``refuse_foreign_sqlite``), and
makes the engine (``make_engine``): for writing, SQLite in WAL mode with ``BEGIN IMMEDIATE`` and a
long busy timeout; for reading, an SQLite ``mode=ro`` URI that never creates a file.
``checkpoint`` moves an SQLite store's write-ahead log into its .db file. What is stored, and how,
is ``store.py``'s business.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import sqlite3
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.pool import StaticPool

logger = logging.getLogger(__name__)

_SQLITE_MAGIC = b"SQLite format 3\x00"
#: The pip package of a database driver whose module is not the package's name.
_DRIVER_PACKAGES = {
    "MySQLdb": "mysqlclient", "pymysql": "PyMySQL", "mysql": "mysql-connector-python",
    "psycopg": '"psycopg[binary]"', "psycopg2": "psycopg2-binary",
}


class StoreError(RuntimeError):
    """The store cannot be opened or written as asked; the message says why."""


class MissingStoreError(StoreError):
    """The store to be read does not exist (and was not to be created)."""


class ReadOnlyStoreError(StoreError):
    """The store exists but this process may not write it (a read-only file system or permissions)."""


def masked_url(text: str) -> str:
    """``text`` with any password in it replaced by ``***``: how a location appears in messages."""
    try:
        return make_url(text).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", text)


def validate_url(text: str) -> URL:
    """The SQLAlchemy URL ``text``, checked before it is used: it parses, names a database that
    SQLAlchemy knows, and its driver is installed; else a StoreError that names the URL (password
    masked) and what to install or fix."""
    shown = masked_url(text)
    try:
        url = make_url(text)
    except (ArgumentError, ValueError) as error:  # ValueError: a port that is not a number
        raise StoreError(f"Store URL {shown} is not a valid SQLAlchemy URL ({error}); write it as "
                         "dialect+driver://user:password@host:port/database, or give a file path.") from None
    try:
        dialect = url.get_dialect()
    except NoSuchModuleError as error:
        raise StoreError(f"Store URL {shown}: SQLAlchemy knows no database {url.drivername!r}; use a file path, "
                         "sqlite:///PATH or a server URL such as postgresql+psycopg://user@host/db.") from error
    try:
        dialect.import_dbapi()
    except ImportError as error:
        module = error.name or str(error)
        package = _DRIVER_PACKAGES.get(module, module)
        raise StoreError(f"Store URL {shown} needs the Python module {module!r}, which is not installed: "
                         f"pip install {package} (or name another driver in the URL).") from error
    return url


#: Files SQLite keeps beside a database file (write-ahead log, shared memory, rollback journal).
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def sqlite_file(url: str | URL) -> Path | None:
    """The file of an SQLite URL; None for in-memory SQLite and other databases."""
    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite") or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database)


#: Suffixes of the files ``tunekit store export`` writes: a new store there is a mistaken path.
_EXPORT_SUFFIXES = (".csv", ".jsonl", ".json")


def location_url(location: str | os.PathLike, *, read_only: bool = False, create: bool = True) -> str:
    """A SQLAlchemy URL for a path or URL, checked before anything is opened there.

    A URL must be one that can be opened here (``validate_url``). An SQLite file must exist unless
    it may be created (``create``, never when ``read_only``), and be writable unless ``read_only``.
    """
    text = os.fspath(location)
    path = sqlite_file(validate_url(text)) if "://" in text else Path(text).expanduser()
    if path is None:
        return text
    if path.is_dir():
        raise StoreError(f"Store path {path} is a directory; give a file name such as {path / 'tunekit.db'}.")
    for suffix in SQLITE_SIDE_FILES:
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            main = path.with_name(path.name[: -len(suffix)])
            raise StoreError(f"Store path {path} names the {suffix} file SQLite keeps beside the database {main}, "
                             f"which it would overwrite; give the database's own path, {main}.")
    if not path.exists() and path.suffix.lower() in _EXPORT_SUFFIXES:
        raise StoreError(f"Store path {path} ends in {path.suffix}, the suffix of an export, not of a database: "
                         f"give a database path such as {path.with_suffix('.db')}, or merge an export into a store "
                         "with tunekit store import.")
    if not path.exists() and (read_only or not create):
        raise MissingStoreError(f"Store {path} does not exist: check the path (tunekit creates a store only to record "
                         "tunings into it).")
    if not path.parent.exists():
        raise StoreError(f"Store path {path}: directory {path.parent} does not exist.")
    if not read_only and not _writable(path):
        raise ReadOnlyStoreError(f"Store path {path} is not writable here (a read-only file system, or permissions).")
    # a path is taken literally: '?' and '%' in it are not a URL's query and escapes
    literal = str(path.resolve()).replace("%", "%25").replace("?", "%3F").replace("#", "%23")
    return text if "://" in text else f"sqlite:///{literal}"


def _writable(path: Path) -> bool:
    """Whether this process may write ``path`` and create files beside it (SQLite's -wal and -shm)."""
    return os.access(path.parent, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))


def _in_wal_mode(path: Path) -> bool:
    """Whether the SQLite file ``path`` is in WAL mode (its header's read and write versions are 2)."""
    with open(path, "rb") as handle:
        handle.seek(18)
        return handle.read(2) == b"\x02\x02"


def _read_only_uri(path: Path, *, immutable: bool) -> str:
    """An sqlite3 URI that opens ``path`` read-only. ``immutable``: without locks or a wal-index, so
    SQLite creates no -wal or -shm file beside it; only for a file that nobody writes meanwhile."""
    return f"file:{quote(str(path.resolve()))}?mode=ro{'&immutable=1' if immutable else ''}"


def _nobody_writes(path: Path) -> bool:
    """True when no one can be writing ``path``: it or its directory is read-only here (so no write-ahead
    log can appear beside it) and no unmerged write-ahead log lies beside it."""
    log = Path(f"{path}-wal")
    return not _writable(path) and (not log.exists() or log.stat().st_size == 0)


def _readable_copy(path: Path) -> Path:
    """``path`` itself, or, for a WAL store that this process cannot write with a write-ahead log
    beside it (copied onto read-only media after a process was killed), a copy of both in a
    temporary directory of tunekit's: SQLite reads the log only where it can create the lock file
    beside it, and reading the file immutable would ignore the trials still in the log."""
    log = Path(f"{path}-wal")
    if _writable(path) or not log.exists() or log.stat().st_size == 0:
        return path
    version = (path.resolve(), path.stat().st_mtime_ns, log.stat().st_mtime_ns, log.stat().st_size)
    if version in _READABLE_COPIES:
        return _READABLE_COPIES[version]
    directory = Path(tempfile.mkdtemp(prefix="tunekit-read-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    shutil.copyfile(path, directory / path.name)
    shutil.copyfile(log, directory / log.name)
    logger.info("store %s: read through a copy with its write-ahead log in %s", path, directory)
    _READABLE_COPIES[version] = directory / path.name
    return directory / path.name


#: Copies made by ``_readable_copy``, by the file's path and the versions of it and of its log.
_READABLE_COPIES: dict[tuple[Path, int, int, int], Path] = {}


#: Open store connections of this process, by SQLite file (device, inode).
_CONNECTED_HERE: Counter[tuple[int, int]] = Counter()
_CONNECTED_LOCK = threading.Lock()


def _file_id(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_dev, status.st_ino


def _connected_here(path: Path) -> bool:
    """Whether this process holds store connections to the file ``path``: it passed
    ``refuse_foreign_sqlite`` when they were opened, and must not be opened again with a plain file
    handle meanwhile. SQLite's locks are POSIX advisory locks, which belong to the process and the
    file: closing any handle on the file drops every lock of the process's connections to it, and
    another process's checkpoint then overwrites pages under them (a store became "not a database"
    that way)."""
    with _CONNECTED_LOCK:
        return _CONNECTED_HERE[_file_id(path)] > 0


def _count_connections(engine: Engine, path: Path) -> None:
    """Keep ``_CONNECTED_HERE`` as ``engine`` opens and closes connections to ``path``."""
    opened: dict[int, tuple[int, int]] = {}  # by id of the DBAPI connection

    @event.listens_for(engine, "connect")
    def _connected(dbapi_connection, _record):  # pragma: no cover - exercised by every test
        with _CONNECTED_LOCK:
            opened[id(dbapi_connection)] = file_id = _file_id(path)  # the file exists once connected
            _CONNECTED_HERE[file_id] += 1

    @event.listens_for(engine, "close")
    def _closed(dbapi_connection, _record):  # pragma: no cover
        with _CONNECTED_LOCK:
            file_id = opened.pop(id(dbapi_connection), None)
            if file_id is not None:
                _CONNECTED_HERE[file_id] -= 1

    event.listen(engine, "close_detached", lambda dbapi_connection: _closed(dbapi_connection, None))


def refuse_foreign_sqlite(url: str) -> None:
    """Refuse a file that exists and is not a tunekit store, without changing it or creating any
    file beside it. A new path or a 0-byte file may become a store; any other file must hold
    tunekit's tables, so another program's empty SQLite database is never taken over."""
    path = sqlite_file(url)
    if path is None or not path.exists() or path.stat().st_size == 0 or _connected_here(path):
        return
    with open(path, "rb") as handle:
        header = handle.read(len(_SQLITE_MAGIC))
    if header != _SQLITE_MAGIC:
        raise StoreError(f"{path} is not a tunekit store (not an SQLite database); it was left untouched.")
    # A reader of a WAL database creates its -wal and -shm files; where none exist, read it immutable
    # instead. A store that tunekit is creating right now is never seen half-made: it becomes a WAL
    # database only after its tables are committed (make_engine).
    path = _readable_copy(path)
    tables, problems = _inspect_settled(path)
    if problems != ["ok"]:
        raise StoreError(f"{path} is damaged (SQLite says: {'; '.join(problems)}); it was left untouched. "
                         "Restore it from a copy, or give tunekit another path.")
    if "tunekit_meta" not in tables:
        held = f"tables: {', '.join(sorted(tables))}" if tables else "it holds no tables"
        raise StoreError(f"{path} is an SQLite database but not a tunekit store ({held}); it was left untouched.")


#: Pauses (seconds) before each reading of a file by ``_inspect_settled``.
_INSPECTION_PAUSES = (0.0, 0.02, 0.1, 0.3)


def _inspect_settled(path: Path) -> tuple[set[str], list[str]]:
    """``_inspect``, read again after a pause while SQLite finds problems. A WAL store with no
    write-ahead log beside it is read immutable (without locks), and a process that opens it
    meanwhile and checkpoints at its close rewrites pages under that reading: SQLite then cannot
    get a page of a sound store. A damaged file says the same at every reading."""
    log = Path(f"{path}-wal")
    for pause in _INSPECTION_PAUSES:
        time.sleep(pause)
        tables, problems = _inspect(path, immutable=_in_wal_mode(path) and (not log.exists() or _nobody_writes(path)))
        if problems == ["ok"]:
            break
    return tables, problems


def _inspect(path: Path, *, immutable: bool) -> tuple[set[str], list[str]]:
    """The tables of an SQLite file and what a quick integrity check says of it (``["ok"]``)."""
    try:
        connection = sqlite3.connect(_read_only_uri(path, immutable=immutable), uri=True)
    except sqlite3.Error as error:
        return set(), [str(error)]
    try:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        problems = [row[0] for row in connection.execute("PRAGMA quick_check(3)")]
    except sqlite3.DatabaseError as error:
        tables, problems = set(), [str(error)]
    finally:
        connection.close()
    return tables, problems


def make_engine(url: str, *, read_only: bool = False) -> Engine:
    """The engine of a store. SQLite files opened for writing use WAL (set only once the file holds
    tables, so that no other process ever finds an SQLite file without them while a store is being
    created), ``BEGIN IMMEDIATE`` and a long busy timeout; ``read_only`` SQLite files are never
    created and never written by tunekit: opened through a ``mode=ro`` URI where this process may
    not write them, else ``mode=rw`` (so that closing leaves no -wal or -shm file behind). Server
    databases are read-only by never being written."""
    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
    path = sqlite_file(parsed)
    if path is None:
        engine = create_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False})
    elif read_only:
        readable = _readable_copy(path)
        if readable == path and _writable(path):
            # read through a read-write handle that never creates the file: the last one to close
            # merges and removes the -wal and -shm files it made, as a read-only one cannot
            uri = f"file:{quote(str(path.resolve()))}?mode=rw"
        else:
            uri = _read_only_uri(readable, immutable=_nobody_writes(readable))
        engine = create_engine(url, creator=lambda: sqlite3.connect(uri, uri=True, timeout=120,
                                                                    check_same_thread=False))
    else:
        engine = create_engine(url, connect_args={"timeout": 120, "check_same_thread": False})

    if path is not None:
        _count_connections(engine, path)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):  # pragma: no cover - exercised by every test
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves, below
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout=120000")
        if path is not None and not read_only and cursor.execute("PRAGMA page_count").fetchone()[0] > 0:
            _switch_to_wal(cursor)
            # WAL's recommended setting: a commit survives the process's death (a crash, a kill) at
            # once, and the disk is synced at checkpoints, not at every commit (in-flight marks and
            # trials are committed one by one); only a power loss can take the last commits
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection):  # pragma: no cover
        # IMMEDIATE takes the write lock at once, so concurrent writers wait for each other
        # (busy_timeout) instead of failing on a lock upgrade.
        connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

    return engine


def _switch_to_wal(cursor: sqlite3.Cursor, seconds: float = 120.0) -> None:
    """Put the database in WAL mode unless it is already. The switch needs the database to itself,
    and SQLite answers "database is locked" at once, without waiting, while another process reads
    it (one opening the same new store): retry until the switch is made, by us or by the other."""
    deadline = time.monotonic() + seconds
    while cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def memory_copy(engine: Engine) -> Engine:
    """An in-memory SQLite copy of the SQLite database of ``engine``: what a store of an older
    schema is migrated in when it is only read, so that its file stays as it is."""
    memory = sqlite3.connect(":memory:", check_same_thread=False)
    source = engine.raw_connection()
    try:
        driver = source.driver_connection
        assert driver is not None  # a connection just checked out: open
        driver.backup(memory)
    finally:
        source.close()
    return create_engine("sqlite://", creator=lambda: memory, poolclass=StaticPool)


def checkpoint(url: str) -> None:
    """Move an SQLite store's write-ahead log into its .db file and empty the log, so that the .db
    file alone holds every committed trial (a copy of it alone is complete). Nothing to do for
    other databases. Never creates the file: a store deleted meanwhile stays deleted."""
    path = sqlite_file(url)
    if path is None or not path.exists():
        return
    try:
        connection = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=rw", uri=True, timeout=5)
        try:
            busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            connection.close()
    except sqlite3.Error as error:
        logger.warning("store %s: its write-ahead log could not be merged into the file (%s)", path, error)
        return
    if busy:
        logger.info("store %s: another connection was busy; part of its write-ahead log stays in %s-wal",
                    path, path)
