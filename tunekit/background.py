"""Tunings off the request path (``tunekit.autotune(..., background=True)``).

A key with no winner is answered at once with a fallback config while its tuning runs in a
thread (checking and timing in the kernel's benchmark worker), on snapshots of the first call's
tensors: the caller may overwrite or free its own as soon as the call returns. The Autotuner
asks ``Pending.ready()`` on each later call of the key and switches to the winner at the first
call that is neither inside a CUDA-graph capture nor inside a ``torch.compile`` trace, so a
captured graph or a traced program holds one config throughout.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from .config import Config
from .service import service
from .threads import check_stopped

logger = logging.getLogger(__name__)


#: Held by the background tuning that runs; the others wait for it.
_one_at_a_time = threading.Lock()


class Pending:
    """One key's tuning in a background thread (the worker service's ``threads``): the fallback
    ``entry`` to launch meanwhile, and the tuning's ``future``."""

    def __init__(self, fallback: Config, what: str, future: Future[Any]) -> None:
        self.entry = (fallback, fallback.all_kwargs(), None)  # launched through JITFunction.run
        self.what = what
        self.future = future

    @classmethod
    def start(cls, name: str, fallback: Config, what: str, tune: Callable[[], Any]) -> Pending:
        """Run ``tune()`` in a thread named ``name``, after the background tunings started before
        it (tunings of several keys would time each other on one GPU)."""
        def run() -> Any:
            held = False
            try:
                while not held:  # a wait a stop at exit ends
                    check_stopped()
                    held = _one_at_a_time.acquire(timeout=0.1)
                return tune()  # which checks for a stop between evaluations
            except Exception as error:
                logger.warning("%s: the background tuning failed; %s stays in use: %s: %s", name, what,
                               type(error).__name__, error)
                raise
            finally:
                if held:
                    _one_at_a_time.release()

        return cls(fallback, what, service().threads.start(name, run))

    def done(self) -> bool:
        return self.future.done()

    def result(self) -> Any:
        """What the tuning returned once done; None if it failed or was stopped (the fallback stays the answer)."""
        if not self.future.done() or self.future.cancelled() or self.future.exception() is not None:
            return None
        return self.future.result()


def may_switch() -> bool:
    """Whether a call may change the config it launches: not while a CUDA graph is captured or
    ``torch.compile`` traces."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return True
    if torch.compiler.is_compiling():
        return False
    return not (torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())


class NotCopyable(ValueError):
    """A call whose tensors cannot all be copied: inside tuples, or behind tensor descriptors."""


def snapshot(arg_names: Sequence[str], args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """The call's arguments with its tensors copied (taken on the caller's stream, with their
    layouts, shared storage and alignment, as ``tunekit.guarded`` copies them, and finished before
    this returns), for a tuning that outlives the call. Raises ``NotCopyable`` for tensors held
    in tuples or descriptors, which the tuning would read from the caller's memory."""
    import torch

    from .guarded import GuardedTensors, with_tensors

    named = {**dict(zip(arg_names, args)), **kwargs}
    for name, value in named.items():
        nested = isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in value)
        if nested or isinstance(getattr(value, "base", None), torch.Tensor):
            raise NotCopyable(f"argument {name} holds tensors in a {type(value).__name__}")
    tensors = {name: value for name, value in named.items() if isinstance(value, torch.Tensor)}
    copies = GuardedTensors.copy_of(tensors, padding=True).tensors  # only copies: verify is never called
    if any(t.is_cuda for t in copies.values()):
        torch.cuda.current_stream().synchronize()  # the thread reads them on its own stream
    return with_tensors(arg_names, args, kwargs, copies)
