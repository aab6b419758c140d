"""The statistics against values computed by hand on a five-config space, and by simulation."""

import math

import numpy as np
import pytest

from tunekit import metrics
from tunekit.metrics import SpaceStats

# five configs with times 1, 2, 4, 8, 16 ms, each costing one second to evaluate
HAND = SpaceStats(5, np.array([1.0, 2.0, 4.0, 8.0, 16.0]), 1.0)


def test_calculated_random_search_by_hand():
    # E[best of 2 of 5]: P(best is rank r) = C(5 - r, 1) / C(5, 2) = .4, .3, .2, .1 -> 0.4 + 0.6 + 0.8 + 0.8 = 2.6
    # E[best of 3 of 5]: C(5 - r, 2) / C(5, 3) = .6, .3, .1 -> 0.6 + 0.6 + 0.4 = 1.6; of 4: .8, .2 -> 1.2
    assert HAND.random_curve([1, 2, 3, 4, 5]) == pytest.approx([31 / 5, 2.6, 1.6, 1.2, 1.0])
    assert HAND.random_curve([2.5]) == pytest.approx([2.1])  # between whole evaluations: interpolated


def test_a_failed_config_counts_as_the_slowest_valid_one():
    with_failure = SpaceStats(5, np.array([1.0, 2.0, 4.0, 8.0]), 1.0)
    assert with_failure.random_curve([1])[0] == pytest.approx((1 + 2 + 4 + 8 + 8) / 5)
    assert with_failure.random_evaluations_to(1.0) == pytest.approx(3.0)  # (N + 1) / (k + 1), N counts failures


def test_cutoffs_and_score_range_by_hand():
    # optimum 1, median 4: cutoff(p) = 1 + 3 (1 - p)
    assert HAND.cutoff(0.5) == pytest.approx(2.5) and HAND.cutoff(0.96) == pytest.approx(1.12)
    # random reaches 2.5 at 3 evaluations (2.6 after 2) and 1.12 at 5 (1.2 after 4)
    assert HAND.score_range() == (3.0, 5.0)
    assert HAND.random_evaluations_to(1.02) == pytest.approx(3.0)  # (5 + 1) / (1 + 1)


def test_score_by_hand():
    lucky = metrics.best_so_far([2, 1, 16, 8, 4], HAND.worst)  # best-so-far 2, 1, 1, 1, 1
    unlucky = metrics.best_so_far([16, 8, 4, 2, 1], HAND.worst)  # 16, 8, 4, 2, 1
    # range 3..5; at 5 random equals the optimum, so points 3 and 4 count: random 1.6 and 1.2
    assert metrics.score_over_evaluations(HAND, [lucky]) == pytest.approx(1.0)
    # (1.6 - 4) / 0.6 = -4 and (1.2 - 2) / 0.2 = -4
    assert metrics.score_over_evaluations(HAND, [unlucky]) == pytest.approx(-4.0)
    # the mean curve 2.5, 1.5: (1.6 - 2.5) / 0.6 = -1.5 and (1.2 - 1.5) / 0.2 = -1.5
    assert metrics.score_over_evaluations(HAND, [lucky, unlucky]) == pytest.approx(-1.5)
    assert metrics.score_over_seconds(HAND, [(lucky, np.arange(1.0, 6.0))]) == pytest.approx(1.0)


def test_failures_before_the_first_valid_config_count_as_the_slowest_valid_time():
    assert metrics.best_so_far([math.inf, 4, math.inf, 1], 16.0).tolist() == [16, 4, 4, 1]
    assert metrics.first_reaching(np.array([16.0, 4, 4, 1]), 1.02) == 4
    assert metrics.first_reaching(np.array([16.0, 4]), 1.02) is None


def test_exact_random_curve_agrees_with_simulation():
    rng = np.random.default_rng(1)
    times = np.sort(rng.lognormal(0, 0.5, 300))
    stats = SpaceStats(330, times, 1.0)  # 30 failed configs
    values = np.concatenate([times, np.full(30, times[-1])])
    for draws in (1, 7, 60):
        simulated = [values[rng.choice(330, draws, replace=False)].min() for _ in range(20000)]
        error = np.std(simulated) / np.sqrt(len(simulated))
        assert abs(stats.random_curve([draws])[0] - np.mean(simulated)) < 4 * error


def test_paired_bootstrap_interval_covers_the_difference():
    a = np.array([1.0, 2.0, 3.0, 4.0])
    low, high = metrics.bootstrap_interval(lambda idx: float(np.mean(a[idx] + 1) - np.mean(a[idx])), 4)
    assert low == pytest.approx(1.0) and high == pytest.approx(1.0)  # paired: the same seeds on both sides
    low, high = metrics.bootstrap_interval(lambda idx: float(np.mean(a[idx])), 4)
    assert 1.0 <= low < 2.5 < high <= 4.0


def test_the_bootstrap_interval_is_scipys_percentile_interval_and_reproducible():
    """Seeds are resampled by their indices (so one statistic of the indices pairs both sides of a
    difference); the same resamples every time, so a report is written the same twice."""
    from scipy.stats import bootstrap

    values = np.random.default_rng(7).lognormal(size=12)

    def statistic(idx: np.ndarray) -> float:
        return float(np.mean(values[idx]))

    low, high = metrics.bootstrap_interval(statistic, 12)
    assert low < statistic(np.arange(12)) < high
    assert metrics.bootstrap_interval(statistic, 12) == (low, high)
    scipys = bootstrap((np.arange(12),), statistic, n_resamples=1000, vectorized=False, method="percentile",
                       random_state=np.random.default_rng(0)).confidence_interval
    assert (low, high) == pytest.approx((scipys.low, scipys.high))
    assert metrics.bootstrap_interval(statistic, 12, rng=np.random.default_rng(1)) != (low, high)


