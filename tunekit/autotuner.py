"""``tunekit.autotune``: a drop-in ``triton.autotune`` whose search is delegated to a Strategy.

The Autotuner subclasses Triton's, so code that recognises ``triton.runtime.autotuner.Autotuner``
(``torch.compile``'s Dynamo among it) recognises tunekit's, and Triton's arguments keep their
meaning: hooks, ``reset_to_zero``/``restore_value``, ``prune_configs_by``, ``do_bench``.
What differs is the miss path (``_tune``): candidates come from a Strategy, are compiled in
parallel, timed by the one benchmark routine, committed to the store one by one, and the few
best are re-timed interleaved before a winner is cached.
"""

from __future__ import annotations

import inspect
import json
import logging
import sys
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import triton
from triton.runtime.autotuner import Autotuner as _TritonAutotuner
from triton.runtime.autotuner import Heuristics

from . import settings
from .benchmark import Benchmarker, classify, describe
from .budget import Budget
from .check import OutputCheck
from .compiler import CompilePool, compile_job_for, kernel_address, unwrap_jit
from .config import Config, config_from_dict, config_json
from .isolation import IsolatedRunner, IsolationError
from .keys import Bucket, key_json, nearest_key, resolve_buckets
from .runner import LocalRunner
from .search import Clock, run_search
from .space import Space
from .store import KernelIdentity, ResultsStore, new_run_id, open_store
from .strategy import SearchContext, Strategy, derive_seed, make_strategy
from .trial import Status, Timing, Trial

logger = logging.getLogger(__name__)

#: Used when the user gives a Space but neither a strategy nor a budget.
DEFAULT_SEARCH_BUDGET = Budget(evals=64)


