"""The replay backend of the benchmark routine: answers configs from a recorded space.

Evaluating a config costs, on the simulated clock, what it cost when it was recorded (compile +
benchmark + verification); the search loop adds the strategy's own time, measured for real. A
trial carries the shared memory its compile reported where the recording kept it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .config import Config
from .recorded import Record, RecordedSpace, RecordedSpaceError
from .deadline import Deadline
from .trial import Timing, Trial


class ReplayEvaluator:
    """``evaluate(feed, deadline)`` for ``run_search``, from a recorded space: the configs in the
    order the feed hands them (asked for), each answered before the next is taken. A config that
    starts after the deadline is not answered, as a live tuning would cut it off.

    Args:
        recorded: the space to answer from.
    """

    def __init__(self, recorded: RecordedSpace) -> None:
        self.recorded = recorded

    def __call__(self, configs: Iterable[Config], deadline: Deadline) -> Iterator[tuple[Config, Trial | None]]:
        for config in configs:
            record = self._record(config)
            if deadline.expired():
                yield config, None
                continue
            deadline.clock.advance(record.evaluation_seconds)
            yield config, _as_trial(config, record)

    def trial(self, config: Config) -> Trial:
        """``config``'s trial as recorded (its compile seconds, benchmark seconds and the shared
        memory its compile reported, where kept), on no clock."""
        return _as_trial(config, self._record(config))

    def _record(self, config: Config) -> Record:
        record = self.recorded.lookup(config)
        if record is None:
            raise RecordedSpaceError(
                f"{self.recorded.name}: config {config} is not in the recorded space (infeasible there)"
            )
        return record


def _as_trial(config: Config, record: Record) -> Trial:
    timing = (Timing(record.time_ms, record.time_ms, record.time_ms)
              if record.ok and record.time_ms is not None else None)
    return Trial(config, record.status, timing, record.compile_ms / 1e3,
                 None if record.ok else f"recorded as {record.status}",
                 bench_seconds=record.benchmark_ms / 1e3, shared_bytes=record.extra.get("shared_bytes"))
