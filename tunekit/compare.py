"""``tunekit compare``: every strategy on the same recorded spaces, with the literature's statistics.

Each (space, strategy, seed) is one replayed tuning through the same search loop the Autotuner
uses (``tunekit.search.run_search``) with the replay backend, so evaluations are counted as in a
live tuning: failures count, first visits only. Outputs, in ``out``:

* ``summary.csv``: one row per (space, strategy, seed);
* ``curves.csv``: best-so-far after every evaluation, with cumulative simulated seconds;
* ``report.md``: per-space and aggregate tables (medians over seeds with success rates, the
  calculated random-search baseline, scores with bootstrap confidence intervals);
* ``curves.png`` and ``curves-<space>.png``: median best-so-far over the optimum, with an
  interquartile band, against evaluations and against seconds, beside calculated random search.

A replay's seed comes from the user's seed and the space's content (``RecordedSpace.digest``);
a budget that ends inside a space's score range is warned about (``short_budgets``).
"""

from __future__ import annotations

import csv
import functools
import importlib.util
import logging
import math
import os
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from . import kerneltuner, metrics
from .budget import Budget
from .metrics import THRESHOLDS, Comparison, Run, SpaceStats
from .plots import plot_comparison, slug  # noqa: F401 - slug re-exported: tunekit.compare.slug
from .recorded import RecordedSpace, read_space
from .replay import ReplayEvaluator
from .deadline import SimulatedClock
from .search import SearchResult, check_batch, run_search
from .strategy import SearchContext, Strategy, derive_seed, make_strategy
from .trial import Trial

logger = logging.getLogger(__name__)


def replay(recorded: RecordedSpace, strategy: str | Strategy, seed: int, evals: int, seconds: float | None = None,
           history: Sequence[RecordedSpace] = (), batch: int = 1) -> Run:
    """One tuning of ``recorded`` by ``strategy``, answered from the records; ``history``: spaces
    of the same kernel at other shapes, given to the strategy as the store's earlier trials.
    ``batch``: configs in flight, asked for and not yet told (``replay_search``).
    The strategy's seed comes from ``seed`` and the space's content (``RecordedSpace.digest``),
    not its name or path: a moved file replays the same.
    ``strategy``: as ``check_strategy`` takes it, resolved here (in a worker process too), or a
    Strategy instance (a design variant with its own options)."""
    if isinstance(strategy, str) and kerneltuner.is_kernel_tuner(strategy):  # they get no history
        check_replay_batch(strategy, batch)
        return kerneltuner.replay_kernel_tuner(recorded, strategy, seed, evals, seconds)
    result = replay_search(recorded, strategy, seed, evals, seconds,
                           [trial for other in history for trial in other.trials()], batch)
    return Run(recorded.name, strategy if isinstance(strategy, str) else strategy.name, seed, evals,
               np.array([step.trial.time_ms for step in result.steps], dtype=float),
               np.array([step.seconds for step in result.steps], dtype=float))


def replay_search(recorded: RecordedSpace, strategy: str | Strategy, seed: int, evals: int,
                  seconds: float | None = None, stored: Sequence[Trial] = (), batch: int = 1) -> SearchResult:
    """``replay``'s tuning by a tunekit strategy, the store holding ``stored`` (any trials: whole
    recorded spaces, or what earlier tunings measured), with every step's trial: which configs it
    measured, not only their times. Kernel Tuner's strategies (``kt:``) take no store: ``replay``.
    ``batch``: configs in flight: the strategy is asked for ``batch``, then told each trial in the
    order asked and asked for one more (``Search``), so ``batch - 1`` are pending at each later
    ask. 1 by default, which the protocol's replays use; a live tuning on a GPU keeps one per
    compile worker and two more in flight for a strategy that learns from its trials
    (``tunekit.session``: 18 where 16 or more CPUs are usable, unless ``compile_workers`` is set),
    16 per worker for one that does not."""
    if isinstance(strategy, str) and kerneltuner.is_kernel_tuner(strategy):
        raise ValueError(f"replay_search({strategy!r}): Kernel Tuner's strategies are replayed by replay(), "
                         "without a store")
    context = SearchContext(recorded.space(), Budget(evals=evals, seconds=seconds), recorded.key(),
                            derive_seed(seed, recorded.digest), tuple(stored))
    return run_search(make_strategy(strategy), context, ReplayEvaluator(recorded), clock=SimulatedClock(), batch=batch)


