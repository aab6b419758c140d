"""Tuning ahead of time (``tunekit tune``): every (kernel, shape) of a manifest, on every GPU of
this host, into a store that other hosts may share.

One thread per GPU takes the manifest's shapes in turn; the process's worker service gives each
GPU its benchmark worker and all of them one compile pool. Before a key is tuned it is claimed in
the store (``ResultsStore.claim``), so that the GPUs of this host and other hosts running the same
manifest against the same store divide the work; the owner renews the claim while it tunes, and a
claim that is not renewed (its host died) expires and is taken over. A key taken over is tuned
again with the trials its first owner stored answered from the store, so only the configs in
flight when that host died are measured twice. Keys finished elsewhere or holding a stored winner
are skipped: the command is resumable.
"""

from __future__ import annotations

import contextvars
import logging
import os
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import settings
from .budget import Budget
from .claims import ClaimRenewal
from .config import config_json
from .keys import TuningKey
from .manifest import ManifestEntry, Shape
from .session import TuningError, stored_winner
from .store import Claim, ResultsStore

logger = logging.getLogger(__name__)


@dataclass
class Outcome:
    """What became of one (kernel, shape): ``status`` is ``tuned``, ``stored`` (a winner was in the
    store), ``done elsewhere`` (another host or GPU finished it), ``single config``, ``failed``
    (every config failed) or ``error`` (the inputs or the call could not be made)."""

    kernel: str
    shape: str
    key: str
    status: str
    device: str = ""
    winner: str = ""
    time_ms: float | None = None
    evaluations: int = 0
    seconds: float = 0.0
    detail: str = ""


class _CapturedLaunch:
    """Stands for the kernel in a manifest's ``launch``: records the call instead of running it."""

    def __init__(self) -> None:
        self.call: tuple[tuple, dict] | None = None

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    def run(self, *args: Any, **kwargs: Any) -> None:
        self.call = (args, kwargs)


def captured_call(entry: ManifestEntry, shape: Shape, tensors: tuple) -> tuple[tuple, dict]:
    """The arguments ``entry.launch`` passes to the kernel for these tensors."""
    capture = _CapturedLaunch()
    entry.launch(capture, *tensors, **shape.launch)
    if capture.call is None:
        raise ValueError(f"{entry.name}: launch {getattr(entry.launch, '__name__', entry.launch)} did not launch the "
                         "kernel it was given (kernel[grid](...) or kernel.run(...)).")
    return capture.call


def select_devices(gpus: str | None) -> list[int] | list[None]:
    """The CUDA devices ``--gpus`` names (``all``, default, or ``0,1``), all of one kind: a winner
    is chosen only from configs measured on the same kind of device. ``[None]`` (this process,
    no GPU) under the Triton interpreter or without CUDA."""
    import torch

    on_cpu = settings.interpreting() or not torch.cuda.is_available()
    if on_cpu and gpus not in (None, "all"):
        why = "the Triton interpreter runs on the CPU" if settings.interpreting() else "this host has no CUDA device"
        raise ValueError(f"--gpus {gpus!r} names GPUs, but {why}; leave --gpus out.")
    if on_cpu:
        return [None]
    count = torch.cuda.device_count()
    if gpus in (None, "all"):
        chosen = list(range(count))
    else:
        try:
            chosen = sorted({int(part) for part in gpus.split(",")})
        except ValueError:
            raise ValueError(f"--gpus {gpus!r}: write all, or device numbers such as 0,1.") from None
        outside = [d for d in chosen if not 0 <= d < count]
        if outside:
            raise ValueError(f"--gpus {gpus!r}: this host has {count} GPUs (0-{count - 1}), not {outside}.")
    names = {d: torch.cuda.get_device_name(d) for d in chosen}
    if len(set(names.values())) > 1:
        listed = ", ".join(f"{d}: {name}" for d, name in names.items())
        raise ValueError(f"The GPUs chosen are of different kinds ({listed}); tune each kind in its own "
                         "tunekit tune with --gpus.")
    return chosen


