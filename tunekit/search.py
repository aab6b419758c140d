"""The search loop shared by live tuning and replay: ask, filter, evaluate, tell, until the budget ends.

The Autotuner runs it with an evaluator that compiles and times real kernels against a wall
clock; ``tunekit compare`` runs the same loop with an evaluator that answers from a recorded
space against a simulated clock. So a strategy behaves identically in both, and evaluations are
counted one way everywhere: a config compiled and timed, or failed, for the first time in this
tuning. Proposals the Space rejects, repeats and configs the store already holds are free.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from enum import Enum

import torch

from . import settings
from .config import Config, config_json
from .deadline import Clock, Deadline
from .strategy import SearchContext, Strategy
from .trial import Source, Trial

logger = logging.getLogger(__name__)

#: evaluate(feed, deadline) takes configs from ``feed`` (a ``Feed``) and yields (config, trial) for
#: each, trial None when the deadline came first.
Evaluate = Callable[["Feed", Deadline], Iterable[tuple[Config, "Trial | None"]]]


@dataclass(frozen=True)
class Step:
    """One evaluation: its number, the clock after it, the trial, and the best time so far."""

    evaluation: int
    seconds: float
    trial: Trial
    best_ms: float


class StopReason(str, Enum):
    """Why a search ended: its budget ran out, the strategy said so, it proposed nothing new, or
    the last configs it asked for were late and the evaluator left them out (``Feed.leave_out_late``)."""

    BUDGET = "budget"
    STRATEGY = "strategy"
    NO_NEW_PROPOSALS = "no new proposals"
    LATE = "late compiles"

    def __str__(self) -> str:
        return self.value


@dataclass
class SearchResult:
    trials: list[Trial] = field(default_factory=list)  # measured and store-answered, in order
    steps: list[Step] = field(default_factory=list)  # the measured ones: the tuning curve
    evaluations: int = 0
    seconds: float = 0.0
    stopped_because: StopReason | None = None  # None while it runs


def run_search(
    strategy: Strategy,
    context: SearchContext,
    evaluate: Evaluate,
    *,
    known: Mapping[str, Trial] | None = None,
    clock: Clock | None = None,
    deadline: Deadline | None = None,
    batch: int = 1,
    on_trial: Callable[[Trial], None] | None = None,
) -> SearchResult:
    """Drive ``strategy`` over ``context.space`` until the budget, the strategy or the space ends.

    ``known`` maps config ids to trials measured earlier (the store): such configs are told to
    the strategy without an evaluation. ``batch``: configs asked for and not yet told at any time
    (``Search``). ``on_trial`` sees every new trial as soon as it exists (the tuning session
    commits it to the store there). The search stops at ``deadline`` (default: the budget's
    seconds on ``clock``), which a live tuning sets earlier than the budget's end to leave time
    for re-timing the finalists.
    """
    search = Search(strategy, context, known=known, clock=clock, deadline=deadline, batch=batch, on_trial=on_trial)
    search.advance(evaluate)
    return search.result


@contextmanager
def _one_torch_thread() -> Iterator[None]:
    """PyTorch's intra-op threads set to one inside (restored after): a strategy's models (Optuna's
    GP runs on torch) are small, and a live tuning's process shares the cores with busy compile
    workers, where torch's threads, one per core, waited on each other: single-config asks of
    0.45-0.76 s live on an H100 host, reproduced here with the cores kept busy and gone with one
    thread (``experiments/asks_under_load.py``). With PyTorch's OpenMP thread pool (its Linux
    builds) the setting is the calling thread's own: a tuning in a background thread leaves the
    caller's threads as they are. PyTorch's native pool can be set only once, so there nothing
    changes."""
    before = torch.get_num_threads()
    if before == 1 or not torch.backends.openmp.is_available():
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def check_batch(batch: object) -> int:
    """``batch`` if it is an int of at least 1 (configs asked for and not yet told at a time), else
    ``ValueError`` naming it (a bool is refused, though Python counts it an int)."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be an int >= 1 (configs in flight). Got {batch!r} instead.")
    return batch


