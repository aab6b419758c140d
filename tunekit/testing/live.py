"""A live tuning's pipeline simulated on a clock, to see what its pace (``Feed.pace``) and its
word that compiles are late (``Feed.overdue``) do.

Compile workers take the configs in flight as they come free, but only between timings (as the
compile round hands out jobs); one process times the compiled configs one at a time, the first
compiled first, each keeping it busy a fixed time. The search is tunekit's own ``Search``; a
paced one asks ``TuningSession._in_flight_wanted`` as a live tuning does, and one told of late
compiles ``TuningSession._overdue_after``, each told the seconds the simulation takes. Used by the
tests, ``experiments/pace_simulation.py`` and ``experiments/straggler_simulation.py``.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from types import SimpleNamespace
from typing import NamedTuple

from ..budget import Budget
from ..config import Config
from ..deadline import Deadline, SimulatedClock
from ..keys import TuningKey
from ..search import Feed, Search, SearchResult, StopReason
from ..space import Space
from ..strategy import SearchContext, Strategy
from ..trial import Status, Trial
from .strategies import TOY_KEY


class SimulatedTuning(NamedTuple):
    """What ``simulate_live_tuning`` saw: the configs in flight at each ask of the strategy, the
    tuning's seconds, its result (each step at its simulated second), and the simulated seconds
    at which the evaluator said the configs in flight were late."""

    in_flight_at_asks: list[int]
    seconds: float
    result: SearchResult
    said_late_at: list[float]


class _SimulationClock(SimulatedClock):
    """The simulation's seconds: ``move`` is the simulated pipeline's own; ``advance``, by which
    the search counts each strategy call's real seconds, counts ``strategy_seconds`` instead
    where that is given (a simulation that does not depend on the machine's load)."""

    def __init__(self, strategy_seconds: float | None) -> None:
        super().__init__()
        self.strategy_seconds = strategy_seconds

    def advance(self, seconds: float) -> None:
        super().advance(seconds if self.strategy_seconds is None else self.strategy_seconds)

    def move(self, seconds: float) -> None:
        super().advance(seconds)


def simulate_live_tuning(strategy: Strategy, space: Space, compile_seconds: Callable[[Config], float],
                         trial_of: Callable[[Config], Trial], busy_seconds: float, *, paced: bool, workers: int,
                         batch: int, evals: int, seed: int = 0,
                         timeout: Callable[[Sequence[float]], float | None] | None = None,
                         key: TuningKey = TOY_KEY, history: Sequence[Trial] = (),
                         overdue: bool = False, leave_late_out: bool = True,
                         strategy_seconds: float | None = None) -> SimulatedTuning:
    """One simulated tuning of ``evals`` configs (fewer where the strategy ends it) at ``key``,
    the store holding ``history``. ``compile_seconds(config)``: how long its compile takes
    (finite seconds); ``timeout(seen)``: where a compile is cut off, given the seconds of the
    compiles that succeeded so far (None: nowhere yet), asked again as compiles finish, as the
    session does (a timed-out config is a ``timeout`` trial); ``paced``: the search keeps as many
    in flight as the session's pace wants, else its ``batch``; ``overdue``: as a live tuning, the evaluator
    says the configs in flight are late (``Feed.overdue``) once no compile has finished for
    ``TuningSession._overdue_after`` seconds, and where the search says nothing more will be asked
    and every config given is compiling, leaves the late configs out as the session does
    (``leave_late_out=False``: waits for them); ``strategy_seconds``: what each call of the
    strategy costs (None: its real seconds, as the search counts them)."""
    from ..session import TuningSession  # the pace is the session's; the session imports torch and Triton

    clock = _SimulationClock(strategy_seconds)
    said_late_at: list[float] = []
    # the store's compile seconds count toward the timeout from the start, as the session's do
    seen = [t.compile_seconds for t in history if t.ok and t.compile_seconds]
    session = SimpleNamespace(_compile_seconds_here=[], _compile_seconds_seen=seen, _busy_seconds=[])
    order = itertools.count()
    at_asks: list[int] = []
    ask = strategy.ask

    def recorded_ask(n: int) -> list[Config]:
        at_asks.append(len(search._queued) + search._in_flight)
        return ask(n)

    strategy.ask = recorded_ask  # type: ignore[method-assign]

    def evaluate(feed: Feed, deadline: Deadline) -> Iterator[tuple[Config, Trial | None]]:
        if paced:
            feed.pace = lambda: TuningSession._in_flight_wanted(session)  # type: ignore[arg-type]  # its lists
        waiting: deque[Config] = deque()
        running: list[tuple[float, int, float, Config]] = []  # (started at, order, seconds it needs, config)
        quiet_since = clock.seconds()  # the last compile finished, or the last call of feed.overdue()
        while True:
            waiting.extend(feed.take())
            while waiting and len(running) < workers:  # jobs go to free workers between timings
                config = waiting.popleft()
                needed = compile_seconds(config)
                if not math.isfinite(needed) or needed < 0:
                    raise ValueError(f"compile_seconds({config}) gave {needed!r}: expected finite seconds")
                running.append((clock.seconds(), next(order), needed, config))
            if not running:
                return
            # the timeout as it stands now, as the session asks it again while compiles finish; a
            # compile that finished while the process timed is taken as finished, not cut
            limit = timeout(session._compile_seconds_seen) if timeout is not None else None
            now = clock.seconds()
            ends = [(started + needed if started + needed <= now or limit is None else
                     max(now, started + min(needed, limit)), turn, index)
                    for index, (started, turn, needed, _) in enumerate(running)]
            done, _, index = min(ends)
            done = max(done, now)
            late = TuningSession._overdue_after(session) if overdue else None  # type: ignore[arg-type]
            if late is not None and late > 0 and done > quiet_since + late:
                clock.move(max(0.0, quiet_since + late - clock.seconds()))
                quiet_since = clock.seconds()
                said_late_at.append(quiet_since)
                # the last configs, all compiling: left out, as the session leaves them
                if feed.overdue() and leave_late_out and not waiting:
                    feed.leave_out_late()
                    for _, _, _, config in sorted(running, key=lambda job: job[1]):
                        yield config, None
                    return
                continue
            started, _, needed, config = running.pop(index)
            clock.move(done - clock.seconds())
            seconds, cut_off = needed, False
            if limit is not None and needed > limit and started + needed > done:
                seconds, cut_off = done - started, True
            session._compile_seconds_here.append(seconds)
            if cut_off:
                yield config, Trial(config, Status.TIMEOUT, error=f"compile exceeded {limit:.1f} s")
                quiet_since = clock.seconds()
                continue
            session._compile_seconds_seen.append(seconds)
            taken = clock.seconds()
            clock.move(busy_seconds)
            yield config, trial_of(config)
            session._busy_seconds.append(clock.seconds() - taken)
            quiet_since = clock.seconds()

    search = Search(strategy, SearchContext(space, Budget(evals=evals), key, seed, tuple(history)), clock=clock,
                    batch=batch)
    search.advance(evaluate)
    if search.result.evaluations != evals and search.result.stopped_because not in (StopReason.STRATEGY,
                                                                                     StopReason.LATE):
        raise RuntimeError(f"the simulated tuning measured {search.result.evaluations} of {evals} configs")
    return SimulatedTuning(at_asks, clock.seconds(), search.result, said_late_at)