def _device_name(device: int | None) -> str:
    return "cpu" if device is None else f"cuda:{device}"


def prepared_call(entry: ManifestEntry, shape: Shape, device: str) -> tuple[tuple, dict, TuningKey, Any]:
    """The kernel's arguments (``grid`` among the keyword ones), its key and the Space it is tuned
    over, for one (kernel, shape) with inputs made on ``device``."""
    tensors = entry.make_inputs(shape, device)
    args, kwargs = captured_call(entry, shape, tensors)
    kernel = entry.kernel
    return args, kwargs, kernel.tuning_key(args, kwargs), kernel.tuning_space(args, kwargs)


@dataclass
class _Job:
    position: int  # in the manifest: outcomes are reported in this order
    entry: ManifestEntry
    shape: Shape
    #: Known once the job's inputs were made (a job other owners hold is looked at again without them).
    key: TuningKey | None = None
    space: Any = None


class ManifestTuning:
    """Tunes every (kernel, shape) of ``entries`` on ``devices`` into ``store``.

    Args:
        evals, seconds: replace that axis of each entry's budget (else the decorator's) when given.
        lease: seconds a claim lasts unless renewed; a dead host's keys wait this long.
        poll: seconds between looks at keys other owners hold.
        progress: one progress bar per device (default: when stderr is a terminal).
    """

    def __init__(self, entries: Sequence[ManifestEntry], store: ResultsStore, devices: Sequence[int | None], *,
                 evals: int | None = None, seconds: float | None = None, lease: float = 60.0, poll: float = 2.0,
                 progress: bool | None = None) -> None:
        if lease <= 0 or poll <= 0:
            raise ValueError(f"lease and poll must be > 0 seconds; got lease={lease}, poll={poll}.")
        Budget(evals=evals, seconds=seconds)  # refuses bad values with Budget's own message
        if len(set(devices)) != len(devices) or not devices:
            raise ValueError(f"devices must be distinct GPU numbers (or one None: no GPU). Got {list(devices)}.")
        if settings.interpreting() and len(devices) > 1:
            raise ValueError("The Triton interpreter is not thread-safe (it patches triton.language while a kernel "
                             "runs): tune under it on one device.")
        self.store = store
        self.devices = list(devices)
        self.evals, self.seconds = evals, seconds
        self.lease = lease
        self.poll = poll
        self.progress = sys.stderr.isatty() if progress is None else progress
        self.jobs = [_Job(position, entry, shape)
                     for position, (entry, shape) in enumerate((e, s) for e in entries for s in e.shapes)]
        self._outcomes: dict[int, Outcome] = {}
        self._queue: deque[_Job] = deque(self.jobs)
        self._waiting: list[_Job] = []  # held by other owners: looked at again once `poll` has passed
        self._retry_at = 0.0
        self._busy = 0  # jobs this process's threads are working on
        self._lock = threading.Condition()
        self._started_at = 0.0

    def run(self) -> list[Outcome]:
        """Tune until every job is finished here or elsewhere; the outcomes, in manifest order."""
        self._started_at = self.store.store_time()  # failures of earlier runs are tried again
        errors: list[BaseException] = []
        bars = [self._bar(position, device) for position, device in enumerate(self.devices)]

        def work(device: int | None, bar: Any) -> None:
            try:
                if device is not None:
                    import torch

                    torch.cuda.set_device(device)
                self._work(device, bar)
            except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
                errors.append(error)
                with self._lock:
                    self._queue.clear()
                    self._waiting.clear()
                    self._lock.notify_all()

        # daemon threads: on Ctrl-C the process exits and its claims expire, as a dead host's do
        # each in a copy of the caller's context: Triton's allocator (triton.set_allocator) lives there
        threads = [threading.Thread(target=contextvars.copy_context().run, args=(work, d, bar),
                                    name=f"tunekit-tune-{_device_name(d)}", daemon=True)
                   for d, bar in zip(self.devices, bars)]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.5)
        for bar in bars:
            if bar is not None:
                bar.close()
        if errors:
            raise errors[0]
        return [self._outcomes[position] for position in sorted(self._outcomes)]

    def _bar(self, position: int, device: int | None) -> Any:
        if not self.progress:
            return None
        from tqdm.auto import tqdm

        return tqdm(total=len(self.jobs), position=position, desc=_device_name(device), unit="key", leave=True)

    def _next(self) -> _Job | None:
        """The next job to try: queued ones first, then those other owners held, once ``poll`` has
        passed since the last was put aside; None when nothing is left to do."""
        with self._lock:
            while True:
                if self._queue:
                    self._busy += 1
                    return self._queue.popleft()
                if not self._waiting and not self._busy:
                    return None
                wait = self._retry_at - time.monotonic() if self._waiting else self.poll
                if wait <= 0:
                    self._queue.extend(self._waiting)
                    self._waiting.clear()
                    continue
                self._lock.wait(wait)  # a job finishing, or one put aside, wakes this earlier

    def _done(self, job: _Job, outcome: Outcome | None) -> None:
        with self._lock:
            self._busy -= 1
            if outcome is None:
                self._waiting.append(job)
                self._retry_at = time.monotonic() + self.poll
            else:
                self._outcomes[job.position] = outcome
            self._lock.notify_all()

    def _work(self, device: int | None, bar: Any) -> None:
        owner = f"{socket.gethostname()}:{os.getpid()}:{_device_name(device)}"
        while (job := self._next()) is not None:
            outcome = None
            try:
                if bar is not None:
                    bar.set_postfix_str(f"{job.entry.kernel.kernel_name} {job.shape.label()}", refresh=True)
                outcome = self._tune(job, device, owner)
            except Exception as error:  # the store unreachable, for one: this key fails, the others go on
                logger.exception("%s %s: not tuned", job.entry.kernel.kernel_name, job.shape.label())
                outcome = Outcome(job.entry.kernel.kernel_name, job.shape.label(), job.key.json if job.key else "",
                                  "error", _device_name(device), detail=f"{type(error).__name__}: {error}")
            finally:
                self._done(job, outcome)
            if outcome is not None and bar is not None:
                bar.update(1)

    def _budget(self, entry: ManifestEntry) -> Budget:
        base = entry.budget or entry.kernel.options.budget
        return Budget(evals=self.evals if self.evals is not None else base.evals,
                      seconds=self.seconds if self.seconds is not None else base.seconds)

    def _tune(self, job: _Job, device: int | None, owner: str) -> Outcome | None:
        """Tune one job, or say why not; None when another owner holds it."""
        entry, shape, kernel, store = job.entry, job.shape, job.entry.kernel, self.store
        name, label, where = kernel.kernel_name, shape.label(), _device_name(device)
        call = None
        if job.key is None:
            try:
                call = prepared_call(entry, shape, where)
            except Exception as error:
                logger.error("%s %s: the call could not be made: %s", name, label, error)
                return Outcome(name, label, "", "error", where, detail=f"{type(error).__name__}: {error}")
            job.key, job.space = call[2], call[3]
        key, space, identity = job.key, job.space, kernel.tuning.identity
        if len(space) == 1:
            return Outcome(name, label, key.json, "single config", where, winner=config_json(space.configs()[0]))
        winners = store.winners(identity)
        if stored_winner(key.json, winners, space, kernel.tuning.space_hash) is not None:
            return _stored(name, label, key, winners, "stored", where)
        state = store.claim(identity, kernel.tuning.space_hash, key.json, owner=owner, lease=self.lease,
                            retry_failed_before=self._started_at)
        if state is Claim.TAKEN:
            return None
        if state is Claim.DONE:
            return _stored(name, label, key, store.winners(identity), "done elsewhere", where)
        if state is Claim.FAILED:
            failure = store.claims(identity, kernel.tuning.space_hash).get(key.json, {}).get("outcome")
            return Outcome(name, label, key.json, "failed", where, detail=f"failed elsewhere in this run: {failure}")
        renewal = ClaimRenewal(store, identity, kernel.tuning.space_hash, key.json, owner, self.lease)
        finished_as = None  # the claim's outcome; None gives it back
        try:
            if call is None:
                call = prepared_call(entry, shape, where)
            # ahead of time a worker's start is cheap beside a run, and each GPU's thread gets its own
            # worker: configs are checked and timed isolated unless the kernel says otherwise
            isolate = kernel.options.isolate
            if isolate is None and not settings.interpreting():
                isolate = True
            session = kernel.tuning.session(key, call[3], store=store, budget=self._budget(entry), progress=False,
                                            isolate=isolate)
            try:
                winner, report = session.run(call[0], call[1])
            except TuningError as error:  # every config failed: a later run tries again
                finished_as = f"failed: {error}"
                return Outcome(name, label, key.json, "failed", where, evaluations=len(session.trials),
                               detail=str(error))
            if report.fallback:  # given back: a later run, with a larger budget, tunes it
                return Outcome(name, label, key.json, "failed", where, evaluations=report.evaluations,
                               seconds=report.seconds, detail="the budget ended before any config was measured; "
                               "no winner stored (give it more --seconds)")
            finished_as = "winner"
        finally:
            renewal.stop()
            try:
                store.release_claim(identity, kernel.tuning.space_hash, key.json, owner=owner, outcome=finished_as)
            except Exception as error:  # the claim expires by itself; the key's result stands
                logger.warning("%s %s: the claim could not be released (%s); it expires in %.0f s", name, label,
                               error, self.lease)
        stored = store.winners(identity).get(key.json)
        return Outcome(name, label, key.json, "tuned", where, config_json(winner), stored[1] if stored else None,
                       report.evaluations, report.seconds)


