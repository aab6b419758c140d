"""Where `default`'s CPU time per proposed config goes on the corpus's largest space: one tuning
per seed, each the first on its Space in a fresh process (as ``strategy_time.py`` times them),
with the CPU time of a few of its steps summed, per proposed config.

    [PYTHONPATH=SITE] python experiments/strategy_time_parts.py [--seeds 3] [--corpus MANIFEST]

``SITE``: a folder another tunekit was installed into, which is then the one timed (as in
``strategy_time.py``); the header names the tunekit timed.

The steps nest: ``gp_turns`` holds Optuna's ``GPRegressor._fit_kernel_params`` (the GP's kernel
fit, by L-BFGS; the class's method is wrapped, since Optuna's sampler reaches the module's
``fit_kernel_params`` through a lazy module that copies it when first loaded) and its
acquisition; ``forest_fits`` holds ``PerfModel.fit`` (scikit-learn's trees) and the predictions
for every config of the Space; ``start`` holds the Space's configs' index and encoding, made once
per Space. Each step is timed by wrapping it, which adds two clock reads per
call; the total is the tuning's own CPU time.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _timed(owner: object, name: str, label: str, spent: collections.Counter) -> None:
    function = getattr(owner, name)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        started = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[label] += time.process_time() - started

    setattr(owner, name, wrapper)


def _worker(corpus: str, seed: int, budget: int) -> None:
    sys.path.insert(0, str(HERE))
    from optuna._gp.gp import GPRegressor
    from leave_family_out import _tuning
    from strategy_time import timed_and_warm_up

    from tunekit.perfmodels.base import PerfModel
    from tunekit.space import Space
    from tunekit.strategies.default import DefaultSearch
    from tunekit.strategies.forest import ForestSearch

    spent: collections.Counter = collections.Counter()
    for owner, name, label in ((DefaultSearch, "start", "start"), (Space, "configs", "start: configs"),
                               (Space, "encoded", "start: encoded"), (DefaultSearch, "_gp_picks", "gp_turns"),
                               (GPRegressor, "_fit_kernel_params", "gp_turns: kernel fit"),
                               (ForestSearch, "_fit", "forest_fits"),
                               (PerfModel, "fit", "forest_fits: trees"),
                               (ForestSearch, "_whole_space_predictions", "forest_fits: predictions"),
                               (DefaultSearch, "tell", "tell")):
        _timed(owner, name, label, spent)
    largest, smallest = timed_and_warm_up(corpus)
    _tuning(corpus, smallest, "default", "default", "{}", seed, 10)  # the imports, untimed
    spent.clear()
    line = _tuning(corpus, largest, "default", "default", "{}", seed, budget)
    configs = len(line["times_ms"])
    import tunekit

    print(json.dumps({"space": largest, "tunekit": tunekit.__file__,
                      "total": 1e3 * line["cpu_seconds"] / configs,
                      **{label: 1e3 * seconds / configs for label, seconds in spent.items()}}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(HERE / "corpus" / "v2.json"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--worker", type=int, metavar="SEED", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        _worker(args.corpus, args.worker, args.budget)
        return
    lines = []
    for seed in range(args.seeds):
        command = [sys.executable, __file__, "--corpus", args.corpus, "--budget", str(args.budget),
                   "--worker", str(seed)]
        done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ), check=False)
        if done.returncode:
            raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
        lines.append(json.loads(done.stdout.strip().splitlines()[-1]))
    labels = ["total", *sorted({label for line in lines for label in line} - {"space", "tunekit", "total"})]
    print(f"{lines[0]['space']}, {args.budget} evaluations, ms of CPU per proposed config, "
          f"seeds 0-{args.seeds - 1} ({lines[0]['tunekit']}):")
    for label in labels:
        print(f"{label:>26}: " + "  ".join(f"{line.get(label, 0.0):6.2f}" for line in lines))


if __name__ == "__main__":
    main()
