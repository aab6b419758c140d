"""Where a results store lives and how its database is opened.

A store's location is a file path (SQLite) or an SQLAlchemy URL. This module checks a location
before anything is written there, refuses files that are not tunekit stores without touching
them, and makes the engine (SQLite: WAL, ``BEGIN IMMEDIATE``, a long busy timeout). What is
stored, and how, is ``store.py``'s business.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import StaticPool

_SQLITE_MAGIC = b"SQLite format 3\x00"


class StoreError(RuntimeError):
    """The store cannot be opened or written as asked; the message says why."""


def location_url(location: str | os.PathLike) -> str:
    """A SQLAlchemy URL for a path or URL, refusing paths that cannot hold a store."""
    text = os.fspath(location)
    if "://" in text:
        try:
            make_url(text)
        except ArgumentError as error:
            raise StoreError(f"Store URL {text!r} is not a valid SQLAlchemy URL: {error}") from error
        return text
    path = Path(text).expanduser()
    if path.is_dir():
        raise StoreError(f"Store path {path} is a directory; give a file name such as {path / 'tunekit.db'}.")
    if not path.parent.exists():
        raise StoreError(f"Store path {path}: directory {path.parent} does not exist.")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise StoreError(f"Store path {path} is not writable by this user.")
    return f"sqlite:///{path.resolve()}"


def refuse_foreign_sqlite(url: str) -> None:
    """Refuse, without writing a byte, a file that exists and is not a tunekit store."""
    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite") or not parsed.database or parsed.database == ":memory:":
        return
    path = Path(parsed.database)
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb") as handle:
        header = handle.read(len(_SQLITE_MAGIC))
    if header != _SQLITE_MAGIC:
        raise StoreError(f"{path} is not a tunekit store (not an SQLite database); it was left untouched.")
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        problems = [row[0] for row in connection.execute("PRAGMA quick_check(3)")] if tables else ["ok"]
    except sqlite3.DatabaseError as error:
        problems = [str(error)]
    finally:
        connection.close()
    if problems != ["ok"]:
        raise StoreError(f"{path} is damaged (SQLite says: {'; '.join(problems)}); it was left untouched. Restore it "
                         "from a copy, or give tunekit another path.")
    if tables and "tunekit_meta" not in tables:
        raise StoreError(
            f"{path} is an SQLite database but not a tunekit store (tables: {', '.join(sorted(tables))}); "
            "it was left untouched."
        )


def make_engine(url: str) -> Engine:
    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
    if not parsed.database or parsed.database == ":memory:":
        engine = create_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        engine = create_engine(url, connect_args={"timeout": 120, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):  # pragma: no cover - exercised by every test
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves, below
        cursor = dbapi_connection.cursor()
        if parsed.database and parsed.database != ":memory:":
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=120000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection):  # pragma: no cover
        # IMMEDIATE takes the write lock at once, so concurrent writers wait for each other
        # (busy_timeout) instead of failing on a lock upgrade.
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine
