"""Tuning-curve figures of a comparison (matplotlib, no display needed)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from . import metrics
from .metrics import Comparison


def slug(name: str) -> str:
    """A space's name made safe for a file name (``curves-<slug>.png``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")


def _pyplot():
    """matplotlib's pyplot, drawing to files only (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _band(ax, x, curves: np.ndarray, label: str, color) -> None:
    low, median, high = np.percentile(curves, [25, 50, 75], axis=0)
    ax.plot(x, median, color=color, label=label, linewidth=1.6)
    ax.fill_between(x, low, high, color=color, alpha=0.2, linewidth=0)


def _style(ax, xlabel: str) -> None:
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

    ax.set_xlabel(xlabel)
    ax.set_ylabel("best time found / optimum")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.2, 1.5, 2.0, 3.0, 5.0)))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(bottom=0.98)
    ax.axhline(1.02, color="grey", linewidth=0.8, linestyle=":")
    ax.grid(True, which="both", alpha=0.3)


def _space_curves(comparison: Comparison, space: str, strategy: str, points: np.ndarray, seconds: bool):
    stats = comparison.stats[space]
    curves = []
    for run in comparison.runs_of(space, strategy):
        best = metrics.best_so_far(run.times_ms, stats.worst)
        if seconds:
            curves.append(metrics.curve_at_seconds(best, run.seconds, points, stats.worst))
        else:
            curves.append(metrics.curve_at(best, points, stats.worst))
    return np.array(curves) / stats.optimum


def plot_comparison(comparison: Comparison, out: Path) -> dict[str, Path]:
    """``curves.png`` over all spaces and ``curves-<space>.png`` for each space."""
    plt = _pyplot()
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    written = {}
    for space in comparison.spaces:
        stats, budget = comparison.stats[space], comparison.budgets[space]
        timed = comparison.spaces[space].has_costs and stats.seconds_per_evaluation > 0
        fig, axes = plt.subplots(1, 2 if timed else 1, figsize=(11 if timed else 5.5, 4), squeeze=False)
        evaluations = np.arange(1, budget + 1)
        seconds = np.linspace(0, budget * stats.seconds_per_evaluation, 200)[1:] if timed else None
        for i, strategy in enumerate(comparison.strategies):
            color = colors[i % len(colors)]
            _band(axes[0, 0], evaluations, _space_curves(comparison, space, strategy, evaluations, False), strategy,
                  color)
            if seconds is not None:  # timed
                _band(axes[0, 1], seconds, _space_curves(comparison, space, strategy, seconds, True), strategy, color)
        axes[0, 0].plot(evaluations, stats.random_curve(evaluations) / stats.optimum, "k--", linewidth=1,
                        label="random (calculated)")
        _style(axes[0, 0], "evaluations")
        if seconds is not None:  # timed
            axes[0, 1].plot(seconds, stats.random_curve_seconds(seconds, metrics.RANDOM_ORDERS) / stats.optimum, "k--",
                            linewidth=1, label="random (expected)")
            _style(axes[0, 1], "simulated tuning seconds (compile + benchmark + strategy)")
        axes[0, 0].legend(fontsize=8)
        fig.suptitle(f"{space}: median and interquartile range over {comparison.seeds} seeds", fontsize=10)
        fig.tight_layout()
        path = out / f"curves-{slug(space)}.png"
        fig.savefig(path, dpi=150)
        plt.close(fig)
        written[f"curves figure {space}"] = path

    fig = aggregate_figure(comparison)
    path = out / "curves.png"
    fig.savefig(path, dpi=150)
    plt.close(fig)
    written["curves figure"] = path  # "curves" is the CSV
    return written


def aggregate_figure(comparison: Comparison):
    """The figure of ``curves.png``: every (space, seed) curve against the fraction of its space's
    budget, and the baseline the score is computed against, random search's expected best (the
    median over spaces of each space's, as the strategies' line is a median)."""
    plt = _pyplot()

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fractions = np.linspace(0.01, 1.0, 100)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    timed_spaces = [s for s in comparison.spaces if comparison.stats[s].seconds_per_evaluation > 0]
    for i, strategy in enumerate(comparison.strategies):
        color = colors[i % len(colors)]
        by_evals = np.vstack([
            _space_curves(comparison, s, strategy, _evaluations_at(comparison, s, fractions), False)
            for s in comparison.spaces])
        _band(axes[0], fractions, by_evals, strategy, color)
        if timed_spaces:
            by_time = np.vstack([
                _space_curves(comparison, s, strategy, _seconds_at(comparison, s, fractions), True)
                for s in timed_spaces])
            _band(axes[1], fractions, by_time, strategy, color)
    random = [comparison.stats[s].random_curve(_evaluations_at(comparison, s, fractions)) / comparison.stats[s].optimum
              for s in comparison.spaces]
    axes[0].plot(fractions, np.median(random, axis=0), "k--", linewidth=1,
                 label="random (calculated), median over spaces")
    if timed_spaces:
        random = [comparison.stats[s].random_curve_seconds(_seconds_at(comparison, s, fractions), metrics.RANDOM_ORDERS)
                  / comparison.stats[s].optimum for s in timed_spaces]
        axes[1].plot(fractions, np.median(random, axis=0), "k--", linewidth=1,
                     label="random (expected), median over spaces")
        axes[1].legend(fontsize=8)
    _style(axes[0], "evaluations, as a fraction of each space's budget")
    _style(axes[1], "tuning time / (budget x mean evaluation cost)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{len(comparison.spaces)} spaces x {comparison.seeds} seeds: median and interquartile range",
                 fontsize=10)
    fig.tight_layout()
    return fig


def _evaluations_at(comparison: Comparison, space: str, fractions: np.ndarray) -> np.ndarray:
    return np.maximum(1, np.ceil(fractions * comparison.budgets[space]))


def _seconds_at(comparison: Comparison, space: str, fractions: np.ndarray) -> np.ndarray:
    return fractions * comparison.budgets[space] * comparison.stats[space].seconds_per_evaluation
