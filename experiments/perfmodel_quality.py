"""Held-out quality of the perf models on the shipped H200 spaces, leaving one shape out.

For every kernel recorded at several shapes and every one of its shapes: the model is fit on the
other shapes' trials (as a store holding them would give) and predicts the held-out shape, which
it never saw. Reported per (model, kernel, held-out shape): Spearman's rank correlation between
predicted and measured time over the configs that ran, whether the measured best config is in
the predicted top k (k = 1, 5, 10), and the best measured time among the predicted top 10 over
the optimum (what ``prune_configs_by={"perf_model": ..., "top_k": 10}`` would find).

    python experiments/perfmodel_quality.py [--out experiments/results/perfmodel_quality.md]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr
from sklearn.ensemble import HistGradientBoostingRegressor

from tunekit.kernels import shipped
from tunekit.perfmodels import PerfModel, RandomForest

TOP_K = (1, 5, 10)


def models(space):
    return {
        "random forest": RandomForest(space, n_estimators=64),
        "gradient boosting": PerfModel(space, HistGradientBoostingRegressor(random_state=0)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="also write the table (markdown) here")
    args = parser.parse_args()
    index = shipped.index()["spaces"]
    kernels = sorted({row["kernel"] for row in index if sum(r["kernel"] == row["kernel"] for r in index) > 1})
    lines = ["| model | kernel | held-out shape | trained on | Spearman | best in top 1 | top 5 | top 10 "
             "| best of top 10 / optimum |", "|---|---|---|---|---|---|---|---|---|"]
    summary: dict[str, list[tuple]] = {}
    for kernel in kernels:
        shapes = [row["shape"] for row in index if row["kernel"] == kernel]
        spaces = {shape: shipped.load(kernel, shape) for shape in shapes}
        for held_out, target in spaces.items():
            training = [t for shape, other in spaces.items() if shape != held_out for t in other.trials()]
            ok = [r for r in target.records if r.ok]
            configs = [target.config(r) for r in ok]
            measured = np.array([r.time_ms for r in ok])
            for name, model in models(target.space()).items():
                predicted = model.fit(training).predict_log(configs, target.key())
                rho = spearmanr(predicted, measured).statistic
                order = np.argsort(predicted, kind="stable")
                best = int(np.argmin(measured))
                hits = [best in order[:k] for k in TOP_K]
                top10 = measured[order[:10]].min() / measured.min()
                summary.setdefault(name, []).append((rho, *hits, top10))
                lines.append(f"| {name} | {kernel} | {held_out} | {', '.join(s for s in shapes if s != held_out)} "
                             f"| {rho:.2f} | {'yes' if hits[0] else 'no'} | {'yes' if hits[1] else 'no'} "
                             f"| {'yes' if hits[2] else 'no'} | {top10:.3f} |")
    lines.append("")
    lines.append("| model | median Spearman | best in top 1 | top 5 | top 10 | median best of top 10 / optimum |")
    lines.append("|---|---|---|---|---|---|")
    for name, rows in summary.items():
        columns = list(zip(*rows))
        lines.append(f"| {name} | {statistics.median(columns[0]):.2f} | "
                     + " | ".join(f"{sum(c)} of {len(c)}" for c in columns[1:4])
                     + f" | {statistics.median(columns[4]):.3f} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
