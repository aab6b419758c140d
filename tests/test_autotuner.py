"""tunekit.autotune against stock triton.autotune, both running real kernels under the interpreter.

Stock Triton runs under the interpreter when given a ``do_bench``; ``FakeClock`` is one that
launches the real kernel and reports a fixed time per config, so that both tuners see the same
timings and their choices can be compared exactly.
"""

from __future__ import annotations

import json

import pytest
import torch
import triton
import triton.language as tl

import tunekit
from tunekit import Budget, Config, Space, Status
from tunekit.kernels import matmul, vector_add
from tunekit.store import ResultsStore

N = 4096


class FakeClock:
    """A do_bench that runs the kernel and reports ``cost(BLOCK, num_warps)`` as its time."""

    def __init__(self, cost=lambda block, warps: 1000.0 / block + warps):
        self.cost = cost
        self.last = None
        self.benchmarked: list[tuple] = []

    def pre_hook(self, nargs):
        self.last = (nargs["BLOCK"], nargs["num_warps"])

    def __call__(self, kernel_call, quantiles=None):
        kernel_call()
        self.benchmarked.append(self.last)
        t = self.cost(*self.last)
        return [t, t * 0.99, t * 1.01]


def add_configs(clock: FakeClock) -> list[Config]:
    return [
        Config({"BLOCK": block}, num_warps=warps, pre_hook=clock.pre_hook)
        for block in (128, 256, 512) for warps in (2, 4)
    ]


def launch_add(kernel, n=N, seed=0):
    x, y, out = vector_add.inputs(n, seed=seed)
    kernel[vector_add.grid(n)](x, y, out, n)
    torch.testing.assert_close(out, vector_add.reference(x, y))
    return out


# -- drop-in behaviour ----------------------------------------------------------------------------


def test_same_winner_and_same_configs_timed_as_stock_on_a_config_list():
    stock_clock, tk_clock = FakeClock(), FakeClock()
    stock = triton.autotune(add_configs(stock_clock), key=["n"], do_bench=stock_clock)(vector_add.add_kernel)
    ours = tunekit.autotune(add_configs(tk_clock), key=["n"], do_bench=tk_clock, store=None)(vector_add.add_kernel)
    launch_add(stock)
    launch_add(ours)
    assert isinstance(ours, triton.runtime.autotuner.Autotuner)  # what torch.compile's Dynamo looks for
    assert tk_clock.benchmarked == stock_clock.benchmarked  # every config, in the list's order
    assert (ours.best_config.kwargs, ours.best_config.num_warps) == (stock.best_config.kwargs, stock.best_config.num_warps)
    assert list(ours.cache) == list(stock.cache)  # the same key tuple
    launch_add(ours, seed=1)
    assert len(tk_clock.benchmarked) == 6  # a cached key is not tuned again


def test_restore_value_and_reset_to_zero_leave_the_inputs_as_stock_does():
    @triton.jit
    def accumulate(x_ptr, total_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        tl.store(x_ptr + offsets, x + 1.0, mask=mask)  # in place
        tl.atomic_add(total_ptr, tl.sum(x, axis=0))

    results = []
    for decorate in (triton.autotune, tunekit.autotune):
        clock = FakeClock()
        extra = {"store": None} if decorate is tunekit.autotune else {}
        kernel = decorate(add_configs(clock), key=["n"], do_bench=clock, restore_value=["x_ptr"],
                          reset_to_zero=["total_ptr"], **extra)(accumulate)
        x = torch.arange(N, dtype=torch.float32)
        total = torch.zeros(1)
        kernel[vector_add.grid(N)](x, total, N)
        results.append((x.clone(), total.clone()))
    (stock_x, stock_total), (ours_x, ours_total) = results
    torch.testing.assert_close(ours_x, torch.arange(N, dtype=torch.float32) + 1)  # incremented exactly once
    torch.testing.assert_close(ours_total, torch.tensor([float(sum(range(N)))]))
    torch.testing.assert_close(ours_x, stock_x)
    torch.testing.assert_close(ours_total, stock_total)


@triton.jit
def add_maybe_masked(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + tl.load(y_ptr + offsets))
    else:
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
                 mask=mask)


