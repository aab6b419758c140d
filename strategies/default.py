"""The default strategy: a space-filling start (or the other shapes' best guesses), the forest's
ranking, refinement around the best config, a share of Optuna's Gaussian process, and an early stop.

With nothing of the kernel in the store, it starts with ``initial`` configs spread over the Space
(greedy maximin distance over the encoding, so the first measurements cover every parameter's range
instead of clustering as random draws do). When the store holds the kernel's other keys, the warm
start takes, in turn, the fastest configs measured at the nearest other key (by the keys' log2
sizes), with two or more such keys the configs measured at every one of them by their worst
slowdown there, and the best predictions of a forest fit on the kernel's trials in the store (the
prior), with ``warm_spread`` configs of the space-filling design in turn with them, a hedge for a
shape unlike those stored. From then on it proposes what ``rf`` proposes, the untried configs with
the lowest lower confidence bound of predicted time, from a forest refit on this key's trials
before every pick (after 50 evaluations, by replacing its 8 oldest trees of 32), with the prior's
prediction as one more feature: it follows the other shapes' ranking only as far as this shape's
trials agree with it (one forest of every key's trials, as ``rf`` fits, let the other shapes' many
trials outvote this one's few). The forests also see each integer size's alignment (the largest
power of two dividing it, where its domain is not all powers of two). Configs the failure forests
expect to fail rank last. A fifth of the turns go to untried neighbours of the best config (a
forest smooths over sharp local optima), 15 % of the ranked ones to Optuna's GP (half once the best
has stalled for 20 evaluations), and it stops once the forest's expected improvement has stayed
under the timing noise for ``patience`` evaluations and the best has not improved by more than the
noise in the tuning's latter half. With configs in flight, the forest's picks are made after a
refit told the pending configs at their predicted times (the believer), so that an ask does not
propose near-duplicates.

How each option's default was chosen, and what was tried and not kept: the earliest options on
six recorded spaces (``docs/results/learned-search.md``), every later one by cross-validation
leaving whole kernel families (or kernels, for the store's use) out of corpus v1 or v2
(``experiments/leave_family_out.py``, ``experiments/transfer_cv.py``). Most candidates were
proposed after reading earlier rounds' results on every family, so the families are held out from
the choice, not from the proposal. Each round's report, held-out figures and what each candidate
gained and lost are in ``experiments/results/<round>/`` and ``docs/results/leave-family-out.md``:

- the neighbour and random turns, the trees replaced after 50 evaluations:
  ``leave-family-out-v1-designs5/``, ``turn-schedule/``, ``steps-by-size/``; ``kappa``:
  ``forest-kappa/``; the alignment feature: ``protocol-v2/``;
- the GP's shares: ``gp-known-failures/``, ``gp-stalled-c256/``; the neighbours' order:
  ``local-order/``; the believer and configs in flight: ``batch-asks/``, ``in-flight/``;
- the store's use: ``transfer-cv-v1/`` (``warm_spread``), ``transfer-cv-keys/`` (``warm_keys``),
  ``transfer-interleaved/``, ``transfer-screens/`` (``warm_robust``).

Options that are off are candidates judged or probed and not chosen, kept so that their rounds
replay: ``initial_design`` other than maximin (``latin-start/``, ``random-start/``), ``local_best``
(``family-gaps/``), ``earned_gp_fraction`` and ``early_gp_fraction`` (``gp-early-earned/``),
``gp_pending`` (``gp-pending/``), ``gp_refit_growth`` (``gp-refit/``), ``prior_target``
(``prior-target/``), ``warm_scaled`` (``transfer-scaled/``), ``local_moves`` (``local-moves/``).

Where it falls short, held out (20 seeds, budget 200): best / optimum 1.123 after 20 and 1.006
after 200 evaluations on the 57 spaces larger than the budget (``turn-schedule/``); with 18 configs
in flight, as live tunings run, 1.043 after 50 and 1.0051 after 200 over all 83 spaces, and with
the store slower than without it on 8 of 58 spaces (``in-flight/``); and ``optuna-gp`` scores
higher on the ``triton-gemv`` and ``triton-gemm`` families (``family-gaps/``).
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

import numpy as np
from scipy.special import ndtr
from scipy.stats import qmc
from tunekit.perfmodels import RandomForest, relative_to_fastest

from tunekit.config import Config, config_to_dict
from tunekit.keys import TuningKey, alike, key_distance, next_power_of_2
from tunekit.strategy import check_count, check_growth
from tunekit.trial import Status, Timing, Trial

from .forest import ForestSearch
from .optuna_tpe import OptunaGPSearch

#: ``DefaultSearch``'s ways of picking the start's configs.
INITIAL_DESIGNS = ("maximin", "random", "latin", "latin-maximin")
#: ``DefaultSearch``'s orders of the local proposals among the open neighbours of the best config.
LOCAL_ORDERS = ("random", "forest")
#: ``DefaultSearch``'s neighbourhoods of the best config (``Space.neighbours``' methods).
LOCAL_MOVES = ("adjacent", "hamming", "hamming-stalled")
#: What the store's prior learns of each stored key's trials (``DefaultSearch``'s ``prior_target``).
PRIOR_TARGETS = ("time", "slowdown")

#: The keyword that seeds ``scipy.stats.qmc``'s engines (``rng`` from SciPy 1.15, ``seed`` before).
QMC_RNG = "rng" if "rng" in inspect.signature(qmc.LatinHypercube).parameters else "seed"

ConfigId = TypeVar("ConfigId", int, str)  # a config as a position in a Space or a JSON text


def fastest_per_config(trials: Sequence[Trial], identify: Callable[[Config], ConfigId | None]
                       ) -> dict[ConfigId, float]:
    """Each config's fastest time among ``trials``, fastest first, keyed by ``identify(config)``
    (a Space's ``index``, or ``config_json``); configs it gives None for are left out."""
    times: dict[ConfigId, float] = {}
    for trial in sorted(trials, key=lambda t: t.time_ms):
        config = identify(trial.config)
        if config is not None and config not in times:
            times[config] = trial.time_ms
    return times


def ranked_by_slowdown(times_by_key: Sequence[Mapping[ConfigId, float]],
                       combined: Callable[[list[float]], float]) -> list[ConfigId]:
    """The configs measured at every key of ``times_by_key`` (one mapping of config to time per
    key), by ``combined`` of their slowdowns there (time over that key's fastest), ties by config.
    Empty for no keys, or where a key measured nothing."""
    if not times_by_key or not all(times_by_key):
        return []
    common = set.intersection(*(set(times) for times in times_by_key))
    fastest = [min(times.values()) for times in times_by_key]
    return sorted(common, key=lambda c: (combined([t[c] / f for t, f in zip(times_by_key, fastest)]), c))


def worst_slowdown(times_by_key: Sequence[Mapping[ConfigId, float]]) -> list[ConfigId]:
    """The configs measured at every key, by their largest slowdown there: configs good at every
    stored shape (``DefaultSearch``'s ``warm_robust``)."""
    return ranked_by_slowdown(times_by_key, max)


def expected_improvement(mean: np.ndarray, spread: np.ndarray, best: float) -> np.ndarray:
    """Expected improvement below ``best`` of a normal with the forest's mean and spread over
    trees (as SMAC does: a forest's trees alone never predict below the best time they saw)."""
    spread = np.maximum(spread, 1e-12)
    z = (best - mean) / spread
    # the standard normal's cdf and density, written out: scipy.stats.norm's checks of its
    # arguments cost more than the sums over the Space's configs
    return (best - mean) * ndtr(z) + spread * (np.exp(-z**2 / 2.0) / math.sqrt(2 * math.pi))


def made_up_time(log_time: float) -> float:
    """The believer's time for a pending config predicted at ``log_time``: ``math.exp``, the C
    library's, not ``np.exp``, which on CPUs with AVX-512 is Intel's SVML and may differ in the
    last bits; a made-up time a bit off becomes a training target a bit off, and the refit breaks
    its ties otherwise than on other CPUs. Past float's range it is infinite, as ``np.exp``'s was
    (the believer leaves such a config out), not an ``OverflowError``."""
    try:
        return math.exp(log_time)
    except OverflowError:
        return math.inf


EARNED_WINDOW = 5  # ranked turns of each proposer that earned_gp_fraction compares
EARNED_LEAST = 3  # turns each proposer must have had before it compares them


def due_turns(start: int, count: int, share: float) -> np.ndarray:
    """A mask over the turns from ``start`` to ``start + count``: True where a ``share`` of the
    turns comes due, that is where ``floor(turns so far x share)`` grows. The same turns whether
    they are asked for one at a time, as replays ask, or several at once, as a GPU tuning does. The
    1e-9 keeps a product that should be whole (0.7 x 90) from falling just under it; for the
    shares ``DefaultSearch`` has used, the turns are those of the plain floor."""
    turns = np.arange(start, start + count)
    return np.floor((turns + 1) * share + 1e-9) > np.floor(turns * share + 1e-9)


def _check_share(option: str, value: object) -> None:
    """``ValueError`` naming ``DefaultSearch``'s ``option`` unless ``value`` is a share in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"DefaultSearch({option}={value!r}): expected a share in [0, 1]")


def _size(value: object) -> int | None:
    """A key argument's value as a size a block may span, rounded up to a power of two; None for
    anything but an int above 1 (a dimension of 1 is spanned by any block, so equality with it
    says nothing)."""
    return next_power_of_2(value) if type(value) is int and value > 1 else None


class DefaultSearch(ForestSearch):
    """Forest-ranked search with a space-filling start, local refinement and an early stop.

    Args:
        initial: configs of the space-filling start, when the store holds nothing of this kernel.
        warm_start: configs tried first when the store holds the kernel's other keys (in turn
            with ``warm_spread``'s: ``warm_interleaved``): in turn, the nearest key's measured
            fastest and the prior's (the forest of those keys' trials) best predictions.
        local_fraction: share of the turns (evaluations) given to neighbours of the best config.
        noise: relative improvement under which a better time is not worth measuring (timing
            noise; 0.01 = 1 %).
        patience: evaluations the expected improvement must stay under ``noise`` before stopping.
        min_evals: evaluations of this tuning before an early stop is considered.
        initial_design: how the start without the store picks its ``initial`` configs:
            ``"maximin"`` (each as far as possible from those picked), ``"random"`` (not chosen
            on top of the shipped options: ``experiments/results/random-start/``), ``"latin"``
            (the configs nearest a Latin hypercube's points, so that each parameter's values come
            about equally often, where maximin takes the extremes) or ``"latin-maximin"`` (half of
            each, in turn). Neither was chosen (``experiments/results/latin-start/``): ``"latin"``
            gained on Triton GEMMs and lost on the Kernel Tuner convolution, GEMM and pnpoly
            spaces and on softmax.
        local_best: the neighbours of this many fastest configs share the local proposals (1:
            the best's alone; more search around several good configs, as parallel pattern
            searches do).
        local_radius: once every neighbour of the fastest configs is tried, the local proposals
            come from the untried configs fewest steps away (a step moves one parameter to the
            next value by size: ``Space.ordered_domains``), up to this many: a pattern search
            widening its step at a local optimum (1: only the neighbours).
        random_fraction: share of the turns after the start due to untried configs drawn at
            random (SMAC's interleaved random configurations: a forest does not extrapolate, so
            its ranking alone can stay in one basin). A turn ``local_fraction`` is also due on is
            local, and random only where no local config is open: at the default shares every
            random turn is a local one (``experiments/results/turn-schedule/``).
        warm_spread: configs of the space-filling design measured with the warm start, when the
            store holds the kernel's other keys: a hedge for a shape unlike those stored (a
            decode shape among prefill ones), whose warm start misleads, and trials over the
            whole Space from which the forest learns how far the prior's ranking holds here.
        alignment: the forests also see each integer meta-parameter's largest power-of-two
            divisor, where its domain is not all powers of two (``block_size_x`` in steps of 16:
            64 and 128 among 48, 80 and 112), which a tree splitting on the value singles out
            only in several splits (``tunekit.perfmodels.alignment_columns``).
        warm_keys: the warm start takes, in turn, the measured fastest configs of this many
            nearest other keys of the same arguments and dtypes (nearest first), and the
            prior's best predictions: 1 follows the nearest shape alone; more hedge against a
            nearest shape (by the keys' sizes) whose best is not this one's.
        gp_fraction: share of the forest's ranked proposals given instead to Optuna's Gaussian
            process (``OptunaGPSearch``, told every trial of the tuning): its smooth model of log
            time moves toward corners of the Space that a forest predicts flat, where the
            forest's runs stay in one basin. Once the search stalls ``stalled_gp_fraction``
            replaces it: ``gp_fraction=0`` makes no GP only with ``stalled_gp_fraction=None``.
        gp_candidates: untried configs the GP's acquisition is scored on per proposal, at most (a
            seeded sample of the allowed ones where there are more): the GP's cost per proposal
            grows with them (512 is the value the protocol judged with the stalled share).
        stalled_gp_fraction: the GP's share of the forest's ranked proposals instead of
            ``gp_fraction`` while the search has stalled (the best time has not improved by more
            than ``noise`` in the last ``stalled_after`` evaluations); None: ``gp_fraction``
            throughout. Where the forest's runs settle in one basin, the GP's smooth model of the
            whole Space proposes elsewhere. It was proposed from the convolution space where
            ``optuna-gp`` alone found an isolated optimum that ``default`` missed
            (``experiments/results/gp-stalled/``), and chosen by the protocol with
            ``gp_candidates=512`` (``experiments/results/gp-stalled-c256/``).
            Improvements each under ``noise`` do not end a stall, even where together they
            exceed it.
        stalled_after: evaluations without an improvement by more than ``noise`` after which
            ``stalled_gp_fraction`` applies.
        warm_scaled: in each nearest key's turn of the warm start, right after its measured
            config, also that config with every meta-parameter that equals one of the key's sizes
            there rounded up to a power of two set to that size here, rounded likewise: a block
            that spanned a whole row at the stored shape (``BLOCK_N = next_power_of_2(n_cols)``,
            as normalisation kernels choose) spans one here. A value equal to a size that stays,
            or to two that change differently, stays (``_scaled_to``). Off by default: leaving
            kernels out, 15 of 17 folds did not choose it (``experiments/results/transfer-scaled/``).
        warm_interleaved: the warm start's configs and the spread's in turn, a warm one first,
            instead of the spread after the whole warm start. The spread treats the warm start's
            configs as measured, so the configs are those of the order before, save where the
            tuning measured a given config first (``tunekit.search.Search``'s ``first``). Where
            the stored shapes mislead (a decode shape among prefill ones), the hedge is measured
            sooner; where the warm start's second or third config is this shape's best, it comes
            one or two evaluations later. An ask of several configs takes both kinds, and where
            the spread finds too few configs its turns take the prior's next. Chosen by every
            fold leaving a kernel out: with the store, slower than without on 3 of 58 spaces
            instead of 5 (``experiments/results/transfer-interleaved/``).
        local_order: which open neighbours of the best config the local proposals take first:
            ``"forest"`` (in the order of the forest's last ranking, made before this ask's
            refit, so without the latest trials; configs it did not score, on a Space of more than
            ``candidates``, after the others at random) or ``"random"`` (at random, as before).
            Proposed from the attention spaces, where the one config within 2 % is two steps from
            the first good one and ``optuna-gp`` found it sooner; chosen by 15 of 17 folds of
            ``experiments/leave_family_out.py`` (``experiments/results/local-order/``).
        local_moves: the neighbours of the best config: ``"adjacent"`` (one parameter one step
            away) or ``"hamming"`` (one parameter at any other value of its domain, so that a
            value at the far end of a parameter's range is one move away; with
            ``local_order="forest"`` the forest picks among them). Once all of them are tried,
            ``local_radius`` still widens by steps (configs two parameters one step each away).
            Not chosen by the protocol (``experiments/results/local-moves/``): it ended nearer the
            optimum after 200 evaluations, at the edge of what the seeds move, without moving the
            selection score. ``"hamming-stalled"``: adjacent until the search stalls as
            ``stalled_gp_fraction`` reads it (no gain over ``noise`` in ``stalled_after``
            evaluations), Hamming from then on, so that the early curve is what ships' and the
            wider moves come where the end is decided; proposed after that round and not chosen
            either (a tie on the selection score; nearer the optimum after 200 evaluations,
            behind after 50).
        warm_robust: where the store holds two or more other keys of this key's arguments and
            dtypes that measured configs of this Space, the warm start's turns also take, after
            the nearest keys' rankings and before the prior's, the configs measured at every one
            of them, by their worst slowdown there (time over that key's fastest): a config good
            at every stored shape where the nearest shape's best is not this one's. It takes none
            where the keys' turns fill the warm start (``warm_keys`` or ``warm_scaled`` turns
            before it, ``warm_start`` small). Chosen by 16 of 17 folds leaving a kernel out and
            on the whole corpus, by the mean log ratio of evaluations to 5 % with the store over
            without alone (20 seeds: slower than without on 2 of 58 spaces, as without it);
            held out, the folds' choices are behind what shipped before (37 of 48 spaces of 3+
            shape kernels within 10 evaluations against 38). Its stores held whole recorded
            spaces; with stores of what tunings of the other shapes measured, it is level with
            what shipped before on 10 seeds (4 of 58 spaces slower than without the store, 35 of
            48 within 10, each) and behind on the geometric mean, and every fold chose what
            shipped before there (``experiments/results/transfer-screens/``, sections 3 and 5).
            The corpus records 4 shapes of a kernel at most, so it was judged with 3 stored
            shapes at most; with more, fewer configs are measured at every one.
        believer: each forest pick is made after a refit that is told the configs pending (asked
            for and not told yet: those a live tuning has in flight, and the ask's earlier picks,
            local, random, the GP's and its own) at the time the forest's last fit predicts for
            them: a "believer", as batch Bayesian optimisation does (Ginsbourger, Le Riche and
            Carraro, 2010). Without it the forest's picks ignore the pending configs and take
            near-duplicates of them. Asked for one config at a time, as the protocol's replays
            ask, nothing is pending and it changes nothing. Replayed asking in batches of 32 (what
            a live tuning did before it kept configs in flight), every fold leaving a family out
            of corpus v2 chose it (``experiments/results/batch-asks/``). The made-up trials are
            made anew at each ask, but the forest fit last, which saw them, serves that ask's
            early stop and the order of its local proposals until it refits (and the trees
            ``refit_trees`` keeps learnt from them); the failure forest takes them for configs
            that ran. So it was replayed.
        earned_gp_fraction: the GP's share of the forest's ranked proposals, at least, while the
            GP's last 5 ranked turns measured faster configs than the forest's last 5 (by the mean
            rank of each among this tuning's trials when it was told; from 3 turns of each): a
            share earned where the GP's model of this Space is the better one, as on the gemv
            spaces where ``optuna-gp`` alone led and ``rf`` alone trailed. None: off. Probed on 7
            spaces and not put to the protocol (``experiments/results/gp-early-earned/``): it
            came into force after the 27th to 52nd evaluation, mostly where the stalled share
            already applied; at 0.5 it changed little, at 1 it raised the gemv family's score by
            less than ``optuna-gp``'s lead and lowered a convolution's.
        early_gp_fraction: the GP's share of the forest's ranked proposals, at least, before
            ``early_gp_until`` evaluations, in tunings without the store's prior: a GP models a
            few trials more smoothly than a forest, as ``optuna-gp``'s lead on two gemv spaces by
            the 20th evaluation suggested. None: off. Probed on 12 spaces and not put to the
            protocol (``experiments/results/gp-early-earned/``): at 0.5 it reached ``optuna-gp``'s
            score on the gemv family and gained on a pnpoly space, and lost on a GEMM, a
            convolution and attention.
        early_gp_until: evaluations of the tuning before which ``early_gp_fraction`` applies.
        gp_pending: at each of its turns the GP also takes the configs the other proposers have
            pending (in flight, or asked earlier in this ask) as running trials
            (``OptunaSearch.hold``), which Optuna's GP scores its candidates against, as it does
            its own pending picks. Without it the GP knows none of the forest's, the local or the
            random pending configs and may propose next to them. Asked for one config at a time
            nothing is pending and it changes nothing.
            Off: with 18 in flight the protocol's folds chose it by less than the seeds move, and
            held out it gained nothing (``experiments/results/gp-pending/``).
        gp_refit_growth: None, the GP's kernel is fitted at each of its turns; a number, it is
            fitted again only once the tuning's trials grew by that fraction since its last fit
            (at least one), its posterior taking every trial with the last fit's kernel between
            (``OptunaSearch``'s option). The fit is about 40 % of ``default``'s time per config on
            the largest space. Off: at 0.1 the time alone fell from 17.0 to 12.2 ms per config
            (an H100 host's core) and no figure moved by more than the seeds move, a tie, which
            keeps what ships; at 0.25, with 18 in flight, fewer runs came within 2 %
            (``experiments/results/gp-refit/``).
        prior_target: what the store's prior (the forest fit on the kernel's stored trials, whose
            ranking is one of the warm start's turns and whose prediction is a feature of the
            search's forest) learns of each stored key's trials: ``"time"``, their log time;
            ``"slowdown"``, the log of their time over that key's fastest (``relative_to_fastest``), so
            that its splits go to the configs and how they fare with the key's sizes rather than
            to each shape's scale. Acts only with the store. Off: replayed with the store on
            the 58 spaces of kernels recorded at other shapes (20 seeds), one at a time and with
            18 in flight, it reached 5 % within 10 evaluations on fewer spaces of 3+ shape
            kernels than what ships (37 and 34 of 48 against 38 and 36), under a rule fixed
            before the runs (``experiments/results/prior-target/``). Its stores held whole
            recorded spaces; a store of what tunings measured has each key's best found as 1.

    The other arguments are ``ForestSearch``'s.
    """

    name = "default"

    def __init__(self, local_fraction: float = 0.2, noise: float = 0.01, patience: int = 20, min_evals: int = 30,
                 top_k: int | None = None, initial: int = 10, kappa: float = 1.0, candidates: int = 20000,
                 n_estimators: int = 32, refit_growth: float = 0.0, failure_threshold: float = 0.1,
                 warm_start: int = 3, max_features: float = 0.5, refit_trees: int | None = 8,
                 initial_design: str = "maximin", local_best: int = 1, random_fraction: float = 0.1,
                 local_radius: int = 2, refit_trees_after: int = 50, warm_spread: int = 3,
                 alignment: bool = True, warm_keys: int = 1, gp_fraction: float = 0.15,
                 gp_candidates: int = 512, stalled_gp_fraction: float | None = 0.5,
                 stalled_after: int = 20, warm_scaled: bool = False, warm_interleaved: bool = True,
                 local_order: str = "forest", warm_robust: bool = True, believer: bool = True,
                 earned_gp_fraction: float | None = None, early_gp_fraction: float | None = None,
                 early_gp_until: int = 30, gp_pending: bool = False,
                 gp_refit_growth: float | None = None, prior_target: str = "time",
                 local_moves: str = "adjacent") -> None:
        super().__init__(top_k, initial, kappa, candidates, n_estimators, refit_growth, failure_threshold,
                         max_features, refit_trees, refit_trees_after, alignment)
        self.local_fraction = local_fraction
        self.noise = noise
        self.patience = patience
        self.min_evals = min_evals
        self.warm_start = warm_start
        self.initial_design = initial_design
        self.local_best = local_best
        self.random_fraction = random_fraction
        self.local_radius = local_radius
        self.warm_spread = warm_spread
        self.warm_keys = warm_keys
        self.gp_fraction = gp_fraction
        self.gp_candidates = gp_candidates
        self.stalled_gp_fraction = stalled_gp_fraction
        self.stalled_after = stalled_after
        self.warm_scaled = warm_scaled
        self.warm_interleaved = warm_interleaved
        self.local_order = local_order
        self.warm_robust = warm_robust
        self.believer = believer
        self.earned_gp_fraction = earned_gp_fraction
        self.early_gp_fraction = early_gp_fraction
        self.early_gp_until = early_gp_until
        self.gp_pending = gp_pending
        self.gp_refit_growth = gp_refit_growth
        self.prior_target = prior_target
        self.local_moves = local_moves

    def start(self, context) -> None:
        if self.initial_design not in INITIAL_DESIGNS:
            raise ValueError(f"DefaultSearch(initial_design={self.initial_design!r}): expected one of "
                             f"{', '.join(map(repr, INITIAL_DESIGNS))}")
        if self.local_best < 1:
            raise ValueError(f"DefaultSearch(local_best={self.local_best!r}): expected at least 1")
        if self.local_radius < 1:
            raise ValueError(f"DefaultSearch(local_radius={self.local_radius!r}): expected at least 1")
        check_count(self, "warm_keys")
        for option in ("local_fraction", "random_fraction", "gp_fraction"):
            _check_share(option, getattr(self, option))
        for option in ("stalled_gp_fraction", "earned_gp_fraction", "early_gp_fraction"):
            if getattr(self, option) is not None:
                _check_share(option, getattr(self, option))
        check_count(self, "stalled_after")
        if self.early_gp_fraction is not None:
            check_count(self, "early_gp_until")
        check_count(self, "gp_candidates")  # at the start, before its GP exists
        check_growth(self, "gp_refit_growth")
        for option in ("warm_interleaved", "warm_robust", "believer", "gp_pending"):
            if not isinstance(getattr(self, option), bool):
                raise ValueError(f"DefaultSearch({option}={getattr(self, option)!r}): expected True or False")
        if self.prior_target not in PRIOR_TARGETS:
            raise ValueError(f"DefaultSearch(prior_target={self.prior_target!r}): expected one of "
                             f"{', '.join(map(repr, PRIOR_TARGETS))}")
        if self.local_moves not in LOCAL_MOVES:
            raise ValueError(f"DefaultSearch(local_moves={self.local_moves!r}): expected one of "
                             f"{', '.join(map(repr, LOCAL_MOVES))}")
        if self.local_order not in LOCAL_ORDERS:
            raise ValueError(f"DefaultSearch(local_order={self.local_order!r}): expected one of "
                             f"{', '.join(map(repr, LOCAL_ORDERS))}")
        if self.warm_spread < 0:
            raise ValueError(f"DefaultSearch(warm_spread={self.warm_spread!r}): expected 0 or more")
        super().start(context)
        self._unit_encoded: np.ndarray | None = None  # the encoding scaled to [0, 1], made at the first spread
        self._latin_design: list[int] | None = None  # the Latin hypercube start's, made at its first ask
        self._forest_turns = 0  # proposals the forest's ranking was asked for, the GP's turns among them
        self._gp: OptunaGPSearch | None = None  # made at its first turn (_gp_picks)
        self._proposer: dict[int, str] = {}  # "gp" or "forest", for each ranked turn not yet told
        self._ranks: dict[str, list[float]] = {"gp": [], "forest": []}  # each's told turns' ranks
        self._quiet_since: int | None = None  # evaluations when the expected improvement fell under noise
        self.stopped_early = False
        self._prior: RandomForest | None = None  # the model of the kernel's trials in the store
        self._prior_ranking = np.empty(0, dtype=int)  # every config, by the prior's prediction, best first
        self._prior_failing = np.zeros(len(self._configs), dtype=bool)
        self._lies: list[Trial] = []  # the pending configs, at the forest's predicted time (believer)
        self._lied: set[int] = set()  # the configs of _lies, and those the forest gave no finite time
        self._told = np.zeros(len(self._configs), dtype=bool)  # configs whose trials were told
        self._overdue = np.zeros(len(self._configs), dtype=bool)  # pending configs the tuning said were late
        self._started_with = np.zeros(len(self._configs), dtype=bool)  # the start's and the warm start's configs
        self._canonical = context.space.canonical_positions()  # a repeated config's copies share one position
        here = context.key
        self._stored_here = [t for t in context.history if t.key == here]  # a re-tuning's stored trials
        if self._learned_elsewhere:
            # every feature at every split: the prior predicts, it is not what the search explores with
            stored = list(context.history)
            self._prior = self._new_model(max_features=1.0).fit(
                relative_to_fastest(stored, context.key) if self.prior_target == "slowdown" else stored,
                context.key)
            features = self._prior.features_of_encoded(self._encoded, context.key)
            self._prior_failing = self._prior.failure_probability_of(features) > self.failure_threshold
            predicted = np.where(self._ruled_out(), np.inf, self._prior.regressor_.predict(features))
            self._prior_ranking = self._warm_start_first(np.argsort(predicted, kind="stable"), context)

    def _warm_start_first(self, predicted: np.ndarray, context) -> np.ndarray:
        """Every config, the warm start first: in turn, the next fastest config measured at each
        of the ``warm_keys`` nearest other keys (nearest first), with ``warm_robust`` the next of
        the configs measured at every alike key by their worst slowdown, and the next best by the
        prior's prediction. The measured best of a similar shape is the strongest evidence there is, and
        the forest, which averages over trees and keys, does not always rank it first (with one
        other shape in the store, its top predictions were 12-19 % slower there than that shape's
        own best). Keys of other arguments or dtypes give none: the prior models them. With
        ``warm_scaled``, each key's turn is followed by its config moved to this key's sizes
        (``_scaled_to``), where one moves."""
        here = context.key
        by_key: dict[TuningKey, list[Trial]] = {}
        for trial in context.history:
            if trial.ok and trial.key is not None and trial.key != here:
                by_key.setdefault(trial.key, []).append(trial)
        # ties: the first stored
        nearest = sorted(by_key, key=lambda other: key_distance(here, other))[:self.warm_keys]
        rankings = self._stored_rankings(here, [key for key in nearest if alike(here, key)], by_key)
        if not rankings:
            return predicted
        first: list[int] = []
        for turn in itertools.zip_longest(*rankings, predicted):
            for index in turn:
                if index is not None and len(first) < self.warm_start and index not in first:
                    first.append(int(index))
            if len(first) == self.warm_start:
                break
        rest = predicted[~np.isin(predicted, first)]
        return np.concatenate([np.asarray(first, dtype=int), rest])

    def _stored_rankings(self, here: TuningKey, nearest: list[TuningKey], by_key: dict[TuningKey, list[Trial]]
                         ) -> list[list[int | None]]:
        """The rankings whose turns the warm start takes, before the prior's: each of the
        ``nearest`` alike keys' measured configs that may run here, fastest first (each followed,
        with ``warm_scaled``, by its configs moved to this key's sizes), then, with
        ``warm_robust``, those measured at every alike key by their worst slowdown there.
        ``by_key``: the store's trials that ran, by key."""
        rankings: list[list[int | None]] = []
        for key in nearest:
            # each config once (a store may hold a config twice at a key), fastest first
            measured = [i for i in fastest_per_config(by_key[key], self.context.space.index) if self._may_run(i)]
            rankings.append(list(measured))
            if self.warm_scaled:
                rankings.append(self._scaled_to(here, key, measured))
        if self.warm_robust and rankings:
            # the alike keys that measured configs of this Space (a store may hold another config list's)
            alike_times = [times for times in (fastest_per_config(trials, self.context.space.index)
                                               for key, trials in by_key.items() if alike(here, key)) if times]
            if len(alike_times) >= 2:
                rankings.append([i for i in self._robust_ranking(alike_times) if self._may_run(i)])
        return rankings

    def _robust_ranking(self, times_by_key: Sequence[Mapping[int, float]]) -> list[int]:
        """``warm_robust``'s ranking of the configs measured at every alike key (``times_by_key``:
        config -> its fastest time, one mapping per key): by their worst slowdown."""
        return worst_slowdown(times_by_key)

    def _ruled_out(self) -> np.ndarray:
        """Configs the prior expects to fail or the compiles' reports put over shared memory."""
        return self._prior_failing | self._too_large

    def _may_run(self, index: int) -> bool:
        """``_ruled_out`` of one config, negated, without building the mask."""
        return not self._prior_failing[index] and not self._too_large[index]

    def _scaled_to(self, here: TuningKey, there: TuningKey, measured: Sequence[int]) -> list[int | None]:
        """For each config of ``measured`` (measured at ``there``, fastest first, those that may
        run here: the warm start's ranking of that key), the config with each meta-parameter whose
        value equals the rounded size (up to a power of two) of one or more of ``there``'s key
        arguments set to their rounded size here, where they have one and it differs; None where
        nothing moves, or where the moved config is not the Space's or may not run. A value equal
        to an argument whose size stays, or to two that change differently, stays: which
        dimension the block spans is not known. Compile options (``num_warps``...) are not sizes
        of the problem. In step with ``measured``: the warm start's k-th turn takes the k-th
        measured config's move."""
        sizes = {name: _size(value) for name, value in there.args.items() if _size(value) is not None}
        scaled: list[int | None] = []
        for index in measured:
            config = self._configs[index]
            changed = {}
            for name, value in config.kwargs.items():
                targets = {_size(here.args.get(arg)) for arg, size in sizes.items() if size == value}
                if len(targets) == 1 and None not in targets and targets != {value}:
                    changed[name] = targets.pop()
            moved = self.context.space.index({**config_to_dict(config), **changed}) if changed else None
            scaled.append(moved if moved is not None and self._may_run(moved) else None)
        return scaled

    def ask(self, n: int) -> list[Config]:
        n = n if self.top_k is None else min(n, self.top_k)
        self._lies, self._lied = [], set()  # made up again for what is pending now, with the latest fit
        turn = self._turns_taken()
        if self._in_start():
            # the initial design; once all of it is asked for, nothing until its trials are told or overdue
            count = min(n, self.initial - turn)
            if count < 1:
                return []
            tried = self._tried.copy()
            picks: list[Config]
            if self.initial_design == "random":
                picks = self._take(self.rng.permutation(self._fitting(np.flatnonzero(~self._tried)))[:count])
            elif self.initial_design in ("latin", "latin-maximin"):
                if self._latin_design is None:
                    self._latin_design = self._latin_start()
                picks = self._take([i for i in self._latin_design if not self._tried[i]][:count])
            else:
                picks = self._spread(count)
            self._started_with |= self._tried & ~tried
            return picks
        warm_order = self._warm_order() if self._prior is not None else []
        if turn < len(warm_order):
            order = warm_order[turn:]
            if not self.warm_interleaved:  # an ask stops where the warm start ends
                order = order[:next((i for i, kind in enumerate(order) if kind != order[0]), len(order))]
            suggested = self._prior_ranking[:self.warm_start]
            tried = self._tried.copy()
            picks = []
            for kind, turns in itertools.groupby(order[:n]):
                count = len(list(turns))
                taken = self._warm_turns(kind, count, suggested)
                # the warm start's next, or the prior's next best where the spread found too few (a
                # small Space, most of it expected to fail): an empty ask would end the tuning
                taken += self._take(self._prior_ranking[~self._tried[self._prior_ranking]][:count - len(taken)])
                picks += taken
            self._started_with |= self._tried & ~tried
            if picks:
                return picks
        if len(self._here) < len(warm_order) and self._awaited().any():
            return []  # the warm start's trials come before the forest's picks, as its start's do
        if self._nothing_to_gain():
            self.stopped_early = True
            return []
        local, drawn = self._local_and_random(n)
        rest = n - len(local) - len(drawn)
        return local + drawn + (self._ranked(rest) if rest > 0 else [])

    def overdue(self) -> None:
        """The start and the warm start stop waiting for their configs pending now: a live tuning
        says they are late (one compile of the start held to the compile timeout kept every
        other compile worker idle for 13.9 s of a 28 s tuning on an H100 host). The forest then
        ranks as after the start, the late configs among the pending ones its believer makes up
        trials for. Replays never say so."""
        self._overdue |= self._pending()

    def _awaited(self) -> np.ndarray:
        """A mask of the start's and the warm start's configs that are pending and not overdue:
        what their waits wait for."""
        return self._pending() & self._started_with & ~self._overdue

    def _in_start(self) -> bool:
        """Whether the space-filling start is on: the store holds nothing of the kernel, fewer
        than ``initial`` configs were told, and some of the start is still to be asked for or
        awaited (pending, not overdue)."""
        return super()._in_start() and (self._turns_taken() < self.initial or bool(self._awaited().any()))

    def _pending(self) -> np.ndarray:
        """A mask of the configs proposed and not told yet (the copy proposed of a repeated config
        is pending until its config is told)."""
        return self._tried & ~self._told[self._canonical]

    def _turns_taken(self) -> int:
        """Configs proposed so far: those told (this tuning's trials) and those pending."""
        return len(self._here) + int(self._pending().sum())

    def _local_and_random(self, n: int) -> tuple[list[Config], list[Config]]:
        """The local proposals and the random configs among the next ``n`` turns: each share's
        turns by ``due_turns``. A turn both come due on is local; where the local proposals leave
        turns unfilled (nothing open near the best), random configs take them, at most as many as
        the turns both came due on. ``ask`` gives the turns left to the forest's ranking."""
        turn = self._turns_taken()
        local_due = due_turns(turn, n, self.local_fraction)
        random_due = due_turns(turn, n, self.random_fraction)
        local = self._neighbours_of_best(int(local_due.sum()))
        unfilled = int(local_due.sum()) - len(local)
        drawn = self._random_untried(int((random_due & ~local_due).sum())
                                     + min(unfilled, int((random_due & local_due).sum())))
        return local, drawn

    def _warm_order(self) -> list[str]:
        """What each of the first evaluations with a prior measures: ``"warm"`` (the warm start's
        next config) or another kind of turn (``_warm_others``), in turn or one after the other
        (``warm_interleaved``)."""
        warm, others = ["warm"] * self.warm_start, self._warm_others()
        if not self.warm_interleaved:
            return warm + others
        return [kind for pair in itertools.zip_longest(warm, others) for kind in pair if kind is not None]

    def _warm_others(self) -> list[str]:
        """The warm start's turns besides its own, in order: ``warm_spread`` of the space-filling
        design's (``"spread"``)."""
        return ["spread"] * self.warm_spread

    def _warm_turns(self, kind: str, count: int, suggested: np.ndarray) -> list[Config]:
        """Up to ``count`` configs of a ``kind`` of turn of ``_warm_order`` other than the warm
        start's own (which takes the prior's ranking): the space-filling design's, kept far from
        the warm start's ``suggested`` configs. ``ask`` fills what it returns short of ``count``
        with the prior's next configs."""
        return self._spread(count, also_far_from=suggested) if kind == "spread" else []

    def _ranked(self, count: int) -> list[Config]:
        """``count`` proposals of the forest's ranking (``_ranked_turns``); with ``believer``, one
        at a time, each after a refit told the pending configs at their predicted times."""
        if not self.believer:
            return self._ranked_turns(count)
        picks: list[Config] = []
        for _ in range(count):
            self._believe_pending()
            taken = self._ranked_turns(1)
            if not taken:
                break
            picks += taken
        return picks

    def _believe_pending(self) -> None:
        """Add the pending configs (proposed, not told) not yet believed to ``_lies``, each at the
        time the forest's last fit predicts for it (the mean over its trees), and have the next
        ranking refit: a ranking that knew nothing of the configs in flight or picked earlier in
        this ask would propose their near-duplicates. Nothing before the forest's first fit."""
        if self._model is None or not any(t.ok for t in self._here):
            return
        new = [int(i) for i in np.flatnonzero(self._pending()) if int(i) not in self._lied]
        if not new:
            return
        features = self._model.features_of_encoded(self._encoded[new], self.context.key)
        times = [made_up_time(log_time) for log_time in self._model.per_tree_log(features).mean(axis=0)]
        self._lied.update(new)
        self._lies += [Trial(self._configs[i], Status.OK, Timing(t, t, t), key=self.context.key)
                       for i, t in zip(new, times) if math.isfinite(t)]
        self._fitted_at = -1  # the next ranking refits, with the lies

    def _ranked_turns(self, count: int) -> list[Config]:
        """``count`` proposals of the forest's ranking, a ``gp_fraction`` of whose turns go to the
        Gaussian process (``stalled_gp_fraction`` while the search has stalled)."""
        fraction = self.gp_fraction
        if self.stalled_gp_fraction is not None and self._stalled():
            fraction = self.stalled_gp_fraction
        if self.earned_gp_fraction is not None and self._gp_ahead():
            fraction = max(fraction, self.earned_gp_fraction)
        if self.early_gp_fraction is not None and self._prior is None and len(self._here) < self.early_gp_until:
            fraction = max(fraction, self.early_gp_fraction)
        turns = int(due_turns(self._forest_turns, count, fraction).sum())
        self._forest_turns += count
        from_gp = self._gp_picks(turns) if turns > 0 else []
        from_forest = super().ask(count - len(from_gp)) if count > len(from_gp) else []
        if self.earned_gp_fraction is not None:
            for proposer, picks in (("gp", from_gp), ("forest", from_forest)):
                self._proposer.update((i, proposer) for i in self._indices(picks))
        return from_gp + from_forest

    def _gp_ahead(self) -> bool:
        """Whether the GP's last ``EARNED_WINDOW`` ranked turns measured faster configs than the
        forest's last as many, by the mean rank of each config when it was told (the share of the
        tuning's working configs faster than it; 1 for a failure); False until each has
        ``EARNED_LEAST``. At ``earned_gp_fraction=1`` the forest has no ranked turns once this
        holds, so its window stops moving and the GP keeps every ranked turn; the forest's
        proposals before its first fit (random configs) count as the forest's."""
        gp, forest = (self._ranks[p][-EARNED_WINDOW:] for p in ("gp", "forest"))
        return min(len(gp), len(forest)) >= EARNED_LEAST and float(np.mean(gp)) < float(np.mean(forest))

    def _rank(self, trial: Trial) -> float:
        """The share of this tuning's working configs faster than ``trial``'s; 1 for a failure."""
        if not trial.ok:
            return 1.0
        return float(np.mean([t.time_ms < trial.time_ms for t in self._here if t.ok]))

    def _indices(self, configs: Sequence[Config]) -> list[int]:
        indices = (self.context.space.index(c) for c in configs)
        return [i for i in indices if i is not None]

    def _gp_picks(self, turns: int) -> list[Config]:
        """Up to ``turns`` configs of the Gaussian process, among the untried ones that neither the
        prior expects to fail (the forest of the kernel's other keys' trials, where they failed)
        nor the model of the compiles' reports expects to exceed shared memory; none before this
        key's forest has fit (while no config has run here, the GP would model failures alone).
        This key's failure forest does not restrict it: told a failure as twice the slowest time,
        the GP learns where configs fail, and ruling out what that forest, fit on this tuning's
        few trials, doubts at ``failure_threshold`` lost runs on the pnpoly spaces
        (``experiments/results/gp-known-failures/``). The GP is made at its first turn and told
        every trial of the tuning so far (no random start of its own), so that a tuning that ends
        before makes no Optuna study. In asks of several configs, a turn that falls before the
        forest's first fit goes to the forest."""
        allowed = ~(self._tried | self._ruled_out())
        turns = min(turns, int(allowed.sum()))
        if self._model is None or turns == 0:
            return []
        if self._gp is None:
            self._gp = OptunaGPSearch(warm_start=0, n_startup_trials=1, gp_candidates=self.gp_candidates,
                                      gp_refit_growth=self.gp_refit_growth)
            self._gp.start(self.context)
            self._gp.tell(self._here)
        if self.gp_pending:
            self._gp.hold([self._configs[i] for i in np.flatnonzero(self._pending())])
        self._gp.restrict(allowed)  # the untried configs only: what the others proposed too
        picks = self._gp.ask(turns)
        self._mark(picks)
        return picks

    def tell(self, trials: Sequence[Trial]) -> None:
        super().tell(trials)
        for trial in trials:
            index = self.context.space.index(trial.config)
            if index is not None:
                self._told[index] = True
                proposer = self._proposer.pop(index, None)
                if proposer is not None:
                    self._ranks[proposer].append(self._rank(trial))
        if self._gp is not None:
            self._gp.tell(trials)

    def _random_untried(self, count: int) -> list[Config]:
        """``count`` untried configs at random, of those not expected to fail by the prior or to
        exceed shared memory."""
        if count <= 0:
            return []
        untried = np.flatnonzero(~self._tried & ~self._prior_failing)
        return self._take(self.rng.permutation(self._fitting(untried))[:count])

    def _training_trials(self) -> list[Trial]:
        """With a prior, this key's trials (measured now or stored) alone: the other keys speak
        through the prior's feature, only as far as this key's trials agree. Until one of them
        ran, every trial of the kernel. With ``believer``, the pending configs too, at their
        predicted times (``_lies``)."""
        if self._prior is None:
            return self._trials + self._lies
        here = self._stored_here + self._here
        return (here if any(t.ok for t in here) else self._trials) + self._lies

    def _fit_options(self) -> dict:
        return {"prior": self._prior}

    def _failing(self, indices: np.ndarray, features: np.ndarray) -> np.ndarray:
        """Expected to fail by this key's model or by the prior (which saw the other keys' failures:
        a tile that runs out of shared memory at one shape usually does at the others)."""
        return super()._failing(indices, features) | self._prior_failing[indices]

    def _latin_start(self) -> list[int]:
        """The start's configs: the ``initial`` nearest a Latin hypercube's points, or with
        ``"latin-maximin"`` half of them, each followed by one of as many maximin configs far from
        them all (the extremes of the parameters' ranges, which suit some kernels)."""
        if self.initial_design == "latin":
            return self._latin(self.initial)
        latin = self._latin((self.initial + 1) // 2)
        far = self._spread_indices(self.initial - len(latin), also_far_from=np.asarray(latin, dtype=int))
        return [i for pair in itertools.zip_longest(latin, far) for i in pair if i is not None]

    def _spread(self, count: int, also_far_from: np.ndarray | None = None) -> list[Config]:
        """``_spread_indices``' configs, taken."""
        return self._take(self._spread_indices(count, also_far_from))

    def _spread_indices(self, count: int, also_far_from: np.ndarray | None = None) -> list[int]:
        """Untried configs far from every tried one (greedy maximin over the encoding scaled to
        [0, 1]; the first at random, where none is tried), from a random pool of at most
        ``candidates``, leaving out those the prior expects to fail. ``also_far_from``: configs
        (indices) treated as tried, and left out, though they may not be yet (the warm start's,
        which ``warm_interleaved`` measures between these, or the Latin hypercube's of
        ``"latin-maximin"``)."""
        measured = self._tried.copy()
        if also_far_from is not None:
            measured[also_far_from] = True
        untried = self._fitting(np.flatnonzero(~measured & ~self._prior_failing))
        pool = untried if len(untried) <= self.candidates else self.rng.choice(untried, self.candidates, replace=False)
        if self._unit_encoded is None:
            low, high = self._encoded.min(axis=0), self._encoded.max(axis=0)
            self._unit_encoded = (self._encoded - low) / np.where(high > low, high - low, 1.0)
        in_pool = self._unit_encoded[pool]
        nearest = np.full(len(pool), np.inf)
        for tried in np.flatnonzero(measured):  # one tried config at a time: no pool x tried x parameters array
            nearest = np.minimum(nearest, np.abs(in_pool - self._unit_encoded[tried]).sum(axis=1))
        chosen = []
        for _ in range(min(count, len(pool))):
            pick = int(self.rng.integers(len(pool))) if not np.isfinite(nearest).any() else int(np.argmax(nearest))
            chosen.append(int(pool[pick]))
            nearest = np.minimum(nearest, np.abs(in_pool - in_pool[pick]).sum(axis=1))
            nearest[pick] = -1.0
        return chosen

    def _latin(self, count: int) -> list[int]:
        """``count`` untried configs nearest the points of a Latin hypercube (``scipy.stats.qmc``,
        its centred discrepancy optimised) over the parameters' values, each value present among
        the candidates (a missing one too) a stripe of equal width by size: each parameter's values
        come about equally often, where maximin takes its extremes. Each point takes the nearest
        config (L1) not yet taken, from those the prior does not expect to fail and that fit in
        shared memory, one copy of a config listed twice. SciPy draws the points: the same seed
        gives other points under SciPy 1.10 than under 1.17 (1.17 and 1.18 replayed the same)."""
        pool = self._fitting(np.flatnonzero(~self._tried & ~self._prior_failing))
        pool = pool[self._canonical[pool] == pool]
        if not len(pool):
            return []
        columns = []  # each varying parameter's stripe centres, a value's rank among those present
        for positions in self.context.space.value_positions()[pool].T:
            present, rank = np.unique(positions, return_inverse=True)
            if len(present) > 1:
                columns.append((rank.ravel() + 0.5) / len(present))
        if not columns:
            return [int(i) for i in pool[:count]]
        unit = np.column_stack(columns)
        generator = np.random.default_rng(int(self.rng.integers(2**63)))
        engine = qmc.LatinHypercube(len(columns), optimization="random-cd", **{QMC_RNG: generator})
        points = engine.random(count)
        free = np.ones(len(pool), dtype=bool)
        chosen = []
        for point in points[:min(count, len(pool))]:
            pick = int(np.argmin(np.where(free, np.abs(unit - point).sum(axis=1), np.inf)))
            chosen.append(int(pool[pick]))
            free[pick] = False
        return chosen

    def _neighbours_of_best(self, count: int) -> list[Config]:
        """Up to ``count`` untried neighbours (by ``local_moves``) of the ``local_best``
        fastest configs of this tuning (where none is left, those fewest steps away), leaving out
        those expected to fail: in the order of the forest's last ranking (``local_order``), or
        at random."""
        measured = [t for t in self._here if t.ok]
        if not measured or count == 0:
            return []
        fastest = sorted(measured, key=lambda t: t.time_ms)[:self.local_best]
        around = dict.fromkeys(self.context.space.position(c) for t in fastest
                               for c in self.context.space.neighbours(t.config, self._moves()))
        open_ = [i for i in around if not self._tried[i] and self._may_run(i)]
        if not open_ and self.local_radius > 1:
            open_ = self._fewest_steps_away([self.context.space.position(t.config) for t in fastest])
        if open_ and self._model is not None:
            features = self._model.features_of_encoded(self._encoded[open_], self.context.key)
            open_ = [i for i, failing in zip(open_, self._failing(np.asarray(open_), features)) if not failing]
        ordered = np.asarray(open_, dtype=int)[self.rng.permutation(len(open_))]
        if self.local_order == "forest" and self._model is not None and len(ordered):
            rank = np.full(len(self._configs), len(self._configs))  # unscored: after the scored, at random
            rank[self._scored] = np.arange(len(self._scored))
            ordered = ordered[np.argsort(rank[ordered], kind="stable")]
        return self._take(ordered[:count])

    def _moves(self) -> str:
        """``Space.neighbours``' method for the local proposals now (``local_moves``)."""
        if self.local_moves != "hamming-stalled":
            return self.local_moves
        return "hamming" if self._stalled() else "adjacent"

    def _stalled(self) -> bool:
        """Whether the best time has not improved by more than ``noise`` in the last
        ``stalled_after`` evaluations."""
        return len(self._here) - self._last_gain() >= self.stalled_after

    def _fewest_steps_away(self, centres: list[int]) -> list[int]:
        """The open configs (untried, not expected to fail) the fewest steps, from 2 to
        ``local_radius``, away from the nearest of ``centres`` (indices of configs)."""
        positions = self.context.space.value_positions()
        steps = np.abs(positions[:, None, :] - positions[centres][None]).sum(axis=2).min(axis=1)
        open_ = ~self._tried & ~self._ruled_out()
        for radius in range(2, self.local_radius + 1):
            found = np.flatnonzero(open_ & (steps == radius))
            if len(found):
                return [int(i) for i in found]
        return []

    def _last_gain(self) -> int:
        """Evaluations made when the best time last improved by more than ``noise``."""
        best, last = math.inf, 0
        for count, trial in enumerate(self._here, 1):
            if trial.time_ms < best / (1 + self.noise):
                best, last = trial.time_ms, count
            best = min(best, trial.time_ms)
        return last

    def _nothing_to_gain(self) -> bool:
        """Whether the expected improvement over the best time stayed under ``noise`` for every
        untried config during ``patience`` evaluations."""
        measured = [t.time_ms for t in self._here if t.ok]
        if len(self._here) < self.min_evals or self._model is None or not measured:
            return False
        if len(self._here) - self._last_gain() < max(self.patience, len(self._here) // 2):
            return False  # the best improved by more than the noise in the latter half of the tuning
        open_ = ~self._tried[self._scored]
        if not open_.any():
            return False  # the fit scored only part of the Space: ask for more
        gains = expected_improvement(self._mean_log[open_], self._spread_log[open_], math.log(min(measured)))
        if gains.max() >= math.log1p(self.noise):
            self._quiet_since = None
            return False
        if self._quiet_since is None:
            self._quiet_since = len(self._here)
        return len(self._here) - self._quiet_since >= self.patience
