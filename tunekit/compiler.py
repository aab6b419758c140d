"""Parallel compilation of candidate configs, in worker processes forked from the caller
(``tunekit.workers``), or in threads of the calling process where no worker can be used.

Compiling is most of the cost of tuning (design.md), so candidates are compiled in parallel
and each is timed as soon as it is compiled. A worker is forked from the caller's process, so
it holds the kernel exactly as the caller does (whatever wraps it, wherever it was defined: a
module, ``__main__``, a closure) and imports nothing of the user's: a library's import-time code
never runs again. It compiles through the JIT's own path (``JITFunction.warmup``) against an
explicit ``GPUTarget`` with a stub driver, so it never touches the GPU: the binary lands in
Triton's on-disk cache, where the launch in the user's process finds it. What the compiler
prints there is kept with the result, not written to the user's terminal. Workers are
killable: a compile that outlives its timeout is cut off by killing its worker, and the config
becomes a ``timeout`` trial. A thread of the caller compiles a single config, a launch whose
arguments a worker cannot take, and everything when no process can be forked; a compile there
shares the caller's interpreter lock and cannot be killed: one past its timeout is stopped when it
next runs Python (``tunekit.threads``), its ``ptxas`` killed at once.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import os
import queue
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

from .benchmark import classify, describe
from .compat import set_active_driver
from .threads import Stopped, TaskThreads, check_stopped, interruptible
from .trial import Status
from .workers import CapturedOutput, Worker, exit_reason, ready, receive, send

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TensorSpec:
    """What compilation needs of a tensor argument: its dtype and whether it is 16-byte aligned."""

    dtype: Any
    aligned: bool = True

    def data_ptr(self) -> int:
        return 0 if self.aligned else 8

    def ptr_range(self) -> int:  # Triton >= 3.6 asks whether pointers fit 32 bits
        return 0


@dataclass(frozen=True)
class CompileJob:
    """One config to compile: the kernel (its ``kernel_token``), the target, and the launch
    arguments. The job holds the kernel itself too, so that the kernel outlives it here; only
    the token travels to a worker."""

    kernel: int
    target: Any
    args: tuple
    kwargs: dict
    fn: Any = field(default=None, compare=False, repr=False)

    def __reduce__(self) -> tuple:
        return CompileJob, (self.kernel, self.target, self.args, self.kwargs)


@dataclass(frozen=True)
class CompileResult:
    status: Status
    seconds: float
    error: str | None = None
    shared_bytes: int | None = None
    #: What the compiler printed in a worker (kept from the user's terminal).
    output: str = ""


_kernels: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
_tokens: dict[int, int] = {}  # id(kernel) -> its token, while the kernel lives
_issued = 0  # tokens given so far: they are 0 .. _issued - 1
_registry_lock = threading.Lock()


def kernel_token(jit: Any) -> int:
    """A number that names ``jit`` in this process and in the workers forked from it after this
    call (they hold the same object): what a compile job carries instead of the kernel."""
    with _registry_lock:
        token = _tokens.get(id(jit))
        if token is not None and _kernels.get(token) is jit:
            return token
        global _issued
        token, _issued = _issued, _issued + 1
        _kernels[token] = jit
        _tokens[id(jit)] = token
        weakref.finalize(jit, _tokens.pop, id(jit), None)
        return token


def tokens_issued() -> int:
    """How many kernel tokens were given so far: a worker forked now knows the tokens below."""
    with _registry_lock:
        return _issued


class _StubDriver:
    """Answers the three questions the JIT asks of a driver while compiling, without a GPU."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def get_current_target(self):
        return self.target

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0


def unwrap_jit(fn: Any) -> Any:
    """The JITFunction (or the interpreter's function) under decorators (Autotuner, Heuristics, ...)."""
    while hasattr(fn, "fn") and not inspect.isfunction(fn.fn):
        fn = fn.fn
    return fn


def source_hash(fn: Any) -> str:
    """What identifies a kernel's code: the JIT's cache key (its source and every function and
    global it uses), or under the interpreter a hash of the Python function's source."""
    jit = unwrap_jit(fn)
    key = getattr(jit, "cache_key", None)
    if isinstance(key, str):
        return key
    return hashlib.sha256(inspect.getsource(getattr(jit, "fn", jit)).encode()).hexdigest()


