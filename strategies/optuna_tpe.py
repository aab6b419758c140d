"""Optuna's samplers (TPE by default) over a tunekit Space, through Optuna's ask-and-tell API.

Domains of powers of two are searched as integer exponents, other domains as categories. A
proposal the Space's constraints reject, or one already proposed (TPE repeats itself in a finite
space), is told to Optuna as failed and drawn again, without spending budget; after
``max_redraws`` such draws the nearest untried valid config to the last one (of those ``restrict``
allows) is taken instead. Optuna is told log times (Optuna's GP models its values as a smooth
function; a time's log varies far more evenly over a Space than the time). A config that failed
to compile or run is told as a completed trial twice as slow as the slowest time so far, since
TPE learns nothing from failed trials; before any config ran, as ``FAILURE_PENALTY`` ms (its log,
about 28, where times of 1 us to 1 s give -7 to 7: an outlier the GP's fit has to absorb until
configs run).
Configs in flight use TPE's constant liar, so that the configs pending at once differ. When the store holds
the kernel's trials on other keys, their best configs are enqueued first (cross-shape warm start).

The GP sampler's acquisition (log expected improvement) is maximised over the Space's valid,
untried configs, scored all at once (a seeded sample of ``gp_candidates``, by default
``MAX_GP_CANDIDATES``, as many as Optuna scores before its local search, where there are more),
instead of by Optuna's local search over a continuous relaxation: a Space is finite, the local
search took most of a replay's time (a replay of 200 evaluations on a 4,362-config space did not
finish in 8 minutes), and its proposals were often invalid or already tried, each a wasted GP fit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tunekit.compat import finite_candidates_gp_sampler
from tunekit.config import Config, config_json, config_to_dict
from tunekit.space import Space, is_power_of_two
from tunekit.strategy import SearchContext, Strategy, check_count, check_growth
from tunekit.trial import Trial

#: What a failed config is told as before any config ran (as a time in ms; its log is told).
FAILURE_PENALTY = 1e12
#: Configs the GP's acquisition is evaluated on per proposal, at most, unless ``gp_candidates`` says otherwise.
MAX_GP_CANDIDATES = 2048
SAMPLERS = ("tpe", "gp", "cmaes", "random")


def _distributions(space: Space):
    from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

    distributions: dict[str, BaseDistribution] = {}
    decoders: dict[str, Callable[[Any], Any]] = {}
    for name, domain in space.domains.items():
        exponents = sorted(int(math.log2(v)) for v in domain if is_power_of_two(v))
        # consecutive powers of two, in whatever order the configs listed them: an ordered integer
        if len(exponents) == len(domain) and exponents == list(range(exponents[0], exponents[-1] + 1)):
            distributions[name] = IntDistribution(min(exponents), max(exponents))
            decoders[name] = lambda exponent: 2 ** int(exponent)
        else:
            distributions[name] = CategoricalDistribution(list(domain))
            decoders[name] = lambda value: value
    return distributions, decoders


class OptunaSearch(Strategy):
    """Optuna's sampler, ask-and-tell.

    Args:
        sampler: ``"tpe"`` (default), ``"gp"``, ``"cmaes"`` or ``"random"``.
        n_startup_trials: random proposals before TPE models the results.
        max_redraws: draws per proposal before the nearest untried valid (and allowed) config is
            taken instead.
        warm_start: best configs of other keys (from the store) proposed first.
        gp_candidates: with ``sampler="gp"``, the untried configs the GP's acquisition is scored on
            per proposal, at most (a seeded sample where there are more; its cost grows with them).
        gp_refit_growth: with ``sampler="gp"``, None: the GP's kernel is fitted at every proposal
            (Optuna's way); a number: fitted again only once the trials grew by that fraction since
            its last fit (at least one), the last fit's kernel serving in between
            (``tunekit.compat.finite_candidates_gp_sampler``).
    """

    name = "optuna"

    def __init__(self, sampler: str = "tpe", n_startup_trials: int = 10, max_redraws: int = 5,
                 warm_start: int = 8, gp_candidates: int = MAX_GP_CANDIDATES,
                 gp_refit_growth: float | None = None) -> None:
        self.sampler = sampler
        self.n_startup_trials = n_startup_trials
        self.max_redraws = max_redraws
        self.warm_start = warm_start
        self.gp_candidates = gp_candidates
        self.gp_refit_growth = gp_refit_growth

    def _make_sampler(self, seed: int):
        import optuna

        if self.sampler not in SAMPLERS:
            raise ValueError(f"Unknown Optuna sampler {self.sampler!r}. Valid samplers: {', '.join(SAMPLERS)}.")
        if self.sampler == "tpe":
            return optuna.samplers.TPESampler(seed=seed, n_startup_trials=self.n_startup_trials, multivariate=True,
                                              constant_liar=True)
        if self.sampler == "gp":
            return finite_candidates_gp_sampler(seed, self.n_startup_trials,
                                                lambda: self._untried_params(self.gp_candidates),
                                                refit_growth=self.gp_refit_growth)
        if self.sampler == "cmaes":
            return optuna.samplers.CmaEsSampler(seed=seed, n_startup_trials=self.n_startup_trials)
        return optuna.samplers.RandomSampler(seed=seed)

    def start(self, context: SearchContext) -> None:
        import optuna

        check_count(self, "gp_candidates")
        check_growth(self, "gp_refit_growth")
        if self.gp_refit_growth is not None and self.sampler != "gp":
            raise ValueError(f"{type(self).__name__}(gp_refit_growth={self.gp_refit_growth!r}) needs "
                             f"sampler='gp' (it is {self.sampler!r}): only a GP fits a kernel")
        super().start(context)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._rng = np.random.default_rng(context.seed)
        self._study = optuna.create_study(direction="minimize", sampler=self._make_sampler(context.seed % 2**32))
        self._distributions, self._decoders = _distributions(context.space)
        # each parameter, and whether Optuna searches it as an exponent of 2 (an IntDistribution)
        self._exponents = [(name, type(distribution).__name__ == "IntDistribution")
                           for name, distribution in self._distributions.items()]
        self._asked: dict[str, int] = {}  # config id -> the number of the Optuna trial waiting for its result
        self._told: set[str] = set()  # config ids told
        self._slowest = -math.inf  # the slowest log time told so far
        self._configs = context.space.configs()
        self._all_params: list[dict] | None = None  # Optuna's parameters of every config, when first needed
        self._allowed: np.ndarray | None = None  # which configs may be proposed (restrict); None: all
        self._proposed = np.zeros(len(self._configs), dtype=bool)  # which configs were proposed, by position
        self._canonical = context.space.canonical_positions()  # a repeated config's copies share one position
        self._encoded = context.space.encoded()
        self._scale = np.maximum(np.ptp(self._encoded, axis=0), 1.0) if len(self._configs) else np.empty(0)
        for config in self._best_elsewhere(context):
            self._study.enqueue_trial(self._optuna_params(config), skip_if_exists=True)

    def _best_elsewhere(self, context: SearchContext) -> list[Config]:
        """Cross-shape warm start: the best configs the store holds for other keys, best first,
        ``warm_start`` in all, taken in turn from each key."""
        by_key: dict[str, list[Trial]] = {}
        for trial in context.history:
            if trial.ok:
                by_key.setdefault(trial.key.json if trial.key else "", []).append(trial)
        ranked = [sorted(trials, key=lambda t: t.time_ms) for trials in by_key.values()]
        chosen: dict[str, Config] = {}
        for position in range(max((len(r) for r in ranked), default=0)):
            for trials in ranked:
                if position < len(trials) and len(chosen) < self.warm_start:
                    config = context.space.canonical(trials[position].config)
                    if config is not None:
                        chosen.setdefault(config_json(config), config)
        return list(chosen.values())

    def _optuna_params(self, config: Config) -> dict:
        flat = config_to_dict(config)
        # a value the config lacks is None (``Space(maxnreg=[None, 128])``: Optuna's category None)
        return {name: int(math.log2(flat[name])) if exponent else flat.get(name)
                for name, exponent in self._exponents}

    def _untried_params(self, limit: int) -> list[dict]:
        """Optuna's parameters of at most ``limit`` valid configs not proposed yet (a seeded sample
        when there are more): the candidates the GP's acquisition is maximised over."""
        untried = self._unproposed()
        if len(untried) > limit:
            untried = np.sort(self._rng.choice(untried, size=limit, replace=False))
        if self._all_params is None:
            self._all_params = self._params_of_every_config()
        return [self._all_params[i] for i in untried]

    def _params_of_every_config(self) -> list[dict]:
        """``_optuna_params`` of every config of the Space, in order: each domain's values are
        made Optuna's once (a missing value is None) and looked up by the configs' positions in
        the domains, which the Space makes once, instead of a pass over every config's own. A value
        is given as its domain lists it: where a Space made from configs kept one of two equal
        values (1 and True, 64 and 64.0), the configs holding the other get it, which Optuna's
        categories take as the same choice (they compare by ``==``)."""
        space = self.context.space
        in_domains = space.value_positions(ordered=False)
        names = [name for name, _ in self._exponents]
        columns = [np.array([int(math.log2(value)) if exponent else value for value in space.domains[name]] + [None],
                            dtype=object)[in_domains[:, j]]
                   for j, (name, exponent) in enumerate(self._exponents)]
        return [dict(zip(names, values)) for values in zip(*columns)]

    def _unproposed(self) -> np.ndarray:
        """Indices of the configs neither proposed nor left out by ``restrict``."""
        unproposed = ~self._proposed[self._canonical]
        return np.flatnonzero(unproposed if self._allowed is None else unproposed & self._allowed)

    def _nearest_untried(self, params: dict) -> Config | None:
        """The unproposed valid config closest to a rejected draw (L1 over the Space's encoding,
        each parameter scaled to its range), of those ``restrict`` allows: where the sampler wanted
        to go, made feasible."""
        untried = self._unproposed()
        if not len(untried):
            return None
        target = self.context.space.encode(params)
        distance = (np.abs(self._encoded[untried] - target) / self._scale).sum(axis=1)
        return self._configs[untried[int(np.argmin(distance))]]

    def _draw(self) -> Config | None:
        from optuna.trial import TrialState

        params: dict = {}
        if self._allowed is not None and not len(self._unproposed()):
            return None  # nothing left to draw from (the GP's acquisition would search a continuous space)
        for _ in range(self.max_redraws):
            trial = self._study.ask(self._distributions)
            params = {name: self._decoders[name](value) for name, value in trial.params.items()}
            config = self.context.space.canonical(params)
            if config is None or self._proposed[self.context.space.position(config)] or not self._permitted(config):
                self._study.tell(trial, state=TrialState.FAIL)  # rejected or repeated: draw again, for free
                continue
            self._asked[config_json(config)] = trial.number
            return config
        # the sampler keeps proposing what the Space rejects or what was tried: go where it wanted
        return self._nearest_untried(params) if params else None

    def ask(self, n: int) -> list[Config]:
        batch = []
        for _ in range(n):
            config = self._draw()
            if config is None:
                break
            self._proposed[self.context.space.position(config)] = True
            batch.append(config)
        return batch

    def hold(self, configs: Sequence[Config]) -> None:
        """Have the sampler take ``configs`` (of the Space) as running trials until they are told,
        and never propose them: configs a strategy that shares the tuning with this one has in
        flight. Optuna's GP takes running trials into its acquisition, as it does its own pending
        proposals (in Optuna 5.0 and 5.1 a q-batch log expected improvement, in 4.8 a constant liar
        at the best value), so it does not propose where they already look; TPE's constant liar takes
        them as its worst value. Configs running in the study already (drawn by the sampler, or
        held) or told are skipped; a config ``ask`` took as the nearest to a rejected draw is not
        a trial of the study, and is held. Each held config must be told, as a proposed one must,
        or it stays running. A config not of the Space is a ValueError, and then none of
        ``configs`` is held."""
        from optuna.trial import TrialState, create_trial

        new = {config_json(config): config for config in configs}
        new = {config_id: config for config_id, config in new.items()
               if config_id not in self._asked and config_id not in self._told}
        positions = [self.context.space.position(config) for config in new.values()]  # ValueError before any change
        for (config_id, config), position in zip(new.items(), positions):
            self._study.add_trial(create_trial(params=self._optuna_params(config), distributions=self._distributions,
                                               state=TrialState.RUNNING))
            self._asked[config_id] = self._study.get_trials(deepcopy=False)[-1].number
            self._proposed[position] = True

    def restrict(self, allowed: np.ndarray | None) -> None:
        """Until the next call, propose only the configs where ``allowed`` is true (a mask over
        ``space.configs()``, copied; None: any config): a strategy that shares the tuning with this
        one proposed the others or expects them to fail. A queued config (the warm start) that
        the mask forbids when drawn is told as failed and not queued again."""
        if allowed is not None and len(allowed) != len(self._configs):
            raise ValueError(f"{type(self).__name__}.restrict: a mask of {len(allowed)} configs for a Space "
                             f"of {len(self._configs)}")
        self._allowed = None if allowed is None else np.array(allowed, dtype=bool)

    def _permitted(self, config: Config) -> bool:
        if self._allowed is None:
            return True
        index = self.context.space.index(config)
        return index is not None and bool(self._allowed[index])

    def tell(self, trials: Sequence[Trial]) -> None:
        from optuna.trial import create_trial

        for trial in trials:
            if trial.ok:
                value = math.log(trial.time_ms)
                self._slowest = max(self._slowest, value)
            else:
                value = self._slowest + math.log(2) if math.isfinite(self._slowest) else math.log(FAILURE_PENALTY)
            self._told.add(trial.config_id)
            index = self.context.space.index(trial.config)
            if index is not None:  # told without being proposed here (another proposer's): not to be proposed
                self._proposed[index] = True
            waiting = self._asked.pop(trial.config_id, None)
            if waiting is not None:
                self._study.tell(waiting, value)
                continue
            # a config this sampler did not draw (a nearest feasible one): add it as a finished trial
            self._study.add_trial(create_trial(params=self._optuna_params(trial.config),
                                               distributions=self._distributions, value=value))


class OptunaGPSearch(OptunaSearch):
    """``OptunaSearch`` with Optuna's Gaussian-process sampler (``strategy="optuna-gp"``)."""

    name = "optuna-gp"

    def __init__(self, sampler: str = "gp", n_startup_trials: int = 10, max_redraws: int = 5,
                 warm_start: int = 8, gp_candidates: int = MAX_GP_CANDIDATES,
                 gp_refit_growth: float | None = None) -> None:
        super().__init__(sampler, n_startup_trials, max_redraws, warm_start, gp_candidates, gp_refit_growth)
