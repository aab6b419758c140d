"""``default`` with a share of its proposals from Optuna's Gaussian process: a candidate design for
the leave-family-out protocol, not in the package until a round chooses it.

On corpus v2 `default` and `optuna-gp` miss on different spaces: `optuna-gp` reached 2 % of the
optimum in more runs on `kt_data/convolution_milo/mi50` (12 of 20 against 0), `convolution_milo/W7800`
(18 against 9), `W6600` (13 against 9), two `gemv` shapes (20 and 20 against 15 and 16) and
`matmul_hopper-large_k` (20 against 17), `default` on `kt_data/convolution_milo/a4000` (20 against
7), `convolution_milo/A4000` (17 against 10), `A6000` (19 against 13), and the `kt-gemm` and
`kt-pnpoly` spaces (``experiments/results/protocol-v2/``). There, the forest's runs ended in one
basin (11 of 20 on `W6600` at the same config), while the GP's smooth model of log time moves
toward corners a forest predicts flat. This design gives ``gp_fraction`` of the proposals after
the start to a GP sampler (``OptunaGPSearch``, told every trial of the tuning; asked one config at
a time, every tenth ask is the GP's at 0.1) and the others to ``DefaultSearch`` as it is (its
forest, local and random shares), so that the forest's ranking is not the only model that steers:

    designs: {"default-gp10": {"strategy": "gp_share:GPShareDefault", "options": {"gp_fraction": 0.1}}}

The candidate was proposed after reading those per-space results, so the families are held out
from the protocol's choice, not from the proposal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tunekit.config import Config
from tunekit.strategies.default import DefaultSearch
from tunekit.strategies.optuna_tpe import OptunaGPSearch
from tunekit.strategy import SearchContext
from tunekit.trial import Trial


class GPShareDefault(DefaultSearch):
    """``DefaultSearch`` whose proposals after the start are a ``gp_fraction`` share Optuna's GP's."""

    name = "default-gp-share"

    def __init__(self, gp_fraction: float = 0.1, **options: Any) -> None:
        super().__init__(**options)
        self.gp_fraction = gp_fraction

    def start(self, context: SearchContext) -> None:
        if not 0.0 <= self.gp_fraction <= 1.0:
            raise ValueError(f"GPShareDefault(gp_fraction={self.gp_fraction!r}): expected a share in [0, 1]")
        super().start(context)
        self._gp = OptunaGPSearch(warm_start=0)  # the store's warm start is DefaultSearch's
        self._gp.start(context)

    def tell(self, trials: Sequence[Trial]) -> None:
        super().tell(trials)
        self._gp._proposed.update(t.config_id for t in trials)
        self._gp.tell(trials)

    def _started(self) -> bool:
        """Whether the start (space-filling, or warm start and spread) is over."""
        if self._learned_elsewhere:
            return len(self._here) >= self.warm_start + self.warm_spread
        return len(self._here) >= self.initial

    def ask(self, n: int) -> list[Config]:
        n = n if self.top_k is None else min(n, self.top_k)
        share = self._share(len(self._here), n, self.gp_fraction) if self._started() else 0
        rest = super().ask(n - share) if n - share > 0 else []
        if self.stopped_early:
            return []
        from_gp = []
        for config in self._gp.ask(share):
            index = self.context.space.index(config)
            if index is not None and not self._tried[index]:
                self._tried[index] = True
                from_gp.append(config)
        return rest + from_gp