def check_replay_batch(strategy: str | Strategy, batch: object) -> int:
    """``batch`` if ``strategy`` can be replayed with that many configs in flight, else
    ``ValueError`` naming the problem: a batch that is not an int of at least 1, or one other than
    1 for Kernel Tuner's strategies, which are replayed one config at a time."""
    batch = check_batch(batch)
    if batch != 1 and isinstance(strategy, str) and kerneltuner.is_kernel_tuner(strategy):
        raise ValueError(f"{strategy}: Kernel Tuner's strategies are replayed one config at a time, not "
                         f"batch={batch}")
    return batch


def check_strategy(spec: str) -> str:
    """``spec`` if ``replay`` can run it, else ``ValueError`` naming it: a registered name, an
    importable ``module:Class`` (a Strategy subclass), or Kernel Tuner's ``kt:NAME``."""
    if kerneltuner.is_kernel_tuner(spec):
        kerneltuner.check_strategy(spec)
        return spec
    try:
        make_strategy(spec)
    except TypeError as error:  # a class whose __init__ needs arguments
        raise ValueError(f"strategy {spec!r} cannot be made without arguments: {error}") from error
    return spec


_loaded: dict[str, RecordedSpace] = {}


def _load(path: str, name: str) -> RecordedSpace:
    if path not in _loaded:  # each worker process reads a file once
        _loaded[path] = read_space(path, name)
    return _loaded[path]


def _replay_task(path: str, name: str, strategy: str, seed: int, evals: int, seconds: float | None,
                 history: Sequence[tuple[str, str]] = (), batch: int = 1) -> Run:
    return replay(_load(path, name), strategy, seed, evals, seconds, [_load(p, n) for p, n in history], batch)


def same_kernel_elsewhere(spaces: Mapping[str, RecordedSpace]) -> dict[str, list[str]]:
    """For each space, the other spaces of the same kernel, device and parameters at other keys:
    what the store would hold when a new shape is tuned (leave one shape out)."""
    def kernel(space: RecordedSpace) -> tuple:
        return space.kernel_name, space.device, tuple(space.param_names)

    return {name: [other for other, o in spaces.items() if kernel(o) == kernel(space) and o.key() != space.key()]
            for name, space in spaces.items()}


