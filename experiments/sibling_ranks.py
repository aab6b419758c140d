"""How far down each stored sibling shape's own ranking the first config within 5 % of a space's
optimum lies: what a warm start from the store's measured configs can reach at best.

    python experiments/sibling_ranks.py [--corpus experiments/corpus/v2.json] [--within 1.05] [--out FILE]

For every space of a kernel recorded at other shapes (``tunekit.compare.same_kernel_elsewhere``),
each other shape's configs are ordered by their recorded time there; the table gives, per sibling,
the position in that order of the first config whose time here is within ``--within`` of this
space's optimum, the same for the sibling nearest by the keys' sizes (``tunekit.keys.key_distance``,
ties: the first stored, as ``DefaultSearch``'s warm start takes it), for the configs taken
in turn from every sibling's order (each sibling's fastest, then each one's second, ...), and for
two orders of the configs that ran at every sibling: by their geometric-mean slowdown there (the
blend, ``warm_variants.WarmVariantsDefault(robust_by="mean")``'s ranking) and by their worst
slowdown there (``DefaultSearch(warm_robust=True)``'s, the default's). A position above 10 in every order means that a warm start taking one of these
orders does not reach the target within 10 evaluations; other orders of the same measurements may.
The line after the table counts the spaces of kernels recorded at 3 shapes or more (issue 31's
target) that some order serves.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learned_search import markdown
from leave_family_out import _spaces
from warm_variants import blend

from tunekit.strategies.default import fastest_per_config, worst_slowdown

from tunekit.compare import same_kernel_elsewhere
from tunekit.config import config_json
from tunekit.keys import key_distance
from tunekit.recorded import RecordedSpace


def _fastest_first(space: RecordedSpace) -> list[str]:
    ok = sorted((r for r in space.records if r.ok), key=lambda r: r.time_ms)
    return [config_json(space.config(r)) for r in ok]


def first_within(order: list[str], good: set[str]) -> int | None:
    """The 1-based position of the first of ``order`` in ``good``; None where none is."""
    return next((position for position, config in enumerate(order, 1) if config in good), None)


def in_turn(orders: list[list[str]]) -> list[str]:
    """Each order's first, then each one's second, ..., each config once."""
    taken: dict[str, None] = {}
    for position in range(max(map(len, orders), default=0)):
        for order in orders:
            if position < len(order):
                taken.setdefault(order[position], None)
    return list(taken)


def table(manifest: Path, within: float, limit: int = 10, shapes: int = 3) -> str:
    spaces = _spaces(str(manifest))
    elsewhere = same_kernel_elsewhere(spaces)
    rows, counted, reached, unserved = [], 0, 0, []
    for name in sorted(n for n in spaces if elsewhere[n]):
        here = spaces[name]
        good = {config_json(here.config(r)) for r in here.records if r.ok and r.time_ms <= here.optimum_ms * within}
        siblings = sorted(elsewhere[name], key=lambda other: key_distance(here.key(), spaces[other].key()))
        orders = [_fastest_first(spaces[other]) for other in siblings]
        positions = [first_within(order, good) for order in orders]
        measured = [fastest_per_config([t for t in spaces[o].trials() if t.ok], config_json) for o in siblings]
        together = [first_within(order, good) for order in (in_turn(orders), blend(measured), worst_slowdown(measured))]
        shown = ", ".join(f"{other.rsplit('-', 1)[-1] if '-' in other else other}: {p or '-'}"
                          for other, p in zip(siblings, positions))
        rows.append([name, str(len(siblings) + 1), f"{len(good)} of {len(here.records)}", shown,
                     str(positions[0] or "-"), *(str(p or "-") for p in together)])
        if len(siblings) + 1 >= shapes:
            counted += 1
            served = any(p is not None and p <= limit for p in positions + together)
            reached += served
            unserved += [] if served else [name]
    header = ["space", "shapes", f"configs within {within:g}x", "per sibling, nearest first", "nearest",
              "in turn", "blend", "worst slowdown"]
    summary = [(f"Of the {counted} spaces of kernels recorded at {shapes} shapes or more, one of the orders above has a "
                f"config within {within:g}x in its first {limit} on {reached}; none of them has on {len(unserved)}: "
                f"{', '.join(unserved) or 'none'}.")]
    return "\n".join(markdown(header, rows) + [""] + summary) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parent / "corpus" / "v2.json")
    parser.add_argument("--within", type=float, default=1.05)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text = table(args.corpus, args.within)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
