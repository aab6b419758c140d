"""Clocks and the deadline of a tuning: the one place that says how many seconds are left.

A live tuning runs on the wall clock; a replayed one on a simulated clock that advances by
what each recorded evaluation cost. The ``Deadline`` of a seconds budget is consulted by
everything that must stop in time: the search loop, the compile deadline, a benchmark
worker's run timeout, the finalists' re-timing and the replay evaluator.
"""

from __future__ import annotations

import time


class Clock:
    """Wall-clock seconds since the tuning started."""

    def __init__(self) -> None:
        self._start = time.perf_counter()

    def seconds(self) -> float:
        return time.perf_counter() - self._start

    def advance(self, seconds: float) -> None:
        """Account for work done outside the clock; a wall clock already saw it."""


class Stopwatch(Clock):
    """Wall-clock seconds while running (``start``/``stop``): a tuning spread over a kernel's calls
    counts the seconds spent in them, not the seconds between them."""

    def __init__(self) -> None:
        self._total = 0.0
        self._since: float | None = None

    def start(self) -> None:
        if self._since is None:
            self._since = time.perf_counter()

    def stop(self) -> None:
        if self._since is not None:
            self._total += time.perf_counter() - self._since
            self._since = None

    def seconds(self) -> float:
        return self._total + (time.perf_counter() - self._since if self._since is not None else 0.0)


class SimulatedClock(Clock):
    """Seconds that a replayed tuning would have taken: what ``advance`` is told, nothing else."""

    def __init__(self) -> None:
        self._seconds = 0.0

    def seconds(self) -> float:
        return self._seconds

    def advance(self, seconds: float) -> None:
        self._seconds += seconds


class Deadline:
    """``seconds`` after the start of ``clock`` (None: no limit).

    Examples:
        >>> deadline = Deadline(SimulatedClock(), 60.0)
        >>> deadline.clock.advance(45.0)
        >>> deadline.remaining(), deadline.cap(120.0), deadline.expired()
        (15.0, 15.0, False)
    """

    def __init__(self, clock: Clock, seconds: float | None) -> None:
        self.clock = clock
        self.seconds = seconds

    def remaining(self) -> float | None:
        """Seconds left, never below zero; None when there is no limit."""
        if self.seconds is None:
            return None
        return max(0.0, self.seconds - self.clock.seconds())

    def expired(self) -> bool:
        return self.seconds is not None and self.clock.seconds() >= self.seconds

    def cap(self, limit: float | None, floor: float = 0.0) -> float | None:
        """``limit`` seconds, but not past the deadline (and not under ``floor``); None: no limit."""
        left = self.remaining()
        if left is None:
            return limit
        return max(floor, left if limit is None else min(limit, left))

    def wall_time(self) -> float | None:
        """The deadline as a ``time.time()`` value, for code that waits on the wall clock."""
        left = self.remaining()
        return None if left is None else time.time() + left

    def earlier(self, seconds: float) -> "Deadline":
        """A deadline ``seconds`` before this one on the same clock (a reserve for what follows)."""
        return Deadline(self.clock, None if self.seconds is None else max(0.0, self.seconds - seconds))
