import itertools
import json
import math
import sys
import textwrap

import numpy as np
import pytest

import tunekit
from tunekit.config import config_from_dict, config_json, config_to_dict
from tunekit.keys import TuningKey
from tunekit.space import Space
from tunekit.strategies import DefaultSearch, Exhaustive, ForestSearch, OptunaSearch, RandomSearch, available
from tunekit.strategy import make_strategy
from tunekit.testing.strategies import TOY_KEY, StrategyConformance, drive, toy_space


class TestExhaustive(StrategyConformance):
    def make_strategy(self):
        return Exhaustive()

    def test_follows_the_space_order(self):
        space = toy_space()
        assert [config_json(c) for c in drive(Exhaustive(), space, evals=7)] == [
            config_json(c) for c in space.configs()[:7]
        ]


class TestRandomSearch(StrategyConformance):
    def make_strategy(self):
        return RandomSearch()

    def test_different_seeds_explore_differently(self):
        space = toy_space()
        runs = {tuple(config_json(c) for c in drive(RandomSearch(), space, evals=8, seed=s)) for s in range(5)}
        assert len(runs) == 5

    def test_never_proposes_a_config_twice(self):
        space = toy_space()
        found = drive(RandomSearch(), space, evals=len(space), batch=7)
        assert len({config_json(c) for c in found}) == len(space)


class TestOptunaTPE(StrategyConformance):
    def make_strategy(self):
        return OptunaSearch(n_startup_trials=5)

    def test_learns_the_toy_optimum_sooner_than_random(self):
        space = toy_space()
        from tunekit.testing.strategies import toy_time

        def evaluations_to_optimum(strategy, seed):
            order = drive(strategy, space, evals=len(space), seed=seed)
            return next(i for i, c in enumerate(order, 1) if toy_time(c) == 1.0)

        tpe = sorted(evaluations_to_optimum(OptunaSearch(n_startup_trials=5), s) for s in range(7))
        rnd = sorted(evaluations_to_optimum(RandomSearch(), s) for s in range(7))
        assert tpe[3] < rnd[3]  # medians over 7 seeds


def evaluations_to_optimum(strategy, seed: int) -> int:
    from tunekit.testing.strategies import toy_time

    order = drive(strategy, toy_space(), evals=len(toy_space()), seed=seed, batch=1)
    return next(i for i, c in enumerate(order, 1) if toy_time(c) == 1.0)


class TestForestSearch(StrategyConformance):
    def make_strategy(self):
        return ForestSearch(initial=5)

    def test_learns_the_toy_optimum_sooner_than_random(self):
        forest = sorted(evaluations_to_optimum(ForestSearch(initial=5), s) for s in range(7))
        rnd = sorted(evaluations_to_optimum(RandomSearch(), s) for s in range(7))
        assert forest[3] < rnd[3]  # medians over 7 seeds

    def test_top_k_caps_each_ask(self):
        from tunekit.budget import Budget
        from tunekit.strategy import SearchContext

        strategy = ForestSearch(top_k=2)
        strategy.start(SearchContext(toy_space(), Budget(evals=10), TOY_KEY, 0))
        assert len(strategy.ask(8)) == 2


class TestDefaultSearchRefreshingTrees(StrategyConformance):
    """``refit_trees``: each refit fits a few new trees in place of the oldest."""

    def make_strategy(self):
        return DefaultSearch(initial=5, min_evals=10**6, refit_trees=8)

    def test_learns_the_toy_optimum_sooner_than_random(self):
        default = sorted(evaluations_to_optimum(self.make_strategy(), s) for s in range(7))
        rnd = sorted(evaluations_to_optimum(RandomSearch(), s) for s in range(7))
        assert default[3] < rnd[3]


class TestDefaultSearchRandomStart(StrategyConformance):
    """``initial_design="random"``: the start draws its configs at random, not by maximin."""

    def make_strategy(self):
        return DefaultSearch(initial=5, min_evals=10**6, initial_design="random")

    def test_the_start_is_a_seeded_random_draw_not_the_maximin_design(self):
        space = toy_space()
        starts = {seed: [config_json(c) for c in drive(self.make_strategy(), space, evals=5, seed=seed, batch=1)]
                  for seed in range(4)}
        assert starts[0] == [config_json(c) for c in drive(self.make_strategy(), space, evals=5, seed=0, batch=1)]
        assert len({tuple(start) for start in starts.values()}) == 4
        maximin = {seed: [config_json(c) for c in drive(DefaultSearch(initial=5), space, evals=5, seed=seed, batch=1)]
                   for seed in range(4)}
        assert starts != maximin

    def test_an_unknown_initial_design_is_refused_by_name(self):
        with pytest.raises(ValueError, match="initial_design='sobol'.*'maximin', 'random', 'latin'"):
            drive(DefaultSearch(initial_design="sobol"), toy_space(), evals=2)


