"""The ``lfbo`` strategy (strategies/lfbo.py): Helion's LFBO tree search behind tunekit's Strategy."""

from __future__ import annotations

import statistics

import pytest

from tunekit.budget import Budget
from tunekit.config import config_json
from tunekit.space import Space
from tunekit.strategies import LFBOSearch, RandomSearch
from tunekit.strategy import SearchContext, make_strategy
from tunekit.testing.strategies import TOY_KEY, StrategyConformance, drive, toy_space, toy_time, toy_trial
from tunekit.trial import Status, Timing, Trial


class TestLFBOSearch(StrategyConformance):
    def make_strategy(self):
        return LFBOSearch(initial=10)


def ask_and_tell(strategy, space, trial_of, batch: int = 4, seed: int = 0) -> list:
    """Drive the strategy directly, without the search loop (which would drop repeats): every
    config it proposes, in order, until it proposes nothing."""
    strategy.start(SearchContext(space, Budget(evals=10**6), TOY_KEY, seed))
    proposed: list = []
    while batch_ := strategy.ask(batch):
        assert len(batch_) <= batch and len(proposed) + len(batch_) <= len(space), "it goes on past the Space"
        proposed += batch_
        strategy.tell([trial_of(config) for config in batch_])
    return proposed


def test_proposes_every_config_of_the_space_once_then_stops():
    """Asked and told directly, past the initial configs, the rounds and the fallback: each valid
    config once (the constrained toy: 59 of 64), then an empty batch, and asking again stays empty."""
    space = toy_space()
    strategy = LFBOSearch(initial=5)
    proposed = ask_and_tell(strategy, space, toy_trial, batch=3)
    ids = [config_json(c) for c in proposed]
    assert len(ids) == len(set(ids)) == len(space)
    assert all(config in space for config in proposed)
    assert strategy.ask(3) == []


