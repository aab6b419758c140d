"""Budget(per_call=k): a tuning spread over the kernel's calls, k configs measured per call."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

import tunekit
from tunekit.budget import Budget
from tunekit.config import config_json
from tunekit.deadline import SimulatedClock
from tunekit.recorded import read_space
from tunekit.replay import ReplayEvaluator
from tunekit.search import Search, StopReason, run_search
from tunekit.store import ResultsStore
from tunekit.strategy import SearchContext, derive_seed, make_strategy
from tunekit.testing.strategies import TOY_KEY, toy_space, toy_trial
from tunekit.kernels import vector_add

SHIPPED = Path(tunekit.__file__).resolve().parent / "kernels" / "h200"
if not SHIPPED.is_dir():
    SHIPPED = Path(__file__).resolve().parents[1] / "kernels" / "h200"


@pytest.mark.parametrize("strategy", ["default", "rf", "optuna", "random"])
@pytest.mark.parametrize("batch", [1, 8])
def test_a_search_spread_over_calls_measures_what_one_search_measures(strategy, batch):
    """Replayed on the recorded H200 GEMM space (decode shape), 40 evaluations, 3 per call: the
    same configs in the same order, so the same winner, as one uninterrupted search."""
    recorded = read_space(SHIPPED / "matmul-decode.json.gz")

    def context() -> SearchContext:
        return SearchContext(recorded.space(), Budget(evals=40), recorded.key(), derive_seed(0, recorded.name), ())

    whole = run_search(make_strategy(strategy), context(), ReplayEvaluator(recorded), clock=SimulatedClock(),
                       batch=batch)
    spread = Search(make_strategy(strategy), context(), clock=SimulatedClock(), batch=batch)
    calls = 0
    while not spread.advance(ReplayEvaluator(recorded), evaluations=3):
        calls += 1
        assert spread.result.evaluations == 3 * calls
    measured = lambda result: [config_json(s.trial.config) for s in result.steps]  # noqa: E731
    assert measured(spread.result) == measured(whole) and len(measured(whole)) == 40
    assert min(s.trial.time_ms for s in spread.result.steps) == min(s.trial.time_ms for s in whole.steps)


def test_each_call_measures_at_most_k_configs_and_launches_the_best_so_far(tmp_path):
    """Live under the interpreter: 7 evaluations, 3 per call. Calls 1-2 measure 3 each and launch
    the best so far; call 3 measures the last one, chooses the winner and keeps it; call 4 measures
    nothing. Every call's output is correct; one run in the store holds the 7 trials."""
    store = tmp_path / "s.db"
    kernel = tunekit.autotune(space=vector_add.space(), key=["n"], strategy="random",
                              budget=Budget(evals=7, per_call=3), store=str(store))(vector_add.add_kernel)
    measured_after = []
    for _ in range(4):
        x, y, out = vector_add.inputs(5000)
        vector_add.launch(kernel, x, y, out)
        assert torch.equal(out, x + y)
        measured_after.append(len([r for r in ResultsStore(store, read_only=True).rows() if r["source"] == "measured"]))
        best = min((t for t in kernel.trials if t.ok), key=lambda t: t.time_ms)
        if measured_after[-1] < 7:
            assert kernel.best_config is best.config  # the best so far
    assert measured_after == [3, 6, 7, 7]
    (run,) = ResultsStore(store, read_only=True).runs()
    (winner,) = ResultsStore(store, read_only=True).winner_rows()
    assert run["evaluations"] == 7 and run["tuning_seconds"] is not None
    assert config_json(kernel.best_config) == winner["config"]

    # the same budget in one tuning measures the same 7 configs
    once = tunekit.autotune(space=vector_add.space(), key=["n"], strategy="random", budget=Budget(evals=7),
                            store=None)(vector_add.add_kernel)
    x, y, out = vector_add.inputs(5000)
    vector_add.launch(once, x, y, out)
    assert sorted(config_json(t.config) for t in once.trials) == sorted(
        r["config"] for r in ResultsStore(store, read_only=True).rows() if r["source"] == "measured")


