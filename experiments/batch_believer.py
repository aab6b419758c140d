"""``default`` whose asks of several configs pick the forest's configs one at a time, each after a
refit that treats the configs already picked in the ask as measured at a made-up time (a
"believer" or "constant liar", as batch Bayesian optimisation does: Ginsbourger, Le Riche and
Carraro, 2010). A live tuning on a GPU asks for two configs per compile worker at once (32 on a
16-core host), and ``DefaultSearch`` takes the whole batch from one ranking: near-duplicates of
its best-scored config. The candidate of ``experiments/results/batch-asks/``:

    designs: {"LABEL": {"strategy": "batch_believer:BelieverDefault", "options": {"lie": "mean", ...}, "batch": 32}}

Asked for one config at a time it is ``DefaultSearch``: no config is pending when it picks.
"""

from __future__ import annotations

import math

import numpy as np

from tunekit.strategies.default import DefaultSearch

from tunekit.config import Config
from tunekit.trial import Status, Timing, Trial

#: The made-up time of a pending config: the forest's predicted time for it, this tuning's slowest
#: measured time, or its fastest.
LIES = ("mean", "max", "min")


class BelieverDefault(DefaultSearch):
    """``DefaultSearch`` refitting between the forest's picks of one ask, the ask's earlier picks
    told at the ``lie``'s time (``LIES``); the other options are ``DefaultSearch``'s."""

    name = "default-believer"

    def __init__(self, lie: str = "mean", **options) -> None:
        super().__init__(**options)
        self.lie = lie

    def start(self, context) -> None:
        if self.lie not in LIES:
            raise ValueError(f"BelieverDefault(lie={self.lie!r}): expected one of {', '.join(map(repr, LIES))}")
        super().start(context)
        self._lies: list[Trial] = []
        self._lied: set[int] = set()  # the configs of _lies (and those the model could not time)
        self._tried_before_ask = self._tried.copy()

    def ask(self, n: int) -> list[Config]:
        self._lies, self._lied = [], set()  # every config of the last ask was measured (or cut off) before this one
        self._tried_before_ask = self._tried.copy()
        return super().ask(n)

    def _ranked(self, count: int) -> list[Config]:
        picks: list[Config] = []
        for _ in range(count):
            self._lie_about_pending()
            taken = super()._ranked(1)
            if not taken:
                break
            picks += taken
        return picks

    def _lie_about_pending(self) -> None:
        """Tell the forest's next fit the configs this ask picked so far, at the lie's time."""
        if self._model is None:
            return
        new = [int(i) for i in np.flatnonzero(self._tried & ~self._tried_before_ask) if int(i) not in self._lied]
        measured = [t.time_ms for t in self._here if t.ok]
        if not new or not measured:
            return
        key = self.context.key
        if self.lie == "mean":
            features = self._model.features_of_encoded(self._encoded[new], key)
            times = np.exp(self._model.per_tree_log(features).mean(axis=0))
        else:
            times = np.full(len(new), max(measured) if self.lie == "max" else min(measured))
        self._lied.update(new)
        self._lies += [Trial(self._configs[i], Status.OK, Timing(float(t), float(t), float(t)), key=key)
                       for i, t in zip(new, times) if math.isfinite(t)]
        self._fitted_at = -1  # the next ranking refits, with the lies

    def _training_trials(self) -> list[Trial]:
        return super()._training_trials() + self._lies