def run_comparison(
    paths: Sequence[str | os.PathLike],
    strategies: Sequence[str],
    seeds: int,
    budget: int | None = None,
    seconds: float | None = None,
    jobs: int = 1,
    progress: bool | None = False,
    thresholds: Sequence[float] = (),
    transfer: bool = False,
    budget_cap: int | None = None,
    batch: int = 1,
) -> Comparison:
    """Replay every (space, strategy, seed). ``budget=None`` gives each space the evaluations at
    which calculated random search reaches the end of the score range (its p = 0.96 cutoff),
    over evaluations and, at the mean cost, over seconds.
    ``transfer``: each tuning starts with the store holding the other given spaces of the same
    kernel (``same_kernel_elsewhere``), as a new shape would. ``budget_cap``: no budget above it.
    ``batch``: configs each tunekit strategy has in flight (``replay_search``; a live tuning on a
    GPU keeps a learning strategy's compile workers busy and two more); Kernel Tuner's strategies
    ask for one at a time.
    ``progress``: a progress bar on stderr (tqdm): True always, None where stderr is a terminal."""
    if seeds < 1:
        raise ValueError(f"seeds must be an int >= 1. Got {seeds} instead.")
    for strategy in strategies:  # an unknown name, or a batch it cannot take, fails here before any work
        check_strategy(strategy)
        check_replay_batch(strategy, batch)
    spaces: dict[str, RecordedSpace] = {}
    sources: dict[str, str] = {}
    for path in paths:
        space = read_space(path)
        if space.name in spaces:
            raise ValueError(f"two spaces are named {space.name!r} ({sources[space.name]} and {path})")
        if not len(space.valid_times):
            raise ValueError(f"{path}: no config of the space ran; nothing to compare")
        spaces[space.name], sources[space.name] = space, str(path)
    stats = {name: SpaceStats.of(space) for name, space in spaces.items()}
    budgets = {name: budget or _default_budget(stats[name], spaces[name].has_costs) for name in spaces}
    if budget_cap is not None:
        budgets = {name: min(budget_cap, value) for name, value in budgets.items()}
    extra = [t for t in thresholds if t not in THRESHOLDS]
    if any(t < 1 for t in extra):
        raise ValueError(f"thresholds are ratios to the optimum, >= 1 (1.02 = within 2 %). Got {extra} instead.")
    comparison = Comparison(spaces, stats, budgets, list(strategies), seeds, thresholds=(*THRESHOLDS, *sorted(extra)),
                            seconds=seconds, batch=batch)
    short = short_budgets(comparison)
    if short:
        logger.warning("%s", short_budget_warning(short))
    elsewhere = same_kernel_elsewhere(spaces) if transfer else {name: [] for name in spaces}
    tasks = [(sources[name], name, strategy, seed, budgets[name], seconds,
              [(sources[other], other) for other in elsewhere[name]], batch)
             for name in spaces for strategy in strategies for seed in range(seeds)]
    with tqdm(total=len(tasks), desc="replaying", unit="tuning", file=sys.stderr,
              disable=None if progress is None else not progress) as bar:
        if jobs > 1:
            with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
                futures = [pool.submit(_replay_task, *task) for task in tasks]
                for future in futures:
                    comparison.runs.append(future.result())
                    bar.update()
        else:
            _loaded.update({sources[name]: space for name, space in spaces.items()})
            for task in tasks:
                comparison.runs.append(_replay_task(*task))
                bar.update()
    return comparison


def _default_budget(stats: SpaceStats, timed: bool) -> int:
    """Evaluations that cover the score range: over evaluations, and over seconds at the mean
    cost (heavy-tailed compile times can put the seconds range's end further out)."""
    evaluations = stats.score_range()[1]
    if timed and stats.seconds_per_evaluation > 0:
        evaluations = max(evaluations, stats.seconds_range()[1] / stats.seconds_per_evaluation)
    return max(1, math.ceil(evaluations))


@dataclass(frozen=True)
class ShortBudget:
    """A space's budget that ends inside its score range: the budget, and what would cover the range."""

    option: str  # the option that is short: "--budget" (evaluations) or "--seconds"
    budget: float
    covering: float

    def __str__(self) -> str:
        if self.option == "--budget":
            return f"{self.budget:g} evaluations, {self.covering:g} cover it"
        return f"{self.budget:g} s, about {self.covering:.3g} s cover it at the mean evaluation cost"


def short_budgets(comparison: Comparison) -> dict[str, ShortBudget]:
    """The spaces whose budget ends inside their score range, with what would cover the range
    (``_default_budget`` evaluations; over seconds, as many at the mean cost). There a strategy
    stops while the calculated random search it is scored against goes on improving: its
    score falls, below 0 if the budget is short enough, through no fault of its own."""
    short = {}
    for name, budget in comparison.budgets.items():
        stats, timed = comparison.stats[name], comparison.spaces[name].has_costs
        covering = _default_budget(stats, timed)
        if budget < covering:
            short[name] = ShortBudget("--budget", budget, covering)
        elif comparison.seconds is not None and timed and comparison.seconds < covering * stats.seconds_per_evaluation:
            short[name] = ShortBudget("--seconds", comparison.seconds, covering * stats.seconds_per_evaluation)
    return short