class TestDefaultSearchLatinStart(StrategyConformance):
    """``initial_design="latin"``: the start takes the configs nearest a Latin hypercube's points."""

    def make_strategy(self):
        return DefaultSearch(initial=5, min_evals=10**6, initial_design="latin")

    @staticmethod
    def ten_by_ten() -> Space:
        """Two parameters of 10 values (one listed out of order, one of powers of two) and a flag:
        every combination exists, so each point of a 10-point hypercube has its own config."""
        return Space(X=[3, 1, 4, 0, 5, 9, 2, 6, 8, 7], Y=[2**i for i in range(10)], FLAG=[0, 1])

    def start_of(self, strategy, space, seed, batch, count=10):
        """The start's ``count`` configs, asked ``batch`` at a time (the start needs no trials told)."""
        strategy.start(self.context(space, seed))
        return [config_to_dict(c) for _ in range(0, count, batch) for c in strategy.ask(batch)]

    def latin(self, **options):
        return DefaultSearch(initial=10, initial_design="latin", **options)

    def test_each_value_of_a_parameter_comes_once(self):
        space = self.ten_by_ten()
        for seed in range(3):
            start = self.start_of(self.latin(), space, seed, batch=10)
            assert sorted(c["X"] for c in start) == list(range(10))
            assert sorted(c["Y"] for c in start) == [2**i for i in range(10)]
            assert sorted(c["FLAG"] for c in start) == [0] * 5 + [1] * 5
            # what the option changes: maximin's start takes some values twice, the extremes first
            maximin = self.start_of(DefaultSearch(initial=10), space, seed, batch=10)
            assert sorted(c["X"] for c in maximin) != list(range(10))

    def test_the_start_is_the_same_asked_one_at_a_time_seeded_and_differs_by_seed(self):
        space = self.ten_by_ten()
        starts = [self.start_of(self.latin(), space, seed, batch=10) for seed in range(3)]
        assert starts[0] == self.start_of(self.latin(), space, 0, batch=1)
        assert len({tuple(tuple(sorted(c.items())) for c in start) for start in starts}) == 3

    def test_values_a_constraint_leaves_out_take_no_stripe(self):
        """A >= 16 leaves 4 of A's 8 values: each of those comes twice in 8 configs (stripes of
        the whole domain would give 16 the stripes of 1 to 8 too)."""
        space = Space(A=[2**i for i in range(8)], B=list(range(8)), constraints=[lambda c: c["A"] >= 16])
        for seed in range(3):
            strategy = DefaultSearch(initial=8, initial_design="latin")
            start = self.start_of(strategy, space, seed, batch=8, count=8)
            assert sorted(c["A"] for c in start) == [16, 16, 32, 32, 64, 64, 128, 128]
            assert sorted(c["B"] for c in start) == list(range(8))

    def test_a_missing_value_is_a_value_of_its_own(self):
        """B has 1, 2 or no value (a third of the configs lack it): a third of the start lacks it."""
        import triton

        configs = [triton.Config({"A": a, **({} if b is None else {"B": b})})
                   for a in range(9) for b in (None, 1, 2)]
        space = Space.from_configs(configs)
        for seed in range(3):
            strategy = DefaultSearch(initial=9, initial_design="latin")
            start = self.start_of(strategy, space, seed, batch=9, count=9)
            assert sorted(c["A"] for c in start) == list(range(9))
            assert sum("B" not in c for c in start) == 3

    def test_a_config_listed_twice_comes_once(self):
        import triton

        base = self.ten_by_ten().configs()
        space = Space.from_configs([triton.Config(config_to_dict(c)) for c in list(base) * 2])
        for seed in range(5):
            start = self.start_of(self.latin(), space, seed, batch=10)
            assert len({json.dumps(c, sort_keys=True) for c in start}) == 10

    def test_configs_expected_to_fail_or_too_large_are_left_out(self):
        """The prior's failures (X 0 and 1 here) and the tiles over shared memory (X 2) are not
        taken, as maximin leaves them out; the other values share the stripes."""
        space = self.ten_by_ten()
        for seed in range(3):
            strategy = self.latin()
            strategy.start(self.context(space, seed))
            x = np.array([config_to_dict(c)["X"] for c in space.configs()])
            strategy._prior_failing |= x <= 1
            strategy._too_large = strategy._too_large | (x == 2)
            start = [config_to_dict(c) for c in strategy.ask(10)]
            assert len(start) == 10 and min(c["X"] for c in start) >= 3

    def test_latin_maximin_takes_five_of_each_in_turn(self):
        """The 5 hypercube configs, one per stripe of 2 X values, each followed by a maximin config:
        of the configs not yet picked, one whose L1 distance (over the encoding scaled to [0, 1])
        to the nearest of the 5 and of the maximin configs before it is the largest."""
        space = self.ten_by_ten()
        encoded = space.encoded()
        unit = (encoded - encoded.min(axis=0)) / (encoded.max(axis=0) - encoded.min(axis=0))
        for seed in range(3):
            strategy = DefaultSearch(initial=10, initial_design="latin-maximin")
            start = self.start_of(strategy, space, seed, batch=10)
            assert len({json.dumps(c, sort_keys=True) for c in start}) == 10
            assert sorted(c["X"] // 2 for c in start[0::2]) == list(range(5))
            picked = [space.index(config_from_dict(c)) for c in start]
            for turn in range(1, 10, 2):
                before = picked[0::2] + picked[1:turn:2]
                nearest = np.min([np.abs(unit - unit[i]).sum(axis=1) for i in before], axis=0)
                nearest[before] = -1.0
                assert nearest[picked[turn]] == nearest.max()

    @staticmethod
    def context(space, seed):
        from tunekit.budget import Budget
        from tunekit.strategy import SearchContext

        return SearchContext(space, Budget(evals=10), TOY_KEY, seed)


class TestDefaultSearchAroundSeveralBest(StrategyConformance):
    """``local_best``: the local proposals are neighbours of any of the few fastest configs."""

    def make_strategy(self):
        return DefaultSearch(initial=5, min_evals=10**6, local_best=3)

    @pytest.mark.parametrize("local_best", [1, 3])
    def test_every_local_proposal_neighbours_one_of_the_fastest_so_far(self, local_best):
        """With every proposal after the start local, each is one parameter one step away from
        one of the ``local_best`` fastest configs measured before it (failures are not fast)."""
        from tunekit.testing.strategies import toy_trial

        space = toy_space()
        beside_the_best = 0  # local proposals that are not neighbours of the fastest config itself
        for seed in range(3):
            found = drive(DefaultSearch(initial=5, local_fraction=1.0, local_best=local_best, min_evals=10**6),
                          space, evals=20, seed=seed, batch=1)
            for position in range(5, len(found)):
                measured = [c for c in found[:position] if toy_trial(c).ok]
                fastest = sorted(measured, key=lambda c: toy_trial(c).time_ms)[:local_best]
                around = {config_json(n) for c in fastest for n in space.neighbours(c)}
                untried = around - {config_json(c) for c in found[:position]}
                if untried:  # where no neighbour is left the forest proposes
                    assert config_json(found[position]) in around
                    beside_the_best += config_json(found[position]) not in {
                        config_json(n) for n in space.neighbours(fastest[0])}
        assert (beside_the_best > 0) == (local_best > 1)

    def test_local_best_under_one_is_refused(self):
        with pytest.raises(ValueError, match="local_best=0"):
            drive(DefaultSearch(local_best=0), toy_space(), evals=2)


class TestDefaultSearchHammingMoves(StrategyConformance):
    """``local_moves="hamming"``: a local proposal changes one parameter of the best config to any
    other value of its domain, not only the next one."""

    def make_strategy(self):
        return DefaultSearch(initial=5, min_evals=10**6, local_moves="hamming")

    @pytest.mark.parametrize("moves", ["adjacent", "hamming"])
    def test_every_local_proposal_is_one_move_from_the_fastest_so_far(self, moves):
        """With every proposal after the start local, each is a neighbour of the fastest config
        measured before it by ``Space.neighbours(..., moves)`` while one is open; only the
        Hamming moves ever take a value two or more steps along one parameter's domain."""
        from tunekit.testing.strategies import toy_trial

        space = toy_space()
        far_along_one = 0  # local proposals beyond the next value of the one parameter they change
        for seed in range(3):
            found = drive(DefaultSearch(initial=5, local_fraction=1.0, local_moves=moves, min_evals=10**6),
                          space, evals=20, seed=seed, batch=1)
            for position in range(5, len(found)):
                measured = [c for c in found[:position] if toy_trial(c).ok]
                fastest = min(measured, key=lambda c: toy_trial(c).time_ms)
                around = {config_json(n) for n in space.neighbours(fastest, moves)}
                if around - {config_json(c) for c in found[:position]}:  # else the step widens
                    assert config_json(found[position]) in around
                    far_along_one += config_json(found[position]) not in {
                        config_json(n) for n in space.neighbours(fastest)}
        assert (far_along_one > 0) == (moves == "hamming")

    def test_hamming_stalled_moves_far_only_once_the_search_stalled(self):
        """``"hamming-stalled"``: a local proposal goes past the next value of a parameter only
        where the best has not improved by more than ``noise`` in the last ``stalled_after``
        evaluations, and it does so there (so its early tunings are the adjacent ones')."""
        from tunekit.testing.strategies import toy_trial

        space = toy_space()
        far = {True: 0, False: 0}  # far local proposals, made stalled or not
        for seed in range(4):
            found = drive(DefaultSearch(initial=5, local_fraction=1.0, local_moves="hamming-stalled",
                                        stalled_after=3, stalled_gp_fraction=None, gp_fraction=0.0,
                                        min_evals=10**6), space, evals=30, seed=seed, batch=1)
            for position in range(5, len(found)):
                trials = [toy_trial(c) for c in found[:position]]
                best, last_gain = math.inf, 0
                for count, trial in enumerate(trials, 1):
                    if trial.time_ms < best / 1.01:
                        best, last_gain = trial.time_ms, count
                    best = min(best, trial.time_ms)
                stalled = position - last_gain >= 3
                fastest = min((c for c, t in zip(found, trials) if t.ok), key=lambda c: toy_trial(c).time_ms)
                around = {config_json(n) for n in space.neighbours(fastest, "hamming")}
                if around - {config_json(c) for c in found[:position]}:
                    far[stalled] += config_json(found[position]) in around - {
                        config_json(n) for n in space.neighbours(fastest)}
        assert far[False] == 0 and far[True] > 0, far

    def test_an_unknown_neighbourhood_is_refused_by_name(self):
        expected = "local_moves='diagonal'.*'adjacent', 'hamming', 'hamming-stalled'"
        with pytest.raises(ValueError, match=expected):
            drive(DefaultSearch(local_moves="diagonal"), toy_space(), evals=2)


class TestDefaultSearchLocalOrder(StrategyConformance):
    """``local_order="forest"``: a local proposal is the open neighbour of the best that the
    forest's last fit ranked first, not one at random."""

    def make_strategy(self):
        return DefaultSearch(initial=5, min_evals=10**6, local_order="forest")

    def test_each_local_proposal_is_the_open_neighbour_the_forest_ranked_first(self):
        class Recording(DefaultSearch):
            """Records, at each local ask after a fit, the untried neighbours of the best config by
            the forest's last ranking, and the picks."""

            def _neighbours_of_best(self, count):
                space = self.context.space
                if self._model is None or not any(t.ok for t in self._here):
                    return super()._neighbours_of_best(count)
                best = min((t for t in self._here if t.ok), key=lambda t: t.time_ms)
                rank = {index: position for position, index in enumerate(self._scored)}
                around = map(space.position, space.neighbours(best.config))
                untried = [i for i in around if not self._tried[i]]
                picks = super()._neighbours_of_best(count)
                self.asks.append((sorted(untried, key=lambda i: rank.get(i, len(rank))),
                                  [space.position(c) for c in picks]))
                return picks

        space = toy_space()
        for order in ("forest", "random"):
            ranked_first = []
            for seed in range(3):
                strategy = Recording(initial=5, local_fraction=0.5, min_evals=10**6, local_order=order)
                strategy.asks = []
                drive(strategy, space, evals=30, seed=seed, batch=1)
                # where a neighbour was open (else the local proposal widens its step)
                ranked_first += [picks[0] == untried[0]
                                 for untried, picks in strategy.asks if untried and picks]
            assert len(ranked_first) > 10, order
            assert all(ranked_first) if order == "forest" else not all(ranked_first)

    def test_an_unknown_local_order_is_refused_by_name(self):
        with pytest.raises(ValueError, match="local_order='best'.*'random', 'forest'"):
            drive(DefaultSearch(local_order="best"), toy_space(), evals=2)


@pytest.mark.parametrize("name", ["default", "lfbo", "optuna", "optuna-gp"])
def test_searches_a_domain_that_lists_none(name):
    """A config without ``maxnreg`` (None, which ``Space(maxnreg=[None, 128])`` lists) is searched
    like any other: ``lfbo``'s start and ``default``'s widened step read its position in the
    domain, the Optuna strategies (and ``default``'s GP) its parameters, and each raised KeyError
    on such a Space before."""
    space = Space(**toy_space().domains, maxnreg=[None, 128], constraints=toy_space().constraints)
    strategy = (DefaultSearch(initial=5, local_fraction=1.0, local_radius=2, min_evals=10**6)
                if name == "default" else make_strategy(name))
    found = drive(strategy, space, evals=60, seed=0, batch=1)
    assert len({config_json(c) for c in found}) == 60
    assert {config_to_dict(c).get("maxnreg") for c in found} == {None, 128}


def test_the_gps_candidates_are_each_configs_own_parameters():
    """The GP's candidates are looked up from the domains' values by the configs' positions: each
    must be what ``_optuna_params`` makes of the config itself (an exponent for a domain of powers
    of two, listed out of order here; the value for the others; None where the config lists None
    or lacks the parameter). Values equal to their domain's but of another type (64.0 for 64, in
    a Space of listed configs) are given as the domain lists them, as the docstring says."""
    from tunekit.budget import Budget
    from tunekit.strategy import SearchContext

    space = Space(BLOCK=[64, 16, 32], GROUP=[3, 1], layout=["row", "col"], maxnreg=[None, 128])
    strategy = make_strategy("optuna-gp")
    strategy.start(SearchContext(space, Budget(evals=10), TOY_KEY, 0, ()))
    looked_up = strategy._params_of_every_config()
    own = [strategy._optuna_params(config) for config in space.configs()]
    assert looked_up == own and len(own) == len(space)
    assert [type(value) for params in looked_up for value in params.values()] == [
        type(value) for params in own for value in params.values()]
    assert {params["BLOCK"] for params in looked_up} == {4, 5, 6} and {params["maxnreg"] for params in own} == {None, 128}
    # a Space of listed configs, one without ``layout``: None there, as the config's own gives
    from tunekit.config import Config

    listed = Space.from_configs([Config({"BLOCK": 64, "layout": "row"}), Config({"BLOCK": 32, "layout": "col"}),
                                 Config({"BLOCK": 16})])
    strategy = make_strategy("optuna-gp")
    strategy.start(SearchContext(listed, Budget(evals=10), TOY_KEY, 0, ()))
    looked_up = strategy._params_of_every_config()
    assert looked_up == [strategy._optuna_params(config) for config in listed.configs()]
    assert [params["layout"] for params in looked_up] == ["row", "col", None]


class TestDefaultSearchWideningItsStep(StrategyConformance):
    """``local_radius``: at a local optimum (every neighbour tried) the local proposals move two
    or more steps away."""

    def make_strategy(self):
        return DefaultSearch(initial=5, min_evals=10**6, local_radius=2)

    def test_once_the_neighbours_are_tried_local_proposals_are_two_steps_from_the_best(self):
        from tunekit.testing.strategies import toy_trial

        space = toy_space()

        def steps(a, b):
            a, b = config_to_dict(a), config_to_dict(b)
            return sum(abs(domain.index(a[name]) - domain.index(b[name])) for name, domain in space.domains.items())

        widened = 0
        for seed in range(3):
            found = drive(DefaultSearch(initial=5, local_fraction=1.0, local_radius=2, min_evals=10**6), space,
                          evals=40, seed=seed, batch=1)
            for position in range(5, len(found)):
                tried = {config_json(c) for c in found[:position]}
                best = min((c for c in found[:position] if toy_trial(c).ok), key=lambda c: toy_trial(c).time_ms)
                if any(config_json(n) not in tried for n in space.neighbours(best)):
                    continue  # the neighbours come first (the test of local_best covers them)
                two_steps = [c for c in space.configs() if config_json(c) not in tried and steps(c, best) == 2
                             and toy_trial(c).ok]
                if two_steps:
                    widened += 1
                    assert steps(found[position], best) == 2
        assert widened > 0

    def test_a_radius_under_one_is_refused(self):
        with pytest.raises(ValueError, match="local_radius=0"):
            drive(DefaultSearch(local_radius=0), toy_space(), evals=2)


class TestDefaultSearchInterleavingRandomConfigs(StrategyConformance):
    """``random_fraction``: a share of the turns after the start go to untried configs at random,
    where the local proposals' share does not take them."""

    def make_strategy(self):
        return DefaultSearch(initial=5, min_evals=10**6, random_fraction=0.25)

    def test_the_share_of_random_proposals_is_the_fraction(self):
        drawn = []

        class Recording(DefaultSearch):
            def _random_untried(self, count):
                found = super()._random_untried(count)
                drawn.extend(found)
                return found

        found = drive(Recording(initial=5, min_evals=10**6, random_fraction=0.25, local_fraction=0.0), toy_space(),
                      evals=45, seed=1, batch=1)
        assert len(found) == 45 and len(drawn) == 40 // 4  # a quarter of the 40 proposals after the start
        assert len({config_json(c) for c in found}) == 45  # never one tried before

    @pytest.mark.parametrize("batch", [1, 8])
    @pytest.mark.parametrize("neighbours_open", [True, False])
    def test_a_turn_due_to_both_shares_is_local_at_any_batch_size(self, batch, neighbours_open):
        """At the default shares every random turn (a tenth) is a local turn (a fifth); it goes to
        the local proposals, and to a random config only where no neighbour is open. GPU
        tunings, which keep several configs in flight, drew their tenth at random besides the
        local fifth, which no replay (asking one at a time) measured."""
        asked = {"local": 0, "random": 0}

        class Counting(DefaultSearch):
            def _neighbours_of_best(self, count):
                asked["local"] += count
                return self._take(np.flatnonzero(~self._tried)[:count]) if neighbours_open else []

            def _random_untried(self, count):
                asked["random"] += count
                return super()._random_untried(count)

        found = drive(Counting(initial=5, min_evals=10**6, local_fraction=0.2, random_fraction=0.1), toy_space(),
                      evals=45, seed=1, batch=batch)
        assert len(found) == 45
        assert asked["local"] == 9 - 1  # due on turns 4, 9, ..., 44: those after the start (5 configs)
        assert asked["random"] == (0 if neighbours_open else 4)  # turns 9, 19, 29 and 39

    @pytest.mark.parametrize("option", ["local_fraction", "random_fraction"])
    def test_a_share_outside_0_to_1_is_refused(self, option):
        with pytest.raises(ValueError, match=f"{option}=1.5"):
            drive(DefaultSearch(**{option: 1.5}), toy_space(), evals=2)

    def test_without_the_fraction_nothing_is_drawn_at_random(self):
        class Refusing(DefaultSearch):
            def _random_untried(self, count):
                assert count == 0
                return []

        assert len(drive(Refusing(initial=5, min_evals=10**6, random_fraction=0.0), toy_space(), evals=30,
                         batch=1)) == 30


class TestBeliever:
    """``DefaultSearch(believer=True)``: each forest pick is made after a refit told the configs
    pending (asked for, not told yet: those in flight, and the ask's earlier picks) at their
    predicted times."""

    @staticmethod
    def forest_only(**options):
        return dict(initial=5, min_evals=10**6, local_fraction=0.0, random_fraction=0.0, gp_fraction=0.0,
                    stalled_gp_fraction=None, **options)

    def test_asked_one_config_at_a_time_it_changes_nothing(self):
        for seed in (0, 1):
            assert drive(DefaultSearch(initial=5, believer=True), toy_space(), evals=40, seed=seed, batch=1) == \
                drive(DefaultSearch(initial=5, believer=False), toy_space(), evals=40, seed=seed, batch=1)

    def test_its_picks_do_not_change_where_numpy_maths_differs_in_the_last_bit(self, monkeypatch):
        """NumPy's float64 ``exp`` and ``log`` on CPUs with AVX-512 (Intel's SVML) may differ
        from the C library's in the last bits. Injected: ``np.exp``, ``np.log``, ``np.log2`` and
        ``np.exp2`` one ulp off, up or down by the last bit of each input (as a function of the
        input, as another CPU's would be). Survives: the believer's picks with 8 in flight, for 3
        seeds (with its made-up times from ``np.exp``, every seed's picks changed)."""
        exact = {seed: drive(DefaultSearch(initial=5), toy_space(), evals=40, seed=seed, batch=8) for seed in range(3)}

        def off_by_one_ulp(function):
            def nudged(x, *args, **kwargs):
                odd = np.asarray(x, dtype=np.float64).view(np.int64) & 1
                return np.nextafter(function(x, *args, **kwargs), np.where(odd, np.inf, -np.inf))
            return nudged

        for name in ("exp", "log", "log2", "exp2"):
            monkeypatch.setattr(np, name, off_by_one_ulp(getattr(np, name)))
        for seed, found in exact.items():
            assert drive(DefaultSearch(initial=5), toy_space(), evals=40, seed=seed, batch=8) == found

    def test_a_made_up_time_past_floats_range_is_infinite_not_an_error(self):
        """``math.exp`` raises where ``np.exp`` gave ``inf``; the believer leaves an infinite
        made-up time out, so past float's range ``made_up_time`` must say ``inf``."""
        from tunekit.strategies.default import made_up_time

        assert made_up_time(1e4) == math.inf
        assert made_up_time(math.log(2.5)) == pytest.approx(2.5, rel=1e-15)
        assert math.isnan(made_up_time(math.nan))

    @pytest.mark.parametrize("believer", [True, False])
    def test_each_forest_pick_refits_told_the_configs_in_flight(self, believer):
        """8 in flight, 5 to start: nothing is proposed while the start's configs are pending;
        then an ask of 8, each forest pick after a refit told the ask's earlier picks, then one
        pick per trial told, each after a refit told the 7 configs in flight (those asked after the
        last trial told), at their predicted times; without the believer, none."""
        fits = []  # per fit: this tuning's trials, and the pending picks it was told

        class Recording(DefaultSearch):
            def _fit(self):
                fits.append((len(self._here), [(t.config, t.time_ms) for t in self._lies]))
                super()._fit()

        strategy = Recording(**self.forest_only(believer=believer))
        found = drive(strategy, toy_space(), evals=16, batch=8)
        assert len(found) == 16 and len(strategy._here) == 16  # the believed times never became trials
        if not believer:
            assert fits == [(5, []), (6, []), (7, []), (8, [])]  # a refit per trial: 10 % growth
            return
        assert [(here, len(lies)) for here, lies in fits] == [(5, n) for n in range(8)] + [(6, 7), (7, 7), (8, 7)]
        assert [config for config, _ in fits[7][1]] == found[5:12]
        for here, lies in fits[8:]:
            assert sorted(config_json(c) for c, _ in lies) == sorted(config_json(c) for c in found[here:here + 7])
        assert all(0 < time < float("inf") for _, lies in fits for _, time in lies)

    @pytest.mark.parametrize("with_store", [False, True])
    def test_every_pending_pick_is_told_at_the_forest_s_predicted_time(self, with_store):
        """With local, random and GP turns on, and with the store (the prior's branch of the
        training trials) or without, 16 in flight: each refit trains on every config pending (in
        flight, and its ask's earlier picks: the forest's, the neighbours', the GP's), each at the
        time the forest predicted for it then, but the tuning's first fit, before which no forest
        predicts (the configs pending then are not told to it)."""
        from tunekit.testing.strategies import toy_trial

        told, predicted = [], []

        class Recording(DefaultSearch):
            def _believe_pending(self):
                before = len(self._lies)
                super()._believe_pending()
                for lie in self._lies[before:]:
                    index = self.context.space.index(lie.config)
                    features = self._model.features_of_encoded(self._encoded[[index]], self.context.key)
                    predicted.append((lie.time_ms, float(np.exp(self._model.per_tree_log(features).mean()))))

            def _fit(self):
                picked = [self._configs[i] for i in np.flatnonzero(self._pending())]
                training = [t.config for t in self._training_trials()]
                told.append((len(picked), self._model is None, all(config in training for config in picked)))
                super()._fit()

        history = history_at_another_key(toy_space().configs()[:12]) if with_store else ()
        strategy = Recording(initial=5, min_evals=10**6, gp_fraction=0.5)
        found = run_at_a_new_key(strategy, history, toy_trial, 5 + 16 + 16, batch=16)
        assert len(found) == 37
        assert predicted and all(time == pytest.approx(expected) for time, expected in predicted)
        assert told[0][0] > 0 and told[0][1]  # the first fit: configs pending, no forest to predict them
        assert all(seen for _, first, seen in told[1:]) and not any(first for _, first, _ in told[1:])
        assert max(pending for pending, _, _ in told) >= 10
        assert strategy._gp is not None  # the GP had turns, whose picks were told too

    @pytest.mark.parametrize("with_store", [False, True])
    def test_with_configs_in_flight_the_start_s_trials_come_before_any_other_pick(self, with_store):
        """8 in flight: nothing but the start is proposed until the start's trials are all told,
        the space-filling design's (5 configs) or, with the store, the warm start's (3 of the
        prior's best and 3 of the design, in turn); then the ask of 8 that follows is made knowing
        them, as one at a time. Before, the picks after the start were made while it was pending."""
        from tunekit.testing.strategies import toy_trial

        start = 6 if with_store else 5
        asked = []  # (trials told, configs proposed) per ask that proposed something

        class Recording(DefaultSearch):
            def ask(self, n):
                picks = super().ask(n)
                if picks:
                    asked.append((len(self._here), len(picks)))
                return picks

        history = history_at_another_key(toy_space().configs()[:12]) if with_store else ()
        found = run_at_a_new_key(Recording(initial=5, min_evals=10**6), history, toy_trial, 30, batch=8)
        assert len(found) == 30
        assert asked[0] == (0, start) and asked[1] == (start, 8)

    @pytest.mark.parametrize("with_store", [False, True])
    def test_the_start_goes_on_without_the_trials_the_tuning_says_are_late(self, with_store):
        """Injected: the first two of the start's configs (the space-filling design's 5, or the
        warm start's 6 with the store) held back while the others are told, as compiles held
        until the compile timeout are. Survives: the ask proposes nothing until the tuning says
        the configs pending are late (``overdue``), then 8 untried configs ranked by the forest
        (the start is over: no random start's picks), the late ones still pending; once one of
        those 8 is told, the next ask proposes one more (the wait is for the start's own
        configs alone)."""
        from dataclasses import replace

        from tunekit.budget import Budget
        from tunekit.strategy import SearchContext
        from tunekit.testing.strategies import toy_trial

        def trials(configs):
            return [replace(toy_trial(config), key=TOY_KEY) for config in configs]

        history = history_at_another_key(toy_space().configs()[:12]) if with_store else ()
        strategy = DefaultSearch(initial=5, min_evals=10**6)
        strategy.start(SearchContext(toy_space(), Budget(evals=40), TOY_KEY, 0, history))
        start = strategy.ask(8)
        assert len(start) == (6 if with_store else 5)
        strategy.tell(trials(start[2:]))
        assert strategy.ask(8) == []
        strategy.overdue()
        picks = strategy.ask(8)
        assert len(picks) == 8 and not any(config in start for config in picks)
        assert strategy._model is not None and not strategy._in_start()
        assert strategy._pending().sum() == 10 and not strategy._awaited().any()
        strategy.tell(trials(picks[:1]))
        assert len(strategy.ask(1)) == 1

    @pytest.mark.parametrize("design", ["maximin", "random"])
    @pytest.mark.parametrize("batch", [1, 4])
    def test_a_config_listed_twice_is_pending_only_until_told(self, design, batch):
        """A config list with 12 configs listed twice (``Space.from_configs`` keeps repeats): a
        copy proposed is told under its config's position, and is no longer pending then; before,
        it stayed pending, the start counted it as a turn and proposed nothing more, and the
        tuning ended after 8 or 9 evaluations of 40."""
        import triton

        base = toy_space().configs()
        space = Space.from_configs(list(base) + [triton.Config(dict(c.kwargs), num_warps=c.num_warps,
                                                               num_stages=c.num_stages) for c in base[:12]])
        for seed in range(4):
            strategy = DefaultSearch(initial_design=design)
            assert len(drive(strategy, space, evals=40, seed=seed, batch=batch)) == 40
            assert not strategy._pending().any()

    def test_a_believer_that_is_not_a_bool_is_refused(self):
        with pytest.raises(ValueError, match="believer='yes'"):
            drive(DefaultSearch(believer="yes"), toy_space(), evals=2)


class TestGpPending:
    """``OptunaSearch.hold`` and ``DefaultSearch(gp_pending=True)``: the GP takes the configs the
    other proposers have pending as running trials of its study, which Optuna's GP sampler scores
    its candidates against (its documented handling of running trials)."""

    @staticmethod
    def running(search: OptunaSearch) -> list[dict]:
        from optuna.trial import TrialState

        return [t.params for t in search._study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))]

    @staticmethod
    def started(**options) -> OptunaSearch:
        from tunekit.budget import Budget
        from tunekit.strategy import SearchContext

        search = OptunaSearch(sampler="gp", warm_start=0, **options)
        search.start(SearchContext(toy_space(), Budget(evals=50), TOY_KEY, 0))
        return search

    def test_held_configs_run_in_the_study_until_told_and_are_never_proposed(self):
        from tunekit.testing.strategies import toy_trial

        search = self.started(n_startup_trials=2)
        configs = toy_space().configs()
        search.tell([toy_trial(c) for c in configs[:4]])
        held = configs[4:7]
        search.hold(held)
        search.hold(held[:1])  # held already: no second running trial
        assert sorted(map(str, self.running(search))) == sorted(str(search._optuna_params(c)) for c in held)
        proposed = search.ask(len(configs) - 7)
        assert proposed and not {config_json(c) for c in proposed} & {config_json(c) for c in held}
        running = sorted(map(str, self.running(search)))
        search.hold(proposed[:2])  # the sampler's own pending draws: running already
        assert sorted(map(str, self.running(search))) == running
        search.tell([toy_trial(held[0])])
        trial = next(t for t in search._study.get_trials(deepcopy=False) if t.params == search._optuna_params(held[0]))
        assert trial.value == pytest.approx(math.log(toy_trial(held[0]).time_ms))
        assert sorted(map(str, self.running(search))) == sorted(str(search._optuna_params(c))
                                                               for c in [*held[1:], *proposed])

    def test_a_held_config_told_as_a_failure_completes_and_a_told_config_is_not_held_again(self):
        from tunekit.testing.strategies import toy_trial
        from tunekit.trial import Status, Trial

        search = self.started()
        configs = toy_space().configs()
        search.tell([toy_trial(configs[0])])
        search.hold(configs[1:3])
        search.tell([Trial(configs[1], Status.RUNTIME_ERROR, error="injected")])
        failed = next(t for t in search._study.get_trials(deepcopy=False) if t.params == search._optuna_params(configs[1]))
        assert failed.value == pytest.approx(math.log(toy_trial(configs[0]).time_ms) + math.log(2))  # twice the slowest
        search.hold(configs[:2])  # both told: neither runs again
        assert self.running(search) == [search._optuna_params(configs[2])]

    def test_a_config_told_without_being_proposed_is_never_proposed(self):
        """A config another proposer measured, told to the sampler, is not proposed again."""
        from tunekit.testing.strategies import toy_trial

        search = self.started(n_startup_trials=2)
        configs = toy_space().configs()
        search.tell([toy_trial(c) for c in configs[:6]])  # none of them drawn by the sampler
        proposed = search.ask(len(configs))
        assert len(proposed) == len(configs) - 6
        assert not {config_json(c) for c in proposed} & {config_json(c) for c in configs[:6]}

    def test_a_config_not_of_the_space_is_refused_and_nothing_is_held(self):
        import triton

        search = self.started()
        stranger = triton.Config({"BLOCK_M": 48, "BLOCK_N": 48}, num_warps=4, num_stages=2)
        with pytest.raises(ValueError, match="not a config of the Space"):
            search.hold([toy_space().configs()[0], stranger])
        assert self.running(search) == [] and not search._proposed.any()

    def test_every_gp_turn_in_flight_has_every_pending_config_running(self):
        """8 in flight, GP share 0.5: at each GP turn after the start, the configs pending in the
        search (the forest's, the neighbours', the random and the GP's own) are exactly the GP
        study's running trials; without ``gp_pending`` only the GP's own are."""
        for gp_pending in (True, False):
            checks = []

            class Recording(DefaultSearch):
                def _gp_picks(self, turns):
                    picks = super()._gp_picks(turns)
                    if self._gp is not None:
                        pending = sorted(str(self._gp._optuna_params(self._configs[i]))
                                         for i in np.flatnonzero(self._pending()))
                        running = sorted(map(str, TestGpPending.running(self._gp)))
                        checks.append((pending, running))
                    return picks

            found = drive(Recording(initial=5, min_evals=10**6, gp_fraction=0.5, gp_pending=gp_pending),
                          toy_space(), evals=40, batch=8)
            assert len(found) == 40 and len(checks) >= 5
            if gp_pending:
                assert all(pending == running for pending, running in checks)
            else:
                assert all(len(running) < len(pending) for pending, running in checks)

    def test_asked_one_config_at_a_time_gp_pending_changes_nothing(self):
        for seed in (0, 1):
            assert drive(DefaultSearch(initial=5, gp_fraction=0.5, gp_pending=True), toy_space(), evals=40,
                         seed=seed, batch=1) == \
                drive(DefaultSearch(initial=5, gp_fraction=0.5), toy_space(), evals=40, seed=seed, batch=1)

    def test_a_gp_pending_that_is_not_a_bool_is_refused(self):
        with pytest.raises(ValueError, match="gp_pending=1"):
            drive(DefaultSearch(gp_pending=1), toy_space(), evals=2)


