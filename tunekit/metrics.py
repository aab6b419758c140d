"""The statistics of the auto-tuning literature, computed on recorded spaces.

Calculated random search. Drawing M of the N configs of a space uniformly without replacement,
with failed configs counting as the slowest valid time, the expected best time drawn is exactly

    E[best of M] = v_1 + sum_j (v_(j+1) - v_j) * C(N - j, M) / C(N, M)

for the times v_1 <= ... <= v_N (the second factor is the chance that all M draws miss the j
best configs). This is the calculated baseline of Willemsen et al. (FGCS 2024), with one
deliberate difference: AutoTuningAssociation/autotuning_methodology takes the time at the
expected rank of the best draw, and since strategies' curves are averaged over seeds (an
expected time, not a time at an expected rank), random search itself then scores above 0. With
the expected time it scores 0 on average. The expected number of draws until the first config
within a target is (N + 1) / (k + 1) for k such configs.

Score. Per space, the cutoff for a fraction p is f_opt + (median - f_opt)(1 - p), with f_opt
and the median over valid configs. The score range runs from the number of evaluations at
which calculated random search reaches the p = 0.5 cutoff to that at which it reaches p = 0.96
(and, where records carry compile and benchmark times, the same range in seconds: M random
evaluations cost M times the space's mean evaluation cost in expectation, exactly). A strategy's curve is its best-so-far averaged over seeds
(the slowest valid time before its first valid result); at every point of the range its score
is (random - strategy) / (random - f_opt): 0 is random search, 1 the optimum, below 0 worse than
random. The score of a space is the mean over the range; the aggregate score the mean over spaces.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .recorded import RecordedSpace

SCORE_RANGE = (0.5, 0.96)
SECONDS_POINTS = 200
#: Ratios to the optimum whose evaluations-to-reach every comparison reports (1.02 = within 2 %).
THRESHOLDS = (1.02, 1.05)


@dataclass(frozen=True)
class SpaceStats:
    """What the statistics need of a recorded space (the random-search curve is cached)."""

    n_total: int  # every feasible config, failed ones included: what random search draws from
    sorted_times: np.ndarray  # valid times, ascending
    seconds_per_evaluation: float  # mean cost of evaluating one config when it was recorded
    _expected: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, space: RecordedSpace) -> "SpaceStats":
        costs = [r.evaluation_seconds for r in space.records]
        return cls(len(space.records), np.sort(space.valid_times), float(np.mean(costs)) if costs else 0.0)

    @property
    def optimum(self) -> float:
        return float(self.sorted_times[0])

    @property
    def median(self) -> float:
        return float(np.median(self.sorted_times))

    @property
    def worst(self) -> float:
        return float(self.sorted_times[-1])

    def cutoff(self, fraction: float) -> float:
        return self.optimum + (self.median - self.optimum) * (1.0 - fraction)

    def _ranked(self) -> np.ndarray:
        failed = self.n_total - len(self.sorted_times)
        return np.concatenate([self.sorted_times, np.full(failed, self.worst)])

    @cached_property
    def _log_factorials(self) -> np.ndarray:
        from scipy.special import gammaln

        return gammaln(np.arange(self.n_total + 2) + 1.0)  # log(k!) at index k

    def _expected_best(self, m: int) -> float:
        """Exact E[best of m draws without replacement] (cached per m)."""
        n = self.n_total
        m = int(min(max(m, 1), n))
        if m not in self._expected:
            values, lf = self._ranked(), self._log_factorials
            j = np.arange(1, n - m + 1)  # all m draws miss the j best: C(n - j, m) / C(n, m); zero beyond n - m
            log_miss = lf[n - j] - lf[n - j - m] - lf[n] + lf[n - m]
            self._expected[m] = float(values[0] + np.sum(np.diff(values)[: len(j)] * np.exp(log_miss)))
        return self._expected[m]

    def random_curve(self, evaluations: np.ndarray | Sequence[float]) -> np.ndarray:
        """Calculated random search: the expected best time after M evaluations (M may be
        fractional, between two whole numbers of evaluations: interpolated)."""
        m = np.clip(np.asarray(evaluations, dtype=float), 1.0, self.n_total)
        below, above = np.floor(m).astype(int), np.ceil(m).astype(int)
        cache = {k: self._expected_best(k) for k in np.unique(np.concatenate([below.ravel(), above.ravel()]))}
        low = np.vectorize(cache.__getitem__, otypes=[float])(below)
        high = np.vectorize(cache.__getitem__, otypes=[float])(above)
        return low + (high - low) * (m - below)

    def random_evaluations_to(self, target_ms: float) -> float:
        """Expected draws until the first config at or under ``target_ms``: (N + 1) / (k + 1) for k such configs."""
        k = int(np.searchsorted(self.sorted_times, target_ms, side="right"))
        return math.inf if k == 0 else (self.n_total + 1) / (k + 1)

    def random_evaluations_reaching(self, target_ms: float) -> float:
        """The fewest whole evaluations after which calculated random search is at or under ``target_ms``."""
        if self._expected_best(self.n_total) > target_ms:
            return math.inf
        low, high = 1, self.n_total  # the expected best only falls as M grows: bisect
        while low < high:
            middle = (low + high) // 2
            if self._expected_best(middle) <= target_ms:
                high = middle
            else:
                low = middle + 1
        return float(low)

    def score_range(self) -> tuple[float, float]:
        """Evaluations from random search reaching the p=0.5 cutoff to reaching p=0.96."""
        return self._score_range

    @cached_property
    def _score_range(self) -> tuple[float, float]:
        low, high = (self.random_evaluations_reaching(self.cutoff(p)) for p in SCORE_RANGE)
        return low, max(low, high)


# -- the replayed tunings these statistics are computed on (``tunekit compare`` makes them,
# -- ``tunekit.plots`` draws them) -----------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One replayed tuning: the time of each evaluation (inf when it failed) and the clock after it."""

    space: str
    strategy: str
    seed: int
    budget: int
    times_ms: np.ndarray
    seconds: np.ndarray


