"""A performance model: predicts a config's time at a key from trials on any key of the kernel.

Features are the Space's encoding of the config (log2 of power-of-two sizes), with ``alignment``
each integer size's largest power-of-two divisor (``alignment_features``), beside the key's
numbers (log2 of sizes, booleans as 0/1) and the bytes per element of each dtype, so that one
model learns across shapes. The regressor learns log time from the successful trials; a
classifier learns which configs fail (a tile that runs out of shared memory on one shape usually
does on the others) from all of them.

Keys of one kernel need not have one shape: an optional pointer passed as None drops a dtype, and
a changed ``key=`` names other arguments. Key features are therefore named (the argument's name,
``dtype 0``, ``dtype 1``, ...): a fitted model uses the names of every key it was fit on, a key
that lacks one gets ``MISSING`` there, and a name the model never saw is not a feature.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, clone

from tunekit.config import COMPILE_OPTIONS, Config
from tunekit.keys import TuningKey, as_key
from tunekit.space import Space, is_power_of_two
from tunekit.store import trial_from_row
from tunekit.trial import Source, Timing, Trial

#: A key as the models' public methods take it: a ``TuningKey``, or its ``{"args": ..., "dtypes": ...}`` form.
KeyLike = TuningKey | Mapping[str, Any]


#: The value of a key feature the key at hand does not have (-1, as ``Space.encode`` fills a missing value).
MISSING = -1.0

#: The name of the key feature of the i-th dtype: ``dtype 0``, ``dtype 1``, ... (no argument
#: name has a space, so it never names an argument).
DTYPE_FEATURE = "dtype "


def _twos(value: int) -> int:
    """The exponent of the largest power of two dividing ``value`` (a positive integer)."""
    return (value & -value).bit_length() - 1


def alignment_columns(space: Space, compile_options: bool = False) -> list[int]:
    """The encoding's columns that ``alignment_features`` describes: meta-parameters (sizes the
    kernel computes with, not Triton's compile options: a pipeline depth has no alignment) whose
    values are positive integers, not all powers of two (whose log2 already says it), differing
    in their largest power-of-two divisor (``block_size_x`` 16, 32, ..., 256; a tile of 1 to 4).
    A domain holding 0 or a negative number is left out: such integers more often choose among
    variants of the code than size anything. ``compile_options``: take them too (the feature's
    first, cross-validated and not chosen form: ``experiments/alignment_all.py``)."""
    columns = []
    for column, (name, domain) in enumerate(space.domains.items()):
        values = [v for v in domain if v is not None]
        if ((compile_options or name not in COMPILE_OPTIONS) and values
                and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)
                and not all(is_power_of_two(v) for v in values) and len({_twos(v) for v in values}) > 1):
            columns.append(column)
    return columns


def alignment_features(space: Space, encoded: np.ndarray, compile_options: bool = False) -> np.ndarray:
    """For each of ``alignment_columns``, the exponent of the largest power of two dividing the
    value; ``MISSING`` for a missing value or one outside the domain. GPU code is often fastest at
    sizes that are multiples of a warp, a vector width or a memory transaction (64 and 128 among
    48, 80 and 112), which a tree splitting on the value alone singles out only in several splits.
    ``Space.encode`` gives such a domain's values as numbers; each is looked up among the
    domain's own, so the exponent is that of the exact integer."""
    columns = alignment_columns(space, compile_options)
    features = np.full((len(encoded), len(columns)), MISSING)
    domains = list(space.domains.values())
    for out, column in enumerate(columns):
        values = sorted(v for v in domains[column] if v is not None)
        known = np.asarray(values, dtype=np.float64)
        exponents = np.asarray([_twos(v) for v in values], dtype=np.float64)
        at = np.clip(np.searchsorted(known, encoded[:, column]), 0, len(known) - 1)
        found = known[at] == encoded[:, column]
        features[found, out] = exponents[at[found]]
    return features


def key_of(trial: Trial) -> dict[str, Any] | None:
    """Deprecated: the key a stored trial was measured at, as a dict; use ``trial.key`` (a ``TuningKey``)."""
    warnings.warn("perfmodels.key_of is deprecated: use trial.key, a TuningKey", DeprecationWarning, stacklevel=2)
    return json.loads(trial.key.json) if trial.key is not None else None


def dtype_bytes(name: str) -> float:
    """Bytes per element of a dtype named as tunekit's keys name them (``torch.bfloat16``)."""
    for bits in (64, 32, 16, 8):
        if str(bits) in name:
            return bits / 8
    return 1.0 if "bool" in name else 0.0


