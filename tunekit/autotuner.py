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
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from typing import Any

from triton.runtime.autotuner import Autotuner as _TritonAutotuner

from . import settings
from .background import may_switch
from .benchmark import Benchmarker
from .budget import Budget
from .compat import active_driver, prefetch_triton_build_key
from .compiler import unwrap_jit
from .config import Config
from .keys import Bucket, TuningKey, call_key, resolve_buckets
from .direct import DirectLaunch
from .launch import Launch
from .miss import Decision, KernelTuning
from .options import background_and_isolation, check_options, search_space, tuning_options
from .ranks import check_mode
from .service import service
from .workers import IN_WORKER
from .session import TuningError, TuningReport
from .space import Space
from .store import KernelIdentity, ResultsStore
from .strategy import Strategy
from .trial import Trial

logger = logging.getLogger(__name__)

__all__ = ["Autotuner", "TuningError", "autotune"]


def _settable(name: str, view: property) -> property:
    """``view`` as a property that an instance's own value of ``name``, once set, replaces."""

    def get(self: Any) -> Any:
        return self.__dict__[name] if name in self.__dict__ else view.fget(self)  # type: ignore[misc]

    def put(self: Any, value: Any) -> None:
        self.__dict__[name] = value

    return property(get, put, doc=view.__doc__)