class Feed:
    """The configs a search hands its evaluator, in the order asked: iterating takes them one at a
    time, ``take()`` every one queued now. An evaluator yields each config's trial as soon as it
    has it; the search tells the strategy and asks for the next config meanwhile, so a config
    asked for while the evaluator works is in the feed when it takes again. The feed ends when
    nothing is queued, or once the configs taken reach this ``advance``'s limit.

    An evaluator that needs fewer configs in flight than the search's ``batch`` to stay busy (a
    live tuning whose compiles keep up with its timing with fewer) sets ``pace``: asked before
    each ask while it runs, it says how many configs it wants in flight (None: the batch). The
    search then asks for fewer, or none, until as many are in flight, and never keeps more than
    its batch: each config asked for later is picked knowing more trials.

    An evaluator left waiting on configs that run far longer than the others (a compile held
    until its timeout) calls ``overdue()``: the strategy is told so (``Strategy.overdue``) and
    asked again, so that one that waits for its pending trials may go on without them. Where the
    search will ask for nothing more (every evaluation its budget has left is in flight, or every
    config of the space has been asked for, or the strategy has ended) and has a trial of a config
    that works, ``overdue()`` returns True: the evaluator may then leave the late configs out,
    unmeasured (None, as at a deadline), after saying so (``leave_out_late()``), and the search
    ends with what it measured (``StopReason.LATE``)."""

    def __init__(self, search: "Search", limit: int | None) -> None:
        self._search = search
        self._limit = limit  # configs this feed may hand out at most (a per-call limit left)
        self.pace: Callable[[], int | None] | None = None

    def overdue(self) -> bool:
        """Say that the configs in flight are late: the strategy is told, then asked again. True:
        nothing more will be asked, and the evaluator may leave the late configs out."""
        return self._search._overdue()

    def leave_out_late(self) -> None:
        """Say that the configs in flight are left out (answered None): the search then ends."""
        self._search._late_left_out = True

    def take(self) -> list[Config]:
        """Every config queued now, within the limit (none: nothing is queued now)."""
        taken = []
        while (config := self._next()) is not None:
            taken.append(config)
        return taken

    def __iter__(self) -> Iterator[Config]:
        while (config := self._next()) is not None:
            yield config

    def _next(self) -> Config | None:
        search = self._search
        if not search._queued or (self._limit is not None and self._limit <= 0):
            return None
        if self._limit is not None:
            self._limit -= 1
        search._in_flight += 1
        return search._queued.popleft()


