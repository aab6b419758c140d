"""Options of a strategy compared on the six spaces ``default``'s design may look at (and no other).

    python experiments/design_variants.py --seeds 10 --variant '{}' --variant '{"initial": 6}'

Each variant is a JSON dict of ``DefaultSearch`` options (``--strategy`` names another class);
every variant is replayed on ``learned_search.SELECTION`` with the same seeds and budget, and the
issue's measures are printed: runs within 2 % of the optimum, geometric means of best / optimum
after 20, 50 and 200 evaluations, per-space runs within 2 %, and the share of failing configs
tried after the 20th evaluation beside the space's own share. Held-out spaces are never replayed
here: choosing options on them would make them no longer held out.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learned_search import SELECTION, SHARED  # noqa: E402

from tunekit.compare import replay  # noqa: E402
from tunekit.metrics import SpaceStats, best_so_far  # noqa: E402
from tunekit.recorded import read_space  # noqa: E402
from tunekit.strategy import strategy_class  # noqa: E402


def _task(path: str, strategy: str, options: str, seed: int, budget: int) -> tuple[str, str, np.ndarray]:
    run = replay(read_space(path), strategy_class(strategy)(**json.loads(options)), seed, budget)
    return path, options, run.times_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", action="append", required=True, help="JSON options of the strategy")
    parser.add_argument("--strategy", default="default")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    paths = [str(SHARED / f"{name}.json.gz") for name in sorted(SELECTION)]
    stats = {path: SpaceStats.of(read_space(path)) for path in paths}
    with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(_task, path, args.strategy, variant, seed, args.budget)
                   for variant in args.variant for path in paths for seed in range(args.seeds)]
        results = [future.result() for future in futures]
    for variant in args.variant:
        within, ratios, per_space, failing = [], {20: [], 50: [], 200: []}, [], []
        for path in paths:
            space_stats, reached = stats[path], 0
            for _, _, times in (r for r in results if r[0] == path and r[1] == variant):
                best = best_so_far(times, space_stats.worst)
                reached += bool(best[-1] <= 1.02 * space_stats.optimum)
                for n in ratios:
                    ratios[n].append(float(best[min(n, len(best)) - 1]) / space_stats.optimum)
                failing.append((float(np.isinf(times[20:]).mean()) if len(times) > 20 else math.nan,
                                1 - len(space_stats.sorted_times) / space_stats.n_total, path))
            within.append(reached)
            per_space.append(f"{Path(path).parent.name}/{Path(path).name.split('.')[0]} {reached}")
        geomeans = " ".join(f"after {n}: {math.exp(statistics.fmean(map(math.log, v))):.3f}" for n, v in ratios.items())
        shares = {}
        for strategy_share, space_share, path in failing:
            shares.setdefault(path, ([], space_share))[0].append(strategy_share)
        print(f"{args.strategy} {variant}: within 2 % {100 * sum(within) / (len(paths) * args.seeds):.0f} %, {geomeans}")
        print("  runs within 2 % per space:", ", ".join(per_space))
        print("  failing share after 20 (strategy / space):",
              ", ".join(f"{np.nanmean(s):.2f} / {space:.2f}" for s, space in shares.values()))


if __name__ == "__main__":
    main()