@pytest.mark.parametrize("refit_trees", [None, 8])
def test_predictions_kept_per_tree_propose_what_predicting_afresh_proposes(refit_trees):
    """A forest search keeps each tree's predictions over the Space between refits; a search that
    predicts every config with every tree at each fit must propose the same configs."""

    class Afresh(DefaultSearch):
        def _whole_space_predictions(self):
            features = self._model.features_of_encoded(self._encoded, self.context.key)
            return features, self._model.per_tree_log(features)

    for seed in range(3):
        kept = drive(DefaultSearch(initial=5, min_evals=10**6, refit_trees=refit_trees), toy_space(), 40, seed, 1)
        afresh = drive(Afresh(initial=5, min_evals=10**6, refit_trees=refit_trees), toy_space(), 40, seed, 1)
        assert [config_json(c) for c in kept] == [config_json(c) for c in afresh]


def test_refit_trees_applies_only_after_refit_trees_after_evaluations(monkeypatch):
    """Until ``refit_trees_after`` evaluations every refit fits the whole forest; from then on a
    refit replaces ``refit_trees`` trees (``RandomForest.refreshed``)."""
    from tunekit.perfmodels import RandomForest

    refreshed_at = []
    original = RandomForest.refreshed

    def recording(self, trials, *args, **kwargs):
        refreshed_at.append(len(trials))  # the tuning's trials: the store holds none here
        return original(self, trials, *args, **kwargs)

    monkeypatch.setattr(RandomForest, "refreshed", recording)
    drive(DefaultSearch(initial=5, min_evals=10**6, refit_trees=4, refit_trees_after=20), toy_space(), 35, 0, 1)
    assert refreshed_at and min(refreshed_at) >= 20 and max(refreshed_at) < 35