def test_per_call_needs_an_end_and_a_positive_count():
    with pytest.raises(ValueError, match="needs evals or seconds"):
        Budget(per_call=2)
    with pytest.raises(ValueError, match="'per_call' parameter of Budget must be an int >= 1"):
        Budget(evals=4, per_call=0)


def test_configs_given_first_are_measured_before_the_strategys_and_told_to_it():
    recorded = read_space(SHIPPED / "matmul-decode.json.gz")
    context = SearchContext(recorded.space(), Budget(evals=5), recorded.key(), derive_seed(0, recorded.name), ())
    first = recorded.space().configs()[7]
    search = Search(make_strategy("random"), context, clock=SimulatedClock(), first=[first])
    search.advance(ReplayEvaluator(recorded))
    measured = [config_json(s.trial.config) for s in search.result.steps]
    assert measured[0] == config_json(first) and len(set(measured)) == 5  # and not proposed again


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    values = tl.load(x_ptr + offsets, mask=offsets < n)
    if BLOCK == 1024:
        values = values + 1.0  # a wrong config
    tl.store(out_ptr + offsets, values, mask=offsets < n)


def test_each_call_judges_its_configs_against_the_best_config_so_far_on_its_own_inputs(tmp_path):
    """Injected: BLOCK 1024 writes x + 1, and one config is measured per call, so no call's first
    config can be its own reference. Survives: the output check; BLOCK 1024 is `wrong` and never
    launched."""
    kernel = tunekit.autotune(space=tunekit.Space(BLOCK=[128, 256, 1024]), key=["n"], strategy="exhaustive",
                              budget=Budget(evals=3, per_call=1), store=str(tmp_path / "s.db"))(copy_kernel)
    for _ in range(4):
        x = torch.randn(20000)
        out = torch.empty_like(x)
        kernel[lambda meta: (triton.cdiv(20000, meta["BLOCK"]),)](x, out, 20000)
        assert torch.equal(out, x)
    assert {t.config.kwargs["BLOCK"]: t.status.value for t in kernel.trials} == {128: "ok", 256: "ok", 1024: "wrong"}


def test_a_wrong_first_config_that_became_the_reference_is_doubted_once_over_the_calls(caplog):
    """Injected: the first config (WRONG_BLOCK) skips its last tile and, measured alone on the first
    call, becomes the reference; Budget(per_call=1) spreads the other four configs (correct, so
    they differ from it) over four more calls. Survives: once the configs that differ from the
    reference are the majority of at least four judged, the doubt is logged, once, as in a tuning
    done in one call."""
    from tunekit.testing import faults

    blocks = [faults.WRONG_BLOCK, 64, 2048, 32, 4096]
    kernel = tunekit.autotune([tunekit.Config({"BLOCK": b}, num_warps=4) for b in blocks], key=["n"],
                              strategy="exhaustive", budget=Budget(evals=len(blocks), per_call=1), store=None,
                              isolate=False)(faults.faulty_add)
    caplog.set_level("WARNING", logger="tunekit")
    for _ in blocks:
        x, y, _ = vector_add.inputs(4096)
        out = torch.zeros_like(x)  # finite where the wrong config leaves its last tile: it can be the reference
        vector_add.launch(kernel, x, y, out)
    doubts = [r.getMessage() for r in caplog.records if "differ from the reference config" in r.getMessage()]
    assert len(doubts) == 1 and "BLOCK: 512" in doubts[0], doubts


