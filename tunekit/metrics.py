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
(and, where records carry compile and benchmark times, from the second at which random search
over seconds reaches the first cutoff to the second at which it reaches the other). A strategy's curve is its best-so-far averaged over seeds
(the slowest valid time before its first valid result); at every point of the range its score
is (random - strategy) / (random - f_opt): 0 is random search, 1 the optimum, below 0 worse than
random. The score of a space is the mean over the range; the aggregate score the mean over spaces.

Random search over seconds. Where configs cost the same to evaluate, the best found after t
seconds is the expected best of floor(t / cost) draws, exactly. Where costs differ, that is no
longer so: compile times are heavy-tailed (the H200 GEMM space: median 0.4 s, worst 138 s), and
the expected best at a time is not the expected best after the mean number of draws (with that
shortcut random search itself scored -42 on one H200 space). So the baseline over seconds is
random search simulated on the recorded costs: the mean over seeded random orders of the space of
the best time found by each second (as many orders as it takes to bring its standard error under
1 % of its distance to the optimum, at most 64,000), which random search scores 0 on, up to that
error. The score range over seconds is found on one batch of 4,000 orders.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .recorded import RecordedSpace

SCORE_RANGE = (0.5, 0.96)
SECONDS_POINTS = 200
#: Random search over seconds is simulated in batches of this many orders of the space, until
#: its standard error is at most ``SIMULATION_ERROR`` of its distance to the optimum at every
#: point, or ``MAX_RANDOM_ORDERS`` orders (``test_metrics`` checks it against independent searches).
RANDOM_ORDERS = 4000
SIMULATION_ERROR = 0.01
MAX_RANDOM_ORDERS = 64_000
#: Points of the grid on which the seconds at which random search reaches the cutoffs are found.
_RANGE_GRID = 400
#: ``SpaceStats.seconds_range`` and ``random_on_seconds_range`` of every space met in this
#: process, by its times and costs.
_SECONDS_RANGE: dict[bytes, tuple[float, float]] = {}
_ON_SECONDS_RANGE: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
#: Ratios to the optimum whose evaluations-to-reach every comparison reports (1.02 = within 2 %).
THRESHOLDS = (1.02, 1.05)