@pytest.mark.parametrize("alignment", [True, False])
def test_alignment_reaches_every_forest_a_default_search_fits(monkeypatch, alignment):
    """``DefaultSearch(alignment=...)`` is what each of its forests is made with, the store's
    prior, whole fits and refreshed ones (after ``refit_trees_after``) alike, and the features
    then hold the alignment column of ``BLOCK`` (16, 32, 48, 64) or not."""
    from tunekit.config import config_to_dict
    from tunekit.perfmodels import RandomForest
    from tunekit.trial import Status, Timing, Trial

    made_with = []
    original = RandomForest.fit

    def recording(self, *args, **kwargs):
        fitted = original(self, *args, **kwargs)
        made_with.append((self.alignment, fitted.regressor_.n_features_in_))
        return fitted

    def trial_of(config):
        flat = config_to_dict(config)
        time_ms = 1.0 + (flat["BLOCK"] % 64 != 0) + 0.1 * flat["num_warps"] + 0.01 * flat["num_stages"]
        return Trial(config, Status.OK, Timing(time_ms, time_ms, time_ms))

    monkeypatch.setattr(RandomForest, "fit", recording)
    space = tunekit.Space(BLOCK=[16, 32, 48, 64], num_warps=[1, 2, 4, 8], num_stages=[1, 2, 3])
    search = DefaultSearch(initial=5, min_evals=10**6, refit_trees=4, refit_trees_after=20, alignment=alignment,
                           gp_fraction=0.0, stalled_gp_fraction=None)  # the forest's turns all: a fit at each
    run_at_a_new_key(search, history_at_another_key(space.configs()), trial_of, 30, space=space, batch=1)
    # the encoding's 3 columns, BLOCK's alignment, the key's M (and the prior's prediction, but in the prior)
    widths = {3 + alignment + 1, 3 + alignment + 1 + 1}
    assert len(made_with) >= 20 and {a for a, _ in made_with} == {alignment}
    assert {width for _, width in made_with} == widths


def test_alignment_is_defaults_and_not_rfs_and_must_be_a_bool():
    from tunekit.budget import Budget
    from tunekit.strategy import SearchContext

    assert DefaultSearch().alignment is True and ForestSearch().alignment is False
    with pytest.raises(ValueError, match="alignment"):
        DefaultSearch(alignment="false").start(SearchContext(toy_space(), Budget(evals=5), TOY_KEY, 0))


class TestDefaultSearch(StrategyConformance):
    def make_strategy(self):
        return DefaultSearch(initial=5, min_evals=10**6)  # the conformance suite expects no early stop

    def test_learns_the_toy_optimum_sooner_than_random(self):
        default = sorted(evaluations_to_optimum(DefaultSearch(initial=5, min_evals=10**6), s) for s in range(7))
        rnd = sorted(evaluations_to_optimum(RandomSearch(), s) for s in range(7))
        assert default[3] < rnd[3]

    def test_stops_early_once_nothing_better_is_expected_but_not_before_min_evals(self):
        from tunekit.testing.strategies import toy_time

        for seed in range(3):
            found = drive(DefaultSearch(initial=5, min_evals=12, patience=5), toy_space(), evals=10**6, seed=seed,
                          batch=1)
            assert 12 <= len(found) < len(toy_space())  # 59 valid configs
            assert min(toy_time(c) for c in found) == 1.0  # it stopped after finding the optimum


    def test_the_kept_mean_and_spread_are_the_trees_over_the_ranked_configs(self):
        """The early stop reads the mean and spread over the trees that the last fit ranked by:
        they must be those of the configs in ``_scored``'s order, as the model predicts them afresh."""
        from tunekit.testing.strategies import toy_trial

        space = toy_space()
        strategy = DefaultSearch(initial=5, min_evals=10**6)
        strategy.start(tunekit.strategy.SearchContext(space, tunekit.Budget(evals=30), TOY_KEY, 1))
        for _ in range(12):
            strategy.tell([toy_trial(c) for c in strategy.ask(1)])
        assert strategy._model is not None and len(strategy._scored)
        features = strategy._model.features_of_encoded(strategy._encoded[strategy._scored], TOY_KEY)
        per_tree = strategy._model.per_tree_log(features)
        assert np.allclose(strategy._mean_log, per_tree.mean(axis=0), rtol=0, atol=1e-12)
        assert np.allclose(strategy._spread_log, per_tree.std(axis=0), rtol=0, atol=1e-12)
        # to the bit, as the search computed them before they were kept: over the ranked configs'
        # columns of the whole Space's predictions (numpy sums another memory order differently)
        columns = strategy._whole_space_predictions()[1][:, strategy._scored]
        assert np.array_equal(strategy._mean_log, columns.mean(axis=0))
        assert np.array_equal(strategy._spread_log, columns.std(axis=0))

    def test_expected_improvement_is_that_of_a_normal(self):
        """Written out for speed, it must equal the textbook form with scipy.stats.norm."""
        from scipy.stats import norm

        from tunekit.strategies.default import expected_improvement

        rng = np.random.default_rng(0)
        mean, spread = rng.normal(size=1000), np.abs(rng.normal(size=1000))
        spread[:10] = 0.0
        z = (0.3 - mean) / np.maximum(spread, 1e-12)
        textbook = (0.3 - mean) * norm.cdf(z) + np.maximum(spread, 1e-12) * norm.pdf(z)
        assert np.array_equal(expected_improvement(mean, spread, 0.3), textbook)

    def test_a_wider_step_moves_through_values_by_size_not_as_listed(self):
        """From A=1 (values listed 4, 1, 2, 8), two steps are A=4 or one step in each of A and B;
        in the listed order they would be A=8, A=4 with B=2, and A=2 with B=2."""
        from triton import Config

        space = tunekit.Space.from_configs([Config({"A": a, "B": b}) for a in (4, 1, 2, 8) for b in (1, 2)])
        strategy = DefaultSearch(initial=5, local_radius=2)
        strategy.start(tunekit.strategy.SearchContext(space, tunekit.Budget(evals=8), TOY_KEY, 0))
        centre = space.index(Config({"A": 1, "B": 1}))
        found = {(config_to_dict(space.configs()[i])["A"], config_to_dict(space.configs()[i])["B"])
                 for i in strategy._fewest_steps_away([centre])}
        assert found == {(4, 1), (2, 2)}

    def test_starts_spread_over_the_space(self):
        """The first ``initial`` configs are a greedy maximin design: each is an untried config
        farthest (L1 over the encoding scaled to [0, 1]) from those before it, so the start covers
        every parameter's range."""
        space = toy_space()
        encoded = space.encode(space.configs())
        scaled = (encoded - encoded.min(axis=0)) / np.ptp(encoded, axis=0)
        index = {config_json(c): i for i, c in enumerate(space.configs())}
        for seed in range(3):
            start = [index[config_json(c)] for c in drive(DefaultSearch(initial=6), space, evals=6, seed=seed, batch=1)]
            for position in range(1, 6):
                nearest = np.abs(scaled[:, None, :] - scaled[start[:position]][None]).sum(axis=2).min(axis=1)
                nearest[start[:position]] = -1
                assert nearest[start[position]] == nearest.max()

    def test_configs_likely_to_fail_rank_last(self):
        """Injected: 128x128 tiles fail (toy_trial). Once the failure forest has seen some fail,
        a config it gives more than ``failure_threshold`` chance of failing is proposed only after
        every other config: fewer failures after the start than random search tries."""
        from tunekit.testing.strategies import toy_trial

        def failures_after_start(strategy, seed):
            tried = drive(strategy, toy_space(), evals=40, seed=seed, batch=1)[10:]
            return sum(not toy_trial(c).ok for c in tried)

        default = sum(failures_after_start(DefaultSearch(initial=10, min_evals=10**6), s) for s in range(5))
        random = sum(failures_after_start(RandomSearch(), s) for s in range(5))
        assert default < random / 2, (default, random)


def history_at_another_key(configs) -> tuple:
    """Trials of ``configs`` stored at key M=2, the first the fastest."""
    from tunekit.trial import Status, Timing, Trial

    return tuple(Trial(c, Status.OK, Timing(t, t, t), key=TuningKey.from_json('{"args": {"M": 2}, "dtypes": []}'))
                 for t, c in enumerate(configs, 1))


@pytest.mark.parametrize("strategy", [OptunaSearch(warm_start=3), ForestSearch(), DefaultSearch()])
def test_learned_strategies_start_from_other_keys_in_the_store(strategy):
    """With the store holding another key's trials, the first proposal is informed by them:
    optuna enqueues that key's best configs; the forests rank by a model fit on them."""
    from tunekit.budget import Budget
    from tunekit.strategy import SearchContext
    from tunekit.testing.strategies import toy_time

    space = toy_space()
    ranked = sorted((c for c in space.configs()), key=toy_time)
    strategy.start(SearchContext(space, Budget(evals=10), TOY_KEY, 0,
                                 history_at_another_key(ranked)))
    first = strategy.ask(3)
    assert toy_time(first[0]) <= toy_time(ranked[2])  # among the three best of the other key


def test_unknown_optuna_sampler_is_refused():
    strategy = OptunaSearch(sampler="annealing")
    with pytest.raises(ValueError, match="Unknown Optuna sampler 'annealing'. Valid samplers: tpe"):
        drive(strategy, toy_space(), evals=2)


def test_registry_lists_the_built_in_strategies():
    assert {"exhaustive", "random", "optuna"} <= set(available())


def test_unknown_strategy_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"Unknown strategy 'tpe'. Valid strategies: .*exhaustive.*random"):
        make_strategy("tpe")


def test_register_strategy_by_name():
    class Reverse(Exhaustive):
        name = "reverse"

        def ask(self, n):
            configs = self.context.space.configs()[::-1]
            batch = configs[self._next : self._next + n]
            self._next += len(batch)
            return batch

    tunekit.register_strategy("reverse", Reverse)
    assert "reverse" in available()
    assert isinstance(make_strategy("reverse"), Reverse)
    with pytest.raises(TypeError):
        tunekit.register_strategy("bad", object)


def test_entry_point_plugin_is_discovered(tmp_path, monkeypatch):
    """A third-party package that declares an entry point in group tunekit.strategies."""
    package = tmp_path / "my_plugin.py"
    package.write_text(textwrap.dedent("""
        from tunekit.strategies import Exhaustive
        class PluginStrategy(Exhaustive):
            name = "from_plugin"
    """))
    dist = tmp_path / "my_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[tunekit.strategies]\nfrom_plugin = my_plugin:PluginStrategy\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "from_plugin" in available()
    assert type(make_strategy("from_plugin")).__name__ == "PluginStrategy"
    sys.modules.pop("my_plugin", None)


@pytest.mark.slow  # 37 s on 2 cores
def test_default_trusts_other_keys_only_as_far_as_this_keys_trials_agree():
    """The store holds another key whose ranking is the reverse of this key's (the toy optimum is
    that key's slowest config). ``default`` proposes that key's best configs first, then learns
    from this key's trials with the other key's prediction as a feature: it finds the optimum
    sooner than random search and than ``rf`` (one forest fit on both keys' trials, where the
    other key's 59 trials outvote this key's few), in the median of 7 seeds."""
    from tunekit.budget import Budget
    from tunekit.search import run_search
    from tunekit.strategy import SearchContext
    from tunekit.testing.strategies import toy_time, toy_trial
    from tunekit.deadline import SimulatedClock

    space = toy_space()
    reversed_history = history_at_another_key(sorted(space.configs(), key=toy_time, reverse=True))

    def evaluations_to_optimum(strategy, seed):
        def evaluate(configs, deadline):
            for config in configs:
                yield config, toy_trial(config)

        context = SearchContext(space, Budget(evals=len(space)), TOY_KEY, seed,
                                reversed_history)
        steps = run_search(strategy, context, evaluate, clock=SimulatedClock()).steps
        return next(i for i, step in enumerate(steps, 1) if toy_time(step.trial.config) == 1.0)

    default = sorted(evaluations_to_optimum(DefaultSearch(min_evals=10**6), s) for s in range(7))
    forest = sorted(evaluations_to_optimum(ForestSearch(), s) for s in range(7))
    rnd = sorted(evaluations_to_optimum(RandomSearch(), s) for s in range(7))
    assert default[3] < forest[3] and default[3] < rnd[3], (default, forest, rnd)


def test_optuna_gp_is_a_registered_strategy_that_survives_failures():
    """``optuna-gp`` is Optuna's GP sampler by name. Injected: the toy's 128x128 tiles fail.
    Survives: after the GP has been told failures, it still proposes configs to the budget's end."""
    from tunekit.testing.strategies import toy_trial

    strategy = make_strategy("optuna-gp")
    assert strategy.sampler == "gp"
    found = drive(strategy, toy_space(), evals=40, batch=1)
    failures = [i for i, c in enumerate(found) if not toy_trial(c).ok]
    assert len(found) == 40 and failures and failures[0] < 39


