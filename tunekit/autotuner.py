"""``tunekit.autotune``: a drop-in ``triton.autotune`` whose search is delegated to a Strategy.

The Autotuner subclasses Triton's, so code that recognises ``triton.runtime.autotuner.Autotuner``
(``torch.compile``'s Dynamo among it) recognises tunekit's, and Triton's arguments keep their
meaning: hooks, ``reset_to_zero``/``restore_value``, ``prune_configs_by``, ``do_bench``.
What differs is the miss path: a stored winner, or a ``TuningSession`` (``tunekit.session``)
in which candidates come from a Strategy, are compiled in parallel, timed by the one benchmark
routine, committed to the store one by one, and the few best re-timed interleaved before a
winner is cached here for the hot path.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import triton
from triton.runtime.autotuner import Autotuner as _TritonAutotuner

from . import settings
from .background import NotCopyable, Pending, may_switch, snapshot
from .benchmark import Benchmarker
from .budget import Budget
from .caller import warn_at_caller
from .claims import KeyClaim, tune_once
from .compat import active_driver, triton_build_key
from .compiler import source_hash, unwrap_jit
from .config import Config, config_from_dict, config_json
from .isolation import kernel_address
from .deadline import Stopwatch
from .keys import Bucket, TuningKey, nearest_key, resolve_buckets
from .launch import Launch
from .ranks import agree, check_mode
from .service import service
from .session import TuningError, TuningOptions, TuningReport, TuningSession, stored_winner
from .shipping import is_winners_file, serve_winners
from .space import Space
from .store import KernelIdentity, MissingStoreError, ReadOnlyStoreError, ResultsStore, memory_store_from, open_store
from .strategy import Strategy, make_strategy

logger = logging.getLogger(__name__)

#: Used when the user gives a Space but neither a strategy nor a budget.
DEFAULT_SEARCH_BUDGET = Budget(evals=64)

__all__ = ["Autotuner", "TuningError", "autotune"]


class Autotuner(_TritonAutotuner):
    """Tunes one kernel: one tuning per key, cached for the hot path. Built by ``autotune``."""

    def __init__(
        self,
        fn: Any,
        arg_names: Sequence[str],
        configs: Sequence[Config] | None,
        key: Sequence[str],
        reset_to_zero: Sequence[str] | None = None,
        restore_value: Sequence[str] | None = None,
        pre_hook: Callable | None = None,
        post_hook: Callable | None = None,
        prune_configs_by: Mapping[str, Any] | None = None,
        warmup: float | None = None,
        rep: float | None = None,
        use_cuda_graph: bool = False,
        do_bench: Callable | None = None,
        cache_results: bool = False,
        *,
        space: Space | None = None,
        strategy: str | Strategy | None = None,
        budget: Budget | None = None,
        store: Any = True,
        seed: int | None = 0,
        finalists: int | None = None,
        compile_workers: int | None = None,
        compile_timeout: float | None = None,
        key_buckets: Mapping[str, Bucket | str] | str | None = None,
        default_config: Config | None = None,
        progress: bool | None = None,
        check: bool = True,
        check_outputs: Sequence[str] | None = None,
        reference: Callable[..., Any] | None = None,
        tolerance: float | Mapping[str, float] | None = None,
        writes_padding: bool = False,
        isolate: bool | None = None,
        run_timeout: float | None = None,
        ranks: str = "first",
        fallback: Callable[..., Mapping[str, Any] | Config] | None = None,
        background: bool = False,
    ) -> None:
        name: str = getattr(unwrap_jit(fn), "__name__", "") or getattr(fn, "__name__", "kernel")
        arg_names = list(arg_names)
        for param, names in (("key", key), ("reset_to_zero", reset_to_zero), ("restore_value", restore_value),
                             ("check_outputs", check_outputs)):
            if isinstance(names, str):
                raise ValueError(f"{param} must be a list of argument names, not the string {names!r}.")
            if not isinstance(names, Iterable) and not (names is None and param != "key"):  # key is required
                raise TypeError(f"{param} must be a list of argument names. Got {names!r} instead.")
            unknown = [n for n in names or () if n not in arg_names]
            if unknown:
                raise ValueError(
                    f"{param} of {name} names {', '.join(map(repr, unknown))}, which "
                    f"{'is not an argument' if len(unknown) == 1 else 'are not arguments'} of the kernel. "
                    f"Its arguments are: {', '.join(arg_names)}."
                )
        if reference is not None and not callable(reference):
            raise TypeError(f"reference must be a function of the kernel's arguments. Got {reference!r} instead.")
        tolerances = tolerance.values() if isinstance(tolerance, Mapping) else [tolerance]
        if any(t is not None and not (isinstance(t, (int, float)) and t >= 0) for t in tolerances):
            raise ValueError(f"tolerance must be a number >= 0 or {{argument name: number}}. Got {tolerance!r} instead.")
        if isinstance(tolerance, Mapping) and (unknown := sorted(set(tolerance) - set(arg_names))):
            raise ValueError(f"tolerance of {name} names {', '.join(map(repr, unknown))}, not an argument of the "
                             f"kernel. Its arguments are: {', '.join(arg_names)}.")
        for option, flag, allowed in (("check", check, (True, False)), ("writes_padding", writes_padding, (True, False)),
                                      ("isolate", isolate, (True, False, None)),
                                      ("use_cuda_graph", use_cuda_graph, (True, False)),
                                      ("background", background, (True, False))):
            if not any(flag is value for value in allowed):
                raise TypeError(f"{option} must be {' or '.join(map(str, allowed))}. Got {flag!r} instead.")
        if default_config is not None and not isinstance(default_config, Config):
            raise TypeError(f"default_config must be a triton.Config. Got {default_config!r} instead.")
        for option, seconds in (("compile_timeout", compile_timeout), ("run_timeout", run_timeout)):
            if seconds is not None and not (isinstance(seconds, (int, float)) and seconds > 0):
                raise ValueError(f"{option} must be a number of seconds > 0 or None. Got {seconds!r} instead.")
        if budget is not None and not isinstance(budget, Budget):
            raise TypeError(f"budget must be a tunekit.Budget. Got {budget!r} instead.")
        if finalists is not None and (isinstance(finalists, bool) or not isinstance(finalists, int)
                                      or finalists < 1):
            raise ValueError(f"finalists must be an int >= 1 or None. Got {finalists!r} instead.")
        if fallback is not None and not callable(fallback):
            raise TypeError(f"fallback must be a function config_for(**key) -> dict (tunekit store heuristics writes "
                            f"one). Got {fallback!r} instead.")
        if not isinstance(background, bool):
            raise TypeError(f"background must be True or False. Got {background!r} instead.")
        if background and budget is not None and budget.per_call:
            raise ValueError("background=True and Budget(per_call=...) both keep tuning off a long first call; choose "
                             "one.")
        if background and isolate is not True and kernel_address(fn) is None:
            logger.warning("%s: tuned at the first call of each key, not in the background: background tunings run "
                           "their configs in a benchmark worker, and no worker can import a kernel defined in "
                           "__main__ or inside a function; define it at the top level of a module",
                           name)
            background = False
        if background:  # its configs run in a benchmark worker, not in the serving process's threads
            if isolate is False and settings.interpreting():
                raise ValueError("background=True under the Triton interpreter needs isolate (the interpreter is not "
                                 "thread-safe: the background tuning runs its configs in a benchmark worker).")
            isolate = True if isolate is None else isolate
        if budget is not None and budget.per_call and key_buckets:
            raise ValueError("Budget(per_call=...) times each call's configs on that call's inputs; with key_buckets "
                             "one key holds several shapes, whose times cannot be compared. Leave out one of them.")
        self.ranks = check_mode(ranks)
        self.space = self._build_space(configs, space)
        self.space.check_kernel(arg_names, name)
        tuned_keys = [k for k in key if k in self.space.meta_params]
        if tuned_keys:
            problem = (f"key of {name} names {', '.join(map(repr, tuned_keys))}, which the autotuner sets from its "
                       "configs, so it is no part of the key (the call does not pass it)")
            if space is not None:  # tunekit's own API: refused
                raise ValueError(f"{problem}: every call would share one winner. key names the call's own arguments "
                                 "that change what is fastest (sizes, strides, flags).")
            logger.info("%s, as in stock triton.autotune", problem)  # a config list: stock's behaviour, kept
        len(self.space)  # enumerate now: a constraint that rejects all or raises fails here, before any compile
        self.space_hash = _space_hash(self.space)
        super().__init__(
            fn, arg_names, list(self.space.configs()), list(key), reset_to_zero, restore_value,
            pre_hook=pre_hook, post_hook=post_hook, prune_configs_by=prune_configs_by, warmup=warmup,
            rep=rep, use_cuda_graph=use_cuda_graph, do_bench=do_bench, cache_results=cache_results,
        )
        from . import strategies

        if strategy is None:
            strategy = "exhaustive" if configs and space is None else strategies.DEFAULT
        strategy = make_strategy(strategy)
        if budget is None and strategy.name != "exhaustive":
            budget = DEFAULT_SEARCH_BUDGET
        # cache_results asks stock Triton to persist timings; tunekit's store does that
        if (store is None or store is False) and cache_results:
            store = True
        self.options = TuningOptions(
            strategy=strategy, budget=budget or Budget(), seed=seed,
            finalists=finalists if finalists is not None else (
                1 if store is None or store is False else settings.DEFAULTS.finalists),
            compile_workers=compile_workers, compile_timeout=compile_timeout, check=check, isolate=isolate,
            run_timeout=run_timeout, progress=progress, default_config=default_config,
        )
        self.launch = Launch(
            self.fn, name, tuple(arg_names), Benchmarker(do_bench=do_bench, warmup=warmup, rep=rep,
                                                         use_cuda_graph=use_cuda_graph),
            tuple(self.reset_to_zero), tuple(self.restore_value),
            user_pre_hook=pre_hook, user_post_hook=post_hook,
            check_outputs=tuple(check_outputs) if check_outputs is not None else None,
            reference=reference, tolerance=tolerance, writes_padding=bool(writes_padding),
        )
        self._store_arg = store
        self._store: ResultsStore | None = None
        self.key_buckets = resolve_buckets(key, key_buckets)
        self.kernel_name = name
        self._key_positions = [arg_names.index(k) for k in key]
        #: The hot path's bucketing: (argument position, bucket or None) per key argument.
        self._bucket_plan = [(arg_names.index(k), self.key_buckets.get(k)) for k in key] if self.key_buckets else None
        self._last_key_position = max(self._key_positions, default=-1)
        self._tuned: dict[tuple, tuple[Config, dict[str, Any]]] = {}
        self.fallback = fallback
        self.background = background
        #: Keys tuned in a background thread, launching a fallback meanwhile (``tunekit.background``).
        self._pending: dict[tuple, Pending] = {}
        #: Keys whose tuning is spread over calls (``Budget(per_call=k)``).
        self._spreading: dict[tuple, tuple[TuningSession, Config, KeyClaim]] = {}
        self._lock = threading.RLock()
        self._prune_lock = threading.Lock()  # pruning sets self.nargs, as Triton's prune_configs reads it
        self._identity: KernelIdentity | None = None
        self.trials: list = []
        self.run_id: str | None = None
        #: What the last tuning did and cost (evaluations, seconds, workers started).
        self.tuning_report: TuningReport | None = None
        self._told_tensor_key = False
        settings.configure_logging()
        if settings.mode() == "online" and isolate:
            service().prepare()  # a zygote for benchmark workers, forked now while that is cheap and safe

    @property
    def strategy(self) -> Strategy:
        return self.options.strategy

    @property
    def budget(self) -> Budget:
        return self.options.budget

    @property
    def benchmark_workers_started(self) -> int:
        """Benchmark worker processes the last tuning started (0: it ran in this process, or took a
        worker kept warm by an earlier tuning)."""
        return self.tuning_report.benchmark_workers_started if self.tuning_report else 0

    @property
    def isolation_seconds(self) -> dict[str, float]:
        """Seconds the last tuning waited for workers to start, and spent messaging them."""
        report = self.tuning_report
        return {"starting": report.seconds_waiting_for_workers if report else 0.0,
                "messaging": report.seconds_messaging if report else 0.0}


    # -- what code outside tunekit sees as the config list ------------------------------------

    @property
    def configs(self) -> list[Config]:
        """The configs that callers outside tunekit should consider.

        ``torch.compile`` (Inductor) reads this list when it traces a call of the kernel and
        benchmarks every entry itself. Once tunekit has winners for this kernel (tuned in this
        process, or stored on this device), the list is those winners, so Inductor picks among
        a few tuned configs instead of sweeping the whole Space; before that it is the Space.
        """
        winners = self._winner_configs()
        return winners if winners else self._all_configs

    @configs.setter
    def configs(self, configs: list[Config]) -> None:  # Triton's __init__ assigns it
        self._all_configs = list(configs)

    def _winner_configs(self) -> list[Config]:
        found: dict[str, Config] = {config_json(c): c for c, _ in getattr(self, "_tuned", {}).values()}
        if not found and getattr(self, "_stored_winners", None) is None and hasattr(self, "_store_arg"):
            try:
                self._stored_winners = [
                    config
                    for config_text, _, stored_hash in self.store.winners(self.identity).values()
                    if stored_hash == self.space_hash and (config := self.space.canonical(json.loads(config_text)))
                ]
            except Exception as error:  # no device, no store: nothing tuned to offer
                logger.debug("no stored winners for %s: %s", getattr(self, "kernel_name", "?"), error)
                self._stored_winners = []
        for config in getattr(self, "_stored_winners", None) or []:
            found.setdefault(config_json(config), config)
        return list(found.values())

    def prune_configs(self, kwargs: dict) -> list[Config]:
        """Triton's pruning (``early_config_prune``, ``perf_model`` with ``top_k``) over the Space."""
        return _TritonAutotuner.prune_configs(_WithConfigs(self, self._all_configs), kwargs)

    @staticmethod
    def _build_space(configs: Sequence[Config] | None, space: Space | None) -> Space:
        """The Space to search: ``configs`` (first, in their order), ``space``'s configs, or
        Triton's single default config when neither is given."""
        if space is not None and not isinstance(space, Space):
            raise TypeError(f"space must be a tunekit.Space. Got {space!r} instead.")
        if configs is not None and (isinstance(configs, Config) or not isinstance(configs, Iterable)
                                    or (space is None and not configs)):
            error = ValueError if isinstance(configs, Sequence) else TypeError  # [] is a list, but empty
            raise error("configs must be a list of at least one triton.Config (leave it out for Triton's "
                        f"single default config). Got {configs!r} instead.")
        if configs and space is not None:
            listed = list(configs)
            ids = {config_json(c) for c in listed}
            return Space.from_configs(listed + [c for c in space.configs() if config_json(c) not in ids])
        if space is not None:
            return space
        return Space.from_configs(list(configs) if configs else [Config({}, num_warps=4, num_stages=3, num_ctas=1)])

    # -- the hot path --------------------------------------------------------------------------

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        """``kernel[grid](*args)``, as Triton's, without re-packing the arguments in a lambda."""
        return functools.partial(self.run, grid=grid, warmup=False)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        if len(kwargs) == 2 and len(args) > self._last_key_position:  # a kernel[grid](*args) launch
            if self._bucket_plan is None:
                values = [args[i] for i in self._key_positions]
            else:
                values = [args[i] if bucket is None else bucket(args[i]) for i, bucket in self._bucket_plan]
            key = (*values, *[a.dtype for a in args if hasattr(a, "dtype")])
        else:
            key = self._slow_key(args, kwargs)
        entry = self._tuned.get(key)
        if entry is None:
            entry = self._on_miss(key, args, kwargs)
        config, config_kwargs = entry
        self.best_config = config
        if config.pre_hook is not None:
            config.pre_hook({**dict(zip(self.arg_names, args)), **kwargs, **config_kwargs})
        return self.fn.run(*args, **kwargs, **config_kwargs)

    def _bucketed(self, values: tuple) -> tuple:
        buckets = self.key_buckets
        return tuple(buckets[name](v) if name in buckets else v for name, v in zip(self.keys, values))

    def _slow_key(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple:
        """Stock Triton's key: the key arguments' values, then every argument's dtype."""
        named = {k: v for k, v in {**dict(zip(self.arg_names, args)), **kwargs}.items() if k in self.arg_names}
        values = tuple(named[k] for k in self.keys if k in named)
        if self.key_buckets:
            values = self._bucketed(values)
        return values + tuple(v.dtype for v in named.values() if hasattr(v, "dtype"))

    # -- the miss path -------------------------------------------------------------------------

    @property
    def store(self) -> ResultsStore:
        """The results store, opened on first use. In offline mode, which never tunes, it is only
        read: never created or written, readable on a read-only file system; a store that does
        not exist is an empty one (every key then falls back, with a warning). A winners file
        (``.jsonl``, from ``tunekit store export --winners``) is served from memory in both modes:
        only read, and what a tuning at a key it lacks measures is kept in memory."""
        if self._store is None:
            if is_winners_file(self._store_arg):
                self._store = serve_winners(self._store_arg, self.identity)
            elif settings.mode() == "offline":
                try:
                    self._store = open_store(self._store_arg, read_only=True)
                except MissingStoreError as error:
                    logger.warning("%s; %s=offline: using no store", error, settings.ENV_MODE)
                    self._store = open_store(None)
            else:
                try:
                    self._store = open_store(self._store_arg)
                except ReadOnlyStoreError as error:  # a tuned store shipped on read-only media, say
                    self._store = memory_store_from(self._store_arg)
                    logger.warning("%s: reading it into memory; its winners are served, and what this process tunes "
                                   "is not kept after it exits", error)
        return self._store

    @property
    def identity(self) -> KernelIdentity:
        if self._identity is None:
            self._identity = _identify(self.fn, self.base_fn, self.launch.benchmarker.method)
        return self._identity

    def _on_miss(self, key: tuple, args: tuple, kwargs: dict) -> tuple[Config, dict[str, Any]]:
        if not settings.interpreting():
            active_driver()  # a CPU machine without the interpreter: say so before anything is stored
        pending = self._pending.get(key)
        if pending is not None and not (pending.done.is_set() and may_switch()):
            return pending.entry
        with self._lock:
            if key in self._tuned:
                return self._tuned[key]
            pending = self._pending.get(key)
            if pending is not None:  # once done, its winner (or, if it failed, the fallback) from now on
                if not (pending.done.is_set() and may_switch()):
                    return pending.entry
                del self._pending[key]
                return self._keep(key, self._checked_key(key, args, kwargs), pending.final())
            tuning_key = self._checked_key(key, args, kwargs)
            if len(self.space) == 1:
                config = self.space.configs()[0]
            elif self.background and (entry := self._tune_in_background(key, tuning_key, args, kwargs)):
                return entry
            elif self.budget.per_call and (entry := self._tune_over_calls(key, tuning_key, args, kwargs)):
                return entry
            else:
                identity = self.identity
                decision = (f"{self.kernel_name}/{identity.source_hash}/{identity.triton_version}/{identity.device}/"
                            f"{self.space_hash}/{tuning_key.json}")
                config = agree(self.ranks, decision, self.space,
                               lambda: self._stored_or_tuned(tuning_key, args, kwargs))
            return self._keep(key, tuning_key, config)

    def _keep(self, key: tuple, tuning_key: TuningKey, config: Config) -> tuple[Config, dict[str, Any]]:
        """Launch ``config`` at ``key`` from now on (the hot path's cache)."""
        entry = (config, config.all_kwargs())
        self._tuned[key] = entry
        self.cache[tuning_key.triton_key] = config  # stock Triton's attribute and key, for code that reads it
        return entry

    def _tune_in_background(self, key: tuple, tuning_key: TuningKey, args: tuple,
                            kwargs: dict) -> tuple[Config, dict[str, Any]] | None:
        """``background=True`` at a key with no stored winner, online: start its tuning in a thread
        and give the fallback config to launch meanwhile. None where the usual path decides (a
        stored winner, offline mode). Inside a CUDA-graph capture or a ``torch.compile`` trace the
        fallback is launched and nothing started (the tensors there cannot be copied); a later call
        starts the tuning."""
        winners = self.store.winners(self.identity)
        if settings.mode() == "offline" or stored_winner(tuning_key.json, winners, self.space, self.space_hash):
            return None
        self._refuse_with_ranks("background=True")
        config, what = self._fallback_config(tuning_key.json, winners)
        if not may_switch():
            return config, config.all_kwargs()
        try:
            copies = snapshot(self.arg_names, args, kwargs)
        except NotCopyable as error:
            logger.warning("%s %s: not tuned in the background: %s; tuning now", self.kernel_name, tuning_key.json,
                           error)
            return None
        except Exception as error:  # noqa: BLE001 - out of memory for the copies: serve, and try at a later call
            logger.warning("%s %s: the inputs could not be copied for a background tuning (%s); launching %s, a later "
                           "call tries again", self.kernel_name, tuning_key.json, error, what)
            return config, config.all_kwargs()
        pending = Pending(config, what)
        self._pending[key] = pending
        logger.info("%s %s: tuning in the background; launching %s meanwhile: %s", self.kernel_name,
                    tuning_key.json, what, config)
        pending.start(f"tunekit-{self.kernel_name}", lambda: self._tune_once(tuning_key, *copies, first=(config,)))
        return pending.entry

    def _tune_over_calls(self, key: tuple, tuning_key: TuningKey, args: tuple,
                         kwargs: dict) -> tuple[Config, dict[str, Any]] | None:
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
            space = self.tuning_space(args, kwargs)
            if len(space) == 1:
                return None
            self._refuse_with_ranks("Budget(per_call=...)")
            fallback = self._fallback_config(tuning_key.json, winners)[0]
            claim = KeyClaim(self.store, self.identity, self.space_hash, tuning_key.json)
            # another process tunes it: a later call finds its winner. Held while calls come (renewed by each)
            if self.store.shared and not claim.take(renewed_by_calls=True):
                return fallback, fallback.all_kwargs()
            session = TuningSession(self.launch, space, self.options, self.store, self.identity, tuning_key,
                                    self.space_hash, clock=Stopwatch())
            spreading = self._spreading[key] = (session, fallback, claim)
            self.run_id = session.run_id
        session, fallback, claim = spreading
        if may_switch():
            claim.renew()
            try:
                outcome = session.step(args, kwargs, self.budget.per_call)
            except BaseException:
                del self._spreading[key]  # the session is over: the next call starts afresh
                claim.release(won=False)
                raise
            finally:
                self.trials = session.trials
            if outcome is not None:
                del self._spreading[key]
                claim.release(won=self._stored_winner(tuning_key) is not None)
                return self._keep(key, tuning_key, self._tuned_by(session, *outcome, args, kwargs))
        config = session.best_so_far() or fallback
        return config, config.all_kwargs()

    def _refuse_with_ranks(self, what: str) -> None:
        if self.ranks == "first" and _several_ranks():
            raise ValueError(f"{self.kernel_name}: {what} would let the ranks of this torch.distributed job launch "
                             "different configs at the same call; use ranks='each' to tune every rank alone, or tune "
                             "ahead of time (tunekit tune).")

    def wait_for_tuning(self, timeout: float | None = None) -> bool:
        """Wait until the background tunings started so far have ended (``background=True``);
        False if ``timeout`` seconds passed first. The next call of each key then switches."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for pending in list(self._pending.values()):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not pending.done.wait(left):
                return False
        return True

    def tuning_key(self, args: tuple, kwargs: dict) -> TuningKey:
        """The key a call with these arguments is tuned and stored under (``kwargs`` as ``run``
        gets them: ``grid`` and Triton's launch options included). Raises on a call that cannot be
        tuned (a tuned parameter passed, arguments the kernel does not take)."""
        return self._checked_key(self._slow_key(args, kwargs), args, kwargs)

    def _checked_key(self, key: tuple, args: tuple, kwargs: dict) -> TuningKey:
        conflicts = kwargs.keys() & set(self.space.meta_params)
        if conflicts:
            raise ValueError(
                f"{self.kernel_name} was called with {', '.join(sorted(conflicts))}, which the autotuner tunes. "
                "Make sure that you don't re-define auto-tuned symbols."
            )
        self.launch.check_call(args, kwargs, self.space.meta_params)
        named = {**dict(zip(self.arg_names, args)), **kwargs}
        names = [k for k in self.keys if k in named]
        tensors = [i for i, k in enumerate(names) if hasattr(key[i], "data_ptr")]
        if tensors:  # stored by what the tensor is, not by its printed values
            key = tuple(_tensor_key(v) if i in tensors else v for i, v in enumerate(key))
            if not self._told_tensor_key:
                self._told_tensor_key = True
                logger.warning("key of %s names %s, a tensor: stored by its shape and dtype, and in this process by "
                               "the tensor object, as Triton caches it (every new tensor is looked up again); key on "
                               "a size argument instead", self.kernel_name, ", ".join(repr(names[i]) for i in tensors))
        return TuningKey.from_call(names, key)

    def tuning_space(self, args: tuple, kwargs: dict) -> Space:
        """The configs a call with these arguments is tuned over: the Space after Triton's
        ``prune_configs_by`` (``early_config_prune``, ``perf_model``), if given."""
        if not (self.early_config_prune or self.perf_model):
            return self.space
        with self._prune_lock:
            self.nargs: dict[str, Any] | None = dict(zip(self.arg_names, args))
            try:
                return Space.from_configs(self.prune_configs(kwargs))
            finally:
                self.nargs = None

    def _stored_or_tuned(self, key: TuningKey, args: tuple, kwargs: dict) -> Config:
        winners = self.store.winners(self.identity)
        config = stored_winner(key.json, winners, self.space, self.space_hash)
        if config is not None:
            logger.info("%s %s: stored winner %s", self.kernel_name, key.json, config)
            return config
        reason = None
        if settings.mode() == "offline":
            reason = f"{settings.ENV_MODE}=offline"
        elif not may_switch():
            reason = "a CUDA graph is being captured or torch.compile is tracing"
        if reason is None:
            return self._tune_once(key, args, kwargs)
        return self._fallback(key.json, winners, reason)

    def _stored_winner(self, key: TuningKey) -> Config | None:
        return stored_winner(key.json, self.store.winners(self.identity), self.space, self.space_hash)

    def _tune_once(self, key: TuningKey, args: tuple, kwargs: dict, first: Sequence[Config] = ()) -> Config:
        """``_tune``, unless another process tunes this key into the store now: then its winner."""
        return tune_once(self.store, self.identity, self.space_hash, key.json,
                         lambda: self._tune(key, args, kwargs, first), lambda: self._stored_winner(key),
                         wait_seconds=self.budget.seconds)

    def _fallback_config(self, text: str, winners: Mapping[str, tuple]) -> tuple[Config, str]:
        """The config for key ``text`` when it is not tuned now, and what it is: the stored winner
        (of another Space), the ``fallback`` rule's config, the nearest tuned key's winner, or
        ``default_config`` (else the Space's first config)."""
        exact = winners.get(text)
        if exact:
            params = json.loads(exact[0])
            return self.space.canonical(params) or config_from_dict(params), "the stored winner"
        if self.fallback is not None:
            key = json.loads(text)
            given = self.fallback(**key["args"], dtypes=list(key["dtypes"]))
            config = self.space.canonical(given) if isinstance(given, (Config, Mapping)) else None
            if config is not None:
                return config, "the fallback rule's config"
            logger.warning("%s: fallback gave %r for key %s, which is not a config of the Space; ignored",
                           self.kernel_name, given, text)
        near = nearest_key(text, list(winners))
        if near:
            params = json.loads(winners[near][0])
            return (self.space.canonical(params) or config_from_dict(params),
                    f"the winner of the nearest tuned key {near}")
        return self.options.default_config or self.space.configs()[0], "the default config"

    def _fallback(self, text: str, winners: Mapping[str, tuple], reason: str) -> Config:
        config, what = self._fallback_config(text, winners)
        warn_at_caller(
            f"tunekit did not tune {self.kernel_name} for key {text} because {reason}; using {what}: {config}",
            RuntimeWarning,
        )
        return config

    def _tune(self, key: TuningKey, args: tuple, kwargs: dict, first: Sequence[Config] = ()) -> Config:
        """One tuning, in a session of its own (measuring ``first`` before the strategy's configs);
        this object keeps its winner and report."""
        space = self.tuning_space(args, kwargs)
        if len(space) == 1:
            return space.configs()[0]
        session = TuningSession(self.launch, space, self.options, self.store, self.identity, key, self.space_hash,
                                first=first)
        self.run_id = session.run_id
        try:
            winner, report = session.run(args, kwargs)
        finally:
            self.trials = session.trials
        return self._tuned_by(session, winner, report, args, kwargs)

    def _tuned_by(self, session: TuningSession, winner: Config, report: TuningReport, args: tuple,
                  kwargs: dict) -> Config:
        """Keep what a tuning that has ended reports (stock Triton's attributes too); its winner."""
        key = session.key
        self.tuning_report = report
        self.bench_time = report.seconds
        self.configs_timings = {
            t.config: [t.timing.median_ms, t.timing.p20_ms, t.timing.p80_ms] if t.ok and t.timing is not None
            else [float("inf")] * 3
            for t in session.trials
        }
        self.launch.pre_hook({**dict(zip(self.arg_names, args)), **kwargs, **winner.all_kwargs()}, reset_only=True)
        if settings.print_autotuning():
            print(f"Triton autotuning for function {self.base_fn.__name__},\nwith key as {key.triton_key},\n"
                  f"finished after {report.seconds:.2f}s,\nbest config selected: {winner};")
        return winner


class _WithConfigs:
    """A view of an Autotuner whose ``configs`` is a given list (for Triton's own pruning code)."""

    def __init__(self, autotuner: Autotuner, configs: list[Config]) -> None:
        self._autotuner = autotuner
        self.configs = configs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._autotuner, name)


def _kernel_arg_names(fn: Any) -> list[str]:
    """The argument names of what ``autotune`` decorates: a ``@triton.jit`` function, or one that
    ``triton.heuristics`` or another autotune wraps (each has Triton's ``arg_names``)."""
    names = getattr(fn, "arg_names", None)
    if not isinstance(names, Sequence) or not callable(getattr(fn, "run", None)):
        raise TypeError("tunekit.autotune decorates a @triton.jit function (or one that triton.heuristics or "
                        f"another autotune wraps). Got {fn!r} instead.")
    return list(names)


def _space_hash(space: Space) -> str:
    import hashlib

    return hashlib.sha256("\n".join(config_json(c) for c in space.configs()).encode()).hexdigest()[:32]


def _several_ranks() -> bool:
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch without distributed support
        return False
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _tensor_key(tensor: Any) -> str:
    """What the store keys a tensor passed as a ``key`` argument by: its shape and dtype."""
    return f"tensor(shape={list(tensor.shape)}, dtype={tensor.dtype})"


def _identify(fn: Any, base_fn: Callable, timing_method: str) -> KernelIdentity:
    import hashlib

    code = source_hash(fn)
    if settings.interpreting():
        return KernelIdentity(base_fn.__name__, code, triton.__version__, "interpreter", timing_method)
    import torch

    version = f"{triton.__version__}+{hashlib.sha256(triton_build_key().encode()).hexdigest()[:16]}"
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "unknown"
    return KernelIdentity(base_fn.__name__, code, version, device, timing_method)


def autotune(
    configs: Sequence[Config] | None = None,
    key: Sequence[str] = (),
    prune_configs_by: Mapping[str, Any] | None = None,
    reset_to_zero: Sequence[str] | None = None,
    restore_value: Sequence[str] | None = None,
    pre_hook: Callable | None = None,
    post_hook: Callable | None = None,
    warmup: float | None = None,
    rep: float | None = None,
    use_cuda_graph: bool = False,
    do_bench: Callable | None = None,
    cache_results: bool = False,
    *,
    space: Space | None = None,
    strategy: str | Strategy | None = None,
    budget: Budget | None = None,
    store: Any = True,
    seed: int | None = 0,
    **options: Any,
) -> Callable[[Any], Autotuner]:
    """Decorator for tuning a ``@triton.jit`` function; ``triton.autotune``'s arguments keep their meaning.

    ``configs``, ``key``, ``prune_configs_by``, ``reset_to_zero``, ``restore_value``, ``pre_hook``,
    ``post_hook``, ``warmup``, ``rep``, ``use_cuda_graph``, ``do_bench`` and ``cache_results`` are
    as in ``triton.autotune``.

    Args:
        space: a ``tunekit.Space`` to search, instead of or beside ``configs``.
        strategy: a registered strategy name or a ``Strategy`` instance; ``"exhaustive"`` when
            only ``configs`` is given, the project's default strategy otherwise.
        budget: a ``tunekit.Budget``; unlimited for exhaustive search.
        store: path or SQLAlchemy URL of the results store; ``True`` (default) is
            ``$TUNEKIT_STORE`` or a SQLite file in the user's cache directory; ``None`` keeps
            everything in memory, as stock Triton does.
        seed: makes strategies reproducible.
        **options: ``finalists``, ``compile_workers``, ``compile_timeout``, ``key_buckets``,
            ``default_config``, ``progress``, and what guards against bad configs:
            ``check`` (default True: each config's outputs are compared with a reference and a
            config that differs is a ``wrong`` trial), ``check_outputs`` (the argument names
            to compare), ``reference`` (``fn(**kernel_arguments)`` that writes the expected
            outputs into its arguments or returns ``{name: tensor}``; by default the first
            config that runs), ``tolerance`` (a float or ``{name: float}``; by default by dtype,
            see ``tunekit.check``), ``writes_padding`` (default False: a config that changes any
            byte of a tensor argument's allocation outside the tensors, such as the rest of a
            buffer an output is a slice of, is ``wrong``; True for a kernel that writes padding),
            ``isolate`` (check and time in a worker process, so that a
            crash or hang costs only that config; by default on a GPU when the kernel is first
            tuned), ``run_timeout`` (seconds per config in that worker; adaptive by default),
            ``ranks`` (in a ``torch.distributed`` job: ``"first"``, default, the first rank to
            reach a key decides it and the others launch its decision; ``"each"``: every rank
            tunes alone, as stock Triton does; see ``tunekit.ranks``), ``fallback`` (a function
            ``config_for(**key) -> dict``, as ``tunekit store heuristics`` writes: the config for a
            key with no winner where none is tuned now, before the nearest key's winner and
            ``default_config``), ``background`` (True: a key with no winner launches that fallback
            config at once and is tuned in a background thread; later calls switch to the winner,
            never inside a CUDA-graph capture or a ``torch.compile`` trace; see
            ``Autotuner.wait_for_tuning``).

    Examples:
        >>> @tunekit.autotune(space=tunekit.Space(BLOCK=[256, 512, 1024], num_warps=[2, 4]),
        ...                   key=["n"], strategy="random", budget=tunekit.Budget(evals=4))
        ... @triton.jit
        ... def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr): ...
    """

    def decorator(fn: Any) -> Autotuner:
        return Autotuner(
            fn, _kernel_arg_names(fn), configs, key, reset_to_zero, restore_value, pre_hook=pre_hook,
            post_hook=post_hook, prune_configs_by=prune_configs_by, warmup=warmup, rep=rep,
            use_cuda_graph=use_cuda_graph, do_bench=do_bench, cache_results=cache_results, space=space,
            strategy=strategy, budget=budget, store=store, seed=seed, **options,
        )

    return decorator
