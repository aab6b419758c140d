"""``default`` with a share of its forest's proposals from Optuna's Gaussian process: a candidate
design for the leave-family-out protocol, not in the package until a round chooses it.

On corpus v2, `default` and `optuna-gp` miss on different spaces (runs within 2 % of the optimum
of 20, from the runs of ``experiments/results/protocol-v2/``): `optuna-gp` reached it in more runs
on `kt_data/convolution_milo/mi50` (12 against 0), `convolution_milo/W7800` (18 against 9),
`W6600` (13 against 9), `gemv-n4k_k14k` and `gemv-n4k_k4k` (20 against 16 and 15) and
`matmul_hopper-large_k` (20 against 17); `default` on `kt_data/convolution_milo/a4000` (20
against 7), `convolution_milo/A4000` (17 against 10), `A6000` (19 against 13) and the `kt-gemm`
and `kt-pnpoly` spaces. Where `default` missed, its runs ended in one basin (11 of 20 on `W6600`
at the same config), while the GP's smooth model of log time moves toward corners that a forest
predicts flat. Here a ``gp_fraction`` of the proposals that ``DefaultSearch`` gives its forest's
ranking go to a GP sampler (``OptunaGPSearch``, told every trial of the tuning) instead; the
local and random proposals are unchanged, so that the forest's ranking is not the only model
that steers:

    designs: {"default-gp15": {"strategy": "gp_share:GPShareDefault", "options": {"gp_fraction": 0.15}}}

(0.15 of the forest's turns, which are 70 % of the proposals after the start: about a tenth of
them.) The candidate was proposed after reading those per-space results, so the families are
held out from the protocol's choice, not from the proposal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tunekit.strategies.default import DefaultSearch
from tunekit.strategies.forest import ForestSearch
from tunekit.strategies.optuna_tpe import OptunaGPSearch

from tunekit.config import Config
from tunekit.strategy import SearchContext
from tunekit.trial import Trial


class _ForestOrGP(ForestSearch):
    """The forest's ranking, a ``share`` of whose proposals are the GP's. ``DefaultSearch.ask``
    takes its forest proposals from the next class of the instance's method order: this one."""

    share: float
    _share_gp: OptunaGPSearch
    _share_turns: int

    def ask(self, n: int) -> list[Config]:
        turns = math.floor((self._share_turns + n) * self.share) - math.floor(self._share_turns * self.share)
        self._share_turns += n
        from_gp = []
        for config in self._share_gp.ask(turns):
            index = self.context.space.index(config)
            if index is not None and not self._tried[index]:
                self._tried[index] = True
                from_gp.append(config)
        ranked = super().ask(n - len(from_gp)) if n > len(from_gp) else []
        return from_gp + ranked


class GPShareDefault(DefaultSearch, _ForestOrGP):
    """``DefaultSearch`` whose forest proposals are a ``gp_fraction`` share Optuna's GP's: the code
    the protocol judged, kept apart from ``DefaultSearch(gp_fraction=...)``, which it became (its
    own share, GP and turns under other names, ``DefaultSearch``'s at 0, so the two never stack;
    ``tests/test_leave_family_out.py`` checks that both propose the same)."""

    name = "default-gp-share"

    def __init__(self, gp_fraction: float = 0.15, **options: Any) -> None:
        super().__init__(**{**options, "gp_fraction": 0.0})
        self.share = gp_fraction

    def start(self, context: SearchContext) -> None:
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"GPShareDefault(gp_fraction={self.share!r}): expected a share in [0, 1]")
        super().start(context)
        self._share_turns = 0
        # no random start of its own: it is told every trial of the tuning, the start's included
        self._share_gp = OptunaGPSearch(warm_start=0, n_startup_trials=1)
        self._share_gp.start(context)

    def ask(self, n: int) -> list[Config]:
        proposed = super().ask(n)
        self._share_gp.exclude(proposed)  # not the GP's candidates again
        return proposed

    def tell(self, trials: Sequence[Trial]) -> None:
        super().tell(trials)
        self._share_gp.tell(trials)
