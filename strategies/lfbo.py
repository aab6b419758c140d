"""LFBO tree search, Helion's default autotuning search (``LFBOTreeSearch``), as a tunekit strategy.

Ported from pytorch/helion at commit ef091f416a50c443b38e4c8bff2980777f5ff225:
``helion/autotuner/surrogate_pattern_search.py`` (``LFBOTreeSearch``, its base ``LFBOPatternSearch``),
with ``pattern_search.py`` and ``effort_profile.py``. Helion is BSD-3-Clause licensed (Copyright (c)
Meta Platforms, Inc. and affiliates); this code is written for tunekit, not copied.

Likelihood-free Bayesian optimisation (Song et al., 2022): a random forest classifies the measured
configs, good when within the ``quantile`` of the times (weighted by how far they beat it), not good
when slower or failed. ``initial`` random configs start it; the ``copies`` fastest each start a
pattern search. Each generation a copy makes ``num_neighbors`` neighbours of its config (random
ones in the tuning's first two generations; later greedy walks through one random tree each, every
parameter it splits on along the config's path, plus a block size and ``num_warps``, set to the
value within ``radius`` steps it scores best), visits the new ones and measures a tenth
(``frac_selected``) of them, chosen one by one by probability of good minus ``similarity_penalty``
times the mean share of trees in which they share a leaf with those chosen before. It moves to
the fastest it chose (a slower one too, as Helion's), and ends when it chose at most one config
or after ``patience`` + 1 generations without ``min_improvement_delta`` of improvement. The forest
is refit after each generation; the search ends with its copies or after ``max_generations``.

Where Helion's search ends, a tunekit budget may not: with ``restarts`` a new round starts from the
fastest measured (only measured configs visited), and where none can start (same start and
forest) the untried config likeliest to be good is proposed. In small or heavily constrained
Spaces that is most proposals: a copy needs ten new valid neighbours to go on.

Other differences: ``initial``/``copies``/``max_generations`` are Helion's quick effort profile's
(its full profile's 100 random configs would fill a tunekit budget), started at random (that
profile starts from cached configs; no default config here); features are ``Space.encode``'s (a
categorical as its index, not one-hot); steps are positions in a domain's sorted values (Helion's
log2 or integer steps where domains have no gaps); block sizes are parameters named ``*block*``;
the forest is single-threaded, seeded by the tuning, and refit once trials grew by ``refit_growth``;
the store's trials of other keys are not used.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tunekit.config import Config
from tunekit.strategy import SearchContext, Strategy
from tunekit.trial import Trial

#: Untried configs scored at most when no pattern search can start (a seeded sample of larger Spaces).
POOL = 2048

#: A tree as lists (walked per config in Python, far faster than scikit-learn per call): left and
#: right children (-1 at a leaf), split feature, threshold, probability of good at the node.
_Tree = tuple[list[int], list[int], list[int], list[float], list[float]]


def _steps(order: list[int] | None, size: int, position: int, radius: int) -> list[int]:
    """A domain's other positions up to ``radius`` steps away in its sorted ``order``, every other
    one of an unordered domain (Helion's pattern neighbours)."""
    if order is None:
        return [p for p in range(size) if p != position]
    rank = order.index(position)
    return [order[k] for k in range(max(0, rank - radius), min(size, rank + radius + 1)) if k != rank]


def _leaf(tree: _Tree, x: list[float]) -> int:
    left, right, feature, threshold, _ = tree
    node = 0
    while left[node] != -1:
        node = left[node] if x[feature[node]] <= threshold[node] else right[node]
    return node


@dataclass
class _Copy:
    """One pattern search: its current config (an index into the Space's configs), the generations
    without improvement it may still take, and what its last generation chose."""

    current: int
    patience: int
    chosen: list[int] = field(default_factory=list)
    active: bool = True


class LFBOSearch(Strategy):
    """Helion's LFBO tree search (the module docstring says how it works and where it differs).

    Args:
        initial: random configs measured before the pattern searches.
        copies: pattern searches side by side, from the fastest configs.
        max_generations: generations per round of pattern searches.
        num_neighbors: neighbours a copy makes per generation.
        frac_selected: share of a copy's new neighbours it measures.
        radius: steps a parameter moves at most (positions in its sorted domain).
        quantile: share of the measured times labelled good.
        patience: generations without improvement a copy survives.
        min_improvement_delta: relative improvement under which a generation counts as none.
        similarity_penalty: weight of the leaf-sharing with configs chosen before.
        n_estimators: trees of the forest.
        refit_growth: refit after a generation once the trials grew by this share since the last fit.
        restarts: go on where Helion's search ends (new rounds, else the forest's best untried).
    """

    name = "lfbo"

    def __init__(self, initial: int = 30, copies: int = 2, max_generations: int = 5, num_neighbors: int = 200,
                 frac_selected: float = 0.1, radius: int = 2, quantile: float = 0.1, patience: int = 1,
                 min_improvement_delta: float = 0.001, similarity_penalty: float = 1.0,
                 n_estimators: int = 100, refit_growth: float = 0.1, restarts: bool = True) -> None:
        self.initial = initial
        self.copies = copies
        self.max_generations = max_generations
        self.num_neighbors = num_neighbors
        self.frac_selected = frac_selected
        self.radius = radius
        self.quantile = quantile
        self.patience = patience
        self.min_improvement_delta = min_improvement_delta
        self.similarity_penalty = similarity_penalty
        self.n_estimators = n_estimators
        self.refit_growth = refit_growth
        self.restarts = restarts

    def start(self, context: SearchContext) -> None:
        super().start(context)
        space = context.space
        self._configs = space.configs()
        domains = list(space.domains.items())
        # a config as the positions of its values in the domains (-1: not in it), and as the forest's
        # features (float32, as scikit-learn compares them); each position's steps, by radius
        self._positions = [tuple(row) for row in space.value_positions(ordered=False).tolist()]
        self._by_positions = {p: i for i, p in enumerate(self._positions)}
        self._encoded = space.encoded().astype(np.float32).astype(float)
        self._codes = [[float(np.float32(space.encode({n: v})[j])) for v in d]
                       for j, (n, d) in enumerate(domains)]
        numeric = [all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in d)
                   for _, d in domains]
        orders = [sorted(range(len(d)), key=self._codes[j].__getitem__) if numeric[j] else None
                  for j, (_, d) in enumerate(domains)]
        self._steps = {(j, p, r): _steps(orders[j], len(d), p, r)
                       for j, (_, d) in enumerate(domains) for p in range(len(d)) for r in {1, self.radius}}
        self._block = [j for j, (n, _) in enumerate(domains) if "block" in n.lower()]
        self._warps = [j for j, (n, _) in enumerate(domains) if n == "num_warps"]
        self._random = random.Random(int(self.rng.integers(2**63)))  # for the neighbours, as Helion's
        self._time = np.full(len(self._configs), np.nan)  # measured ms (inf: failed); nan: not measured
        self._canonical = context.space.canonical_positions()
        self._proposed = np.zeros(len(self._configs), dtype=bool)  # or told: never proposed (again)
        self._visited = self._proposed.copy()  # Helion's: every neighbour made in this round
        self._queue: list[int] = []
        self._copies: list[_Copy] = []
        self._began = False
        self._round_from: tuple[list[int], int] | None = None  # the last round's start and forest
        self._rounds = self._in_round = self._generations = self._told = self._fitted_at = 0
        self._forest: list[tuple[Any, np.ndarray]] = []  # (scikit-learn tree, probability of good per node)
        self._trees: list[_Tree] = []

    def ask(self, n: int) -> list[Config]:
        batch: list[int] = []
        while len(batch) < n:
            self._queue = [i for i in self._queue if not self._proposed[i]]
            if not self._queue:
                if batch or self._waiting():
                    break  # a generation's results come before the next one is made
                self._queue = self._next_batch()
                if not self._queue:
                    break
            batch.append(self._queue.pop(0))
            self._proposed[batch[-1]] = self._visited[batch[-1]] = True
        return [self._configs[i] for i in batch]

    def _waiting(self) -> bool:
        """Whether configs proposed are not told yet (in flight in a live tuning; a repeated
        config's copy is told under its config's position)."""
        return bool((self._proposed & np.isnan(self._time[self._canonical])).any())

    def tell(self, trials: Sequence[Trial]) -> None:
        for trial in trials:
            index = self.context.space.index(trial.config)
            if index is not None:
                self._time[index] = trial.time_ms
                self._proposed[index] = self._visited[index] = True
                self._told += 1

    def _next_batch(self) -> list[int]:
        """The initial configs, a generation, or where the search ended a new round's first or the
        forest's best untried config; [] when there is nothing more to propose."""
        untried = np.flatnonzero(~self._proposed)
        if not len(untried):
            return []
        if not self._began:
            self._began = True
            return [int(i) for i in self.rng.permutation(untried)[: self.initial]]
        self._move_copies()
        grown = self._told - self._fitted_at
        if grown > 0 and grown >= self.refit_growth * self._fitted_at:
            self._fit()
        going_on = any(c.active for c in self._copies) and self._in_round < self.max_generations
        if going_on and (batch := self._generation()):
            return batch
        if self._rounds and not self.restarts:
            return []  # where Helion's search ends
        if self._new_round() and ((batch := self._generation()) or not self.restarts):
            return batch
        pool = self.rng.permutation(untried)[:POOL]  # shuffled: ties go to a random one
        return self._choose([int(i) for i in pool], 1)

    def _new_round(self) -> bool:
        """Pattern searches from the fastest configs measured, only measured ones visited; False
        where the last round started from them with this forest, and no copy of it went on."""
        ran = np.flatnonzero(np.isfinite(self._time))
        fastest = [int(i) for i in ran[np.argsort(self._time[ran], kind="stable")][: self.copies]]
        if self._round_from == (fastest, self._fitted_at) and not any(c.active for c in self._copies):
            return False
        self._round_from, self._rounds, self._in_round = (fastest, self._fitted_at), self._rounds + 1, 0
        self._visited = self._proposed.copy()
        self._copies = [_Copy(i, self.patience) for i in fastest]
        return True

    def _generation(self) -> list[int]:
        """A generation of every active copy: the unmeasured configs they chose."""
        self._in_round += 1
        self._generations += 1
        batch: list[int] = []
        for copy in (c for c in self._copies if c.active):
            candidates = [copy.current]
            for neighbour in self._neighbours(self._positions[copy.current]):
                index = self._by_positions.get(neighbour)  # None: not a valid config of the Space
                if index is not None and not self._visited[index]:
                    self._visited[index] = True
                    candidates.append(index)
            copy.chosen = self._choose(candidates, int(len(candidates) * self.frac_selected))
            if len(copy.chosen) <= 1:
                copy.active, copy.chosen = False, []
            batch += [i for i in copy.chosen if not self._proposed[i]]
        return batch

    def _move_copies(self) -> None:
        """Each copy that chose configs moves to the fastest (+inf if unmeasured), losing patience
        where that is its current config or within ``min_improvement_delta`` of it."""
        for copy in (c for c in self._copies if c.chosen):
            best = copy.chosen[int(np.argmin(np.nan_to_num(self._time[copy.chosen], nan=math.inf)))]
            now, before = self._time[best], self._time[copy.current]
            if best == copy.current or (self.min_improvement_delta > 0 and math.isfinite(now) and
                                        math.isfinite(before) and before != 0 and
                                        abs(now / before - 1) < self.min_improvement_delta):
                copy.patience -= 1
                copy.active = copy.patience >= 0
            copy.current, copy.chosen = best, []

    def _fit(self) -> None:
        """The forest of every measured config: good (1) within the quantile of the times, else 0."""
        from sklearn.ensemble import RandomForestClassifier

        self._fitted_at = self._told
        measured = np.flatnonzero(~np.isnan(self._time))
        times = self._time[measured]
        good, weight = np.zeros(len(times), dtype=bool), np.ones(len(times))
        if np.isfinite(times).any():
            threshold = np.quantile(times[np.isfinite(times)], self.quantile)
            good = times <= threshold
            margin = np.maximum(1e-5, threshold - times[good])  # the further below, the heavier
            weight[good] = margin / margin.mean()
        self._forest, self._trees = [], []
        if good.all() or not good.any():
            return  # one class: nothing to learn, choices are random
        forest = RandomForestClassifier(n_estimators=self.n_estimators, criterion="log_loss", n_jobs=1,
                                        random_state=int(self.rng.integers(2**31)))
        forest.fit(self._encoded[measured], good.astype(int), sample_weight=weight)
        for tree in (estimator.tree_ for estimator in forest.estimators_):
            value = tree.value[:, 0, :]
            share = value[:, 1] / np.maximum(value.sum(axis=1), 1e-300)  # the tree's predict_proba
            self._forest.append((tree, share))
            self._trees.append((tree.children_left.tolist(), tree.children_right.tolist(),
                                tree.feature.tolist(), tree.threshold.tolist(), share.tolist()))

    def _choose(self, candidates: list[int], count: int) -> list[int]:
        """``count`` of ``candidates`` chosen one by one: the highest probability of good minus
        ``similarity_penalty`` times the mean leaf-sharing with those chosen; random without a forest."""
        count = min(count, len(candidates))
        if count <= 0:
            return []
        if not self._forest:
            return [candidates[i] for i in self.rng.permutation(len(candidates))[:count]]
        features = np.ascontiguousarray(self._encoded[candidates], dtype=np.float32)
        leaves = np.column_stack([tree.apply(features) for tree, _ in self._forest])
        probability = np.mean([share[leaves[:, t]] for t, (_, share) in enumerate(self._forest)], axis=0)
        similarity, remaining, chosen = np.zeros(len(candidates)), list(range(len(candidates))), list[int]()
        for _ in range(count):
            score = probability[remaining] - (self.similarity_penalty * similarity[remaining] / len(chosen)
                                              if chosen else 0.0)
            chosen.append(remaining.pop(int(np.argmax(score))))
            similarity += (leaves == leaves[chosen[-1]]).mean(axis=1)
        return [candidates[i] for i in chosen]

    def _neighbours(self, base: tuple[int, ...]) -> list[tuple[int, ...]]:
        """``num_neighbors`` changed copies of ``base`` (repeats kept): random in the first two
        generations, greedy walks through one tree each later."""
        rnd, steps, made = self._random, self._steps, []
        walk = bool(self._trees) and self._generations > 2
        x_base = [self._codes[j][p] if p >= 0 else -1.0 for j, p in enumerate(base)]
        for _ in range(self.num_neighbors):
            config, x = list(base), list(x_base)
            if not walk:
                block = [rnd.choice(self._block)] if self._block else []
                for j in block + self._warps:
                    if far := steps.get((j, base[j], self.radius)):
                        config[j] = rnd.choice(far)
                others = [(j, near) for j in range(len(base))
                          if j not in block + self._warps and (near := steps.get((j, base[j], 1)))]
                changed = rnd.sample(others, rnd.randint(0, min(self.radius, len(others)))) if others else []
                for j, near in changed:
                    config[j] = rnd.choice(near)
            else:
                tree = self._trees[rnd.randint(0, len(self._trees) - 1)]
                left, right, feature, threshold, good = tree
                path, node = [], 0
                while left[node] != -1:
                    path.append(feature[node])
                    node = left[node] if x[feature[node]] <= threshold[node] else right[node]
                path += ([rnd.choice(self._block)] if self._block else []) + self._warps
                for j in dict.fromkeys(path):
                    options = [config[j], *steps.get((j, config[j], self.radius), ())]
                    if len(options) == 1:
                        continue
                    scores = []
                    for p in options:
                        x[j] = self._codes[j][p]
                        scores.append(good[_leaf(tree, x)])
                    config[j] = rnd.choice([p for p, s in zip(options, scores) if s == max(scores)])
                    x[j] = self._codes[j][config[j]]
            if tuple(config) != base:
                made.append(tuple(config))
        return made
