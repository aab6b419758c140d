"""What lies around a recorded space's optimum: its configs and those within 2 %, the fastest
configs with their steps from the optimum (a step moves one parameter to the next value by size,
``Space.value_positions``), and the configs one to three steps away, by their slowdown.

    TUNEKIT_SHARED_SPACES=../shared/spaces python experiments/near_optimum.py \\
        --space kt_data/convolution_milo/mi50 --space convolution_milo/W6600
    TUNEKIT_SHARED_SPACES=../shared/spaces python experiments/near_optimum.py --family kt-convolution --fastest 0

It reads the corpus's recordings and prints; it chooses nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus  # noqa: E402

from tunekit.config import COMPILE_OPTIONS, config_to_dict  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="experiments/corpus/v2.json")
    parser.add_argument("--space", action="append", default=[], help="a space of the corpus; repeat")
    parser.add_argument("--family", action="append", default=[], help="every space of a family; repeat")
    parser.add_argument("--fastest", type=int, default=12)
    args = parser.parse_args()
    loaded = corpus.load(args.corpus, verify=False)
    recorded = {entry.name: space for entry, space in loaded}
    names = args.space + [entry.name for entry, _ in loaded if entry.family in args.family]
    if not names:
        raise SystemExit("name a --space or a --family of the corpus")
    for name in names:
        if name not in recorded:
            raise SystemExit(f"{name!r} is not a space of {args.corpus}")
        space = recorded[name].space()
        configs = space.configs()
        times = np.array([r.time_ms if r is not None and r.ok else np.inf
                          for r in map(recorded[name].lookup, configs)])
        order = np.argsort(times, kind="stable")
        optimum = times[order[0]]
        steps = np.abs(space.value_positions() - space.value_positions()[order[0]]).sum(axis=1)
        within = int((times <= 1.02 * optimum).sum())
        print(f"{name}: {len(configs)} configs, {int(np.isfinite(times).sum())} ran, {within} within 2 % "
              f"of the optimum ({optimum:.4f} ms)")
        for index in order[:args.fastest]:
            params = {k: v for k, v in config_to_dict(configs[index]).items() if k not in COMPILE_OPTIONS}
            print(f"  {times[index] / optimum:.4f}  {int(steps[index])} steps  {params}")
        for distance in (1, 2, 3):
            ratios = times[steps == distance] / optimum
            ran = ratios[np.isfinite(ratios)]
            if len(ran):
                print(f"  {distance} step(s) away: {len(ratios)} configs, the fastest {ran.min():.3f}, "
                      f"median {np.median(ran):.3f} of those that ran")


if __name__ == "__main__":
    main()
