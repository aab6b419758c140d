"""Two ways for ``default``'s warm start to use the store beyond the nearest shape, screened by
``transfer_cv.py`` (``results/transfer-screens/``) and not shipped:

* ``warm_robust``: the warm start also takes, in turn after the nearest keys' rankings and before
  the prior's, the configs that ran at every other alike key (two or more), by their
  geometric-mean slowdown there: configs good at every stored shape.
* ``warm_agreeing=k``: after the warm start and its spread, ``k`` configs of one stored key's
  measured ranking: the key whose times order this tuning's measured configs most alike (the
  fewest discordant pairs, the ranking loss by which RGPE weighs its base models; ties, and keys
  that share fewer than two configs with this tuning: the nearest).

Both act only when the store holds the kernel's other keys, so without it the search is
``DefaultSearch``'s: a transfer candidate (``corpus/transfer-designs-screens.json``) names
``"strategy": "warm_variants:WarmVariantsDefault"`` beside its options.
"""

from __future__ import annotations

import itertools
import math

from tunekit.strategies.default import DefaultSearch

from tunekit.config import Config
from tunekit.keys import TuningKey, alike, key_distance
from tunekit.strategy import SearchContext
from tunekit.trial import Trial


class WarmVariantsDefault(DefaultSearch):
    """``DefaultSearch`` with ``warm_robust`` and ``warm_agreeing`` (module docstring)."""

    name = "default-warm-variants"
    #: Its options that act only with the store, which a transfer candidate may change.
    store_only_options = ("warm_robust", "warm_agreeing")

    def __init__(self, warm_robust: bool = False, warm_agreeing: int = 0, **options) -> None:
        super().__init__(**options)
        self.warm_robust = warm_robust
        self.warm_agreeing = warm_agreeing

    def start(self, context: SearchContext) -> None:
        if isinstance(self.warm_agreeing, bool) or not isinstance(self.warm_agreeing, int) or self.warm_agreeing < 0:
            raise ValueError(f"WarmVariantsDefault(warm_agreeing={self.warm_agreeing!r}): expected an int, 0 or more")
        self._siblings: list[tuple[list[int], dict[int, float]]] = []  # alike stored keys' rankings and times
        super().start(context)

    def _stored_rankings(self, here: TuningKey, nearest: list[TuningKey], by_key: dict[TuningKey, list[Trial]]
                         ) -> list[list[int | None]]:
        rankings = super()._stored_rankings(here, nearest, by_key)
        siblings = {key: trials for key, trials in by_key.items() if alike(here, key)}
        if self.warm_robust and rankings:
            rankings.append(self._robust_ranking(siblings))
        if self.warm_agreeing:  # every alike key's measured configs, fastest first, nearest key first
            for key in sorted(siblings, key=lambda key: key_distance(here, key)):
                times: dict[int, float] = {}
                for trial in sorted(siblings[key], key=lambda t: t.time_ms):
                    index = self.context.space.index(trial.config)
                    if index is not None and index not in times and self._may_run(index):
                        times[index] = trial.time_ms
                self._siblings.append((list(times), times))
        return rankings

    def _robust_ranking(self, by_key: dict[TuningKey, list[Trial]]) -> list[int | None]:
        """The configs that ran at every key of ``by_key`` (two or more), by the sum over those
        keys of the log of their time over the key's fastest."""
        if len(by_key) < 2:
            return []
        slowdowns: dict[int, list[float]] = {}
        for trials in by_key.values():
            fastest = min(t.time_ms for t in trials)
            at_key: dict[int, float] = {}  # a config measured more than once at a key: its fastest
            for trial in trials:
                index = self.context.space.index(trial.config)
                if index is not None and self._may_run(index):
                    at_key[index] = min(at_key.get(index, math.inf), trial.time_ms)
            for index, time_ms in at_key.items():
                slowdowns.setdefault(index, []).append(math.log(time_ms / fastest))
        everywhere = [(sum(logs), index) for index, logs in slowdowns.items() if len(logs) == len(by_key)]
        return [index for _, index in sorted(everywhere)]

    def ask(self, n: int) -> list[Config]:
        due = self.warm_start + self.warm_spread + self.warm_agreeing - len(self._here)
        if self._prior is None or due <= 0 or len(self._here) < self.warm_start + self.warm_spread:
            return super().ask(n)
        picks = self._agreeing(min(n, due))
        return picks + (super().ask(n - len(picks)) if n > len(picks) else [])

    def _agreeing(self, count: int) -> list[Config]:
        """Up to ``count`` untried configs of the measured ranking of the stored key whose times
        order this tuning's measured configs most alike."""
        here = {}
        for trial in self._here:
            index = self.context.space.index(trial.config)
            if trial.ok and index is not None:
                here[index] = trial.time_ms

        def discordance(times: dict[int, float]) -> float:
            pairs = list(itertools.combinations([(times[i], t) for i, t in here.items() if i in times], 2))
            if not pairs:
                return 1.0
            return sum((a < b) != (x < y) for (a, x), (b, y) in pairs) / len(pairs)

        if not self._siblings:
            return []
        ranking, _ = min(self._siblings, key=lambda sibling: discordance(sibling[1]))  # the first (nearest) of ties
        return self._take([i for i in ranking if not self._tried[i]][:count])
