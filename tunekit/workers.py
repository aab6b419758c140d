"""Worker processes: how they start, talk, and die with the process that started them.

A worker runs one entry point (``"module:function"``, given a connection) and talks over a
socket pair. It starts one of three ways:

- forked from this process (``Worker(entry, here=True)``): a copy of the caller, which holds its
  kernels as the caller has them, so it imports nothing of the user's. What compile workers
  are: they never touch the GPU, so a CUDA context in the caller does not matter to them.
- forked from a *zygote*: a process that already imported torch, Triton and tunekit but holds
  no CUDA context, so a new worker is ready in a fraction of a second (a fresh interpreter
  needs seconds to import torch). The zygote is forked from the user's process before CUDA
  is initialised there (``Zygote.fork``) or, failing that, started as a fresh interpreter.
  Benchmark workers (``isolate=True``) start so: they need a device of their own.
- as a fresh interpreter (``python -c``) with the caller's import path. Not multiprocessing's
  spawn, which re-runs the caller's ``__main__`` script in every child.

Every worker and zygote watches its parent and exits (killing its own children, a compiler's
ptxas) as soon as the parent is gone, however it died; workers ignore the terminal's Ctrl-C
(the parent decides) and leave quietly when their connection closes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Collection, Sequence
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from . import settings
from .compat import finish_prefetch, has_triton_allocator

logger = logging.getLogger(__name__)

#: Set in every worker's environment: a worker never starts a zygote of its own.
IN_WORKER = "TUNEKIT_IN_WORKER"
#: How often a worker looks whether its parent is still there, in seconds.
PARENT_CHECK_SECONDS = 0.1


def send(connection: Connection, message: Any) -> None:
    """Send one message. Plain pickle: multiprocessing's pickler would pass tensors as
    shared-memory handles, which a process that multiprocessing did not start cannot open."""
    connection.send_bytes(pickle.dumps(message))


def receive(connection: Connection) -> Any:
    return pickle.loads(connection.recv_bytes())


class CapturedOutput:
    """This process's stdout and stderr (the file descriptors: a compiler's C++ writes there too)
    sent to a file until ``stop``, so that a worker prints nothing on the user's terminal; what
    was written since the last ``take`` is read back for the caller's log."""

    def __init__(self) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        self._saved = (os.dup(1), os.dup(2))
        self._file = tempfile.TemporaryFile()
        os.dup2(self._file.fileno(), 1)
        os.dup2(self._file.fileno(), 2)
        self._read = 0

    def take(self, limit: int = 4000) -> str:
        sys.stdout.flush()
        sys.stderr.flush()
        self._file.seek(self._read)
        data = self._file.read()
        self._read += len(data)
        text = data.decode(errors="replace").strip()
        return text if len(text) <= limit else text[:limit] + " ..."

    def stop(self) -> str:
        """Give stdout and stderr back; what was written since the last ``take``."""
        text = self.take()
        for fd, saved in zip((1, 2), self._saved):
            os.dup2(saved, fd)
            os.close(saved)
        self._file.close()
        return text


