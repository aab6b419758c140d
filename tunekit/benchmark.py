"""The one benchmark routine every strategy goes through.

``Benchmarker`` picks the timer once: the user's ``do_bench`` if given; on a GPU, CUDA-event
timing with ``triton.testing.do_bench`` semantics (warm-up, L2 flush, median and 20/80 %
quantiles); under the Triton interpreter a host clock, so tuning works on a CPU-only machine.
``measure`` turns one config into a ``Trial``: a failure of any kind becomes a status and an
error text, never an exception that stops the tuning.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from . import settings
from .compat import triton_error_types
from .config import Config
from .keys import TuningKey
from .trial import Status, Timing, Trial

logger = logging.getLogger(__name__)

KernelCall = Callable[[], Any]


def classify(error: BaseException) -> Status:
    """The status of a failed config, from the exception its compile or launch raised."""
    out_of_resources, compilation_error, ptxas_errors = triton_error_types()
    if isinstance(error, out_of_resources):
        return Status.OUT_OF_RESOURCES
    if isinstance(error, (compilation_error, *ptxas_errors)):
        return Status.COMPILE_ERROR
    if isinstance(error, TimeoutError):
        return Status.TIMEOUT
    text = str(error).lower()
    if "out of resource" in text or "outofresources" in text:
        return Status.OUT_OF_RESOURCES
    if "passmanager::run failed" in text:  # a compiler pass (warp specialization, say) gave up
        return Status.COMPILE_ERROR
    return Status.RUNTIME_ERROR


def describe(error: BaseException) -> str:
    """A short error text for the store: type, message, and the innermost frame."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    message = str(error).strip()
    if len(message) > 4000:
        message = message[:4000] + " ..."
    return f"{type(error).__name__}: {message}{where}"


def host_clock_bench(
    kernel_call: KernelCall, quantiles=(0.5, 0.2, 0.8), min_reps: int | None = None, rep_ms: float | None = None,
    warmup: bool = True, until: float | None = None,
) -> list[float]:
    """Time ``kernel_call`` with the host clock: one warm-up call (unless ``warmup`` is False: it
    just ran), then at least ``min_reps`` timed calls and more until ``rep_ms`` milliseconds are
    spent; but past ``until`` (``time.perf_counter()`` seconds) no call after the first timed one.
    Returns the quantiles in ms."""
    min_reps = settings.DEFAULTS.host_min_reps if min_reps is None else min_reps
    rep_ms = settings.DEFAULTS.host_rep_ms if rep_ms is None else rep_ms
    if warmup and (until is None or time.perf_counter() < until):
        kernel_call()
    times: list[float] = []
    spent = 0.0
    while not times or ((len(times) < min_reps or spent < rep_ms) and (until is None or time.perf_counter() < until)):
        start = time.perf_counter()
        kernel_call()
        elapsed = (time.perf_counter() - start) * 1e3
        times.append(elapsed)
        spent += elapsed
    return [float(v) for v in np.quantile(times, quantiles)]


class Benchmarker:
    """Times kernel calls; ``method`` names the timer so the store never mixes timers.

    Args:
        do_bench: ``do_bench(kernel_call, quantiles=...)`` as in ``triton.autotune``.
        warmup: milliseconds of warm-up for ``triton.testing.do_bench`` (Triton's deprecated knob).
        rep: milliseconds of repetitions for ``triton.testing.do_bench`` (likewise).
        use_cuda_graph: time with ``triton.testing.do_bench_cudagraph``.
    """

    def __init__(
        self,
        do_bench: Callable[..., Any] | None = None,
        warmup: float | None = None,
        rep: float | None = None,
        use_cuda_graph: bool = False,
    ) -> None:
        self.do_bench = do_bench
        self.warmup = warmup
        self.rep = rep
        self.use_cuda_graph = use_cuda_graph

    @property
    def method(self) -> str:
        if self.do_bench is not None:
            return "user_do_bench"
        if settings.interpreting():
            return "host_clock"
        if self.use_cuda_graph:
            return "cuda_graph"
        return "cuda_event"

    def launches_at_least(self, short: bool = False) -> int:
        """Launches one timing takes at least (a warm-up one included): what a budget near its end
        must leave room for."""
        if self.do_bench is not None:
            return 1
        if settings.interpreting():
            return 1 if short else 1 + settings.DEFAULTS.host_min_reps
        return 7  # triton.testing.do_bench: 5 to estimate the time, then at least 1 warm-up and 1 timed

    def time(self, kernel_call: KernelCall, short: bool = False, warm: bool = False,
             until: float | None = None) -> Timing:
        """Time statistics of ``kernel_call``. ``short``: a quicker timing (a quarter of the
        repetitions), for configs whose best few are then re-timed over interleaved rounds.
        ``warm``: the config was launched just before (by the output check), so the host clock
        needs no warm-up call; the GPU timer warms up the device anyway. ``until``
        (``time.perf_counter()`` seconds): the host clock starts no call past it after the first."""
        quantiles = (0.5, 0.2, 0.8)
        if self.do_bench is not None:
            return Timing.from_bench(self.do_bench(kernel_call, quantiles=quantiles))
        if settings.interpreting():
            defaults = settings.DEFAULTS
            return Timing.from_bench(host_clock_bench(kernel_call, quantiles, min_reps=1 if short else None,
                                                      rep_ms=defaults.host_rep_ms / 4 if short else None,
                                                      warmup=not (warm or short), until=until))
        import triton.testing

        if self.use_cuda_graph:
            rep = self.rep if self.rep is not None else 100
            return Timing.from_bench(triton.testing.do_bench_cudagraph(kernel_call, rep=rep, quantiles=quantiles))
        warmup = self.warmup if self.warmup is not None else 25
        rep = self.rep if self.rep is not None else 100
        if short:
            warmup, rep = warmup / 4, rep / 4
        return Timing.from_bench(triton.testing.do_bench(kernel_call, warmup=warmup, rep=rep, quantiles=quantiles))

    def measure(self, config: Config, kernel_call: KernelCall, key: TuningKey | None = None, short: bool = False,
                warm: bool = False, until: float | None = None) -> Trial:
        """Time one config (``short``, ``warm``, ``until``: see ``time``); any failure becomes a
        Trial with its status and error text."""
        start = time.perf_counter()
        try:
            timing = self.time(kernel_call, short, warm, until)
        except (Exception, SystemExit) as error:  # every failure is data, not a crash (sys.exit in a config too)
            status = classify(error)
            logger.debug("config %s failed: %s", config, error)
            return Trial(config, status, error=describe(error), key=key, bench_seconds=time.perf_counter() - start)
        seconds = time.perf_counter() - start
        if not np.isfinite(timing.median_ms):
            # stock triton.autotune returns inf for configs it could not run
            return Trial(config, Status.RUNTIME_ERROR, error="do_bench returned a non-finite time", key=key,
                         bench_seconds=seconds)
        return Trial(config, Status.OK, timing=timing, key=key, bench_seconds=seconds)
