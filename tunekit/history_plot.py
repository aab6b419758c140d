"""The history of one tuning as a figure (``tunekit store plot RUN``), as Optuna plots a study's.

Two panels share the y axis, the median time of each trial (log scale): against the trial's
position in the run and against the seconds since the run started. Each trial is a dot coloured
by its status (failed trials, which have no time, sit on the bottom edge, so none is hidden), and
a step line follows the best time found so far; the winner is ringed.
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


def plot_history(run: Mapping[str, Any], trials: Sequence[Mapping[str, Any]], path: str | Path,
                 winner_id: int | None = None) -> Path:
    """Draw the trials of ``run`` (store rows, in the order measured) to the PNG ``path``, which
    must not exist (``FileExistsError``: tunekit does not overwrite files)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times = [row["median_ms"] if row["status"] == "ok" else None for row in trials]
    best = best_so_far(times)
    positions = list(range(1, len(trials) + 1))
    seconds = [max(0.0, row["created_at"] - run["started_at"]) for row in trials]
    measured = [t for t in times if t is not None]
    floor = min(measured) * 0.9 if measured else 1.0
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True, constrained_layout=True)
    for ax, x, label in ((axes[0], positions, "trial"), (axes[1], seconds, "seconds since the run started")):
        for status in dict.fromkeys(row["status"] for row in trials):
            chosen = [i for i, row in enumerate(trials) if row["status"] == status]
            ax.scatter([x[i] for i in chosen], [times[i] if times[i] is not None else floor for i in chosen],
                       s=18, color=STATUS_COLOURS.get(status, "grey"), label=status, zorder=3,
                       marker="o" if status == "ok" else "x")
        drawn = [(x[i], b) for i, b in enumerate(best) if b is not None]
        if drawn:
            ax.step([p for p, _ in drawn], [b for _, b in drawn], where="post", color="black", linewidth=1.2,
                    label="best so far")
        for i, row in enumerate(trials):
            if row["id"] == winner_id:
                ax.scatter([x[i]], [times[i]], s=120, facecolors="none", edgecolors="green", linewidths=1.6,
                           label="winner", zorder=4)
        ax.set_xlabel(label)
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("median time (ms); failed trials on the bottom edge")
    axes[1].legend(loc="upper right", fontsize=8)
    figure.suptitle(f"{run['kernel_name']} on {run['device']}, key {run['key']}\n"
                    f"{run['strategy']}, {len(trials)} trials, run {run['run_id'][:12]}", fontsize=9)
    target = Path(path)
    try:
        with open(target, "xb") as handle:
            figure.savefig(handle, format="png", dpi=120)
    except FileExistsError:
        raise FileExistsError(f"{target} exists; tunekit does not overwrite files. Choose another name.") from None
    finally:
        plt.close(figure)
    return target
