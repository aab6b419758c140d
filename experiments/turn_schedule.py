"""``default`` with each turn after the start given to the kind furthest behind its share, as the
candidate of ``experiments/results/turn-schedule/`` ran (commit ``04a782a``): the local proposals
and the random configs each get their share at any batch size, where ``DefaultSearch`` gives a
turn both come due on to the local proposals (at its shares, every random turn). For the
leave-family-out protocol's record of that candidate:

    designs: {"default-gp15-stalled50-c512-local-forest-turns": {"strategy": "turn_schedule:OwnTurnsDefault", ...}}
"""

from __future__ import annotations

from collections.abc import Mapping

from tunekit.strategies.default import DefaultSearch

from tunekit.config import Config

# the hook this subclass replaces: without it (an older tunekit), it would replay DefaultSearch unchanged
if "_local_and_random" not in vars(DefaultSearch):
    raise ImportError("turn_schedule.OwnTurnsDefault needs a tunekit whose DefaultSearch has _local_and_random "
                      "(57981a9 or later)")


def turn_kinds(start: int, count: int, shares: Mapping[str, float]) -> list[str | None]:
    """The kind of each turn from ``start`` to ``start + count``: the kind furthest behind its share
    (``shares[kind]`` times the turns so far, less the turns it was given), where that is a whole
    turn; None (the ranking's turn) where none is. Ties go to the first kind."""
    given = dict.fromkeys(shares, 0)
    kinds: list[str | None] = []
    for turn in range(start + count):
        behind = {kind: (turn + 1) * share - given[kind] for kind, share in shares.items()}
        kind: str | None = max(behind, key=behind.__getitem__) if behind else None
        if kind is not None and behind[kind] > 1 - 1e-9:
            given[kind] += 1
        else:
            kind = None
        if turn >= start:
            kinds.append(kind)
    return kinds


class OwnTurnsDefault(DefaultSearch):
    """``DefaultSearch`` whose random configs have turns of their own (``turn_kinds``)."""

    name = "default-own-turns"

    def start(self, context) -> None:
        if self.local_fraction + self.random_fraction > 1:  # as 04a782a refused: neither would get its share
            raise ValueError(f"OwnTurnsDefault(local_fraction={self.local_fraction!r}, random_fraction="
                             f"{self.random_fraction!r}): together more than every turn")
        super().start(context)

    def _local_and_random(self, n: int) -> tuple[list[Config], list[Config]]:
        kinds = turn_kinds(len(self._here), n, {"local": self.local_fraction, "random": self.random_fraction})
        return self._neighbours_of_best(kinds.count("local")), self._random_untried(kinds.count("random"))
