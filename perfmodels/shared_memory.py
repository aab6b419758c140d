"""The shared-memory model: which untried configs will not fit the device's shared memory.

Every compile reports the shared memory of the config it compiled (Triton's ``metadata.shared``),
also for a config that then fails at launch because the device has less. So each trial teaches a
number, where the failure classifier of ``PerfModel`` learns one bit, and the device's limit is
bracketed by the trials themselves: above the largest shared memory of a config that ran, at or
below the smallest of one that failed out of resources. Shared memory depends on the config and
hardly on the shape (the same binary serves every shape that specialises alike), so trials of
every key count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, clone

from tunekit.space import Space
from tunekit.trial import Status, Trial


class SharedMemoryModel(BaseEstimator):
    """Predicts the shared memory (bytes) of a config's compile, and which configs exceed the limit.

    Args:
        space: what the configs are drawn from; it fixes the encoding.
        regressor: any scikit-learn regressor, fit on log2 bytes over the encoded config; None for
            a quadratic ridge regression (tile sizes multiply: products of log2 sizes are sums,
            so the quadratic terms let it extrapolate to tiles larger than any tried, which a
            forest cannot).

    After ``fit``: ``limit_`` (bytes a config may not reach: the geometric middle between the largest
    shared memory that ran and the smallest that failed out of resources above it; None until a
    config failed that way) and ``regressor_``.
    """

    def __init__(self, space: Space, regressor: Any = None) -> None:
        self.space = space
        self.regressor = regressor

    def fit(self, trials: Sequence[Trial]) -> SharedMemoryModel:
        """Learn from the trials whose compile reported shared memory (of any key)."""
        reported = [(t, t.shared_bytes) for t in trials if t.shared_bytes]
        if not reported:
            raise ValueError("SharedMemoryModel.fit needs trials with shared_bytes (the compile's report)")
        largest_fitting = max((size for t, size in reported if t.ok), default=0)
        too_large = [size for t, size in reported
                     if t.status is Status.OUT_OF_RESOURCES and size > largest_fitting]
        self.limit_ = (math.sqrt(min(too_large) * largest_fitting) if largest_fitting else min(too_large)) \
            if too_large else None
        self.regressor_ = clone(self.regressor if self.regressor is not None else _quadratic_ridge())
        self.regressor_.fit(self.space.encode([t.config for t, _ in reported]),
                            np.log2([size for _, size in reported]))
        return self

    def predict_encoded(self, encoded: np.ndarray) -> np.ndarray:
        """Predicted bytes per row of ``space.encode`` output."""
        return np.exp2(self.regressor_.predict(encoded))

    def exceeds_limit(self, encoded: np.ndarray) -> np.ndarray:
        """Whether each encoded config is predicted to need more shared memory than the device has
        (all False while no config failed for want of it)."""
        if self.limit_ is None:
            return np.zeros(len(encoded), dtype=bool)
        return self.predict_encoded(encoded) >= self.limit_


def _quadratic_ridge():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures
    from sklearn.linear_model import Ridge

    return make_pipeline(PolynomialFeatures(degree=2), Ridge(alpha=1e-3))
