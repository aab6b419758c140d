"""The replay backend of the benchmark routine: answers configs from a recorded space.

Evaluating a config costs, on the simulated clock, what it cost when it was recorded (compile +
benchmark + verification); the search loop adds the strategy's own time, measured for real.
"""

from __future__ import annotations

from collections.abc import Iterator

from .config import Config
from .recorded import RecordedSpace, RecordedSpaceError
from .search import Clock
from .trial import Timing, Trial


class ReplayEvaluator:
    """``evaluate(configs, clock)`` for ``run_search``, from a recorded space.

    Args:
        recorded: the space to answer from.
        seconds: the tuning's seconds budget, so that a config the budget cannot pay for is not
            answered (as a live tuning would cut it off).
    """

    def __init__(self, recorded: RecordedSpace, seconds: float | None = None) -> None:
        self.recorded = recorded
        self.seconds = seconds

    def __call__(self, configs: list[Config], clock: Clock) -> Iterator[tuple[Config, Trial | None]]:
        for config in configs:
            record = self.recorded.lookup(config)
            if record is None:
                raise RecordedSpaceError(
                    f"{self.recorded.name}: config {config} is not in the recorded space (infeasible there)"
                )
            if self.seconds is not None and clock.seconds() >= self.seconds:
                yield config, None
                continue
            clock.advance(record.evaluation_seconds)
            timing = Timing(record.time_ms, record.time_ms, record.time_ms) if record.ok else None
            yield config, Trial(config, record.status, timing, record.compile_ms / 1e3,
                                None if record.ok else f"recorded as {record.status}",
                                extra={"bench_seconds": record.benchmark_ms / 1e3})