def compile_config(jit: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> CompileResult:
    """Compile one config through the JIT's own path (``warmup``) for the active driver's target,
    in this process or a worker; a failure is a result with its status and error text (nothing
    ran, so an error that is not out of resources or a timeout is a compile error)."""
    start = time.perf_counter()
    try:
        kernel = jit.warmup(*args, grid=(1,), **kwargs)
    except Exception as error:
        status = classify(error)
        status = Status.COMPILE_ERROR if status is Status.RUNTIME_ERROR else status
        return CompileResult(status, time.perf_counter() - start, describe(error))
    shared = getattr(getattr(kernel, "metadata", None), "shared", None)
    return CompileResult(Status.OK, time.perf_counter() - start, shared_bytes=shared)


def _compile(job: CompileJob) -> CompileResult:
    """In a worker forked from the caller: compile one config for ``job.target`` into Triton's disk cache."""
    set_active_driver(_StubDriver(job.target))
    kernel = _kernels.get(job.kernel)
    if kernel is None:  # the pool sends a job only to a worker forked after its kernel was named
        return CompileResult(Status.COMPILE_ERROR, 0.0, f"kernel {job.kernel} is unknown to this compile worker")
    return compile_config(unwrap_jit(kernel), job.args, job.kwargs)


def serve_compiles(connection: Any) -> None:
    """A compile worker's loop: say it is ready, then compile what it is sent, with what the
    compiler printed kept in each result."""
    import triton  # noqa: F401 - paid before the first compile is timed

    output = CapturedOutput()
    send(connection, "ready")
    while True:
        try:
            index, job = receive(connection)
        except EOFError:  # the pool was closed (or its process is gone)
            return
        result = _compile(job)
        printed = output.take()
        if printed:
            result = replace(result, output=printed)
        send(connection, (index, result))


def compile_job_for(fn: Any, target: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> CompileJob | None:
    """A job for this launch that a compile worker forked from this process can run, or None
    where none can be forked (no ``fork`` on this platform) or an argument is not a plain value
    or a tensor (a tensor descriptor, a tuple of tensors: unpickling one in the worker would
    need a device, which a copy of a process holding a CUDA context cannot start). Tensors go as
    their ``TensorSpec``, whether passed by position or by keyword."""
    if not hasattr(os, "fork"):
        return None
    spec_args = tuple(_spec(arg) for arg in args)
    spec_kwargs = {name: _spec(value) for name, value in kwargs.items()}
    if not all(_plain(value) for value in (*spec_args, *spec_kwargs.values())):
        return None
    jit = unwrap_jit(fn)
    return CompileJob(kernel_token(jit), target, spec_args, spec_kwargs, jit)


def _spec(value: Any) -> Any:
    """A tensor's ``TensorSpec``; any other value as it is."""
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        return TensorSpec(value.dtype, value.data_ptr() % 16 == 0)
    return value


def _plain(value: Any) -> bool:
    """Whether ``value`` travels to a compile worker as it is: a number, string, None, a dtype, a
    ``TensorSpec`` (or Triton's ``constexpr`` of one of those)."""
    import torch
    import triton.language as tl

    value = value.value if isinstance(value, tl.constexpr) else value
    return value is None or isinstance(value, (bool, int, float, str, TensorSpec, torch.dtype, tl.dtype))


#: Seconds one compile may take: a number, None for no limit, or a callable giving either.
Timeout = float | None | Callable[[], float | None]
#: Compiles one job in this process (a thread of the caller): what runs while workers start.
LocalCompile = Callable[[int], CompileResult]

ENTRY = "tunekit.compiler:serve_compiles"
_first_local_compile = threading.Event()
#: Threads of this process compiling now, in any pool.
_compiling_here: set[threading.Thread] = set()
#: Workers that die while starting, in a row, before the pool stops starting them.
MAX_FAILED_STARTS = 3
#: Seconds ``close(wait=True)`` waits for the compile threads it stopped to end.
LEFT_BEHIND_SECONDS = 10.0


class CompilePool:
    """Compile worker processes, started on demand and kept for reuse, and compiles in this
    process's threads while they start.

    Workers are forked from this process (``tunekit.workers``), each knowing the kernels named
    (``kernel_token``) before it was forked; one kept from an earlier tuning that does not know
    this tuning's kernel is replaced.

    Args:
        workers: at most this many compiles at once (workers and threads together).
        timeout: seconds one compile may take; None for no limit.
        threads: where compiles in this process run (the worker service's); a new executor if None.
    """

    def __init__(self, workers: int, timeout: float | None = None, threads: TaskThreads | None = None) -> None:
        if workers < 1:
            raise ValueError(f"The 'workers' parameter of CompilePool must be an int >= 1. Got {workers} instead.")
        self.workers = workers
        self.timeout = timeout
        self._idle: list[Worker] = []
        self._starting: list[Worker] = []
        self._knows: dict[Worker, int] = {}  # each worker knows the kernel tokens below this
        #: Workers started so far.
        self.started = 0
        self._failed_starts = 0  # in a row: after a few, no more are started
        self._closes = 0  # close() calls so far: a round under way when the pool closes ends
        self._threads = threads if threads is not None else TaskThreads()
        self._compiling: set[Future[None]] = set()  # this pool's compiles in threads here, not yet ended
        self._round: _CompileRound | None = None  # the as_completed round under way

    @property
    def jobs_waiting(self) -> int:
        """Jobs of the round under way that no worker or thread has started yet (0 with none under way)."""
        return len(self._round.pending) if self._round is not None else 0

    def _start(self) -> None:
        known = tokens_issued()  # before the fork: a kernel named meanwhile is not in the copy
        try:
            worker = Worker(ENTRY, here=True)
        except OSError as error:  # no memory or no process left for a copy of this process
            self._failed_starts += 1
            logger.debug("a compile worker could not be forked (%s): compiling in threads", error)
            return
        self._starting.append(worker)
        self._knows[worker] = known
        self.started += 1

    def _forget(self, worker: Worker) -> None:
        """Stop a worker the pool holds idle or starting."""
        for held in (self._idle, self._starting):
            if worker in held:
                held.remove(worker)
        self._knows.pop(worker, None)
        worker.kill()

    def _take_ready(self, worker: Worker) -> None:
        self._starting.remove(worker)
        try:
            worker.receive()
        except (EOFError, OSError):
            reason = exit_reason(worker.wait())
            worker.kill()
            self._failed_starts += 1
            logger.warning("a compile worker exited while starting (%s); its error is printed above", reason)
            return
        self._failed_starts = 0
        self._idle.append(worker)

    def compile(self, jobs: Sequence[CompileJob], timeout: Timeout = None) -> list[CompileResult]:
        """Compile ``jobs`` in parallel; results in order (see :meth:`as_completed`)."""
        results: list[CompileResult | None] = [None] * len(jobs)
        for index, result in self.as_completed(jobs, timeout):
            results[index] = result
        return [r for r in results if r is not None]

    def as_completed(self, jobs: Sequence[CompileJob | None], timeout: Timeout = None,
                     deadline: float | None = None, local: LocalCompile | None = None,
                     start_workers: bool = True,
                     more: Callable[[], Sequence[CompileJob | None]] | None = None) -> Iterator[tuple[int, CompileResult]]:
        """Compile ``jobs`` in parallel, yielding ``(index, result)`` as each one finishes.
        ``more()`` (if given) is asked for jobs to add before jobs are handed to workers, and so
        after every result taken: a caller that asks for its next configs as results arrive keeps
        the workers busy (their indices follow the earlier jobs').

        Workers are forked as needed, never more than the jobs waiting, and each job goes to the
        first one free. ``local`` (if given) compiles in threads of this process the jobs that are
        None (a kernel a worker cannot find), and every job when no worker can be forked;
        ``start_workers=False`` forks no worker while the round has had one job alone (one
        compiles as soon in a thread here), only once a second one comes. A job still
        compiling ``timeout`` seconds after it started is a ``timeout`` result: its worker (and the
        compiler it runs) is killed, or its thread stopped (``TaskThreads.stop``). ``timeout`` may
        be a callable, asked again as compiles finish (an adaptive timeout). At ``deadline``
        (``time.time()`` seconds) the compiles in flight are stopped and the jobs not yet yielded
        are left out: they were not measured, they did not fail; so are they when the pool is
        closed under the round (the process exits), or when the caller's task is stopped
        (``Stopped`` is raised). A worker that dies (a crashing compiler) fails its own job only.
        """
        timeout = self.timeout if timeout is None else timeout
        needed = max((job.kernel for job in jobs if job is not None), default=-1)
        for worker in [w for w in [*self._idle, *self._starting] if self._knows.get(w, 0) <= needed]:
            self._forget(worker)  # forked before this kernel was named: it cannot find it
        round_ = self._round = _CompileRound(self, jobs, local)
        closes = self._closes
        try:
            while round_.add(more() if more is not None else ()) or round_.busy():
                check_stopped()  # the tuning waiting on this round was stopped (the process exits)
                if self._closes != closes:  # closed under it (the process exits): the jobs left are left out
                    return
                round_.start_workers(start_workers or len(round_.jobs) > 1)
                round_.send_to_idle_workers()
                round_.start_threads()
                yield from round_.uncompilable()
                yield from round_.finished()
                if deadline is not None and time.time() >= deadline:
                    logger.info("compile deadline reached with %d compiles unfinished: stopping them", round_.left())
                    return
                limit = timeout() if callable(timeout) else timeout
                if limit is not None:
                    yield from round_.past(limit)
        finally:  # the deadline, or a caller that stopped early: the compiles in flight are abandoned
            round_.abandon()
            self._round = None

    def close(self, wait: bool = False) -> None:
        """Stop every worker, and this pool's compile threads (``TaskThreads.stop``); ``wait``
        (at exit): give those threads up to ``LEFT_BEHIND_SECONDS`` to end, since one still
        inside Triton when the interpreter shuts down aborts the process."""
        self._closes += 1
        for worker in [*self._idle, *self._starting]:
            worker.kill()
        self._idle, self._starting, self._knows = [], [], {}
        compiling = list(self._compiling)
        for future in compiling:
            self._threads.stop(future)
        if wait:
            futures.wait(compiling, LEFT_BEHIND_SECONDS)


class _CompileRound:
    """One ``as_completed`` call under way: the jobs waiting, those running in the pool's workers
    and those compiling in threads here (started at, by job index)."""

    def __init__(self, pool: CompilePool, jobs: Sequence[CompileJob | None], local: LocalCompile | None) -> None:
        self.pool, self.jobs, self.local = pool, list(jobs), local
        self.pending = deque(range(len(jobs)))
        self.running: dict[Worker, tuple[int, float]] = {}
        self.threads: dict[int, tuple[Future[None], float]] = {}
        self.results: queue.SimpleQueue[tuple[int, CompileResult]] = queue.SimpleQueue()

    def busy(self) -> bool:
        return bool(self.pending or self.running or self.threads)

    def add(self, jobs: Sequence[CompileJob | None]) -> bool:
        """Queue more jobs, indexed after those before; whether there were any."""
        self.pending.extend(range(len(self.jobs), len(self.jobs) + len(jobs)))
        self.jobs.extend(jobs)
        return bool(jobs)

    def left(self) -> int:
        return len(self.pending) + len(self.running) + len(self.threads)

    def start_workers(self, allowed: bool) -> None:
        """Fork the workers the jobs waiting need, beyond those idle, starting or busy."""
        pool = self.pool
        poolable = sum(1 for i in self.pending if self.jobs[i] is not None)
        wanted = min(pool.workers, poolable) - len(pool._idle) - len(pool._starting) - len(self.running)
        # a worker is forked only while no thread here compiles: a fork copies the locks such a
        # thread holds inside the compiler, and the child would wait on them forever
        if allowed and pool._failed_starts < MAX_FAILED_STARTS and not _compiling_here:
            for _ in range(max(0, wanted)):
                pool._start()

    def send_to_idle_workers(self) -> None:
        pool = self.pool
        for _ in range(len(self.pending)):
            if not pool._idle:
                break
            index = self.pending.popleft()
            job = self.jobs[index]
            if job is None:
                self.pending.append(index)
                continue
            worker = pool._idle.pop()
            worker.send((index, job))
            self.running[worker] = (index, time.time())

    def start_threads(self) -> None:
        """Threads here compile what no worker can: jobs a worker cannot find the kernel of, and
        every job when no worker can be forked. A forked worker is ready in milliseconds and
        compiles beside the others, where threads here would share this process's interpreter lock."""
        pool = self.pool
        workers_coming = bool(pool._idle or pool._starting or self.running)
        # the first compile in this process runs alone: Triton imports parts of itself lazily on
        # its first compile, and threads doing that at once race (seen: AssertionError, KeyError)
        local_limit = pool.workers if _first_local_compile.is_set() else 1
        for index in [i for i in self.pending if self.jobs[i] is None or not workers_coming]:
            if self.local is None or len(self.running) + len(self.threads) >= pool.workers or len(self.threads) >= local_limit:
                break
            self.pending.remove(index)
            future = pool._threads.start("tunekit-compile", self._compile_here, index)
            pool._compiling.add(future)
            future.add_done_callback(pool._compiling.discard)
            self.threads[index] = (future, time.time())

    def _compile_here(self, index: int) -> None:
        _compiling_here.add(threading.current_thread())
        try:
            assert self.local is not None  # threads are started only with a local compile
            with interruptible():  # a stop (timeout, exit) lands in the compile, never in this bookkeeping
                result = self.local(index)
            self.results.put((index, result))
        finally:
            _compiling_here.discard(threading.current_thread())
            _first_local_compile.set()

    def uncompilable(self) -> Iterator[tuple[int, CompileResult]]:
        """Compile errors for the jobs waiting when nothing is left that could compile them."""
        pool = self.pool
        if self.pending and not self.threads and not self.running and not pool._idle and not pool._starting:
            while self.pending:
                yield self.pending.popleft(), CompileResult(Status.COMPILE_ERROR, 0.0,
                                                            "no compile worker could be started")

    def finished(self) -> Iterator[tuple[int, CompileResult]]:
        """The results of threads here and of workers, taken as they come, and workers that finished starting."""
        while not self.results.empty():
            index, result = self.results.get()
            if self.threads.pop(index, None) is not None:  # else stopped: its result is dropped
                yield index, result
        for index, (future, started) in list(self.threads.items()):
            # ended without a result (a thread that put one ends with no exception): stopped by another
            # caller (the pool closed at exit): left out, not failed; or failed outside the compile
            if not future.done() or (not future.cancelled() and future.exception() is None):
                continue
            del self.threads[index]
            error = None if future.cancelled() else future.exception()
            if error is not None and not isinstance(error, Stopped):
                yield index, CompileResult(Status.COMPILE_ERROR, time.time() - started,
                                           f"its compile in this process failed: {type(error).__name__}: {error}")
        pool = self.pool
        for worker in ready([*self.running, *pool._starting], 0.01 if self.threads else 0.05):
            if worker in pool._starting:
                pool._take_ready(worker)
                continue
            index, started = self.running.pop(worker)
            try:
                _, result = worker.receive()
                pool._idle.append(worker)
            except (EOFError, OSError):
                reason = exit_reason(worker.wait())
                worker.kill()
                result = CompileResult(Status.COMPILE_ERROR, time.time() - started,
                                       f"the compile worker died compiling it ({reason})")
            yield index, result

    def past(self, limit: float) -> Iterator[tuple[int, CompileResult]]:
        """Timeouts for the compiles running longer than ``limit`` seconds, which are stopped."""
        now = time.time()
        for worker, (index, started) in list(self.running.items()):
            if now - started <= limit or worker.poll(0):
                continue  # in time, or it finished just now: its result is taken next round
            del self.running[worker]
            worker.kill()
            logger.info("a compile exceeded %.1f s: its worker was killed", limit)
            yield index, CompileResult(Status.TIMEOUT, now - started, f"compile exceeded {limit:.1f} s")
        for index, (future, started) in list(self.threads.items()):
            if now - started > limit:
                del self.threads[index]
                self.pool._threads.stop(future)
                logger.info("a compile exceeded %.1f s in this process: its thread was stopped", limit)
                yield index, CompileResult(Status.TIMEOUT, now - started, f"compile exceeded {limit:.1f} s")

    def abandon(self) -> None:
        """Stop the compiles in flight: nothing will take their results."""
        for worker in self.running:
            worker.kill()
        for future, _ in self.threads.values():
            self.pool._threads.stop(future)
