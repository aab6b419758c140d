"""Parallel compilation of candidate configs in spawn-started worker processes.

Compiling is most of the cost of tuning (design.md), so a batch of candidates is compiled in
a pool of worker processes before any of them is timed. A worker compiles through the JIT's
own path (``JITFunction.warmup``) against an explicit ``GPUTarget`` with a stub driver, so it
never touches the GPU and needs none: the binary lands in Triton's on-disk cache, where the
launch in the user's process finds it. Workers are killable: a compile that outlives its
timeout is cut off by terminating the pool, and the config becomes a ``timeout`` trial.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import multiprocessing
import os
import signal
import pickle
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .benchmark import classify
from .trial import Status

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
    """One config to compile: where the kernel lives, the target, and the launch arguments."""

    module: str
    qualname: str
    target: Any
    args: tuple
    kwargs: dict


@dataclass(frozen=True)
class CompileResult:
    status: Status
    seconds: float
    error: str | None = None
    shared_bytes: int | None = None


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


def _resolve(module: str, qualname: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return unwrap_jit(obj)


_started_queue: Any = None


def _init_worker(started_queue: Any) -> None:
    global _started_queue
    _started_queue = started_queue
    import triton  # noqa: F401 - pays the import once per worker


def _compile(index: int, job: CompileJob) -> CompileResult:
    """Runs in a worker: compile one config for ``job.target`` into Triton's disk cache."""
    from triton.runtime.driver import driver

    if _started_queue is not None:
        _started_queue.put((index, time.time(), os.getpid()))  # the parent's watchdog times each compile from here
    driver.set_active(_StubDriver(job.target))
    start = time.perf_counter()
    try:
        fn = _resolve(job.module, job.qualname)
        kernel = fn.warmup(*job.args, grid=(1,), **job.kwargs)
    except Exception as error:
        from .benchmark import describe

        return CompileResult(classify(error), time.perf_counter() - start, describe(error))
    shared = getattr(getattr(kernel, "metadata", None), "shared", None)
    return CompileResult(Status.OK, time.perf_counter() - start, shared_bytes=shared)


def _kill_process_tree(pid: int) -> None:
    """SIGKILL a worker and the processes it started (the compiler's ptxas), on Linux via /proc."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    for child in children:
        _kill_process_tree(int(child))
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _ready(_index: int = 0) -> bool:
    return True


def compile_job_for(fn: Any, target: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> CompileJob | None:
    """A picklable job for this launch, or None when a worker cannot rebuild the kernel
    (defined in ``__main__`` or inside a function, or arguments that do not pickle)."""
    jit = unwrap_jit(fn)
    module, qualname = getattr(jit, "module", None) or jit.fn.__module__, jit.fn.__qualname__
    if module == "__main__" or "<locals>" in qualname:
        return None
    spec_args = tuple(
        TensorSpec(arg.dtype, arg.data_ptr() % 16 == 0) if hasattr(arg, "data_ptr") and hasattr(arg, "dtype") else arg
        for arg in args
    )
    job = CompileJob(module, qualname, target, spec_args, dict(kwargs))
    try:
        pickle.dumps(job)
    except Exception:
        return None
    return job


#: Seconds one compile may take: a number, None for no limit, or a callable giving either.
Timeout = float | None | Callable[[], float | None]


class CompilePool:
    """A pool of spawn-started compile workers, created on first use and kept for reuse.

    Args:
        workers: number of worker processes.
        timeout: seconds one compile may take; None for no limit.
    """

    def __init__(self, workers: int, timeout: float | None = None) -> None:
        if workers < 1:
            raise ValueError(f"The 'workers' parameter of CompilePool must be an int >= 1. Got {workers} instead.")
        self.workers = workers
        self.timeout = timeout
        self._pool: Any = None

    def _ensure(self) -> Any:
        if self._pool is None:
            context = multiprocessing.get_context("spawn")
            self._started = context.Queue()
            self._pool = context.Pool(self.workers, initializer=_init_worker, initargs=(self._started,))
            # start every worker and pay its imports before any compile is timed
            self._pool.map(_ready, range(self.workers), chunksize=1)
        return self._pool

    def compile(self, jobs: Sequence[CompileJob], timeout: Timeout = None) -> list[CompileResult]:
        """Compile ``jobs`` in parallel; results in order (see :meth:`as_completed`)."""
        results: list[CompileResult | None] = [None] * len(jobs)
        for index, result in self.as_completed(jobs, timeout):
            results[index] = result
        return [r for r in results if r is not None]

    def as_completed(self, jobs: Sequence[CompileJob], timeout: Timeout = None,
                     deadline: float | None = None) -> Iterator[tuple[int, CompileResult]]:
        """Compile ``jobs`` in parallel, yielding ``(index, result)`` as each one finishes.

        All jobs are queued at once and the workers take the next one as they finish, so one
        slow compile does not hold the others back, and the caller can time a finished kernel
        while the rest compile. A job still compiling ``timeout`` seconds after a worker started
        it is a ``timeout`` result: that worker (and the compiler it runs) is killed, the only
        way to stop a compile in flight, and the pool starts a new one in its place. ``timeout``
        may be a callable, asked again as compiles finish (an adaptive timeout). At
        ``deadline`` (``time.time()`` seconds) the pool is stopped and the jobs not yet yielded
        are left out: they were not measured, they did not fail.
        """
        timeout = self.timeout if timeout is None else timeout
        pool = self._ensure()
        handles = {i: pool.apply_async(_compile, (i, jobs[i])) for i in range(len(jobs))}
        started: dict[int, tuple[float, int]] = {}
        while handles:
            while not self._started.empty():
                index, when, pid = self._started.get_nowait()
                started[index] = (when, pid)
            for i in [i for i, handle in handles.items() if handle.ready()]:
                try:
                    result = handles.pop(i).get()
                except Exception as error:  # the result did not unpickle
                    result = CompileResult(Status.COMPILE_ERROR, 0.0, repr(error))
                yield i, result
            now = time.time()
            if deadline is not None and now >= deadline:
                logger.info("compile deadline reached with %d compiles unfinished: stopping the workers", len(handles))
                self.close()
                return
            limit = timeout() if callable(timeout) else timeout
            for i in [i for i in handles if limit is not None and i in started and now - started[i][0] > limit]:
                if handles[i].ready():  # it finished just now: its result is taken next round
                    continue
                del handles[i]
                _kill_process_tree(started[i][1])
                logger.info("a compile exceeded %.1f s: its worker was killed and replaced", limit)
                yield i, CompileResult(Status.TIMEOUT, now - started[i][0], f"compile exceeded {limit:.1f} s")
            if handles:
                time.sleep(0.02)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None
            self._started.close()

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:
            pass