def short_budget_warning(short: Mapping[str, ShortBudget]) -> str:
    """What the log and the report say of ``short_budgets``."""
    spaces = "; ".join(f"{name}: {budget}" for name, budget in short.items())
    options = sorted({b.option for b in short.values()})
    cover = " and ".join(f"{option} {max(b.covering for b in short.values() if b.option == option):.4g}"
                         for option in options)
    return (f"the budget ends inside the score range of {len(short)} space(s) ({spaces}): a strategy is scored "
            "there against calculated random search going on after it stopped, and its score falls, below 0 "
            f"if the budget is short enough. {cover} cover(s) every one")


# -- statistics per run and per strategy ----------------------------------------------------------


def _best(run: Run, stats: SpaceStats) -> np.ndarray:
    return metrics.best_so_far(run.times_ms, stats.worst)


@dataclass(frozen=True)
class _ScoreTable:
    """One (space, strategy): the calculated random curve and every seed's curve on the score
    range, so that the score of any resample of seeds is the mean of some rows (fast bootstraps)."""

    random: np.ndarray
    curves: np.ndarray  # seeds x points
    optimum: float

    def score(self, seeds: Sequence[int] | np.ndarray | None = None) -> float:
        if self.curves.size == 0:
            return math.nan
        rows = self.curves if seeds is None else self.curves[np.asarray(seeds)]
        return metrics.standardised_score(self.random, rows.mean(axis=0), self.optimum)


def _table(comparison: Comparison, space: str, strategy: str, seconds: bool) -> _ScoreTable:
    runs = comparison.runs_of(space, strategy)
    key = (space, strategy, seconds, len(runs))  # runs added later make a new table
    cache = comparison._tables
    if key not in cache:
        stats = comparison.stats[space]
        if seconds and (not comparison.spaces[space].has_costs or stats.seconds_per_evaluation <= 0):
            table = _ScoreTable(np.array([]), np.empty((0, 0)), stats.optimum)
        elif seconds:
            points, random = stats.random_on_seconds_range
            table = _ScoreTable(random,
                                np.array([metrics.curve_at_seconds(_best(r, stats), r.seconds, points, stats.worst)
                                          for r in runs]), stats.optimum)
        else:
            points = metrics.evaluation_points(stats)
            table = _ScoreTable(stats.random_curve(points),
                                np.array([metrics.curve_at(_best(r, stats), points, stats.worst) for r in runs]),
                                stats.optimum)
        cache[key] = table
    return cache[key]


def _score(comparison: Comparison, space: str, strategy: str, seeds=None, seconds: bool = False) -> float:
    """The score of ``strategy`` on ``space`` over the given seed indices (all by default)."""
    return _table(comparison, space, strategy, seconds).score(seeds)


def summary_rows(comparison: Comparison) -> list[dict]:
    rows = []
    for run, position in _with_positions(comparison):
        stats = comparison.stats[run.space]
        best = _best(run, stats)
        found = float(np.min(run.times_ms)) if len(run.times_ms) else math.inf
        row = {
            "space": run.space, "strategy": run.strategy, "seed": run.seed, "budget": run.budget,
            "n_total": stats.n_total, "n_valid": len(stats.sorted_times), "optimum_ms": stats.optimum,
            "best_ms": found if math.isfinite(found) else "",
            "best_over_optimum": found / stats.optimum if math.isfinite(found) else "",
            "evaluations": len(run.times_ms), "tuning_seconds": float(run.seconds[-1]) if len(run.seconds) else 0.0,
        }
        for threshold in comparison.thresholds:
            reached = metrics.first_reaching(best, stats.optimum * threshold)
            row[f"evals_to_{threshold}"] = reached if reached is not None else ""
            row[f"seconds_to_{threshold}"] = float(run.seconds[reached - 1]) if reached is not None else ""
        row["score"] = _score(comparison, run.space, run.strategy, [position])
        row["score_seconds"] = _score(comparison, run.space, run.strategy, [position], seconds=True)
        rows.append(row)
    return rows


