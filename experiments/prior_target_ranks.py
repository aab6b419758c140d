"""How far down the store's prior ranks this shape's near-optimal configs, by what the prior learns.

    python experiments/prior_target_ranks.py [--corpus MANIFEST] [--seeds 3] [--within 0.05]

``DefaultSearch``'s prior is a forest fit on every stored shape's trials (key features beside the
config's) that predicts log time here; its ranking is one of the warm start's turns and its
prediction a feature of the search's own forest. Fit on raw log times, its first splits go to the
key features, which explain most of the variance across shapes and nothing of the ranking at one
shape. This screen fits it four ways on the other shapes of each space of corpus v2 whose kernel
is recorded elsewhere (the store of a transfer replay: whole recorded spaces):

- ``log time``: as it ships;
- ``log slowdown``: each trial's time over its shape's fastest, so the trees spend their splits on
  the configs and their interplay with the key;
- ``standardised``: each shape's log times less their mean, over their standard deviation, as
  transfer Bayesian optimisation standardises each task's outputs;
- ``rank``: each trial's rank among its shape's, from 0 (fastest) to 1.

and prints, per space, the rank in each prior's order (configs it expects to fail, by
``DefaultSearch``'s ``failure_threshold``, last) of the first config within ``--within`` of the
optimum, the median over ``--seeds`` forests. From the recordings alone; minutes on one core.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from leave_family_out import _spaces

from tunekit.compare import same_kernel_elsewhere
from tunekit.perfmodels import RandomForest, relative_to_fastest
from tunekit.strategies import DefaultSearch
from tunekit.trial import Timing, Trial

TARGETS = ("log time", "log slowdown", "standardised", "rank")


def retimed(trials: list[Trial], target: str) -> list[Trial]:
    """``trials`` of one shape with times that make the forest's log-time target ``target``."""
    if target == "log time":
        return trials
    if target == "log slowdown":
        return relative_to_fastest(trials)  # DefaultSearch's prior_target="slowdown"
    ok = sorted((t for t in trials if t.ok), key=lambda t: t.time_ms)
    if target == "standardised":
        logs = np.log([t.time_ms for t in ok])
        spread = logs.std() or 1.0
        new = {id(t): math.exp((log - logs.mean()) / spread) for t, log in zip(ok, logs)}
    else:
        new = {id(t): math.exp(i / max(len(ok) - 1, 1)) for i, t in enumerate(ok)}
    return [replace(t, timing=Timing(new[id(t)], new[id(t)], new[id(t)])) if t.ok else t for t in trials]


def first_near_rank(space, others, target: str, seed: int, within: float) -> int:
    history = [t for other in others for t in retimed(other.trials(), target)]
    recorded = space.space()
    model = RandomForest(recorded, 32, random_state=seed, max_features=1.0, alignment=True).fit(history, space.key())
    configs = [t.config for t in space.trials()]
    features = model.features_of_encoded(recorded.encode(configs), space.key())
    predicted = model.regressor_.predict(features)
    predicted[model.failure_probability_of(features) > DefaultSearch().failure_threshold] = np.inf  # as its prior
    times = np.array([t.time_ms if t.ok else np.inf for t in space.trials()])
    near = times <= times.min() * (1 + within)
    order = np.argsort(predicted, kind="stable")
    return int(np.flatnonzero(near[order])[0]) + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(HERE / "corpus" / "v2.json"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--within", type=float, default=0.05)
    parser.add_argument("--min-shapes", type=int, default=2,
                        help="spaces of kernels recorded at this many shapes or more")
    args = parser.parse_args()
    spaces = _spaces(args.corpus)
    elsewhere = same_kernel_elsewhere(spaces)
    print(f"| space | shapes | {' | '.join(TARGETS)} |")
    print("|---|---|" + "---|" * len(TARGETS))
    within_10 = dict.fromkeys(TARGETS, 0)
    logs: dict[str, list[float]] = {target: [] for target in TARGETS}
    count = 0
    for name in sorted(spaces):
        if len(elsewhere[name]) + 1 < args.min_shapes:
            continue
        count += 1
        others = [spaces[other] for other in elsewhere[name]]
        cells = []
        for target in TARGETS:
            rank = statistics.median(first_near_rank(spaces[name], others, target, seed, args.within)
                                     for seed in range(args.seeds))
            within_10[target] += rank <= 10
            logs[target].append(math.log(rank))
            cells.append(f"{rank:g}")
        print(f"| {name} | {len(others) + 1} | {' | '.join(cells)} |", flush=True)
    print()
    for target in TARGETS:
        print(f"{target}: first within {args.within:.0%} in the prior's first 10 on {within_10[target]} of {count}; "
              f"geometric mean rank {math.exp(statistics.fmean(logs[target])):.2f}")


if __name__ == "__main__":
    main()