def key_features(key: TuningKey | None) -> dict[str, float]:
    """A key's numbers by feature name: each argument's (log2 of a positive finite number, a
    boolean as 0/1, -1 for other numbers: zero, negative, infinite or NaN; 0 for anything else),
    then each dtype's bytes per element. Every feature is finite: the models refuse others."""
    if key is None:
        return {}
    features = {}
    for name, value in key.args.items():
        if isinstance(value, bool):
            features[name] = float(value)
        elif isinstance(value, (int, float)):
            features[name] = math.log2(value) if value > 0 and math.isfinite(value) else -1.0
        else:
            features[name] = 0.0
    for position, dtype in enumerate(key.dtypes):
        features[f"{DTYPE_FEATURE}{position}"] = dtype_bytes(str(dtype))
    return features


def key_feature_names(keys: Sequence[TuningKey | None]) -> tuple[str, ...]:
    """The feature names of every one of ``keys``: argument names in the order first seen, then
    the dtype positions up to the most dtypes any key has."""
    arguments = {name: None for key in keys if key is not None for name in key.args}
    dtypes = max((len(key.dtypes) for key in keys if key is not None), default=0)
    return (*arguments, *(f"{DTYPE_FEATURE}{position}" for position in range(dtypes)))


def trials_from_rows(rows: Sequence[Mapping[str, Any]]) -> list[Trial]:
    """Trials from ``ResultsStore.rows`` (or an export), each knowing its key; re-timings left out
    (each repeats a measured trial of the same config)."""
    return [trial_from_row(row) for row in rows if row.get("source") != Source.RETIMED]


def relative_to_fastest(trials: Sequence[Trial], key: KeyLike | None = None) -> list[Trial]:
    """``trials`` with each successful trial's times over the fastest successful trial's median at
    its key (failures as they are): fit on these, a model learns each key's slowdowns, not its
    scale, as transfer Bayesian optimisation normalises each task's outputs. Fit on raw times, a
    forest spends its first splits on the key features, which set each shape's scale and nothing
    of the order of its configs. A trial without a key was measured at ``key``, as ``fit`` takes
    it. A key whose trials are a few configs (a tuning stopped early) has its best of those as 1."""
    at = as_key(key)
    fastest: dict[TuningKey | None, float] = {}
    for trial in trials:
        if trial.ok:
            fastest[trial.key or at] = min(fastest.get(trial.key or at, math.inf), trial.time_ms)

    def scaled(value: float | None, by: float) -> float | None:
        return None if value is None else value / by

    def relative(trial: Trial) -> Trial:
        if not trial.ok or trial.timing is None:
            return trial
        by = fastest[trial.key or at]
        timing = trial.timing
        return replace(trial, timing=Timing(timing.median_ms / by, scaled(timing.p20_ms, by),
                                            scaled(timing.p80_ms, by)))

    return [relative(t) for t in trials]


