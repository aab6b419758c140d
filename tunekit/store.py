"""ResultsStore: every trial ever measured, in SQLite (default) or any SQLAlchemy database.

Contract:
    * ``record`` commits each trial in its own transaction before it returns, so a crash
      loses at most the trial in flight. (SQLite stores sync the disk at checkpoints, not at
      every commit: what a process committed survives its death at once; a power loss may
      take the last commits.)
    * Several processes may write one store at once. SQLite stores use WAL, ``BEGIN
      IMMEDIATE`` and a long busy timeout, so writers queue instead of failing with
      "database is locked"; server databases (PostgreSQL) serialise writers themselves.
    * Trials are keyed by kernel identity (name, source hash, Triton version key), device,
      timing method and tuning key. Trials of the interpreter (device ``"interpreter"``,
      host clock) are never mixed with GPU trials.
    * A file that is not a tunekit store is refused, and neither it nor anything beside it
      changes; tunekit never overwrites or deletes a file it did not create.
    * A store opened ``read_only`` is never created, migrated or written; it can be read on a
      read-only file system.
    * After ``close`` (called at exit for every store this process opened for writing) an
      SQLite store's .db file alone holds every trial: its write-ahead log is merged into it.
    * Returned objects are plain values: later writes never change them.
"""

from __future__ import annotations

import atexit
import json
import logging
import math
import os
import socket
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from sqlalchemy import Column, Float, Index, Integer, Row, String, Text, extract, func, inspect, select, text
from sqlalchemy import delete as sql_delete
from sqlalchemy.exc import DatabaseError, DataError, IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.orm import DeclarativeBase, InstrumentedAttribute, Mapped, Session, mapped_column

from .config import config_from_dict
from .console import finite
from .database import (  # MissingStoreError, ReadOnlyStoreError, StoreError: raised by the store, so imported from it
    MissingStoreError,
    ReadOnlyStoreError,
    StoreError,
    checkpoint,
    location_url,
    make_engine,
    masked_url,
    memory_copy,
    refuse_foreign_sqlite,
    sqlite_file,
)
from .keys import TuningKey
from .trial import CRASHED, Source, Status, Timing, Trial

logger = logging.getLogger(__name__)

#: 1: the first release. 2: trials.relative_error (the output check's largest relative error).
#: 3: runs.costs (what starting and messaging workers cost the run, JSON).
SCHEMA_VERSION = 3


@dataclass(frozen=True)
class KernelIdentity:
    """What makes trials comparable: the same kernel source, compiler, device and timer."""

    name: str
    source_hash: str
    triton_version: str
    device: str
    timing_method: str


@dataclass(frozen=True)
class Deleted:
    """What ``ResultsStore.delete`` deleted (or, in a dry run, would delete)."""

    trials: int
    runs: int
    winners: int
    claims: int = 0


class StoredWinner(NamedTuple):
    """A key's stored winner: its config (JSON), median time, and the hash of the Space it won in."""

    config: str
    median_ms: float | None
    space_hash: str


@dataclass(frozen=True)
class Merged:
    """What ``ResultsStore.merge`` added, and how many rows the store already held."""

    trials: int
    winners: int
    skipped: int


class _Base(DeclarativeBase):
    pass


class _Meta(_Base):
    __tablename__ = "tunekit_meta"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class _TrialRow(_Base):
    __tablename__ = "trials"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kernel_name: Mapped[str] = mapped_column(String(256))
    source_hash: Mapped[str] = mapped_column(String(128))
    triton_version: Mapped[str] = mapped_column(String(128))
    torch_version: Mapped[str] = mapped_column(String(64))
    device: Mapped[str] = mapped_column(String(256))
    timing_method: Mapped[str] = mapped_column(String(64))
    key: Mapped[str] = mapped_column(Text)
    config: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(32))
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    median_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    p20_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    p80_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    compile_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    shared_bytes: Mapped[int | None] = mapped_column(Integer, nullable=True)
    bench_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    relative_error: Mapped[float | None] = mapped_column(Float, nullable=True)
    source: Mapped[str] = mapped_column(String(16))
    strategy: Mapped[str] = mapped_column(String(128))
    run_id: Mapped[str] = mapped_column(String(64), index=True)
    created_at: Mapped[float] = mapped_column(Float)
    __table_args__ = (Index("ix_trials_lookup", "source_hash", "device", "timing_method", "key"),)


class _WinnerRow(_Base):
    __tablename__ = "winners"
    source_hash: Mapped[str] = mapped_column(String(128), primary_key=True)
    triton_version: Mapped[str] = mapped_column(String(128), primary_key=True)
    device: Mapped[str] = mapped_column(String(256), primary_key=True)
    timing_method: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    kernel_name: Mapped[str] = mapped_column(String(256))
    config: Mapped[str] = mapped_column(Text)
    median_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    space_hash: Mapped[str] = mapped_column(String(64))
    run_id: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[float] = mapped_column(Float)


class _InFlightRow(_Base):
    """A config this process is launching in-process and has not measured yet. A process that
    dies in the launch (a segfault no exception reports) leaves its row behind, and a later
    tuning records the config as crashed instead of launching it again."""

    __tablename__ = "in_flight"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kernel_name: Mapped[str] = mapped_column(String(256))
    source_hash: Mapped[str] = mapped_column(String(128))
    triton_version: Mapped[str] = mapped_column(String(128))
    device: Mapped[str] = mapped_column(String(256))
    timing_method: Mapped[str] = mapped_column(String(64))
    key: Mapped[str] = mapped_column(Text)
    config: Mapped[str] = mapped_column(Text)
    run_id: Mapped[str] = mapped_column(String(64))
    host: Mapped[str] = mapped_column(String(256))
    pid: Mapped[int] = mapped_column(Integer)
    #: When that process started (boot id and start time in clock ticks; empty without /proc): a
    #: process id reused by another process (a restarted container) does not pass for the marker's.
    process_start: Mapped[str] = mapped_column(String(64))
    started_at: Mapped[float] = mapped_column(Float)


