"""Worker processes: a fresh Python interpreter per worker, talking over a socket pair.

Both the compile pool and the benchmark workers use these instead of ``multiprocessing``:
its spawn start method re-runs the caller's ``__main__`` script in every child, which tunes
again (and starts children of its own) when the script has no ``if __name__ == "__main__"``
guard, and a pool then restarts the dying children forever. A worker here imports only what
its entry point needs, with the caller's import path, and can be killed with its children.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def send(connection: Connection, message: Any) -> None:
    """Send one message. Plain pickle: multiprocessing's pickler would pass tensors as
    shared-memory handles, which a process that multiprocessing did not start cannot open."""
    connection.send_bytes(pickle.dumps(message))


def receive(connection: Connection) -> Any:
    return pickle.loads(connection.recv_bytes())


def serve(fd: int, entry: str) -> None:
    """What a worker runs (``python -c``): its entry point ``module:function`` gets the connection."""
    import importlib

    module, function = entry.split(":")
    getattr(importlib.import_module(module), function)(Connection(fd))


def kill_process_tree(pid: int) -> None:
    """SIGKILL a process and the processes it started (a compiler's ptxas), on Linux via /proc."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    for child in children:
        kill_process_tree(int(child))
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


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


class Worker:
    """One worker process running ``entry`` (``"module:function"``, given the connection).

    It starts with this process's import path and environment; ``sys.path`` is set before
    anything is imported, because ``python -c`` would put the working directory first, where a
    source checkout's ``tunekit/`` may shadow the installed one.
    """

    def __init__(self, entry: str) -> None:
        ours, theirs = socket.socketpair()
        bootstrap = (f"import sys; sys.path[:] = {sys.path!r}; "
                     f"from tunekit.workers import serve; serve({theirs.fileno()}, {entry!r})")
        self.process = subprocess.Popen([sys.executable, "-c", bootstrap], pass_fds=[theirs.fileno()])
        theirs.close()
        self.connection = Connection(ours.detach())

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


def ready(workers: Sequence[Worker], timeout: float) -> list[Worker]:
    """The workers with a message (or an end of file) waiting, within ``timeout`` seconds."""
    by_connection = {worker.connection: worker for worker in workers}
    return [by_connection[c] for c in wait(list(by_connection), timeout)]