class TuningError(RuntimeError):
    """Every config failed: the message names the kernel, the key and the failure counts."""


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
        isolate: bool | None = None,
        run_timeout: float | None = None,
    ) -> None:
        name = getattr(unwrap_jit(fn), "__name__", None) or getattr(fn, "__name__", "kernel")
        arg_names = list(arg_names)
        for param, names in (("key", key), ("reset_to_zero", reset_to_zero), ("restore_value", restore_value),
                             ("check_outputs", check_outputs)):
            if isinstance(names, str):
                raise ValueError(f"{param} must be a list of argument names, not the string {names!r}.")
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
        for option, seconds in (("compile_timeout", compile_timeout), ("run_timeout", run_timeout)):
            if seconds is not None and not (isinstance(seconds, (int, float)) and seconds > 0):
                raise ValueError(f"{option} must be a number of seconds > 0 or None. Got {seconds!r} instead.")
        if budget is not None and not isinstance(budget, Budget):
            raise TypeError(f"budget must be a tunekit.Budget. Got {budget!r} instead.")
        self.space = self._build_space(configs, space)
        self.space.check_kernel(arg_names, name)
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
        self.strategy = make_strategy(strategy)
        if budget is None and self.strategy.name != "exhaustive":
            budget = DEFAULT_SEARCH_BUDGET
        self.budget = budget or Budget()
        # cache_results asks stock Triton to persist timings; tunekit's store does that
        if (store is None or store is False) and cache_results:
            store = True
        self._store_arg = store
        self._store: ResultsStore | None = None
        self.seed = seed
        self.finalists = finalists if finalists is not None else (
            1 if store is None or store is False else settings.DEFAULTS.finalists
        )
        self.compile_workers = compile_workers
        self.compile_timeout = compile_timeout
        self.key_buckets = resolve_buckets(key, key_buckets)
        self.default_config = default_config
        self.progress = progress
        self.check = check
        self.check_outputs = list(check_outputs) if check_outputs is not None else None
        self.reference = reference
        self.tolerance = tolerance
        self.isolate = isolate
        self.run_timeout = run_timeout
        self.benchmarker = Benchmarker(do_bench=do_bench, warmup=warmup, rep=rep, use_cuda_graph=use_cuda_graph)
        self.kernel_name = name
        self._key_positions = [arg_names.index(k) for k in key]
        self._last_key_position = max(self._key_positions, default=-1)
        self._tuned: dict[tuple, tuple[Config, dict[str, Any]]] = {}
        self._lock = threading.RLock()
        self._identity: KernelIdentity | None = None
        self._pool: CompilePool | None = None
        self._compile_seconds_seen: list[float] = []  # successful compiles: the adaptive timeout's base
        self._bench_seconds_seen: list[float] = []  # successful checks and benchmarks: the run timeout's base
        self._runner: Any = None
        self._clock: Clock | None = None
        self.trials: list[Trial] = []
        self.run_id: str | None = None
        #: Benchmark worker processes the last tuning started (0: it ran in this process), and
        #: the seconds it waited for them to start and spent messaging them.
        self.benchmark_workers_started = 0
        self.isolation_seconds = {"starting": 0.0, "messaging": 0.0}
        settings.configure_logging()

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
        if space is not None and not isinstance(space, Space):
            raise TypeError(f"space must be a tunekit.Space. Got {space!r} instead.")
        if configs and space is not None:
            listed = list(configs)
            ids = {config_json(c) for c in listed}
            return Space.from_configs(listed + [c for c in space.configs() if config_json(c) not in ids])
        if space is not None:
            return space
        return Space.from_configs(list(configs) if configs else [Config({}, num_warps=4, num_stages=3, num_ctas=1)])

    # -- the hot path --------------------------------------------------------------------------

    def run(self, *args: Any, **kwargs: Any) -> Any:
        if len(kwargs) == 2 and len(args) > self._last_key_position:  # a kernel[grid](*args) launch
            values = tuple([args[i] for i in self._key_positions])
            if self.key_buckets:
                values = self._bucketed(values)
            key = values + tuple([a.dtype for a in args if hasattr(a, "dtype")])
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
        if self._store is None:
            self._store = open_store(self._store_arg)
        return self._store

    @property
    def identity(self) -> KernelIdentity:
        if self._identity is None:
            self._identity = _identify(self.fn, self.base_fn, self.benchmarker.method)
        return self._identity

    def _on_miss(self, key: tuple, args: tuple, kwargs: dict) -> tuple[Config, dict[str, Any]]:
        with self._lock:
            if key in self._tuned:
                return self._tuned[key]
            conflicts = kwargs.keys() & set(self.space.meta_params)
            if conflicts:
                raise ValueError(
                    f"{self.kernel_name} was called with {', '.join(sorted(conflicts))}, which the autotuner tunes. "
                    "Make sure that you don't re-define auto-tuned symbols."
                )
            present = [k for k in self.keys if k in {**dict(zip(self.arg_names, args)), **kwargs}]
            text = key_json(present, key)
            if len(self.space) == 1:
                config = self.space.configs()[0]
            else:
                config = self._stored_or_tuned(text, key, args, kwargs)
            entry = (config, config.all_kwargs())
            self._tuned[key] = entry
            stock_key = key[: len(present)] + tuple(str(dtype) for dtype in key[len(present) :])
            self.cache[stock_key] = config  # stock Triton's attribute and key, for code that reads it
            return entry

    def _stored_or_tuned(self, text: str, key: tuple, args: tuple, kwargs: dict) -> Config:
        winners = self.store.winners(self.identity)
        stored = winners.get(text)
        if stored is not None and stored[2] == self.space_hash:
            config = self.space.canonical(json.loads(stored[0]))
            if config is not None:
                logger.info("%s %s: stored winner %s", self.kernel_name, text, config)
                return config
        reason = None
        if settings.mode() == "offline":
            reason = f"{settings.ENV_MODE}=offline"
        elif _capturing_cuda_graph():
            reason = "a CUDA graph is being captured"
        if reason is None:
            return self._tune(text, key, args, kwargs)
        return self._fallback(text, winners, reason)

    def _fallback(self, text: str, winners: Mapping[str, tuple], reason: str) -> Config:
        exact = winners.get(text)
        near = None if exact else nearest_key(text, list(winners))
        if exact or near:
            params = json.loads((exact or winners[near])[0])
            config = self.space.canonical(params) or config_from_dict(params)
            what = "the stored winner" if exact else f"the winner of the nearest tuned key {near}"
        else:
            config = self.default_config or self.space.configs()[0]
            what = "the default config"
        warnings.warn(
            f"tunekit did not tune {self.kernel_name} for key {text} because {reason}; using {what}: {config}",
            RuntimeWarning,
            stacklevel=4,
        )
        return config

    def _tune(self, text: str, key: tuple, args: tuple, kwargs: dict) -> Config:
        """One tuning: the shared search loop with live compile-and-time evaluation."""
        run_id = new_run_id()
        self.run_id = run_id
        clock = self._clock = Clock()
        store, identity = self.store, self.identity
        self.nargs = dict(zip(self.arg_names, args))
        space = self.space
        if self.early_config_prune or self.perf_model:
            space = Space.from_configs(self.prune_configs(kwargs))
        if len(space) == 1:
            self.nargs = None
            return space.configs()[0]
        history = store.history(identity)
        self._compile_seconds_seen = [t.compile_seconds for t in history if t.ok and t.compile_seconds]
        self._bench_seconds_seen = [t.extra["bench_seconds"] for t in history if t.ok and t.extra.get("bench_seconds")]
        known = {t.config_id: t for t in history if t.extra.get("key_json") == text}
        strategy = self.strategy.clone()
        context = SearchContext(space, self.budget, json.loads(text), derive_seed(self.seed, text), tuple(history))
        strategy_name = strategy.name or type(strategy).__name__
        store.start_run(identity, text, strategy=strategy_name, budget=self.budget, run_id=run_id)
        bar = self._progress_bar(space)

        def on_trial(trial: Trial) -> None:
            store.record(identity, text, trial, strategy=strategy_name, run_id=run_id)
            logger.info("%s %s: %s", self.kernel_name, text, trial)
            if bar is not None:
                bar.update(1)

        def evaluate(configs: list[Config], clock: Clock):
            return self._evaluate(configs, key, args, kwargs, clock)

        self._runner = self._make_runner(args, kwargs, history)
        result, winner = None, None
        try:
            try:
                result = run_search(strategy, context, evaluate, known=known, clock=clock,
                                    batch=self._batch_size(strategy), on_trial=on_trial)
            finally:
                if bar is not None:
                    bar.close()
            trials = result.trials
            self.trials = trials
            self._clock = None  # re-timing the finalists is not cut short by the budget's end
            winner = self._choose(trials, key, store, identity, text, run_id)
        finally:  # close the run in the store even when every config failed; give back the inputs
            store.finish_run(identity, text, run_id=run_id, winner=winner,
                             evaluations=result.evaluations if result else 0, tuning_seconds=clock.seconds(),
                             space_hash=self.space_hash)
            self._runner.finish()
            self._runner.close()
            self.benchmark_workers_started = self._runner.workers_started
            self.isolation_seconds = {"starting": self._runner.seconds_starting,
                                      "messaging": self._runner.seconds_messaging}
            self._runner = None
        elapsed = clock.seconds()
        self.bench_time = elapsed
        self.configs_timings = {
            t.config: [t.timing.median_ms, t.timing.p20_ms, t.timing.p80_ms] if t.ok else [float("inf")] * 3
            for t in trials
        }
        self.pre_hook({**self.nargs, **kwargs, **winner.config.all_kwargs()}, reset_only=True)
        self.nargs = None
        if settings.print_autotuning():
            print(f"Triton autotuning for function {self.base_fn.__name__},\nwith key as {key},\n"
                  f"finished after {elapsed:.2f}s,\nbest config selected: {winner.config};")
        return winner.config

    def _choose(self, trials, key, store, identity, text, run_id) -> Trial:
        ok = sorted((t for t in trials if t.ok), key=lambda t: t.time_ms)
        if not ok:
            counts: dict[str, int] = {}
            for t in trials:
                counts[t.status.value] = counts.get(t.status.value, 0) + 1
            first = next((t.error for t in trials if t.error), "")
            raise TuningError(
                f"Every config of {self.kernel_name} failed for key {text} "
                f"({', '.join(f'{n} {s}' for s, n in sorted(counts.items()))}); first error: {first}"
            )
        finalists = ok[: self.finalists]
        if len(finalists) < 2:
            return finalists[0]
        rounds: dict[str, list[float]] = {t.config_id: [] for t in finalists}
        for _ in range(settings.DEFAULTS.finalist_rounds):
            for t in finalists:  # interleaved: every finalist once per round
                retimed = self._runner.measure(t.config, key, check=False)
                if retimed.ok:
                    rounds[t.config_id].append(retimed.time_ms)
        best, best_ms = finalists[0], float("inf")
        for t in finalists:
            times = sorted(rounds[t.config_id])
            if not times:
                continue
            median = times[len(times) // 2]
            timing = Timing(median, times[0], times[-1])
            store.record(identity, text, Trial(t.config, Status.OK, timing, key=key, source="retimed"),
                         strategy="finalists", run_id=run_id)
            if median < best_ms:
                best, best_ms = Trial(t.config, Status.OK, timing, t.compile_seconds, key=key, source="retimed"), median
        return best

    def output_check(self) -> OutputCheck:
        """A new OutputCheck with this kernel's check options (one per tuning)."""
        return OutputCheck(self.check_outputs, self.reference, self.tolerance,
                           declared=[*self.reset_to_zero, *self.restore_value], zeroed=self.reset_to_zero)

    def _isolated(self, history: Sequence[Trial]) -> bool:
        """``isolate`` if given; else on a GPU when the kernel is first tuned (nothing of it in the
        store) or when one of its configs ever crashed or hung, and the kernel is importable."""
        if self.isolate is not None:
            return self.isolate
        if settings.interpreting() or kernel_address(self.fn) is None:
            return False
        return not history or any(t.status in (Status.RUNTIME_ERROR, Status.TIMEOUT) for t in history)

    def _make_runner(self, args: tuple, kwargs: dict, history: Sequence[Trial]) -> LocalRunner | IsolatedRunner:
        if self._isolated(history):
            logger.info("%s: checking and timing configs in a benchmark worker process", self.kernel_name)
            try:
                return IsolatedRunner(self, args, kwargs, check=self.check, timeout=self._run_timeout)
            except IsolationError as error:
                if self.isolate:
                    raise
                logger.warning("%s: tuning in this process, not isolated: %s", self.kernel_name, error)
        return LocalRunner(self, args, kwargs, self.output_check() if self.check else None)

    def _run_timeout(self) -> float:
        """Seconds the config about to run in a benchmark worker may take: ``run_timeout`` or the
        adaptive one, but never past the end of a seconds budget (then at least one second)."""
        limit = self.run_timeout if self.run_timeout is not None else self._adaptive_run_timeout()
        if self.budget.seconds is not None and self._clock is not None:
            limit = min(limit, max(1.0, self.budget.seconds - self._clock.seconds()))
        return limit

    def _adaptive_run_timeout(self) -> float:
        """With no ``run_timeout`` given: generous until a few configs ran, then a multiple of
        their median check-and-benchmark seconds, not under a floor."""
        defaults = settings.DEFAULTS
        return _multiple_of_median(self._bench_seconds_seen, defaults.run_timeout_after, defaults.run_timeout_initial,
                                   defaults.run_timeout_factor, defaults.run_timeout_floor)

    def _workers(self) -> int:
        return self.compile_workers if self.compile_workers is not None else settings.compile_workers()

    def _batch_size(self, strategy: Strategy) -> int:
        """Configs asked for at a time: one under the interpreter (nothing to compile), else
        enough to keep every compile worker busy while the slowest compile of the batch runs;
        more for a strategy that learns nothing from the answers."""
        if settings.interpreting():
            return 1
        return (2 if strategy.adaptive else 16) * self._workers()

    def _progress_bar(self, space: Space):
        show = self.progress if self.progress is not None else sys.stderr.isatty()
        if not show:
            return None
        from tqdm.auto import tqdm

        total = min(len(space), self.budget.evals) if self.budget.evals else len(space)
        return tqdm(total=total, desc=f"tuning {self.kernel_name}", unit="config", leave=False)

    def _kernel_call(self, config: Config, args: tuple, kwargs: dict) -> Callable[[], None]:
        current = dict(kwargs, **config.all_kwargs())
        full_nargs = {**dict(zip(self.arg_names, args)), **current}

        def kernel_call() -> None:
            if config.pre_hook:
                config.pre_hook(full_nargs)
            self.pre_hook(full_nargs)
            try:
                self.fn.run(*args, **current)
            except Exception as error:
                try:
                    self.post_hook(full_nargs, exception=error)
                finally:
                    raise
            self.post_hook(full_nargs, exception=None)

        return kernel_call

    def _evaluate(self, configs: list[Config], key: tuple, args: tuple, kwargs: dict, clock: Clock):
        """Compile ``configs`` in parallel (on a GPU) and time each one as soon as it is compiled,
        while the others compile. Yields (config, trial), trial None for configs the seconds
        budget left unmeasured."""
        compiled = self._compile(configs, args, kwargs, clock)
        unanswered = set(range(len(configs)))
        for index, (compile_status, compile_seconds, compile_error, shared) in compiled:
            config = configs[index]
            unanswered.discard(index)
            extra = {"shared_bytes": shared} if shared is not None else {}
            if compile_status is not Status.OK:
                yield config, Trial(config, compile_status, compile_seconds=compile_seconds, error=compile_error,
                                    key=key, extra=extra)
                continue
            if self.budget.seconds is not None and clock.seconds() >= self.budget.seconds:
                compiled.close()
                if self._pool is not None:
                    self._pool.close()  # drops the compiles still queued: nothing will time them
                for left in sorted(unanswered | {index}):
                    yield configs[left], None
                return
            trial = self._runner.measure(config, key)
            if trial.status is Status.TIMEOUT and self.budget.seconds is not None \
                    and clock.seconds() >= self.budget.seconds:
                yield config, None  # cut off by the budget's end, not failed: a later tuning tries it again
                continue
            if trial.ok and trial.extra.get("bench_seconds"):
                self._bench_seconds_seen.append(trial.extra["bench_seconds"])
            yield config, Trial(trial.config, trial.status, trial.timing, compile_seconds, trial.error, key,
                                extra={**trial.extra, **extra})
        for left in sorted(unanswered):  # the seconds budget's deadline stopped their compiles
            yield configs[left], None

    def _compile(self, configs: list[Config], args: tuple, kwargs: dict, clock: Clock):
        """Yields (index, (status, seconds, error, shared memory bytes)) per config as each is
        compiled; under the interpreter nothing is compiled."""
        if settings.interpreting():
            yield from ((i, (Status.OK, None, None, None)) for i in range(len(configs)))
            return
        from triton.runtime.driver import driver

        target = driver.active.get_current_target()
        jit = unwrap_jit(self.fn)
        calls = [self._jit_kwargs(args, dict(kwargs, **c.all_kwargs())) for c in configs]
        workers = self._workers()
        jobs = [compile_job_for(jit, target, args, call) for call in calls] if workers > 1 else [None] * len(calls)
        for i, call in enumerate(calls):
            if jobs[i] is None:  # in this process: a kernel a worker cannot import, or one worker
                begin = time.perf_counter()
                try:
                    kernel = jit.warmup(*args, grid=(1,), **call)
                    shared = getattr(getattr(kernel, "metadata", None), "shared", None)
                    yield i, (Status.OK, time.perf_counter() - begin, None, shared)
                except Exception as error:
                    yield i, (classify(error), time.perf_counter() - begin, describe(error), None)
        pooled = [i for i, job in enumerate(jobs) if job is not None]
        if not pooled:
            return
        deadline = None
        if self.budget.seconds is not None:
            deadline = time.time() + max(0.0, self.budget.seconds - clock.seconds())
        if self._pool is None:
            self._pool = CompilePool(workers)
        timeout = self.compile_timeout if self.compile_timeout is not None else self._adaptive_compile_timeout
        for position, result in self._pool.as_completed([jobs[i] for i in pooled], timeout, deadline):
            if result.status is Status.OK:
                self._compile_seconds_seen.append(result.seconds)
            yield pooled[position], (result.status, result.seconds, result.error, result.shared_bytes)

    def _adaptive_compile_timeout(self) -> float | None:
        """With no ``compile_timeout`` given: none until a few compiles of this kernel were seen
        (in the store, or in this tuning as they finish), then a multiple of their median, not
        under a floor. On the H200 GEMM space the median compile is 0.4 s and 1 % take two minutes."""
        defaults = settings.DEFAULTS
        return _multiple_of_median(self._compile_seconds_seen, defaults.compile_timeout_after, None,
                                   defaults.compile_timeout_factor, defaults.compile_timeout_floor)

    def _jit_kwargs(self, args: tuple, kwargs: dict) -> dict:
        """The keyword arguments the JITFunction will see: heuristics applied, launch-only ones dropped."""
        call = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
        fn = self.fn
        while fn is not unwrap_jit(fn):
            if isinstance(fn, Heuristics):
                for name, heuristic in fn.values.items():
                    call[name] = heuristic({**dict(zip(fn.arg_names, args)), **call})
            fn = fn.fn
        return call

class _WithConfigs:
    """A view of an Autotuner whose ``configs`` is a given list (for Triton's own pruning code)."""

    def __init__(self, autotuner: Autotuner, configs: list[Config]) -> None:
        self._autotuner = autotuner
        self.configs = configs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._autotuner, name)