def test_a_tiny_space_is_exhausted_and_then_it_stops():
    """Fewer configs than the initial random ones: each once, then nothing."""
    space = Space(BLOCK=[32, 64, 128], num_warps=[4, 8],
                  constraints=[lambda c: c["BLOCK"] // c["num_warps"] >= 8])

    def trial_of(config):
        return Trial(config, Status.OK, Timing(1.0, 1.0, 1.0))

    proposed = ask_and_tell(LFBOSearch(), space, trial_of, batch=2)
    assert sorted(config_json(c) for c in proposed) == sorted(config_json(c) for c in space.configs())
    assert len(space) == 5


def test_a_space_where_every_config_fails_is_searched_to_the_end():
    """Injected: every config fails. Helion's search raises (no config ran); this one has no
    forest to learn from (one class) and proposes the rest at random, each once."""
    def failing(config):
        return Trial(config, Status.COMPILE_ERROR, error="injected")

    proposed = ask_and_tell(LFBOSearch(initial=5), toy_space(), failing)
    assert len({config_json(c) for c in proposed}) == len(proposed) == len(toy_space())


def test_failed_configs_are_labelled_not_good():
    """Injected: the 16 fastest configs of the toy fail. Their times are +inf, never within the
    quantile: the pattern searches start from configs that ran, and the forest gives the failed
    configs a lower chance of being good than the best that ran."""
    space = toy_space()
    fastest = {config_json(c) for c in sorted(space.configs(), key=toy_time)[:16]}

    def trial_of(config):
        if config_json(config) in fastest:
            return Trial(config, Status.OUT_OF_RESOURCES, error="injected")
        return toy_trial(config)

    strategy = LFBOSearch(initial=len(space))
    strategy.start(SearchContext(space, Budget(evals=100), TOY_KEY, 0))
    every = strategy.ask(len(space))
    strategy.tell([trial_of(c) for c in every])
    assert strategy.ask(1) == []  # all measured: nothing left
    strategy._new_round()
    strategy._fit()
    starts = [space.configs()[copy.current] for copy in strategy._copies]
    assert starts and all(trial_of(c).ok for c in starts)
    failed = [i for i, c in enumerate(space.configs()) if config_json(c) in fastest]
    ran = [i for i, c in enumerate(space.configs()) if config_json(c) not in fastest]
    best_ran = min(ran, key=lambda i: toy_time(space.configs()[i]))
    chosen = strategy._choose([best_ran, *failed], 1)
    assert chosen == [best_ran]


def test_same_seed_same_search_past_the_initial_configs_and_seeds_differ():
    space = toy_space()
    first, again = (drive(LFBOSearch(initial=10), space, evals=30, seed=7, batch=1) for _ in range(2))
    assert [config_json(c) for c in first] == [config_json(c) for c in again]
    other = drive(LFBOSearch(initial=10), space, evals=30, seed=8, batch=1)
    assert [config_json(c) for c in other] != [config_json(c) for c in first]


def test_without_restarts_it_stops_where_helions_search_ends():
    """``restarts=False``: once every copy has ended (or after ``max_generations``) it proposes
    nothing more, before the Space is exhausted; the search loop stops on the strategy's word."""
    from tunekit.search import StopReason, run_search

    def evaluate(configs, deadline):
        for config in configs:
            yield config, toy_trial(config)

    context = SearchContext(toy_space(), Budget(evals=10**6), TOY_KEY, 0)
    result = run_search(LFBOSearch(initial=10, restarts=False), context, evaluate)
    assert result.stopped_because is StopReason.STRATEGY
    assert 10 < result.evaluations < len(toy_space())


def evaluations_to(ratio: float, times_ms, optimum_ms: float, budget: int) -> int:
    """Evaluations until a time within ``ratio`` of the optimum; ``budget`` + 1 if never."""
    return next((i for i, t in enumerate(times_ms, 1) if t <= optimum_ms * ratio), budget + 1)


def test_finds_a_recorded_spaces_optimum_sooner_than_random_in_the_median_of_7_seeds():
    """Replayed as ``tunekit compare`` replays: the shipped H200 softmax space (wide rows, 424
    configs), 80 evaluations, until its optimum is measured. (On the 90-config attention space
    its 30 random configs at the start are a third of the space, and it is not ahead of random.)"""
    from tunekit.compare import replay
    from tunekit.kernels import shipped
    from tunekit.recorded import read_space

    (path,) = [p for p in shipped.paths("softmax") if "wide" in p.name]
    recorded = read_space(path)
    budget = 80

    def median(strategy: str) -> float:
        return statistics.median(evaluations_to(1.0, replay(recorded, strategy, seed, budget).times_ms,
                                                recorded.optimum_ms, budget) for seed in range(7))

    lfbo, rnd = median("lfbo"), median("random")
    assert lfbo < rnd, (lfbo, rnd)


def test_learns_the_toy_optimum_sooner_than_random():
    def evaluations_to_optimum(strategy, seed):
        order = drive(strategy, toy_space(), evals=30, seed=seed, batch=1)
        return evaluations_to(1.0, [toy_time(c) for c in order], 1.0, 30)

    lfbo = sorted(evaluations_to_optimum(LFBOSearch(initial=10), s) for s in range(7))
    rnd = sorted(evaluations_to_optimum(RandomSearch(), s) for s in range(7))
    assert lfbo[3] < rnd[3], (lfbo, rnd)


def test_is_registered_and_left_out_of_the_demos_default_replay():
    from tunekit import demo

    assert isinstance(make_strategy("lfbo"), LFBOSearch)
    assert "lfbo" in demo.NOT_REPLAYED


@pytest.mark.parametrize("radius, expected", [(1, [32, 128]), (2, [16, 32, 128, 256])])
def test_a_parameters_steps_are_positions_in_its_sorted_domain(radius, expected):
    """Helion's pattern neighbours: powers of two up to ``radius`` steps away; any other value of
    an unordered domain."""
    space = Space(BLOCK=[256, 16, 64, 32, 128], MODE=["a", "b", "c"])
    strategy = LFBOSearch()
    strategy.start(SearchContext(space, Budget(evals=10), TOY_KEY, 0))
    block = space.domains["BLOCK"]
    assert sorted(block[p] for p in strategy._steps[0, block.index(64), radius]) == expected
    assert strategy._steps[1, 0, radius] == [1, 2]


@pytest.mark.parametrize("batch", [4, 18])
def test_a_generation_is_made_only_once_the_configs_in_flight_are_told(batch):
    """With configs in flight (a live tuning's), an ask on an empty queue proposes nothing while
    earlier proposals are untold: the next generation (or the initial configs' first one) is made
    from every trial of the last, as Helion's search makes it; the tuning still spends its budget."""
    made_while_waiting = []

    class Recording(LFBOSearch):
        def _next_batch(self):
            made_while_waiting.append(self._waiting())
            return super()._next_batch()

    assert len(drive(Recording(), toy_space(), evals=60, seed=0, batch=batch)) == 60
    assert made_while_waiting and not any(made_while_waiting)