def test_the_gp_fits_with_the_callers_torch_function_modes_off():
    """Optuna fits its GP under ``torch.device("cpu")``, a ``TorchFunctionMode`` that every torch call
    of the fit passed through in Python; tunekit's GP sampler turns torch function overrides off
    for the fit (the time it saves: experiments/results/strategy-time/). A mode of the caller's
    sees none of the GP's calls (but the making of Optuna's ``torch.device``). Under another default
    device its tensors must stay on the CPU: with the overrides off, Optuna's ``torch.device("cpu")``
    no longer acts, and this holds only while torch keeps its default device in such a mode (as
    2.11 to 2.13 do; it passes without the change too)."""
    import torch
    from torch.overrides import TorchFunctionMode

    class Counting(TorchFunctionMode):
        calls = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            Counting.calls += func is not torch.device
            return func(*args, **(kwargs or {}))

    with Counting():
        found = drive(make_strategy("optuna-gp", n_startup_trials=3), toy_space(), evals=12, batch=1)
    assert len(found) == 12 and Counting.calls == 0
    torch.set_default_device("meta")
    try:
        assert len(drive(make_strategy("optuna-gp", n_startup_trials=3), toy_space(), evals=12, batch=1)) == 12
    finally:
        torch.set_default_device(None)


@pytest.fixture
def kernel_fits(monkeypatch) -> list:
    """The trials each of Optuna's kernel fits ran on (Optuna's ``GPRegressor._fit_kernel_params``,
    under tunekit's wrapper, which keeps a kernel without calling it), in order."""
    from optuna._gp.gp import GPRegressor

    from tunekit import compat

    compat._wrap_kernel_fit()
    fits = []
    fit = GPRegressor._fit_kernel_params.tunekit_wraps

    def recorded(self, *args, **kwargs):
        fits.append(len(self._y_train))
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(GPRegressor._fit_kernel_params, "tunekit_wraps", recorded)
    return fits


def test_the_gp_keeps_its_kernel_until_the_trials_grow_by_gp_refit_growth(kernel_fits):
    """``gp_refit_growth=0.5``: the GP's kernel is fitted at its first proposal and again only once
    the completed trials grew by half of those of the last fit (at least one), while each proposal's
    posterior takes every trial (with the last fit's kernel in between); None fits at every
    proposal, as Optuna does. A plain Optuna ``GPSampler`` in the same process still fits at every
    proposal after tunekit's wrapper of Optuna's fit is in place."""
    import optuna

    from tunekit import compat
    from tunekit.budget import Budget
    from tunekit.strategies.optuna_tpe import OptunaGPSearch
    from tunekit.strategy import SearchContext
    from tunekit.testing.strategies import toy_trial

    def tune(search, evals: int = 16):
        trained_on = []  # the trials in the GP each proposal's acquisition used
        search.start(SearchContext(toy_space(), Budget(evals=evals), TOY_KEY, 0, ()))
        sampler = search._study.sampler
        for _ in range(evals):
            search.tell([toy_trial(c) for c in search.ask(1)])
            if sampler._gprs_cache_list is not None:
                trained_on.append(len(sampler._gprs_cache_list[0]._y_train))
        return trained_on

    trained_on = tune(OptunaGPSearch(n_startup_trials=3, gp_refit_growth=0.5))
    # 3, then a growth of max(1, 1.5) -> 5, of 2.5 -> 8, of 4 -> 12
    assert kernel_fits == [3, 5, 8, 12], kernel_fits
    assert trained_on == list(range(3, 16)), trained_on
    assert compat._KERNEL_REUSE.get() is None  # nothing asked of the fit outlives a proposal
    kernel_fits.clear()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.GPSampler(seed=0, n_startup_trials=3))
    study.optimize(lambda trial: (trial.suggest_float("x", -1, 1) - 0.3) ** 2, n_trials=8)
    assert kernel_fits == list(range(3, 8))
    kernel_fits.clear()
    assert tune(OptunaGPSearch(n_startup_trials=3)) == list(range(3, 16))
    assert kernel_fits == list(range(3, 16))


def test_a_kept_kernel_is_the_last_fits_and_default_passes_gp_refit_growth_on(kernel_fits, gps_made):
    """Between fits the GP's length scales, scale and noise are those of its last fit, not the
    defaults Optuna falls back to; ``DefaultSearch(gp_refit_growth=...)`` gives its GP the option;
    a growth that is not None or a finite number of at least 0 is refused by name, as is a growth
    for a sampler that fits no kernel."""
    from tunekit.budget import Budget
    from tunekit.strategies.optuna_tpe import OptunaGPSearch
    from tunekit.strategy import SearchContext
    from tunekit.testing.strategies import toy_trial

    search = OptunaGPSearch(n_startup_trials=4, gp_refit_growth=10.0)  # one fit, then its kernel kept
    search.start(SearchContext(toy_space(), Budget(evals=12), TOY_KEY, 0, ()))
    kernels = []
    for _ in range(12):
        search.tell([toy_trial(c) for c in search.ask(1)])
        cached = search._study.sampler._gprs_cache_list
        if cached is not None:
            kernels.append(np.append(cached[0].inverse_squared_lengthscales.detach().numpy(),
                                     [float(cached[0].kernel_scale), float(cached[0].noise_var)]))
    assert kernel_fits == [4] and len(kernels) == 8
    assert all(np.array_equal(kernel, kernels[0]) for kernel in kernels) and not np.allclose(kernels[0], 1.0)
    run_at_a_new_key(DefaultSearch(gp_fraction=0.5, gp_refit_growth=0.2, min_evals=10**6), (), toy_trial,
                     evals=30)
    (gp,) = gps_made
    assert gp.gp_refit_growth == 0.2
    with pytest.raises(ValueError, match="gp_refit_growth=0.1.*needs sampler='gp'"):
        tpe = OptunaSearch(sampler="tpe", gp_refit_growth=0.1)
        tpe.start(SearchContext(toy_space(), Budget(evals=2), TOY_KEY, 0, ()))
    for wrong in (-0.1, True, "0.1", math.nan, math.inf):
        with pytest.raises(ValueError, match="gp_refit_growth"):
            run_at_a_new_key(DefaultSearch(gp_refit_growth=wrong), (), toy_trial, evals=2)
        with pytest.raises(ValueError, match="gp_refit_growth"):
            context = SearchContext(toy_space(), Budget(evals=2), TOY_KEY, 0, ())
            OptunaGPSearch(gp_refit_growth=wrong).start(context)


def test_a_kernel_optuna_did_not_fit_is_never_kept(kernel_fits, monkeypatch):
    """Faults injected into a GP sampler with ``refit_growth=10`` (one fit, then its kernel kept):
    (1) a kept kernel whose covariance of the new trials does not factor (Optuna 4.8's Cholesky
    error, NumPy's ``LinAlgError``) is fitted instead of raising; (2) where that fit raises too,
    after which Optuna gives its default kernel, the next proposal fits, not keeps that kernel;
    (3) a change of the search space's dimensions, which clears Optuna's cache, is fitted, not
    given the default kernel. What survives: every proposal is made, and every kernel kept is one
    Optuna fitted."""
    import optuna
    from optuna._gp.gp import GPRegressor
    from optuna.distributions import FloatDistribution
    from optuna.trial import create_trial

    from tunekit.compat import finite_candidates_gp_sampler

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    sampler = finite_candidates_gp_sampler(0, 3, lambda: [], refit_growth=10.0)
    study = optuna.create_study(sampler=sampler)
    rng = np.random.default_rng(0)
    both = {"x": FloatDistribution(-1, 1), "y": FloatDistribution(-1, 1)}
    for x, y in rng.uniform(-1, 1, (4, 2)):
        study.add_trial(create_trial(params={"x": x, "y": y}, distributions=both,
                                     value=(x - 0.3) ** 2 + y * y))

    def propose(names=("x", "y")) -> np.ndarray:
        """One proposal told its value; the GP's length scales and scale it used."""
        trial = study.ask()
        params = {name: trial.suggest_float(name, -1, 1) for name in names}
        study.tell(trial, sum((value - 0.3) ** 2 for value in params.values()))
        kernel = sampler._gprs_cache_list[0]
        return np.append(kernel.inverse_squared_lengthscales.detach().numpy(), float(kernel.kernel_scale))

    first = propose()
    assert kernel_fits == [4]
    cache_matrix = GPRegressor._cache_matrix
    not_factoring = [True]  # the next kept kernel's matrices only

    def once_not_factoring(self):
        if not_factoring and not_factoring.pop():
            raise np.linalg.LinAlgError("Matrix is not positive definite")
        return cache_matrix(self)

    monkeypatch.setattr(GPRegressor, "_cache_matrix", once_not_factoring)
    refitted = propose()  # (1)
    assert kernel_fits == [4, 5] and not np.array_equal(refitted, first)
    fit = GPRegressor._fit_kernel_params.tunekit_wraps

    def raising(self, *args, **kwargs):
        raise RuntimeError("injected: the kernel's fit did not converge")

    monkeypatch.setattr(GPRegressor._fit_kernel_params, "tunekit_wraps", raising)
    not_factoring.append(True)  # (2) the kept kernel does not factor, and its fit raises
    assert np.allclose(propose(), 1.0)  # Optuna's default kernel, as Optuna alone gives
    monkeypatch.setattr(GPRegressor._fit_kernel_params, "tunekit_wraps", fit)
    fits = len(kernel_fits)
    fitted_again = propose()
    assert len(kernel_fits) == fits + 1 and not np.allclose(fitted_again, 1.0)
    assert all(np.array_equal(propose(), fitted_again) for _ in range(2))  # kept, as the rule says
    propose(names=("x",))  # (3) a trial without y: the search space is {x} at the next proposal
    fits = len(kernel_fits)
    only_x = propose(names=("x",))
    assert len(kernel_fits) == fits + 1 and len(only_x) == 2 and not np.allclose(only_x, 1.0)


def run_at_a_new_key(strategy, history, trial_of, evals: int, seed: int = 0, space=None, batch: int = 4,
                     key=TOY_KEY) -> list:
    """Configs ``strategy`` measures at ``key`` (M=1 by default) with ``history`` in the store,
    ``trial_of`` as the benchmark, on ``space`` (the toy's by default)."""
    from tunekit.budget import Budget
    from tunekit.deadline import SimulatedClock
    from tunekit.search import run_search
    from tunekit.strategy import SearchContext

    def evaluate(configs, deadline):
        for config in configs:
            yield config, trial_of(config)

    context = SearchContext(space or toy_space(), Budget(evals=evals), key, seed, history)
    result = run_search(strategy, context, evaluate, clock=SimulatedClock(), batch=batch)
    return [step.trial.config for step in result.steps]


def test_default_avoids_configs_that_failed_at_other_keys():
    """Injected: the store holds another key where 128x128 tiles failed (as the toy's do here).
    Survives: at the new key, ``default`` proposes no 128x128 config in 30 evaluations, although its
    model of this key learns from this key's trials only (the prior's failure forest is consulted)."""
    from tunekit.testing.strategies import toy_time, toy_trial
    from tunekit.trial import Status, Trial

    key = TuningKey.from_json('{"args": {"M": 2}, "dtypes": []}')
    history = tuple(Trial(c, Status.OUT_OF_RESOURCES, key=key) if not toy_trial(c).ok else
                    Trial(c, Status.OK, toy_trial(c).timing, key=key) for c in toy_space().configs())
    for seed in range(3):
        found = run_at_a_new_key(DefaultSearch(min_evals=10**6), history, toy_trial, evals=30, seed=seed)
        assert len(found) == 30 and all(toy_trial(c).ok for c in found), [c for c in found if not toy_trial(c).ok]
        assert min(toy_time(c) for c in found) == 1.0


def test_default_with_a_store_survives_a_key_where_every_config_fails():
    """Injected: every config fails at the new key (the store's key ran fine). Survives: ``default``
    (and with ``warm_start=0``) goes on proposing untried configs to the budget's end instead of
    raising: with no success at this key its model learns from every stored trial."""
    from tunekit.testing.strategies import toy_time
    from tunekit.trial import Status, Trial

    ranked = sorted(toy_space().configs(), key=toy_time)
    for strategy in (DefaultSearch(min_evals=10**6), DefaultSearch(warm_start=0, min_evals=10**6)):
        found = run_at_a_new_key(strategy, history_at_another_key(ranked),
                                 lambda c: Trial(c, Status.RUNTIME_ERROR, error="injected"), evals=20)
        assert len({config_json(c) for c in found}) == 20


def tiled_space_with_shared_memory(report_shared_memory: bool):
    """A recorded GEMM-like space (tiles, stages, warps) whose configs need
    ``(BLOCK_M + BLOCK_N) * BLOCK_K * num_stages * 2`` bytes of shared memory; those over a 160 KiB
    limit failed out of resources (23 % of the space). The time favours large tiles and
    many stages, so a search drifts towards the limit. With ``report_shared_memory`` every record
    carries the bytes its compile reported, as recordings by tunekit do."""
    import itertools

    from tunekit.recorded import Record, RecordedSpace
    from tunekit.trial import Status

    records = []
    for m, n, k, stages, warps in itertools.product([32, 64, 128, 256], [32, 64, 128, 256], [32, 64, 128],
                                                    [2, 3, 4, 5], [2, 4, 8]):
        shared = (m + n) * k * stages * 2
        params = {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "num_stages": stages, "num_warps": warps}
        extra = {"shared_bytes": shared} if report_shared_memory else {}
        time_ms = 1.0 + abs(m * n - 128 * 256) / 32768 + abs(stages - 4) * 0.1 + abs(warps - 4) * 0.05 + 32 / k
        fits = shared <= 160 * 1024
        records.append(Record(params, Status.OK if fits else Status.OUT_OF_RESOURCES, time_ms if fits else None,
                              extra=extra))
    return RecordedSpace("synthetic/tiles", list(records[0].params), records)