def _multiple_of_median(seen: Sequence[float], after: int, before: float | None, factor: float,
                        floor: float) -> float | None:
    """An adaptive limit: ``before`` until ``after`` values were seen, then ``factor`` times
    their median, but never under ``floor``."""
    if len(seen) < after:
        return before
    return max(floor, factor * sorted(seen)[len(seen) // 2])


def _space_hash(space: Space) -> str:
    import hashlib

    return hashlib.sha256("\n".join(config_json(c) for c in space.configs()).encode()).hexdigest()[:32]


def _capturing_cuda_graph() -> bool:
    try:
        import torch

        return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
    except Exception:
        return False


def _identify(fn: Any, base_fn: Callable, timing_method: str) -> KernelIdentity:
    import hashlib

    jit = unwrap_jit(fn)
    source_hash = getattr(jit, "cache_key", None)
    if not isinstance(source_hash, str):  # the interpreter's function has no cache key
        source_hash = hashlib.sha256(inspect.getsource(base_fn).encode()).hexdigest()
    if settings.interpreting():
        return KernelIdentity(base_fn.__name__, source_hash, triton.__version__, "interpreter", timing_method)
    import torch
    from triton.runtime.cache import triton_key

    version = f"{triton.__version__}+{hashlib.sha256(triton_key().encode()).hexdigest()[:16]}"
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "unknown"
    return KernelIdentity(base_fn.__name__, source_hash, version, device, timing_method)


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

    Args:
        configs, key, prune_configs_by, reset_to_zero, restore_value, pre_hook, post_hook,
            warmup, rep, use_cuda_graph, do_bench, cache_results: as in ``triton.autotune``.
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
            see ``tunekit.check``), ``isolate`` (check and time in a worker process, so that a
            crash or hang costs only that config; by default on a GPU when the kernel is first
            tuned), ``run_timeout`` (seconds per config in that worker; adaptive by default).

    Example:
        >>> @tunekit.autotune(space=tunekit.Space(BLOCK=[256, 512, 1024], num_warps=[2, 4]),
        ...                   key=["n"], strategy="random", budget=tunekit.Budget(evals=4))
        ... @triton.jit
        ... def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr): ...
    """

    def decorator(fn: Any) -> Autotuner:
        return Autotuner(
            fn, fn.arg_names, configs, key, reset_to_zero, restore_value, pre_hook=pre_hook, post_hook=post_hook,
            prune_configs_by=prune_configs_by, warmup=warmup, rep=rep, use_cuda_graph=use_cuda_graph,
            do_bench=do_bench, cache_results=cache_results, space=space, strategy=strategy, budget=budget,
            store=store, seed=seed, **options,
        )

    return decorator