class Search:
    """``run_search``'s loop, resumable: ``advance(evaluate, evaluations=k)`` measures at most k
    configs and returns, and the next ``advance`` goes on where it stopped (a tuning spread over
    the calls of a kernel, ``Budget(per_call=k)``).

    ``batch`` configs are asked for and not yet told at any time: the first ask is for ``batch``;
    then, as each trial comes, the strategy is told it and asked for one more (or as many as
    keep the number the evaluator's ``Feed.pace`` wants in flight, never past ``batch``). So a
    live tuning keeps its compile workers busy while no config waits on a batch's slowest
    compile, and the strategy learns from each trial as soon as it exists; a strategy that
    learns from pending configs (``DefaultSearch``'s believer) is asked with up to ``batch - 1``
    of them, and one that has nothing to propose until pending configs are told (a start that
    waits for its trials) proposes nothing meanwhile. A replay's evaluator answers the configs
    in the order asked. A spread tuning asks and tells as one uninterrupted search with a
    replay's evaluator does: what is queued beyond k waits for the next ``advance``. ``first``:
    configs measured before the strategy's, told to it like its own (as Optuna's
    ``enqueue_trial``): a tuning that starts from a fallback config measures it, so its winner
    is never one it knew to be slower."""

    def __init__(self, strategy: Strategy, context: SearchContext, *, known: Mapping[str, Trial] | None = None,
                 clock: Clock | None = None, deadline: Deadline | None = None, batch: int = 1,
                 on_trial: Callable[[Trial], None] | None = None, first: Sequence[Config] = ()) -> None:
        self.strategy = strategy
        self.context = context
        self.deadline = deadline if deadline is not None else Deadline(clock or Clock(), context.budget.seconds)
        self.known = known or {}
        self.batch = check_batch(batch)
        self.on_trial = on_trial
        self.result = SearchResult()
        self._seen: set[str] = set()
        self._best = math.inf
        self._fruitless = 0
        self._queued: deque[Config] = deque()  # asked for, not handed to the evaluator yet
        self._in_flight = 0  # handed to the evaluator, not answered yet
        self._strategy_ended: StopReason | None = None  # the strategy stopped; what it asked for is measured first
        self._first = list(first)
        self._started = False
        self._feed: Feed | None = None  # the evaluator's, while it runs
        self._late_left_out = False  # the evaluator said it left the last, late configs out (Feed.leave_out_late)

    @property
    def done(self) -> bool:
        return self.result.stopped_because is not None

    def _timed(self, call: Callable, *args):
        begin = time.perf_counter()
        with _one_torch_thread():
            value = call(*args)
        elapsed = time.perf_counter() - begin
        self.deadline.clock.advance(elapsed)  # strategy time counts in a simulated tuning too
        logger.debug("strategy %s: %.1f ms", getattr(call, "__name__", call), 1e3 * elapsed)
        return value

    def advance(self, evaluate: Evaluate, evaluations: int | None = None) -> bool:
        """Search until ``evaluations`` more configs are measured (None: no limit) or the search
        ends; True once it has ended (``result.stopped_because`` says why)."""
        if not self._started:
            self._started = True
            self._timed(self.strategy.start, self.context)
            self._enqueue(self._first)
        budget, deadline, result = self.context.budget, self.deadline, self.result
        measured_now = 0
        while not self.done:
            if budget.evals_left(result.evaluations) == 0 or deadline.expired():
                result.stopped_because = StopReason.BUDGET
                break
            if evaluations is not None and measured_now >= evaluations:
                break
            if not self._queued:
                if self._strategy_ended is not None:
                    result.stopped_because = self._strategy_ended
                    break
                self._ask()
                continue
            feed = self._feed = Feed(self, None if evaluations is None else evaluations - measured_now)
            left_out = 0
            for config, trial in evaluate(feed, deadline):
                self._in_flight -= 1
                if trial is None:  # the deadline came before this config, or it was late and the last
                    self._seen.discard(config_json(config))
                    left_out += 1
                    continue
                result.evaluations += 1
                measured_now += 1
                self._best = min(self._best, trial.time_ms)
                result.trials.append(trial)
                result.steps.append(Step(result.evaluations, deadline.clock.seconds(), trial, self._best))
                if self.on_trial is not None:
                    self.on_trial(trial)
                self._timed(self.strategy.tell, [trial])
                if not deadline.expired():
                    self._ask()
            self._in_flight = 0  # an evaluator that ended early (a stop) answers nothing more
            self._feed = None  # asked outside an evaluator's round, the search fills its batch
            if self._late_left_out and left_out:
                result.stopped_because = StopReason.LATE
        result.seconds = deadline.clock.seconds()
        return self.done

    def _overdue(self) -> bool:
        """The evaluator's word that the configs in flight are late (``Feed.overdue``); True
        where they are the last the search will ask for and a config it has a trial of works."""
        if self._in_flight or self._queued:
            self._timed(self.strategy.overdue)
            self._ask()
        left = self.context.budget.evals_left(self.result.evaluations)
        asked_all = (self._strategy_ended is not None or (left is not None and left <= self._in_flight)
                     or len(self._seen) >= len(self.context.space))
        return bool(self._in_flight) and not self._queued and asked_all and any(t.ok for t in self.result.trials)

    def _ask(self) -> None:
        """Ask the strategy for as many configs as keep ``batch`` asked for and not yet told, or as
        many as the evaluator's ``Feed.pace`` wants in flight where that is fewer, at least one
        (no more than the budget has evaluations left for); queue what is new, tell it what the
        store holds. A strategy that proposes nothing while configs are pending is asked again as
        the next trial is told, or when the evaluator says they are late; with none pending, it
        has ended."""
        if self._strategy_ended is not None:
            return
        budget, result = self.context.budget, self.result
        waiting = len(self._queued) + self._in_flight
        left = budget.evals_left(result.evaluations)
        wanted = self._feed.pace() if self._feed is not None and self._feed.pace is not None else None
        target = self.batch if wanted is None else max(1, min(self.batch, wanted))
        count = target - waiting if left is None else min(target, left) - waiting
        logger.debug("in flight %d, wanted %d; asking for %d", waiting, target, max(count, 0))
        if count < 1:
            return
        proposals = self._timed(self.strategy.ask, count)
        if not proposals:
            if not waiting:
                self._strategy_ended = StopReason.STRATEGY
            return
        queued = len(self._queued)
        self._enqueue(proposals)
        if len(self._queued) > queued:
            self._fruitless = 0
            return
        self._fruitless += len(proposals)
        if self._fruitless >= settings.DEFAULTS.max_fruitless_proposals:
            logger.info("the strategy proposed nothing new %d times; stopping", self._fruitless)
            self._strategy_ended = StopReason.NO_NEW_PROPOSALS

    def _enqueue(self, proposals: Sequence[Config | Mapping]) -> None:
        """Queue the proposals that are new; tell the strategy at once of those the store holds."""
        result = self.result
        answered: list[Trial] = []
        for proposal in proposals:
            config = self.context.space.canonical(proposal)
            if config is None:
                continue
            cid = config_json(config)
            if cid in self._seen:
                continue
            self._seen.add(cid)
            if cid in self.known:
                answered.append(replace(self.known[cid], config=config, source=Source.STORE))
            else:
                self._queued.append(config)
        result.trials.extend(answered)
        if answered:
            self._timed(self.strategy.tell, answered)