@pytest.mark.parametrize("order", ["autotune_over_heuristics", "heuristics_over_autotune"])
def test_stacks_with_heuristics_in_either_order_like_stock(order):
    if order == "autotune_over_heuristics":  # the heuristic sees the config being tried
        even = {"EVEN": lambda args: args["n"] % args["BLOCK"] == 0}
    else:  # above the autotuner it sees only the call's arguments, as in stock Triton
        even = {"EVEN": lambda args: args["n"] % 1024 == 0}
    winners = []
    for decorate in (triton.autotune, tunekit.autotune):
        clock = FakeClock()
        extra = {"store": None} if decorate is tunekit.autotune else {}
        tune = decorate(add_configs(clock), key=["n"], do_bench=clock, **extra)
        heuristics = tunekit.heuristics(even)
        kernel = tune(heuristics(add_maybe_masked)) if order == "autotune_over_heuristics" else heuristics(
            tune(add_maybe_masked))
        x, y, out = vector_add.inputs(3000)
        kernel[vector_add.grid(3000)](x, y, out, 3000)
        torch.testing.assert_close(out, x + y)
        winners.append(clock.benchmarked)
    assert winners[0] == winners[1]


def test_prune_configs_by_keeps_stock_semantics():
    def early_prune(configs, named_args, **kwargs):
        return [c for c in configs if c.num_warps == 4]

    def perf_model(**kwargs):
        return -kwargs["BLOCK"]  # predicts bigger blocks are faster

    timed = []
    for decorate in (triton.autotune, tunekit.autotune):
        clock = FakeClock()
        extra = {"store": None} if decorate is tunekit.autotune else {}
        kernel = decorate(add_configs(clock), key=["n"], do_bench=clock, **extra,
                          prune_configs_by={"early_config_prune": early_prune, "perf_model": perf_model, "top_k": 2})(
            vector_add.add_kernel)
        launch_add(kernel)
        timed.append(clock.benchmarked)
    assert timed[0] == timed[1] == [(512, 4), (256, 4)]


def test_a_single_config_is_never_benchmarked():
    clock = FakeClock()
    kernel = tunekit.autotune(add_configs(clock)[:1], key=["n"], do_bench=clock, store=None)(vector_add.add_kernel)
    launch_add(kernel)
    assert clock.benchmarked == []


@pytest.mark.interpreter_loops
def test_small_matmul_tunes_and_computes_the_right_product():
    configs = [Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": 16, "GROUP_M": g}, num_warps=4)
               for m, n, g in ((16, 16, 1), (32, 16, 8), (16, 32, 1), (32, 32, 8))]
    kernel = tunekit.autotune(configs, key=["M", "N", "K"], store=None)(matmul.matmul_kernel)
    a, b, c = matmul.inputs(48, 40, 64, dtype=torch.float32)
    matmul.launch(kernel, a, b, c)
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
    assert len(kernel.trials) == 4 and all(t.ok for t in kernel.trials)


# -- search, budget and store -------------------------------------------------------------------


def test_random_strategy_spends_exactly_its_budget_and_records_every_trial(store_path):
    kernel = tunekit.autotune(space=vector_add.space(), key=["n"], strategy="random", budget=Budget(evals=3),
                              store=store_path, seed=1)(vector_add.add_kernel)
    launch_add(kernel)
    measured = [t for t in kernel.trials if t.source == "measured"]
    assert len(measured) == 3 and len({t.config_id for t in measured}) == 3
    rows = ResultsStore(store_path).rows(run_id=kernel.run_id)
    assert [r["source"] for r in rows].count("measured") == 3
    assert all(r["device"] == "interpreter" and r["timing_method"] == "host_clock" for r in rows)
    assert all(r["strategy"] in ("random", "finalists") for r in rows)
    assert kernel.best_config.kwargs["BLOCK"] in [t.config.kwargs["BLOCK"] for t in measured]


