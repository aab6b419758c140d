"""``default`` with the alignment feature as it was first cross-validated (at ``3177d0f``): over
every integer domain, Triton's compile options too (``num_stages`` 1 to 5), where the feature
that ships (``alignment_columns``) leaves the compile options out. For the leave-family-out
protocol's record of that candidate:

    designs: {"default-alignment": {"strategy": "alignment_all:EveryIntegerAlignedDefault"}}
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tunekit.perfmodels import RandomForest, alignment_features
from tunekit.strategies.default import DefaultSearch


class _EveryIntegerForest(RandomForest):
    """A forest whose features hold, after the encoding, the alignment of every integer domain,
    compile options included, as ``3177d0f``'s ``RandomForest(alignment=True)`` made them."""

    def features_of_encoded(self, encoded: np.ndarray, key: Any) -> np.ndarray:
        features = super().features_of_encoded(encoded, key)  # the encoding, the key's, the prior's
        aligned = alignment_features(self.space, encoded, compile_options=True)
        width = encoded.shape[1]
        return np.hstack([features[:, :width], aligned, features[:, width:]])


class EveryIntegerAlignedDefault(DefaultSearch):
    """``DefaultSearch`` whose forests see the alignment of every integer domain."""

    name = "default-alignment"

    def __init__(self, **options: Any) -> None:
        super().__init__(**{**options, "alignment": False})  # the feature is the forest's own here

    def _new_model(self, max_features: float | None = None) -> RandomForest:
        return _EveryIntegerForest(self.context.space, self.n_estimators, random_state=int(self.rng.integers(2**31)),
                                   max_features=self.max_features if max_features is None else max_features)