def kill_process_tree(pid: int) -> None:
    """SIGKILL a process and the processes it started (a compiler's ptxas), on Linux via /proc."""
    for child in _children(pid):
        kill_process_tree(child)
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _children(pid: int, thread: int | None = None) -> list[int]:
    """The processes that ``pid`` started (those started by its ``thread``, if given)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{thread or pid}/children").read_text().split()]
    except OSError:
        return []


def thread_children(thread: int) -> set[int]:
    """The processes that a thread of this process (its native id) started and that still run."""
    return set(_children(os.getpid(), thread))


def kill_thread_children(thread: int, keep: Collection[int] = ()) -> None:
    """Kill the processes a thread of this process started (a compile left behind: its ptxas),
    but those in ``keep`` (started before the compile)."""
    for child in _children(os.getpid(), thread):
        if child not in keep:
            kill_process_tree(child)


def exit_reason(code: int | None) -> str:
    """Words for a worker's exit code (negative: the signal that ended it)."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _exit_code(status: int) -> int:
    """A ``waitpid`` status as ``subprocess`` reports it: the exit code, or minus the signal."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _become_worker(parent: int, watch: bool = True) -> None:
    """In a new worker or zygote: drop the signal handlers a fork inherited from the user's
    process (a SIGTERM handler that saves a checkpoint must not run here), ignore Ctrl-C, and
    (``watch``) exit when ``parent`` is gone."""
    os.environ[IN_WORKER] = "1"
    for number in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError, TypeError):
            if callable(signal.getsignal(number)):
                signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if watch:
        def watch_parent() -> None:
            while os.getppid() == parent:
                time.sleep(PARENT_CHECK_SECONDS)
            _exit_orphaned()

        threading.Thread(target=watch_parent, name="tunekit-parent-watch", daemon=True).start()


def _exit_orphaned() -> None:
    """The parent is gone: take this process's own children along, and exit."""
    for child in _children(os.getpid()):
        kill_process_tree(child)
    os._exit(0)


def serve(fd: int, entry: str, parent: int, forked: bool = False, become: bool = True) -> None:
    """What a worker runs: its entry point ``module:function`` gets the connection. A worker
    forked from a zygote first takes the caller's context from it. A closed connection (the
    tuning is over, or its process is gone) ends it quietly. ``become=False``: the caller already
    made this process a worker (``_become_worker``)."""
    import importlib

    module, function = entry.split(":")
    connection = Connection(fd)
    try:
        if forked:
            take_callers_context(receive(connection))
        if become:
            _become_worker(parent)
        getattr(importlib.import_module(module), function)(connection)
    except (EOFError, OSError) as error:
        if not isinstance(error, (EOFError, BrokenPipeError, ConnectionError)):
            raise
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


class _PolledProcess:
    """A worker process this process did not start with ``subprocess``: ``poll`` says its exit
    code (None while it runs), ``wait`` polls it as ``subprocess.Popen.wait`` would."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None:
        raise NotImplementedError

    def wait(self, seconds: float) -> int:
        end = time.monotonic() + seconds
        while self.poll() is None:
            if time.monotonic() > end:
                raise subprocess.TimeoutExpired("worker", seconds)
            time.sleep(0.005)
        return self.returncode  # type: ignore[return-value]


class _ForkedProcess(_PolledProcess):
    """A worker that a zygote forked: not this process's child, so its exit code comes from the zygote."""

    def __init__(self, pid: int, zygote: "Zygote") -> None:
        self.pid = pid
        self._zygote = zygote
        self.returncode = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._zygote.exit_code(self.pid)
        return self.returncode


