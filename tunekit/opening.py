"""What ``store=`` names, opened in one place for kernels, ``tunekit`` commands and scripts.

A path or SQLAlchemy URL is a database; ``True`` the default one (``$TUNEKIT_STORE``, else a
SQLite file in the user's cache directory); ``None`` or ``False`` a store in memory (nothing
persists, as with stock ``triton.autotune``); a winners file (``.jsonl``, from ``tunekit store
export --winners``; a path or a package resource from ``importlib.resources``) is read into
memory and never written: kernels that name it share one copy, any other caller gets its own to
close. A kernel's store (``kernel=`` given) keeps
the kernel running where a command would stop: in offline mode it is only read, and one that
does not exist is empty; one this process may not write is read into memory.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from . import settings
from .shipping import is_winners_file, load_winners, serve_winners
from .store import KernelIdentity, MissingStoreError, ReadOnlyStoreError, ResultsStore

logger = logging.getLogger(__name__)


def open_store(store: str | os.PathLike | ResultsStore | None | bool = True, *, read_only: bool = False,
               create: bool = True, kernel: KernelIdentity | None = None) -> ResultsStore:
    """The ResultsStore that ``store`` names (see the module's docstring); a ResultsStore itself
    as it is. ``read_only`` and ``create`` as for ResultsStore. ``kernel``: the kernel whose
    tunings it serves, which it keeps running (offline, a store that does not exist is an empty
    one; one that cannot be written is read into memory; a warning says so)."""
    if isinstance(store, ResultsStore):
        return store
    if store is None or store is False:
        return ResultsStore("sqlite://")
    if store is True and is_winners_file(settings.store_url()):  # $TUNEKIT_STORE names a winners file
        store = settings.store_url()
    if is_winners_file(store):  # before the type check: a package resource is no os.PathLike
        return serve_winners(store, kernel) if kernel is not None else load_winners(store)
    if not isinstance(store, (bool, str, os.PathLike)):
        raise TypeError(f"store must be a path, an SQLAlchemy URL, a ResultsStore, True or None. Got {store!r} "
                        "instead.")
    if kernel is None:
        return _database(store, read_only=read_only, create=create)
    if settings.mode() == "offline":  # never tunes: only read, and never created
        try:
            return _database(store, read_only=True, create=False)
        except MissingStoreError as error:
            logger.warning("%s; %s=offline: using no store", error, settings.ENV_MODE)
            return ResultsStore("sqlite://")
    try:
        return _database(store, read_only=read_only, create=create)
    except ReadOnlyStoreError as error:  # a tuned store shipped on read-only media, say
        logger.warning("%s: reading it into memory; its winners are served, and what this process tunes is not "
                       "kept after it exits", error)
        return _memory_copy(store)


def _database(store: str | os.PathLike | bool, *, read_only: bool, create: bool) -> ResultsStore:
    if not isinstance(store, bool):
        return ResultsStore(store, read_only=read_only, create=create)
    url = settings.store_url()  # True: the default store
    if "://" not in url and create and not read_only:
        directory = Path(url).expanduser().parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:  # a read-only home in a container, say
            raise ReadOnlyStoreError(f"Store path {url}: its directory {directory} cannot be created "
                                     f"({(error.strerror or str(error)).lower()}).") from None
    return ResultsStore(url, read_only=read_only, create=create)


def _memory_copy(location: str | os.PathLike | bool) -> ResultsStore:
    """An in-memory store holding the trials (with their runs) and winners of the store at
    ``location``, which is only read (one that does not exist: an empty one)."""
    if isinstance(location, bool):  # store=True: the default store
        location = settings.store_url()
    try:
        source = ResultsStore(location, read_only=True)
    except MissingStoreError:
        return ResultsStore("sqlite://")
    with source:
        rows = [*source.rows(), *source.winner_rows()]
        shown = source.shown_url
    store = ResultsStore("sqlite://")
    if rows:
        store.merge(rows, source=shown)
    return store
