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

import heapq
import itertools
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
    tuning's seconds, and its result (each step at its simulated second)."""

    in_flight_at_asks: list[int]
    seconds: float
    result: SearchResult


def simulate_live_tuning(strategy: Strategy, space: Space, compile_seconds: Callable[[Config], float],
                         trial_of: Callable[[Config], Trial], busy_seconds: float, *, paced: bool, workers: int,
                         batch: int, evals: int, seed: int = 0,
                         timeout: Callable[[Sequence[float]], float] | None = None,
                         key: TuningKey = TOY_KEY, history: Sequence[Trial] = (),
                         overdue: bool = False) -> SimulatedTuning:
    """One simulated tuning of ``evals`` configs (fewer where the strategy ends it) at ``key``,
    the store holding ``history``.
    ``compile_seconds(config)``: how long its compile takes (``math.inf``: until cut off);
    ``timeout(seen)``: where a compile is cut off, given the compile seconds seen so far (a
    timed-out config is a ``timeout`` trial); ``paced``: the search keeps as many in flight as
    the session's pace wants, else its ``batch``; ``overdue``: as a live tuning, the evaluator
    says the configs in flight are late (``Feed.overdue``) once no compile has finished for
    ``TuningSession._overdue_after`` seconds while the search queued nothing new."""
    from ..session import TuningSession  # the pace is the session's; the session imports torch and Triton

    clock = SimulatedClock()
    session = SimpleNamespace(_compile_seconds_here=[], _busy_seconds=[])
    order = itertools.count()
    at_asks: list[int] = []
    ask = strategy.ask

    def recorded_ask(n: int) -> list[Config]:
        at_asks.append(len(search._queued) + search._in_flight)
        return ask(n)

    strategy.ask = recorded_ask  # type: ignore[method-assign]

    def cut(seconds: float) -> float:
        return min(seconds, timeout(session._compile_seconds_here)) if timeout is not None else seconds

    def evaluate(feed: Feed, deadline: Deadline) -> Iterator[tuple[Config, Trial | None]]:
        if paced:
            feed.pace = lambda: TuningSession._in_flight_wanted(session)  # type: ignore[arg-type]  # its two lists
        waiting: deque[Config] = deque()
        running: list[tuple[float, int, float, bool, Config]] = []  # (done at, order, seconds, cut off, config)
        quiet_since = clock.seconds()  # the last compile finished, or the last call of feed.overdue()
        while True:
            new = feed.take()
            waiting.extend(new)
            while waiting and len(running) < workers:  # jobs go to free workers between timings
                config = waiting.popleft()
                needed = compile_seconds(config)
                seconds = cut(needed)
                heapq.heappush(running, (clock.seconds() + seconds, next(order), seconds, seconds < needed, config))
            if not running:
                return
            late = TuningSession._overdue_after(session) if overdue and not new else None  # type: ignore[arg-type]
            if late is not None and running[0][0] > quiet_since + late:
                clock.advance(max(0.0, quiet_since + late - clock.seconds()))
                quiet_since = clock.seconds()
                feed.overdue()
                continue
            done, _, seconds, cut_off, config = heapq.heappop(running)
            clock.advance(max(0.0, done - clock.seconds()))
            session._compile_seconds_here.append(seconds)
            if cut_off:
                yield config, Trial(config, Status.TIMEOUT, error=f"compile exceeded {seconds:.1f} s")
                quiet_since = clock.seconds()
                continue
            taken = clock.seconds()
            clock.advance(busy_seconds)
            yield config, trial_of(config)
            session._busy_seconds.append(clock.seconds() - taken)
            quiet_since = clock.seconds()

    search = Search(strategy, SearchContext(space, Budget(evals=evals), key, seed, tuple(history)), clock=clock,
                    batch=batch)
    search.advance(evaluate)
    if search.result.evaluations != evals and search.result.stopped_because is not StopReason.STRATEGY:
        raise RuntimeError(f"the simulated tuning measured {search.result.evaluations} of {evals} configs")
    return SimulatedTuning(at_asks, clock.seconds(), search.result)

