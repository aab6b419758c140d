"""Every environment variable and default that tunekit reads, in one place.

Modules ask this one for settings instead of reading ``os.environ`` themselves, so that a
test or a user can see (and override) everything that changes tunekit's behaviour here.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

#: Environment variables tunekit reads.
ENV_STORE = "TUNEKIT_STORE"
ENV_MODE = "TUNEKIT_MODE"
ENV_LOG = "TUNEKIT_LOG"
ENV_COMPILE_WORKERS = "TUNEKIT_COMPILE_WORKERS"
ENV_WORKERS = "TUNEKIT_WORKERS"
ENV_DIRECT_LAUNCH = "TUNEKIT_DIRECT_LAUNCH"

MODES = ("online", "offline")
WORKER_STARTS = ("zygote", "spawn")


@dataclass(frozen=True)
class Defaults:
    """Defaults of the tuning loop; the one source of truth for them."""

    #: Configs re-timed interleaved before a winner is chosen, when a store is used.
    finalists: int = 3
    #: Rounds of interleaved re-timing of the finalists.
    finalist_rounds: int = 3
    #: With no ``compile_timeout`` given, compiles are not cut off until this many of the kernel
    #: have been seen; then after ``compile_timeout_factor`` times their median seconds, but
    #: never under ``compile_timeout_floor`` seconds.
    compile_timeout_after: int = 8
    compile_timeout_factor: float = 20.0
    compile_timeout_floor: float = 10.0
    #: In a benchmark worker, one config's check and benchmark may take ``run_timeout_initial``
    #: seconds until ``run_timeout_after`` configs ran; then ``run_timeout_factor`` times their
    #: median, but never under ``run_timeout_floor`` seconds.
    run_timeout_initial: float = 120.0
    run_timeout_after: int = 4
    run_timeout_factor: float = 20.0
    run_timeout_floor: float = 10.0
    #: Consecutive proposals that bring nothing new before a strategy is taken as exhausted.
    max_fruitless_proposals: int = 1000
    #: Seconds a worker (compile or benchmark) may sit idle before the worker service stops it.
    worker_idle_seconds: float = 60.0
    #: Host-clock timer (interpreter): at least this many timed calls ...
    host_min_reps: int = 3
    #: ... and more until this many milliseconds are spent.
    host_rep_ms: float = 50.0


DEFAULTS = Defaults()


def store_url() -> str:
    """Where the default store lives: ``$TUNEKIT_STORE`` or a SQLite file in the user's cache."""
    configured = os.environ.get(ENV_STORE, "").strip()  # empty or blank: unset
    if configured:
        return configured
    return str(Path(platformdirs.user_cache_dir("tunekit")) / "tunekit.db")


def mode() -> str:
    """``online`` (tune on a miss, the default) or ``offline`` (never tune at run time)."""
    value = os.environ.get(ENV_MODE, "online").strip().lower() or "online"
    if value not in MODES:
        raise ValueError(f"{ENV_MODE} must be one of {', '.join(MODES)}. Got {value!r} instead.")
    return value


def worker_start() -> str:
    """How new workers start: ``zygote`` (forked from a pre-imported process, the default) or
    ``spawn`` (each a fresh interpreter; ``$TUNEKIT_WORKERS=spawn``)."""
    value = os.environ.get(ENV_WORKERS, "zygote").strip().lower() or "zygote"
    if value not in WORKER_STARTS:
        raise ValueError(f"{ENV_WORKERS} must be one of {', '.join(WORKER_STARTS)}. Got {value!r} instead.")
    return value


def interpreting() -> bool:
    """True when Triton runs kernels in its interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def direct_launch() -> bool:
    """Whether a cached call launches the tuned kernel directly (``tunekit.direct``); ``0`` sends
    every call through ``JITFunction.run``, as stock Triton's autotuner does. Read when a key's
    winner is first launched: keys launched before keep what they had."""
    return os.environ.get(ENV_DIRECT_LAUNCH, "1").strip().lower() not in ("0", "false", "off", "no")


def print_autotuning() -> bool:
    """Triton's own switch for printing each tuning's summary."""
    return os.environ.get("TRITON_PRINT_AUTOTUNING", "0").strip().lower() in ("1", "true", "on", "yes")


def compile_workers() -> int:
    """Parallel compile workers: ``$TUNEKIT_COMPILE_WORKERS`` or the usable CPU count, at most 16."""
    configured = os.environ.get(ENV_COMPILE_WORKERS)
    if configured:
        workers = int(configured)
        if workers < 1:
            raise ValueError(f"{ENV_COMPILE_WORKERS} must be an int >= 1. Got {configured!r} instead.")
        return workers
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(16, cpus))


def configure_logging() -> None:
    """Honour ``TUNEKIT_LOG=debug|info|...``: per-trial lines on stderr through ``logging``."""
    level = os.environ.get(ENV_LOG)
    if not level:
        return
    number = int(level) if level.strip().isdigit() else logging.getLevelName(level.strip().upper())
    if not isinstance(number, int):  # getLevelName answers "Level X" for a name it does not know
        raise ValueError(f"{ENV_LOG} must be a logging level (debug, info, warning, error, critical) or a "
                         f"number. Got {level!r} instead.")
    logger = logging.getLogger("tunekit")
    logger.setLevel(number)
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