@pytest.mark.parametrize("strategy", [pytest.param("default", marks=pytest.mark.slow), "rf"])  # default: 39 s
def test_the_shared_memory_compiles_report_keeps_the_search_off_configs_that_do_not_fit(strategy):
    """Injected: configs over the shared-memory limit fail out of resources (23 % of the
    space). Survives: once such a failure is seen, the shared memory reported by every compile
    (also the failing ones') predicts which untried configs exceed it; after the 20th evaluation
    the strategy tries at most half the space's share of failing configs, and fewer than the same
    strategy that is told only that they failed."""
    import numpy as np

    from tunekit.compare import replay

    reported, unreported = tiled_space_with_shared_memory(True), tiled_space_with_shared_memory(False)
    space_share = 1 - sum(r.ok for r in reported.records) / len(reported.records)

    def failing_after_20(recorded):
        tails = [replay(recorded, strategy, seed, 80).times_ms[20:] for seed in range(4)]
        return float(np.isinf(np.concatenate(tails)).mean())

    with_report, without = failing_after_20(reported), failing_after_20(unreported)
    assert with_report <= space_share / 2, (with_report, space_share)
    assert with_report < without, (with_report, without)


def test_default_warm_start_tries_the_nearest_keys_measured_best_first():
    """The store holds two other keys: M=2 (near M=1), six trials whose fastest config is the
    toy's slowest, and M=64 (far), every config, ranked as the toy. ``default`` first measures M=2's fastest config, and its
    second fastest within the three warm-start configs (the other turns go to the prior's best
    predictions; the spread's configs come between them, ``warm_interleaved``): the measured best
    of the nearest shape is not left to a forest that averages over both keys."""
    from tunekit.testing.strategies import toy_time, toy_trial
    from tunekit.trial import Status, Timing, Trial

    ok = [c for c in toy_space().configs() if toy_trial(c).ok]
    near, far = (TuningKey.from_json(f'{{"args": {{"M": {m}}}, "dtypes": []}}') for m in (2, 64))
    slowest_first = sorted(ok, key=toy_time, reverse=True)
    history = tuple(Trial(c, Status.OK, Timing(t, t, t), key=near) for t, c in enumerate(slowest_first[:6], 1)) + \
        tuple(Trial(c, Status.OK, toy_trial(c).timing, key=far) for c in ok)
    for seed in range(3):
        warm = run_at_a_new_key(DefaultSearch(min_evals=10**6), history, toy_trial, evals=6, seed=seed)[0::2]
        assert config_json(warm[0]) == config_json(slowest_first[0])
        assert config_json(slowest_first[1]) in {config_json(c) for c in warm[1:3]}


def test_default_prior_target_slowdown_fits_the_store_prior_on_each_keys_slowdowns():
    """The store holds the toy at M=2 and at M=64, there 1000x slower. With ``prior_target="slowdown"``
    the prior learns each key's times over its fastest: it predicts M=64's fastest config at about
    1x (log 0) where, fit on log time (what ships), it predicts about 1000x its M=2 time. A value
    that is neither is refused, naming the option."""
    from tunekit.budget import Budget
    from tunekit.strategy import SearchContext
    from tunekit.testing.strategies import toy_time, toy_trial
    from tunekit.trial import Status, Timing, Trial

    ok = [c for c in toy_space().configs() if toy_trial(c).ok]
    near, far = (TuningKey.from_json(f'{{"args": {{"M": {m}}}, "dtypes": []}}') for m in (2, 64))
    history = tuple(Trial(c, Status.OK, Timing(scale * toy_time(c), scale * toy_time(c), scale * toy_time(c)),
                          key=key) for key, scale in ((near, 1.0), (far, 1000.0)) for c in ok)
    fastest = min(ok, key=toy_time)
    predicted = {}
    for target in ("time", "slowdown"):
        strategy = DefaultSearch(prior_target=target)
        strategy.start(SearchContext(toy_space(), Budget(evals=10), TOY_KEY, 0, history))
        predicted[target] = float(strategy._prior.predict_log([fastest], far)[0])
    # a forest averages its leaves' neighbours: within 0.5 of each, 6.9 (log 1000) apart
    assert abs(predicted["slowdown"]) < 0.5
    assert abs(predicted["time"] - math.log(1000 * toy_time(fastest))) < 0.5
    with pytest.raises(ValueError, match="prior_target='log'"):
        DefaultSearch(prior_target="log").start(SearchContext(toy_space(), Budget(evals=10), TOY_KEY, 0, history))


def test_default_warm_keys_takes_each_nearest_keys_measured_best_in_turn():
    """The store holds four other keys, each with its own fastest and second fastest config (of
    the toy's slowest): M=2, M=16 and M=64 of this key's dtypes (M=4), nearest first, and M=1 of
    other dtypes. With ``warm_keys=4`` the warm start's order is each alike key's fastest
    (nearest first), the prior's best prediction, then each one's second fastest and the prior's
    second: the key of other dtypes gives none, though it is among the four nearest. With
    ``warm_keys=1`` it is M=2's fastest, the prior's first, M=2's second, the prior's second, as
    before the option. (``predicted`` stands for the prior's ranking, here the toy's order;
    ``warm_robust``, whose turn would come after the keys', is off: it has its own test.)"""
    import numpy as np

    from tunekit.budget import Budget
    from tunekit.strategy import SearchContext
    from tunekit.testing.strategies import toy_time, toy_trial
    from tunekit.trial import Status, Timing, Trial

    ok = [c for c in toy_space().configs() if toy_trial(c).ok]
    slowest = sorted(ok, key=toy_time, reverse=True)
    keys = {m: TuningKey.from_json(f'{{"args": {{"M": {m}}}, "dtypes": ["{dtype}"]}}')
            for m, dtype in ((1, "fp32"), (2, "fp16"), (16, "fp16"), (64, "fp16"))}
    here = TuningKey.from_json('{"args": {"M": 4}, "dtypes": ["fp16"]}')
    first, second = dict(zip(keys, slowest[:4])), dict(zip(keys, slowest[4:8]))
    history = tuple(Trial(c, Status.OK, Timing(t, t, t), key=keys[m])
                    for m in keys for t, c in enumerate([first[m], second[m], *slowest[8:12]], 1))
    context = SearchContext(toy_space(), Budget(evals=10), here, 0, history)
    predicted = np.array([context.space.index(c) for c in sorted(ok, key=toy_time)])
    configs = context.space.configs()

    def warm_start(**options) -> list:
        strategy = DefaultSearch(warm_robust=False, **options)
        strategy.start(context)
        order = strategy._warm_start_first(predicted, context)[:options["warm_start"]]
        return [config_json(configs[i]) for i in order]

    prior = [config_json(configs[i]) for i in predicted[:2]]
    firsts, seconds = ([config_json(c[m]) for m in (2, 16, 64)] for c in (first, second))
    assert warm_start(warm_keys=4, warm_start=8) == [*firsts, prior[0], *seconds, prior[1]]
    assert warm_start(warm_keys=1, warm_start=4) == [firsts[0], prior[0], seconds[0], prior[1]]
    found = run_at_a_new_key(DefaultSearch(min_evals=10**6, warm_keys=3, warm_start=4, warm_robust=False), history,
                             toy_trial, evals=6, key=here)
    assert [config_json(c) for c in found[0::2]] == firsts  # what a tuning measures first, the spread between
    with pytest.raises(ValueError, match="warm_keys"):
        run_at_a_new_key(DefaultSearch(warm_keys=0), history, toy_trial, evals=1, key=here)


def test_default_warm_robust_takes_the_config_least_slow_at_every_stored_shape_in_the_second_turn():
    """``warm_robust`` (the default): the store holds M=2, M=16 and M=64 of this key's dtypes and
    M=1 of others. At each alike key its own config is fastest (1 ms) and 5x slower at the other
    two; ``steady`` takes 1.2 ms at all three; ``lopsided`` 1.05 at M=2 and M=16 and 1.5 at M=64
    (its mean slowdown is smaller than ``steady``'s, its worst larger); ``partial`` 1.1 ms at M=2
    and M=16 and was not measured at M=64, and ``foreign`` runs in 0.5 ms, but only the key of
    other dtypes measured it. The warm start is M=2's fastest, then ``steady`` (the configs
    measured at every alike key, by their worst slowdown), then the prior's first. Without the
    option: M=2's fastest, the prior's first, M=2's second (``lopsided``). With two alike keys
    the turn acts; with one the warm start is the same with the option as without."""
    import numpy as np

    from tunekit.budget import Budget
    from tunekit.strategy import SearchContext
    from tunekit.testing.strategies import toy_time, toy_trial
    from tunekit.trial import Status, Timing, Trial

    ok = [c for c in toy_space().configs() if toy_trial(c).ok]
    slowest = sorted(ok, key=toy_time, reverse=True)
    own, steady, lopsided, partial, foreign = dict(zip((2, 16, 64), slowest[:3])), *slowest[3:7]
    keys = {m: TuningKey.from_json(f'{{"args": {{"M": {m}}}, "dtypes": ["{dtype}"]}}')
            for m, dtype in ((1, "fp32"), (2, "fp16"), (16, "fp16"), (64, "fp16"))}
    here = TuningKey.from_json('{"args": {"M": 4}, "dtypes": ["fp16"]}')

    def trial(config, time, m):
        return Trial(config, Status.OK, Timing(time, time, time), key=keys[m])

    history = [trial(own[m], 1.0 if m == mine else 5.0, m) for mine in own for m in own]
    history += [trial(steady, 1.2, m) for m in own] + [trial(partial, 1.1, m) for m in (2, 16)]
    history += [trial(lopsided, 1.05, 2), trial(lopsided, 1.05, 16), trial(lopsided, 1.5, 64)]
    history += [trial(foreign, 0.5, 1)] + [trial(c, 1.0, 1) for c in own.values()]
    predicted = np.array([toy_space().index(c) for c in sorted(ok, key=toy_time)])
    configs = toy_space().configs()

    def warm_start(history, **options) -> list:
        context = SearchContext(toy_space(), Budget(evals=10), here, 0, tuple(history))
        strategy = DefaultSearch(warm_start=3, **options)
        strategy.start(context)
        return [config_json(configs[i]) for i in strategy._warm_start_first(predicted, context)[:3]]

    prior = config_json(configs[predicted[0]])
    assert warm_start(history) == [config_json(own[2]), config_json(steady), prior]
    assert warm_start(history, warm_robust=False) == [config_json(own[2]), prior, config_json(lopsided)]
    # two alike keys are enough: at M=2 and M=16 alone, lopsided's worst (1.05) is the smallest
    two = [t for t in history if t.key != keys[64]]
    assert warm_start(two) == [config_json(own[2]), config_json(lopsided), prior]
    only_m2 = [t for t in history if t.key in (keys[1], keys[2])]
    assert warm_start(only_m2) == warm_start(only_m2, warm_robust=False) == [config_json(own[2]), prior,
                                                                                 config_json(lopsided)]
    # a key whose configs are all outside this Space (another config list's) counts for nothing
    elsewhere = TuningKey.from_json('{"args": {"M": 32}, "dtypes": ["fp16"]}')
    outside = [config_from_dict({**config_to_dict(c), "BLOCK_M": 512}) for c in (steady, lopsided)]
    assert all(toy_space().index(c) is None for c in outside)
    assert warm_start(history + [Trial(c, Status.OK, Timing(1.0, 1.0, 1.0), key=elsewhere) for c in outside]) == \
        warm_start(history)
    # a config the prior rules out is left out of the turn: lopsided (worst 1.5) comes after steady
    context = SearchContext(toy_space(), Budget(evals=10), here, 0, tuple(history))
    strategy = DefaultSearch(warm_start=3)
    strategy.start(context)
    strategy._prior_failing[toy_space().index(steady)] = True
    assert [config_json(configs[i]) for i in strategy._warm_start_first(predicted, context)[:3]] == \
        [config_json(own[2]), config_json(lopsided), prior]
    with pytest.raises(ValueError, match="warm_robust"):
        warm_start(history, warm_robust="yes")


def test_default_warm_start_takes_a_config_stored_twice_at_the_nearest_key_once():
    """The store holds config a twice at M=2 (a re-tuning measured it again) and b after it: the
    warm start is a, the prior's first, then b, not the prior's second (a's second record does
    not take b's turn)."""
    import numpy as np

    from tunekit.budget import Budget
    from tunekit.strategy import SearchContext
    from tunekit.testing.strategies import toy_time, toy_trial
    from tunekit.trial import Status, Timing, Trial

    ok = [c for c in toy_space().configs() if toy_trial(c).ok]
    slowest = sorted(ok, key=toy_time, reverse=True)
    near = TuningKey.from_json('{"args": {"M": 2}, "dtypes": []}')
    here = TuningKey.from_json('{"args": {"M": 4}, "dtypes": []}')
    history = tuple(Trial(c, Status.OK, Timing(t, t, t), key=near)
                    for c, t in ((slowest[0], 1.0), (slowest[0], 1.1), (slowest[1], 1.2)))
    context = SearchContext(toy_space(), Budget(evals=10), here, 0, history)
    predicted = np.array([context.space.index(c) for c in sorted(ok, key=toy_time)])
    strategy = DefaultSearch(warm_start=3)
    strategy.start(context)
    configs = context.space.configs()
    assert [config_json(configs[i]) for i in strategy._warm_start_first(predicted, context)[:3]] == [
        config_json(slowest[0]), config_json(configs[predicted[0]]), config_json(slowest[1])]


