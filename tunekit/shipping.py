"""Tuned configs that travel: exports read back into a store, and winners files served as a store.

``tunekit store export winners.jsonl --winners`` writes the winner of every key; a library ships
that file (inside its wheel, per device) and its users pass it as ``store=``: it is served from
memory, read-only, with no database file and no write access (``winners_store``). ``tunekit store
import`` merges an export of winners or trials into a store, skipping what it already holds.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from . import settings
from .store import KernelIdentity, ResultsStore, StoreError

logger = logging.getLogger(__name__)

#: What a store argument names when it is a winners file.
WINNERS_SUFFIX = ".jsonl"


class ExportError(StoreError):
    """A file that is not an export tunekit can read: the message names the file, line and problem."""


def read_export(source: str | os.PathLike | Any) -> list[dict[str, Any]]:
    """The rows of an export (JSONL or CSV, as ``tunekit store export`` writes them). ``source``
    is a path or anything with ``read_text()`` (a package resource from ``importlib.resources``)."""
    name = str(source)
    try:
        # utf-8-sig: a file saved by an editor that writes a byte-order mark reads as one without
        text = source.read_text(encoding="utf-8-sig") if hasattr(source, "read_text") else \
            Path(source).expanduser().read_text(encoding="utf-8-sig")
    except OSError as error:
        raise ExportError(f"Export {name} could not be read: {error.strerror or error}.") from error
    except UnicodeDecodeError as error:
        raise ExportError(f"Export {name} is not text (JSONL or CSV): {error}.") from error
    if name.endswith(".csv"):
        return [dict(row) for row in csv.DictReader(io.StringIO(text))]
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise ExportError(f"Export {name}, line {number}: not JSON ({error.msg}).") from error
        if not isinstance(row, dict):
            raise ExportError(f"Export {name}, line {number}: a row is a JSON object, not {type(row).__name__}.")
        rows.append(row)
    return rows


def is_winners_file(store: Any) -> bool:
    """Whether a ``store=`` argument names a winners file rather than a database."""
    text = str(store)
    return not isinstance(store, bool) and store is not None and "://" not in text and text.endswith(WINNERS_SUFFIX)


_served: dict[str, ResultsStore] = {}
_served_lock = threading.Lock()


def load_winners(source: str | os.PathLike | Any) -> ResultsStore:
    """A new in-memory store holding the winners of an exported winners file, which is only read:
    what ``open_store`` gives a script or command, its own to close."""
    store = ResultsStore("sqlite://")
    merged = store.merge(read_export(source), source=str(source))
    if merged.trials:
        store.close()
        raise ExportError(f"{source} holds trials, not winners: import it into a store (tunekit store import) and "
                          "use that store.")
    return store


def winners_store(source: str | os.PathLike | Any) -> ResultsStore:
    """``load_winners(source)`` read once per process and shared by every kernel that names the
    file: what ``store=`` serves. Trials of tunings at keys it lacks stay in memory."""
    with _served_lock:
        store = _served.get(str(source))
        if store is None:
            store = _served[str(source)] = load_winners(source)
        return store


def serve_winners(source: str | os.PathLike | Any, identity: KernelIdentity) -> ResultsStore:
    """What ``store=`` a winners file gives the kernel ``identity``: ``winners_store(source)``,
    with a warning when the file holds winners of the kernel only for other Triton builds or
    devices. Offline, a file that cannot be read is an empty store, as a missing database is
    (every key falls back, with a warning)."""
    try:
        store = winners_store(source)
    except StoreError as error:  # unreadable, or a row refused (the file names it)
        if settings.mode() != "offline":
            raise
        logger.warning("%s; %s=offline: using no store", error, settings.ENV_MODE)
        return ResultsStore("sqlite://")
    if not store.winners(identity):
        elsewhere = sorted({f"{row['triton_version']} on {row['device']}" for row in store.winner_rows()
                            if row["kernel_name"] == identity.name and row["source_hash"] == identity.source_hash})
        if elsewhere:
            logger.warning("%s: the winners file %s holds no winner for this Triton build and device (%s %s), only "
                           "for %s: its keys are tuned or fall back", identity.name, source,
                           identity.triton_version, identity.device, "; ".join(elsewhere))
    return store
