"""Offline mode (``TUNEKIT_MODE=offline``) only reads the store: it never creates or writes one,
and reads one on a read-only file system, as a deployed service would find it."""

from __future__ import annotations

import warnings

import pytest
import torch

import tunekit
from tunekit import settings
from tunekit.kernels import vector_add

N = 1024


def make(store):
    return tunekit.autotune(space=vector_add.space(), key=["n"], strategy="random", budget=tunekit.Budget(evals=2),
                            store=str(store))(vector_add.add_kernel)


def test_offline_mode_creates_no_store_where_none_exists(tmp_path, monkeypatch):
    monkeypatch.setenv("TUNEKIT_MODE", "offline")
    missing = tmp_path / "mistyped.db"
    x, y, out = vector_add.inputs(N)
    with pytest.warns(RuntimeWarning, match="offline; using the default config"):
        vector_add.launch(make(missing), x, y, out)
    assert torch.equal(out, x + y)
    assert list(tmp_path.iterdir()) == []


def tuned_then_read_only(tmp_path, make_read_only):
    """A store tuned at N in a directory then made read-only: (directory, store path, the kernel that tuned)."""
    directory = tmp_path / "shipped"
    directory.mkdir()
    store = directory / "tunekit.db"
    online = make(store)
    vector_add.launch(online, *vector_add.inputs(N))
    online.store.close()
    make_read_only(directory)
    return directory, store, online


def test_offline_mode_serves_winners_from_a_read_only_store(tmp_path, monkeypatch, make_read_only):
    directory, store, online = tuned_then_read_only(tmp_path, make_read_only)
    listing = sorted(p.name for p in directory.iterdir())
    x, y, out = vector_add.inputs(N)

    monkeypatch.setenv("TUNEKIT_MODE", "offline")
    offline = make(store)
    out.zero_()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the stored winner: no fallback warning
        vector_add.launch(offline, x, y, out)
    assert offline.best_config.kwargs == online.best_config.kwargs and torch.equal(out, x + y)
    offline.store.close()
    assert sorted(p.name for p in directory.iterdir()) == listing


def test_online_a_read_only_tuned_store_serves_its_winners_and_tunes_new_keys_in_memory(tmp_path, make_read_only,
                                                                                        caplog):
    """A fully tuned store on read-only media, in the normal (online) mode: every call raised
    ``StoreError: ... not writable``. Now its winners are served without measuring anything, a key it
    lacks is tuned with what it holds, and the directory is left as it was."""
    directory, store, online = tuned_then_read_only(tmp_path, make_read_only)
    listing = sorted(p.name for p in directory.iterdir())
    x, y, out = vector_add.inputs(N)

    served = make(store)
    out.zero_()
    vector_add.launch(served, x, y, out)
    assert torch.equal(out, x + y) and served.best_config.kwargs == online.best_config.kwargs
    assert served.tuning_report is None  # nothing tuned: the stored winner
    assert "reading it into memory" in caplog.text
    x, y, out = vector_add.inputs(2 * N)
    vector_add.launch(served, x, y, out)
    assert torch.equal(out, x + y) and served.tuning_report.evaluations == 2
    assert sorted(p.name for p in directory.iterdir()) == listing


def test_a_blank_tunekit_store_is_unset(monkeypatch):
    monkeypatch.delenv("TUNEKIT_STORE")
    default = settings.store_url()
    monkeypatch.setenv("TUNEKIT_STORE", "   ")
    assert settings.store_url() == default
