"""A conformance suite for Strategy implementations; a plugin's tests inherit it.

    from tunekit.testing.strategies import StrategyConformance

    class TestMyStrategy(StrategyConformance):
        def make_strategy(self):
            return MyStrategy()

Every check drives the strategy the way the Autotuner does, with results from a replayed
cost function instead of a GPU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tunekit.budget import Budget
from tunekit.config import config_json, config_to_dict
from tunekit.deadline import SimulatedClock
from tunekit.keys import TuningKey
from tunekit.search import run_search
from tunekit.space import Space
from tunekit.strategy import SearchContext, Strategy
from tunekit.trial import Status, Timing, Trial


#: The key the toy searches tune at.
TOY_KEY = TuningKey(("M",), (1,), ())


def toy_space() -> Space:
    return Space(
        BLOCK_M=[16, 32, 64, 128], BLOCK_N=[16, 32, 64, 128], num_warps=[1, 2, 4, 8],
        constraints=[lambda c: c["BLOCK_M"] * c["BLOCK_N"] // c["num_warps"] >= 64],
    )


def toy_time(config) -> float:
    """A smooth cost with one optimum at (64, 64, 4), plus a class of configs that 'fail'."""
    flat = config_to_dict(config)
    return 1.0 + sum((math.log2(flat[p]) - math.log2(best)) ** 2 for p, best in
                     (("BLOCK_M", 64), ("BLOCK_N", 64), ("num_warps", 4)))


def toy_trial(config) -> Trial:
    flat = config_to_dict(config)
    if flat["BLOCK_M"] == 128 and flat["BLOCK_N"] == 128:
        return Trial(config, Status.OUT_OF_RESOURCES, error="injected: 128x128 tiles fail")
    t = toy_time(config)
    return Trial(config, Status.OK, Timing(t, t, t))


def drive(strategy: Strategy, space: Space, evals: int, seed: int = 0, batch: int = 4,
          history: Sequence[Trial] = ()) -> list:
    """Run the Autotuner's search loop with ``toy_trial`` as the benchmark: the distinct configs
    evaluated, in order. ``history``: the store's trials (of other keys than ``TOY_KEY``) when it
    starts."""

    def evaluate(configs, deadline):
        for config in configs:
            deadline.clock.advance(1.0)
            yield config, toy_trial(config)

    context = SearchContext(space, Budget(evals=evals), TOY_KEY, seed, tuple(history))
    result = run_search(strategy, context, evaluate, clock=SimulatedClock(), batch=batch)
    return [step.trial.config for step in result.steps]


class StrategyConformance:
    """Checks every strategy must pass. Subclasses define ``make_strategy``."""

    def make_strategy(self) -> Strategy:
        raise NotImplementedError

    def test_proposes_only_configs_of_the_space(self):
        space = toy_space()
        strategy = self.make_strategy()
        strategy.start(SearchContext(space, Budget(evals=10), TOY_KEY, 0))
        for config in strategy.ask(8):
            assert config in space

    def test_respects_the_batch_size(self):
        strategy = self.make_strategy()
        strategy.start(SearchContext(toy_space(), Budget(evals=10), TOY_KEY, 0))
        assert 1 <= len(strategy.ask(3)) <= 3

    def test_same_seed_same_search(self):
        space = toy_space()
        first = drive(self.make_strategy(), space, evals=12, seed=3)
        second = drive(self.make_strategy(), space, evals=12, seed=3)
        assert [config_json(c) for c in first] == [config_json(c) for c in second]

    def test_reaches_the_whole_space_given_the_budget(self):
        space = toy_space()
        found = drive(self.make_strategy(), space, evals=len(space))
        assert len(found) == len(space)

    def test_survives_failed_trials(self):
        space = toy_space()
        found = drive(self.make_strategy(), space, evals=len(space))
        assert any(toy_trial(c).status is Status.OUT_OF_RESOURCES for c in found)
