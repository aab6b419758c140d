"""Random-forest-guided search: a perf model ranks the untried configs, the best are measured.

The model (``tunekit.perfmodels.RandomForest``) learns from every trial of the kernel the store
holds, on every key, and from this tuning's trials as they arrive, so that a new shape starts
from what the other shapes taught. After each fit it scores the configs (the whole Space, or a
random ``candidates`` of a larger one) by the lower confidence bound of predicted log time, mean
minus ``kappa`` standard deviations over the trees, with configs the failure forest expects to
fail last; each ask takes the best-scored untried ones. With no successful trial to learn from,
it samples at random. Once a config failed for want of shared memory, the shared memory its
compiles reported (``SharedMemoryModel``) ranks the configs predicted not to fit last, random
draws included.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tunekit.config import Config
from tunekit.perfmodels import RandomForest, SharedMemoryModel
from tunekit.strategy import SearchContext, Strategy
from tunekit.trial import Status, Trial


class ForestSearch(Strategy):
    """Model-ranked search.

    Args:
        top_k: configs proposed per ask at most (as ``prune_configs_by``'s ``top_k``); None: as
            many as the tuning asks for (the first ask of a tuning that keeps configs in flight).
        initial: random configs measured first when the store holds nothing of this kernel.
        kappa: exploration: standard deviations over the trees subtracted from the mean.
        candidates: configs scored per fit at most (a random subset of larger Spaces).
        n_estimators: trees per forest.
        refit_growth: refit once this tuning's trials grew by this fraction since the last fit.
        failure_threshold: configs the failure forest gives a higher probability of failing rank last.
        max_features: share of the features each split of the forest considers, a float in (0, 1]
            (scikit-learn's; an int would be a number of features).
        refit_trees: at each refit after the first, fit only this many new trees, which replace
            the oldest (``RandomForest.refreshed``); None: fit the whole forest anew.
        refit_trees_after: evaluations of this tuning before ``refit_trees`` applies; until then
            every refit fits the whole forest (its first, few-trial trees would otherwise stay
            in it for several fits).
        alignment: the model also sees each integer meta-parameter's largest power-of-two
            divisor, where its domain is not all powers of two (``RandomForest``'s ``alignment``).
    """

    name = "rf"
    #: The model this search fits (a subclass of ``RandomForest`` taking its arguments, for
    #: experiments with other features: ``experiments/feature_variants.py``).
    model_class: type[RandomForest] = RandomForest

    def __init__(self, top_k: int | None = None, initial: int = 10, kappa: float = 1.0, candidates: int = 20000,
                 n_estimators: int = 32, refit_growth: float = 0.1, failure_threshold: float = 0.5,
                 max_features: float = 1.0, refit_trees: int | None = None, refit_trees_after: int = 0,
                 alignment: bool = False) -> None:
        self.top_k = top_k
        self.initial = initial
        self.kappa = kappa
        self.candidates = candidates
        self.n_estimators = n_estimators
        self.refit_growth = refit_growth
        self.failure_threshold = failure_threshold
        self.max_features = max_features
        self.refit_trees = refit_trees
        self.refit_trees_after = refit_trees_after
        self.alignment = alignment

    def start(self, context: SearchContext) -> None:
        if not isinstance(self.alignment, bool):
            raise ValueError(f"{type(self).__name__}(alignment={self.alignment!r}): expected True or False")
        super().start(context)
        self._configs = context.space.configs()
        self._encoded = context.space.encoded()
        self._tried = np.zeros(len(self._configs), dtype=bool)
        self._trials: list[Trial] = list(context.history)
        self._learned_elsewhere = any(t.ok for t in context.history)
        self._any_ok = self._learned_elsewhere
        self._here: list[Trial] = []  # this tuning's trials
        self._fitted_at = -1
        self._model: RandomForest | None = None
        self._scored = np.empty(0, dtype=int)  # indices scored at the last fit, best first
        self._mean_log = np.empty(0)  # their predicted log time, the mean over the trees
        self._spread_log = np.empty(0)  # and its standard deviation over the trees
        self._features_layout: tuple | None = None  # the key features and prior _space_features were made for
        self._space_features = np.empty((0, 0))
        self._space_rows = np.empty((0, 0), dtype=np.float32)  # _space_features as the trees read them
        self._tree_rows: dict = {}  # tree -> its predictions for every config of the Space
        self._too_large = np.zeros(len(self._configs), dtype=bool)  # predicted not to fit in shared memory
        self._learn_shared_memory(self._trials)

    def tell(self, trials: Sequence[Trial]) -> None:
        self._trials.extend(trials)
        self._here.extend(trials)
        self._any_ok = self._any_ok or any(t.ok for t in trials)
        self._mark(t.config for t in trials)
        self._learn_shared_memory(trials)

    def _learn_shared_memory(self, new: Sequence[Trial]) -> None:
        """Refit the shared-memory model when ``new`` trials report shared memory and some config
        (of any key) failed out of resources with its report."""
        if not any(t.shared_bytes for t in new) or not self._configs:
            return
        if not any(t.shared_bytes and t.status is Status.OUT_OF_RESOURCES for t in self._trials):
            return
        model = SharedMemoryModel(self.context.space).fit(self._trials)
        self._too_large = model.exceeds_limit(self._encoded)

    def _fitting(self, indices: np.ndarray) -> np.ndarray:
        """``indices`` without those predicted not to fit in shared memory (all of them when none would)."""
        indices = np.asarray(indices, dtype=int)
        fitting = indices[~self._too_large[indices]]
        return fitting if len(fitting) else indices

    def ask(self, n: int) -> list[Config]:
        n = n if self.top_k is None else min(n, self.top_k)
        untried = np.flatnonzero(~self._tried)
        if not len(untried) or n < 1:
            return []
        if not self._any_ok or self._in_start():
            return self._take(self.rng.permutation(self._fitting(untried))[:n])
        if self._model is None or len(self._here) - self._fitted_at >= max(1, self.refit_growth * self._fitted_at):
            self._fit()
        ranked = self._scored[~self._tried[self._scored]]
        if not len(ranked):  # every config scored at the last fit was tried: score afresh
            self._fit()
            ranked = self._scored[~self._tried[self._scored]]
        return self._take(ranked[:n])

    def _in_start(self) -> bool:
        """Whether the start is on: the store holds nothing of the kernel, and fewer than
        ``initial`` of this tuning's configs were told."""
        return not self._learned_elsewhere and len(self._here) < self.initial

    def _new_model(self, max_features: float | None = None) -> RandomForest:
        """An unfitted ``model_class`` with a random state drawn from this tuning's generator; its
        splits consider ``max_features`` (this search's own when None)."""
        return self.model_class(self.context.space, self.n_estimators, random_state=int(self.rng.integers(2**31)),
                                max_features=self.max_features if max_features is None else max_features,
                                alignment=self.alignment)

    def _fit(self) -> None:
        key = self.context.key
        if self.refit_trees and self._model is not None and len(self._here) >= self.refit_trees_after:
            self._model = self._model.refreshed(self._training_trials(), key, trees=self.refit_trees,
                                                random_state=int(self.rng.integers(2**31)), **self._fit_options())
        else:
            self._model = self._new_model().fit(self._training_trials(), key, **self._fit_options())
        self._fitted_at = len(self._here)
        untried = np.flatnonzero(~self._tried)
        if len(untried) <= self.candidates:
            scored = untried
            features, per_tree = self._whole_space_predictions()
            # a copy in Fortran order, which the mean's and spread's sums over the trees depend on to the bit
            features, per_tree = features[scored], per_tree[:, scored]
        else:
            scored = self.rng.choice(untried, self.candidates, replace=False)
            features = self._model.features_of_encoded(self._encoded[scored], key)
            per_tree = self._model.per_tree_log(features)
        # over the trees, config by config; kept, in the ranking's order, for DefaultSearch's early stop
        mean, spread = per_tree.mean(axis=0), per_tree.std(axis=0)
        score = mean - self.kappa * spread
        score[self._failing(scored, features)] = np.inf
        order = np.argsort(score, kind="stable")
        self._scored, self._mean_log, self._spread_log = scored[order], mean[order], spread[order]

    def _whole_space_predictions(self) -> tuple[np.ndarray, np.ndarray]:
        """The model's features of every config of the Space, and each tree's predicted log time
        for them (trees x configs). A tree predicts each config once: a refit that keeps trees
        (``refit_trees``) predicts with its new trees alone, and the features, which the prior's
        predictions are part of, are made once per layout of key features and prior (as float32
        rows too, as the trees read them)."""
        assert self._model is not None, "_whole_space_predictions follows a fit (_fit)"
        layout = (tuple(self._model.key_feature_names_), id(getattr(self._model, "prior_", None)))
        if self._features_layout != layout:
            features = self._model.features_of_encoded(self._encoded, self.context.key)
            rows = np.ascontiguousarray(features, dtype=np.float32)  # what the trees compare against
            if np.isinf(rows).any():  # as per_tree_log refuses
                raise ValueError("ForestSearch: a feature is infinite or too large for float32")
            self._features_layout, self._space_features, self._space_rows = layout, features, rows
            self._tree_rows = {}
        trees = self._model.regressor_.estimators_
        for tree in trees:
            if tree not in self._tree_rows:
                self._tree_rows[tree] = tree.predict(self._space_rows, check_input=False)
        self._tree_rows = {tree: self._tree_rows[tree] for tree in trees}  # the dropped trees' rows go
        return self._space_features, np.stack([self._tree_rows[tree] for tree in trees])

    def _training_trials(self) -> list[Trial]:
        """What the model learns from: every trial of the kernel, on every key."""
        return self._trials

    def _fit_options(self) -> dict:
        """Keyword arguments of the model's ``fit`` beside the trials and the key."""
        return {}

    def _failing(self, indices: np.ndarray, features: np.ndarray) -> np.ndarray:
        """Which of the configs at ``indices`` (with the model's ``features``) are expected to fail:
        by the failure forest, or for want of shared memory."""
        assert self._model is not None, "_failing scores for a fitted model (_fit)"
        return (self._model.failure_probability_of(features) > self.failure_threshold) | self._too_large[indices]

    def _mark(self, configs) -> None:
        for config in configs:
            index = self.context.space.index(config)
            if index is not None:
                self._tried[index] = True

    def _take(self, indices) -> list[Config]:
        chosen = [self._configs[i] for i in indices]
        self._tried[list(indices)] = True
        return chosen