def test_a_new_process_reuses_the_stored_winner_and_measures_only_what_is_new(store_path):
    clock = FakeClock()
    first = tunekit.autotune(add_configs(clock), key=["n"], do_bench=clock, store=store_path)(vector_add.add_kernel)
    launch_add(first)
    assert len([t for t in first.trials if t.source == "measured"]) == 6

    clock.benchmarked.clear()  # a second decorator on the same store: as a new process would
    again = tunekit.autotune(add_configs(clock), key=["n"], do_bench=clock, store=store_path)(vector_add.add_kernel)
    launch_add(again)
    assert clock.benchmarked == []  # the stored winner of the same space is reused as it is
    assert again.best_config.kwargs == first.best_config.kwargs

    clock.benchmarked.clear()  # one config added to the list: only it is measured
    grown = add_configs(clock) + [Config({"BLOCK": 1024}, num_warps=2, pre_hook=clock.pre_hook)]
    third = tunekit.autotune(grown, key=["n"], do_bench=clock, store=store_path)(vector_add.add_kernel)
    launch_add(third)
    sources = sorted(t.source for t in third.trials)
    assert sources == ["measured"] + ["store"] * 6
    finalist_rounds = tunekit.settings.DEFAULTS.finalist_rounds * tunekit.settings.DEFAULTS.finalists
    assert len(clock.benchmarked) == 1 + finalist_rounds
    assert clock.benchmarked[0] == (1024, 2)
    assert third.best_config.kwargs == {"BLOCK": 1024}  # 1000/1024 + 2 beats every other cost


def test_a_first_tuning_times_each_finalist_in_as_many_rounds_counting_its_first_timing(store_path):
    """The finalists' first timing (a short one, as the re-timings) is their first round: a
    2-config list costs no more timings than the rounds ask for."""
    clock = FakeClock()
    kernel = tunekit.autotune(add_configs(clock), key=["n"], do_bench=clock, store=store_path)(vector_add.add_kernel)
    launch_add(kernel)
    defaults = tunekit.settings.DEFAULTS
    by_cost = sorted({c for c in clock.benchmarked}, key=lambda c: clock.cost(*c))
    assert len(clock.benchmarked) == 6 + defaults.finalists * (defaults.finalist_rounds - 1)
    assert all(clock.benchmarked.count(c) == defaults.finalist_rounds for c in by_cost[:defaults.finalists])
    assert all(clock.benchmarked.count(c) == 1 for c in by_cost[defaults.finalists:])
    retimed = [t for t in ResultsStore(store_path).rows() if t["strategy"] == "finalists"]
    assert len(retimed) == defaults.finalists


def test_store_none_persists_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("TUNEKIT_STORE", str(tmp_path / "default.db"))
    clock = FakeClock()
    kernel = tunekit.autotune(add_configs(clock), key=["n"], do_bench=clock, store=None)(vector_add.add_kernel)
    launch_add(kernel)
    assert not (tmp_path / "default.db").exists()


def test_failing_configs_become_trials_and_tuning_goes_on(store_path):
    @triton.jit
    def picky(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        tl.static_assert(BLOCK <= 256)
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
                 mask=mask)

    kernel = tunekit.autotune(space=Space(BLOCK=[128, 256, 512, 1024]), key=["n"], strategy="exhaustive",
                              store=store_path)(picky)
    launch_add(kernel)
    statuses = {t.config.kwargs["BLOCK"]: t.status for t in kernel.trials}
    assert statuses[512] is statuses[1024] is Status.RUNTIME_ERROR  # the interpreter compiles while it runs
    assert statuses[128] is statuses[256] is Status.OK
    assert kernel.best_config.kwargs["BLOCK"] in (128, 256)
    errors = [r["error"] for r in ResultsStore(store_path).rows() if r["status"] != "ok"]
    assert len(errors) == 2 and all("AssertionError" in e or "assert" in e.lower() for e in errors)