def _with_positions(comparison: Comparison):
    """Every run with its row in its (space, strategy) score table, grouped by space and strategy."""
    for space in comparison.spaces:
        for strategy in comparison.strategies:
            yield from ((run, position) for position, run in enumerate(comparison.runs_of(space, strategy)))


def curve_rows(comparison: Comparison) -> list[dict]:
    rows = []
    for run in comparison.runs:
        stats = comparison.stats[run.space]
        for i, (time_ms, best, seconds) in enumerate(zip(run.times_ms, _best(run, stats), run.seconds), 1):
            rows.append({"space": run.space, "strategy": run.strategy, "seed": run.seed, "evaluation": i,
                         "seconds": float(seconds), "time_ms": time_ms if math.isfinite(time_ms) else "",
                         "best_ms": float(best), "best_over_optimum": float(best) / stats.optimum})
    return rows


def runs_from_curves(path: str | os.PathLike, budgets: Mapping[str, int]) -> list[Run]:
    """The runs a ``curves.csv`` (``curve_rows``) holds, so that a comparison can be scored again
    from its outputs; ``budgets``: each space's budget, as the comparison had it."""
    steps: dict[tuple[str, str, int], list[tuple[int, float, float]]] = {}
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            time_ms = float(row["time_ms"]) if row["time_ms"] else math.inf
            steps.setdefault((row["space"], row["strategy"], int(row["seed"])), []).append(
                (int(row["evaluation"]), time_ms, float(row["seconds"])))
    runs = []
    for (space, strategy, seed), rows in steps.items():
        rows.sort()
        runs.append(Run(space, strategy, seed, budgets[space], np.array([r[1] for r in rows]),
                        np.array([r[2] for r in rows])))
    return runs


def _censored_median(values: Sequence[float | None]) -> float:
    """Median with unreached seeds as +inf: finite only if at least half the seeds reached."""
    return float(np.median([math.inf if v is None else v for v in values]))


# -- writing ------------------------------------------------------------------------------------


#: Written into a directory of comparison outputs: files there named as tunekit's are tunekit's.
OUTPUTS_MARKER = ".tunekit-outputs"


def check_output_directory(out: str | os.PathLike) -> None:
    """Raise ``FileExistsError`` when ``out`` is a file, before a comparison runs, so that such a
    ``--out`` costs no replay; a directory holding files tunekit did not write is refused when the
    outputs are written."""
    if Path(out).exists() and not Path(out).is_dir():
        raise FileExistsError(f"{out} is a file, not a directory; choose a new or empty directory for the outputs")


#: What ``write_outputs`` writes besides the per-space figures ``curves-<space>.png``, and the
#: partial tables a crash can leave (``_write_csv``).
_WRITTEN = ("summary.csv", "curves.csv", "report.md", "curves.png", "summary.csv.partial", "curves.csv.partial")
#: Accepted beside the outputs and kept: what ``experiments/kernel_tuner_side_by_side.py`` adds.
_KEPT = ("run.json",)


def _written_by_tunekit(path: Path) -> bool:
    """A file named as ``write_outputs`` names its outputs (only tunekit's in a marked directory)."""
    return path.name in _WRITTEN or (path.name.startswith("curves-") and path.name.endswith(".png"))


