"""``default`` with the alignment feature as it was first cross-validated (at ``3177d0f``): over
every integer domain, Triton's compile options too (``num_stages`` 1 to 5), where the feature
that ships (``alignment_columns``) leaves the compile options out. For the leave-family-out
protocol's record of that candidate:

    designs: {"default-alignment": {"strategy": "alignment_all:EveryIntegerAlignedDefault"}}
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tunekit.perfmodels import RandomForest
from tunekit.perfmodels.base import MISSING
from tunekit.strategies.default import DefaultSearch

from tunekit.space import Space, is_power_of_two


def every_integer_columns(space: Space) -> list[int]:
    """Columns of positive-integer domains, not all powers of two, of more than one divisor."""
    columns = []
    for column, domain in enumerate(space.domains.values()):
        values = [v for v in domain if v is not None]
        if (values and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)
                and not all(is_power_of_two(v) for v in values)
                and len({(v & -v).bit_length() for v in values}) > 1):
            columns.append(column)
    return columns


class _EveryIntegerForest(RandomForest):
    """A forest whose features hold, after the encoding, each of ``every_integer_columns``'
    largest power-of-two divisor (log2), as ``3177d0f``'s ``alignment_features`` made them."""

    def features_of_encoded(self, encoded: np.ndarray, key: Any) -> np.ndarray:
        features = super().features_of_encoded(encoded, key)  # the encoding, the key's, the prior's
        values = encoded[:, every_integer_columns(self.space)].astype(np.int64)
        with np.errstate(divide="ignore"):
            aligned = np.where(values > 0, np.log2(np.maximum(values & -values, 1)), MISSING)
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