def test_a_bootstrap_over_nan_statistics_or_one_seed_says_so(recwarn):
    """NaN on every resample (a score with no range): NaN. NaN on some: the interval of the
    others. One seed: no interval (NaN), not a degenerate one."""
    assert all(math.isnan(v) for v in metrics.bootstrap_interval(lambda idx: math.nan, 5))
    some = metrics.bootstrap_interval(lambda idx: math.nan if 0 in idx else float(np.mean(idx)), 5)
    assert 1.0 <= some[0] < some[1] <= 4.0  # resamples without seed 0: means of 1..4
    assert all(math.isnan(v) for v in metrics.bootstrap_interval(lambda idx: 1.0, 1))
    assert not [w for w in recwarn if "degenerate" in str(w.message)]


def test_a_budget_scores_only_the_part_of_the_range_a_run_reached():
    """A 200-evaluation run is not scored on the 1,000 evaluations of a range it never ran: with a
    budget, only the range's points within it count, and none (NaN) if the range starts past it."""
    times = np.linspace(1.0, 2.0, 1000)
    stats = SpaceStats(1000, times, 1.0)
    low, high = stats.score_range()
    inside = int(low) + 5
    found = np.full(inside, stats.worst)
    found[-1] = stats.optimum  # the optimum at the budget's last evaluation, held after it
    run = metrics.best_so_far(found, stats.worst)
    full = metrics.score_over_evaluations(stats, [run])
    assert metrics.score_over_evaluations(stats, [run], budget=int(high) + 1) == pytest.approx(full)
    within = metrics.score_over_evaluations(stats, [run], budget=inside)
    assert within < full  # the held optimum past the budget no longer counts
    assert math.isnan(metrics.score_over_evaluations(stats, [run], budget=max(1, int(low) - 1)))
    assert math.isnan(metrics.score_over_seconds(stats, [(run, np.arange(1.0, inside + 1))], budget=max(1, int(low) - 1)))


def test_random_search_over_seconds_on_heavy_tailed_costs_agrees_with_simulation():
    """Where a few configs cost far more to compile than the rest, the best random search finds
    by a time is not the best after the mean number of draws: the baseline over seconds is
    simulated on the recorded costs. Checked against random searches drawn independently of it;
    the shortcut (draws = seconds / mean cost) is far off on the same space."""
    rng = np.random.default_rng(7)
    n = 400
    times = np.sort(rng.lognormal(0, 0.5, n))
    costs = np.where(rng.random(n) < 0.05, 60.0, 0.2)  # 5 % of the configs take 60 s, the rest 0.2 s
    stats = SpaceStats(n, times, float(costs.mean()), costs)
    seconds = np.array([1.0, 5.0, 20.0, 60.0])
    runs = []
    for _ in range(4000):
        order = rng.permutation(n)
        elapsed, best = np.cumsum(costs[order]), np.minimum.accumulate(times[order])
        done = np.searchsorted(elapsed, seconds, side="right") - 1
        runs.append(np.where(done >= 0, best[np.maximum(done, 0)], times[-1]))
    found, spread = np.mean(runs, axis=0), np.std(runs, axis=0)
    # both are means of 4,000 random orders: their difference has this standard error
    error = spread * math.sqrt(1 / len(runs) + 1 / metrics.RANDOM_ORDERS)
    expected = stats.random_curve_seconds(seconds)
    assert np.all(np.abs(expected - found) < 4 * error)
    shortcut = stats.random_curve(seconds / stats.seconds_per_evaluation)
    assert np.max(np.abs(shortcut - found) / error) > 20
    low, high = stats.seconds_range()  # found on a grid about 2 % apart in time
    assert stats.random_curve_seconds([low])[0] <= stats.cutoff(0.5) < stats.random_curve_seconds([low / 1.05])[0]
    assert stats.random_curve_seconds([high])[0] <= stats.cutoff(0.96) < stats.random_curve_seconds([high / 1.05])[0]


def test_random_search_over_seconds_pairs_each_config_with_its_own_cost():
    """Through ``SpaceStats.of``, as ``tunekit compare`` builds it: the fastest configs compile
    slowest here, so pairing times with the wrong costs would find them much sooner."""
    from tunekit.recorded import Record, RecordedSpace
    from tunekit.trial import Status

    times = np.linspace(1.0, 5.0, 50)
    records = [Record({"BLOCK": 2 ** i}, Status.OK, float(t), compile_ms=(100.0 if t < 1.5 else 1.0) * 1e3)
               for i, t in enumerate(times[::-1])]  # stored slowest first
    stats = SpaceStats.of(RecordedSpace("paired", ["BLOCK"], records))
    assert stats.costs[:7].tolist() == [100.0] * 7 and set(stats.costs[7:]) == {1.0}
    # by 50 s only cheap configs can have finished unless a slow one was drawn first: the best
    # found is then no better than the cheap configs' best (1.5 ms) in most orders
    assert stats.random_curve_seconds([50.0])[0] > 1.5


def test_equal_costs_give_the_exact_curve_over_seconds():
    stats = SpaceStats(5, np.array([1.0, 2.0, 4.0, 8.0, 16.0]), 2.0, np.full(5, 2.0))
    # after 2 s one evaluation is done, after 5.9 s two
    assert stats.random_curve_seconds([1.0, 2.0, 5.9]) == pytest.approx([16.0, 31 / 5, 2.6])
    assert stats.seconds_range() == (6.0, 10.0)  # the evaluations' range (3, 5) at 2 s each