def _is_outputs(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink() and (path / OUTPUTS_MARKER).is_file()


def output_directory(out: str | os.PathLike) -> Path:
    """``out``, created if missing and emptied of tunekit's earlier outputs (the figures of
    spaces no longer compared would stay beside the new tables), once it is known that the
    outputs can be written there. Raises ``FileExistsError`` for a file, or a directory holding
    files tunekit did not write, and ``ValueError`` for one that cannot be created."""
    check_output_directory(out)
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"cannot create the output directory {out}: {(error.strerror or str(error)).lower()}; "
                         "choose another path") from None
    marked = (out / OUTPUTS_MARKER).is_file()
    held = list(out.iterdir())
    # files named as ours are ours only where tunekit marked the directory as its outputs';
    # a marked subdirectory is outputs too (tunekit demo's with-store/)
    foreign = [p.name for p in held if not marked or not (
        p.name in (OUTPUTS_MARKER, *_KEPT) or (p.is_file() and _written_by_tunekit(p)) or _is_outputs(p))]
    if foreign:
        raise FileExistsError(f"{out} holds files tunekit did not write ({', '.join(sorted(foreign)[:5])}); "
                              "choose an empty or new directory")
    removed = [p.name for p in held if p.is_file() and _written_by_tunekit(p)]
    for name in removed:
        (out / name).unlink()
    if removed:
        logger.info("removed the earlier outputs in %s: %s", out, ", ".join(sorted(removed)))
    (out / OUTPUTS_MARKER).write_text("the outputs of tunekit compare or tunekit demo: rewritten by the next run\n")
    return out


def clear_outputs(directory: str | os.PathLike) -> None:
    """Remove the outputs tunekit wrote to ``directory`` (nothing where it holds no marker), and
    the directory once nothing else is left in it."""
    directory = Path(directory)
    if not _is_outputs(directory):
        return
    for path in directory.iterdir():
        if path.is_file() and _written_by_tunekit(path):
            path.unlink()
    if [p.name for p in directory.iterdir()] == [OUTPUTS_MARKER]:
        (directory / OUTPUTS_MARKER).unlink()
        directory.rmdir()


def write_outputs(comparison: Comparison, out: str | os.PathLike, command: str = "") -> dict[str, Path]:
    """Write the four outputs; refuses a directory that holds files tunekit did not write."""
    out = output_directory(out)
    written = {"summary": _write_csv(out / "summary.csv", summary_rows(comparison)),
               "curves": _write_csv(out / "curves.csv", curve_rows(comparison))}
    written["report"] = out / "report.md"
    written["report"].write_text(report(comparison, command))
    if importlib.util.find_spec("matplotlib") is None:
        logger.warning("no figures: they need matplotlib (pip install 'tunekit[plots]'); the tables are written")
    else:
        written.update(plot_comparison(comparison, out))
    return written


def _write_csv(path: Path, rows: list[dict]) -> Path:
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]) if rows else [])
        writer.writeheader()
        writer.writerows(rows)
    os.replace(partial, path)
    return path