class _Child(_PolledProcess):
    """A worker forked from this process: its exit code comes from ``waitpid``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (a SIGCHLD handler of the user's)
                self.returncode = -signal.SIGKILL
                return self.returncode
            if pid == self.pid:
                self.returncode = _exit_code(status)
        return self.returncode


def _fork_here(entry: str, connection: socket.socket) -> int:
    """Fork a worker from this process that serves ``entry`` over ``connection``; its pid. Only
    the forking thread lives on in the child, which never touches the GPU (a CUDA context here
    cannot be used there) and lets go of every other file this process has open."""
    finish_prefetch()
    parent = os.getpid()
    sys.stdout.flush()  # else what the caller printed and had not flushed is printed again by the copy
    sys.stderr.flush()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        with warnings.catch_warnings():  # Python 3.12 warns of any fork from a threaded process; this child only compiles
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:  # no memory or process left for the copy: the caller compiles in threads
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        raise
    if pid == 0:  # pragma: no cover - the worker's side, which never returns
        try:
            _become_worker(parent)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            _let_go_of_inherited_files(keep=connection.fileno())
            serve(connection.fileno(), entry, parent, become=False)
        finally:
            os._exit(0)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    return pid


class Worker:
    """One worker process running ``entry`` (``"module:function"``, given the connection):
    forked from this process (``here``), from ``zygote`` when one is given, else a fresh interpreter.

    A fresh interpreter starts with this process's import path and environment; ``sys.path``
    is set before anything is imported, because ``python -c`` would put the working directory
    first, where a source checkout's ``tunekit/`` may shadow the installed one.
    """

    def __init__(self, entry: str, zygote: "Zygote | None" = None, *, here: bool = False) -> None:
        ours, theirs = socket.socketpair()
        self.process: Any = None
        if here:
            self.process = _Child(_fork_here(entry, theirs))
            zygote = None
        elif zygote is not None:
            try:
                self.process = _ForkedProcess(zygote.start(entry, theirs), zygote)
            except OSError as error:  # the zygote is gone: a fresh interpreter instead
                logger.debug("the worker zygote could not fork a worker (%s)", error)
                zygote = None
        if self.process is None:
            self.process = _interpreter(f"serve({theirs.fileno()}, {entry!r}, {os.getpid()})", theirs)
        theirs.close()
        self.forked = zygote is not None
        self.connection = Connection(ours.detach())
        if self.forked:  # its environment, import path and directory are the zygote's until it has ours
            send(self.connection, callers_context())

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, message: Any) -> None:
        send(self.connection, message)

    def receive(self) -> Any:
        return receive(self.connection)

    def poll(self, timeout: float | None) -> bool:
        return self.connection.poll(timeout)

    def wait(self, seconds: float = 5.0) -> int | None:
        """Its exit code once it ended, None if it is still running after ``seconds``."""
        try:
            return self.process.wait(seconds)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """Kill it and its children, and close the connection. Also how an idle worker is
        stopped: it holds nothing unsaved, and a worker with a CUDA context can take seconds to
        exit on its own."""
        if self.alive():
            kill_process_tree(self.pid)
        self.wait()
        self.connection.close()


def _interpreter(call: str, connection: socket.socket) -> subprocess.Popen:
    """A fresh interpreter that runs ``call`` (a function of this module) with ``connection``.

    Before anything is imported (tunekit's package imports torch: seconds) it starts a thread that
    exits the process once this one is gone, and it sets ``sys.path`` to ours: ``python -c`` would
    put the working directory first, where a source checkout's ``tunekit/`` may shadow the
    installed one."""
    watch = ("import os, sys, threading, time\n"
             f"def _watch(parent={os.getpid()}):\n"
             "    while os.getppid() == parent:\n"
             "        time.sleep(0.1)\n"
             "    os._exit(0)\n"
             "threading.Thread(target=_watch, daemon=True).start()\n")
    bootstrap = f"{watch}sys.path[:] = {sys.path!r}\nfrom tunekit.workers import run_zygote, serve\n{call}\n"
    return subprocess.Popen([sys.executable, "-c", bootstrap], pass_fds=[connection.fileno()],
                            stdin=subprocess.DEVNULL, env={**os.environ, IN_WORKER: "1"})


def ready(workers: Sequence[Worker], timeout: float | None) -> list[Worker]:
    """The workers with a message (or an end of file) waiting, within ``timeout`` seconds."""
    by_connection = {worker.connection: worker for worker in workers}
    # wait() returns some of the objects it was given, these Connections: typeshed types them as any it accepts
    return [by_connection[c] for c in wait(list(by_connection), timeout)]  # type: ignore[index]  # typeshed


class Zygote:
    """A process with torch, Triton and tunekit imported and no CUDA context, that forks workers.

    Build one with ``Zygote.fork()`` (from this process, while it holds no CUDA context: the
    worker then starts with everything this process imported) or ``Zygote.spawn()`` (a fresh
    interpreter that imports torch and Triton: seconds, but off the caller's path).
    """

    def __init__(self, pid: int, connection: socket.socket, process: subprocess.Popen | None = None) -> None:
        self.pid = pid
        self._socket = connection
        self._process = process
        self._lock = threading.Lock()
        self._said_ready = False
        self._broken = False  # it stopped answering: the service replaces it
        #: Whether its Triton was imported for the interpreter: it serves only workers of that mode.
        self.interpreting = settings.interpreting()

    @classmethod
    def fork(cls, warm_up: str | None = None) -> "Zygote":
        """Fork the zygote from this process now. The caller checks that this is safe: no CUDA
        context yet, and no other thread (a fork copies only the calling thread). ``warm_up``
        (``"module:function"``) runs in the zygote first: what every worker would do otherwise."""
        ours, theirs = socket.socketpair()
        parent = os.getpid()
        # signals wait until the child has dropped the user's handlers (and the parent has forked)
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the zygote's side, which never returns
            try:
                _become_worker(parent, watch=False)  # single-threaded: it forks workers
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                ours.close()
                _let_go_of_inherited_files(keep=theirs.fileno())
                _forget_modules_being_imported()
                _call(warm_up)
                _zygote_loop(theirs, parent)
            finally:
                os._exit(0)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        theirs.close()
        return cls(pid, ours)

    @classmethod
    def spawn(cls, preload: Sequence[str], warm_up: str | None = None) -> "Zygote":
        """Start the zygote as a fresh interpreter that imports the modules ``preload`` names
        (and runs ``warm_up``, as ``fork`` does)."""
        ours, theirs = socket.socketpair()
        process = _interpreter(f"run_zygote({theirs.fileno()}, {os.getpid()}, {list(preload)!r}, {warm_up!r})", theirs)
        theirs.close()
        return cls(process.pid, ours, process)

    @property
    def spawned(self) -> bool:
        """Started as a fresh interpreter (not forked from the user's process)."""
        return self._process is not None

    def ready(self, timeout: float | None = 0) -> bool:
        """Whether it has finished importing (a spawned one says so once)."""
        with self._lock:
            return self._ready_locked(timeout)

    def _ready_locked(self, timeout: float | None) -> bool:
        if self._process is None or self._said_ready:
            return True
        if not select.select([self._socket], [], [], timeout)[0]:
            return False
        if self._socket.recv(16) != b"ready":
            raise OSError("the worker zygote exited while starting")
        self._said_ready = True
        return True

    def alive(self) -> bool:
        if self._broken:
            return False
        if self._process is not None:
            return self._process.poll() is None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        pid, _ = os.waitpid(self.pid, os.WNOHANG)
        return pid == 0

    def start(self, entry: str, connection: socket.socket) -> int:
        """Fork a worker running ``entry`` with ``connection`` (its end of a socket pair); its pid."""
        with self._lock:
            try:
                self._ready_locked(None)
                socket.send_fds(self._socket, [pickle.dumps(("start", entry))], [connection.fileno()])
                return pickle.loads(self._socket.recv(4096))
            except (OSError, EOFError, pickle.UnpicklingError) as error:
                self._broken = True
                raise OSError(f"the worker zygote stopped answering ({error})") from None

    def exit_code(self, pid: int) -> int | None:
        """The exit code of a worker it forked, None while that runs."""
        with self._lock:
            try:
                self._socket.sendall(pickle.dumps(("status", pid)))
                return pickle.loads(self._socket.recv(4096))
            except (OSError, EOFError, pickle.UnpicklingError):  # the zygote is gone, and so is the worker
                self._broken = True
                return -signal.SIGKILL

    def close(self) -> None:
        """Stop it (its workers see it go and exit)."""
        self._socket.close()
        kill_process_tree(self.pid)
        try:
            if self._process is not None:
                self._process.wait(5)
            else:
                os.waitpid(self.pid, 0)
        except (ChildProcessError, subprocess.TimeoutExpired):
            pass


def _let_go_of_inherited_files(keep: int) -> None:
    """In a zygote forked from the user's process: point every file descriptor it inherited
    (beyond stdin, stdout, stderr and ``keep``) at /dev/null, so that a pipe the user closes
    reaches its end. Pointed elsewhere rather than closed: objects of the user's that still hold
    those numbers may close them later, which must not close a file of the zygote's."""
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd > 2 and fd not in (keep, devnull):
                with contextlib.suppress(OSError):
                    os.dup2(devnull, fd)
    except OSError:  # no /proc: nothing to do
        pass
    finally:
        os.close(devnull)


def _forget_modules_being_imported() -> None:
    """In a zygote forked mid-import (a kernel decorated at the top of its module): drop the
    half-executed modules, so that a worker imports them afresh."""
    for name, module in list(sys.modules.items()):
        if getattr(getattr(module, "__spec__", None), "_initializing", False):
            del sys.modules[name]


def callers_context() -> dict[str, Any]:
    """This process's environment, import path and working directory, for a worker to take, and
    whether Triton has an allocator set here (kernels that build tensor descriptors on the device
    need one; the caller's own may not pickle, so the worker sets ``device_allocator``)."""
    return {"environ": dict(os.environ), "path": list(sys.path), "cwd": os.getcwd(),
            "triton_allocator": has_triton_allocator()}


def device_allocator(size: int, alignment: int, stream: int | None) -> Any:
    """Triton's allocator in a worker whose caller had one: device memory from PyTorch."""
    import torch

    return torch.empty(size, device="cuda", dtype=torch.int8)


def ensure_triton_allocator() -> None:
    """Set ``device_allocator`` as Triton's allocator unless this context has one (a user's own
    is kept): kernels that build tensor descriptors on the device need one."""
    if not has_triton_allocator():
        import triton

        triton.set_allocator(device_allocator)


def take_callers_context(caller: dict[str, Any]) -> None:
    """In a worker: the environment, import path and directory the caller has now (a zygote or a
    worker kept warm has those of when it started), as a fresh interpreter would have them."""
    in_worker = os.environ.get(IN_WORKER)
    os.environ.clear()
    os.environ.update(caller["environ"])
    if in_worker:
        os.environ[IN_WORKER] = in_worker
    sys.path[:] = caller["path"]
    try:
        os.chdir(caller["cwd"])
    except OSError:
        pass
    if caller.get("triton_allocator"):
        import triton

        triton.set_allocator(device_allocator)


def _call(entry: str | None) -> None:
    """Run ``"module:function"`` if given; a failure only loses what it would have saved."""
    if entry is None:
        return
    import importlib

    module, function = entry.split(":")
    try:
        getattr(importlib.import_module(module), function)()
    except Exception as error:  # pragma: no cover - a warm-up is an optimisation
        logger.debug("worker zygote warm-up %s failed: %s", entry, error)


def run_zygote(fd: int, parent: int, preload: Sequence[str], warm_up: str | None = None) -> None:
    """A spawned zygote's entry point: import what workers need (torch: the seconds a fresh
    interpreter costs, paid once here), warm up, say so, then serve."""
    import importlib

    _become_worker(parent, watch=False)
    for module in preload:
        importlib.import_module(module)
    _call(warm_up)

    connection = socket.socket(fileno=fd)
    try:
        connection.sendall(b"ready")
        _zygote_loop(connection, parent)
    except OSError:
        pass  # its parent is gone, or closed it: nothing to say
    finally:
        os._exit(0)


def _zygote_loop(connection: socket.socket, parent: int) -> None:
    """Fork a worker for each ``start`` request; report workers' exit codes on ``status``."""
    exited: dict[int, int] = {}
    zygote = os.getpid()
    while True:
        if not select.select([connection], [], [], PARENT_CHECK_SECONDS)[0]:
            if os.getppid() != parent:
                _exit_orphaned()
            continue
        message, fds, _, _ = socket.recv_fds(connection, 4096, 1)
        if not message:
            return  # the service closed it
        while True:  # reap finished workers, keeping their exit codes
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            exited[pid] = _exit_code(status)
        kind, value = pickle.loads(message)
        if kind == "status":
            connection.sendall(pickle.dumps(exited.pop(value, None)))
            continue
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the worker's side
            try:
                connection.close()
                serve(fds[0], value, zygote, forked=True)
            finally:
                os._exit(0)
        os.close(fds[0])
        connection.sendall(pickle.dumps(pid))