def test_default_warm_scaled_moves_a_block_that_equalled_a_size_to_that_size_here():
    """The store holds one other key, M=32, G=4: its fastest config A (64x64 tiles) equals none of
    its sizes, its second B (BLOCK_M=32, num_warps=4) equals M and G, its third C (BLOCK_M=32,
    BLOCK_N=128) moves to a 128x128 tile, and 128x128 tiles failed there (every other config ran,
    slower). At M=128, G=8,
    ``warm_scaled`` moves B's BLOCK_M to 128, not its num_warps (a compile option, though equal
    to G), and gives A and C no move (C's would fail): in step with the measured ranking, so the
    warm start is A, the prior's first, B, B moved. Sizes that are not powers of two move by their
    rounding up (M=30 to M=100: 32 to 128). BLOCK_M=32 stays where it equalled two sizes that
    change differently (M to 128, K to 16), or one that changes and one that stays (G=32 at
    both keys), or a size whose rounding stays (M=30 to M=32)."""
    import json

    import numpy as np

    from tunekit.budget import Budget
    from tunekit.strategy import SearchContext
    from tunekit.testing.strategies import toy_time, toy_trial
    from tunekit.trial import Status, Timing, Trial

    def key(**args) -> TuningKey:
        return TuningKey.from_json(json.dumps({"args": args, "dtypes": ["fp16"]}))

    names = ("BLOCK_M", "BLOCK_N", "num_warps")

    def named(config) -> tuple:
        return tuple(config_to_dict(config)[name] for name in names)

    configs = toy_space().configs()
    by_name = {named(c): c for c in configs}
    measured = [by_name[64, 64, 2], by_name[32, 64, 4], by_name[32, 128, 4]]  # A, B, C: fastest first
    failed = [c for c in configs if toy_trial(c).status is not Status.OK]

    def started(here: TuningKey, there: TuningKey, **options) -> tuple:
        slower = [c for c in configs if toy_trial(c).ok and c not in measured]  # the failure model's evidence
        history = tuple(Trial(c, Status.OK, Timing(t, t, t), key=there) for t, c in enumerate(measured + slower, 1)) + \
            tuple(Trial(c, Status.OUT_OF_RESOURCES, key=there) for c in failed)
        context = SearchContext(toy_space(), Budget(evals=10), here, 0, history)
        strategy = DefaultSearch(warm_start=4, **options)
        strategy.start(context)
        return strategy, context

    def moves(here: TuningKey, there: TuningKey) -> list:
        strategy, context = started(here, there, warm_scaled=True)
        indices = [context.space.index(c) for c in measured]
        return [None if i is None else named(configs[i]) for i in strategy._scaled_to(here, there, indices)]

    here, there = key(M=128, G=8), key(M=32, G=4)
    assert moves(here, there) == [None, (128, 64, 4), None]
    strategy, context = started(here, there, warm_scaled=True)
    ok = [c for c in configs if toy_trial(c).ok]
    predicted = np.array([context.space.index(c) for c in sorted(ok, key=toy_time)])
    prior = named(configs[predicted[0]])
    order = [named(configs[i]) for i in strategy._warm_start_first(predicted, context)[:4]]
    assert order == [(64, 64, 2), prior, (32, 64, 4), (128, 64, 4)]
    without, context = started(here, there)
    assert [named(configs[i]) for i in without._warm_start_first(predicted, context)[:3]] == [
        (64, 64, 2), prior, (32, 64, 4)]
    assert moves(key(M=100), key(M=30)) == [None, (128, 64, 4), None]
    assert moves(key(M=128, K=16), key(M=32, K=32)) == [None, None, None]
    assert moves(key(M=128, G=32), key(M=32, G=32)) == [None, None, None]
    assert moves(key(M=32), key(M=30)) == [None, None, None]


@pytest.fixture
def gps_made(monkeypatch) -> list:
    """Every GP a ``DefaultSearch`` makes, in order, each with ``proposed``: the configs it proposed."""
    from tunekit.strategies import default, optuna_tpe

    made = []

    class Recorded(optuna_tpe.OptunaGPSearch):
        def __init__(self, **options):
            super().__init__(**options)
            self.proposed = []
            made.append(self)

        def ask(self, n):
            found = super().ask(n)
            self.proposed += found
            return found

    monkeypatch.setattr(default, "OptunaGPSearch", Recorded)
    return made


@pytest.mark.parametrize("batch", [1, 4])
def test_default_gp_fraction_gives_the_gp_a_share_of_the_forests_turns(gps_made, batch):
    """``gp_fraction=0.5``: after the space-filling start, half the proposals the forest's ranking
    would make are the Gaussian process's (told every trial, the start's included), and no config is
    proposed twice, in asks of one config and of four (where the GP could pick one the same ask's
    local or random share took). With ``gp_fraction=0`` and no stalled share no GP is made."""
    from tunekit.testing.strategies import toy_trial

    found = run_at_a_new_key(DefaultSearch(gp_fraction=0.5, min_evals=10**6), (), toy_trial, evals=40,
                             batch=batch)
    assert len({config_json(c) for c in found}) == len(found) == 40
    (gp,) = gps_made
    taken = {config_json(c) for c in gp.proposed} & {config_json(c) for c in found}
    assert len(gp._study.trials) == 40  # told every trial, whoever proposed it
    # the forest's turns are about 70 % of the 30 after the start (the others local and random, fewer
    # where the best has no untried neighbour): about 10 are the GP's
    assert 8 <= len(taken) <= 13, len(taken)
    gps_made.clear()
    run_at_a_new_key(DefaultSearch(gp_fraction=0.0, stalled_gp_fraction=None, min_evals=10**6), (), toy_trial,
                     evals=40, batch=batch)
    assert gps_made == []
    with pytest.raises(ValueError, match="gp_fraction"):
        run_at_a_new_key(DefaultSearch(gp_fraction=1.5), (), toy_trial, evals=1)
    with pytest.raises(ValueError, match="gp_fraction"):
        run_at_a_new_key(DefaultSearch(gp_fraction="0.1"), (), toy_trial, evals=1)


def test_default_gives_the_gp_the_stalled_share_once_the_best_stalls(gps_made):
    """``stalled_gp_fraction``: with no GP share otherwise, a search whose best time stopped
    improving (every config as fast: the best is the first) hands the forest's turns to the GP after
    ``stalled_after`` evaluations, while one whose every new config is faster than the last (never
    stalled) makes no GP. A bad share or count is refused by name at the start."""
    from tunekit.testing.strategies import toy_trial
    from tunekit.trial import Status, Timing, Trial

    def flat(config):
        return Trial(config, Status.OK, Timing(1.0, 1.0, 1.0))

    stalled = DefaultSearch(gp_fraction=0.0, stalled_gp_fraction=1.0, stalled_after=15, min_evals=10**6)
    found = run_at_a_new_key(stalled, (), flat, evals=40, batch=1)
    (gp,) = gps_made
    taken = [config_json(c) for c in found[16:]]
    # stalled after 16 evaluations (the best is the first): from the 17th config on, every forest
    # turn is the GP's, all but the local and random shares' ~30 %
    assert len(set(taken) & {config_json(c) for c in gp.proposed}) >= 12, len(gp.proposed)
    assert not {config_json(c) for c in found[:16]} & {config_json(g) for g in gp.proposed}  # none before the stall
    gps_made.clear()
    times = (1000 * 0.9**count for count in itertools.count())  # each config 10 % faster than the last

    def improving(config):
        t = next(times)
        return Trial(config, Status.OK, Timing(t, t, t))

    run_at_a_new_key(DefaultSearch(gp_fraction=0.0, stalled_gp_fraction=1.0, stalled_after=15, min_evals=10**6),
                     (), improving, evals=40, batch=1)
    assert gps_made == []
    for wrong in ({"stalled_gp_fraction": 1.5}, {"stalled_gp_fraction": "0.5"}, {"stalled_after": 0},
                  {"stalled_after": 2.5}):
        with pytest.raises(ValueError, match=f"DefaultSearch\\({next(iter(wrong))}"):
            run_at_a_new_key(DefaultSearch(**wrong), (), toy_trial, evals=1)


@pytest.mark.parametrize("gp_faster", [True, False])
def test_default_gives_the_gp_the_earned_share_while_its_turns_measure_faster(gps_made, gp_faster):
    """``earned_gp_fraction``: injected, a benchmark that times the GP's proposals at 1 ms and every
    other config at 10 ms (or the GP's at 100 ms). Survives: where the GP's are faster, once each
    of the GP and the forest has had 3 ranked turns, every ranked turn is the GP's (the share 1),
    so it proposes most of the 23 configs after the 40th (the toy Space has 63; without the option
    it proposes 5 of them); where they are slower, it keeps ``gp_fraction``'s share (a fifth
    here). A bad share is refused by name at the start."""
    from tunekit.trial import Status, Timing, Trial

    def timed(config):
        by_gp = bool(gps_made) and config_json(config) in {config_json(c) for c in gps_made[0].proposed}
        t = (1.0 if gp_faster else 100.0) if by_gp else 10.0
        return Trial(config, Status.OK, Timing(t, t, t))

    search = DefaultSearch(gp_fraction=0.2, stalled_gp_fraction=None, earned_gp_fraction=1.0, min_evals=10**6)
    found = run_at_a_new_key(search, (), timed, evals=70, batch=1)
    (gp,) = gps_made
    late = {config_json(c) for c in found[40:]} & {config_json(c) for c in gp.proposed}
    # of the 23 turns after the 40th, the ranked ones are about 70 % (the others local and random)
    assert (len(late) >= 18) if gp_faster else (len(late) <= 8), len(late)
    with pytest.raises(ValueError, match="DefaultSearch\\(earned_gp_fraction"):
        run_at_a_new_key(DefaultSearch(earned_gp_fraction=2.0), (), timed, evals=1)


def test_default_gives_the_gp_the_early_share_before_early_gp_until(gps_made):
    """``early_gp_fraction``: with no GP share otherwise, the GP's proposals all come between the
    start's 10 configs and the 20th evaluation (every ranked turn there once the forest has fit:
    the 11th evaluation is the forest's first, and local turns take some), and none after; with
    the store's prior (the kernel's other key measured) the early share does not apply, and no GP
    is made. A bad ``early_gp_until`` is refused by name at the start."""
    from tunekit.testing.strategies import toy_trial
    from tunekit.trial import Trial

    early = dict(gp_fraction=0.0, stalled_gp_fraction=None, early_gp_fraction=1.0, early_gp_until=20, min_evals=10**6)
    found = [config_json(c) for c in run_at_a_new_key(DefaultSearch(**early), (), toy_trial, evals=40, batch=1)]
    (gp,) = gps_made
    by_gp = {config_json(c) for c in gp.proposed}
    assert by_gp <= set(found[10:20]) and len(by_gp) >= 5, (len(by_gp), [found.index(c) for c in by_gp])
    gps_made.clear()
    key = TuningKey.from_json('{"args": {"M": 2}, "dtypes": []}')
    history = tuple(Trial(c, toy_trial(c).status, toy_trial(c).timing, key=key) for c in toy_space().configs())
    run_at_a_new_key(DefaultSearch(**early), history, toy_trial, evals=40, batch=1)
    assert gps_made == []
    with pytest.raises(ValueError, match="DefaultSearch\\(early_gp_until"):
        run_at_a_new_key(DefaultSearch(early_gp_fraction=0.5, early_gp_until=None), (), toy_trial, evals=1)


def test_default_gp_picks_leave_out_configs_expected_to_fail_and_short_tunings_make_no_gp(gps_made):
    """Injected: the store holds another key where the 128x128 tiles failed (as the toy's do here).
    Survives: with every forest turn the Gaussian process's (``gp_fraction=1``, no stalled share), the GP proposes
    no config the prior expects to fail, in 30 evaluations of 3 seeds, while proposing a share of
    them. Without the store, where the tiles over the shared memory fail (a third of the Space's
    tiles; large tiles fastest), fewer than a quarter as many of the GP's picks fail (10 seeds, 40
    evaluations; the start's failures teach the model first): it is kept off the tiles the
    compiles' reports predict too large. A tuning that ends within its space-filling start, or
    where every config fails, makes no GP at all."""
    from tunekit.space import Space
    from tunekit.testing.strategies import toy_trial
    from tunekit.trial import Status, Timing, Trial

    key = TuningKey.from_json('{"args": {"M": 2}, "dtypes": []}')
    history = tuple(Trial(c, Status.OUT_OF_RESOURCES, key=key) if not toy_trial(c).ok else
                    Trial(c, Status.OK, toy_trial(c).timing, key=key) for c in toy_space().configs())
    for seed in range(3):
        found = run_at_a_new_key(DefaultSearch(gp_fraction=1.0, stalled_gp_fraction=None, min_evals=10**6), history,
                                 toy_trial, evals=30, seed=seed)
        gp = gps_made.pop()
        assert len(gp.proposed) >= 5, len(gp.proposed)
        assert all(toy_trial(c).ok for c in gp.proposed), [c for c in gp.proposed if not toy_trial(c).ok]
        assert len(found) == 30
    # without the store, tiles whose reported shared memory exceeds 64 KiB fail out of resources and
    # the time favours large tiles
    space = Space(BLOCK_M=[16, 32, 64, 128, 256], BLOCK_N=[16, 32, 64, 128, 256], BLOCK_K=[16, 32, 64, 128],
                  num_warps=[2, 4, 8])

    def tile_trial(config):
        flat = config_to_dict(config)
        shared = (flat["BLOCK_M"] + flat["BLOCK_N"]) * flat["BLOCK_K"] * 2 * 3
        if shared > 64 * 1024:
            return Trial(config, Status.OUT_OF_RESOURCES, error="injected: shared memory", shared_bytes=shared)
        t = 1.0 + 4096 / (flat["BLOCK_M"] * flat["BLOCK_N"]) + 16 / flat["BLOCK_K"] + abs(flat["num_warps"] - 4) / 8
        return Trial(config, Status.OK, Timing(t, t, t), shared_bytes=shared)

    space_share = sum(not tile_trial(c).ok for c in space.configs()) / len(space.configs())  # 34 %
    gp_picks = []
    for seed in range(10):
        run_at_a_new_key(DefaultSearch(gp_fraction=1.0, stalled_gp_fraction=None, min_evals=10**6), (), tile_trial,
                         evals=40, seed=seed, space=space)
        gp_picks += gps_made.pop().proposed
    # the model predicts from few reports at first: some picks still fail (8 of 204 here; 43 of 195
    # when the GP is not kept off what the model rules out)
    failing_share = sum(not tile_trial(c).ok for c in gp_picks) / len(gp_picks)
    assert len(gp_picks) >= 100 and failing_share < space_share / 4, (failing_share, space_share)
    run_at_a_new_key(DefaultSearch(gp_fraction=0.5, min_evals=10**6), (), toy_trial, evals=10)
    # every config fails: the forest never fits, and a GP would model failures alone
    run_at_a_new_key(DefaultSearch(gp_fraction=1.0, min_evals=10**6), (), lambda c: Trial(c, Status.RUNTIME_ERROR),
                     evals=30)
    assert gps_made == []