class Autotuner(_TritonAutotuner):
    """Tunes one kernel: one tuning per key, cached for the hot path. Built by ``autotune``."""

    #: Read-only properties that a subclass may set in its own ``__init__``: a library's subclass
    #: of Triton's Autotuner built on this class under ``patch_triton`` (FlagGems' ``LibTuner``
    #: sets ``self.strategy``) keeps its value instead of failing on a property without a setter.
    _VIEWS = ("strategy", "budget", "store", "identity", "space_hash", "benchmark_workers_started",
              "isolation_seconds")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in Autotuner._VIEWS:
            if name not in cls.__dict__:
                setattr(cls, name, _settable(name, getattr(Autotuner, name)))

    def __init__(
        self, fn: Any, arg_names: Sequence[str], configs: Sequence[Config] | None, key: Sequence[str],
        reset_to_zero: Sequence[str] | None = None, restore_value: Sequence[str] | None = None,
        pre_hook: Callable | None = None, post_hook: Callable | None = None,
        prune_configs_by: Mapping[str, Any] | None = None, warmup: float | None = None, rep: float | None = None,
        use_cuda_graph: bool = False, do_bench: Callable | None = None, cache_results: bool = False,
        *,
        space: Space | None = None, strategy: str | Strategy | None = None, budget: Budget | None = None,
        store: Any = True, seed: int | None = 0, finalists: int | None = None, compile_workers: int | None = None,
        compile_timeout: float | None = None, key_buckets: Mapping[str, Bucket | str] | str | None = None,
        default_config: Config | None = None, progress: bool | None = None, check: bool = True,
        check_outputs: Sequence[str] | None = None, reference: Callable[..., Any] | None = None,
        tolerance: float | Mapping[str, float] | None = None, writes_padding: bool = False,
        isolate: bool | None = None, run_timeout: float | None = None, ranks: str = "first",
        fallback: Callable[..., Mapping[str, Any] | Config] | None = None, background: bool = False,
    ) -> None:
        name: str = getattr(unwrap_jit(fn), "__name__", "") or getattr(fn, "__name__", "kernel")
        arg_names = list(arg_names)
        check_options(name, arg_names, key=key, reset_to_zero=reset_to_zero, restore_value=restore_value,
                      check_outputs=check_outputs, reference=reference, tolerance=tolerance,
                      flags={"check": check, "writes_padding": writes_padding, "isolate": isolate,
                             "use_cuda_graph": use_cuda_graph, "background": background},
                      default_config=default_config, timeouts={"compile_timeout": compile_timeout,
                                                               "run_timeout": run_timeout},
                      budget=budget, finalists=finalists, fallback=fallback, key_buckets=key_buckets)
        background, isolate = background_and_isolation(fn, name, background, isolate)
        self.ranks = check_mode(ranks)
        self.space = search_space(configs, space, key, arg_names, name)
        super().__init__(
            fn, arg_names, list(self.space.configs()), list(key), reset_to_zero, restore_value,
            pre_hook=pre_hook, post_hook=post_hook, prune_configs_by=prune_configs_by, warmup=warmup,
            rep=rep, use_cuda_graph=use_cuda_graph, do_bench=do_bench, cache_results=cache_results,
        )
        self.options, store = tuning_options(configs, space, strategy, budget, store, cache_results, seed=seed,
                                             finalists=finalists, compile_workers=compile_workers,
                                             compile_timeout=compile_timeout, check=check, isolate=isolate,
                                             run_timeout=run_timeout, progress=progress, default_config=default_config)
        self.launch = Launch(
            self.fn, name, tuple(arg_names), Benchmarker(do_bench=do_bench, warmup=warmup, rep=rep,
                                                         use_cuda_graph=use_cuda_graph),
            tuple(self.reset_to_zero), tuple(self.restore_value),
            user_pre_hook=pre_hook, user_post_hook=post_hook,
            check_outputs=tuple(check_outputs) if check_outputs is not None else None,
            reference=reference, tolerance=tolerance, writes_padding=bool(writes_padding),
        )
        self.tuning = KernelTuning(self.launch, self.space, self.tuning_space, self.options, store, fallback=fallback,
                                   ranks=self.ranks, background=background, base_fn=self.base_fn)
        self.key_buckets = resolve_buckets(key, key_buckets)
        self.kernel_name = name
        self._key_positions = [arg_names.index(k) for k in key]
        #: The hot path's bucketing: (argument position, bucket or None) per key argument.
        self._bucket_plan = [(arg_names.index(k), self.key_buckets.get(k)) for k in key] if self.key_buckets else None
        self._last_key_position = max(self._key_positions, default=-1)
        #: key -> (config, its keyword arguments, its direct launch or None)
        self._tuned: dict[tuple, tuple[Config, dict[str, Any], DirectLaunch | None]] = {}
        self._lock = threading.RLock()
        #: Keys of ``cache`` that tunekit set (its winners); a config under any other key was put
        #: there by a subclass or the caller, and is launched untuned, as stock's ``run`` does.
        self._cached_here: set[tuple] = set()
        self._prune_lock = threading.Lock()  # pruning sets self.nargs, as Triton's prune_configs reads it
        self.trials: list[Trial] = []
        self.run_id: str | None = None
        #: What the last tuning did and cost (evaluations, seconds, workers started).
        self.tuning_report: TuningReport | None = None
        settings.configure_logging()
        if settings.mode() == "online" and isolate:
            service().prepare()  # a zygote for benchmark workers, forked now while that is cheap and safe
        if not settings.interpreting() and not os.environ.get(IN_WORKER):
            prefetch_triton_build_key()  # after the zygote's fork: the first miss's identity needs it

    @property
    def space_hash(self) -> str:
        return self.tuning.space_hash

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
        if not hasattr(self, "tuning"):  # Triton's __init__ reads it before tunekit's is done
            return self._all_configs
        return self.tuning.winner_configs([config for config, _, _ in self._tuned.values()]) or self._all_configs

    @configs.setter
    def configs(self, configs: list[Config]) -> None:  # Triton's __init__ assigns it
        self._all_configs = list(configs)

    def prune_configs(self, kwargs: dict) -> list[Config]:
        """Triton's pruning (``early_config_prune``, ``perf_model`` with ``top_k``) over the Space."""
        pruned: list[Config] = _TritonAutotuner.prune_configs(_WithConfigs(self, self._all_configs), kwargs)
        return pruned

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
        config, config_kwargs, direct = entry
        self.best_config = config
        if config.pre_hook is not None:
            config.pre_hook({**dict(zip(self.arg_names, args)), **kwargs, **config_kwargs})
        elif direct is not None and kwargs.get("warmup") is False and "grid" in kwargs:
            call = {k: v for k, v in kwargs.items() if k != "grid" and k != "warmup"} if len(kwargs) > 2 else {}
            kernel = direct(args, call, kwargs["grid"])
            if kernel is None:
                kernel = self.fn.run(*args, **kwargs, **config_kwargs)
                direct.keep(args, call, kernel)
            return kernel
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
        """The results store (``KernelTuning.store``), opened on first use."""
        return self.tuning.store

    @property
    def identity(self) -> KernelIdentity:
        return self.tuning.identity

    def _on_miss(self, key: tuple, args: tuple, kwargs: dict) -> tuple[Config, dict[str, Any], DirectLaunch | None]:
        if not settings.interpreting():
            active_driver()  # a CPU machine without the interpreter: say so before anything is stored
        pending = self.tuning.pending.get(key)
        if pending is not None and not (pending.done() and may_switch()):
            return pending.entry
        with self._lock:
            if key in self._tuned:
                return self._tuned[key]
            tuning_key = self._checked_key(key, args, kwargs)
            given = None if self.tuning.under_way(key) or tuning_key.triton_key in self._cached_here else \
                self.cache.get(tuning_key.triton_key)
            if given is not None:  # put there by a subclass or the caller: stock's run launches it untuned
                logger.debug("%s: launching the config found in its cache for %s: %s", self.kernel_name,
                             tuning_key.triton_key, given)
                given_kwargs = given.all_kwargs()
                self._tuned[key] = entry = (given, given_kwargs, DirectLaunch.for_function(self.fn, given_kwargs))
                return entry
            try:
                decision = self.tuning.decide(key, tuning_key, args, kwargs)
            except TuningError as error:
                if error.trials:
                    self.trials, self.run_id = list(error.trials), error.run_id
                raise
            self._took(decision, tuning_key, args, kwargs)
            if not decision.final:
                return decision.config, decision.config.all_kwargs(), None
            config_kwargs = decision.config.all_kwargs()
            self._tuned[key] = entry = (decision.config, config_kwargs, DirectLaunch.for_function(self.fn, config_kwargs))
            self.cache[tuning_key.triton_key] = decision.config  # stock Triton's attribute and key, for code reading it
            self._cached_here.add(tuning_key.triton_key)
            return entry

    def _took(self, decision: Decision, key: TuningKey, args: tuple, kwargs: dict) -> None:
        """Keep what a tuning reports, on Triton's attributes too (``bench_time``,
        ``configs_timings``), and reset ``reset_to_zero`` outputs before the final launch, as
        Triton does after tuning."""
        if decision.trials is None:
            return
        self.trials, self.run_id = list(decision.trials), decision.run_id
        report = decision.report
        if report is None:
            return
        winner = decision.config
        self.tuning_report = report
        self.bench_time = report.seconds
        self.configs_timings = {
            t.config: [t.timing.median_ms, t.timing.p20_ms, t.timing.p80_ms] if t.ok and t.timing is not None
            else [float("inf")] * 3
            for t in decision.trials
        }
        if decision.at_this_call:
            self.launch.pre_hook({**dict(zip(self.arg_names, args)), **kwargs, **winner.all_kwargs()},
                                 reset_only=True)
        if settings.print_autotuning():
            pin = "" if report.fallback else f"\nto launch it without tuning, at every key, pass {report.pin}"
            print(f"Triton autotuning for function {self.base_fn.__name__},\nwith key as {key.triton_key},\n"
                  f"finished after {report.seconds:.2f}s,\nbest config selected: {winner};{pin}")

    def wait_for_tuning(self, timeout: float | None = None) -> bool:
        """Wait until the background tunings started so far have ended (``background=True``);
        False if ``timeout`` seconds passed first. The next call of each key then switches."""
        _, not_done = futures.wait([pending.future for pending in list(self.tuning.pending.values())], timeout)
        return not not_done

    def tuning_key(self, args: tuple, kwargs: dict) -> TuningKey:
        """The key a call with these arguments is tuned and stored under (``kwargs`` as ``run``
        gets them: ``grid`` and Triton's launch options included). Raises on a call that cannot be
        tuned (a tuned parameter passed, arguments the kernel does not take)."""
        return self._checked_key(self._slow_key(args, kwargs), args, kwargs)

    def _checked_key(self, key: tuple, args: tuple, kwargs: dict) -> TuningKey:
        self.launch.check_call(args, kwargs, self.space.meta_params)
        named = {**dict(zip(self.arg_names, args)), **kwargs}
        return call_key(self.kernel_name, [k for k in self.keys if k in named], key)

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


