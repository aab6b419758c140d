"""Checking and timing configs in this process: the benchmark side of one tuning.

A ``LocalRunner`` holds one tuning's launch arguments, its tensors replaced by guarded copies
(``tunekit.guarded``), so that no config writes the caller's tensors or the memory around them.
For each config it launches the kernel once from the pristine inputs, has the guard bands
verified (a store into one makes the config ``wrong``) and the ``OutputCheck`` judge the outputs
(a wrong config is not timed), then times it with the launch's ``Benchmarker`` under Triton's
hook semantics (``reset_to_zero``, ``restore_value``, pre/post hooks). The tensors the copies
were made from, never written by a config, are the check's pristine values, so tuning needs one
copy of each tensor, not two. When the copies do not fit in memory, it works on the caller's
tensors (the check then keeps clones of them) and ``finish`` puts their pristine values back, so
that the launch that follows sees the caller's original values. ``tunekit.isolation`` runs
the same runner in a worker process, on copies landed there.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import torch

from .benchmark import classify, describe
from .caller import warn_at_caller
from .check import OutputCheck, Verdict
from .config import Config
from .guarded import GuardedTensors, out_of_memory, with_tensors
from .keys import TuningKey
from .launch import Launch
from .trial import Status, Timing, Trial

_Method = TypeVar("_Method", bound=Callable[..., Any])
_measuring = threading.local()


def measuring_in_this_thread() -> bool:
    """Whether this thread is checking or timing a config: tunekit's copies and comparisons, a
    reference function and the config's hooks run then. A kernel that misses meanwhile is one
    those launch (a library that replaces PyTorch's kernels with autotuned Triton kernels, a
    reference built from tuned kernels), not one the caller asked for."""
    return getattr(_measuring, "depth", 0) > 0


def _measuring_here(method: _Method) -> _Method:
    @functools.wraps(method)
    def measuring(*args: Any, **kwargs: Any) -> Any:
        _measuring.depth = getattr(_measuring, "depth", 0) + 1
        try:
            return method(*args, **kwargs)
        finally:
            _measuring.depth -= 1

    return measuring  # type: ignore[return-value]


class LocalRunner:
    """Checks and times configs of ``launch`` on copies of ``args``/``kwargs`` in this process.

    Args:
        check: the tuning's ``OutputCheck``, or None to time without checking outputs.
        copies: the guarded copies to run on, by argument name (a benchmark worker's, landed
            there; ``args``/``kwargs`` may hold anything in their places); by default the runner
            copies the tensors of ``args``/``kwargs``, or, when the copies or the check's snapshot
            run out of memory, warns and runs on the caller's tensors.
        copy: False to run on the caller's tensors without copies (and without a check: tunekit's
            own operations on the device are then none), as Triton's autotuner does.
    """

    #: What isolation cost (``IsolatedRunner`` has the same): nothing here.
    workers_started = 0
    seconds_starting = 0.0
    seconds_messaging = 0.0

    #: The arguments configs run on (with the copies' tensors in place of the caller's, if any)
    args: tuple
    kwargs: dict[str, Any]
    nargs: dict[str, Any]

    @_measuring_here
    def __init__(self, launch: Launch, args: tuple, kwargs: dict, check: OutputCheck | None,
                 copies: GuardedTensors | None = None, time_left: Callable[[], float | None] | None = None,
                 copy: bool = True) -> None:
        self.launch = launch
        self.check = check
        self.time_left = time_left
        self.copies: GuardedTensors | None = None
        if not copy:
            assert check is None and copies is None, "a check needs copies or clones of the caller's tensors"
            self._run_on(None, args, kwargs)
            return
        try:
            if copies is None:
                tensors = _tensor_arguments(launch, args, kwargs)
                self._run_on(GuardedTensors.copy_of(tensors, padding=launch.writes_padding), args, kwargs)
            else:  # a benchmark worker's, which has a fallback of its own
                self._run_on(copies, args, kwargs)
        except (RuntimeError, MemoryError) as error:
            if copies is not None or not out_of_memory(error):
                raise
            self.copies, self.args, self.kwargs, self.nargs = None, (), {}, {}  # free what was built
        if self.copies is None:
            warn_at_caller(f"tunekit: no memory for copies of {launch.kernel_name}'s tensor arguments between guard "
                           "bands, so configs are checked and timed on the caller's tensors and out-of-bounds writes "
                           "cannot be caught for this tuning", RuntimeWarning)
            self._run_on(None, args, kwargs)
        if check is not None and check.reference is not None:
            check.compute_reference(self.nargs)

    def _run_on(self, copies: GuardedTensors | None, args: tuple, kwargs: dict) -> None:
        """Put ``copies`` (None: none, the caller's tensors) in place of the tensor arguments and
        have the check keep the pristine values: the copies' originals where no config can write
        them, or else clones."""
        self.copies = copies
        if copies is not None:
            args, kwargs = with_tensors(self.launch.arg_names, args, kwargs, copies.tensors)
        self.args = args
        self.kwargs = kwargs
        self.nargs = self.launch.named(args, kwargs)
        if self.check is not None:
            pristine = _unwritable(copies.originals, (*args, *kwargs.values())) if copies is not None else None
            self.check.snapshot(self.nargs, pristine=pristine)

    @_measuring_here
    def measure(self, config: Config, key: TuningKey, *, check: bool = True, short: bool = False) -> Trial:
        """One config: checked (unless ``check`` is False, for a config checked before, or the
        runner has no check), then timed; ``short``: with the benchmarker's shorter timing."""
        relative_error = check_seconds = launch_seconds = None
        if check and self.check is not None:
            start = time.perf_counter()
            verdict_or_failure = self._check(config, key)
            if isinstance(verdict_or_failure, Trial):
                return verdict_or_failure
            (relative_error, launch_seconds), check_seconds = verdict_or_failure, time.perf_counter() - start
        left = self.time_left() if self.time_left is not None else None
        benchmarker = self.launch.benchmarker
        if (left is not None and launch_seconds is not None
                and benchmarker.launches_at_least(short) * launch_seconds > left):
            # timing it would run past the budget's end: the check's launch is its time (the budget
            # bounds a tuning to its seconds and one launch)
            milliseconds = launch_seconds * 1e3
            trial = Trial(config, Status.OK, Timing(milliseconds, milliseconds, milliseconds), key=key,
                          bench_seconds=check_seconds)
        else:
            trial = benchmarker.measure(config, self.launch.call(config, self.args, self.kwargs), key, short=short,
                                        warm=relative_error is not None,
                                        until=time.perf_counter() + left if left is not None else None)
        trial = replace(trial, relative_error=relative_error, check_seconds=check_seconds)
        if self.check is None:
            return trial
        if not trial.ok:
            self._clear_guards()
            return trial
        overrun = self._overrun()  # a store into a guard band while timed makes a checked config wrong too
        if overrun is not None:
            return replace(trial, status=Status.WRONG, timing=None, error=f"while timed, {overrun}")
        return trial

    def _check(self, config: Config, key: TuningKey) -> Trial | tuple[float, float]:
        """Launch once from the pristine inputs and judge: a Trial if the config failed or is wrong,
        else its largest relative error and the seconds its launch took."""
        assert self.check is not None
        full = {**self.nargs, **self.kwargs, **config.all_kwargs()}
        start = time.perf_counter()
        self.check.restore(full)
        launched = False
        try:
            launch_start = time.perf_counter()
            self.launch.launch_once(config, self.args, self.kwargs, full)
            _synchronize(full)
            launch_seconds = time.perf_counter() - launch_start
            launched = True
            overrun = self._overrun()
            verdict = self.check.judge(full, str(config)) if overrun is None else Verdict(False, message=overrun)
        except (Exception, SystemExit) as error:  # a config (or its pre_hook) calling sys.exit is its failure
            return Trial(config, classify(error), error=describe(error), key=key,
                         bench_seconds=time.perf_counter() - start)
        finally:
            try:
                self.check.restore(full)
            except Exception:  # a broken device context fails here too; the error above says why
                pass
            if not launched:
                self._clear_guards()
        if not verdict.correct:
            return Trial(config, Status.WRONG, error=verdict.message, key=key,
                         relative_error=verdict.error if overrun is None else None,
                         bench_seconds=time.perf_counter() - start)
        return verdict.error, launch_seconds

    def _overrun(self) -> str | None:
        """What the launches since the last call stored into guard bands, if anything."""
        return self.copies.verify() if self.copies is not None else None

    def _clear_guards(self) -> None:
        """After a failed launch: what it stored into a guard band is not the next config's."""
        try:
            self._overrun()
        except Exception:  # a broken device context fails here too; the trial's error says why
            pass

    @_measuring_here
    def finish(self) -> None:
        """Give the caller's tensors their pristine values back (in-place kernels, partial writes)
        when the runner ran on them; copies leave the caller's tensors as they were."""
        if self.check is not None and self.copies is None:
            self.check.restore({**self.nargs, **self.kwargs})

    def close(self) -> None:
        """Let go of the copies, so that their memory is free before the winner's launch."""
        self.copies = None
        self.args, self.kwargs, self.nargs = (), {}, {}


def _tensor_arguments(launch: Launch, args: tuple, kwargs: dict) -> dict[str, torch.Tensor]:
    """The tensor arguments of the call by name (those in tuples and TensorDescriptors are not)."""
    return {name: value for name, value in launch.named(args, kwargs).items() if isinstance(value, torch.Tensor)}


def _unwritable(originals: dict[str, torch.Tensor], values: tuple) -> dict[str, torch.Tensor]:
    """``originals`` without those whose storage a tensor in a tuple argument or a TensorDescriptor's
    base among ``values`` views too: such tensors are not copied, so configs write the caller's memory."""
    uncopied: set[tuple[str, int]] = set()

    def visit(value: object, nested: bool) -> None:
        if isinstance(value, torch.Tensor):
            if nested:
                uncopied.add((str(value.device), value.untyped_storage().data_ptr()))
        elif isinstance(value, tuple):
            for item in value:
                visit(item, True)
        elif isinstance(base := getattr(value, "base", None), torch.Tensor):  # a TensorDescriptor
            visit(base, True)

    for value in values:
        visit(value, False)
    return {name: t for name, t in originals.items()
            if (str(t.device), t.untyped_storage().data_ptr()) not in uncopied}


def _synchronize(nargs: dict) -> None:
    """Wait for the launch, so that an asynchronous device error belongs to this config."""
    if any(isinstance(v, torch.Tensor) and v.is_cuda for v in nargs.values()):
        torch.cuda.synchronize()