def _stored(name: str, label: str, key: TuningKey, winners: dict, status: str, where: str) -> Outcome:
    config, median_ms, _ = winners.get(key.json, ("", None, ""))
    return Outcome(name, label, key.json, status, where, config, median_ms)


def plan(entries: Sequence[ManifestEntry], store: ResultsStore | None) -> list[dict[str, str]]:
    """What ``tunekit tune`` would do (``--dry-run``): per (kernel, shape), the key and what the
    store holds for it on this host's kind of device. Inputs are made on the ``meta`` device where
    the inputs function allows it (no device memory), else on the CPU."""
    rows = []
    for entry in entries:
        for shape in entry.shapes:
            row = {"kernel": entry.kernel.kernel_name, "shape": shape.label(), "key": "", "store": ""}
            rows.append(row)
            try:
                try:
                    _, _, key, space = prepared_call(entry, shape, "meta")
                except (RuntimeError, NotImplementedError):
                    _, _, key, space = prepared_call(entry, shape, "cpu")
            except Exception as error:
                row["store"] = f"error: {type(error).__name__}: {error}"
                continue
            row["key"] = key.json
            row["store"] = _held(store, entry, key, space) if store is not None else "nothing (no store yet)"
    return rows


def _held(store: ResultsStore, entry: ManifestEntry, key: TuningKey, space: Any) -> str:
    kernel = entry.kernel
    identity = kernel.tuning.identity
    if len(space) == 1:
        return "one config: nothing to tune"
    winners = store.winners(identity)
    if stored_winner(key.json, winners, space, kernel.tuning.space_hash) is not None:
        config, median_ms, _ = winners[key.json]
        return f"winner {config}" + (f" ({median_ms:.4g} ms)" if median_ms is not None else "")
    claim = store.claims(identity, kernel.tuning.space_hash).get(key.json)
    if claim is not None and claim["finished_at"] is not None:
        return f"finished: {claim['outcome']}" + (": to tune again" if claim["outcome"] != "winner" else "")
    if claim is not None and claim["owner"] and claim["expires_at"] > store.store_time():
        return f"being tuned by {claim['owner']}"
    measured = sum(1 for t in store.history(identity) if t.key is not None and t.key.json == key.json)
    return f"{measured} trials stored, no winner: to tune" if measured else "to tune"