def autotune(
    configs: Sequence[Config] | None = None, key: Sequence[str] = (), prune_configs_by: Mapping[str, Any] | None = None,
    reset_to_zero: Sequence[str] | None = None, restore_value: Sequence[str] | None = None,
    pre_hook: Callable | None = None, post_hook: Callable | None = None, warmup: float | None = None,
    rep: float | None = None, use_cuda_graph: bool = False, do_bench: Callable | None = None,
    cache_results: bool = False,
    *,
    space: Space | None = None, strategy: str | Strategy | None = None, budget: Budget | None = None,
    store: Any = True, seed: int | None = 0, finalists: int | None = None, compile_workers: int | None = None,
    compile_timeout: float | None = None, key_buckets: Mapping[str, Bucket | str] | str | None = None,
    default_config: Config | None = None, progress: bool | None = None, check: bool = True,
    check_outputs: Sequence[str] | None = None, reference: Callable[..., Any] | None = None,
    tolerance: float | Mapping[str, float] | None = None, writes_padding: bool = False,
    isolate: bool | None = None, run_timeout: float | None = None, ranks: str = "first",
    fallback: Callable[..., Mapping[str, Any] | Config] | None = None, background: bool = False,
) -> Callable[[Any], Autotuner]:
    """Decorator for tuning a ``@triton.jit`` function; ``triton.autotune``'s arguments (the
    positional ones, ``configs`` to ``cache_results``) keep their meaning.

    Args:
        space: a ``tunekit.Space`` to search, instead of or beside ``configs``.
        strategy: a registered strategy name or a ``Strategy`` instance; ``"exhaustive"`` when
            only ``configs`` is given, the project's default strategy otherwise.
        budget: a ``tunekit.Budget``; unlimited for exhaustive search.
        store: path or SQLAlchemy URL of the results store; ``True`` (default) is
            ``$TUNEKIT_STORE`` or a SQLite file in the user's cache directory; ``None`` keeps
            everything in memory, as stock Triton does.
        seed: makes strategies reproducible.
        finalists: how many of the best are re-timed in interleaved rounds before a winner is
            chosen (default 3 with a store, 1 without).
        compile_workers: processes compiling configs in parallel (default: the CPUs, at most 16).
        compile_timeout: seconds a config may take to compile (default: adaptive).
        key_buckets: ``"pow2"`` or ``{key argument: "pow2" or a function}``: key values that
            share a bucket share a tuning (decode-like shapes that change on every call).
        default_config: the config launched where none is tuned and nothing else applies.
        progress: a progress bar per tuning (default: on a terminal).
        check: compare each config's outputs with a reference (default True); a config that
            differs is a ``wrong`` trial and never wins.
        check_outputs: the argument names to compare (default: ``reset_to_zero``,
            ``restore_value`` and every tensor the reference wrote).
        reference: ``fn(**kernel_arguments)`` that writes the expected outputs into its
            arguments or returns ``{name: tensor}``; by default the first config that runs.
        tolerance: a float or ``{name: float}``; by default by dtype (see ``tunekit.check``).
        writes_padding: False (default): a config that changes any byte of a tensor argument's
            allocation outside the tensors, such as the rest of a buffer an output is a slice
            of, is ``wrong``; True for a kernel that writes padding.
        isolate: check and time in a worker process, so that a crash or hang costs only that
            config; by default on a GPU when the kernel is first tuned.
        run_timeout: seconds per config in that worker (default: adaptive).
        ranks: in a ``torch.distributed`` job, ``"first"`` (default): the first rank to reach a
            key decides it and the others launch its decision; ``"each"``: every rank tunes
            alone, as stock Triton does (see ``tunekit.ranks``).
        fallback: ``config_for(**key) -> dict``, as ``tunekit store heuristics`` writes: the
            config for a key with no winner where none is tuned now, before the nearest key's
            winner and ``default_config``.
        background: True: a key with no winner launches that fallback config at once and is
            tuned in a background thread; later calls switch to the winner, never inside a
            CUDA-graph capture or a ``torch.compile`` trace (see ``Autotuner.wait_for_tuning``).

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
            strategy=strategy, budget=budget, store=store, seed=seed, finalists=finalists,
            compile_workers=compile_workers, compile_timeout=compile_timeout, key_buckets=key_buckets,
            default_config=default_config, progress=progress, check=check, check_outputs=check_outputs,
            reference=reference, tolerance=tolerance, writes_padding=writes_padding, isolate=isolate,
            run_timeout=run_timeout, ranks=ranks, fallback=fallback, background=background,
        )

    return decorator