def _fmt(value: float, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if math.isinf(value):
        return "not reached"
    return f"{value:.{digits}g}" if abs(value) >= 1000 else f"{value:.{digits}f}".rstrip("0").rstrip(".")


def report(comparison: Comparison, command: str = "") -> str:
    """The Markdown report: aggregate scores with paired bootstrap intervals, then one table per space."""
    strategies, seeds = comparison.strategies, comparison.seeds
    lines = ["# Strategy comparison", ""]
    if command:
        lines += [f"Command: `{command}`", ""]
    lines += [f"{len(comparison.spaces)} recorded spaces, strategies {', '.join(strategies)}, {seeds} seeds each; "
              f"written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
              "Evaluations count failures and first visits only. `evals to 1.02` is the median over seeds of the "
              "evaluations until a config within 2 % of the space's optimum was found, with seeds that never got "
              "there counted as not reached; `reached` is the share of seeds that did. The score is "
              "Willemsen et al.'s (0 = calculated random search, 1 = the optimum), averaged over each space's "
              "score range; intervals are 95 % percentile bootstraps over seeds (1,000 resamples of the seeds, "
              "the same for every row; `-` for a single seed).", ""]
    if comparison.batch != 1:
        lines += [f"Each strategy had {comparison.batch} configs in flight: asked for {comparison.batch}, then told "
                  "each trial in the order asked and asked for one more, as a live tuning on a GPU keeps its compile "
                  "workers busy (without a batch, one at a time).", ""]
    short = short_budgets(comparison)
    if short:
        lines += [f"**Warning:** {short_budget_warning(short)}.", ""]

    def aggregate(strategy: str, indices: np.ndarray, seconds: bool = False) -> float:
        values = [_score(comparison, space, strategy, indices, seconds) for space in comparison.spaces]
        values = [v for v in values if not math.isnan(v)]
        return float(np.mean(values)) if values else math.nan

    everyone = np.arange(seeds)
    lines += ["## Aggregate over spaces", "",
              "| strategy | score (evaluations) | 95 % CI | score (seconds) | 95 % CI |", "|---|---|---|---|---|"]
    for strategy in strategies:
        low, high = metrics.bootstrap_interval(lambda idx: aggregate(strategy, idx), seeds)
        slow, shigh = metrics.bootstrap_interval(lambda idx: aggregate(strategy, idx, True), seeds)
        lines.append(f"| {strategy} | {_fmt(aggregate(strategy, everyone))} | [{_fmt(low)}, {_fmt(high)}] | "
                     f"{_fmt(aggregate(strategy, everyone, True))} | [{_fmt(slow)}, {_fmt(shigh)}] |")
    lines.append("| random (calculated) | 0 | | 0 | |")
    if len(strategies) > 1:
        reference = strategies[0]
        lines += ["", f"Paired differences in aggregate score (evaluations) against {reference}, resampling the same "
                  "seeds for both:", "", "| strategy | difference | 95 % CI |", "|---|---|---|"]
        for strategy in strategies[1:]:
            def difference(idx, strategy=strategy):
                return aggregate(strategy, idx) - aggregate(reference, idx)

            low, high = metrics.bootstrap_interval(difference, seeds)
            lines.append(f"| {strategy} - {reference} | {_fmt(difference(everyone))} | [{_fmt(low)}, {_fmt(high)}] |")

    for space, recorded in comparison.spaces.items():
        stats, budget = comparison.stats[space], comparison.budgets[space]
        low, high = stats.score_range()
        lines += ["", f"## {space}", "",
                  f"{stats.n_total} configs ({len(stats.sorted_times)} valid), optimum {_fmt(stats.optimum, 4)} ms, "
                  f"median {_fmt(stats.median, 4)} ms, budget {budget} evaluations, score range "
                  f"{_fmt(low)}-{_fmt(high)} evaluations. Source: `{recorded.source}`."
                  + (f" The budget ends inside the score range ({short[space]})." if space in short else ""), "",
                  "| strategy | " + "".join(f"evals to {t} | reached | " for t in comparison.thresholds)
                  + "best / optimum | score | 95 % CI | score (seconds) |",
                  "|---" * (5 + 2 * len(comparison.thresholds)) + "|"]
        for strategy in strategies:
            runs = comparison.runs_of(space, strategy)
            bests = [_best(r, stats) for r in runs]
            cells = []
            for threshold in comparison.thresholds:
                reached = [metrics.first_reaching(b, stats.optimum * threshold) for b in bests]
                cells += [_fmt(_censored_median(reached)), f"{sum(r is not None for r in reached)}/{len(reached)}"]
            ratio = float(np.median([b[-1] / stats.optimum if len(b) else math.inf for b in bests]))
            ci = metrics.bootstrap_interval(functools.partial(_score, comparison, space, strategy), len(runs))
            lines.append(f"| {strategy} | {' | '.join(cells)} | {_fmt(ratio)} | {_fmt(_score(comparison, space, strategy))} "
                         f"| [{_fmt(ci[0])}, {_fmt(ci[1])}] | {_fmt(_score(comparison, space, strategy, seconds=True))} |")
        expected = "".join(f"{_fmt(stats.random_evaluations_to(stats.optimum * t))} | expected | "
                           for t in comparison.thresholds)
        lines.append(f"| random (calculated) | {expected}"
                     f"{_fmt(float(stats.random_curve([budget])[0]) / stats.optimum)} | 0 | | 0 |")
    return "\n".join(lines) + "\n"

