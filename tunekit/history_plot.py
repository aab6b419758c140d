"""The history of one tuning as a figure (``tunekit store plot RUN``), as Optuna plots a study's.

Two panels share the y axis, the median time of each trial (log scale): against the evaluation's
position in the run and against the seconds since the run started. Each evaluation is a dot
coloured by its status (failed ones, which have no time, sit on the bottom edge, so none is
hidden), and a step line follows the best time found so far. The finalists' re-timings are not
evaluations (the search proposed nothing new): they are drawn as diamonds above the evaluation of
the same config, and the winner is ringed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: Colours by trial status; any other status is drawn in grey.
STATUS_COLOURS = {"ok": "tab:blue", "wrong": "tab:red", "compile_error": "tab:orange", "timeout": "tab:purple",
                  "out_of_resources": "tab:brown", "runtime_error": "tab:pink", "crashed": "black"}


def best_so_far(times: Sequence[float | None]) -> list[float | None]:
    """The best (lowest) time among the trials so far, None until one has a time."""
    best: float | None = None
    out: list[float | None] = []
    for time_ms in times:
        if time_ms is not None and (best is None or time_ms < best):
            best = time_ms
        out.append(best)
    return out


def split_history(trials: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]],
                                                                  list[tuple[int, Mapping[str, Any]]]]:
    """The run's evaluations (store rows in the order measured, what the search proposed, the
    store's answers included) and its finalists' re-timings, each with the position (from 1) of
    the last evaluation of its config."""
    evaluations = [row for row in trials if row.get("source") != "retimed"]
    position = {row["config"]: i for i, row in enumerate(evaluations, start=1)}
    retimed = [(position.get(row["config"], len(evaluations)), row) for row in trials if row.get("source") == "retimed"]
    return evaluations, retimed


def plot_history(run: Mapping[str, Any], trials: Sequence[Mapping[str, Any]], path: str | Path,
                 winner_id: int | None = None) -> Path:
    """Draw the trials of ``run`` (store rows, in the order measured) to ``path``, an image in the
    format its suffix names (PNG, SVG, PDF, ...), which must not exist (``FileExistsError``:
    tunekit does not overwrite files). A suffix matplotlib cannot write is a ``ValueError``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    image_format = Path(path).suffix.lstrip(".").lower()
    formats = plt.gcf().canvas.get_supported_filetypes()
    plt.close()
    if image_format not in formats:
        raise ValueError(f"{path}: the image format is named by the suffix, one of "
                         f"{', '.join('.' + name for name in sorted(formats))}")

    evaluations, retimed = split_history(trials)
    times = [row["median_ms"] if row["status"] == "ok" else None for row in evaluations]
    best = best_so_far(times)
    positions = list(range(1, len(evaluations) + 1))
    seconds = [max(0.0, row["created_at"] - run["started_at"]) for row in evaluations]
    measured = [t for t in times if t is not None] + [row["median_ms"] for _, row in retimed]
    floor = min(measured) * 0.9 if measured else 1.0
    # a re-timing sits above its config's evaluation, and at its own time
    retimed_positions = [position for position, _ in retimed]
    retimed_seconds = [max(0.0, row["created_at"] - run["started_at"]) for _, row in retimed]
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True, constrained_layout=True)
    for ax, x, retimed_x, label in ((axes[0], positions, retimed_positions, "evaluation"),
                                    (axes[1], seconds, retimed_seconds, "seconds since the run started")):
        for status in dict.fromkeys(row["status"] for row in evaluations):
            chosen = [i for i, row in enumerate(evaluations) if row["status"] == status]
            ax.scatter([x[i] for i in chosen], [times[i] if times[i] is not None else floor for i in chosen],
                       s=18, color=STATUS_COLOURS.get(status, "grey"), label=status, zorder=3,
                       marker="o" if status == "ok" else "x")
        drawn = [(x[i], b) for i, b in enumerate(best) if b is not None]
        if drawn:
            ax.step([p for p, _ in drawn], [b for _, b in drawn], where="post", color="black", linewidth=1.2,
                    label="best so far")
        if retimed:
            ax.scatter(retimed_x, [row["median_ms"] for _, row in retimed], s=30, marker="D", color="tab:cyan",
                       label="finalist re-timed", zorder=3)
        shown = [(x[i], times[i]) for i, row in enumerate(evaluations) if row["id"] == winner_id]
        shown += [(rx, row["median_ms"]) for rx, (_, row) in zip(retimed_x, retimed) if row["id"] == winner_id]
        for wx, wy in shown:
            ax.scatter([wx], [wy], s=120, facecolors="none", edgecolors="green", linewidths=1.6, label="winner",
                       zorder=4)
        ax.set_xlabel(label)
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("median time (ms); failed evaluations on the bottom edge")
    axes[0].xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[1].legend(loc="best", fontsize=8)
    finalists = f", {len(retimed)} finalists re-timed" if retimed else ""
    figure.suptitle(f"{run['kernel_name']} on {run['device']}, key {run['key']}\n"
                    f"{run['strategy']}, {len(evaluations)} evaluations{finalists}, run {run['run_id'][:12]}",
                    fontsize=9)
    target = Path(path)
    try:
        with open(target, "xb") as handle:
            figure.savefig(handle, format=image_format, dpi=120)
    except FileExistsError:
        raise FileExistsError(f"{target} exists; tunekit does not overwrite files. Choose another name.") from None
    finally:
        plt.close(figure)
    return target
