"""Checking and timing configs in this process: the benchmark side of one tuning.

A ``LocalRunner`` holds one tuning's launch arguments. For each config it launches the kernel
once from the pristine inputs and has the ``OutputCheck`` judge the outputs (a wrong config
is a ``wrong`` trial and is not timed), then times it with the Autotuner's ``Benchmarker``
under Triton's hook semantics (``reset_to_zero``, ``restore_value``, pre/post hooks). When the
tuning ends, ``finish`` puts the pristine inputs back, so that the launch that follows sees
the caller's original values. ``tunekit.isolation`` runs the same runner in a worker process.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .benchmark import classify, describe
from .check import OutputCheck
from .config import Config
from .trial import Status, Trial

if TYPE_CHECKING:
    from .autotuner import Autotuner


class LocalRunner:
    """Checks and times configs of ``autotuner`` on ``args``/``kwargs`` in this process.

    Args:
        check: the tuning's ``OutputCheck``, or None to time without checking outputs.
    """

    #: What isolation cost (``IsolatedRunner`` has the same): nothing here.
    workers_started = 0
    seconds_starting = 0.0
    seconds_messaging = 0.0

    def __init__(self, autotuner: "Autotuner", args: tuple, kwargs: dict, check: OutputCheck | None) -> None:
        self.autotuner = autotuner
        self.args = args
        self.kwargs = kwargs
        self.check = check
        # the kernel's arguments, positional or named (kwargs also holds launch options: grid ...)
        self.nargs = {**dict(zip(autotuner.arg_names, args)),
                      **{name: value for name, value in kwargs.items() if name in autotuner.arg_names}}
        if check is not None:
            check.snapshot(self.nargs)
            if check.reference is not None:
                check.compute_reference(self.nargs)

    def measure(self, config: Config, key: tuple, *, check: bool = True) -> Trial:
        """One config: checked (unless ``check`` is False or the runner has no check), then timed."""
        extra: dict[str, Any] = {}
        if check and self.check is not None:
            start = time.perf_counter()
            verdict_or_failure = self._check(config, key)
            if isinstance(verdict_or_failure, Trial):
                return verdict_or_failure
            extra.update(relative_error=verdict_or_failure, check_seconds=time.perf_counter() - start)
        trial = self.autotuner.benchmarker.measure(config, self.autotuner._kernel_call(config, self.args, self.kwargs),
                                                   key)
        return Trial(trial.config, trial.status, trial.timing, trial.compile_seconds, trial.error, key,
                     extra={**trial.extra, **extra})

    def _check(self, config: Config, key: tuple) -> Trial | float:
        """Launch once from the pristine inputs and judge; a Trial if the config failed or is wrong."""
        assert self.check is not None
        call = dict(self.kwargs, **config.all_kwargs())
        full = {**self.nargs, **call}
        start = time.perf_counter()
        self.check.restore(full)
        try:
            if config.pre_hook:
                config.pre_hook(full)
            self.autotuner.pre_hook(full, reset_only=True)
            self.autotuner.fn.run(*self.args, **call)
            _synchronize(full)
            verdict = self.check.judge(full, str(config))
        except Exception as error:
            return Trial(config, classify(error), error=describe(error), key=key,
                         extra={"bench_seconds": time.perf_counter() - start})
        finally:
            try:
                self.check.restore(full)
            except Exception:  # a broken device context fails here too; the error above says why
                pass
        if not verdict.correct:
            return Trial(config, Status.WRONG, error=verdict.message, key=key,
                         extra={"relative_error": verdict.error, "bench_seconds": time.perf_counter() - start})
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