class _ClaimRow(_Base):
    """Who tunes a (kernel, Space, device kind, key) ahead of time (``tunekit tune``): claimed before
    it is tuned, so that hosts and GPUs sharing a store divide the work. A claim whose owner stops
    renewing it expires and may be taken over; one finished with a winner is not tuned again."""

    __tablename__ = "claims"
    source_hash: Mapped[str] = mapped_column(String(128), primary_key=True)
    triton_version: Mapped[str] = mapped_column(String(128), primary_key=True)
    device: Mapped[str] = mapped_column(String(256), primary_key=True)
    timing_method: Mapped[str] = mapped_column(String(64), primary_key=True)
    space_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    kernel_name: Mapped[str] = mapped_column(String(256))
    #: host:pid:device of the claimer; "" once given back
    owner: Mapped[str] = mapped_column(String(256))
    claimed_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: How the finished tuning ended: "winner", or "failed: why".
    outcome: Mapped[str | None] = mapped_column(Text, nullable=True)
    takeovers: Mapped[int] = mapped_column(Integer, default=0)


class Claim(str, Enum):
    """What ``ResultsStore.claim`` answers."""

    CLAIMED = "claimed"  # the caller tunes the key now
    TAKEN = "taken"  # another owner's live claim: look again later
    DONE = "done"  # finished with a winner
    FAILED = "failed"  # finished without one, after the caller's run began: not retried by this run


class _RunRow(_Base):
    __tablename__ = "runs"
    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    kernel_name: Mapped[str] = mapped_column(String(256))
    source_hash: Mapped[str] = mapped_column(String(128))
    device: Mapped[str] = mapped_column(String(256))
    timing_method: Mapped[str] = mapped_column(String(64))
    key: Mapped[str] = mapped_column(Text)
    strategy: Mapped[str] = mapped_column(String(128))
    budget: Mapped[str] = mapped_column(Text)
    started_at: Mapped[float] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    evaluations: Mapped[int | None] = mapped_column(Integer, nullable=True)
    winner: Mapped[str | None] = mapped_column(Text, nullable=True)
    tuning_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    costs: Mapped[str | None] = mapped_column(Text, nullable=True)


def _add_relative_error(operations: Any) -> None:
    operations.add_column("trials", Column("relative_error", Float, nullable=True))


#: _MIGRATIONS[v] turns a store of schema v into one of schema v + 1.
def _add_run_costs(operations: Any) -> None:
    operations.add_column("runs", Column("costs", Text, nullable=True))


_MIGRATIONS = {1: _add_relative_error, 2: _add_run_costs}


def new_run_id() -> str:
    return uuid.uuid4().hex


def _trial_row(identity: KernelIdentity, key_json: str, trial: Trial, *, strategy: str, run_id: str) -> _TrialRow:
    """The row that stores ``trial``."""
    timing = trial.timing
    return _TrialRow(
        kernel_name=identity.name,
        source_hash=identity.source_hash,
        triton_version=identity.triton_version,
        torch_version=_torch_version(),
        device=identity.device,
        timing_method=identity.timing_method,
        key=key_json,
        config=trial.config_id,
        status=trial.status.value,
        error=trial.error,
        median_ms=timing.median_ms if timing else None,
        p20_ms=timing.p20_ms if timing else None,
        p80_ms=timing.p80_ms if timing else None,
        compile_seconds=trial.compile_seconds,
        shared_bytes=trial.shared_bytes,
        bench_seconds=trial.bench_seconds,
        relative_error=trial.relative_error,
        source=trial.source,
        strategy=strategy,
        run_id=run_id,
        created_at=time.time(),
    )


#: What makes an imported trial the same as a stored one.
_TRIAL_IDENTITY = ("source_hash", "triton_version", "device", "timing_method", "key", "config", "run_id", "source",
                   "created_at")
_WINNER_KEY = ("source_hash", "triton_version", "device", "timing_method", "key")


#: Trial columns that hold a time: a number > 0 where given.
_POSITIVE = ("median_ms", "p20_ms", "p80_ms")
#: Config entries Triton reads as launch options: whole numbers >= 1 where given.
_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas")


#: The budget column of a run made from imported trials: its budget and tuning time are unknown.
IMPORTED_RUN_BUDGET = '{"imported": true}'


def _imported_runs(trials: Sequence[dict[str, Any]], known: set[str], winners: Mapping[str, str]) -> list[_RunRow]:
    """The runs of imported trials that a store lacks (an export holds trials, not runs), so that
    ``store ls`` and ``store show`` list them: each from its trials, started at the first and
    finished at the last, its winner where a winner of that run was imported too."""
    by_run: dict[str, list[dict[str, Any]]] = {}
    for values in trials:
        if values["run_id"] not in known:
            by_run.setdefault(values["run_id"], []).append(values)
    runs = []
    for run_id, rows in by_run.items():
        first = min(rows, key=lambda values: values["created_at"])
        runs.append(_RunRow(run_id=run_id, kernel_name=first["kernel_name"], source_hash=first["source_hash"],
                            device=first["device"], timing_method=first["timing_method"], key=first["key"],
                            strategy=first["strategy"], budget=IMPORTED_RUN_BUDGET, started_at=first["created_at"],
                            finished_at=max(values["created_at"] for values in rows),
                            evaluations=sum(values["source"] == "measured" for values in rows),
                            winner=winners.get(run_id)))
    return runs


