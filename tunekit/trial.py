"""A trial: one config measured (or failed) for one key, with a closed set of statuses."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .config import Config, config_json, readable_repr
from .keys import TuningKey


class Status(str, Enum):
    """What happened to a config. A closed set: everything a benchmark can end in."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"
    OUT_OF_RESOURCES = "out_of_resources"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    WRONG = "wrong"

    def __str__(self) -> str:
        return self.value


class Source(str, Enum):
    """Where a trial came from: measured in this tuning, answered by the store (an earlier tuning
    measured it), or the interleaved re-timing of a finalist."""

    MEASURED = "measured"
    STORE = "store"
    RETIMED = "retimed"

    def __str__(self) -> str:
        return self.value


#: How the error of a config that killed the tuning process in-process begins: the process died,
#: so no exception described it (``ResultsStore.record_crashes`` records it afterwards).
CRASHED = "crashed:"


@dataclass(frozen=True)
class Timing:
    """Time statistics of one config, in milliseconds: median and 20/80 % quantiles (None where
    a stored row has none: the store's columns are nullable, and an imported export may leave them out)."""

    median_ms: float
    p20_ms: float | None
    p80_ms: float | None

    @classmethod
    def from_bench(cls, result: Any) -> "Timing":
        """Accept what a ``do_bench`` returns: a float, or ``[median, p20, p80]``."""
        if isinstance(result, (int, float)):
            value = float(result)
            return cls(value, value, value)
        values = [float(v) for v in result]
        if len(values) == 1:
            return cls(values[0], values[0], values[0])
        if len(values) < 3:
            raise ValueError(f"do_bench must return a float or [median, p20, p80]; got {result!r}")
        return cls(values[0], values[1], values[2])


@dataclass(frozen=True)
class Trial:
    """One measured config for one key.

    ``source`` says where it came from (``Source``). ``crashed``: it killed the process that
    launched it in-process (stored as an error text beginning with ``CRASHED``). The fields after
    it are what the measurement cost and found, where known: compiled shared memory, seconds of
    the check and of check plus benchmark, and the output check's largest relative error.
    """

    config: Config
    status: Status
    timing: Timing | None = None
    compile_seconds: float | None = None
    error: str | None = None
    key: TuningKey | None = None
    source: Source = Source.MEASURED
    crashed: bool = False
    shared_bytes: int | None = field(default=None, compare=False)
    bench_seconds: float | None = field(default=None, compare=False)
    check_seconds: float | None = field(default=None, compare=False)
    relative_error: float | None = field(default=None, compare=False)

    __repr__ = readable_repr

    @property
    def extra(self) -> dict:
        """Deprecated: the typed fields as the dict earlier versions had (``key_json`` included)."""
        import warnings

        warnings.warn("Trial.extra is deprecated: read shared_bytes, bench_seconds, check_seconds, relative_error "
                      "and key directly", DeprecationWarning, stacklevel=2)
        fields = {"shared_bytes": self.shared_bytes, "bench_seconds": self.bench_seconds,
                  "check_seconds": self.check_seconds, "relative_error": self.relative_error,
                  "key_json": self.key.json if self.key is not None else None}
        return {name: value for name, value in fields.items() if value is not None}

    @property
    def ok(self) -> bool:
        return self.status is Status.OK and self.timing is not None

    @property
    def time_ms(self) -> float:
        """The median time, or +inf for a failed trial (so failures sort last)."""
        return self.timing.median_ms if self.ok and self.timing is not None else math.inf

    @property
    def config_id(self) -> str:
        return config_json(self.config)

    def __str__(self) -> str:
        what = f"{self.time_ms:.4f} ms" if self.ok else f"{self.status}: {(self.error or '').splitlines()[:1]}"
        return f"[{self.config}] {what}"