@dataclass
class Comparison:
    """Every replayed tuning of a comparison, with the spaces, their statistics and budgets;
    ``_tables`` caches score tables (``tunekit.compare``)."""

    spaces: dict[str, RecordedSpace]
    stats: dict[str, SpaceStats]
    budgets: dict[str, int]
    strategies: list[str]
    seeds: int
    runs: list[Run] = field(default_factory=list)
    thresholds: tuple[float, ...] = THRESHOLDS
    _tables: dict = field(default_factory=dict, repr=False)

    def runs_of(self, space: str, strategy: str) -> list[Run]:
        return sorted((r for r in self.runs if r.space == space and r.strategy == strategy), key=lambda r: r.seed)


def best_so_far(times_ms: Sequence[float], worst: float) -> np.ndarray:
    """Best time after each evaluation; before the first valid one, the space's slowest valid time."""
    values = np.asarray(times_ms, dtype=float)
    values = np.where(np.isfinite(values), values, worst)
    return np.minimum.accumulate(values) if len(values) else values


def curve_at(best: np.ndarray, evaluations: np.ndarray, worst: float) -> np.ndarray:
    """A run's best-so-far at each evaluation count (held at its last value after it stopped)."""
    if len(best) == 0:
        return np.full(len(evaluations), worst)
    index = np.clip(np.asarray(evaluations, dtype=int) - 1, 0, len(best) - 1)
    return best[index]


def curve_at_seconds(best: np.ndarray, seconds: np.ndarray, points: np.ndarray, worst: float) -> np.ndarray:
    """A run's best-so-far at each time in ``points`` (the slowest valid time before its first result)."""
    index = np.searchsorted(seconds, points, side="right") - 1
    return np.where(index >= 0, best[np.clip(index, 0, max(len(best) - 1, 0))] if len(best) else worst, worst)


def standardised_score(random: np.ndarray, strategy: np.ndarray, optimum: float) -> float:
    """Mean of (random - strategy) / (random - optimum) over the points where random is above the optimum."""
    spread = random - optimum
    usable = spread > 0
    if not usable.any():
        return math.nan
    return float(np.mean((random[usable] - strategy[usable]) / spread[usable]))


def evaluation_points(stats: SpaceStats) -> np.ndarray:
    """The whole numbers of evaluations in the score range."""
    low, high = stats.score_range()
    points = np.arange(max(1, math.ceil(low)), max(1, math.floor(high)) + 1)
    return points if len(points) else np.array([max(1, round(low))])


def seconds_points(stats: SpaceStats) -> np.ndarray:
    """The score range in seconds, at the space's mean cost per evaluation."""
    low, high = stats.score_range()
    return np.linspace(low, high, SECONDS_POINTS) * stats.seconds_per_evaluation


def score_over_evaluations(stats: SpaceStats, runs: Sequence[np.ndarray], budget: int | None = None) -> float:
    """The score of the mean over ``runs`` (best-so-far per evaluation, one array per seed).
    ``budget``: score only the part of the range within that many evaluations (NaN if none is),
    so that runs are not scored where they did not run."""
    points = evaluation_points(stats)
    if budget is not None:
        points = points[points <= budget]
        if not len(points):
            return math.nan
    mean = np.mean([curve_at(run, points, stats.worst) for run in runs], axis=0)
    return standardised_score(stats.random_curve(points), mean, stats.optimum)


def score_over_seconds(stats: SpaceStats, runs: Sequence[tuple[np.ndarray, np.ndarray]],
                       budget: int | None = None) -> float:
    """The same over seconds; ``runs`` holds (best-so-far, cumulative seconds) per seed.
    ``budget`` (evaluations): only the range within that many evaluations' mean cost."""
    if stats.seconds_per_evaluation <= 0:
        return math.nan
    points = seconds_points(stats)
    if budget is not None:
        points = points[points <= budget * stats.seconds_per_evaluation]
        if not len(points):
            return math.nan
    mean = np.mean([curve_at_seconds(best, seconds, points, stats.worst) for best, seconds in runs], axis=0)
    return standardised_score(stats.random_curve(points / stats.seconds_per_evaluation), mean, stats.optimum)


def first_reaching(best: np.ndarray, target_ms: float) -> int | None:
    """The 1-based evaluation at which ``best`` first reaches ``target_ms``; None if never (censored)."""
    hits = np.nonzero(best <= target_ms)[0]
    return int(hits[0]) + 1 if len(hits) else None


def bootstrap_interval(
    statistic, seeds: int, resamples: int = 1000, confidence: float = 0.95, rng: np.random.Generator | None = None
) -> tuple[float, float]:
    """Percentile bootstrap over seeds: ``statistic(indices)`` is recomputed on resampled seed
    indices. Pass one function that computes both sides of a comparison from the same indices
    and the interval is paired."""
    rng = rng or np.random.default_rng(0)
    values = [statistic(rng.integers(0, seeds, seeds)) for _ in range(resamples)]
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return math.nan, math.nan
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)
