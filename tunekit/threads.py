"""The threads tunekit runs work in inside the user's process, as one executor (the worker
service's): compiles that no worker process can take, and tunings off the request path
(``background=True``).

It is a ``concurrent.futures.Executor`` whose tasks each get a thread of their own, a daemon
thread, in a copy of the caller's context (Triton keeps the allocator that kernels building
tensor descriptors need in a context variable). Unlike ``ThreadPoolExecutor``, whose threads the
interpreter joins at exit before ``atexit`` handlers run, it does not hold a process's exit for
a tuning, and a task can be stopped. A stop is cooperative: the task sees it at its next
``check_stopped()`` (a tuning checks between evaluations). Only inside ``interruptible()`` (a
compile, whose passes are C++ called between Python steps, that nothing else can interrupt) does
a stop kill the processes the thread started there (a compiler's ``ptxas``) and raise ``Stopped``
in the thread as soon as it runs Python again: the bookkeeping around it is never cut short.
"""

from __future__ import annotations

import contextvars
import ctypes
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

from .workers import kill_thread_children, thread_children

T = TypeVar("T")


class Stopped(BaseException):
    """Raised inside a task that was stopped: its compile timed out, or the process is exiting.
    A ``BaseException``, so that code catching ``Exception`` (a compile failure) lets it pass."""


class _Task:
    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self.thread_id: int | None = None  # Python's id of the thread, while the task's function runs
        self.native_id: int | None = None
        self.stopped = False
        self.interruptible = False  # inside interruptible(): a stop is raised in the thread
        self.children_before: set[int] = set()  # the thread's child processes as the region began


#: The task the current thread runs, in TaskThreads' threads.
_current = threading.local()
#: Guards every task's state (TaskThreads' lock is per executor; interruptible() has only the task).
_lock = threading.Lock()


def stop_requested() -> bool:
    """Whether the task this thread runs was asked to stop (False outside TaskThreads' threads)."""
    task: _Task | None = getattr(_current, "task", None)
    return task is not None and task.stopped


def check_stopped() -> None:
    """Raise ``Stopped`` if the task this thread runs was asked to stop: where a task can end cleanly."""
    if stop_requested():
        raise Stopped("the task was stopped")


class interruptible:  # noqa: N801 - used as a context manager, like contextlib's
    """A region (a compile) where a stop is not waited for: it kills the processes the thread
    started and raises ``Stopped`` in it at once. Outside TaskThreads' threads it does nothing."""

    def __enter__(self) -> None:
        task: _Task | None = getattr(_current, "task", None)
        if task is None:
            return
        with _lock:
            if task.stopped:
                raise Stopped("the task was stopped")
            if task.native_id is not None:
                task.children_before = thread_children(task.native_id)
            task.interruptible = True

    def __exit__(self, *exc: object) -> None:
        task: _Task | None = getattr(_current, "task", None)
        if task is None:
            return
        with _lock:
            task.interruptible = False
            if task.stopped and task.thread_id is not None:  # a stop raised too late to land in the region
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(task.thread_id), None)


class TaskThreads(Executor):
    """Runs each submitted function in a daemon thread of its own; ``stop`` one, ``shutdown`` all."""

    def __init__(self) -> None:
        self._tasks: dict[Future[Any], _Task] = {}  # those whose threads have not ended
        self._shut = False

    def start(self, name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        """Run ``fn(*args, **kwargs)`` in a new thread called ``name``; its future."""
        future: Future[T] = Future()
        task = _Task()
        task.thread = threading.Thread(target=self._run, args=(future, task, contextvars.copy_context(), fn, args,
                                                               kwargs), name=name, daemon=True)
        with _lock:
            if self._shut:
                raise RuntimeError("cannot start a tunekit thread after the worker service shut down")
            self._tasks[future] = task
        try:
            task.thread.start()
        except BaseException:  # no thread (the system's limit): the task was never under way
            with _lock:
                self._tasks.pop(future, None)
            raise
        return future

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        return self.start(f"tunekit-{getattr(fn, '__name__', 'task')}", fn, *args, **kwargs)

    def _run(self, future: Future[T], task: _Task, context: contextvars.Context, fn: Callable[..., T],
             args: tuple, kwargs: dict[str, Any]) -> None:
        _current.task = task
        outcome: tuple[bool, Any] = (False, Stopped("stopped before it ran"))
        try:
            with _lock:
                task.thread_id, task.native_id = threading.get_ident(), threading.get_native_id()
            if not task.stopped and future.set_running_or_notify_cancel():
                outcome = (True, context.run(fn, *args, **kwargs))
        except BaseException as error:  # noqa: BLE001 - handed to the future, as executors do
            outcome = (False, error)
        finally:
            with _lock:
                task.thread_id = None
                self._tasks.pop(future, None)
            _current.task = None
        if future.running():
            if outcome[0]:
                future.set_result(outcome[1])
            else:
                future.set_exception(outcome[1])

    def stop(self, future: Future[Any]) -> None:
        """Stop a task: cancel it if it has not started; else it ends at its next ``check_stopped()``,
        or at once inside ``interruptible()``, where what its thread runs outside Python is killed and
        ``Stopped`` raised in it. Its future then holds ``Stopped`` (or what the task made of it)."""
        future.cancel()
        with _lock:
            task = self._tasks.get(future)
            if task is None or task.stopped:
                return
            task.stopped = True
            if not task.interruptible or task.thread_id is None:
                return
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(task.thread_id), ctypes.py_object(Stopped))
            if task.native_id is not None:  # under the lock: the thread cannot leave the region meanwhile
                kill_thread_children(task.native_id, keep=task.children_before)

    def running(self) -> list[Future[Any]]:
        """The tasks whose threads have not ended."""
        with _lock:
            return list(self._tasks)

    def stop_all(self, timeout: float | None = None) -> None:
        """Stop every task under way and wait up to ``timeout`` seconds in all for their threads to
        end; tasks may be started again afterwards."""
        self._stop_and_wait(True, timeout)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Start no more tasks; (``cancel_futures``) stop those under way; (``wait``) wait for their threads."""
        with _lock:
            self._shut = True
        self._stop_and_wait(cancel_futures, None if wait else 0.0)

    def _stop_and_wait(self, stop: bool, timeout: float | None) -> None:
        with _lock:
            tasks = dict(self._tasks)
        for future in tasks if stop else ():
            self.stop(future)
        end = None if timeout is None else time.monotonic() + timeout
        for task in tasks.values():
            if task.thread is not None:
                task.thread.join(None if end is None else max(0.0, end - time.monotonic()))
