"""Exhaustive search: every valid config of the Space, in the Space's order (stock Triton's)."""

from __future__ import annotations

from tunekit.config import Config
from tunekit.strategy import SearchContext, Strategy


class Exhaustive(Strategy):
    """Proposes every config once, in order; what ``triton.autotune`` does with its list."""

    name = "exhaustive"
    adaptive = False

    def start(self, context: SearchContext) -> None:
        super().start(context)
        self._next = 0

    def ask(self, n: int) -> list[Config]:
        configs = self.context.space.configs()
        batch = configs[self._next : self._next + n]
        self._next += len(batch)
        return batch
