"""The threads tunekit runs work in inside the user's process, as one executor (the worker
service's): compiles that no worker process can take, and tunings off the request path
(``background=True``).

It is a ``concurrent.futures.Executor`` whose tasks each get a thread of their own, a daemon
thread, in a copy of the caller's context (Triton keeps the allocator that kernels building
tensor descriptors need in a context variable). Unlike ``ThreadPoolExecutor``, whose threads the
interpreter joins at exit before ``atexit`` handlers run, it does not hold a process's exit for
a tuning, and a task can be stopped: ``stop`` kills the processes its thread started (a
compiler's ``ptxas``) and raises ``Stopped`` in the thread as soon as it runs Python again (the
compiler's passes are C++ called between Python steps; nothing else can interrupt them).
"""

from __future__ import annotations

import contextvars
import ctypes
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

from .workers import kill_thread_children

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


class TaskThreads(Executor):
    """Runs each submitted function in a daemon thread of its own; ``stop`` one, ``shutdown`` all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: dict[Future[Any], _Task] = {}  # those whose threads have not ended
        self._shut = False

    def start(self, name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        """Run ``fn(*args, **kwargs)`` in a new thread called ``name``; its future."""
        future: Future[T] = Future()
        task = _Task()
        task.thread = threading.Thread(target=self._run, args=(future, task, contextvars.copy_context(), fn, args,
                                                               kwargs), name=name, daemon=True)
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot start a tunekit thread after the worker service shut down")
            self._tasks[future] = task
        task.thread.start()
        return future

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        return self.start(f"tunekit-{getattr(fn, '__name__', 'task')}", fn, *args, **kwargs)

    def _run(self, future: Future[T], task: _Task, context: contextvars.Context, fn: Callable[..., T],
             args: tuple, kwargs: dict[str, Any]) -> None:
        outcome: tuple[bool, Any] = (False, Stopped("stopped before it ran"))
        try:
            try:
                with self._lock:
                    task.thread_id, task.native_id = threading.get_ident(), threading.get_native_id()
                if not task.stopped and future.set_running_or_notify_cancel():
                    outcome = (True, context.run(fn, *args, **kwargs))
            except BaseException as error:  # noqa: BLE001 - handed to the future, as executors do
                outcome = (False, error)
            finally:
                self._leave(task)
        except Stopped as error:  # a stop that arrived as the function returned, before _leave
            self._leave(task)
            outcome = outcome if outcome[0] else (False, error)
        with self._lock:
            self._tasks.pop(future, None)
        if future.running():
            if outcome[0]:
                future.set_result(outcome[1])
            else:
                future.set_exception(outcome[1])

    def _leave(self, task: _Task) -> None:
        """The task's function is over: no stop may reach the thread now, and one on its way is dropped."""
        with self._lock:
            thread_id, task.thread_id = task.thread_id, None
            if task.stopped and thread_id is not None:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)

    def stop(self, future: Future[Any]) -> None:
        """Stop a task: cancel it if it has not started, else kill what its thread runs outside
        Python and raise ``Stopped`` in it. Its future then holds ``Stopped``."""
        future.cancel()
        with self._lock:
            task = self._tasks.get(future)
            if task is None or task.stopped:
                return
            task.stopped = True
            if task.thread_id is not None:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(task.thread_id), ctypes.py_object(Stopped))
            native_id = task.native_id
        if native_id is not None:
            kill_thread_children(native_id)

    def running(self) -> list[Future[Any]]:
        """The tasks whose threads have not ended."""
        with self._lock:
            return list(self._tasks)

    def stop_all(self, timeout: float | None = None) -> None:
        """Stop every task under way and wait up to ``timeout`` seconds in all for their threads to
        end; tasks may be started again afterwards."""
        self._stop_and_wait(True, timeout)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Start no more tasks; (``cancel_futures``) stop those under way; (``wait``) wait for their threads."""
        with self._lock:
            self._shut = True
        self._stop_and_wait(cancel_futures, None if wait else 0.0)

    def _stop_and_wait(self, stop: bool, timeout: float | None) -> None:
        with self._lock:
            tasks = dict(self._tasks)
        for future in tasks if stop else ():
            self.stop(future)
        end = None if timeout is None else time.monotonic() + timeout
        for task in tasks.values():
            if task.thread is not None:
                task.thread.join(None if end is None else max(0.0, end - time.monotonic()))