@pytest.mark.parametrize("per_call", [None, 3])
def test_a_live_tuning_with_configs_in_flight_asks_as_each_trial_is_told(tmp_path, monkeypatch, per_call):
    """Live under the interpreter, which keeps one config in flight: given 4 in flight (as a GPU's
    compile workers are kept busy; injected by patching the session's size), the strategy is asked
    for 4, then for one more as each of the first 3 trials is told (3 pending at each ask). Then
    the session's pace has its figures: its compiles take no time (nothing compiles under the
    interpreter), so it wants 2 in flight, and the strategy is asked for nothing until fewer
    are, then for one per trial. 9 configs are measured, each once, correct, and the store
    holds them. Spread over calls (3 per call) every call measures 3 at most and the tuning the
    same 9, asked for the same way."""
    from tunekit.session import TuningSession
    from tunekit.strategies import RandomSearch

    monkeypatch.setattr(TuningSession, "_batch_size", lambda self, strategy: 4)
    asks, told = [], []

    class Recording(RandomSearch):
        def ask(self, n):
            asks.append((n, len(told)))
            return super().ask(n)

        def tell(self, trials):
            told.extend(trials)

    store = tmp_path / "s.db"
    kernel = tunekit.autotune(space=vector_add.space(), key=["n"], strategy=Recording(),
                              budget=Budget(evals=9, per_call=per_call), store=str(store))(vector_add.add_kernel)
    measured_after = []
    for _ in range(4 if per_call else 1):
        x, y, out = vector_add.inputs(5000)
        vector_add.launch(kernel, x, y, out)
        assert torch.equal(out, x + y)
        measured_after.append(len([t for t in kernel.trials if t.source == "measured"]))
    assert asks == [(4, 0), (1, 1), (1, 2), (1, 3), (1, 6), (1, 7)]  # 9 asked: the budget
    assert [len(told)] == [9] and len({config_json(t.config) for t in told}) == 9
    assert measured_after == ([3, 6, 9, 9] if per_call else [9])
    rows = [r for r in ResultsStore(store, read_only=True).rows() if r["source"] == "measured"]
    assert sorted(r["config"] for r in rows) == sorted(config_json(t.config) for t in told)


def test_with_configs_in_flight_the_deadline_cuts_off_the_rest_and_nothing_more_is_asked():
    """4 in flight, each evaluation 1 s on a simulated clock, a 10 s budget: 10 configs are
    measured; those taken after the deadline are answered None, not counted, and may be measured
    by a later tuning (they leave the search's seen set); no ask comes after the deadline."""
    from tunekit.search import StopReason
    from tunekit.strategies import Exhaustive

    asked_at = []

    class Recording(Exhaustive):
        def ask(self, n):
            asked_at.append(search.deadline.clock.seconds())
            return super().ask(n)

    def evaluate(feed, deadline):
        for config in feed:
            if deadline.expired():
                yield config, None
                continue
            deadline.clock.advance(1.0)
            yield config, toy_trial(config)

    context = SearchContext(toy_space(), Budget(seconds=10), TOY_KEY, 0, ())
    search = Search(Recording(), context, clock=SimulatedClock(), batch=4)
    search.advance(evaluate)
    assert search.result.evaluations == 10 and search.result.stopped_because is StopReason.BUDGET
    assert max(asked_at) < 10 and len(search._seen) == 10 + len(search._queued)


@pytest.mark.parametrize("paces, asks", [([2, 2, 1, 4], [4, 4, 1, 1]), ([0] * 8, [4, 1, 1, 1, 1])])
def test_an_evaluators_pace_sets_the_configs_in_flight_up_to_the_batch(paces, asks):
    """Batch 4. An evaluator that wants 2 in flight after its first two trials, then 1, then 4,
    then sets no limit: the strategy is asked for 4, then not until the 4 are told (3, 2 and 1
    left in flight: no more than wanted), then for 4, then for one per trial (the budget of 10
    cuts the last asks). One that wants none in flight gets one: the search never stalls."""
    from tunekit.strategies import Exhaustive

    asked = []

    class Recording(Exhaustive):
        def ask(self, n):
            asked.append(n)
            return super().ask(n)

    def evaluate(feed, deadline):
        wanted = iter(paces)
        feed.pace = lambda: next(wanted, None)
        for config in feed:
            yield config, toy_trial(config)

    evals = 10 if len(paces) < 8 else 8
    search = Search(Recording(), SearchContext(toy_space(), Budget(evals=evals), TOY_KEY, 0, ()),
                    clock=SimulatedClock(), batch=4)
    search.advance(evaluate)
    assert asked == asks and search.result.evaluations == evals