def test_the_gps_acquisition_is_scored_on_at_most_gp_candidates_configs(gps_made, monkeypatch):
    """``gp_candidates``: each GP proposal scores at most that many untried configs (a sample of
    the toy Space's, which has more), ``DefaultSearch`` passes its own to the GP it makes, and a
    count under 1 is refused by name."""
    from tunekit.budget import Budget
    from tunekit.strategies import optuna_tpe
    from tunekit.strategy import SearchContext
    from tunekit.testing.strategies import toy_trial

    scored = []
    untried_params = optuna_tpe.OptunaSearch._untried_params

    def recorded(self, limit):
        found = untried_params(self, limit)
        scored.append(len(found))
        return found

    monkeypatch.setattr(optuna_tpe.OptunaSearch, "_untried_params", recorded)
    space = toy_space()
    search = optuna_tpe.OptunaGPSearch(n_startup_trials=2, gp_candidates=5)
    search.start(SearchContext(space, Budget(evals=12), TOY_KEY, 0, ()))
    for _ in range(12):
        search.tell([toy_trial(c) for c in search.ask(1)])
    assert len(space.configs()) > 5 and len(scored) >= 8 and max(scored) == 5, scored
    scored.clear()
    run_at_a_new_key(DefaultSearch(gp_fraction=0.5, gp_candidates=7, min_evals=10**6), (), toy_trial, evals=30)
    (gp,) = gps_made
    assert gp.gp_candidates == 7 and scored and max(scored) <= 7, scored
    for wrong in (0, 2.5, True):
        with pytest.raises(ValueError, match="OptunaGPSearch\\(gp_candidates"):
            optuna_tpe.OptunaGPSearch(gp_candidates=wrong).start(SearchContext(space, Budget(evals=1), TOY_KEY, 0, ()))
        with pytest.raises(ValueError, match="DefaultSearch\\(gp_candidates"):  # at the start, not at the GP's first turn
            run_at_a_new_key(DefaultSearch(gp_candidates=wrong), (), toy_trial, evals=1)


def test_optuna_proposes_a_config_listed_twice_once():
    """Injected: a config list with its first four configs repeated at its end (``from_configs``
    keeps repeats, as Triton's ``autotune`` does). Survives: TPE and the GP propose every distinct
    config once, and propose nothing more."""
    from tunekit.budget import Budget
    from tunekit.space import Space
    from tunekit.strategy import SearchContext

    configs = toy_space().configs()[:12]
    space = Space.from_configs(configs + configs[:4])
    for sampler in ("tpe", "gp"):
        search = OptunaSearch(sampler=sampler, n_startup_trials=2)
        search.start(SearchContext(space, Budget(evals=100), TOY_KEY, 0, ()))
        found = [config_json(c) for _ in range(20) for c in search.ask(1)]
        assert sorted(found) == sorted(config_json(c) for c in configs), sampler


def test_optuna_restrict_keeps_proposals_within_a_mask_and_ends_when_it_is_spent():
    """``OptunaSearch.restrict``: proposals only where the mask allows (for TPE, whose draws it
    refuses, and for the GP, whose candidates it filters), none once every allowed config was
    proposed (without a draw: the GP's would search a continuous space), any config again after
    ``restrict(None)``; a mask of the wrong length is refused by name."""
    import numpy as np

    from tunekit.budget import Budget
    from tunekit.strategy import SearchContext

    space = toy_space()
    configs = space.configs()
    allowed = np.zeros(len(configs), dtype=bool)
    allowed[::4] = True
    for sampler in ("tpe", "gp"):
        search = OptunaSearch(sampler=sampler, n_startup_trials=2)
        search.start(SearchContext(space, Budget(evals=100), TOY_KEY, 0, ()))
        search.restrict(allowed)
        found = [config_json(c) for _ in range(int(allowed.sum())) for c in search.ask(1)]
        assert sorted(found) == sorted(config_json(configs[i]) for i in np.flatnonzero(allowed)), sampler
        drawn = len(search._study.trials)
        assert search.ask(2) == [] and len(search._study.trials) == drawn, sampler  # no draw was made
        search.restrict(None)
        assert len(search.ask(1)) == 1
        with pytest.raises(ValueError, match="restrict: a mask of 3 configs"):
            search.restrict(np.ones(3, dtype=bool))


def test_a_key_that_is_not_a_tuning_key_or_its_stored_form_is_refused():
    """Injected: a flat mapping ``{"M": 1}`` (what the conformance checks once passed) as the key.
    Before, it became an empty key silently; now it is a TypeError naming the expected form."""
    from tunekit.budget import Budget
    from tunekit.strategy import SearchContext

    with pytest.raises(TypeError, match="A tuning key must be a TuningKey"):
        SearchContext(toy_space(), Budget(evals=1), {"M": 1}, 0)
    assert SearchContext(toy_space(), Budget(evals=1), {"args": {"M": 1}}, 0).key == TOY_KEY


def test_names_removed_from_the_api_still_answer_with_a_deprecation_warning():
    """Strategies and scripts written against the dict keys keep working for a release, and say
    what replaces them."""
    from tunekit import perfmodels
    from tunekit.keys import TuningKey
    from tunekit.trial import Status, Trial

    key = TuningKey(("N", "M"), (8, 4), ("fp16",))
    with pytest.deprecated_call(match="key.args"):
        assert key["args"] == {"M": 4, "N": 8}
    with pytest.deprecated_call(match="key.dtypes"):
        assert key["dtypes"] == ["fp16"]
    with pytest.deprecated_call():
        assert key.as_dict() == {"args": {"M": 4, "N": 8}, "dtypes": ["fp16"]}
    with pytest.raises(KeyError):
        key["N"]
    with pytest.deprecated_call(match="trial.key"):
        assert perfmodels.key_of(Trial(tunekit.Config({"BLOCK": 16}), Status.OK, key=key)) == \
            {"args": {"M": 4, "N": 8}, "dtypes": ["fp16"]}
    with pytest.raises(TypeError):
        iter(key)  # a key is no sequence: "in" and list() do not fall back on __getitem__
    with pytest.deprecated_call():
        assert key.get("args", {}) == {"M": 4, "N": 8} and key.get("other", 1) == 1
    with pytest.deprecated_call():
        key["args"]["M"] = 1024  # a copy: the key itself is unchanged
    assert key.args == {"M": 4, "N": 8}


def test_default_warm_spread_measures_configs_far_from_a_misleading_warm_start():
    """The store holds a shape ranked opposite to this one (its fastest configs are the toy's
    slowest, as a prefill shape's are a decode shape's). With ``warm_spread=3`` the three
    configs after the warm start (not in turn with it: ``warm_interleaved=False``) are a
    space-filling design: each parameter's steps from the
    configs tried before them sum to more than those of the forest's next three without it
    (summed over seeds). Without the store the option changes nothing."""
    import math

    from tunekit.testing.strategies import toy_time, toy_trial
    from tunekit.trial import Status, Timing, Trial

    ok = [c for c in toy_space().configs() if toy_trial(c).ok]
    reversed_shape = TuningKey.from_json('{"args": {"M": 64}, "dtypes": []}')
    history = tuple(Trial(c, Status.OK, Timing(t, t, t), key=reversed_shape)
                    for t, c in enumerate(sorted(ok, key=toy_time, reverse=True), 1))

    def steps(a, b) -> float:
        x, y = config_to_dict(a), config_to_dict(b)
        return sum(abs(math.log2(x[p]) - math.log2(y[p])) for p in ("BLOCK_M", "BLOCK_N", "num_warps"))

    far = {}
    for spread in (0, 3):
        far[spread] = 0.0
        for seed in range(5):
            found = run_at_a_new_key(DefaultSearch(min_evals=10**6, warm_spread=spread, warm_interleaved=False),
                                     history, toy_trial, evals=6, seed=seed)
            far[spread] += sum(min(steps(c, d) for d in found[:i]) for i, c in enumerate(found[3:6], 3))
    assert far[3] > far[0], far
    alone = [[config_json(c) for c in run_at_a_new_key(DefaultSearch(min_evals=10**6, warm_spread=spread), (),
                                                       toy_trial, evals=15, seed=1)] for spread in (0, 3)]
    assert alone[0] == alone[1]


def test_default_warm_interleaved_measures_the_same_six_configs_warm_and_spread_in_turn():
    """With ``warm_interleaved`` (the default) the first six evaluations with a store are the same
    six configs as without it, the warm start's three and the space-filling design's three, in
    another order: warm and spread in turn, a warm one first, so the spread's first config is
    measured second, not fourth. An ask of eight takes all six at once (without the option it
    stops where the warm start ends). Nothing changes without the store or with ``warm_spread=0``."""
    from tunekit.budget import Budget
    from tunekit.strategy import SearchContext
    from tunekit.testing.strategies import toy_time, toy_trial
    from tunekit.trial import Status, Timing, Trial

    ok = [c for c in toy_space().configs() if toy_trial(c).ok]
    reversed_shape = TuningKey.from_json('{"args": {"M": 64}, "dtypes": []}')
    history = tuple(Trial(c, Status.OK, Timing(t, t, t), key=reversed_shape)
                    for t, c in enumerate(sorted(ok, key=toy_time, reverse=True), 1))

    def run(history, evals, seed, **options):
        return [config_json(c) for c in run_at_a_new_key(DefaultSearch(min_evals=10**6, **options), history,
                                                         toy_trial, evals=evals, seed=seed, batch=1)]

    def first_ask(seed, **options):
        strategy = DefaultSearch(min_evals=10**6, **options)
        strategy.start(SearchContext(toy_space(), Budget(evals=20), TOY_KEY, seed, history))
        return [config_json(c) for c in strategy.ask(8)]

    for seed in range(3):
        plain, interleaved = run(history, 6, seed, warm_interleaved=False), run(history, 6, seed)
        assert len(set(plain)) == 6
        assert interleaved[0::2] == plain[:3] and interleaved[1::2] == plain[3:6], (plain, interleaved)
        assert first_ask(seed) == interleaved
        assert first_ask(seed, warm_interleaved=False) == plain[:3]
        assert run((), 15, seed) == run((), 15, seed, warm_interleaved=False)
        assert run(history, 8, seed, warm_spread=0) == run(history, 8, seed, warm_spread=0, warm_interleaved=False)
    with pytest.raises(ValueError, match="warm_interleaved"):
        run(history, 2, 0, warm_interleaved="yes")


def test_default_with_a_store_goes_on_where_the_spread_finds_nothing():
    """Injected: the store's other key measured a Space where 6 of 8 configs failed for want of
    resources, so the space-filling turns after the warm start find no config the prior expects
    to run. Survives: ``default`` goes on with the prior's next configs to the budget's end (an
    empty ask, which ends the tuning, stopped it after 1 or 3 evaluations), in either order of
    the warm start and the spread; on a Space of 3 configs it measures all 3."""
    from triton import Config

    from tunekit.trial import Status, Timing, Trial

    key = TuningKey.from_json('{"args": {"M": 2}, "dtypes": []}')
    for size, runs in ((8, 2), (3, 3)):
        space = tunekit.Space.from_configs([Config({"BLOCK": 2**i}) for i in range(size)])
        configs = space.configs()
        history = tuple(Trial(c, Status.OK, Timing(i + 1, i + 1, i + 1), key=key) if i < runs else
                        Trial(c, Status.OUT_OF_RESOURCES, key=key) for i, c in enumerate(configs))
        for interleaved in (True, False):
            found = run_at_a_new_key(DefaultSearch(warm_interleaved=interleaved), history,
                                     lambda c: Trial(c, Status.OK, Timing(1.0, 1.0, 1.0)), evals=size,
                                     space=space, batch=1)
            assert len({config_json(c) for c in found}) == size, (size, interleaved, found)


def test_optuna_sees_consecutive_powers_of_two_as_ordered_in_whatever_order_they_were_listed():
    """``num_warps`` listed 2, 1, 4, 8 (a config list's first-use order) is an ordered integer
    (log2 1..8) to Optuna's samplers, as when listed in order; other domains are categories."""
    from optuna.distributions import CategoricalDistribution, IntDistribution
    from triton import Config

    from tunekit.strategies.optuna_tpe import _distributions

    space = tunekit.Space.from_configs([Config({"BLOCK": b, "MODE": m}, num_warps=w) for w in (2, 1, 4, 8)
                                        for b in (64, 256) for m in ("a", "b")])
    distributions, decoders = _distributions(space)
    assert distributions["num_warps"] == IntDistribution(0, 3)
    assert [decoders["num_warps"](e) for e in range(4)] == [1, 2, 4, 8]
    assert isinstance(distributions["BLOCK"], CategoricalDistribution)  # 64 and 256: not consecutive
    assert isinstance(distributions["MODE"], CategoricalDistribution)