class PerfModel(BaseEstimator):
    """Predicts time (ms) per config and key; ``inf`` for configs it expects to fail.

    Args:
        space: what the configs are drawn from; it fixes the encoding.
        regressor: any scikit-learn regressor; fit on log time. Cloned, never fit in place.
        classifier: any scikit-learn classifier with ``predict_proba``; None to ignore failures.
        failure_threshold: predicted probability of failure above which a config is ``inf``.
        alignment: add each integer meta-parameter's largest power-of-two divisor as a feature
            (``alignment_features``), where its domain is not all powers of two.
    """

    def __init__(self, space: Space, regressor: Any = None, classifier: Any = None,
                 failure_threshold: float = 0.5, alignment: bool = False) -> None:
        self.space = space
        self.regressor = regressor
        self.classifier = classifier
        self.failure_threshold = failure_threshold
        self.alignment = alignment

    # -- features ------------------------------------------------------------------------------

    def features(self, configs: Sequence[Config | Mapping[str, Any]], key: KeyLike | None) -> np.ndarray:
        """The config's encoding beside the key's numbers. (Adding log2 ratios of key sizes to
        tile sizes was tried and lowered the forest's held-out Spearman on the H200 spaces.)"""
        return self.features_of_encoded(self.space.encode(list(configs)), key)

    def features_of_encoded(self, encoded: np.ndarray, key: KeyLike | None) -> np.ndarray:
        """``features`` of configs already encoded by ``space.encode`` (a search encodes its
        Space once, not at every step). The key's features are laid out as the fitted model's
        ``key_feature_names_`` (the key's own names before a fit)."""
        key = as_key(key)
        values = key_features(key)
        names = getattr(self, "key_feature_names_", None)
        shape = np.asarray([values.get(name, MISSING) for name in (values if names is None else names)],
                           dtype=np.float64)
        columns = [encoded]
        if self.alignment:
            columns.append(alignment_features(self.space, encoded))
        columns.append(np.broadcast_to(shape, (len(encoded), len(shape))))
        prior = getattr(self, "prior_", None)
        if prior is not None:
            columns.append(prior.regressor_.predict(prior.features_of_encoded(encoded, key))[:, None])
        return np.hstack(columns)

    # -- estimator API ---------------------------------------------------------------------------

    def fit(self, trials: Sequence[Trial], key: KeyLike | None = None, prior: PerfModel | None = None) -> PerfModel:
        """Learn from ``trials``; a trial without a stored key was measured at ``key``. The key
        features are those of ``key`` and of every trial's key (``key_feature_names_``).

        ``prior``: a fitted model of the same Space (usually fit on the kernel's other keys) whose
        predicted log time becomes one more feature: a model fit on a few trials of a new key then
        learns how far the other shapes' ranking holds there, and ignores it where it does not."""
        if prior is not None:
            if not hasattr(prior, "regressor_"):
                raise ValueError("PerfModel.fit(prior=...) needs a fitted model; fit the prior first")
            if dict(prior.space.domains) != dict(self.space.domains):
                raise ValueError("PerfModel.fit(prior=...): the prior was fit on another Space "
                                 f"({dict(prior.space.domains)} against {dict(self.space.domains)})")
        self.prior_ = prior
        key = as_key(key)
        groups: dict[str, tuple[TuningKey | None, list[Trial]]] = {}
        for trial in trials:
            trial_key = trial.key or key
            groups.setdefault(trial_key.json if trial_key else "", (trial_key, []))[1].append(trial)
        self.key_feature_names_ = key_feature_names([key, *(trial_key for trial_key, _ in groups.values())])
        rows, times, failed = [], [], []
        for trial_key, group in groups.values():
            rows.append(self.features([t.config for t in group], trial_key))
            times += [math.log(t.time_ms) if t.ok else math.nan for t in group]
            failed += [not t.ok for t in group]
        x = np.vstack(rows) if rows else np.empty((0, len(self.space.domains)))
        log_times, failed_array = np.asarray(times), np.asarray(failed, dtype=bool)
        if not (~failed_array).any():
            raise ValueError("PerfModel.fit needs at least one successful trial")
        self.regressor_ = clone(self.regressor if self.regressor is not None else self._default_regressor())
        self.regressor_.fit(x[~failed_array], log_times[~failed_array])
        classifier = self.classifier if self.classifier is not None else self._default_classifier()
        self.classifier_ = None
        if classifier is not None and failed_array.any():
            self.classifier_ = clone(classifier).fit(x, failed_array)
        self.n_trials_ = len(x)
        return self

    def _default_regressor(self) -> Any:
        from sklearn.ensemble import RandomForestRegressor

        return RandomForestRegressor(n_estimators=64, random_state=0)

    def _default_classifier(self) -> Any:
        return None

    def predict_log(self, configs: Sequence[Config | Mapping[str, Any]], key: KeyLike | None) -> np.ndarray:
        """Predicted log time (natural log of ms), failures not considered."""
        return self.regressor_.predict(self.features(configs, key))

    def failure_probability(self, configs: Sequence[Config | Mapping[str, Any]], key: KeyLike | None) -> np.ndarray:
        return self.failure_probability_of(self.features(configs, key))

    def failure_probability_of(self, features: np.ndarray) -> np.ndarray:
        """Predicted probability of failure per ``features`` row (0 when no failure was seen)."""
        if self.classifier_ is None:
            return np.zeros(len(features))
        probabilities = self.classifier_.predict_proba(features)
        return probabilities[:, list(self.classifier_.classes_).index(True)]

    def predict(self, configs: Sequence[Config | Mapping[str, Any]], key: KeyLike | None) -> np.ndarray:
        """Predicted time (ms) per config; ``inf`` where failure is more likely than the threshold."""
        times = np.exp(self.predict_log(configs, key))
        times[self.failure_probability(configs, key) > self.failure_threshold] = np.inf
        return times

    # -- Triton's prune_configs_by ---------------------------------------------------------------

    def as_perf_model(self, key: Sequence[str]) -> Callable[..., float]:
        """A callable for ``prune_configs_by={"perf_model": ..., "top_k": k}``: Triton calls it as
        ``perf_model(**named_args, **kwargs, **config.all_kwargs())``; ``key`` names the launch
        arguments that make up the tuning key, as in ``autotune(key=...)``."""
        names = list(self.space.domains)

        def perf_model(**arguments: Any) -> float:
            config = {name: arguments[name] for name in names if name in arguments}
            values = tuple(arguments[name] for name in key)
            dtypes = tuple(str(v.dtype) for v in arguments.values() if hasattr(v, "dtype"))  # as Triton's key
            return float(self.predict([config], TuningKey(tuple(key), values, dtypes))[0])

        return perf_model