def test_an_evaluator_that_says_the_configs_in_flight_are_late_gets_more_to_do():
    """Batch 4, a strategy that proposes nothing while any of its configs is pending unless told
    they are late. An evaluator that holds back the first config, answers the other three, then
    says the one left is late (``Feed.overdue``): the strategy is told so, once, and asked again
    at once, and its new configs reach the same round of the evaluator before the late one is
    answered. Said with nothing in flight, it tells the strategy nothing."""
    from tunekit.strategies import Exhaustive

    events = []

    class Waiting(Exhaustive):
        def start(self, context):
            super().start(context)
            self.pending, self.late = set(), False

        def ask(self, n):
            if self.pending and not self.late:
                return []
            picks = super().ask(n)
            self.pending |= {config_json(c) for c in picks}
            events.append(("asked", len(picks)))
            return picks

        def tell(self, trials):
            self.pending -= {config_json(t.config) for t in trials}
            super().tell(trials)

        def overdue(self):
            events.append(("late", len(self.pending)))
            self.late = True

    def evaluate(feed, deadline):
        held, *rest = feed.take()
        for config in rest:
            yield config, toy_trial(config)
        feed.overdue()
        more = feed.take()
        events.append(("taken", len(more)))
        for config in more:
            yield config, toy_trial(config)
        yield held, toy_trial(held)
        feed.overdue()  # nothing in flight: the strategy hears nothing

    search = Search(Waiting(), SearchContext(toy_space(), Budget(evals=7), TOY_KEY, 0, ()),
                    clock=SimulatedClock(), batch=4)
    search.advance(evaluate)
    assert events == [("asked", 4), ("late", 1), ("asked", 3), ("taken", 3)]
    assert search.result.evaluations == 7


def test_a_strategy_runs_on_one_torch_thread_and_the_callers_setting_comes_back():
    """The caller's PyTorch uses 2 intra-op threads: the strategy's start, asks and tells run on
    one (its models are small, and live its process shares the cores with the compile workers),
    and afterwards the caller has its 2 again."""
    from tunekit.strategies import Exhaustive

    seen = []

    class Recording(Exhaustive):
        def start(self, context):
            seen.append(torch.get_num_threads())
            super().start(context)

        def ask(self, n):
            seen.append(torch.get_num_threads())
            return super().ask(n)

        def tell(self, trials):
            seen.append(torch.get_num_threads())
            super().tell(trials)

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        search = Search(Recording(), SearchContext(toy_space(), Budget(evals=5), TOY_KEY, 0, ()),
                        clock=SimulatedClock())
        search.advance(lambda feed, deadline: ((c, toy_trial(c)) for c in feed))
        after = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    assert len(seen) == 11 and set(seen) == {1} and after == 2


def test_with_configs_in_flight_a_strategy_that_repeats_itself_is_stopped():
    """Injected: a strategy that proposes its first config again at every ask. Survives: with 4 in
    flight the search measures it once and stops, saying the strategy proposed nothing new."""
    from tunekit.search import StopReason
    from tunekit.strategy import Strategy

    class Repeating(Strategy):
        def ask(self, n):
            return [self.context.space.configs()[0]] * n

    search = Search(Repeating(), SearchContext(toy_space(), Budget(evals=50), TOY_KEY, 0, ()),
                    clock=SimulatedClock(), batch=4)
    search.advance(lambda feed, deadline: ((c, toy_trial(c)) for c in feed))
    assert search.result.evaluations == 1 and search.result.stopped_because is StopReason.NO_NEW_PROPOSALS


