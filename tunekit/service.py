"""The worker service: one per process, shared by every tunekit kernel and every key.

It owns the compile pool, an idle benchmark worker per device and the threads tunekit runs in
this process (``threads``: background tunings, compiles no worker can take), starts them lazily, keeps
them warm between tunings, stops them when they have been idle a while and when the process
exits. Compile workers are forked from this process at the tuning (``tunekit.compiler``).
Benchmark workers (``isolate=True``, or after a config crashed a process) need a device of
their own, so they fork from a zygote (``tunekit.workers``): one forked from this process when
such a kernel is decorated, if that is safe then (a GPU machine, no CUDA context yet, a single
thread), else a fresh interpreter started at the first tuning that needs a worker.
"""

from __future__ import annotations

import atexit
import glob
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from . import settings
from .compat import finish_prefetch
from .compiler import LEFT_BEHIND_SECONDS, CompilePool
from .threads import TaskThreads
from .workers import IN_WORKER, Worker, Zygote

logger = logging.getLogger(__name__)

BENCHMARK_ENTRY = "tunekit.isolation:serve_benchmarks"
#: What a spawned zygote imports before it forks workers: what both kinds of worker need.
PRELOAD = ("torch", "triton", "tunekit.compiler", "tunekit.isolation")
#: What a zygote does before it forks workers, so that no worker does it again.
WARM_UP = "tunekit.isolation:warm_up"


class WorkerService:
    """Compile workers and benchmark workers for this process (``service()`` is the one instance)."""

    def __init__(self) -> None:
        self._owner = os.getpid()  # a forked child must not stop its parent's workers
        self._lock = threading.RLock()
        self._zygote: Zygote | None = None
        self._pools: list[CompilePool] = []  # every pool; those not lent out are in _free_pools
        self._free_pools: list[CompilePool] = []
        self._benchmark_workers: dict[int | None, Worker] = {}  # idle, by device index
        self._last_used = time.monotonic()
        self._reaper: threading.Timer | None = None
        #: Where background tunings and compiles in this process run; stopped at exit.
        self.threads = TaskThreads()

    # -- the zygote ------------------------------------------------------------------------

    def prepare(self) -> None:
        """At decoration of a kernel tuned in benchmark workers: fork the zygote now if this is a
        GPU process that may fork safely."""
        with self._lock:
            if self._zygote is not None:
                return
            finish_prefetch()  # its thread would make this process one that may not fork
            refusal = fork_refusal()
            if refusal is not None:
                logger.debug("no worker zygote forked at decoration: %s", refusal)
                return
            started = time.perf_counter()
            self._zygote = Zygote.fork(WARM_UP)
            logger.debug("forked the worker zygote (pid %d) in %.3f s", self._zygote.pid, time.perf_counter() - started)

    def zygote(self) -> Zygote | None:
        """The zygote to fork workers from, if one is ready (a spawned one is started here if
        needed, and used once it has imported torch); None: start a fresh interpreter."""
        with self._lock:
            if settings.worker_start() != "zygote" or os.environ.get(IN_WORKER):
                return None
            if self._zygote is not None and not self._zygote.alive():
                self._zygote = None
            if self._zygote is None:
                self._zygote = Zygote.spawn(PRELOAD, WARM_UP)
                logger.debug("started a worker zygote (pid %d)", self._zygote.pid)
            if self._zygote.interpreting != settings.interpreting():
                return None  # its Triton was imported for the other mode: fresh interpreters for this one
            try:
                return self._zygote if self._zygote.ready(0) else None
            except OSError:
                self._zygote = None
                return None

    # -- compile workers ---------------------------------------------------------------------

    @contextmanager
    def compile_pool(self, workers: int) -> Iterator[CompilePool]:
        """A compile pool for one tuning, allowed ``workers`` compiles at once: the warm one, or
        another when tunings of other kernels compile at the same time in other threads."""
        with self._lock:
            self._touch()
            if not self._free_pools:
                self._pools.append(CompilePool(workers, threads=self.threads))
                self._free_pools.append(self._pools[-1])
            pool = self._free_pools.pop()
        pool.workers = workers
        try:
            yield pool
        finally:
            with self._lock:
                self._touch()
                self._free_pools.append(pool)

    # -- benchmark workers -------------------------------------------------------------------

    def benchmark_worker(self, device: int | None) -> tuple[Worker, bool]:
        """An idle benchmark worker for ``device`` (kept from an earlier tuning), or a new one;
        and whether it is new."""
        with self._lock:
            self._touch()
            worker = self._benchmark_workers.pop(device, None)
            if worker is not None and worker.alive():
                return worker, False
            return Worker(BENCHMARK_ENTRY, self.zygote()), True

    def give_back(self, worker: Worker, device: int | None) -> None:
        """Keep a healthy benchmark worker warm for the next tuning on ``device``."""
        with self._lock:
            self._touch()
            if not worker.alive() or device in self._benchmark_workers:
                worker.kill()
                return
            self._benchmark_workers[device] = worker

    # -- lifetime -----------------------------------------------------------------------------

    def _touch(self) -> None:
        """Note a use, and stop idle workers once nothing used them for a while."""
        self._last_used = time.monotonic()
        if self._reaper is None:
            self._reaper = threading.Timer(settings.DEFAULTS.worker_idle_seconds, self._reap)
            self._reaper.daemon = True
            self._reaper.start()

    def _reap(self) -> None:
        with self._lock:
            self._reaper = None
            idle = time.monotonic() - self._last_used
            if idle >= settings.DEFAULTS.worker_idle_seconds:
                logger.debug("workers idle for %.0f s: stopping them", idle)
                self._stop_idle(zygote_too=True)
            else:
                self._touch()
                self._last_used -= idle  # _touch reset it: keep the real last use

    def _stop_idle(self, zygote_too: bool = False) -> None:
        """Stop the workers no tuning holds now: those of pools not lent out, idle benchmark
        workers, and (``zygote_too``) a spawned zygote (one forked at decoration stays: it could
        not be forked again once CUDA is initialised). A tuning that runs longer than the idle
        time keeps its own."""
        for pool in self._free_pools:
            pool.close()
        for worker in self._benchmark_workers.values():
            worker.kill()
        self._benchmark_workers = {}
        if zygote_too and self._zygote is not None and self._zygote.spawned:
            self._zygote.close()
            self._zygote = None

    def shutdown(self, keep_zygote: bool = False) -> None:
        """Stop every worker and thread, also those of tunings under way (at exit: a thread still
        inside Triton or CUDA when the interpreter finalises can abort the process), and the
        zygote unless ``keep_zygote``. Measurements already stored stay: a tuning stopped here
        goes on from them in the next process."""
        if os.getpid() != self._owner:
            return
        # tunings first: one whose compile workers are killed next must not store their deaths as failed configs
        self.threads.stop_all(timeout=0.0)
        with self._lock:
            self._stop_idle()
            for pool in self._pools:
                pool.close()
        self.threads.stop_all(LEFT_BEHIND_SECONDS)  # not under the lock: a stopped tuning's clean-up takes it
        with self._lock:
            if self._zygote is not None and not keep_zygote:
                self._zygote.close()
                self._zygote = None