def checked_export_rows(rows: Sequence[dict[str, Any]], source: str) -> list[tuple[type[_Base], dict[str, Any]]]:
    """Exported rows (trials or winners) as the store's tables hold them, each checked: the
    kind of row, every column present and of its type, numbers finite (times > 0), a status
    tunekit knows, a config of parameter values (numbers, strings, booleans; launch options
    whole numbers >= 1) and a key that are JSON objects. The first problem is a ``StoreError``
    naming ``source``, the row and the column."""
    parsed: list[tuple[type[_Base], dict[str, Any]]] = []
    for number, row in enumerate(rows, start=1):
        where = f"{source}, row {number}"
        if "status" in row:
            table: type[_Base] = _TrialRow
        elif "space_hash" in row:
            table = _WinnerRow
        else:
            raise StoreError(f"{where}: neither a trial (it has no status) nor a winner (no space_hash); import "
                             "what tunekit store export wrote.")
        columns = {c.key: c for c in inspect(table).columns if c.key != "id"}
        missing = [name for name, column in columns.items() if not column.nullable and row.get(name) in (None, "")]
        if missing:
            raise StoreError(f"{where}: missing {', '.join(missing)}.")
        values = {name: _typed(row.get(name), column, where) for name, column in columns.items()}
        for name, value in values.items():
            if name == "relative_error" and value == math.inf:
                continue  # a wrong output of NaN or infinity: what the check stores, and export writes
            if isinstance(value, float) and (not math.isfinite(value) or (name in _POSITIVE and value <= 0)):
                raise StoreError(f"{where}: {name} {value!r} is not a {'time > 0' if name in _POSITIVE else 'finite number'}.")
        if table is _TrialRow and values["status"] not in {status.value for status in Status}:
            raise StoreError(f"{where}: status {values['status']!r} is not one of "
                             f"{', '.join(status.value for status in Status)}.")
        for name in ("config", "key"):
            try:
                decoded = json.loads(values[name])
                if not isinstance(decoded, dict):
                    raise ValueError
            except ValueError:
                raise StoreError(f"{where}: {name} {values[name]!r} is not a JSON object.") from None
            if name == "config":
                _check_config(decoded, where)
        parsed.append((table, values))
    return parsed


def _check_config(config: dict[str, Any], where: str) -> None:
    for name, value in config.items():
        if name in _LAUNCH_OPTIONS:
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise StoreError(f"{where}: config's {name} {value!r} is not a whole number >= 1.")
        elif isinstance(value, int) and not isinstance(value, bool) and not -2**63 <= value < 2**63:
            raise StoreError(f"{where}: config's {name} {value!r} is out of range for a kernel's integer.")
        elif not (value is None or isinstance(value, (bool, int, str))
                  or (isinstance(value, float) and math.isfinite(value))):
            raise StoreError(f"{where}: config's {name} {value!r} is not a parameter value (a number, a string or "
                             "a boolean).")


def _typed(value: Any, column: Any, where: str) -> Any:
    """``value`` (JSON's, or CSV's text) as ``column`` stores it; "" is None where the column allows it."""
    if value is None or (value == "" and column.nullable):
        return None
    python_type = column.type.python_type
    try:
        if isinstance(value, bool) or (python_type is str and not isinstance(value, str)):
            raise ValueError
        if isinstance(value, python_type):
            return value
        if python_type is float and isinstance(value, int):
            return float(value)
        if python_type in (int, float) and isinstance(value, str):
            return python_type(value)
        raise ValueError
    except OverflowError:
        raise StoreError(f"{where}: {column.key} {value!r} is out of range for a {python_type.__name__}.") from None
    except (TypeError, ValueError):
        raise StoreError(f"{where}: {column.key} {value!r} is not a{'n' if python_type is int else ''} "
                         f"{python_type.__name__}.") from None


def _claim_primary(identity: KernelIdentity, space_hash: str, key_json: str) -> dict[str, str]:
    """A claim's primary key, in the column order of ``_ClaimRow``."""
    return {"source_hash": identity.source_hash, "triton_version": identity.triton_version,
            "device": identity.device, "timing_method": identity.timing_method, "space_hash": space_hash,
            "key": key_json}


def _store_time(session: Session) -> float:
    """Seconds since the epoch by the database server's clock (PostgreSQL), else this host's."""
    if session.get_bind().dialect.name == "postgresql":
        seconds = session.scalar(select(extract("epoch", func.clock_timestamp())))
        assert seconds is not None  # a select without a table: one row, the server's clock
        return float(seconds)
    return time.time()


def _put_winner(session: Session, primary: dict[str, str], values: dict[str, Any]) -> None:
    """Insert or replace the winner row ``primary`` names. Two processes finishing runs of one key
    at once on a server database may both find no row; the later insert then fails on the primary
    key inside its savepoint, and it updates the row the other one committed instead."""
    identity = tuple(primary.values())
    row = session.get(_WinnerRow, identity)
    if row is None:
        try:
            with session.begin_nested():
                session.add(_WinnerRow(**primary, **values))
            return
        except IntegrityError:
            row = session.get(_WinnerRow, identity, populate_existing=True)
    for name, value in values.items():
        setattr(row, name, value)


def _process_start(pid: int) -> str:
    """When process ``pid`` of this host started: the boot's id and the process's start time in
    clock ticks since boot (``/proc``), or "" where there is no ``/proc``."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return f"{boot}:{fields[19]}"
    except (OSError, IndexError):
        return ""


def _process_alive(pid: int, started: str) -> bool:
    """Whether the process ``pid`` that started at ``started`` (``_process_start``) still runs on
    this host; another process that now has its id does not count."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process has this id now
        pass
    return not started or _process_start(pid) == started