@dataclass(frozen=True)
class SpaceStats:
    """What the statistics need of a recorded space (the random-search curve is cached)."""

    n_total: int  # every feasible config, failed ones included: what random search draws from
    sorted_times: np.ndarray  # valid times, ascending
    seconds_per_evaluation: float  # mean cost of evaluating one config when it was recorded
    #: each config's evaluation seconds, valid ones in ``sorted_times``' order, then the failed
    #: ones; None: every config costs ``seconds_per_evaluation``
    costs: np.ndarray | None = None
    _expected: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, space: RecordedSpace) -> "SpaceStats":
        valid = sorted((r for r in space.records if r.ok),  # ok: time_ms is a number
                       key=lambda r: r.time_ms if r.time_ms is not None else math.inf)
        ordered = valid + [r for r in space.records if not r.ok]
        costs = np.array([r.evaluation_seconds for r in ordered], dtype=float)
        return cls(len(space.records), np.array([r.time_ms for r in valid], dtype=float),
                   float(np.mean(costs)) if len(costs) else 0.0, costs)

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

    @property
    def equal_costs(self) -> bool:
        return self.costs is None or bool(np.all(self.costs == self.costs[0]))

    def random_curve_seconds(self, seconds: np.ndarray | Sequence[float], most_orders: int = MAX_RANDOM_ORDERS
                             ) -> np.ndarray:
        """Random search over seconds: the expected best time found by each of ``seconds`` (the
        slowest valid time before the first evaluation ends). Exact where every config costs the
        same; simulated on the recorded costs otherwise (module docstring), on at most
        ``most_orders`` orders (``RANDOM_ORDERS`` is close enough to draw it)."""
        seconds = np.asarray(seconds, dtype=float)
        if self.seconds_per_evaluation <= 0:
            return np.full(seconds.shape, math.nan)
        if self.equal_costs:
            cost = self.seconds_per_evaluation if self.costs is None else float(self.costs[0])
            done = np.floor(seconds / cost + 1e-9)
            return np.where(done >= 1, self.random_curve(np.maximum(done, 1)), self.worst)
        return self._simulated_best_at(seconds, most_orders)

    def _simulated_best_at(self, seconds: np.ndarray, most: int = MAX_RANDOM_ORDERS) -> np.ndarray:
        """The mean over seeded random orders of the space of the best time found by each of
        ``seconds``: batches of ``RANDOM_ORDERS`` orders until its standard error is at most
        ``SIMULATION_ERROR`` of the curve's distance to the optimum at every second, or ``most``
        orders were drawn (heavy-tailed costs need many: the rare order that starts with a slow
        compile moves the mean)."""
        values, costs = self._ranked(), self.costs
        assert costs is not None  # unequal costs, the recorded ones (equal_costs otherwise)
        horizon = float(np.max(seconds, initial=0.0))
        # only the first draws of an order that can end by the horizon are simulated (all of
        # them for the rare order whose first draws end earlier)
        prefix = int(min(self.n_total, math.ceil(2 * horizon / self.seconds_per_evaluation) + 64))
        rows = max(1, min(RANDOM_ORDERS, 20_000_000 // self.n_total))  # orders per batch, by memory
        rng = np.random.default_rng(0)  # the same orders at every call: the baseline is one curve
        total, squares, drawn = np.zeros(seconds.shape), np.zeros(seconds.shape), 0
        while True:
            orders = np.argsort(rng.random((rows, self.n_total)), axis=1)
            found = self._best_by(orders[:, :prefix], values, costs, seconds)
            short = np.cumsum(costs[orders[:, :prefix]], axis=1)[:, -1] < horizon
            if prefix < self.n_total and short.any():
                found[short] = self._best_by(orders[short], values, costs, seconds)
            total, squares, drawn = total + found.sum(axis=0), squares + (found ** 2).sum(axis=0), drawn + rows
            mean = total / drawn
            error = np.sqrt(np.maximum(squares / drawn - mean ** 2, 0.0) / drawn)
            if drawn >= RANDOM_ORDERS and (np.all(error <= SIMULATION_ERROR * (mean - self.optimum) + 1e-12)
                                           or drawn >= most):
                return mean

    def _best_by(self, orders: np.ndarray, values: np.ndarray, costs: np.ndarray, seconds: np.ndarray
                 ) -> np.ndarray:
        """For each order (a row of config indices), the best time found by each of ``seconds``
        (the slowest valid time before its first evaluation ends): orders x seconds."""
        elapsed = np.cumsum(costs[orders], axis=1)
        best = np.minimum.accumulate(values[orders], axis=1)
        rows, width = elapsed.shape
        # one sorted array for every row: row r's times shifted past every earlier row's
        shift = (np.arange(rows) * (float(elapsed[:, -1].max()) + float(seconds.max(initial=0.0)) + 1.0))[:, None]
        done = np.searchsorted((elapsed + shift).ravel(), (seconds[None, :] + shift).ravel(), side="right")
        done = done.reshape(rows, len(seconds)) - 1 - np.arange(rows)[:, None] * width
        return np.where(done >= 0, np.take_along_axis(best, np.maximum(done, 0), axis=1), self.worst)

    @property
    def random_on_seconds_range(self) -> tuple[np.ndarray, np.ndarray]:
        """``SECONDS_POINTS`` evenly spaced seconds over the score range, and random search's
        expected best at each (computed once per process for a space's times and costs:
        simulating it takes seconds)."""
        if self._identity not in _ON_SECONDS_RANGE:
            points = np.linspace(*self.seconds_range(), SECONDS_POINTS)
            _ON_SECONDS_RANGE[self._identity] = (points, self.random_curve_seconds(points))
        return _ON_SECONDS_RANGE[self._identity]

    @cached_property
    def _identity(self) -> bytes:
        """What the statistics over seconds depend on: the times and the costs."""
        costs = b"" if self.costs is None else np.ascontiguousarray(self.costs).tobytes()
        return hashlib.sha256(np.ascontiguousarray(self.sorted_times).tobytes() + b"|" + costs
                              + str((self.n_total, self.seconds_per_evaluation)).encode()).digest()

    def seconds_range(self) -> tuple[float, float]:
        """Seconds from random search over seconds reaching the p=0.5 cutoff to reaching p=0.96
        (computed once per process for a space's times and costs)."""
        if self._identity not in _SECONDS_RANGE:
            _SECONDS_RANGE[self._identity] = self._find_seconds_range()
        return _SECONDS_RANGE[self._identity]

    def _find_seconds_range(self) -> tuple[float, float]:
        if self.seconds_per_evaluation <= 0:
            return math.nan, math.nan
        if self.equal_costs:
            low, high = self.score_range()
            cost = self.seconds_per_evaluation if self.costs is None else float(self.costs[0])
            return low * cost, high * cost
        # the curve only falls as time goes on: the first point at or under each cutoff of a grid
        # from the cheapest config's cost to a few times where equal costs would end the range
        # (all of the space's seconds where that is not far enough)
        assert self.costs is not None  # unequal costs, the recorded ones
        reach = min(self.n_total, 4 * self.score_range()[1] + 16) * self.seconds_per_evaluation
        first = float(np.min(self.costs[self.costs > 0], initial=self.seconds_per_evaluation))
        for last in (reach, float(np.sum(self.costs))):
            grid = np.geomspace(min(first, last / 2), last, _RANGE_GRID)
            curve = self._simulated_best_at(grid, most=RANDOM_ORDERS)  # the range: one batch is close enough
            if curve[-1] <= self.cutoff(SCORE_RANGE[1]):
                break
        low, high = (float(grid[min(int(np.searchsorted(-curve, -self.cutoff(p), side="left")), len(grid) - 1)])
                     for p in SCORE_RANGE)
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
    seconds: float | None = None  # simulated seconds per tuning, besides the budgets (None: no limit)
    batch: int = 1  # configs each tunekit strategy was asked for at a time
    _tables: dict = field(default_factory=dict, repr=False)

    def runs_of(self, space: str, strategy: str) -> list[Run]:
        return sorted((r for r in self.runs if r.space == space and r.strategy == strategy), key=lambda r: r.seed)


def best_so_far(times_ms: np.ndarray | Sequence[float], worst: float) -> np.ndarray:
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
    points, random = stats.random_on_seconds_range
    if budget is not None:
        within = points <= budget * stats.seconds_per_evaluation
        points, random = points[within], random[within]
        if not len(points):
            return math.nan
    mean = np.mean([curve_at_seconds(best, seconds, points, stats.worst) for best, seconds in runs], axis=0)
    return standardised_score(random, mean, stats.optimum)


def first_reaching(best: np.ndarray, target_ms: float) -> int | None:
    """The 1-based evaluation at which ``best`` first reaches ``target_ms``; None if never (censored)."""
    hits = np.nonzero(best <= target_ms)[0]
    return int(hits[0]) + 1 if len(hits) else None


def bootstrap_interval(
    statistic: Callable[[np.ndarray], float], seeds: int, resamples: int = 1000, confidence: float = 0.95,
    rng: np.random.Generator | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap over seeds (``scipy.stats.bootstrap``): ``statistic(indices)`` is
    recomputed on resampled seed indices. Pass one function that computes both sides of a
    comparison from the same indices and the interval is paired. ``rng``: the resamples, fixed
    by default so that a report is written the same twice.

    NaN where the statistic is NaN on every resample (a score with no range: over seconds on a
    space without costs), and for fewer than two seeds (no interval); where it is NaN on some
    resamples only, the interval of the others."""
    from scipy.stats import DegenerateDataWarning, bootstrap

    if seeds < 2:
        return math.nan, math.nan
    generator = rng or np.random.default_rng(0)
    # scipy >= 1.15 takes the generator as rng (random_state is on its way out); 1.10 as random_state
    seeded = {"rng" if "rng" in inspect.signature(bootstrap).parameters else "random_state": generator}
    with warnings.catch_warnings():  # a constant or NaN statistic: its interval says so
        warnings.simplefilter("ignore", DegenerateDataWarning)
        result = bootstrap((np.arange(seeds),), statistic, n_resamples=resamples, vectorized=False,
                           confidence_level=confidence, method="percentile", **seeded)
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    distribution = np.asarray(result.bootstrap_distribution, dtype=float)
    if math.isnan(low) and np.isfinite(distribution).any():  # scipy's is NaN if any resample's is
        tail = (1 - confidence) / 2 * 100
        low, high = (float(v) for v in np.nanpercentile(distribution, [tail, 100 - tail]))
    return low, high
