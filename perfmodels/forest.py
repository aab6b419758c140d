"""The random-forest perf model: scikit-learn forests over config and shape features."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.utils import check_random_state

from tunekit.config import Config
from tunekit.space import Space
from tunekit.store import ResultsStore

from .base import KeyLike, PerfModel, trials_from_rows


class _TreesMadeDirectly:
    """Makes each tree of a scikit-learn forest from the forest's own tree parameters, as the
    forest's ``_make_estimator`` does through ``clone`` and ``set_params``, without them: those
    read each tree's signature several times, a cost a search that refits 8 trees after every
    trial pays each time (about 6 % of ``default``'s time per config: experiments/results/tree-making/).
    The trees and their random states are the same (``tests/test_perfmodels.py`` compares the
    predictions with scikit-learn's own forest); where scikit-learn stops calling this method, the
    forest makes its trees as usual."""

    tree_class: type
    estimator_params: tuple[str, ...]
    estimators_: list

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> Any:
        # a weighted bootstrap draws with ``choice`` too (scikit-learn 1.9), which _SeededAtEachDraw
        # does not start afresh: such a fit's trees get their integer seeds
        self._seeded_at_each_draw = sample_weight is None
        return super().fit(X, y, sample_weight=sample_weight)  # type: ignore[misc]

    def _make_estimator(self, append: bool = True, random_state: Any = None) -> Any:
        tree = self.tree_class(**{name: getattr(self, name) for name in self.estimator_params})
        if random_state is not None:  # what sklearn.ensemble._base._set_random_states draws for one tree
            seed = check_random_state(random_state).randint(np.iinfo(np.int32).max)
            tree.random_state = _SeededAtEachDraw(seed) if getattr(self, "_seeded_at_each_draw", False) else seed
        if append:
            self.estimators_.append(tree)
        return tree


class _SeededAtEachDraw(np.random.RandomState):
    """A tree's random state whose every ``randint`` draws from ``RandomState(seed_value)`` afresh:
    what a tree with an integer seed does, of which scikit-learn makes a new ``RandomState`` at
    each use (in an unweighted fit, scikit-learn 1.3 to 1.9: the bootstrap sample and the
    splitter's seed, one ``randint`` each). Numpy seeds a new ``RandomState`` from the system's
    entropy before the integer replaces it, about 75 us, twice per tree; this one reseeds one
    generator that every tree shares, a draw at a time. Other draws are not started afresh."""

    _shared = np.random.MT19937(0)
    _drawing = threading.Lock()

    def __init__(self, seed_value: int) -> None:
        super().__init__(self._shared)
        self.seed_value = int(seed_value)

    def randint(self, *args: Any, **kwargs: Any) -> Any:
        with self._drawing:
            self.seed(self.seed_value)
            return super().randint(*args, **kwargs)

    def __reduce__(self) -> tuple:
        return type(self), (self.seed_value,)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.seed_value})"


class _Regressor(_TreesMadeDirectly, RandomForestRegressor):
    tree_class = DecisionTreeRegressor


class _Classifier(_TreesMadeDirectly, RandomForestClassifier):
    tree_class = DecisionTreeClassifier


class RandomForest(PerfModel):
    """A ``PerfModel`` with random forests for time and failure, and the spread of its trees.

    Args:
        space: what the configs are drawn from.
        n_estimators: trees per forest.
        min_samples_leaf: as scikit-learn's; larger smooths predictions on few trials.
        max_features: as scikit-learn's: a float is the share of features each split considers
            (an int is a number of features: 1 means one); below 1.0 the trees differ more, so
            their spread says more about what is unknown.
        random_state: seeds both forests.
        failure_threshold: see ``PerfModel``.
        failure_trees: trees of the failure forest (None: half of ``n_estimators``, at least 8).
        alignment: see ``PerfModel``.
    """

    def __init__(self, space: Space, n_estimators: int = 64, min_samples_leaf: int = 1,
                 random_state: int | None = 0, failure_threshold: float = 0.5, max_features: float = 1.0,
                 failure_trees: int | None = None, alignment: bool = False) -> None:
        self.n_estimators = n_estimators
        self.min_samples_leaf = min_samples_leaf
        self.random_state = random_state
        self.max_features = max_features
        self.failure_trees = failure_trees
        super().__init__(space, None, None, failure_threshold, alignment)

    def _default_regressor(self) -> RandomForestRegressor:
        return _Regressor(n_estimators=self.n_estimators, min_samples_leaf=self.min_samples_leaf,
                                     max_features=self.max_features, random_state=self.random_state)

    def _failure_trees(self) -> int:
        return self.failure_trees if self.failure_trees is not None else max(8, self.n_estimators // 2)

    def _default_classifier(self) -> RandomForestClassifier:
        return _Classifier(n_estimators=self._failure_trees(), random_state=self.random_state)

    def predict_log_spread(self, configs: Sequence[Config | Mapping[str, Any]], key: KeyLike | None
                           ) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation over the trees of the predicted log time."""
        per_tree = self.per_tree_log(self.features(configs, key))
        return per_tree.mean(axis=0), per_tree.std(axis=0)

    def per_tree_log(self, features: np.ndarray) -> np.ndarray:
        """Each tree's predicted log time (trees x rows), from ``features`` rows. The rows are
        validated once for all trees (as the forest's own ``predict`` does), not once per tree:
        a search scores every untried config after each trial, and the per-tree checks cost more
        than the trees."""
        rows = np.ascontiguousarray(features, dtype=np.float32)  # what the trees compare against
        if np.isinf(rows).any():  # as the forest's own checks refuse (NaN is a missing value to the trees)
            raise ValueError("RandomForest.per_tree_log: a feature is infinite or too large for float32")
        return np.stack([tree.predict(rows, check_input=False) for tree in self.regressor_.estimators_])

    def refreshed(self, trials: Sequence, key: KeyLike | None = None, *, trees: int, random_state: int,
                  **fit_options: Any) -> RandomForest:
        """A model whose ``trees`` newest regression trees are fit on ``trials`` and whose others
        are this model's newest: a search that refits after every trial pays for ``trees`` trees,
        not for the whole forest, and no tree is more than ``n_estimators / trees`` fits old. The
        failure forest is fit anew, at its full size (a failure seen once must count at once).
        Where the features changed (a key of other arguments), every tree is fit anew."""
        def fit(count: int) -> RandomForest:
            made = type(self)(self.space, count, self.min_samples_leaf, random_state, self.failure_threshold,
                              self.max_features, self._failure_trees(), self.alignment)  # a subclass stays one
            return made.fit(trials, key, **fit_options)

        if trees >= self.n_estimators:
            return fit(self.n_estimators)
        newer = fit(trees)
        if newer.key_feature_names_ != self.key_feature_names_:
            return fit(self.n_estimators)
        newer.regressor_.estimators_ = self.regressor_.estimators_[trees:] + newer.regressor_.estimators_
        newer.regressor_.n_estimators = newer.n_estimators = self.n_estimators
        return newer

    @classmethod
    def from_store(cls, store: ResultsStore, kernel: str, space: Space, device: str | None = None,
                   **options: Any) -> RandomForest:
        """Fit on every trial of ``kernel`` (its Python name) in ``store``, on every key."""
        trials = trials_from_rows(store.rows(kernel=kernel, device=device))
        if not trials:
            raise ValueError(f"the store at {store.url} holds no trials of kernel {kernel!r}")
        return cls(space, **options).fit(trials)
