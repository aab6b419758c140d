"""Warm starts that use the store beyond the nearest shape, screened by ``transfer_cv.py``
(``results/transfer-screens/``), and the orders of stored measurements ``sibling_ranks.py`` reads:

* ``robust_by="mean"``: ``DefaultSearch``'s ``warm_robust`` turn takes the configs measured at
  every other alike key (two or more) by their geometric-mean slowdown there (the blend) instead
  of their worst (``"worst"``, what ships: the screens' ``worst3``). Not chosen (``robust3``).
* ``warm_agreeing=k``: after the warm start and its spread, ``k`` configs of one stored key's
  measured ranking: the key whose times order this tuning's measured configs most alike (the
  fewest discordant pairs, the ranking loss by which RGPE weighs its base models; ties, and keys
  that share fewer than two configs with this tuning: the nearest). Not chosen.

* ``warm_local=k``: ``k`` turns of the warm start go to untried neighbours (one parameter one
  step away) of the fastest config measured so far, by the prior's ranking, before the spread's
  turns: the idea was that the stored shapes' best moves one step where the shape changes. A
  turn with nothing measured yet (an ask of several configs at once, as an Autotuner with
  compile workers makes) or no open neighbour takes the warm start's next config; the screen's
  replays ask one at a time. Not chosen (``results/transfer-screens/``, section 6).

* ``warm_in_flight=k`` (with ``warm_in_flight_until=m``): with the store, at most ``k`` configs
  pending (but those the tuning said are late) until ``m`` trials are told; the search asks again
  as each is told. The idea: with 18 in flight, the transfer replays were slower with the store
  than without it on 8 of 58 spaces (one at a time: 2), as if the picks made before the warm
  start's neighbourhood was measured were wasted there. Fewer evaluations on 5 seeds, more
  seconds in a simulated live tuning (its compiles run fewer at once): ``k, m`` = 3, 20 not
  chosen (``results/in-flight-warm-cap/``).

All act only when the store holds the kernel's other keys, so without it the search is
``DefaultSearch``'s: a transfer candidate (``corpus/transfer-designs-screens.json``) names
``"strategy": "warm_variants:WarmVariantsDefault"`` beside its options.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tunekit.strategies.default import ConfigId, DefaultSearch, fastest_per_config, ranked_by_slowdown, worst_slowdown

from tunekit.config import Config
from tunekit.keys import TuningKey, alike, key_distance
from tunekit.strategy import SearchContext
from tunekit.trial import Trial

__all__ = ["blend", "ROBUST_ORDERS", "WarmVariantsDefault"]


def blend(siblings: Sequence[Mapping[ConfigId, float]]) -> list[ConfigId]:
    """The configs that ran at every sibling, by their geometric-mean slowdown (the sum of the logs).
    ``robust_by="mean"``'s ranking, and ``sibling_ranks.py``'s blend."""
    return ranked_by_slowdown(siblings, lambda ratios: sum(math.log(ratio) for ratio in ratios))


#: ``robust_by``: how ``warm_robust`` ranks the configs that ran at every stored shape
#: (``"worst"``: ``tunekit.strategies.default.worst_slowdown``, as ``DefaultSearch`` does).
ROBUST_ORDERS = {"mean": blend, "worst": worst_slowdown}


class WarmVariantsDefault(DefaultSearch):
    """``DefaultSearch`` with ``robust_by``, ``warm_agreeing``, ``warm_local`` and
    ``warm_in_flight`` (module docstring); by default ``DefaultSearch`` itself."""

    name = "default-warm-variants"
    #: Its options that act only with the store, which a transfer candidate may change.
    store_only_options = ("robust_by", "warm_agreeing", "warm_local", "warm_in_flight", "warm_in_flight_until")

    def __init__(self, warm_agreeing: int = 0, robust_by: str = "worst", warm_local: int = 0,
                 warm_in_flight: int = 0, warm_in_flight_until: int = 30, **options: Any) -> None:
        super().__init__(**options)
        self.warm_agreeing = warm_agreeing
        self.robust_by = robust_by
        self.warm_local = warm_local
        self.warm_in_flight = warm_in_flight
        self.warm_in_flight_until = warm_in_flight_until

    def start(self, context: SearchContext) -> None:
        if self.robust_by not in ROBUST_ORDERS:
            raise ValueError(f"WarmVariantsDefault(robust_by={self.robust_by!r}): expected one of "
                             f"{', '.join(map(repr, ROBUST_ORDERS))}")
        for option in ("warm_agreeing", "warm_local", "warm_in_flight", "warm_in_flight_until"):
            value = getattr(self, option)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"WarmVariantsDefault({option}={value!r}): expected an int, 0 or more")
        super().start(context)
        # every alike stored key's measured configs that may run here (config -> time, fastest
        # first), nearest key first: what warm_agreeing follows
        self._siblings: list[dict[int, float]] = []
        if self._prior is not None and self.warm_agreeing:
            for trials in self._alike_stored(context).values():
                times = fastest_per_config(trials, context.space.index)
                self._siblings.append({i: t for i, t in times.items() if self._may_run(i)})

    @staticmethod
    def _alike_stored(context: SearchContext) -> dict[TuningKey, list[Trial]]:
        """The store's trials that ran, by key, of the keys alike this one, nearest first."""
        by_key: dict[TuningKey, list[Trial]] = {}
        for trial in context.history:
            if trial.ok and trial.key is not None and trial.key != context.key and alike(context.key, trial.key):
                by_key.setdefault(trial.key, []).append(trial)
        return {key: by_key[key] for key in sorted(by_key, key=lambda key: key_distance(context.key, key))}

    def _robust_ranking(self, times_by_key: Sequence[Mapping[int, float]]) -> list[int]:
        return ROBUST_ORDERS[self.robust_by](times_by_key)

    def ask(self, n: int) -> list[Config]:
        if self.warm_in_flight and self._prior is not None and len(self._here) < self.warm_in_flight_until:
            # pending configs the tuning said are late hold no slot, as they hold no wait (``overdue``)
            room = self.warm_in_flight - int((self._pending() & ~self._overdue).sum())
            if room < 1:
                return []  # asked again as the next pending trial is told
            n = min(n, room)
        phase = len(self._warm_order())
        due = phase + self.warm_agreeing - len(self._here)
        if self._prior is None or due <= 0 or len(self._here) < phase:
            return super().ask(n)
        picks = self._agreeing(min(n, due))
        return picks + (super().ask(n - len(picks)) if n > len(picks) else [])

    def _warm_others(self) -> list[str]:
        """``warm_local`` turns (``"local"``) before ``DefaultSearch``'s."""
        return ["local"] * self.warm_local + super()._warm_others()

    def _warm_turns(self, kind: str, count: int, suggested: np.ndarray) -> list[Config]:
        if kind != "local":
            return super()._warm_turns(kind, count, suggested)
        measured = [t for t in self._here if t.ok]
        if not measured:
            return []
        best = min(measured, key=lambda t: t.time_ms)
        around = {self.context.space.position(c) for c in self.context.space.neighbours(best.config)}
        rank = np.empty(len(self._prior_ranking), dtype=int)
        rank[self._prior_ranking] = np.arange(len(self._prior_ranking))
        open_ = sorted((i for i in around if not self._tried[i] and self._may_run(i)), key=lambda i: rank[i])
        return self._take(open_[:count])

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
        times = min(self._siblings, key=discordance)  # the first (nearest) of ties
        return self._take([i for i in times if not self._tried[i]][:count])
