"""One tuning: one kernel, one key, from the first proposal to the chosen winner.

The Autotuner (the Triton-facing decorator object) creates a ``TuningSession`` on a cache miss
and keeps nothing of it but the result. The session owns the run: run id, deadline, the
runner that checks and times configs (here or in a benchmark worker), the compile requests to
the process's worker service, adaptive timeouts, the progress bar, and the choice of the
winner by interleaved re-timing of the finalists, all within the budget.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import signal
import statistics
import sys
import threading
import time
import weakref
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, TypedDict

import torch

from . import settings
from .budget import Budget
from .caller import warn_at_caller
from .check import CheckCounts
from .compat import active_target, aten_replaced
from .compiler import CompileJob, CompilePool, CompileResult, compile_config, compile_job_for, unwrap_jit
from .config import Config, config_json, config_source, readable_repr
from .deadline import Clock, Deadline, Stopwatch
from .isolation import IsolatedRunner, IsolationError, kernel_address
from .keys import TuningKey
from .launch import Launch
from .runner import LocalRunner
from .search import Feed, Search, SearchResult, StopReason
from .service import service
from .space import Space
from .store import KernelIdentity, ResultsStore, new_run_id
from .strategy import SearchContext, Strategy, derive_seed
from .threads import check_stopped
from .trial import Source, Status, Timing, Trial

logger = logging.getLogger(__name__)

#: Configs a live tuning keeps in flight beyond those its compiles need to keep up with its timing
#: (``TuningSession._in_flight_wanted``): one to time as soon as the last is, one for a compile
#: that comes late.
COMPILED_AHEAD = 2
#: Compiles of its own and timed configs a live tuning sees before it paces its asks by their
#: times; until then it keeps its batch in flight.
PACE_AFTER = 3
#: The latest timed configs whose busy seconds the pace takes the median of.
PACE_WINDOW = 20
#: A live tuning says the configs in flight are late (``Feed.overdue``) once none of its compiles
#: has finished, and its search has queued nothing new, for this many times the mean seconds of
#: its own compiles (after ``PACE_AFTER`` of them), and at least
#: ``OVERDUE_FLOOR_SECONDS``: a strategy that waits for them may then go on without them, and
#: where they are the last the search will ask for, they are left out unmeasured. Of the
#: rules simulated (``experiments/straggler_simulation.py``: 3 and 1 s, 5 and 2 s, 10 and 5 s),
#: the one that reached each target soonest in the geometric mean over 17 recorded spaces; each
#: made a few tunings (0 to 5 of 170) more than 10 % slower to one of them.
OVERDUE_FACTOR = 3.0
OVERDUE_FLOOR_SECONDS = 1.0


class _LateLeftOut(Exception):
    """Raised through the compile pool's round when the search says its last configs, late, may be
    left out (``Feed.overdue``): the round stops their compiles."""


class TuningError(RuntimeError):
    """Every config failed: the message names the kernel, the key and the failure counts.
    ``trials`` and ``run_id``: the failed tuning's, where one ran."""

    trials: Sequence[Trial] = ()
    run_id: str | None = None


@dataclass(frozen=True)
class TuningOptions:
    """How a kernel is tuned: the Autotuner's tuning arguments, resolved once at decoration."""

    strategy: Strategy
    budget: Budget
    seed: int | None
    finalists: int
    compile_workers: int | None = None
    compile_timeout: float | None = None
    check: bool = True
    isolate: bool | None = None
    run_timeout: float | None = None
    progress: bool | None = None
    default_config: Config | None = None


@dataclass
class TuningReport:
    """What one tuning did and what it cost (``Autotuner.tuning_report``)."""

    run_id: str
    key: str
    winner: Config
    evaluations: int
    seconds: float
    stopped_because: StopReason | None
    #: Compile workers and benchmark workers started for this tuning, the seconds it waited for a
    #: benchmark worker to be ready (compiles go on in threads while compile workers start: no
    #: waiting there), and the seconds spent messaging the benchmark worker: what workers cost.
    compile_workers_started: int = 0
    benchmark_workers_started: int = 0
    seconds_waiting_for_workers: float = 0.0
    seconds_messaging: float = 0.0
    fallback: bool = False

    __repr__ = readable_repr

    @property
    def pin(self) -> str:
        """The ``configs=`` argument that launches the winner without tuning again: Python to paste."""
        return f"configs=[{config_source(self.winner)}]"


