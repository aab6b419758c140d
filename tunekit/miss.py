"""What a call whose key has no cached winner gets: the stored winner, a tuning (now, in the
background, or spread over calls) or a fallback config.

One ``KernelTuning`` per kernel holds this policy, the kernel's store and identity; the
Autotuner asks it on a miss and keeps what it decides, and ``tunekit tune`` tunes through
its sessions. A tuning's report comes back in the ``Decision``: nothing here writes onto the
Autotuner.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import triton

from . import settings
from .background import NotCopyable, Pending, may_switch, snapshot
from .caller import warn_at_caller
from .claims import KeyClaim, tune_once
from .compat import triton_build_key
from .compiler import source_hash
from .config import Config, config_json
from .deadline import Clock, Stopwatch
from .keys import TuningKey, nearest_key
from .launch import Launch
from .ranks import agree
from .runner import measuring_in_this_thread
from .session import TuningError, TuningOptions, TuningReport, TuningSession, stored_winner
from .space import Space
from .opening import open_store
from .store import KernelIdentity, ResultsStore, StoredWinner
from .trial import Trial

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Decision:
    """What a miss decided: the config to launch and, where a tuning ran, what it reports.

    ``final``: the config is the key's from now on (else launched at this call only, while a
    tuning goes on). ``trials``/``run_id``: the tuning's so far, None where none ran.
    ``report``: set once the tuning has ended. ``at_this_call``: it ran on this call's tensors
    (not on copies taken at an earlier call), so Triton's reset of ``reset_to_zero`` outputs
    before the final launch applies."""

    config: Config
    final: bool = True
    trials: Sequence[Trial] | None = None
    run_id: str | None = None
    report: TuningReport | None = None
    at_this_call: bool = True


class KernelTuning:
    """The miss policy of one kernel: its store (opened on first use), identity, fallback rule,
    and the keys being tuned in the background or over calls.

    Args:
        launch: how the kernel is launched and timed.
        space: every config; ``space_for(args, kwargs)`` the configs of one call after Triton's
            pruning.
        options: how it is tuned (strategy, budget, isolation...).
        store: what the user passed as ``store=``.
        fallback: ``config_for(**key)`` for keys not tuned now, or None.
        ranks: ``"first"`` or ``"each"`` (``tunekit.ranks``).
        background: tune keys in a background thread, launching a fallback meanwhile.
    """

    def __init__(self, launch: Launch, space: Space, space_for: Callable[[tuple, dict], Space],
                 options: TuningOptions, store: Any, *, fallback: Callable[..., Any] | None, ranks: str,
                 background: bool, base_fn: Callable[..., Any]) -> None:
        self.launch = launch
        self.space = space
        self.space_hash = space_hash(space)
        self.space_for = space_for
        self.options = options
        self.fallback = fallback
        self.ranks = ranks
        self.background = background
        self._base_fn = base_fn
        self._store_arg = store
        self._store: ResultsStore | None = None
        self._identity: KernelIdentity | None = None
        #: Keys tuned in a background thread, launching a fallback meanwhile (``tunekit.background``).
        self.pending: dict[tuple, Pending] = {}
        #: Keys whose tuning is spread over calls (``Budget(per_call=k)``).
        self._spreading: dict[tuple, tuple[TuningSession, Config, KeyClaim]] = {}
        self._stored_winners: list[Config] | None = None
        #: What ``_while_measuring`` decided, by key: asked again at each launch while measuring.
        self._while_measuring_decisions: dict[str, Decision] = {}

    @property
    def kernel_name(self) -> str:
        return self.launch.kernel_name

    @property
    def store(self) -> ResultsStore:
        """The results store, opened on first use. In offline mode, which never tunes, it is only
        read: never created or written, readable on a read-only file system; a store that does
        not exist is an empty one (every key then falls back, with a warning). A winners file
        (``.jsonl``, from ``tunekit store export --winners``) is served from memory in both modes:
        only read, and what a tuning at a key it lacks measures is kept in memory. So is a store
        this process may not write, in the normal mode."""
        if self._store is None:
            self._store = open_store(self._store_arg, kernel=self.identity)
        return self._store

    @property
    def identity(self) -> KernelIdentity:
        if self._identity is None:
            self._identity = identify(self.launch.fn, self._base_fn, self.launch.benchmarker.method)
        return self._identity

    def winner_configs(self, tuned: Sequence[Config]) -> list[Config]:
        """The winners to offer code that reads the config list (``torch.compile``): ``tuned`` in
        this process, else those the store holds for this Space on this device (read once)."""
        found = {config_json(c): c for c in tuned}
        if not found and self._stored_winners is None:
            try:
                self._stored_winners = [
                    config
                    for config_text, _, stored_hash in self.store.winners(self.identity).values()
                    if stored_hash == self.space_hash and (config := self.space.canonical(json.loads(config_text)))
                ]
            except Exception as error:  # noqa: BLE001 - no device, no store: nothing tuned to offer
                logger.debug("no stored winners for %s: %s", self.kernel_name, error)
                self._stored_winners = []
        for config in self._stored_winners or []:
            found.setdefault(config_json(config), config)
        return list(found.values())

    # -- deciding ------------------------------------------------------------------------------

    def under_way(self, key: tuple) -> bool:
        """Whether a tuning of ``key`` has begun and not ended: in the background, or spread over calls."""
        return key in self.pending or key in self._spreading

    def decide(self, key: tuple, tuning_key: TuningKey, args: tuple, kwargs: dict) -> Decision:
        """The config for a call at ``key`` (the hot path's cache key) with no cached winner."""
        pending = self.pending.get(key)
        if pending is not None:  # once done, its winner (or, if it failed, the fallback) from now on
            if not (pending.done() and may_switch()):
                return Decision(pending.entry[0], final=False)
            del self.pending[key]
            return pending.result() or Decision(pending.entry[0], at_this_call=False)
        if len(self.space) == 1:
            return Decision(self.space.configs()[0])
        if measuring_in_this_thread():
            return self._while_measuring(tuning_key)
        if self.background and (decision := self._in_background(key, tuning_key, args, kwargs)):
            return decision
        if self.options.budget.per_call and (decision := self._over_calls(key, tuning_key, args, kwargs)):
            return decision
        identity = self.identity
        name = (f"{self.kernel_name}/{identity.source_hash}/{identity.triton_version}/{identity.device}/"
                f"{self.space_hash}/{tuning_key.json}")
        made: list[Decision] = []

        def decide_here() -> Config:
            made.append(self._stored_or_tuned(tuning_key, args, kwargs))
            return made[-1].config

        config = agree(self.ranks, name, self.space, decide_here)
        return made[-1] if made else Decision(config)

    def _stored_or_tuned(self, key: TuningKey, args: tuple, kwargs: dict) -> Decision:
        winners = self.store.winners(self.identity)
        config = stored_winner(key.json, winners, self.space, self.space_hash)
        if config is not None:
            logger.info("%s %s: stored winner %s", self.kernel_name, key.json, config)
            return Decision(config)
        reason = None
        if settings.mode() == "offline":
            reason = f"{settings.ENV_MODE}=offline"
        elif not may_switch():
            reason = "a CUDA graph is being captured or torch.compile is tracing"
        if reason is None:
            return self.tune_once(key, args, kwargs)
        config, what = self.fallback_config(key.json, winners)
        warn_at_caller(f"tunekit did not tune {self.kernel_name} for key {key.json} because {reason}; using {what}: "
                       f"{config}", RuntimeWarning)
        return Decision(config)

    def _while_measuring(self, key: TuningKey) -> Decision:
        """A miss while this thread checks or times a config of another kernel (whose check, hooks
        or reference launch this one): the stored winner, else the fallback config for this call
        only, untuned. A tuning inside another's measurement would time this kernel while that one
        waits, and check its configs with the operations being tuned; the next call from outside
        tunes it."""
        decided = self._while_measuring_decisions.get(key.json)
        if decided is not None:
            return decided
        winners = self.store.winners(self.identity)
        config = stored_winner(key.json, winners, self.space, self.space_hash)
        if config is not None:
            return Decision(config)
        config, what = self.fallback_config(key.json, winners)
        logger.info("%s %s: launched while another kernel's config is checked or timed; not tuned then, using %s: "
                    "%s", self.kernel_name, key.json, what, config)
        decided = self._while_measuring_decisions[key.json] = Decision(config, final=False)
        return decided

    def stored(self, key: TuningKey) -> Config | None:
        """The key's stored winner, if the store holds one of this Space."""
        return stored_winner(key.json, self.store.winners(self.identity), self.space, self.space_hash)

    def tune_once(self, key: TuningKey, args: tuple, kwargs: dict, first: Sequence[Config] = ()) -> Decision:
        """``tune``, unless another process tunes this key into the store now: then its winner."""

        def stored() -> Decision | None:
            config = self.stored(key)
            return Decision(config) if config is not None else None

        return tune_once(self.store, self.identity, self.space_hash, key.json,
                         lambda: self.tune(key, args, kwargs, first), stored, wait_seconds=self.options.budget.seconds)

    def tune(self, key: TuningKey, args: tuple, kwargs: dict, first: Sequence[Config] = ()) -> Decision:
        """One tuning, in a session of its own (measuring ``first`` before the strategy's configs)."""
        space = self.space_for(args, kwargs)
        if len(space) == 1:
            return Decision(space.configs()[0])
        session = self.session(key, space, first=first)
        try:
            winner, report = session.run(args, kwargs)
        except TuningError as error:  # the caller still sees what was tried
            error.trials, error.run_id = list(session.trials), session.run_id
            raise
        return Decision(winner, trials=session.trials, run_id=session.run_id, report=report)

    def session(self, key: TuningKey, space: Space, *, store: ResultsStore | None = None,
                first: Sequence[Config] = (), clock: Clock | None = None, **changes: Any) -> TuningSession:
        """A tuning session of ``key`` over ``space`` (this kernel's store unless ``store`` is given),
        with ``changes`` to the tuning options (``tunekit tune`` gives its own budget, say)."""
        options = replace(self.options, **changes) if changes else self.options
        return TuningSession(self.launch, space, options, store if store is not None else self.store, self.identity,
                             key, self.space_hash, first=first, clock=clock)

    def fallback_config(self, text: str, winners: Mapping[str, StoredWinner]) -> tuple[Config, str]:
        """The config for key ``text`` when it is not tuned now, and what it is: the stored winner
        (of another Space), the ``fallback`` rule's config, the nearest tuned key's winner, or
        ``default_config`` (else the Space's first config)."""
        exact = winners.get(text)
        if exact and (config := self._in_space(exact.config, f"the stored winner of key {text}")) is not None:
            return config, "the stored winner"
        if self.fallback is not None:
            key = TuningKey.from_json(text)
            given = self.fallback(**key.args, dtypes=list(key.dtypes))
            config = self.space.canonical(given) if isinstance(given, (Config, Mapping)) else None
            if config is not None:
                return config, "the fallback rule's config"
            logger.warning("%s: fallback gave %r for key %s, which is not a config of the Space; ignored",
                           self.kernel_name, given, text)
        tuned = [TuningKey.from_json(other) for other in winners]
        near = nearest_key(TuningKey.from_json(text), tuned)
        if near is not None and (config := self._in_space(winners[near.json].config,
                                                          f"the winner of key {near.json}")) is not None:
            return config, f"the winner of the nearest tuned key {near.json}"
        return self.options.default_config or self.space.configs()[0], "the default config"

    def _in_space(self, config_text: str, what: str) -> Config | None:
        """The stored config ``config_text`` as the Space has it; None, said, for one the Space
        lacks (tuned over another Space, or imported): it is not launched untested."""
        config = self.space.canonical(json.loads(config_text))
        if config is None:
            logger.warning("%s: %s, %s, is not a config of the Space; ignored", self.kernel_name, what, config_text)
        return config

    # -- off the first call --------------------------------------------------------------------

    def _in_background(self, key: tuple, tuning_key: TuningKey, args: tuple, kwargs: dict) -> Decision | None:
        """``background=True`` at a key with no stored winner, online: start its tuning in a thread
        and launch the fallback config meanwhile. None where the usual path decides (a stored
        winner, offline mode). Inside a CUDA-graph capture or a ``torch.compile`` trace the
        fallback is launched and nothing started (the tensors there cannot be copied); a later call
        starts the tuning."""
        winners = self.store.winners(self.identity)
        if settings.mode() == "offline" or stored_winner(tuning_key.json, winners, self.space, self.space_hash):
            return None
        self._refuse_with_ranks("background=True")
        config, what = self.fallback_config(tuning_key.json, winners)
        if not may_switch():
            return Decision(config, final=False)
        try:
            copies = snapshot(self.launch.arg_names, args, kwargs)
        except NotCopyable as error:
            logger.warning("%s %s: not tuned in the background: %s; tuning now", self.kernel_name, tuning_key.json,
                           error)
            return None
        except Exception as error:  # noqa: BLE001 - out of memory for the copies: serve, and try at a later call
            logger.warning("%s %s: the inputs could not be copied for a background tuning (%s); launching %s, a later "
                           "call tries again", self.kernel_name, tuning_key.json, error, what)
            return Decision(config, final=False)
        logger.info("%s %s: tuning in the background; launching %s meanwhile: %s", self.kernel_name,
                    tuning_key.json, what, config)

        def tune() -> Decision:
            return replace(self.tune_once(tuning_key, *copies, first=(config,)), at_this_call=False)

        self.pending[key] = Pending.start(f"tunekit-{self.kernel_name}", config, what, tune)
        return Decision(config, final=False)

    def _over_calls(self, key: tuple, tuning_key: TuningKey, args: tuple, kwargs: dict) -> Decision | None:
        """``Budget(per_call=k)`` at a key with no stored winner, online: measure up to k configs of
        its tuning on this call's inputs and give the config to launch now: the winner once the
        tuning has ended, else the best so far (the fallback config before any). None where the
        usual path decides (a stored winner, offline mode, a Space of one config). Inside a
        CUDA-graph capture or a ``torch.compile`` trace nothing is measured."""
        spreading = self._spreading.get(key)
        if spreading is None:
            winners = self.store.winners(self.identity)
            if settings.mode() == "offline" or stored_winner(tuning_key.json, winners, self.space, self.space_hash):
                return None
            space = self.space_for(args, kwargs)
            if len(space) == 1:
                return None
            self._refuse_with_ranks("Budget(per_call=...)")
            fallback = self.fallback_config(tuning_key.json, winners)[0]
            claim = KeyClaim(self.store, self.identity, self.space_hash, tuning_key.json)
            # another process tunes it: a later call finds its winner. Held while calls come (renewed by each)
            if self.store.shared and not claim.take(renewed_by_calls=True):
                return Decision(fallback, final=False)
            session = self.session(tuning_key, space, clock=Stopwatch())
            spreading = self._spreading[key] = (session, fallback, claim)
        session, fallback, claim = spreading
        if may_switch():
            claim.renew()
            try:
                outcome = session.step(args, kwargs, self.options.budget.per_call)
            except BaseException:
                del self._spreading[key]  # the session is over: the next call starts afresh
                claim.release(won=False)
                raise
            if outcome is not None:
                del self._spreading[key]
                claim.release(won=self.stored(tuning_key) is not None)
                winner, report = outcome
                return Decision(winner, trials=session.trials, run_id=session.run_id, report=report)
        return Decision(session.best_so_far() or fallback, final=False, trials=session.trials, run_id=session.run_id)

    def _refuse_with_ranks(self, what: str) -> None:
        if self.ranks == "first" and several_ranks():
            raise ValueError(f"{self.kernel_name}: {what} would let the ranks of this torch.distributed job launch "
                             "different configs at the same call; use ranks='each' to tune every rank alone, or tune "
                             "ahead of time (tunekit tune).")


def space_hash(space: Space) -> str:
    """What identifies a Space's configs in the store: a winner tuned over another Space is not this one's."""
    return hashlib.sha256("\n".join(config_json(c) for c in space.configs()).encode()).hexdigest()[:32]


def several_ranks() -> bool:
    """Whether this process is one rank of a torch.distributed job of several."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch without distributed support
        return False
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def identify(fn: Any, base_fn: Callable[..., Any], timing_method: str) -> KernelIdentity:
    """What the store files a kernel's trials under: its name, source, Triton build, device and timing method."""
    code = source_hash(fn)
    if settings.interpreting():
        return KernelIdentity(base_fn.__name__, code, triton.__version__, "interpreter", timing_method)
    import torch

    version = f"{triton.__version__}+{hashlib.sha256(triton_build_key().encode()).hexdigest()[:16]}"
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "unknown"
    return KernelIdentity(base_fn.__name__, code, version, device, timing_method)
