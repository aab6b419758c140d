"""Checking and timing configs in this process: the benchmark side of one tuning.

A ``LocalRunner`` holds one tuning's launch arguments. For each config it launches the kernel
once from the pristine inputs and has the ``OutputCheck`` judge the outputs (a wrong config
is a ``wrong`` trial and is not timed), then times it with the launch's ``Benchmarker``
under Triton's hook semantics (``reset_to_zero``, ``restore_value``, pre/post hooks). When the
tuning ends, ``finish`` puts the pristine inputs back, so that the launch that follows sees
the caller's original values. ``tunekit.isolation`` runs the same runner in a worker process.
"""

from __future__ import annotations

import time
from dataclasses import replace

from .benchmark import classify, describe
from .check import OutputCheck
from .config import Config
from .keys import TuningKey
from .launch import Launch
from .trial import Status, Trial


class LocalRunner:
    """Checks and times configs of ``launch`` on ``args``/``kwargs`` in this process.

    Args:
        check: the tuning's ``OutputCheck``, or None to time without checking outputs.
    """

    #: What isolation cost (``IsolatedRunner`` has the same): nothing here.
    workers_started = 0
    seconds_starting = 0.0
    seconds_messaging = 0.0

    def __init__(self, launch: Launch, args: tuple, kwargs: dict, check: OutputCheck | None) -> None:
        self.launch = launch
        self.args = args
        self.kwargs = kwargs
        self.check = check
        self.nargs = launch.named(args, kwargs)
        if check is not None:
            check.snapshot(self.nargs)
            if check.reference is not None:
                check.compute_reference(self.nargs)

    def measure(self, config: Config, key: TuningKey, *, retiming: bool = False) -> Trial:
        """One config: checked (unless the runner has no check), then timed. A ``retiming`` of a
        config measured before is not checked again and uses the benchmarker's shorter timing."""
        relative_error = check_seconds = None
        if not retiming and self.check is not None:
            start = time.perf_counter()
            verdict_or_failure = self._check(config, key)
            if isinstance(verdict_or_failure, Trial):
                return verdict_or_failure
            relative_error, check_seconds = verdict_or_failure, time.perf_counter() - start
        trial = self.launch.benchmarker.measure(config, self.launch.call(config, self.args, self.kwargs), key,
                                                short=retiming, warm=relative_error is not None)
        return replace(trial, relative_error=relative_error, check_seconds=check_seconds)

    def _check(self, config: Config, key: TuningKey) -> Trial | float:
        """Launch once from the pristine inputs and judge; a Trial if the config failed or is wrong."""
        assert self.check is not None
        full = {**self.nargs, **self.kwargs, **config.all_kwargs()}
        start = time.perf_counter()
        self.check.restore(full)
        try:
            self.launch.launch_once(config, self.args, self.kwargs, full)
            _synchronize(full)
            verdict = self.check.judge(full, str(config))
        except Exception as error:
            return Trial(config, classify(error), error=describe(error), key=key,
                         bench_seconds=time.perf_counter() - start)
        finally:
            try:
                self.check.restore(full)
            except Exception:  # a broken device context fails here too; the error above says why
                pass
        if not verdict.correct:
            return Trial(config, Status.WRONG, error=verdict.message, key=key, relative_error=verdict.error,
                         bench_seconds=time.perf_counter() - start)
        return verdict.error

    def finish(self) -> None:
        """Give the caller's tensors their pristine values back (in-place kernels, partial writes)."""
        if self.check is not None:
            self.check.restore({**self.nargs, **self.kwargs})

    def close(self) -> None:
        """Nothing to release in this process."""


def _synchronize(nargs: dict) -> None:
    """Wait for the launch, so that an asynchronous device error belongs to this config."""
    import torch

    if any(isinstance(v, torch.Tensor) and v.is_cuda for v in nargs.values()):
        torch.cuda.synchronize()