def fork_refusal() -> str | None:
    """Why this process may not fork the zygote now, or None when it may: workers will be wanted
    (a GPU build of torch on a machine with a GPU device, not the interpreter), no CUDA context
    exists yet (a forked child could not use it), only one Python thread runs (a fork copies
    only the calling one), and this is no worker itself."""
    if settings.worker_start() != "zygote":
        return f"{settings.ENV_WORKERS}={settings.worker_start()}"
    if settings.interpreting() or os.environ.get(IN_WORKER):
        return "interpreter" if settings.interpreting() else "a worker process"
    if not hasattr(os, "fork"):
        return "no fork() on this platform"
    if threading.active_count() != 1:
        return f"{threading.active_count()} Python threads run"
    if not (glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/kfd")):
        return "no GPU device file (/dev/nvidia0, /dev/kfd)"
    import torch

    if torch.version.cuda is None and torch.version.hip is None:
        return "torch has no GPU build"
    if torch.cuda.is_initialized():
        return "CUDA is initialised in this process already"
    return None


_service: WorkerService | None = None
_service_lock = threading.Lock()


def service() -> WorkerService:
    """The process's worker service."""
    global _service
    with _service_lock:
        if _service is None:
            _service = WorkerService()
            atexit.register(_service.shutdown)
        return _service


def _forget_after_fork() -> None:  # a forked child (a zygote, a user's fork) starts with no workers
    global _service
    _service = None


os.register_at_fork(after_in_child=_forget_after_fork)
