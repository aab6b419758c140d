"""How far down the other shapes' measured rankings the configs near this shape's optimum sit.

    python experiments/transfer_ranks.py [--corpus MANIFEST] [--within 0.05]

For every space of corpus v2 whose kernel is recorded at other shapes, prints how many configs are
within ``--within`` of its optimum and, for each other shape (nearest first by ``key_distance``),
the rank in that shape's measured order of the first such config, with the time here of that
shape's own best over this optimum. A rank far past 10 at every other shape means that a warm
start taking the stored shapes' fastest configs cannot reach 5 % in 10 evaluations there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from leave_family_out import _spaces

from tunekit.compare import same_kernel_elsewhere
from tunekit.config import config_json
from tunekit.keys import key_distance


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(HERE / "corpus" / "v2.json"))
    parser.add_argument("--within", type=float, default=0.05)
    args = parser.parse_args()
    spaces = _spaces(args.corpus)
    elsewhere = same_kernel_elsewhere(spaces)
    for name in sorted(spaces):
        if not elsewhere[name]:
            continue
        here = {config_json(t.config): t.time_ms for t in spaces[name].trials() if t.ok}
        optimum = min(here.values())
        near = {config for config, time in here.items() if time <= optimum * (1 + args.within)}
        others = sorted(elsewhere[name], key=lambda other: key_distance(spaces[name].key(), spaces[other].key()))
        cells = []
        for other in others:
            order = [config_json(t.config) for t in sorted((t for t in spaces[other].trials() if t.ok),
                                                           key=lambda t: t.time_ms)]
            rank = next((i + 1 for i, config in enumerate(order) if config in near), None)
            their_best = here.get(order[0])
            cells.append(f"{rank}({their_best / optimum:.2f})" if their_best else f"{rank}(-)")
        print(f"{name:45s} configs {len(here):5d}, within: {len(near):4d}; ranks at the other shapes: {' '.join(cells)}")


if __name__ == "__main__":
    main()