def _missing_columns(session: Session) -> list[Column[Any]]:
    """The columns of this schema that the store's tables lack."""
    inspector = inspect(session.connection())
    return [column for table in _Base.metadata.sorted_tables for column in table.columns
            if column.name not in {c["name"] for c in inspector.get_columns(table.name)}]


def owner_died_on_this_host(owner: str) -> bool:
    """Whether a claim's ``owner`` (host:pid:...) was a process of this host that is gone: its
    claim is taken over at once, not when its lease ends."""
    host, _, rest = owner.partition(":")
    pid = rest.split(":", 1)[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's live process
        return False
    return False


def trial_from_row(row: Mapping[str, Any]) -> Trial:
    """A stored trial as a ``Trial`` answered by the store: from a row of ``ResultsStore.rows``,
    an export read back, or the trials table. The one place a row becomes a trial: its crash
    (an error text beginning with ``CRASHED``) becomes the ``crashed`` field here."""
    median = row.get("median_ms")
    status = Status(row["status"])
    error = row.get("error")
    return Trial(
        config=config_from_dict(json.loads(row["config"])),
        status=status,
        timing=Timing(median, row.get("p20_ms"), row.get("p80_ms")) if median is not None else None,
        compile_seconds=row.get("compile_seconds"),
        error=error,
        key=TuningKey.from_json(row["key"]),
        source=Source.STORE,
        crashed=status is Status.RUNTIME_ERROR and (error or "").startswith(CRASHED),
        shared_bytes=row.get("shared_bytes"),
        bench_seconds=row.get("bench_seconds"),
        relative_error=row.get("relative_error"),
    )


class ResultsStore:
    """The trials of every tuning, in one database.

    Args:
        url: a file path (SQLite) or any SQLAlchemy URL, e.g. ``postgresql+psycopg://host/db``;
            ``"sqlite://"`` keeps everything in memory.
        read_only: open an existing store for reading only: what ``tunekit store ls`` and the other
            reading commands do, so that a mistyped path is an error instead of a new store, and a
            store on a read-only file system can be read.
        create: create the store if it does not exist (never when ``read_only``).
    """

    def __init__(self, url: str | os.PathLike, *, read_only: bool = False, create: bool = True) -> None:
        self.url = location_url(url, read_only=read_only, create=create)
        self.read_only = read_only
        refuse_foreign_sqlite(self.url)
        self._engine = make_engine(self.url, read_only=read_only)
        # a store dropped without close() lets go of its connections too (database.py counts them)
        weakref.finalize(self, self._engine.dispose)
        if read_only:
            self._open_for_reading()
            return
        self._initialise()
        if sqlite_file(self.url) is not None:  # the file holds tables now: new connections put it in WAL mode
            self._engine.dispose()
            self._engine.raw_connection().close()
        self._pid = os.getpid()
        _open_for_writing.add(self)

    @property
    def shared(self) -> bool:
        """Whether other processes may tune into this store at the same time: a database that
        persists and is open for writing."""
        return not self.read_only and str(self.url).split("?")[0] not in ("sqlite://", "sqlite:///:memory:")

    @property
    def shown_url(self) -> str:
        """The store's URL as messages and listings show it: any password masked."""
        return masked_url(self.url)

    def _initialise(self) -> None:
        """Create the tables of a new store, or migrate an older one, in one transaction.

        Two processes opening a new or old store at once both try; the second waits for the
        first (SQLite's write lock, PostgreSQL's row lock) or, if both created tables at the
        same moment, retries and finds the work done.
        """
        for attempt in range(3):
            try:
                with self._session() as session:
                    _Base.metadata.create_all(session.connection())
                    statement = select(_Meta).where(_Meta.name == "schema_version").with_for_update()
                    version = session.scalars(statement).first()
                    if version is None:
                        session.add(_Meta(name="schema_version", value=str(SCHEMA_VERSION)))
                    else:
                        version.value = str(self._migrate(session, int(version.value)))
                    self._refuse_missing_columns(session)
                return
            except (IntegrityError, ProgrammingError) as error:  # a concurrent creator won the race
                if attempt == 2:
                    raise StoreError(f"Store {self.shown_url} could not be initialised: {error.orig}") from error
            except (OperationalError, DatabaseError) as error:
                raise self._unreadable(error) from error

    def _refuse_missing_columns(self, session: Session) -> None:
        """A store whose tables lack columns of this schema (changed by hand or by another
        program): a StoreError naming them, before a tuning fails on them part way."""
        missing = _missing_columns(session)
        if missing:
            raise StoreError(f"Store {self.shown_url} lacks the column{'s' if len(missing) > 1 else ''} "
                             f"{', '.join(f'{c.table.name}.{c.name}' for c in missing)} of its schema: it was changed "
                             "by something other than tunekit. Export what it holds (tunekit store export) into a new "
                             "store, or give another store.")

    def _unreadable(self, error: DatabaseError) -> StoreError:
        return StoreError(f"Store {self.shown_url} could not be opened ({error.orig}); if it is a file, it is "
                          "not a readable tunekit store and was left untouched.")

    def _open_for_reading(self) -> None:
        """Check that an existing store can be read by this tunekit, touching nothing. A store of an
        older schema is read through a copy migrated in memory (SQLite; a server database must be
        opened for writing once to migrate it)."""
        try:
            with self._session() as session:
                if not inspect(session.connection()).has_table(_Meta.__tablename__):
                    raise StoreError(f"Store {self.shown_url} holds no tunekit store (its tables are missing).")
                stored = session.scalar(select(_Meta.value).where(_Meta.name == "schema_version"))
                version = int(stored) if stored is not None else SCHEMA_VERSION
        except (OperationalError, DatabaseError) as error:
            raise self._unreadable(error) from error
        self._refuse_newer(version)
        if version == SCHEMA_VERSION:
            with self._session() as session:
                missing = _missing_columns(session)
                if not missing:
                    return
                if sqlite_file(self.url) is None:
                    self._refuse_missing_columns(session)
            # read through a copy with the missing columns added (empty), so that what it holds can be exported
            self._engine = memory_copy(self._engine)
            with Session(self._engine) as session, session.begin():
                for column in missing:
                    session.execute(text(f'ALTER TABLE "{column.table.name}" ADD COLUMN "{column.name}" '
                                         f"{column.type.compile(dialect=self._engine.dialect)}"))
            logger.warning("store %s lacks %s of its schema: read through a copy where they are empty",
                           self.shown_url, ", ".join(f"{c.table.name}.{c.name}" for c in missing))
            return
        if sqlite_file(self.url) is None:
            raise StoreError(f"Store {self.shown_url} has schema version {version}, older than this tunekit's "
                             f"{SCHEMA_VERSION}: open it once for writing (tune with it) to migrate it.")
        copy = memory_copy(self._engine)
        self._engine.dispose()
        self._engine = copy
        with Session(copy) as session, session.begin():
            self._migrate(session, version)
        logger.info("store %s has schema %d: read through a copy migrated in memory", self.shown_url, version)

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise StoreError(f"Store {self.shown_url} has schema version {version}, newer than this tunekit's "
                             f"{SCHEMA_VERSION}: upgrade tunekit.")

    def _migrate(self, session: Session, version: int) -> int:
        """Bring a store of an older schema up to ``SCHEMA_VERSION``; every trial is kept."""
        self._refuse_newer(version)
        if version < SCHEMA_VERSION:
            from alembic.migration import MigrationContext
            from alembic.operations import Operations

            operations = Operations(MigrationContext.configure(session.connection()))
            for step in range(version, SCHEMA_VERSION):
                _MIGRATIONS[step](operations)
            logger.info("store %s migrated from schema %d to %d", self.url, version, SCHEMA_VERSION)
        return SCHEMA_VERSION

    @contextmanager
    def _session(self, *, write: bool = False) -> Iterator[Session]:
        if write and self.read_only:
            raise StoreError(f"Store {self.shown_url} was opened read-only; open it without read_only to write.")
        with Session(self._engine) as session, session.begin():
            yield session

    def __enter__(self) -> "ResultsStore":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Let go of the database. A store opened for writing is checkpointed first, so that an SQLite
        store's .db file alone holds every trial. The store stays usable: a later call reconnects."""
        self._engine.dispose()
        if not self.read_only:
            checkpoint(self.url)

    # -- writing --------------------------------------------------------------------------

    def record(self, identity: KernelIdentity, key_json: str, trial: Trial, *, strategy: str, run_id: str) -> None:
        """Commit one trial now."""
        with self._session(write=True) as session:
            session.add(_trial_row(identity, key_json, trial, strategy=strategy, run_id=run_id))

    @contextmanager
    def in_flight(self, identity: KernelIdentity, key_json: str, config_id: str, *,
                  run_id: str) -> Iterator[Callable[[], None]]:
        """Mark ``config_id`` as being launched by this process while the block runs. Should the
        process die in it, ``record_crashes`` finds the mark; a block that ends in any other way
        (an exception included) removes it. Yields what removes it sooner (a process stopped from
        outside, which the config did not crash)."""
        row = _InFlightRow(kernel_name=identity.name, source_hash=identity.source_hash,
                           triton_version=identity.triton_version, device=identity.device,
                           timing_method=identity.timing_method, key=key_json, config=config_id, run_id=run_id,
                           host=socket.gethostname(), pid=os.getpid(), process_start=_process_start(os.getpid()),
                           started_at=time.time())
        with self._session(write=True) as session:
            session.add(row)
            session.flush()
            row_id = row.id

        def clear() -> None:
            with self._session(write=True) as session:
                session.execute(sql_delete(_InFlightRow).where(_InFlightRow.id == row_id))

        try:
            yield clear
        finally:
            clear()

    def record_crashes(self, identity: KernelIdentity) -> list[Trial]:
        """Configs of this kernel identity left in flight by a process of this host that is gone:
        each recorded as a crashed ``runtime_error`` trial of its key and run, its mark removed,
        all in one transaction. Marks of live processes, and of other hosts (whose processes this
        one cannot see), are left as they are."""
        host = socket.gethostname()
        statement = self._identity_filter(select(_InFlightRow), identity, _InFlightRow).where(
            _InFlightRow.host == host).with_for_update()
        crashed = []
        with self._session(write=True) as session:
            for mark in session.scalars(statement).all():
                if _process_alive(mark.pid, mark.process_start):
                    continue
                trial = Trial(config_from_dict(json.loads(mark.config)), Status.RUNTIME_ERROR,
                              error=f"{CRASHED} process {mark.pid} on {host} died while launching it in-process "
                                    "(a fault no exception reports, such as a segfault)",
                              key=TuningKey.from_json(mark.key), crashed=True)
                session.add(_trial_row(identity, mark.key, trial, strategy="crash", run_id=mark.run_id))
                session.delete(mark)
                crashed.append(trial)
        return crashed

    def start_run(self, identity: KernelIdentity, key_json: str, *, strategy: str, budget: Any, run_id: str) -> None:
        with self._session(write=True) as session:
            session.add(
                _RunRow(
                    run_id=run_id,
                    kernel_name=identity.name,
                    source_hash=identity.source_hash,
                    device=identity.device,
                    timing_method=identity.timing_method,
                    key=key_json,
                    strategy=strategy,
                    budget=json.dumps(asdict(budget)) if budget is not None else "{}",
                    started_at=time.time(),
                )
            )

    def finish_run(
        self,
        identity: KernelIdentity,
        key_json: str,
        *,
        run_id: str,
        winner: Trial | None,
        evaluations: int,
        tuning_seconds: float,
        space_hash: str,
        costs: Mapping[str, object] | None = None,
    ) -> None:
        """Close a run and, when it found one, make its winner the key's stored winner.
        ``costs``: what the run spent besides its evaluations (starting workers, messaging)."""
        now = time.time()
        with self._session(write=True) as session:
            run = session.get(_RunRow, run_id)
            if run is not None:
                run.finished_at = now
                run.evaluations = evaluations
                run.tuning_seconds = tuning_seconds
                run.winner = winner.config_id if winner else None
                run.costs = json.dumps(costs, sort_keys=True) if costs else None
            if winner is None:
                return
            primary = {"source_hash": identity.source_hash, "triton_version": identity.triton_version,
                       "device": identity.device, "timing_method": identity.timing_method, "key": key_json}
            _put_winner(session, primary, {
                "kernel_name": identity.name,
                "config": winner.config_id,
                "median_ms": winner.time_ms if winner.ok else None,
                "space_hash": space_hash,
                "run_id": run_id,
                "created_at": now,
            })

    # -- claims (tuning ahead of time) ---------------------------------------------------------

    def claim(self, identity: KernelIdentity, space_hash: str, key_json: str, *, owner: str, lease: float,
              retry_failed_before: float = 0.0) -> Claim:
        """Try to claim the tuning of ``key_json`` over the Space ``space_hash`` for ``owner`` for
        ``lease`` seconds, in one transaction. ``CLAIMED``: new, given back, expired, failed before
        ``retry_failed_before`` (a store time: an earlier run's failure is tried again), or already
        ``owner``'s; ``DONE``: finished with a winner the store still holds for this Space;
        ``FAILED``: finished without one since then;
        ``TAKEN``: another owner's live claim, or one being claimed this instant (the row is locked
        with ``FOR UPDATE SKIP LOCKED`` on servers, so no claimer waits). Times are the database
        server's where there is one, so that hosts' clocks need not agree."""
        primary = _claim_primary(identity, space_hash, key_json)
        with self._session(write=True) as session:
            now = _store_time(session)
            statement = select(_ClaimRow).filter_by(**primary).with_for_update(skip_locked=True)
            row = session.scalars(statement).first()
            if row is None:
                if session.get(_ClaimRow, tuple(primary.values())) is not None:
                    return Claim.TAKEN  # locked by a claimer in another transaction
                try:
                    with session.begin_nested():
                        session.add(_ClaimRow(**primary, kernel_name=identity.name, owner=owner, claimed_at=now,
                                              expires_at=now + lease, takeovers=0))
                except IntegrityError:
                    return Claim.TAKEN
                return Claim.CLAIMED
            if row.finished_at is not None:
                winner = session.get(_WinnerRow, tuple(primary[c] for c in _WINNER_KEY))
                if row.outcome == "winner" and winner is not None and winner.space_hash == space_hash:
                    return Claim.DONE
                if row.outcome != "winner" and row.finished_at >= retry_failed_before:
                    return Claim.FAILED
                # failed in an earlier run, or its winner deleted or replaced by another Space's: tune again
                row.finished_at, row.outcome = None, None
            elif row.owner not in ("", owner) and row.expires_at > now and not owner_died_on_this_host(row.owner):
                return Claim.TAKEN
            elif row.owner not in ("", owner):
                if row.expires_at > now:
                    logger.info("%s %s: %s, which claimed this key, is gone; %s takes it over", identity.name,
                                key_json, row.owner, owner)
                else:
                    logger.warning("%s %s: the claim of %s expired %.0f s ago; %s takes it over", identity.name,
                                   key_json, row.owner, now - row.expires_at, owner)
                row.takeovers += 1
            row.owner, row.claimed_at, row.expires_at = owner, now, now + lease
            return Claim.CLAIMED

    def renew_claim(self, identity: KernelIdentity, space_hash: str, key_json: str, *, owner: str,
                    lease: float) -> bool:
        """Extend ``owner``'s claim by ``lease`` seconds from now; False if it is no longer theirs."""
        with self._session(write=True) as session:
            row = session.get(_ClaimRow, tuple(_claim_primary(identity, space_hash, key_json).values()),
                              with_for_update=True)
            if row is None or row.owner != owner or row.finished_at is not None:
                return False
            row.expires_at = _store_time(session) + lease
            return True

    def release_claim(self, identity: KernelIdentity, space_hash: str, key_json: str, *, owner: str,
                      outcome: str | None = None) -> None:
        """End ``owner``'s claim: finished with ``outcome`` (``"winner"``, or ``"failed: why"``), or,
        without one, given back for anyone to claim at once."""
        with self._session(write=True) as session:
            row = session.get(_ClaimRow, tuple(_claim_primary(identity, space_hash, key_json).values()),
                              with_for_update=True)
            if row is None or row.owner != owner:
                return
            now = _store_time(session)
            if outcome is None:
                row.owner, row.expires_at = "", now
            else:
                row.finished_at, row.outcome = now, outcome

    def claims(self, identity: KernelIdentity, space_hash: str) -> dict[str, dict[str, Any]]:
        """The claims on ``identity``'s keys over that Space: key JSON -> owner, expires_at,
        finished_at, outcome, takeovers (times are the store's: compare with ``store_time``)."""
        with self._session() as session:
            if not inspect(session.connection()).has_table(_ClaimRow.__tablename__):
                return {}  # a store only read, written by a tunekit before tunekit tune
            rows = session.scalars(select(_ClaimRow).filter_by(
                source_hash=identity.source_hash, triton_version=identity.triton_version, device=identity.device,
                timing_method=identity.timing_method, space_hash=space_hash)).all()
            return {row.key: {"owner": row.owner, "expires_at": row.expires_at, "finished_at": row.finished_at,
                              "outcome": row.outcome, "takeovers": row.takeovers} for row in rows}

    def store_time(self) -> float:
        """Now, by the clock claims are timed with: the database server's, or this host's."""
        with self._session() as session:
            return _store_time(session)

    # -- merging exports ----------------------------------------------------------------------

    def merge(self, rows: Sequence[dict[str, Any]], *, source: str = "rows") -> Merged:
        """Add the exported rows (trials as ``rows()`` gives them, winners as ``winner_rows()``:
        ``tunekit store export``'s JSONL or CSV read back) that this store lacks, in one transaction.
        A trial is held already when one of the same kernel, device, key, config, run, source and
        time is; a winner when the key has one (the store's own is kept). Every row is checked
        first (``checked_export_rows``), and nothing is added when one is refused."""
        parsed = checked_export_rows(rows, source)
        added = {_TrialRow: 0, _WinnerRow: 0}
        skipped = 0
        try:
            with self._session(write=True) as session:
                # rows compare and hash as the tuples of their values
                held: dict[type[_Base], set[Row[Any] | tuple[Any, ...]]] = {
                    _TrialRow: set(session.execute(select(*(getattr(_TrialRow, c) for c in _TRIAL_IDENTITY)))),
                    _WinnerRow: set(session.execute(select(*(getattr(_WinnerRow, c) for c in _WINNER_KEY))))}
                for table, values in parsed:
                    identity = tuple(values[c] for c in (_TRIAL_IDENTITY if table is _TrialRow else _WINNER_KEY))
                    if identity in held[table]:
                        skipped += 1
                        continue
                    held[table].add(identity)
                    session.add(table(**values))
                    added[table] += 1
                imported = [values for table, values in parsed if table is _TrialRow]
                known = set(session.scalars(select(_RunRow.run_id).where(
                    _RunRow.run_id.in_({values["run_id"] for values in imported}))))
                winners = {values["run_id"]: values["config"] for table, values in parsed if table is _WinnerRow}
                for run in _imported_runs(imported, known, winners):
                    session.add(run)
        except (DataError, IntegrityError) as error:  # a value the database's column cannot hold
            raise StoreError(f"{source}: the store refused a row ({error.orig}); nothing was imported.") from error
        merged = Merged(added[_TrialRow], added[_WinnerRow], skipped)
        logger.info("store %s: merged %s from %s", self.shown_url, merged, source)
        return merged

    # -- deleting -------------------------------------------------------------------------

    def delete(
        self,
        *,
        run_id: str | None = None,
        kernel: str | None = None,
        key: str | None = None,
        status: str | None = None,
        dry_run: bool = False,
    ) -> Deleted:
        """Delete the trials that match every filter given, in one transaction: how a user cleans up
        what an older tunekit stored. Without ``status``, the runs and stored winners that match go
        too (a kernel's or key's next call then tunes again), and without ``run_id`` also the
        claims of ``tunekit tune`` (so that it tunes them again); with ``status``, only trials. At
        least one filter; ``dry_run`` counts and deletes nothing."""
        if run_id is None and kernel is None and key is None and status is None:
            raise ValueError("delete needs at least one of run_id, kernel, key, status; nothing was deleted.")
        filters: dict[type[_Base], list[tuple[InstrumentedAttribute[str], str | None]]] = {
            _TrialRow: [(_TrialRow.run_id, run_id), (_TrialRow.kernel_name, kernel), (_TrialRow.key, key),
                        (_TrialRow.status, status)]}
        if status is None:
            filters[_RunRow] = [(_RunRow.run_id, run_id), (_RunRow.kernel_name, kernel), (_RunRow.key, key)]
            filters[_WinnerRow] = [(_WinnerRow.run_id, run_id), (_WinnerRow.kernel_name, kernel),
                                   (_WinnerRow.key, key)]
            if run_id is None:
                filters[_ClaimRow] = [(_ClaimRow.kernel_name, kernel), (_ClaimRow.key, key)]
        counts: dict[type[_Base], int] = {_TrialRow: 0, _RunRow: 0, _WinnerRow: 0, _ClaimRow: 0}
        with self._session(write=not dry_run) as session:
            if not inspect(session.connection()).has_table(_ClaimRow.__tablename__):
                filters.pop(_ClaimRow, None)  # a store read-only here, from before tunekit tune
            for table, pairs in filters.items():
                conditions = [column == value for column, value in pairs if value is not None]
                counts[table] = session.scalar(select(func.count()).select_from(table).where(*conditions)) or 0
                if not dry_run and counts[table]:
                    session.execute(sql_delete(table).where(*conditions))
        deleted = Deleted(counts[_TrialRow], counts[_RunRow], counts[_WinnerRow], counts[_ClaimRow])
        if not dry_run:
            logger.info("store %s: deleted %s", self.shown_url, deleted)
        return deleted

    # -- reading --------------------------------------------------------------------------

    def _identity_filter(self, statement, identity: KernelIdentity,
                         row: type[_TrialRow | _InFlightRow] = _TrialRow):
        """``statement`` narrowed to the rows (of ``row``'s table) of this kernel identity."""
        return statement.where(
            row.source_hash == identity.source_hash,
            row.triton_version == identity.triton_version,
            row.device == identity.device,
            row.timing_method == identity.timing_method,
        )

    def history(self, identity: KernelIdentity) -> list[Trial]:
        """Every measured trial of this kernel identity, on every key, oldest first."""
        statement = self._identity_filter(select(_TrialRow), identity).where(_TrialRow.source != "retimed")
        with self._session() as session:
            rows = session.scalars(statement.order_by(_TrialRow.id)).all()
            columns = [c.key for c in inspect(_TrialRow).columns]
            return [trial_from_row({name: getattr(row, name) for name in columns}) for row in rows]

    def winners(self, identity: KernelIdentity) -> dict[str, StoredWinner]:
        """Stored winners of this kernel identity, by key JSON."""
        statement = select(_WinnerRow).where(
            _WinnerRow.source_hash == identity.source_hash,
            _WinnerRow.triton_version == identity.triton_version,
            _WinnerRow.device == identity.device,
            _WinnerRow.timing_method == identity.timing_method,
        )
        with self._session() as session:
            return {row.key: StoredWinner(row.config, row.median_ms, row.space_hash)
                    for row in session.scalars(statement)}

    def rows(
        self,
        *,
        kernel: str | None = None,
        device: str | None = None,
        key: str | None = None,
        strategy: str | None = None,
        run_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """Trials as plain dicts (every column), filtered by whatever is given; oldest first."""
        statement = select(_TrialRow)
        for column, value in (
            (_TrialRow.kernel_name, kernel),
            (_TrialRow.device, device),
            (_TrialRow.key, key),
            (_TrialRow.strategy, strategy),
            (_TrialRow.run_id, run_id),
        ):
            if value is not None:
                statement = statement.where(column == value)
        with self._session() as session:
            rows = session.scalars(statement.order_by(_TrialRow.id)).all()
            columns = [c.key for c in inspect(_TrialRow).columns]
            return [{name: getattr(row, name) for name in columns} for row in rows]

    def runs(self, kernel: str | None = None) -> list[dict[str, Any]]:
        """Runs as plain dicts (every column), oldest first. A run that never got to count its
        evaluations (killed, or interrupted: closed with none) has the count of its measured trials
        in the store as ``evaluations``."""
        statement = select(_RunRow).order_by(_RunRow.started_at)
        if kernel is not None:
            statement = statement.where(_RunRow.kernel_name == kernel)
        with self._session() as session:
            columns = [c.key for c in inspect(_RunRow).columns]
            runs = [{name: getattr(row, name) for name in columns} for row in session.scalars(statement)]
            if any(not run["evaluations"] for run in runs):
                uncounted = select(_RunRow.run_id).where((_RunRow.evaluations.is_(None)) | (_RunRow.evaluations == 0))
                measured = dict(session.execute(
                    select(_TrialRow.run_id, func.count())
                    .where(_TrialRow.run_id.in_(uncounted), _TrialRow.source == "measured")
                    .group_by(_TrialRow.run_id)
                ).all())
                for run in runs:
                    if not run["evaluations"] and run["run_id"] in measured:
                        run["evaluations"] = measured[run["run_id"]]
            return runs

    def winner_rows(self) -> list[dict[str, Any]]:
        with self._session() as session:
            columns = [c.key for c in inspect(_WinnerRow).columns]
            rows = session.scalars(select(_WinnerRow).order_by(_WinnerRow.kernel_name, _WinnerRow.key))
            return [{name: getattr(row, name) for name in columns} for row in rows]

    def __repr__(self) -> str:
        return f"ResultsStore({self.shown_url!r}{', read_only=True' if self.read_only else ''})"


#: Stores this process opened for writing, closed at exit (``_close_at_exit``).
_open_for_writing: weakref.WeakSet[ResultsStore] = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    """Close every store this process opened for writing, so that after a normal exit each SQLite
    file alone holds its trials: Python never closes what a thread still holds at exit, and SQLite
    merges its write-ahead log into the file only when the last connection closes. Stores inherited
    by a forked child are left to the parent."""
    for store in list(_open_for_writing):
        if store._pid != os.getpid():
            continue
        try:
            store.close()
        except Exception as error:  # noqa: BLE001 - exit goes on; the trials are committed either way
            logger.warning("store %s could not be closed at exit: %s", store.shown_url, error)


def _torch_version() -> str:
    try:
        import torch

        return torch.__version__
    except ImportError:  # pragma: no cover - torch is a dependency
        return ""


#: The formats of ``export_rows``: rows that ``tunekit store import`` reads back.
EXPORT_FORMATS = ("csv", "jsonl")


def export_rows(rows: Sequence[dict[str, Any]], path: str | os.PathLike, fmt: str | None = None) -> Path:
    """Write rows to CSV or JSONL (by ``fmt`` or the file's suffix). Refuses to overwrite; a write
    that fails part way removes the file it created, so no half file is left."""
    target = Path(path)
    fmt = (fmt or target.suffix.lstrip(".") or "csv").lower()
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"Export format must be 'csv' or 'jsonl'. Got {fmt!r} instead.")
    if target.exists():
        raise FileExistsError(f"{target} exists; tunekit does not overwrite files. Choose another name.")
    handle = open(target, "x", newline="")
    try:
        with handle:
            write_export(rows, handle, fmt)
    except BaseException:
        target.unlink(missing_ok=True)  # the file this call created, half written
        raise
    return target


def write_export(rows: Sequence[dict[str, Any]], stream: TextIO, fmt: str) -> None:
    """Write rows to an open text stream as CSV or JSONL (what ``tunekit store import`` reads)."""
    import csv

    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"Export format must be 'csv' or 'jsonl'. Got {fmt!r} instead.")
    if fmt == "jsonl":
        for row in rows:
            # A wrong output's infinite error as "inf", which the import reads back: strict JSON
            stream.write(json.dumps(finite(row, as_text=True), default=str, allow_nan=False) + "\n")
    else:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]) if rows else [])
        writer.writeheader()
        writer.writerows(rows)
