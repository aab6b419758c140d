"""The random-forest perf model: scikit-learn forests over config and shape features."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from tunekit.config import Config
from tunekit.space import Space
from tunekit.store import ResultsStore

from .base import Key, PerfModel, trials_from_rows


class RandomForest(PerfModel):
    """A ``PerfModel`` with random forests for time and failure, and the spread of its trees.

    Args:
        space: what the configs are drawn from.
        n_estimators: trees per forest.
        min_samples_leaf: as scikit-learn's; larger smooths predictions on few trials.
        random_state: seeds both forests.
        failure_threshold: see ``PerfModel``.
    """

    def __init__(self, space: Space, n_estimators: int = 64, min_samples_leaf: int = 1,
                 random_state: int | None = 0, failure_threshold: float = 0.5) -> None:
        self.n_estimators = n_estimators
        self.min_samples_leaf = min_samples_leaf
        self.random_state = random_state
        super().__init__(space, None, None, failure_threshold)

    def _default_regressor(self) -> RandomForestRegressor:
        return RandomForestRegressor(n_estimators=self.n_estimators, min_samples_leaf=self.min_samples_leaf,
                                     random_state=self.random_state)

    def _default_classifier(self) -> RandomForestClassifier:
        return RandomForestClassifier(n_estimators=max(8, self.n_estimators // 2), random_state=self.random_state)

    def predict_log_spread(self, configs: Sequence[Config | Mapping[str, Any]], key: Key | None
                           ) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation over the trees of the predicted log time."""
        per_tree = self.per_tree_log(self.features(configs, key))
        return per_tree.mean(axis=0), per_tree.std(axis=0)

    def per_tree_log(self, features: np.ndarray) -> np.ndarray:
        """Each tree's predicted log time (trees x rows), from ``features`` rows."""
        return np.stack([tree.predict(features) for tree in self.regressor_.estimators_])

    @classmethod
    def from_store(cls, store: ResultsStore, kernel: str, space: Space, device: str | None = None,
                   **options: Any) -> RandomForest:
        """Fit on every trial of ``kernel`` (its Python name) in ``store``, on every key."""
        trials = trials_from_rows(store.rows(kernel=kernel, device=device))
        if not trials:
            raise ValueError(f"the store at {store.url} holds no trials of kernel {kernel!r}")
        return cls(space, **options).fit(trials)
