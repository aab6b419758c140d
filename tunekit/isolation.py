"""Checking and timing configs in a worker process, so that a config that crashes, hangs or
breaks the device context costs that worker, not the caller's process.

An illegal memory access poisons a CUDA context for the rest of its process, and a segfault
or a hang in a launch cannot be caught at all, so the only safe place to try a config that
already killed a process is another one. Such a worker needs a device of its own, so it cannot
be a copy of a caller that holds a CUDA context: it imports the kernel's module again (the
decorated kernel must live at the top level of an importable module), with the caller's
environment, import path and directory, and what that import prints is kept from the user's
terminal. The kernel it finds there must be the one tuned here (the same code, under the same
decorators: ``triton.heuristics`` above or below the autotuner is looked through), or the
worker says so and the caller tunes in its own process. The worker gets guarded copies of the
launch's tensor arguments (``tunekit.guarded``: each storage's used region once, with the
caller's strides and alignment, and guard bands where the caller's allocations end), and runs
a ``LocalRunner`` on them: the caller's tensors are never touched. A worker that dies or
outlives the run timeout is killed; its config is a ``runtime_error`` or ``timeout`` trial and
the next config gets a new worker, which is handed the reference outputs the check had.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import json
import logging
import os
import pickle
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch

from .compat import triton_build_key, warm_up_cuda_utils
from .compiler import Timeout, source_hash, unwrap_jit
from .caller import warn_at_caller
from .config import Config, config_from_dict, config_json
from .guarded import ShippedTensors, out_of_memory, ship, with_tensors
from .keys import TuningKey
from .launch import Launch
from .runner import LocalRunner
from .service import service
from .threads import check_stopped
from .trial import Status, Trial
from .workers import CapturedOutput, Worker, callers_context, exit_reason, receive, send, take_callers_context

logger = logging.getLogger(__name__)

#: Seconds a new worker may take to import torch, Triton and the kernel's module.
START_TIMEOUT = 600.0
#: How often a wait on the benchmark worker looks whether its tuning was stopped.
STOP_CHECK_SECONDS = 0.1


class IsolationError(RuntimeError):
    """The benchmark worker could not be started; the message says why."""


def kernel_address(fn: Any) -> tuple[str, str] | None:
    """(module, name) where a worker process finds this kernel again, or None when it cannot:
    defined in ``__main__`` or inside a function, or in a module that importing it by name would
    not find (loaded from a file by path, or from a directory no longer on the import path)."""
    jit = unwrap_jit(fn)
    function = getattr(jit, "fn", jit)
    module, qualname = getattr(function, "__module__", None), getattr(function, "__qualname__", "")
    if not module or module == "__main__" or "<locals>" in qualname or not _importable_by_name(module):
        return None
    return module, qualname


def _importable_by_name(name: str) -> bool:
    """Whether ``import name`` in a fresh process with this import path finds the same file."""
    spec = getattr(sys.modules.get(name), "__spec__", None)
    if spec is None or spec.name != name or not spec.origin:
        return False
    parent = name.rpartition(".")[0]
    path = getattr(sys.modules.get(parent), "__path__", None) if parent else None
    if parent and path is None:
        return False
    try:
        found = importlib.machinery.PathFinder.find_spec(name, path)
    except (ImportError, ValueError):
        return False
    return found is not None and found.origin == spec.origin


def import_kernel(module: str, qualname: str) -> Any:
    """In a worker: the object ``kernel_address`` named (the module's kernel, however decorated)."""
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def _chain(fn: Any) -> list[str]:
    """The decorators between the Autotuner and the JIT function, by type name (Heuristics ...)."""
    names = []
    while fn is not unwrap_jit(fn):
        names.append(type(fn).__name__)
        fn = fn.fn
    return names


def _resolve_kernel(module: str, qualname: str, chain: list[str], code: str) -> Any:
    """The kernel in the worker, as the parent's Autotuner wraps it: found under whatever wraps
    it in its module (``triton.heuristics`` over the autotuner, a library's own wrapper), with the
    same decorators below the autotuner and the same code; else an ``IsolationError`` saying why."""
    found = import_kernel(module, qualname)
    candidate = found
    while True:
        if _chain(candidate) == chain:
            if source_hash(candidate) != code:
                raise IsolationError(f"{module}.{qualname} imported in a benchmark worker is not the kernel tuned "
                                     "here (its code differs: the module builds it from something the worker does "
                                     "not share)")
            return candidate
        if candidate is unwrap_jit(candidate):
            break
        candidate = candidate.fn
    raise IsolationError(f"{module}.{qualname} is wrapped in {_chain(found) or 'nothing'} in its module, and in "
                         f"{chain or 'nothing'} where it is tuned, so a benchmark worker cannot find it")


def _shippable(launch: Launch, config_hooks: Sequence[Any] = ()) -> Launch:
    """``launch`` without its function, checked to reach a worker intact (with the configs'
    ``pre_hook``s): what a worker is sent."""
    shipped = launch.without_fn()
    for name in ("user_pre_hook", "user_post_hook", "benchmarker", "reference", "tolerance"):
        check_shippable(getattr(shipped, name), f"{name.removeprefix('user_')} of {launch.kernel_name}")
    for hook in config_hooks:
        check_shippable(hook, f"a config's pre_hook of {launch.kernel_name}")
    return shipped


def check_shippable(value: Any, what: str) -> None:
    """Raise an ``IsolationError`` when ``value`` cannot be rebuilt in a worker: it does not pickle,
    or it refers to the user's script (``__main__``), which a worker does not run."""
    try:
        pickled = pickle.dumps(value)
    except Exception as error:
        raise IsolationError(f"{what} cannot be sent to a benchmark worker ({error}); define it at the top level "
                             "of a module, or pass isolate=False") from None
    if b"__main__" in pickled:
        raise IsolationError(f"{what} is defined in the script being run (__main__), which a benchmark worker "
                             "cannot import; define it in a module, or pass isolate=False")


def warm_up() -> None:
    """In a worker zygote, before it forks workers: what every worker's (and, through Triton's
    cache, the caller's) first compile or launch would otherwise do itself. Triton's key of its
    own build (it hashes Triton's files: 0.4 s on the H200 machine, once per process) and, on a
    CUDA build of torch, Triton's CUDA utilities (a C module Triton builds with the host compiler
    into its cache on first use: 0.56 s there on a cold cache; loading it initialises no device,
    so the zygote can still fork)."""
    triton_build_key()
    if torch.version.cuda is not None:
        warm_up_cuda_utils()


def _broken_device() -> bool:
    """True when this process's CUDA context no longer works (after an illegal memory access)."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return False
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
        return False
    except Exception:
        return True


def serve_benchmarks(connection: Any) -> None:
    """A benchmark worker's loop (``tunekit.workers``): take a tuning's set-up (and say when it is
    ready), then check and time configs for it, tuning after tuning, until the connection closes."""
    runner: LocalRunner | None = None
    while True:
        kind, message = receive(connection)
        if kind == "setup":
            start = time.perf_counter()
            try:
                runner, warning, printed = _set_up(*message)
            except IsolationError as error:
                send(connection, ("refused", str(error)))
                return
            except Exception as error:  # the module's import failed here: the caller tunes in its own process
                send(connection, ("refused", f"importing the kernel in a benchmark worker failed: "
                                             f"{type(error).__name__}: {error}"))
                return
            logger.debug("benchmark worker %d: set up for %s in %.3f s", os.getpid(), runner.launch.kernel_name,
                         time.perf_counter() - start)
            send(connection, ("ready", (warning, printed)))
            continue
        if kind == "release":  # kept warm between tunings: without the last one's tensors
            runner = None
            if torch.cuda.is_initialized():
                torch.cuda.empty_cache()
            continue
        assert runner is not None, "a measure request before any set-up"
        start = time.perf_counter()
        reply = _measure(runner, *message)
        if "refused" in reply:
            send(connection, ("refused", reply["refused"]))
            continue
        trial = reply["trial"]
        logger.debug("benchmark worker %d: %s %s in %.3f s (check %.3f s, benchmark %.3f s)", os.getpid(),
                     trial.config, trial.status.value, time.perf_counter() - start, trial.check_seconds or 0.0,
                     trial.bench_seconds or 0.0)
        send(connection, ("trial", reply))
        if reply["exiting"]:
            return  # the context is poisoned: exit, and the parent starts a fresh worker


def _set_up(caller: dict[str, Any], address: tuple[str, str, list[str], str], launch: Launch, args: tuple,
            kwargs: dict, tensors: ShippedTensors, check: bool, expected: dict | None, reference_config: str | None,
            device_index: int | None) -> tuple[LocalRunner, str | None, str]:
    """The worker's runner for one tuning, with the caller's import path as it is now: the kernel
    imported again, guarded copies of the tensor arguments. With it, a warning for the caller
    when the guard bands did not fit in the device's memory (the copies are then unguarded), and
    what the import printed (kept from the user's terminal, for the caller's log)."""
    take_callers_context(caller)
    if device_index is not None:
        torch.cuda.set_device(device_index)
    output = CapturedOutput()
    try:
        fn = _resolve_kernel(*address)
    finally:
        printed = output.stop()
    launch = replace(launch, fn=fn)
    warning = None
    try:
        copies = tensors.land(padding=launch.writes_padding)
    except (RuntimeError, MemoryError) as error:
        if not out_of_memory(error):
            raise
        copies = tensors.land(guarded=False)
        warning = (f"tunekit: no memory in the benchmark worker for guard bands around the copies of "
                   f"{launch.kernel_name}'s tensor arguments, so out-of-bounds writes cannot be caught for this "
                   "tuning")
    runner = LocalRunner(launch, args, kwargs, launch.output_check() if check else None, copies=copies)
    if runner.check is not None:
        if expected is not None:
            runner.check.expected = {name: t.to(runner.check.pristine[name].device) for name, t in expected.items()}
            runner.check.reference_config = reference_config
        runner.check.warm_up()  # while the caller compiles the first config
    return runner, warning, printed


def _measure(runner: LocalRunner, params: dict, pre_hook: Any, grid: Any, key: TuningKey, check: bool, short: bool,
             heuristics: dict[str, str]) -> dict:
    """One config checked and timed in the worker, as a reply the parent turns into a Trial; or,
    when the kernel's heuristics set other values here than in the caller (the import built them
    otherwise), a refusal."""
    config = config_from_dict(params, pre_hook=pre_hook)
    here = runner.launch.heuristic_values(config, runner.args, {k: v for k, v in runner.kwargs.items() if k != "grid"})
    if here != heuristics:
        return {"refused": f"{runner.launch.kernel_name}'s heuristics set {here} in a benchmark worker, which imported "
                           f"it again, but {heuristics} here (the module builds them from something the worker does "
                           "not share)"}
    runner.kwargs["grid"] = grid
    had_reference = runner.check is None or runner.check.expected is not None
    trial = runner.measure(config, key, check=check, short=short)
    reply: dict[str, Any] = {"trial": trial}
    if not had_reference and runner.check is not None and runner.check.expected is not None:
        reply["expected"] = {name: t.detach().to("cpu", copy=True) for name, t in runner.check.expected.items()}
        reply["reference_config"] = runner.check.reference_config
    reply["exiting"] = not trial.ok and _broken_device()
    return reply


class IsolatedRunner:
    """A ``LocalRunner`` in a benchmark worker process, replaced after any crash or hang.

    Workers come from the process's worker service (``tunekit.service``): one kept warm from an
    earlier tuning, or a new one, which starts while the first configs compile.

    Args:
        launch: how the kernel is launched: its function is found again by module and name in
            the worker, its hooks, timer and check options are sent there (they must pickle).
        args, kwargs: the launch arguments; tensors are copied (``tunekit.guarded``), never shared.
        check: whether the worker checks outputs (with the launch's check options).
        timeout: seconds one config's check and benchmark may take in the worker: a number,
            None for no limit, or a callable asked before each config.
        time_left: seconds left to the tuning's deadline (None: no deadline), so that waiting
            for a worker to start does not outlast it.
        config_hooks: the ``pre_hook``s of the configs to be measured, checked here to reach the
            worker (an ``IsolationError`` now, where the caller can still tune in its own process).
    """

    def __init__(self, launch: Launch, args: tuple, kwargs: dict, *, check: bool, timeout: Timeout = None,
                 time_left: Callable[[], float | None] | None = None, config_hooks: Sequence[Any] = ()) -> None:
        address = kernel_address(launch.fn)
        if address is None:
            raise IsolationError(f"{launch.kernel_name} is defined in __main__ or inside a function, so a "
                                 "benchmark worker cannot import it; define it at the top level of a module, or "
                                 "pass isolate=False")
        self.launch = launch
        self.address = (*address, _chain(launch.fn), source_hash(launch.fn))
        self.shipped = _shippable(launch, config_hooks)
        tensors = {name: v for name, v in launch.named(args, kwargs).items() if isinstance(v, torch.Tensor)}
        self.tensors = ship(tensors)
        # the tensors travel in self.tensors; the worker puts its copies in their places
        self.args, self.kwargs = with_tensors(launch.arg_names, args,
                                              {name: v for name, v in kwargs.items() if name != "grid"},
                                              dict.fromkeys(tensors))
        #: The call's own arguments: the grid is evaluated here, per config.
        self.caller_args, self.caller_kwargs = args, kwargs
        cuda = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor) and v.is_cuda]
        self.device_index = cuda[0].device.index if cuda else None
        self.check = check
        self.timeout = timeout
        self.time_left = time_left
        self.expected: dict | None = None
        self.reference_config: str | None = None
        #: Workers started (a warm one taken from the service is not counted).
        self.workers_started = 0
        #: Seconds spent waiting for workers to be ready, and on everything around the worker's
        #: own check and benchmark of each config (sending, receiving): what isolation costs.
        self.seconds_starting = 0.0
        self.seconds_messaging = 0.0
        self._worker: Worker | None = None
        self._warned = False  # the worker's warning, given once per tuning
        self._ready = False
        self._awaiting_reply = False  # a request was sent and its reply not read
        self._start()

    def _start(self) -> None:
        self._worker, new = service().benchmark_worker(self.device_index)
        self._worker.send(("setup", (callers_context(), self.address, self.shipped, self.args, self.kwargs,
                                     self.tensors, self.check, self.expected, self.reference_config,
                                     self.device_index)))
        self._ready = False
        self.workers_started += new

    def _poll(self, seconds: float | None) -> bool:
        """Whether the worker answers within ``seconds`` (None: however long it takes), seeing a
        stop of the tuning's task (the process exits) within a tenth of a second."""
        assert self._worker is not None
        end = None if seconds is None else time.monotonic() + seconds
        while True:
            check_stopped()
            step = STOP_CHECK_SECONDS if end is None else min(STOP_CHECK_SECONDS, max(0.0, end - time.monotonic()))
            if self._worker.poll(step):
                return True
            if end is not None and time.monotonic() >= end:
                return False

    def _wait_ready(self, limit: float | None = None) -> bool:
        """Wait until the worker is ready: False if that takes more than ``limit`` seconds (it
        goes on starting, for the next config)."""
        if self._ready:
            return True
        assert self._worker is not None
        waited = time.perf_counter()
        if not self._poll(START_TIMEOUT if limit is None else min(limit, START_TIMEOUT)):
            if limit is not None and limit < START_TIMEOUT:
                self.seconds_starting += time.perf_counter() - waited
                return False
            self._stop()
            raise IsolationError(f"the benchmark worker did not start within {START_TIMEOUT:.0f} s")
        try:
            kind, reply = self._worker.receive()
        except (EOFError, OSError):
            code = self._worker.wait()
            self._stop()
            raise IsolationError(f"the benchmark worker exited while starting ({exit_reason(code)}); its error "
                                 "is printed above") from None
        if kind == "refused":
            self._stop()
            raise IsolationError(reply)
        warning, printed = reply
        if printed:
            logger.debug("%s: importing it in a benchmark worker printed: %s", self.launch.kernel_name, printed)
        self._ready = True
        self.seconds_starting += time.perf_counter() - waited
        if warning is not None and not self._warned:
            warn_at_caller(warning, RuntimeWarning)
            self._warned = True
        return True

    def measure(self, config: Config, key: TuningKey, *, check: bool = True, short: bool = False) -> Trial:
        """Check (unless ``check`` is False) and time ``config`` in the worker, as ``LocalRunner.measure``;
        a crash or a hang is this config's trial."""
        check_shippable(config.pre_hook, f"the pre_hook of config {config}")
        grid = self.launch.grid_of(config, self.caller_args, self.caller_kwargs)
        heuristics = self.launch.heuristic_values(config, self.caller_args, self.caller_kwargs)
        request = ("measure", (json.loads(config_json(config)), config.pre_hook, grid, key, check, short, heuristics))
        for attempt in range(2):
            if self._worker is None or not self._worker.alive():
                self._start()
            left = self.time_left() if self.time_left is not None else None
            if not self._wait_ready(left):  # the budget ends first: the config is left unmeasured
                return Trial(config, Status.TIMEOUT, error=f"the benchmark worker was not ready within {left:.1f} s",
                             key=key)
            assert self._worker is not None  # started above, and ready
            start = time.perf_counter()
            try:
                self._worker.send(request)
                self._awaiting_reply = True
                break
            except OSError:  # it died between two configs: this one never ran there
                self._stop()
                if attempt == 1:
                    raise IsolationError("the benchmark worker died twice before it could run a config") from None
        assert self._worker is not None  # the loop ended with the request sent
        limit = self.timeout() if callable(self.timeout) else self.timeout
        try:
            answered = self._poll(limit)
            kind, reply = self._worker.receive() if answered else (None, None)
            self._awaiting_reply = not answered
        except (EOFError, ConnectionError):
            reason = exit_reason(self._worker.wait())
            self._stop()
            logger.warning("config %s killed its benchmark worker (%s); starting another", config, reason)
            return Trial(config, Status.RUNTIME_ERROR, error=f"the benchmark worker died running it ({reason})",
                         key=key, bench_seconds=time.perf_counter() - start)
        if kind == "refused":
            self._stop()
            raise IsolationError(reply)
        if kind is None:
            self._stop()
            logger.warning("config %s ran past %.1f s: its benchmark worker was killed", config, limit)
            return Trial(config, Status.TIMEOUT, error=f"check and benchmark exceeded {limit:.1f} s", key=key,
                         bench_seconds=time.perf_counter() - start)
        assert reply is not None  # answered: a "trial" reply, a dict
        if reply.get("exiting"):  # its device context broke: let it go, the next config gets a new one
            self._stop()
        if "expected" in reply:
            self.expected, self.reference_config = reply["expected"], reply["reference_config"]
        trial = replace(reply["trial"], config=config)
        in_worker = (trial.bench_seconds or 0.0) + (trial.check_seconds or 0.0)
        self.seconds_messaging += max(0.0, time.perf_counter() - start - in_worker)
        return trial

    def finish(self) -> None:
        """The caller's tensors were never touched: nothing to restore."""

    def _stop(self) -> None:
        if self._worker is not None:
            self._worker.kill()
        self._worker = None
        self._ready = False
        self._awaiting_reply = False

    def close(self) -> None:
        """Give a healthy, idle worker back to the service, warm for the next tuning (one whose
        reply is still due, after an interrupted wait, is killed: its next message is stale)."""
        if self._worker is not None and self._ready and not self._awaiting_reply and self._worker.alive():
            try:
                self._worker.send(("release", None))
                service().give_back(self._worker, self.device_index)
            except OSError:
                self._worker.kill()
        elif self._worker is not None:
            self._worker.kill()
        self._worker = None
        self._ready = False
