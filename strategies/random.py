"""Random search without replacement: the baseline every other strategy is compared with."""

from __future__ import annotations

from tunekit.config import Config
from tunekit.strategy import SearchContext, Strategy


class RandomSearch(Strategy):
    """Draws configs uniformly at random, never the same one twice, seeded per key."""

    name = "random"
    adaptive = False

    def start(self, context: SearchContext) -> None:
        super().start(context)
        self._order = self.rng.permutation(len(context.space))
        self._next = 0

    def ask(self, n: int) -> list[Config]:
        configs = self.context.space.configs()
        picks = self._order[self._next : self._next + n]
        self._next += len(picks)
        return [configs[i] for i in picks]
