"""`default`'s asks while the machine's cores are busy, as a live tuning's are (its compile workers
take every core): the strategy's seconds per ask with PyTorch's intra-op threads left as they are
(one per core) and with one (what ``tunekit.search`` sets around each strategy call).

Replays the shipped H200 recording of the 984-config GEMM space (``h200/matmul-square`` of
corpus v2) with ``default`` as it ships, 18 configs in flight, 100 evaluations, while ``--hogs``
processes spin (default: one per core). Prints per mode and seed the median ask, the asks over
0.2 s, and the slowest Gaussian-process pick.

    TUNEKIT_SHARED_SPACES=../shared/spaces python experiments/asks_under_load.py [--seeds 2] [--hogs N]

Run it without ``OMP_NUM_THREADS`` set: with it at 1 torch has one thread either way.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def spin() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()

    import torch
    from leave_family_out import _spaces

    import tunekit.search
    import tunekit.strategies.default as default
    from tunekit.compare import replay
    from tunekit.strategy import make_strategy

    spaces = _spaces(str(HERE / "corpus" / "v2.json"))
    recorded = spaces["h200/matmul-square"]
    recorded.space()
    designs = json.loads((HERE / "corpus" / "designs-inflight.json").read_text())
    options = designs["default-gp15-stalled50-c512-local-forest-believer-inflight18"]["options"]
    asks: list[tuple[int, float]] = []
    gp_picks: list[float] = []
    ask, gp = default.DefaultSearch.ask, default.DefaultSearch._gp_picks

    def timed_ask(self, n):
        begin = time.perf_counter()
        found = ask(self, n)
        asks.append((n, time.perf_counter() - begin))
        return found

    def timed_gp(self, turns):
        begin = time.perf_counter()
        found = gp(self, turns)
        gp_picks.append(time.perf_counter() - begin)
        return found

    default.DefaultSearch.ask, default.DefaultSearch._gp_picks = timed_ask, timed_gp
    shipped = tunekit.search._one_torch_thread
    hogs = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.hogs)]
    for hog in hogs:
        hog.start()
    print(f"{recorded.name}, {len(recorded)} configs; torch threads {torch.get_num_threads()}; {args.hogs} busy processes")
    try:
        for mode in ("torch's threads as they are", "one torch thread (as shipped)"):
            tunekit.search._one_torch_thread = contextlib.nullcontext if mode.startswith("torch's") else shipped
            for seed in range(args.seeds):
                asks.clear()
                gp_picks.clear()
                replay(recorded, make_strategy("default", **options), seed, 100, batch=18)
                slow = [f"{seconds:.2f} s (for {n})" for n, seconds in asks if seconds > 0.2]
                print(f"{mode}, seed {seed}: {len(asks)} asks, median {1e3 * statistics.median(s for _, s in asks):.1f} ms;"
                      f" over 0.2 s: {', '.join(slow) or 'none'}; slowest GP pick "
                      f"{max(gp_picks, default=0.0):.2f} s of {len(gp_picks)}")
    finally:
        tunekit.search._one_torch_thread = shipped
        for hog in hogs:
            hog.terminate()


if __name__ == "__main__":
    main()