def test_every_config_failing_raises_with_kernel_key_and_counts(store_path):
    @triton.jit
    def never(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        tl.static_assert(BLOCK < 0)

    kernel = tunekit.autotune(space=Space(BLOCK=[128, 256]), key=["n"], strategy="exhaustive",
                              store=store_path)(never)
    with pytest.raises(tunekit.TuningError, match=r"Every config of never failed for key .*4096.*2 runtime_error"):
        launch_add(kernel)
    (run,) = ResultsStore(store_path).runs()
    assert run["evaluations"] == 2 and run["winner"] is None and run["finished_at"] is not None
    # what was tried stays on the kernel, as after a tuning that found a winner
    assert kernel.run_id == run["run_id"] and [t.status for t in kernel.trials] == [tunekit.Status.RUNTIME_ERROR] * 2


def test_bad_arguments_are_refused_before_anything_runs():
    with pytest.raises(ValueError, match=r"key of add_kernel names 'm', which is not an argument"):
        tunekit.autotune(space=vector_add.space(), key=["m"])(vector_add.add_kernel)
    with pytest.raises(ValueError, match="tunes BLOCK_SIZE, which add_kernel does not take"):
        tunekit.autotune(space=Space(BLOCK_SIZE=[64]), key=["n"])(vector_add.add_kernel)
    with pytest.raises(ValueError, match="reject every one"):
        tunekit.autotune(space=Space(BLOCK=[64], constraints=[lambda c: False]), key=["n"])(vector_add.add_kernel)
    kernel = tunekit.autotune(space=vector_add.space(), key=["n"], store=None)(vector_add.add_kernel)
    x, y, out = vector_add.inputs(N)
    with pytest.raises(ValueError, match="called with BLOCK, which the autotuner tunes"):
        kernel[vector_add.grid(N)](x, y, out, N, BLOCK=128)


@pytest.mark.parametrize("options,message", [
    ({"writes_padding": "no"}, r"^writes_padding must be True or False. Got 'no' instead.$"),
    ({"isolate": "yes"}, r"^isolate must be True or False or None. Got 'yes' instead.$"),
    ({"check": 1}, r"^check must be True or False. Got 1 instead.$"),
    ({"background": "true"}, r"^background must be True or False"),
    ({"default_config": {"BLOK": 1}}, r"^default_config must be a triton.Config. Got \{'BLOK': 1\} instead.$"),
], ids=["writes_padding", "isolate", "check", "background", "default_config"])
def test_options_of_the_wrong_type_are_refused_at_decoration(options, message):
    """A typo must not switch a safety check off: "no" is not False."""
    with pytest.raises(TypeError, match=message):
        tunekit.autotune(space=vector_add.space(), key=["n"], store=None, **options)(vector_add.add_kernel)


def test_a_tolerance_for_an_argument_the_kernel_lacks_is_refused():
    with pytest.raises(ValueError, match=r"^tolerance of add_kernel names 'outp', not an argument of the kernel"):
        tunekit.autotune(space=vector_add.space(), key=["n"], store=None,
                         tolerance={"outp": 0.1})(vector_add.add_kernel)


@pytest.mark.parametrize("finalists", [0, -1, 1.5, True, "3"])
def test_finalists_other_than_a_count_are_refused_at_decoration(finalists):
    decorate = tunekit.autotune(space=vector_add.space(), key=["n"], store=None, finalists=finalists)
    expected = rf"^finalists must be an int >= 1 or None. Got {finalists!r} instead.$"
    with pytest.raises(ValueError, match=expected):
        decorate(vector_add.add_kernel)


def test_finalists_one_picks_the_best_measured_without_re_timing():
    clock = FakeClock()
    kernel = tunekit.autotune(add_configs(clock), key=["n"], do_bench=clock, store=None, finalists=1)(
        vector_add.add_kernel)
    launch_add(kernel)
    assert len(clock.benchmarked) == 6 and kernel.best_config.kwargs == {"BLOCK": 512}


def plain_add(x_ptr, y_ptr, out_ptr, n, BLOCK):
    """Not a @triton.jit function."""


@pytest.mark.parametrize("arguments, decorated, message", [
    ({"configs": []}, vector_add.add_kernel,
     r"^configs must be a list of at least one triton.Config \(leave it out for Triton's single default "
     r"config\)\. Got \[\] instead\.$"),
    ({"configs": Config({"BLOCK": 128})}, vector_add.add_kernel,
     r"^configs must be a list of .* Got <.*Config object at .*> instead\.$"),
    ({"key": None}, vector_add.add_kernel, r"^key must be a list of argument names. Got None instead\.$"),
    ({"key": 3}, vector_add.add_kernel, r"^key must be a list of argument names. Got 3 instead\.$"),
    ({}, plain_add, r"^tunekit.autotune decorates a @triton.jit function \(or one that triton.heuristics or "
                    r"another autotune wraps\)\. Got <function plain_add at .*> instead\.$"),
])
def test_arguments_of_the_wrong_kind_get_one_line_saying_what_was_expected(arguments, decorated, message):
    arguments = {"space": vector_add.space(), "key": ["n"], "store": None, **arguments}
    if "configs" in arguments:
        del arguments["space"]
    with pytest.raises((ValueError, TypeError), match=message):
        tunekit.autotune(**arguments)(decorated)


def test_an_unknown_tunekit_log_level_is_refused_in_one_line(monkeypatch):
    monkeypatch.setenv("TUNEKIT_LOG", "bogus")
    with pytest.raises(ValueError, match=r"^TUNEKIT_LOG must be a logging level \(debug, info, warning, "
                                         r"error, critical\) or a number\. Got 'bogus' instead\.$"):
        tunekit.autotune(space=vector_add.space(), key=["n"], store=None)(vector_add.add_kernel)


def test_key_buckets_share_one_tuning_between_nearby_shapes(store_path):
    kernel = tunekit.autotune(space=vector_add.space(), key=["n"], strategy="random", budget=Budget(evals=2),
                              store=store_path, key_buckets="pow2")(vector_add.add_kernel)
    launch_add(kernel, n=1000)
    launch_add(kernel, n=1024)
    launch_add(kernel, n=1025)
    keys = [json.loads(r["key"])["args"]["n"] for r in ResultsStore(store_path).runs()]
    assert keys == [1024, 2048]


def test_offline_mode_never_tunes_and_falls_back_to_the_nearest_key(store_path, monkeypatch):
    def make():
        return tunekit.autotune(space=vector_add.space(), key=["n"], strategy="random", budget=Budget(evals=2),
                                store=store_path)(vector_add.add_kernel)

    monkeypatch.setenv("TUNEKIT_MODE", "offline")
    expected = "did not tune add_kernel .*offline; using the default config"
    with pytest.warns(RuntimeWarning, match=expected) as caught:
        launch_add(make())
    assert [w.filename for w in caught] == [__file__]  # the user's call, not tunekit's line
    assert ResultsStore(store_path).runs() == []

    monkeypatch.setenv("TUNEKIT_MODE", "online")
    online = make()
    launch_add(online, n=4096)
    monkeypatch.setenv("TUNEKIT_MODE", "offline")
    offline = make()
    with pytest.warns(RuntimeWarning, match=r"winner of the nearest tuned key .*4096"):
        launch_add(offline, n=5000)
    assert offline.best_config.kwargs == online.best_config.kwargs
    assert len(ResultsStore(store_path).runs()) == 1


def test_the_runtime_fallback_and_a_heuristics_module_choose_the_same_nearest_key():
    """Three distance rules disagreed: the runtime fallback skipped keys of other dtypes (and fell
    to the default config), a heuristics module took them at 100 per difference. One rule now."""
    from tunekit.config_rules import Rule
    from tunekit.keys import TuningKey, key_distance, nearest_key

    def key(n, dtype):
        return TuningKey(("n",), (n,), (dtype,))

    tuned = [key(4096, "torch.bfloat16"), key(1 << 20, "torch.float32"), key(64, "torch.float32")]
    for target in (key(5000, "torch.float16"), key(5000, "torch.float32"), key(100, "torch.bfloat16")):
        runtime = nearest_key(target, tuned)
        rule = Rule("nearest", tuple({"BLOCK": i} for i in range(len(tuned))),
                          points=tuple((k, i) for i, k in enumerate(tuned)))
        assert tuned[rule.config_for(target)["BLOCK"]] == runtime
        assert runtime == min(tuned, key=lambda other: key_distance(target, other))
    # a key of other dtypes is taken only where none has these
    assert nearest_key(key(5000, "torch.float32"), tuned) == key(64, "torch.float32")
    assert nearest_key(key(5000, "torch.float16"), tuned) == key(4096, "torch.bfloat16")


@pytest.mark.parametrize("launch", ["kernel[grid]", "kernel.run", "heuristics_over_autotune",
                                    "shipped_launch"])
def test_the_offline_warning_points_at_the_users_call(store_path, monkeypatch, launch):
    """However the launch reaches the Autotuner (through Triton's heuristics, or a launch helper
    of tunekit.kernels), the warning names the line of the user's code that launched."""
    monkeypatch.setenv("TUNEKIT_MODE", "offline")
    kernel = tunekit.autotune(space=vector_add.space(), key=["n"], store=store_path)(vector_add.add_kernel)
    if launch == "heuristics_over_autotune":
        kernel = triton.heuristics({"unused": lambda args: 0})(kernel)
    x, y, out = vector_add.inputs(N)
    with pytest.warns(RuntimeWarning, match="did not tune add_kernel") as caught:
        if launch == "kernel.run":
            kernel.run(x, y, out, N, grid=vector_add.grid(N), warmup=False)
        elif launch == "shipped_launch":
            vector_add.launch(kernel, x, y, out)
        else:
            kernel[vector_add.grid(N)](x, y, out, N)
    assert [w.filename for w in caught] == [__file__]


def test_print_autotuning_prints_what_stock_prints(capsys, monkeypatch):
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")
    clock = FakeClock()
    kernel = tunekit.autotune(add_configs(clock), key=["n"], do_bench=clock, store=None)(vector_add.add_kernel)
    launch_add(kernel)
    printed = capsys.readouterr().out
    assert "Triton autotuning for function add_kernel" in printed and "best config selected: BLOCK: 512" in printed
    assert f"pass {kernel.tuning_report.pin}" in printed


def test_configs_shows_the_winners_once_tuned_so_torch_compile_does_not_sweep_the_space(store_path):
    """Inductor benchmarks every entry of ``kernel.configs`` when it traces a call."""
    def make():
        return tunekit.autotune(space=vector_add.space(), key=["n"], strategy="random", budget=Budget(evals=3),
                                store=store_path)(vector_add.add_kernel)

    kernel = make()
    assert len(kernel.configs) == len(vector_add.space())  # nothing tuned yet: the whole Space
    launch_add(kernel, n=4096)
    launch_add(kernel, n=1 << 14)
    winners = {json.dumps(c.all_kwargs(), sort_keys=True) for c in kernel.configs}
    assert 1 <= len(kernel.configs) <= 2 and winners <= {json.dumps(c.all_kwargs(), sort_keys=True)
                                                          for c, _, _ in kernel._tuned.values()}
    from_store = {json.dumps(c.all_kwargs(), sort_keys=True) for c in make().configs}
    assert from_store == winners  # a new process gets them from the store


def test_progress_bar_shows_the_budget(capsys):
    kernel = tunekit.autotune(space=vector_add.space(), key=["n"], strategy="random", budget=Budget(evals=3),
                              store=None, progress=True)(vector_add.add_kernel)
    launch_add(kernel)
    err = capsys.readouterr().err
    assert "tuning add_kernel" in err and "0/3" in err  # its total is the budget (later frames depend on timing)


@pytest.mark.parametrize("strategy", [None, "rf", "optuna"])
def test_learned_strategies_tune_a_real_kernel_and_learn_across_keys(tmp_path, strategy):
    """The default (no strategy named), ``rf`` and ``optuna`` tune vector addition under the
    interpreter into one store at two sizes; the second tuning starts from the first's trials."""
    from tunekit.kernels import vector_add

    store_path = tmp_path / "store.db"
    sizes = (4096, 8192)
    for n in sizes:
        kernel = tunekit.autotune(space=vector_add.space(), key=["n"], strategy=strategy, budget=Budget(evals=6),
                                  store=store_path, seed=0)(vector_add.add_kernel)
        x, y, out = vector_add.inputs(n)
        vector_add.launch(kernel, x, y, out)
        torch.testing.assert_close(out, x + y)
        assert sum(t.source == "measured" for t in kernel.trials) == 6
    runs = kernel.store.runs(kernel="add_kernel")
    assert [r["strategy"] for r in runs] == [strategy or "default"] * 2
    assert len(kernel.store.history(kernel.identity)) >= 12  # what the second tuning was given and added to


def test_a_space_whose_constraints_reject_every_config_is_refused_at_decoration(tmp_path):
    from tunekit.kernels import vector_add

    space = Space(BLOCK=[256, 512], num_warps=[4], constraints=[lambda c: c["BLOCK"] > 4096])
    with pytest.raises(ValueError, match="The constraints of this Space reject every one of its 2 configs"):
        tunekit.autotune(space=space, key=["n"], store=tmp_path / "store.db")(vector_add.add_kernel)


@pytest.mark.parametrize("stop", ["SIGKILL", "SIGTERM"])
def test_a_tuning_killed_mid_way_resumes_without_measuring_anything_twice(tmp_path, stop):
    """Injected: SIGKILL (or SIGTERM, a job scheduler's timeout) to a process tuning vector addition
    exhaustively (20 configs, 0.2 s per benchmark) once the store holds 5 trials. Survives: every
    committed trial; the next tuning measures only the configs the store lacks and finishes. The
    one in flight at a SIGKILL is recorded as crashed; at a SIGTERM (default action) it is not,
    and is measured again."""
    import os
    import signal
    import sqlite3
    import subprocess
    import sys
    import textwrap
    import time

    from tunekit.config import config_json
    from tunekit.kernels import vector_add

    store_path = tmp_path / "store.db"
    script = textwrap.dedent(f"""
        import time, tunekit
        from tunekit.kernels import vector_add
        def slow(fn, **_):
            fn(); time.sleep(0.2); return 1.0
        kernel = tunekit.autotune(space=vector_add.space(), key=["n"], strategy="exhaustive",
                                  store={str(store_path)!r}, do_bench=slow)(vector_add.add_kernel)
        x, y, out = vector_add.inputs(4096)
        vector_add.launch(kernel, x, y, out)
    """)
    process = subprocess.Popen([sys.executable, "-c", script], env=dict(os.environ, TRITON_INTERPRET="1"))
    try:
        deadline = time.time() + 120
        committed = in_flight = 0
        # killed while a config is in flight: right after a commit the next mark may not be written yet
        while (committed < 5 or not in_flight) and time.time() < deadline and process.poll() is None:
            time.sleep(0.05)
            if not store_path.exists():
                continue
            try:  # the child may still be creating the store's tables
                committed = len([r for r in ResultsStore(store_path).rows() if r["source"] == "measured"])
                with sqlite3.connect(store_path) as connection:
                    (in_flight,) = connection.execute("SELECT COUNT(*) FROM in_flight").fetchone()
            except Exception:  # noqa: BLE001 - any failure to read here means: not yet
                continue
        process.send_signal(getattr(signal, stop))
    finally:
        process.wait()
    assert process.returncode == -getattr(signal, stop)  # ended by the signal, as without tunekit
    before = [r for r in ResultsStore(store_path).rows() if r["source"] == "measured"]
    assert 5 <= len(before) < len(vector_add.space())
    assert len({r["config"] for r in before}) == len(before)

    kernel = tunekit.autotune(space=vector_add.space(), key=["n"], strategy="exhaustive", store=store_path,
                              do_bench=lambda fn, **_: (fn(), 1.0)[1])(vector_add.add_kernel)
    x, y, out = vector_add.inputs(4096)
    vector_add.launch(kernel, x, y, out)
    torch.testing.assert_close(out, x + y)
    measured = [t for t in kernel.trials if t.source == "measured"]
    answered = [t for t in kernel.trials if t.source == "store"]
    if stop == "SIGTERM":  # its mark cleared before the process ended: nothing crashed, all measured
        assert not [t for t in answered if t.crashed] and len(answered) == len(before)
        assert {t.config_id for t in measured} | {r["config"] for r in before} == {
            config_json(c) for c in vector_add.space().configs()}
        return
    # the config in flight at the kill is recorded as crashed (nothing tells a kill from outside from
    # a segfault); this tuning runs in-process (its do_bench cannot go to a worker), so it is not
    # launched again: the crash is its answer
    (crashed,) = [t for t in answered if t.crashed]
    assert len(answered) == len(before) + 1 and len(measured) == len(vector_add.space()) - len(before) - 1
    earlier = {r["config"] for r in before} | {crashed.config_id}  # the store keeps config_json text
    assert {t.config_id for t in measured}.isdisjoint(earlier)
    assert {t.config_id for t in measured} | earlier == {config_json(c) for c in vector_add.space().configs()}


@triton.jit
def add_maybe_bias(x_ptr, bias_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out = x (+ bias when ``bias_ptr`` is a tensor): an optional pointer, so the key's dtypes
    hold one entry fewer when it is None."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    if bias_ptr is not None:
        x += tl.load(bias_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x, mask=mask)


@pytest.mark.parametrize("strategy", ["default", "rf"])
def test_learned_strategies_tune_keys_of_another_shape_in_one_store(tmp_path, strategy):
    """The store's history mixes keys with and without an optional pointer's dtype, and keys of
    an earlier ``key=``: the perf model must neither crash on them nor refuse to tune."""
    store_path = tmp_path / "store.db"
    for key, with_bias, n in ((["n"], True, N), (["n"], False, N), ([], True, N), (["n"], True, 2 * N)):
        kernel = tunekit.autotune(space=vector_add.space(), key=key, strategy=strategy, budget=Budget(evals=12),
                                  store=store_path, seed=0)(add_maybe_bias)
        x, bias, out = vector_add.inputs(n)
        kernel[vector_add.grid(n)](x, bias if with_bias else None, out, n)
        torch.testing.assert_close(out, x + bias if with_bias else x)
        assert sum(t.source == "measured" for t in kernel.trials) == 12  # each key is new: a tuning, no crash
        assert kernel.best_config in vector_add.space()