class _Costs(TypedDict):
    """What a tuning's workers cost: ``TuningReport``'s fields of the same names."""

    compile_workers_started: int
    benchmark_workers_started: int
    seconds_waiting_for_workers: float
    seconds_messaging: float


class TuningSession:
    """Tunes ``space`` for one key of one kernel; ``run()`` returns the winner.

    Args:
        launch: how the kernel is launched and checked.
        space: the configs to search (after Triton's pruning, if any).
        options: the kernel's tuning options.
        store, identity: the results store and the kernel's identity in it.
        key: the tuning key of this call.
        space_hash: identifies the Space a stored winner was chosen from.
        clock: what the budget's seconds are counted on (a ``Stopwatch`` for a tuning spread over calls).
        first: configs measured before the strategy's (the fallback launched while tuning).
    """

    def __init__(self, launch: Launch, space: Space, options: TuningOptions, store: ResultsStore,
                 identity: KernelIdentity, key: TuningKey, space_hash: str, *, clock: Clock | None = None,
                 first: Sequence[Config] = ()) -> None:
        self.launch = launch
        self.space = space
        self.options = options
        self.store = store
        self.identity = identity
        self.key = key
        self.space_hash = space_hash
        self.run_id = new_run_id()
        self.clock = clock if clock is not None else Clock()
        self.first = tuple(first)
        self.deadline = Deadline(self.clock, options.budget.seconds)
        #: The search's deadline (earlier, leaving time for the finalists), then the budget's.
        self._active_deadline = self.deadline
        self.trials: list[Trial] = []
        self._compile_seconds_seen: list[float] = []  # successful compiles: the adaptive timeout's base
        self._compile_seconds_here: list[float] = []  # this tuning's compiles, failed ones too: the pace's base
        self._bench_seconds_seen: list[float] = []  # successful checks and benchmarks: the run timeout's base
        self._runner: LocalRunner | IsolatedRunner | None = None
        self._compile_workers_started = 0
        self._busy_seconds: list[float] = []  # per timed config: its check and benchmark, the search's tell and ask
        #: Failures at run time (errors, wrong outputs) not stored yet: while no config has run
        #: correctly they may be the call's (a wrong argument, an output too short), and stored
        #: failures would be reused by the corrected call. Stored as soon as a config runs correctly
        #: (then None). Failures to compile or fit (compile errors, out of resources) are the
        #: config's own whatever the call: stored at once, and they release nothing.
        self._held: list[Trial] | None = []
        #: What a budget that ends before any measurement falls back to: the first config that
        #: compiled and was never launched (one cut off mid-run may hang or crash again).
        self._compiled_not_launched: Config | None = None
        self._proven: set[str] = set()
        self._crashed: dict[str, Trial] = {}
        self._search: Search | None = None  # once the first step began
        self._history: list[Trial] = []
        self._strategy_name = ""
        self._bar: Any = None
        self._check_counts = CheckCounts()  # over this tuning's calls (Budget(per_call=...)), in this process
        self._costs: _Costs = {"compile_workers_started": 0, "benchmark_workers_started": 0,
                               "seconds_waiting_for_workers": 0.0, "seconds_messaging": 0.0}

    # -- the run ------------------------------------------------------------------------------

    def run(self, args: tuple, kwargs: dict) -> tuple[Config, TuningReport]:
        """Search, choose the winner, record everything; the winner and what it cost."""
        outcome = self.step(args, kwargs)
        assert outcome is not None  # a step without a limit ends the search
        return outcome

    def step(self, args: tuple, kwargs: dict, evaluations: int | None = None) -> tuple[Config, TuningReport] | None:
        """Measure up to ``evaluations`` more configs (None: until the search ends) on this call's
        inputs; once the search has ended, choose the winner on them too and return it with what
        the tuning cost. None while the search goes on (``Budget(per_call=k)``): ``best_so_far()``
        is the config to launch meanwhile."""
        if self._search is None:
            self._begin()
        if isinstance(self.clock, Stopwatch):
            self.clock.start()
        runner, winner, ended = None, None, False

        def evaluate(feed: Feed, deadline: Deadline) -> Iterator[tuple[Config, Trial | None]]:
            return self._evaluate(feed, args, kwargs, deadline)

        try:
            runner = self._runner = self._make_runner(args, kwargs, self._history)
            if self._search is None:
                self._search = self._new_search(isinstance(runner, IsolatedRunner))
            elif self.options.check and self.launch.reference is None and (best := self.best_so_far()) is not None:
                # this call's inputs are new: the best config so far, proven correct, is launched first and
                # its outputs are the reference the configs of this call are judged by
                runner.measure(best, self.key, short=True)
            search = self._search
            try:
                self._active_deadline = search.deadline
                ended = search.advance(evaluate, evaluations)
            finally:
                self._active_deadline = self.deadline
                self.trials = search.result.trials
                if ended and self._bar is not None:
                    self._bar.close()
            if ended:
                winner = self._choose(search.result)
        except BaseException:
            ended = True  # the run is closed in the store, and this session is over
            raise
        finally:  # give back the inputs; close the run in the store even when every config failed
            if runner is not None:
                runner = self._runner  # a benchmark worker's runner may have given way to one in this process
                assert runner is not None  # set with runner above, never unset
                runner.finish()
                runner.close()
                self._add_costs(runner)
            self._costs["compile_workers_started"] = self._compile_workers_started
            if isinstance(self.clock, Stopwatch):
                self.clock.stop()
            if ended:
                self.store.finish_run(self.identity, self.key.json, run_id=self.run_id, winner=winner,
                                      evaluations=self._search.result.evaluations if self._search else 0,
                                      tuning_seconds=self.clock.seconds(), space_hash=self.space_hash,
                                      costs=self._costs)
        if not ended:
            return None
        result = self._search.result
        config = winner.config if winner is not None else self._fallback_config()
        report = TuningReport(self.run_id, self.key.json, config, result.evaluations, self.clock.seconds(),
                              result.stopped_because, fallback=winner is None, **self._costs)
        logger.info("%s %s: %d evaluations in %.2f s (%s); workers started: %d compile, %d benchmark, "
                    "%.2f s waiting for them", self.launch.kernel_name, self.key.json, report.evaluations,
                    report.seconds, report.stopped_because, report.compile_workers_started,
                    report.benchmark_workers_started, report.seconds_waiting_for_workers)
        if not report.fallback:
            logger.info("%s %s: to launch this winner without tuning, at every key, pass %s", self.launch.kernel_name,
                        self.key.json, report.pin)
        return config, report

    def _add_costs(self, runner: LocalRunner | IsolatedRunner) -> None:
        """What a runner's workers cost, added to this tuning's."""
        self._costs["benchmark_workers_started"] += runner.workers_started
        self._costs["seconds_waiting_for_workers"] += runner.seconds_starting
        self._costs["seconds_messaging"] += runner.seconds_messaging

    def best_so_far(self) -> Config | None:
        """The fastest config measured correct so far in this tuning (store answers included)."""
        ok = [t for t in self.trials if t.ok]
        return min(ok, key=lambda t: t.time_ms).config if ok else None

    def _begin(self) -> None:
        """What a tuning needs before its first measurement: the store's crashes and history, the run."""
        store, identity, text = self.store, self.identity, self.key.json
        for trial in store.record_crashes(identity):
            logger.warning("%s: config %s was in flight when a tuning process died (%s); recorded as crashed: it is "
                           "never launched in this process again, only in a benchmark worker where one can import "
                           "the kernel", self.launch.kernel_name, trial.config, trial.error)
        history = self._history = store.history(identity)
        #: Configs that ran correctly at this key: launching them in-process needs no in-flight mark (a
        #: config that ran at another shape may still store far out of bounds at this one).
        self._proven = {t.config_id for t in history if t.ok and t.key is not None and t.key.json == text}
        #: Configs that killed a tuning process, at any key, and never ran correctly there since: their
        #: crash. In this process they are never launched, at this key or another (a crash happens once).
        unresolved = _unresolved_crashes(history)
        self._crashed = {t.config_id: t for t in history
                         if t.crashed and (t.config_id, t.key.json if t.key is not None else "") in unresolved}
        self._compile_seconds_seen = [t.compile_seconds for t in history if t.ok and t.compile_seconds]
        self._bench_seconds_seen = [t.bench_seconds for t in history if t.ok and t.bench_seconds]
        self._strategy_name = self.options.strategy.name or type(self.options.strategy).__name__
        store.start_run(identity, text, strategy=self._strategy_name, budget=self.options.budget, run_id=self.run_id)
        self._bar = self._progress_bar()

    def _new_search(self, isolated: bool) -> Search:
        """The search, told what the store holds at this key. A crash is measured again in a
        benchmark worker (the process may have been killed from outside: nothing tells the two
        apart); one that really crashes then kills only a worker, and that is stored. In this
        process it is never launched again."""
        text = self.key.json
        strategy = self.options.strategy.clone()
        context = SearchContext(self.space, self.options.budget, self.key, derive_seed(self.options.seed, text),
                                tuple(self._history))
        known = {t.config_id: t for t in self._history
                 if t.key is not None and t.key.json == text and not (t.crashed and isolated)}

        def record(trial: Trial) -> None:
            self.store.record(self.identity, text, trial, strategy=self._strategy_name, run_id=self.run_id)

        def on_trial(trial: Trial) -> None:
            logger.info("%s %s: %s", self.launch.kernel_name, text, trial)
            if self._bar is not None:
                self._bar.update(1)
            if trial.source is Source.STORE:  # a stored crash, answered without a launch: the store has it
                return
            if self._held is not None:  # no config has run correctly yet
                if trial.status in (Status.RUNTIME_ERROR, Status.WRONG):
                    self._held.append(trial)
                    return
                if trial.ok:
                    held, self._held = self._held, None
                    for earlier in held:
                        record(earlier)
            record(trial)

        return Search(strategy, context, known=known, deadline=self.deadline.earlier(self._finalists_reserve()),
                      batch=self._batch_size(strategy), on_trial=on_trial, first=self.first)

    def _fallback_config(self) -> Config:
        """The budget ended before any config was measured: ``default_config``, else the first
        config that compiled and was never launched; with a warning. With neither, and configs
        that failed or were cut off mid-run, a ``TuningError``: none of those is safe to launch."""
        config = self.options.default_config or self._compiled_not_launched
        failed = [t for t in self.trials if not t.ok]
        what = f"after {len(failed)} failed" if failed else "before any config was measured"
        if config is None:
            raise TuningError(f"tunekit's budget for {self.launch.kernel_name} at key {self.key.json} ended {what} "
                              "and no config is known to be safe to launch; give a larger budget or default_config")
        warn_at_caller(f"tunekit's budget for {self.launch.kernel_name} at key {self.key.json} ended {what}; "
                       f"using {config}", RuntimeWarning)
        return config

    # -- the winner ------------------------------------------------------------------------------

    def _choose(self, result: SearchResult) -> Trial | None:
        """The fastest correct trial, after the best few are re-timed interleaved (as long as the
        budget allows). None when the budget ended before anything was measured."""
        trials = result.trials
        ok = sorted((t for t in trials if t.ok), key=lambda t: t.time_ms)
        if not ok:
            budget = self.options.budget
            if result.stopped_because is StopReason.BUDGET and (budget.evals is None or result.evaluations < budget.evals):
                return None  # not every config failed: the seconds ran out before one was measured
            counts: dict[str, int] = {}
            for t in trials:
                counts[t.status.value] = counts.get(t.status.value, 0) + 1
            first = next((t.error for t in trials if t.error), "")
            held_trials = self._held or []
            held = len(held_trials)
            same = held == len(trials) and all(_same_failure(t, held_trials[0]) for t in held_trials)
            raise TuningError(
                f"Every config of {self.launch.kernel_name} failed for key {self.key.json} "
                f"({', '.join(f'{n} {s}' for s, n in sorted(counts.items())) or 'none measured'})"
                + ((", all with the same error" if same else f"; {held} of them at run time") +
                   ", so the call may be at fault: none of these run-time failures was stored, and the next call "
                   "tries those configs again" if held else "") + f"; first error: {first}"
            )
        finalists = ok[: self.options.finalists]
        if len(finalists) < 2:
            return finalists[0]
        assert self._runner is not None  # the step that ended the search made it
        # a finalist timed in this tuning with the short timing has its first round already
        rounds: dict[str, list[float]] = {t.config_id: [] for t in finalists}
        if self._short_screening() and all(t.source is Source.MEASURED for t in finalists):
            rounds = {t.config_id: [t.time_ms] for t in finalists}
        for _ in range(settings.DEFAULTS.finalist_rounds - len(rounds[finalists[0].config_id])):
            for t in finalists:  # interleaved: every finalist once per round
                check_stopped()
                if self.deadline.expired():
                    break
                retimed = self._runner.measure(t.config, self.key, check=False, short=True)
                if retimed.ok:
                    rounds[t.config_id].append(retimed.time_ms)
        if any(len(times) < len(rounds[finalists[0].config_id]) for times in rounds.values()):
            return finalists[0]  # the deadline cut a round short: the finalists were not timed alike
        best, best_ms = finalists[0], float("inf")
        for t in finalists:
            times = sorted(rounds[t.config_id])
            if not times:
                continue
            median = times[len(times) // 2]
            timing = Timing(median, times[0], times[-1])
            self.store.record(self.identity, self.key.json, Trial(t.config, Status.OK, timing, key=t.key,
                                                                  source=Source.RETIMED),
                              strategy="finalists", run_id=self.run_id)
            if median < best_ms:
                best, best_ms = Trial(t.config, Status.OK, timing, t.compile_seconds, key=t.key,
                                      source=Source.RETIMED), median
        return best

    def _short_screening(self) -> bool:
        """Whether configs are first timed with the short timing: when the best few are re-timed
        anyway (the first call of a 2-config kernel then costs no more timing than stock's)."""
        return self.options.finalists >= 2

    def _finalists_reserve(self) -> float:
        """Seconds the search leaves at the end of a seconds budget for re-timing the finalists:
        what their re-timing costs by the kernel's median benchmark, at most a tenth of the budget."""
        if self.deadline.seconds is None or self.options.finalists < 2:
            return 0.0
        seen = sorted(self._bench_seconds_seen)
        median = seen[len(seen) // 2] if seen else 0.2
        retimings = self.options.finalists * settings.DEFAULTS.finalist_rounds
        return min(0.1 * self.deadline.seconds, retimings * median)

    # -- checking and timing ------------------------------------------------------------------

    def _isolated(self, history: Sequence[Trial]) -> bool:
        """``isolate`` if given. Otherwise in this process, as stock tunes (a benchmark worker needs
        a device of its own, so it starts a fresh interpreter once CUDA is up: seconds), unless a
        config of this kernel killed a tuning process and was not measured since: then in a
        benchmark worker, if one can import the kernel (else those configs are not launched)."""
        if self.options.isolate is not None:
            return self.options.isolate
        return kernel_address(self.launch.fn) is not None and bool(_unresolved_crashes(history))

    def _make_runner(self, args: tuple, kwargs: dict, history: Sequence[Trial]) -> LocalRunner | IsolatedRunner:
        if self._isolated(history):
            logger.info("%s: checking and timing configs in a benchmark worker process", self.launch.kernel_name)
            try:
                hooks = {id(c.pre_hook): c.pre_hook for c in self.space.configs() if c.pre_hook is not None}
                return IsolatedRunner(self.launch, args, kwargs, check=self.options.check, timeout=self._run_timeout,
                                      time_left=lambda: self._active_deadline.remaining(),
                                      config_hooks=list(hooks.values()))
            except IsolationError as error:
                self._not_isolated(error)
        return self._local_runner(args, kwargs)

    def _local_runner(self, args: tuple, kwargs: dict) -> LocalRunner:
        # a tuning spread over calls keeps its copies: the calls between its steps launch a config
        # without the reset of reset_to_zero outputs that follows a tuning on the call's tensors
        replaced = [] if self.options.budget.per_call else _aten_replaced_for(args, kwargs)
        if replaced and tuple(replaced) not in _told_aten_replaced:
            _told_aten_replaced.add(tuple(replaced))
            logger.info("PyTorch's kernels of %s are replaced from Python here (torch.library, as FlagGems does): "
                        "configs are timed on the call's own tensors without output checks or guard bands, as "
                        "Triton's autotuner times them, since tunekit's own operations would compile and run "
                        "those kernels", ", ".join(replaced))
        check = self.launch.output_check(self._check_counts) if self.options.check and not replaced else None
        return LocalRunner(self.launch, args, kwargs, check, time_left=lambda: self._active_deadline.remaining(),
                           copy=not replaced)

    def _not_isolated(self, error: IsolationError) -> None:
        """A benchmark worker cannot check and time this kernel: an error if the user asked for one
        (``isolate=True``), else the tuning goes on in this process, said once per kernel."""
        if self.options.isolate:
            raise error
        if self.launch.fn not in _told_not_isolated:
            _told_not_isolated.add(self.launch.fn)
            logger.warning("%s: tuning in this process, not in a benchmark worker: %s", self.launch.kernel_name, error)

    def _run_timeout(self) -> float | None:
        """Seconds the config about to run in a benchmark worker may take: ``run_timeout`` or the
        adaptive one, but never past the budget's end (then at least one second)."""
        limit = self.options.run_timeout if self.options.run_timeout is not None else _multiple_of_median(
            self._bench_seconds_seen, settings.DEFAULTS.run_timeout_after, settings.DEFAULTS.run_timeout_initial,
            settings.DEFAULTS.run_timeout_factor, settings.DEFAULTS.run_timeout_floor)
        return self._active_deadline.cap(limit, floor=1.0)

    def _evaluate(self, feed: Feed, args: tuple, kwargs: dict,
                  deadline: Deadline) -> Iterator[tuple[Config, Trial | None]]:
        """Compile the configs of ``feed`` in parallel (on a GPU) and time each one as soon as it is
        compiled, while the others compile; those the search asks for meanwhile join the compiles.
        Yields (config, trial), trial None for configs the deadline left unmeasured."""
        assert self._runner is not None
        configs: list[Config] = []  # taken from the feed so far, by compile index
        feed.pace = self._in_flight_wanted
        compiled = self.compile(configs, feed.take, args, kwargs, deadline, overdue=feed.overdue,
                                leave_late_out=feed.leave_out_late)
        try:
            answered: set[int] = set()
            key = self.key
            for index, result in compiled:
                taken = time.perf_counter()
                check_stopped()  # a background tuning stopped (the process exits) ends here, between evaluations
                config = configs[index]
                answered.add(index)
                logger.debug("%s: compiled %s: %s in %.3f s", self.launch.kernel_name, config, result.status.value,
                             result.seconds)
                if result.output:
                    logger.debug("%s: compiling %s printed: %s", self.launch.kernel_name, config, result.output)
                if result.status is not Status.OK:
                    yield config, Trial(config, result.status, compile_seconds=result.seconds, error=result.error,
                                        key=key, shared_bytes=result.shared_bytes)
                    continue
                if deadline.expired():
                    self._compiled_not_launched = self._compiled_not_launched or config
                    compiled.close()  # drops the compiles still queued: nothing will time them
                    answered.discard(index)
                    break
                trial = self._measure(config)
                if trial.status is Status.TIMEOUT and deadline.expired():
                    yield config, None  # cut off by the deadline, not failed: a later tuning tries it again
                    continue
                if trial.ok and trial.bench_seconds:
                    self._bench_seconds_seen.append(trial.bench_seconds)
                yield config, replace(trial, compile_seconds=result.seconds, shared_bytes=result.shared_bytes)
                self._busy_seconds.append(time.perf_counter() - taken)  # the search told and asked meanwhile
            for left in range(len(configs)):  # the deadline stopped their compiles, or they were late and the last
                if left not in answered:
                    yield configs[left], None
        finally:  # a stop or an error: the compiles in flight are abandoned and the pool returned now
            compiled.close()

    def _measure(self, config: Config) -> Trial:
        """Check and time ``config``. In this process, a config that never ran correctly is marked
        in flight in the store meanwhile: if it kills the process, the next tuning knows."""
        assert self._runner is not None
        config_id = config_json(config)
        if isinstance(self._runner, IsolatedRunner):
            try:
                return self._runner.measure(config, self.key, short=self._short_screening())
            except IsolationError as error:  # the worker could not be set up: on in this process
                self._not_isolated(error)
                isolated = self._runner
                self._runner = self._local_runner(isolated.caller_args, isolated.caller_kwargs)
                isolated.close()
                self._add_costs(isolated)
        if config_id in self._crashed:  # never launched here again; answered with its stored crash, not stored anew
            return replace(self._crashed[config_id], config=config, key=self.key, source=Source.STORE)
        short = self._short_screening()
        if config_id in self._proven:
            return self._runner.measure(config, self.key, short=short)
        with self.store.in_flight(self.identity, self.key.json, config_id, run_id=self.run_id) as clear, \
                _cleared_on_sigterm(clear):
            trial = self._runner.measure(config, self.key, short=short)
        if trial.ok:
            self._proven.add(config_id)
        return trial

    # -- compiling ----------------------------------------------------------------------------

    def compile(self, configs: list[Config], more: Callable[[], list[Config]], args: tuple, kwargs: dict,
                deadline: Deadline, overdue: Callable[[], bool] | None = None,
                leave_late_out: Callable[[], None] | None = None) -> Generator[tuple[int, CompileResult], None, None]:
        """Yields (index into ``configs``, result) per config as each is compiled: in this
        process's threads at once, and in the worker service's compile workers as they become
        ready; under the interpreter nothing is compiled. ``more()`` gives the configs to compile
        next, asked again whenever a result was taken; each is appended to ``configs``. On a GPU,
        while it gives none and no compile has finished for ``_overdue_after()`` seconds,
        ``overdue()`` is called (then again after as long), and ``more()`` asked right after it;
        where ``overdue()`` returns True (nothing more will be asked) and every config given has
        started compiling, ``leave_late_out()`` is called and the compiles in flight are stopped
        and left without a result, as at the deadline."""
        quiet_since = time.perf_counter()  # the last compile result taken, or the last call of overdue()
        finished = 0  # compile results yielded
        pool: CompilePool | None = None  # the round's, once it runs
        if settings.interpreting():
            overdue = None  # nothing compiles, so no compile is late

        def taken() -> list[Config]:
            nonlocal quiet_since
            new = more() if not deadline.expired() else []  # queued ones are not started past the deadline
            if not new and overdue is not None and not deadline.expired():
                limit, now = self._overdue_after(), time.perf_counter()
                if limit is not None and now - quiet_since > limit:
                    logger.debug("%s: no compile finished for %.1f s: the configs in flight are late",
                                 self.launch.kernel_name, now - quiet_since)
                    quiet_since = now
                    if overdue() and leave_late_out is not None and pool is not None and pool.jobs_waiting == 0:
                        logger.debug("%s: the last %d configs asked for are late: left out", self.launch.kernel_name,
                                     len(configs) - finished)
                        leave_late_out()
                        raise _LateLeftOut
                    new = more()
            configs.extend(new)
            return new

        if settings.interpreting():
            while new := taken():
                first = len(configs) - len(new)
                for index in range(first, first + len(new)):
                    self._compile_seconds_here.append(0.0)
                    yield index, CompileResult(Status.OK, 0.0)
            return
        target = active_target()
        jit = unwrap_jit(self.launch.fn)
        workers = self._workers()
        calls: list[dict] = []

        def jobs_of(new: list[Config]) -> list[CompileJob | None]:
            new_calls = [self.launch.jit_kwargs(args, dict(kwargs, **c.all_kwargs())) for c in new]
            calls.extend(new_calls)
            return [compile_job_for(jit, target, args, call) for call in new_calls] if workers > 1 else \
                [None] * len(new_calls)

        def compile_here(index: int) -> CompileResult:
            return compile_config(jit, args, calls[index])

        timeout = self.options.compile_timeout if self.options.compile_timeout is not None else \
            self._adaptive_compile_timeout
        jobs = jobs_of(taken())
        with service().compile_pool(workers) as pool:
            started = pool.started
            try:
                # a single config compiles in a thread here: forking a worker for it buys nothing, until
                # more come (a tuning's first config alone: its fallback, measured first)
                for index, result in pool.as_completed(jobs, timeout, deadline.wall_time(), local=compile_here,
                                                       start_workers=False, more=lambda: jobs_of(taken())):
                    if result.status is Status.OK:
                        self._compile_seconds_seen.append(result.seconds)
                    self._compile_seconds_here.append(result.seconds)
                    finished += 1
                    yield index, result
                    quiet_since = time.perf_counter()
            except _LateLeftOut:
                return  # the pool's round stopped their compiles; the caller leaves them unmeasured
            finally:
                self._compile_workers_started += pool.started - started

    def _in_flight_wanted(self) -> int | None:
        """Configs to keep in flight (``Feed.pace``): as many as this process times in twice a
        compile's mean seconds (this tuning's compiles, failed ones too, over the median seconds it
        is busy per timed config: the check and benchmark, and the search's tell and ask since),
        and ``COMPILED_AHEAD`` more (Little's law, with room for compiles that take longer than
        the mean: on the GEMM space of design.md the median compile takes 0.4 s, 1 % minutes;
        ``experiments/pace_simulation.py``). Where compiles are fast beside timing, fewer configs
        are in flight than the batch and each is picked knowing more trials; where they are slow,
        the batch (``_batch_size``) caps it. None (the batch) until this tuning has seen
        ``PACE_AFTER`` compiles and timed configs (the store's compile times may be another
        host's, or the Triton cache's)."""
        if len(self._compile_seconds_here) < PACE_AFTER or len(self._busy_seconds) < PACE_AFTER:
            return None
        per_config = max(statistics.median(self._busy_seconds[-PACE_WINDOW:]), 1e-3)
        return math.ceil(2 * statistics.mean(self._compile_seconds_here) / per_config) + COMPILED_AHEAD

    def _overdue_after(self) -> float | None:
        """Seconds without a finished compile after which the configs in flight are late
        (``OVERDUE_FACTOR`` times the mean of this tuning's compiles, failed ones too, at least
        ``OVERDUE_FLOOR_SECONDS``); None until it has seen ``PACE_AFTER`` of them."""
        if len(self._compile_seconds_here) < PACE_AFTER:
            return None
        return max(OVERDUE_FLOOR_SECONDS, OVERDUE_FACTOR * statistics.mean(self._compile_seconds_here))

    def _adaptive_compile_timeout(self) -> float | None:
        """With no ``compile_timeout`` given: none until a few compiles of this kernel were seen
        (in the store, or in this tuning as they finish), then a multiple of their median, not
        under a floor. On the H200 GEMM space the median compile is 0.4 s and 1 % take two minutes."""
        defaults = settings.DEFAULTS
        return _multiple_of_median(self._compile_seconds_seen, defaults.compile_timeout_after, None,
                                   defaults.compile_timeout_factor, defaults.compile_timeout_floor)

    def _workers(self) -> int:
        return self.options.compile_workers if self.options.compile_workers is not None else settings.compile_workers()

    def _batch_size(self, strategy: Strategy) -> int:
        """Configs in flight at most (asked for, not told yet): one under the interpreter (nothing
        to compile); else one per compile worker and two more, queued for the first workers free
        (jobs go to free workers between the configs this process times, not while it times one).
        A learning strategy then picks each config knowing every trial but those in flight; one
        that learns nothing is asked for more at a time. Fewer are in flight where compiles are
        fast beside timing (``_in_flight_wanted``)."""
        if settings.interpreting():
            return 1
        workers = self._workers()
        return workers + 2 if strategy.adaptive else 16 * workers

    def _progress_bar(self) -> Any:
        show = self.options.progress if self.options.progress is not None else sys.stderr.isatty()
        if not show:
            return None
        from tqdm.auto import tqdm

        budget = self.options.budget
        total = min(len(self.space), budget.evals) if budget.evals else len(self.space)
        return tqdm(total=total, desc=f"tuning {self.launch.kernel_name}", unit="config", leave=False)


#: Kernels already said to be tuned in this process after all (said once per kernel and process).
_told_not_isolated: "weakref.WeakSet[Any]" = weakref.WeakSet()


@contextmanager
def _cleared_on_sigterm(clear: Callable[[], None]) -> Iterator[None]:
    """While a config is in flight in-process: a SIGTERM (a job scheduler's timeout, a preemption)
    would end the process as a crash does, and the config would be recorded as having crashed it.
    Where SIGTERM has Python's default action and this is the main thread, the mark is cleared
    first and the signal then ends the process as it would have; a handler of the user's is left
    as it is (one that raises ends the block, which clears the mark)."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def stopped(signum: int, frame: Any) -> None:
        clear()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, stopped)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _unresolved_crashes(history: Sequence[Trial]) -> set[tuple[str, str]]:
    """(config, key) pairs recorded as crashed that never ran correctly since, in a worker: a
    crash record from a process killed from outside is resolved by the config's measurement."""
    def pair(trial: Trial) -> tuple[str, str]:
        return trial.config_id, trial.key.json if trial.key is not None else ""

    return {pair(t) for t in history if t.crashed} - {pair(t) for t in history if t.ok}


def _same_failure(trial: Trial, other: Trial) -> bool:
    """The same status and error text, numbers aside (byte counts, sizes and addresses differ
    between configs that fail for one reason)."""
    def shape(error: str | None) -> str:
        return re.sub(r"\d+", "#", error or "")

    return trial.status is other.status and shape(trial.error) == shape(other.error)


#: The replaced kernels (``_aten_replaced_for``) said in this process.
_told_aten_replaced: set[tuple[str, ...]] = set()


def _aten_replaced_for(args: tuple, kwargs: dict) -> list[str]:
    """The operators tunekit's checks use whose kernels for the call's tensors' device are replaced
    from Python (``compat.aten_replaced``)."""
    device = next((v.device.type for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)), None)
    return aten_replaced(device) if device is not None else []


def _multiple_of_median(seen: Sequence[float], after: int, before: float | None, factor: float,
                        floor: float) -> float | None:
    """An adaptive limit: ``before`` until ``after`` values were seen, then ``factor`` times
    their median, but never under ``floor``."""
    if len(seen) < after:
        return before
    return max(floor, factor * sorted(seen)[len(seen) // 2])


def stored_winner(text: str, winners: dict, space: Space, space_hash: str) -> Config | None:
    """The stored winner of key ``text`` if it was chosen from this Space."""
    stored = winners.get(text)
    if stored is not None and stored[2] == space_hash:
        return space.canonical(json.loads(stored[0]))
    return None
