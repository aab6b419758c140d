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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from . import settings
from .config import Config, config_json
from .deadline import Clock, Deadline
from .strategy import SearchContext, Strategy
from .trial import Trial

logger = logging.getLogger(__name__)

#: evaluate(configs, deadline) yields (config, trial), trial None when the deadline came first.
Evaluate = Callable[[list[Config], Deadline], Iterable[tuple[Config, "Trial | None"]]]


@dataclass(frozen=True)
class Step:
    """One evaluation: its number, the clock after it, the trial, and the best time so far."""

    evaluation: int
    seconds: float
    trial: Trial
    best_ms: float


@dataclass
class SearchResult:
    trials: list[Trial] = field(default_factory=list)  # measured and store-answered, in order
    steps: list[Step] = field(default_factory=list)  # the measured ones: the tuning curve
    evaluations: int = 0
    seconds: float = 0.0
    stopped_because: str = ""


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
    the strategy without an evaluation. ``on_trial`` sees every new trial as soon as it exists
    (the tuning session commits it to the store there). The search stops at ``deadline``
    (default: the budget's seconds on ``clock``), which a live tuning sets earlier than the
    budget's end to leave time for re-timing the finalists.
    """
    if deadline is None:
        deadline = Deadline(clock or Clock(), context.budget.seconds)
    clock = deadline.clock
    known = known or {}
    budget, space = context.budget, context.space
    result = SearchResult()
    seen: set[str] = set()
    best = math.inf
    fruitless = 0

    def timed(call, *args):
        begin = time.perf_counter()
        value = call(*args)
        clock.advance(time.perf_counter() - begin)  # strategy time counts in a simulated tuning too
        return value

    timed(strategy.start, context)
    while True:
        if budget.evals_left(result.evaluations) == 0 or deadline.expired():
            result.stopped_because = "budget"
            break
        left = budget.evals_left(result.evaluations)
        proposals = timed(strategy.ask, batch if left is None else min(batch, left))
        if not proposals:
            result.stopped_because = "strategy"
            break
        new: list[Config] = []
        answered: list[Trial] = []
        for proposal in proposals:
            config = space.canonical(proposal)
            if config is None:
                continue
            cid = config_json(config)
            if cid in seen:
                continue
            seen.add(cid)
            if cid in known:
                answered.append(replace(known[cid], config=config, source="store"))
            else:
                new.append(config)
        result.trials.extend(answered)
        if answered:
            timed(strategy.tell, answered)
        if not new:
            fruitless += len(proposals)
            if fruitless >= settings.DEFAULTS.max_fruitless_proposals:
                logger.info("the strategy proposed nothing new %d times; stopping", fruitless)
                result.stopped_because = "no new proposals"
                break
            continue
        fruitless = 0
        measured = []
        for config, trial in evaluate(new, deadline):
            if trial is None:  # the deadline came before this config
                seen.discard(config_json(config))
                continue
            result.evaluations += 1
            best = min(best, trial.time_ms)
            result.trials.append(trial)
            result.steps.append(Step(result.evaluations, clock.seconds(), trial, best))
            measured.append(trial)
            if on_trial is not None:
                on_trial(trial)
        if measured:
            timed(strategy.tell, measured)
    result.seconds = clock.seconds()
    return result