def simulated_live_tuning(compile_seconds: float, bench_seconds: float, paced: bool, workers: int = 4,
                          batch: int = 6, evals: int = 40, spread: float = 0.0,
                          seed: int = 0) -> tuple[list[int], float]:
    """``tunekit.testing.live.simulate_live_tuning`` of the toy space by ``Exhaustive``, each
    compile ``compile_seconds`` times a log-normal factor of sigma ``spread`` drawn per config."""
    import math
    import random

    from tunekit.strategies import Exhaustive
    from tunekit.testing.live import simulate_live_tuning

    draws, drawn = random.Random(seed), {}

    def seconds(config):
        key = config_json(config)
        if key not in drawn:
            drawn[key] = compile_seconds * math.exp(draws.gauss(0.0, spread)) if spread else compile_seconds
        return drawn[key]

    tuning = simulate_live_tuning(Exhaustive(), toy_space(), seconds, toy_trial, bench_seconds, paced=paced,
                                  workers=workers, batch=batch, evals=evals)
    return tuning.in_flight_at_asks, tuning.seconds


@pytest.mark.parametrize("compile_seconds, in_flight", [(0.5, 2), (1.0, 3), (20.0, 5)])
def test_a_paced_live_tuning_keeps_as_few_in_flight_as_keep_its_timing_busy(compile_seconds, in_flight):
    """Simulated, 4 compile workers, 6 in flight at most, a second to time each config: once the
    pace has its figures, it wants ceil(2 x compile / 1 s) + 2 in flight, so in the tuning's
    second half the strategy is asked (after a trial is told) with 2 in flight where a compile
    takes half a second (3 wanted), with 3 where it takes a second, and with 5 where it takes
    20 s (the batch of 6). Each pick then knows more trials, and the tuning takes no longer
    than one that keeps its batch in flight (within 2 %)."""
    paced, paced_seconds = simulated_live_tuning(compile_seconds, 1.0, paced=True)
    _, batch_seconds = simulated_live_tuning(compile_seconds, 1.0, paced=False)
    assert set(paced[len(paced) // 2:]) == {in_flight}, paced
    assert paced_seconds <= 1.02 * batch_seconds, (paced_seconds, batch_seconds)


def test_a_paced_live_tuning_is_not_slower_where_compile_times_vary():
    """Simulated as a GEMM tuning on 16 CPUs: 16 workers, 18 in flight at most, compiles of a
    third of a second times a log-normal factor (sigma 0.7, as the GEMM space's live compiles
    spread: some take 5 times the median), 0.1 s to time each config. Over 8 seeds the paced
    tunings keep fewer in flight (median at the second half's asks under 14) and take, in the
    median, no more than 3 % longer than keeping 18 (`experiments/pace_simulation.py`: the same
    with the recorded compile times)."""
    ratios, in_flight = [], []
    for seed in range(8):
        asks, paced = simulated_live_tuning(0.33, 0.1, True, workers=16, batch=18, spread=0.7, seed=seed)
        _, whole = simulated_live_tuning(0.33, 0.1, False, workers=16, batch=18, spread=0.7, seed=seed)
        ratios.append(paced / whole)
        in_flight += asks[len(asks) // 2:]
    assert statistics.median(in_flight) < 14 and statistics.median(ratios) <= 1.03, (ratios, in_flight)


@pytest.mark.parametrize("failing", [False, True])
def test_only_the_last_configs_asked_for_may_be_left_out_when_late(failing):
    """Budget 6, batch 4, exhaustive. The evaluator holds back the first config and says it is
    late after each other config it answers. While evaluations are left to ask for, ``Feed.overdue``
    returns False. Once every evaluation left is in flight (after the second answer: the held one
    and three others) it returns True; the evaluator answers the others and leaves the held one
    out (``Feed.leave_out_late``, then None), and the search ends with 5 evaluations
    (``StopReason.LATE``). Where
    no config measured works (``failing``), it never returns True and the held one is answered:
    a tuning must end with a winner if it can."""
    from tunekit.strategies import Exhaustive
    from tunekit.trial import Status, Trial

    said = []

    def trial(config):
        return Trial(config, Status.RUNTIME_ERROR, key=TOY_KEY) if failing else toy_trial(config)

    def evaluate(feed, deadline):
        held, *rest = feed.take()
        while rest:
            config = rest.pop(0)
            yield config, trial(config)
            rest += feed.take()
            if not any(said):
                said.append(feed.overdue())
        if any(said):
            feed.leave_out_late()
            yield held, None
        else:
            yield held, trial(held)

    search = Search(Exhaustive(), SearchContext(toy_space(), Budget(evals=6), TOY_KEY, 0, ()),
                    clock=SimulatedClock(), batch=4)
    search.advance(evaluate)
    if failing:
        assert said == [False] * 5 and search.result.evaluations == 6
        assert search.result.stopped_because is StopReason.BUDGET
    else:
        assert said == [False, True]
        assert search.result.evaluations == 5 and search.result.stopped_because is StopReason.LATE
        assert len(search.result.trials) == 5  # the held config has no trial


@pytest.mark.parametrize("told_late", [False, True])
def test_default_s_start_goes_on_without_a_compile_held_far_longer_than_the_others(told_late):
    """Injected: simulated live (``tunekit.testing.live``), 16 compile workers, 18 in flight at
    most, the first config of ``default``'s start takes 30 s to compile and every other 0.5 s.
    Survives: told that it is late (once no compile has finished for 3 times the mean, 1.5 s
    here), the tuning measures 39 of its 40 configs before that compile ends, and then, with
    nothing more to ask for, leaves it out and ends (``StopReason.LATE``) long before it would
    have; not told, as replays never are, the 9 others of its start alone, and all 40 in the end."""
    from tunekit.strategies import DefaultSearch
    from tunekit.testing.live import simulate_live_tuning

    first = []

    def compile_seconds(config):
        first[:] = first or [config]
        return 30.0 if config == first[0] else 0.5

    tuning = simulate_live_tuning(DefaultSearch(), toy_space(), compile_seconds, toy_trial, 0.1, paced=True,
                                  workers=16, batch=18, evals=40, overdue=told_late)
    assert len([step for step in tuning.result.steps if step.seconds < 30]) == (39 if told_late else 9)
    if told_late:
        assert tuning.result.evaluations == 39 and tuning.result.stopped_because is StopReason.LATE
        assert tuning.seconds < 15
    else:
        assert tuning.result.evaluations == 40 and tuning.result.stopped_because is StopReason.BUDGET


def test_configs_waiting_for_a_compile_worker_are_never_left_out():
    """Injected: simulated live, 2 compile workers, random asked for its whole budget of 30 at
    once (batch 32), every fifth config taking 20 s to compile and the others 0.1 s. Survives: the
    late ones are left out only once every config given has started compiling, so at most the 2
    compiling then are, and the tuning ends more than 10 s sooner; waiting for them, it measures
    all 30."""
    from tunekit.strategies import RandomSearch
    from tunekit.testing.live import simulate_live_tuning

    order: dict[str, int] = {}

    def compile_seconds(config):
        order.setdefault(config_json(config), len(order))
        return 20.0 if order[config_json(config)] % 5 == 4 else 0.1

    def tuning(leave_late_out):
        order.clear()
        return simulate_live_tuning(RandomSearch(), toy_space(), compile_seconds, toy_trial, 0.05, paced=False,
                                    workers=2, batch=32, evals=30, overdue=True, leave_late_out=leave_late_out,
                                    strategy_seconds=0.0)

    left, waited = tuning(True), tuning(False)
    assert waited.result.evaluations == 30 and waited.result.stopped_because is StopReason.BUDGET
    assert left.result.stopped_because is StopReason.LATE and 28 <= left.result.evaluations < 30
    assert left.seconds < waited.seconds - 10


def test_with_every_config_asked_for_the_late_last_are_left_out_whatever_the_budget():
    """Exhaustive over the 63 configs of the toy space with a budget of 100 evaluations (more
    than the space), the last config taking 60 s to compile and the others 0.1 s, simulated live:
    once every config of the space is asked for, the late last one is left out and the tuning
    ends (``StopReason.LATE``) with 62 evaluations, long before 60 s."""
    from tunekit.strategies import Exhaustive
    from tunekit.testing.live import simulate_live_tuning

    last = config_json(toy_space().configs()[-1])
    tuning = simulate_live_tuning(Exhaustive(), toy_space(), lambda c: 60.0 if config_json(c) == last else 0.1,
                                  toy_trial, 0.05, paced=True, workers=16, batch=18, evals=100, overdue=True)
    assert tuning.result.stopped_because is StopReason.LATE and tuning.result.evaluations == 62
    assert tuning.seconds < 30


def test_the_configs_in_flight_are_late_after_three_times_the_mean_compile_and_at_least_a_second():
    """``TuningSession._overdue_after``: nothing until this tuning has seen 3 compiles; then
    ``OVERDUE_FACTOR`` (3) times their mean, failed ones too, but never under
    ``OVERDUE_FLOOR_SECONDS`` (1 s)."""
    from types import SimpleNamespace

    from tunekit.session import TuningSession

    def late(seconds):
        return TuningSession._overdue_after(SimpleNamespace(_compile_seconds_here=seconds))

    assert late([5.0, 5.0]) is None
    assert late([0.1, 0.1, 0.1]) == 1.0
    assert late([1.0, 2.0, 3.0]) == pytest.approx(6.0)
    assert late([1.0, 2.0, 3.0, 14.0]) == pytest.approx(15.0)


def test_under_the_interpreter_no_compile_is_said_to_be_late():
    """Under the interpreter nothing compiles: the session's compile step gives each config at
    once and never says the configs in flight are late, however long the caller takes with each
    (here 0.8 s for each of 3, past the 1 s floor of the rule). Before, it said so once."""
    import time

    from tunekit.deadline import Clock, Deadline
    from tunekit.keys import TuningKey
    from tunekit.session import TuningSession

    kernel = tunekit.autotune(space=vector_add.space(), key=["n"], store=None)(vector_add.add_kernel)
    session = TuningSession(kernel.launch, kernel.space, kernel.options, kernel.store, kernel.identity,
                            TuningKey((), (), ()), kernel.space_hash)
    configs, given, late = kernel.space.configs()[:3], [], []

    def more():
        left = configs[len(given):len(given) + 1]
        given.extend(left)
        return left

    for _ in session.compile([], more, (), {}, Deadline(Clock(), None), overdue=lambda: late.append(1)):
        time.sleep(0.8)
    assert len(given) == 3 and late == []


def test_a_live_tuning_keeps_a_learning_strategy_s_compile_workers_busy_and_two_more(monkeypatch):
    """On a GPU (the interpreter off) with 16 compile workers, a strategy that learns has 18
    configs in flight; one that learns nothing 256; under the interpreter, one."""
    from types import SimpleNamespace

    from tunekit import settings
    from tunekit.session import TuningSession
    from tunekit.strategies import DefaultSearch, RandomSearch

    session = SimpleNamespace(_workers=lambda: 16)
    monkeypatch.setattr(settings, "interpreting", lambda: False)
    assert TuningSession._batch_size(session, DefaultSearch()) == 18
    assert TuningSession._batch_size(session, RandomSearch()) == 256
    monkeypatch.setattr(settings, "interpreting", lambda: True)
    assert TuningSession._batch_size(session, DefaultSearch()) == 1
