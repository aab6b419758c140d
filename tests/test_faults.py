"""Fault injection: configs that crash, hang, fail, compute wrong results, write in place or
store out of bounds.

Every kernel here runs for real under the Triton interpreter. Each test names what it injects
and asserts what survived: the trials and their statuses, the winner, the caller's tensors and
the store.
"""

from __future__ import annotations

import json
import math
import os
import re

import pytest
import torch
import triton
import triton.language as tl

import tunekit
from tunekit import Space, Status
from tunekit.check import OutputCheck, default_tolerance, norm_relative_error, relative_error
from tunekit.kernels import vector_add
from tunekit.service import service
from tunekit.store import ResultsStore
from tunekit.testing import faults

N = 4096


def times_by_block(times: dict[int, float]):
    """A do_bench that runs the kernel and reports a fixed time per BLOCK (so a test picks the fastest)."""
    state = {}

    def pre_hook(nargs):
        state["block"] = nargs["BLOCK"]

    def do_bench(kernel_call, quantiles=None):
        kernel_call()
        t = times[state["block"]]
        return [t, t, t]

    return pre_hook, do_bench


def space_with_hook(blocks, pre_hook):
    return [tunekit.Config({"BLOCK": b}, num_warps=4, pre_hook=pre_hook) for b in blocks]


# -- the comparison itself --------------------------------------------------------------------------


def test_tolerance_admits_another_reduction_order_and_catches_one_wrong_tile():
    """bf16 GEMM 256x256x512: summing K in 4 chunks instead of at once stays within the bf16
    tolerance; the same product with one 16x16 tile of 256 zeroed does not."""
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(256, 512, generator=generator), torch.randn(512, 256, generator=generator)
    a, b = a.bfloat16().double(), b.bfloat16().double()
    exact = (a @ b).bfloat16()
    chunked = sum((a[:, k:k + 128].float() @ b[k:k + 128].float() for k in range(0, 512, 128))).bfloat16()
    tolerance = default_tolerance(torch.bfloat16)
    assert 0 < relative_error(chunked, exact) < tolerance
    wrong_tile = chunked.clone()
    wrong_tile[16:32, 64:80] = 0
    assert relative_error(wrong_tile, exact) > 10 * tolerance


def test_the_recordings_norm_error_averages_what_the_check_sees_element_by_element():
    """The recorded spaces' error (Frobenius norm) is an average: one zeroed 16x16 tile of 256
    moves it by about sqrt(1/256), a tenth of what the check's element-wise error reports for the
    same tile; NaN is infinite for both."""
    generator = torch.Generator().manual_seed(0)
    exact = torch.randn(256, 256, generator=generator)
    assert norm_relative_error(exact * 1.01, exact) == pytest.approx(0.01, rel=1e-4)
    wrong_tile = exact.clone()
    wrong_tile[16:32, 64:80] = 0
    assert norm_relative_error(wrong_tile, exact) == pytest.approx(1 / 16, rel=0.2)
    assert relative_error(wrong_tile, exact) > 10 * norm_relative_error(wrong_tile, exact)
    wrong_tile[0, 0] = float("nan")
    assert norm_relative_error(wrong_tile, exact) == relative_error(wrong_tile, exact) == math.inf
    assert norm_relative_error(exact[:, :1], exact[:, 0]) == math.inf  # no broadcasting into agreement


def test_nan_infinity_and_integers():
    ref = torch.tensor([1.0, 2.0, float("nan"), float("inf")])
    assert relative_error(ref.clone(), ref) == 0.0  # NaN and inf at the same places agree
    assert relative_error(torch.tensor([1.0, float("nan"), float("nan"), float("inf")]), ref) == math.inf
    assert relative_error(torch.tensor([1.0, 2.0, float("nan"), 5.0]), ref) == math.inf
    assert relative_error(torch.tensor([1, 2, 3]), torch.tensor([1, 2, 3])) == 0.0
    assert relative_error(torch.tensor([1, 2, 4]), torch.tensor([1, 2, 3])) == math.inf
    assert default_tolerance(torch.int32) == 0.0


def test_check_warm_up_judges_nothing_and_takes_every_dtype():
    """A benchmark worker warms the check's comparisons up on its inputs before the first config:
    inputs of every kind (NaN, integers, booleans, empty, non-contiguous) neither fail nor change
    what the check will judge."""
    inputs = {"x": torch.tensor([float("nan"), 1.0, 2.0]), "i": torch.arange(4, dtype=torch.int32),
              "flags": torch.tensor([True, False]), "empty": torch.empty(0), "t": torch.ones(3, 2).t()}
    check = OutputCheck()
    check.snapshot(inputs)
    check.warm_up()
    assert (check.expected, check.counts.judged, check.counts.wrong) == (None, set(), set())
    assert all(torch.equal(check.pristine[name].nan_to_num(), value.nan_to_num()) for name, value in inputs.items())


# -- in this process ----------------------------------------------------------------------------------


def test_a_wrong_config_is_a_wrong_trial_and_never_wins_even_when_fastest(store_path):
    """Injected: WRONG_BLOCK skips its last tile and is timed 10x faster than the rest.
    Survives: it is a `wrong` trial with its error in the store; the winner computes x + y."""
    pre_hook, do_bench = times_by_block({64: 2.0, faults.WRONG_BLOCK: 0.1, 2048: 1.0})
    kernel = tunekit.autotune(space_with_hook([64, faults.WRONG_BLOCK, 2048], pre_hook), key=["n"],
                              do_bench=do_bench, store=store_path, isolate=False)(faults.faulty_add)
    x, y, out = vector_add.inputs(N)
    out.zero_()  # no NaN to give the wrong tile away: the comparison must
    vector_add.launch(kernel, x, y, out)
    torch.testing.assert_close(out, x + y)
    statuses = {t.config.kwargs["BLOCK"]: t.status for t in kernel.trials if t.source == "measured"}
    assert statuses == {64: Status.OK, faults.WRONG_BLOCK: Status.WRONG, 2048: Status.OK}
    assert kernel.best_config.kwargs["BLOCK"] == 2048
    (row,) = [r for r in ResultsStore(store_path).rows() if r["status"] == "wrong"]
    assert "output out_ptr differs from BLOCK: 64" in row["error"] and "tolerance 0.01" in row["error"]
    assert row["relative_error"] > 0.1
    assert all(r["relative_error"] == 0.0 for r in ResultsStore(store_path).rows() if r["source"] == "measured"
               and r["status"] == "ok")


def test_without_a_check_the_fastest_wrong_config_wins():
    """The same fault with check=False: the wrong config is timed like any other and wins, as in stock Triton."""
    pre_hook, do_bench = times_by_block({64: 2.0, faults.WRONG_BLOCK: 0.1, 2048: 1.0})
    kernel = tunekit.autotune(space_with_hook([64, faults.WRONG_BLOCK, 2048], pre_hook), key=["n"],
                              do_bench=do_bench, store=None, check=False)(faults.faulty_add)
    x, y, out = vector_add.inputs(N)
    vector_add.launch(kernel, x, y, out)
    assert kernel.best_config.kwargs["BLOCK"] == faults.WRONG_BLOCK
    fresh = torch.full_like(out, float("nan"))
    vector_add.launch(kernel, x, y, fresh)
    assert fresh[-faults.WRONG_BLOCK:].isnan().all() and torch.equal(fresh[:-faults.WRONG_BLOCK], (x + y)[:-faults.WRONG_BLOCK])


def add_in_place(x_ptr, y_ptr, out_ptr, n):
    torch.add(x_ptr, y_ptr, out=out_ptr)


@triton.jit
def log_of(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.log(tl.load(x_ptr + offsets, mask=mask)), mask=mask)


def test_outputs_that_hold_infinity_by_right_are_tuned_when_two_configs_agree(store_path):
    """Not a fault: log of an input with zeros puts -inf in the output, as stock Triton computes it.
    Survives: the first config, alone, cannot be told right (it is `wrong`); the second agrees with
    it, NaN and infinity at the same places, so their outputs are the reference; the call returns
    the log and does not raise."""
    x = torch.rand(1000)
    x[::7] = 0.0
    out = torch.empty(1000)
    kernel = tunekit.autotune([tunekit.Config({"BLOCK": b}, num_warps=4) for b in (64, 128, 256)], key=["n"],
                              store=store_path, isolate=False)(log_of)
    kernel[lambda meta: (triton.cdiv(1000, meta["BLOCK"]),)](x, out, 1000)
    assert [t.status for t in kernel.trials] == [Status.WRONG, Status.OK, Status.OK]
    torch.testing.assert_close(out, torch.log(x))
    assert bool(torch.isinf(out).any())


@pytest.mark.parametrize("reference", [add_in_place, lambda x_ptr, y_ptr, **_: {"out_ptr": x_ptr + y_ptr}],
                         ids=["writes-its-outputs", "returns-them"])
def test_a_reference_function_catches_a_wrong_first_config(store_path, reference):
    """Injected: the first config to run is the wrong one. Without a reference its output would be
    trusted; with reference= it is `wrong` and the two correct configs are `ok`."""
    kernel = tunekit.autotune(space=Space(BLOCK=[faults.WRONG_BLOCK, 64, 2048], num_warps=[4]), key=["n"],
                              strategy="exhaustive", store=store_path, reference=reference)(faults.faulty_add)
    x, y, out = vector_add.inputs(N)
    out.zero_()
    vector_add.launch(kernel, x, y, out)
    statuses = {t.config.kwargs["BLOCK"]: t.status for t in kernel.trials}
    assert statuses == {faults.WRONG_BLOCK: Status.WRONG, 64: Status.OK, 2048: Status.OK}
    (row,) = [r for r in ResultsStore(store_path).rows() if r["status"] == "wrong"]
    assert "differs from the reference function" in row["error"]
    torch.testing.assert_close(out, x + y)


@triton.jit
def add_writing_an_input(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    value = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, value, mask=mask)
    if BLOCK == 512:  # a stray store into an input
        tl.store(x_ptr + offsets, value, mask=mask)


def test_a_config_that_writes_an_input_is_wrong_unless_outputs_are_named():
    """Injected: BLOCK 512 also overwrites its input x. By default that is `wrong` (the reference
    leaves x alone); with check_outputs=["out_ptr"] only out is compared and it is `ok`. Either way
    the caller's x is the original after the tuning."""
    for check_outputs, expected in ((None, Status.WRONG), (["out_ptr"], Status.OK)):
        kernel = tunekit.autotune(space=Space(BLOCK=[256, 512], num_warps=[4]), key=["n"], strategy="exhaustive",
                                  store=None, check_outputs=check_outputs)(add_writing_an_input)
        x, y, out = vector_add.inputs(N)
        x_before = x.clone()
        kernel.run(x, y, out, N, grid=lambda meta: (triton.cdiv(N, meta["BLOCK"]),), warmup=False)
        statuses = {t.config.kwargs["BLOCK"]: t.status for t in kernel.trials}
        assert statuses == {256: Status.OK, 512: expected}
        if expected is Status.WRONG:
            assert "it wrote x_ptr" in kernel.trials[1].error
            assert torch.equal(x, x_before)


@triton.jit
def accumulate(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """x += y, in place."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def test_an_in_place_kernel_sees_the_callers_inputs_at_its_final_launch():
    """Injected: an in-place kernel (x += y) with nothing declared in restore_value, benchmarked 3
    times per config. Stock triton.autotune leaves x advanced by every benchmark run; tunekit's
    final launch starts from the caller's x, so x == x0 + y exactly."""
    def three_runs(kernel_call, quantiles=None):
        for _ in range(3):
            kernel_call()
        return [1.0, 1.0, 1.0]

    grid = lambda meta: (triton.cdiv(N, meta["BLOCK"]),)  # noqa: E731
    configs = [tunekit.Config({"BLOCK": b}, num_warps=4) for b in (256, 512)]
    results = {}
    for name, decorate in (("stock", triton.autotune), ("tunekit", tunekit.autotune)):
        options = {"store": None} if name == "tunekit" else {}
        kernel = decorate(configs, key=["n"], do_bench=three_runs, **options)(accumulate)
        x, y, _ = vector_add.inputs(N)
        x0 = x.clone()
        kernel[grid](x, y, N)
        results[name] = (x, x0 + y)
    assert torch.equal(*results["tunekit"])
    assert not torch.allclose(*results["stock"])


def three_runs(kernel_call, quantiles=None):
    """A do_bench that runs the kernel 3 times: in-place kernels advance their tensors 3 times."""
    for _ in range(3):
        kernel_call()
    return [1.0, 1.0, 1.0]


def test_without_a_check_configs_are_still_timed_on_copies():
    """check=False with the in-place x += y, run 3 times per config by the timer: the configs are
    timed on copies, so the caller's x is never advanced and x == x0 + y after the final launch."""
    kernel = tunekit.autotune([tunekit.Config({"BLOCK": b}, num_warps=4) for b in (256, 512)], key=["n"],
                              do_bench=three_runs, store=None, check=False)(accumulate)
    x, y, _ = vector_add.inputs(N)
    x0 = x.clone()
    kernel[lambda meta: (triton.cdiv(N, meta["BLOCK"]),)](x, y, N)
    assert [t.status for t in kernel.trials] == [Status.OK, Status.OK]
    assert torch.equal(x, x0 + y)


def test_without_memory_for_the_copies_tuning_runs_on_the_callers_tensors_with_one_warning(monkeypatch):
    """Injected: the allocation of the guarded copies fails as on a full GPU (torch.OutOfMemoryError).
    Survives: one RuntimeWarning, at the caller's line, says out-of-bounds writes cannot be caught;
    the configs are checked and timed on the caller's tensors as before, whose pristine values
    come back afterwards (the in-place x += y still ends as x0 + y)."""
    import tunekit.guarded

    def full(nbytes, device):
        raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {nbytes} bytes")

    monkeypatch.setattr(tunekit.guarded, "_allocate", full)
    kernel = tunekit.autotune([tunekit.Config({"BLOCK": b}, num_warps=4) for b in (256, 512)], key=["n"],
                              do_bench=three_runs, store=None)(accumulate)
    x, y, _ = vector_add.inputs(N)
    x0 = x.clone()
    with pytest.warns(RuntimeWarning, match="out-of-bounds writes cannot be caught for this tuning") as caught:
        kernel[lambda meta: (triton.cdiv(N, meta["BLOCK"]),)](x, y, N)
    assert [w.filename for w in caught if "out-of-bounds" in str(w.message)] == [__file__]
    assert [t.status for t in kernel.trials] == [Status.OK, Status.OK]
    assert torch.equal(x, x0 + y)


def test_the_check_keeps_the_callers_tensors_as_its_pristine_values_not_clones():
    """Configs run on guarded copies and never write the caller's tensors, so the check's pristine
    values are those tensors themselves: tuning holds one copy of each tensor argument, not two.
    (Measured with the address space capped, this was flaky: the cap's margin depends on how many
    threads' malloc arenas a run reserves.)"""
    from tunekit.runner import LocalRunner

    kernel = tunekit.autotune([tunekit.Config({"BLOCK": 128}, num_warps=4)], key=["n"], store=None)(
        vector_add.add_kernel)
    x, y, out = vector_add.inputs(N)
    runner = LocalRunner(kernel.launch, (x, y, out, N), {"grid": vector_add.grid(N), "warmup": False},
                         kernel.launch.output_check())
    callers = {"x_ptr": x, "y_ptr": y, "out_ptr": out}
    assert {name: t.data_ptr() for name, t in runner.check.pristine.items()} == \
        {name: t.data_ptr() for name, t in callers.items()}
    assert all(runner.nargs[name].data_ptr() != t.data_ptr() for name, t in callers.items())  # runs on copies


# -- out-of-bounds stores -------------------------------------------------------------------------------

#: Elements of the overrunning tests' vectors: not a multiple of their BLOCKs, so the last tile
#: reaches past the end and a loose mask lets its stores through.
M = 4000
CORRECT = {"BLOCK": 128, "PAST_END": 0, "BEFORE_START": 0}
PAST_THE_END = {"BLOCK": 64, "PAST_END": faults.OVERRUN, "BEFORE_START": 0}
BEFORE_THE_START = {"BLOCK": 64, "PAST_END": 0, "BEFORE_START": faults.OVERRUN}


#: Elements of the caller's allocation beside ``out`` in the overrunning tests: fewer than the
#: overrun, so that its last 20 of 24 elements (80 of 96 bytes) land past the allocation's end.
PADDING = 4


def beside_a_sentinel(n: int, side: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``out`` (NaN) as a view of a slightly larger allocation, and the rest of it (``PADDING``
    elements of 7.0) right after out or right before it: the caller's padding, which a config
    may write (on its copy, while tuning) and an overrun runs through and past."""
    buffer = torch.full((n + PADDING,), 7.0)
    out, sentinel = (buffer[:n], buffer[n:]) if side == "after" else (buffer[PADDING:], buffer[:PADDING])
    out.fill_(float("nan"))
    return out, sentinel


@pytest.mark.parametrize("side", ["after", "before"])
def test_a_store_outside_out_is_wrong_and_the_memory_beside_out_survives(store_path, side):
    """Injected: BLOCK 64 stores 24 floats (96 bytes) past the end of out (its mask one tile too
    loose) or before its start, is the first config (so it would be the reference) and is timed
    10x faster than the correct BLOCK 128; out is a view of an allocation whose 4 other floats,
    beside out, are a sentinel, so 80 of the 96 bytes land past the allocation. Survives: BLOCK 64
    is `wrong`, its error in the store naming out_ptr, the guard band, the 80 bytes in it and
    their reach from out; BLOCK 128 wins; out == x + y; the sentinel, x and y are unchanged."""
    pre_hook, do_bench = times_by_block({64: 0.1, 128: 1.0})
    bad = PAST_THE_END if side == "after" else BEFORE_THE_START
    configs = [tunekit.Config(config, num_warps=4, pre_hook=pre_hook) for config in (bad, CORRECT)]
    kernel = tunekit.autotune(configs, key=["n"], do_bench=do_bench, store=store_path,
                              isolate=False)(faults.overrunning_add)
    x, y, _ = vector_add.inputs(M)
    x0, y0 = x.clone(), y.clone()
    out, sentinel = beside_a_sentinel(M, side)
    vector_add.launch(kernel, x, y, out)
    assert {t.config.kwargs["BLOCK"]: t.status for t in kernel.trials} == {64: Status.WRONG, 128: Status.OK}
    assert kernel.best_config.kwargs == CORRECT
    assert torch.equal(out, x + y) and torch.equal(x, x0) and torch.equal(y, y0)
    assert bool((sentinel == 7.0).all())
    (row,) = [r for r in ResultsStore(store_path).rows() if r["status"] == "wrong"]
    reach = "96 bytes past its end" if side == "after" else "96 bytes before its start"
    where = "past the end of" if side == "after" else "before the start of"
    assert re.fullmatch(f"out-of-bounds store: it wrote 80 bytes into the guard band {side} out_ptr, up to {reach}; "
                        rf"changed \d+ bytes of the caller's allocation {where} out_ptr, up to \d+ bytes away",
                        row["error"]), row["error"]


def test_a_store_past_the_end_while_timed_makes_a_checked_config_wrong():
    """Injected: a timer that, after running BLOCK 64, stores 24 floats past the end of the out it
    was launched on, as a config whose overrun shows only in some launches would. Survives: BLOCK 64
    passed the check but is `wrong` (the store while timed named), untimed; BLOCK 128 wins; the
    sentinel after the caller's out is unchanged."""
    launched_on = {}

    def remember_out(nargs):
        launched_on.update(block=nargs["BLOCK"], out=nargs["out_ptr"])

    def storing_past_the_end(kernel_call, quantiles=None):
        kernel_call()
        out = launched_on["out"]
        if launched_on["block"] == 64:
            torch.as_strided(out, (faults.OVERRUN,), (1,), out.storage_offset() + out.numel()).fill_(2.0)
        return [1.0, 1.0, 1.0]

    in_bounds = {**CORRECT, "BLOCK": 64}  # the kernel itself stays in bounds: the check passes it
    configs = [tunekit.Config(config, num_warps=4, pre_hook=remember_out) for config in (CORRECT, in_bounds)]
    kernel = tunekit.autotune(configs, key=["n"], do_bench=storing_past_the_end, store=None,
                              isolate=False)(faults.overrunning_add)
    x, y, _ = vector_add.inputs(M)
    out, sentinel = beside_a_sentinel(M, "after")
    vector_add.launch(kernel, x, y, out)
    assert [t.status for t in kernel.trials] == [Status.OK, Status.WRONG]
    wrong = kernel.trials[1]
    assert wrong.error.startswith("while timed, out-of-bounds store: it wrote 80 bytes into the guard band after "
                                  "out_ptr") and wrong.timing is None and wrong.relative_error == 0.0
    assert kernel.best_config.kwargs == CORRECT
    assert torch.equal(out, x + y) and bool((sentinel == 7.0).all())


def to_x_and_out(x_ptr, y_ptr, **_):
    """The reference of an in-place add whose x_ptr and out_ptr are one tensor: both end as x + y."""
    return {"x_ptr": x_ptr + y_ptr, "out_ptr": x_ptr + y_ptr}


def test_an_in_place_call_with_one_tensor_twice_tunes_on_one_copy_and_its_overrun_is_caught():
    """Injected: add(x, y, out=x), x passed as input and output, with BLOCK 64 storing 24 floats
    past x's end; the reference says x_ptr and out_ptr both end as x + y, which holds only if the
    copies keep them one tensor. Survives: BLOCK 64 `wrong` (the guard band after x_ptr/out_ptr),
    BLOCK 128 `ok` and the winner, x == x0 + y after the final launch, the sentinel after x unchanged."""
    kernel = tunekit.autotune([tunekit.Config(config, num_warps=4) for config in (PAST_THE_END, CORRECT)], key=["n"],
                              store=None, reference=to_x_and_out, isolate=False)(faults.overrunning_add)
    _, y, _ = vector_add.inputs(M)
    x, sentinel = beside_a_sentinel(M, "after")
    x.copy_(torch.arange(M, dtype=torch.float32))
    x0 = x.clone()
    vector_add.launch(kernel, x, y, x)
    assert [t.status for t in kernel.trials] == [Status.WRONG, Status.OK]
    assert "guard band after x_ptr/out_ptr" in kernel.trials[0].error
    assert kernel.best_config.kwargs == CORRECT
    assert torch.equal(x, x0 + y) and bool((sentinel == 7.0).all())


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "in-a-worker"])
def test_an_unmasked_store_into_the_padding_is_legal_for_a_kernel_that_says_it_writes_padding(isolate):
    """Not a fault with ``writes_padding=True``: out is the first 1000 elements of a 1024-element
    allocation and the kernel stores all 1024 unmasked, which stock Triton runs. Survives: both
    configs are `ok`, and the final launch fills the padding as stock Triton's does. Without the
    option, both are `wrong` (they change the caller's allocation outside out) and nothing is tuned."""
    padded = torch.full((1024,), 7.0)
    out, x = padded[:1000], torch.arange(1024, dtype=torch.float32)
    configs = [tunekit.Config({"BLOCK": b}, num_warps=4) for b in (256, 512)]
    kernel = tunekit.autotune(configs, key=["n"], store=None, isolate=isolate,
                              writes_padding=True)(faults.add_one_unmasked)
    kernel[lambda meta: (1024 // meta["BLOCK"],)](x, out, 1000)
    assert [t.status for t in kernel.trials] == [Status.OK, Status.OK], [t.error for t in kernel.trials]
    assert torch.equal(padded, x + 1)
    padded.fill_(7.0)
    strict = tunekit.autotune(configs, key=["n"], store=None, isolate=isolate)(faults.add_one_unmasked)
    with pytest.raises(tunekit.TuningError, match="2 wrong"):
        strict[lambda meta: (1024 // meta["BLOCK"],)](x, out, 1000)
    assert bool((padded == 7.0).all())


def test_a_store_past_a_slice_into_the_rest_of_its_buffer_is_wrong(store_path):
    """Injected: out and neighbour are the two halves of one buffer, and BLOCK 64 (timed 10x faster
    than the correct BLOCK 128) stores 24 floats past out's end, into neighbour: no guard band can
    sit there. Survives: BLOCK 64 is `wrong`, its error naming the store into the caller's
    allocation past out_ptr; BLOCK 128 wins; out == x + y and neighbour is unchanged."""
    pre_hook, do_bench = times_by_block({64: 0.1, 128: 1.0})
    configs = [tunekit.Config(config, num_warps=4, pre_hook=pre_hook) for config in (PAST_THE_END, CORRECT)]
    kernel = tunekit.autotune(configs, key=["n"], do_bench=do_bench, store=store_path,
                              isolate=False)(faults.overrunning_add)
    x, y, _ = vector_add.inputs(M)
    buffer = torch.full((2 * M,), 7.0)
    out, neighbour = buffer[:M], buffer[M:]
    vector_add.launch(kernel, x, y, out)
    assert {t.config.kwargs["BLOCK"]: t.status for t in kernel.trials} == {64: Status.WRONG, 128: Status.OK}
    assert kernel.best_config.kwargs == CORRECT
    assert torch.equal(out, x + y) and bool((neighbour == 7.0).all())
    (row,) = [r for r in ResultsStore(store_path).rows() if r["status"] == "wrong"]
    assert re.fullmatch(r"out-of-bounds store: it changed \d+ bytes of the caller's allocation past the end of out_ptr, "
                        r"up to \d+ bytes away", row["error"]), row["error"]


@triton.jit
def add_one_through_a_tuple(x_ptr, outs, n, BLOCK: tl.constexpr):
    """outs[0] = x + 1: the output reached through a tuple argument."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(outs[0] + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)


def test_a_tensor_also_reached_through_a_tuple_is_checked_from_its_value_before_tuning():
    """Injected: x passed as x_ptr and inside the tuple outs, so x = x + 1 in place through the
    tuple, whose tensors are the caller's (not copied). Configs write the caller's x, so the check
    cannot take the caller's x as x_ptr's pristine value; it keeps a clone. Survives: each check
    starts from x's value before tuning, both configs are `ok` (integers: any drift is an error)."""
    x = torch.arange(1000, dtype=torch.int32)
    kernel = tunekit.autotune([tunekit.Config({"BLOCK": b}, num_warps=4) for b in (256, 512)], key=["n"],
                              do_bench=three_runs, store=None, isolate=False)(add_one_through_a_tuple)
    kernel[vector_add.grid(1000)](x, (x,), 1000)
    assert [t.status for t in kernel.trials] == [Status.OK, Status.OK], [t.error for t in kernel.trials]


# -- in a worker process --------------------------------------------------------------------------------


def test_isolated_tuning_survives_a_segfault_a_hang_a_failed_assert_and_a_wrong_result(store_path):
    """Injected, one config each: an out-of-bounds store that segfaults the process running it, a
    kernel that never returns, a failed static assertion, a skipped tile. Survives: the caller's
    process; all 6 configs are trials with those statuses in the store; the winner is a correct
    config; the caller's out holds x + y and its inputs are untouched."""
    service().shutdown(keep_zygote=True)  # no warm worker from an earlier test: this tuning starts each one
    kernel = tunekit.autotune(space=faults.space(), key=["n"], strategy="exhaustive", store=store_path,
                              isolate=True, run_timeout=5)(faults.faulty_add)
    x, y, out = vector_add.inputs(N)
    x0, y0 = x.clone(), y.clone()
    vector_add.launch(kernel, x, y, out)
    assert torch.equal(out, x + y) and torch.equal(x, x0) and torch.equal(y, y0)
    by_block = {t.config.kwargs["BLOCK"]: t for t in kernel.trials}
    assert {block: t.status for block, t in by_block.items()} == {
        faults.SEGFAULT_BLOCK: Status.RUNTIME_ERROR, faults.HANG_BLOCK: Status.TIMEOUT,
        faults.WRONG_BLOCK: Status.WRONG, faults.RAISE_BLOCK: Status.RUNTIME_ERROR,
        **{block: Status.OK for block in faults.GOOD_BLOCKS},
    }
    assert "killed by SIGSEGV" in by_block[faults.SEGFAULT_BLOCK].error
    assert "exceeded 5.0 s" in by_block[faults.HANG_BLOCK].error
    assert "AssertionError" in by_block[faults.RAISE_BLOCK].error
    assert kernel.best_config.kwargs["BLOCK"] in faults.GOOD_BLOCKS
    assert kernel.benchmark_workers_started == 3  # the first, one after the segfault, one after the hang
    store = ResultsStore(store_path)
    measured = [r for r in store.rows() if r["source"] == "measured"]
    assert sorted(r["status"] for r in measured) == sorted(t.status.value for t in by_block.values())
    (run,) = store.runs()
    assert run["evaluations"] == 6 and run["finished_at"] is not None


def test_a_benchmark_worker_catches_a_store_past_the_end_too():
    """Injected: BLOCK 64 stores 24 floats past out's end, tuned in a benchmark worker
    (isolate=True). Survives: the worker's copies have guard bands too: BLOCK 64 is `wrong`
    naming out_ptr and the band, BLOCK 128 wins, the caller's out == x + y and the sentinel after
    it is unchanged."""
    kernel = tunekit.autotune([tunekit.Config(config, num_warps=4) for config in (PAST_THE_END, CORRECT)], key=["n"],
                              store=None, isolate=True)(faults.overrunning_add)
    x, y, _ = vector_add.inputs(M)
    out, sentinel = beside_a_sentinel(M, "after")
    vector_add.launch(kernel, x, y, out)
    assert [t.status for t in kernel.trials] == [Status.WRONG, Status.OK]
    assert "80 bytes into the guard band after out_ptr, up to 96 bytes past its end" in kernel.trials[0].error
    assert kernel.best_config.kwargs == CORRECT
    assert torch.equal(out, x + y) and bool((sentinel == 7.0).all())


def test_isolation_needs_a_kernel_a_worker_can_import():
    """A kernel defined inside a function cannot be rebuilt in a worker: isolate=True says so
    before anything runs there; left to its default, tuning happens in this process."""
    @triton.jit
    def local_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + tl.load(y_ptr + offsets))

    kernel = tunekit.autotune(space=Space(BLOCK=[256, 512]), key=["n"], store=None, isolate=True)(local_add)
    x, y, out = vector_add.inputs(N)
    with pytest.raises(tunekit.isolation.IsolationError, match="inside a function"):
        vector_add.launch(kernel, x, y, out)


def test_a_benchmark_worker_killed_between_configs_is_replaced():
    """Injected: SIGKILL to the benchmark worker after its first config. Survives: the next
    config runs in a new worker and is timed; the first config's reference check carries over."""
    import os
    import signal

    from tunekit.isolation import IsolatedRunner
    from tunekit.service import service

    service().shutdown(keep_zygote=True)  # no warm worker from an earlier test: this one starts its own
    kernel = tunekit.autotune(space=vector_add.space(), key=["n"], store=None)(vector_add.add_kernel)
    x, y, out = vector_add.inputs(N)
    runner = IsolatedRunner(kernel.launch, (x, y, out, N), {"grid": vector_add.grid(N), "warmup": False}, check=True,
                            timeout=60)
    try:
        first, second = vector_add.space().configs()[:2]
        assert runner.measure(first, None).status is Status.OK and runner.expected is not None
        os.kill(runner._worker.pid, signal.SIGKILL)
        runner._worker.wait()
        trial = runner.measure(second, None)
        assert trial.status is Status.OK and trial.relative_error == 0.0
        assert runner.workers_started == 2
    finally:
        runner.close()
    assert out.isnan().all()  # the caller's buffer was never written


def test_a_seconds_budget_cuts_off_a_hanging_config_and_keeps_the_best_so_far(store_path):
    """Injected: a config that never returns, second of three, under a 15 s budget (run timeout
    left adaptive: 120 s until a few configs ran). Survives: the tuning returns soon after its
    budget, not after the run timeout or the hour the config would sleep; the config in flight is
    left unmeasured (not recorded as failed), the one measured before it is the winner."""
    import time

    kernel = tunekit.autotune(space=Space(BLOCK=[64, faults.HANG_BLOCK, 2048], num_warps=[4]), key=["n"],
                              strategy="exhaustive", budget=tunekit.Budget(seconds=15), store=store_path,
                              isolate=True)(faults.faulty_add)
    x, y, out = vector_add.inputs(N)
    start = time.perf_counter()
    vector_add.launch(kernel, x, y, out)
    assert time.perf_counter() - start < 60
    assert [(t.config.kwargs["BLOCK"], t.status) for t in kernel.trials] == [(64, Status.OK)]
    assert kernel.best_config.kwargs["BLOCK"] == 64 and torch.equal(out, x + y)
    assert [r["status"] for r in ResultsStore(store_path).rows() if r["source"] == "measured"] == ["ok"]


def test_a_noisy_one_off_timing_does_not_win(store_path):
    """Injected: a timer that reports BLOCK 128 ten times faster than it is, once (its first
    measurement), and BLOCK 256 at 1.0 ms always. Survives: the three best are re-timed
    interleaved, BLOCK 256 wins, and the store keeps the re-timing with its spread."""
    calls: dict[int, int] = {}
    true_ms = {128: 2.0, 256: 1.0, 512: 3.0, 1024: 3.5}

    def pre_hook(nargs):
        calls["current"] = nargs["BLOCK"]

    def noisy(kernel_call, quantiles=None):
        kernel_call()
        block = calls["current"]
        calls[block] = calls.get(block, 0) + 1
        t = 0.2 if block == 128 and calls[block] == 1 else true_ms[block] * (1 + 0.01 * calls[block])
        return [t, t, t]

    kernel = tunekit.autotune(space_with_hook(list(true_ms), pre_hook), key=["n"], do_bench=noisy,
                              store=store_path)(vector_add.add_kernel)
    x, y, out = vector_add.inputs(N)
    vector_add.launch(kernel, x, y, out)
    assert min(kernel.trials, key=lambda t: t.time_ms).config.kwargs["BLOCK"] == 128  # the one-off
    assert kernel.best_config.kwargs["BLOCK"] == 256
    retimed = {json.loads(r["config"])["BLOCK"]: r for r in ResultsStore(store_path).rows() if r["source"] == "retimed"}
    assert set(retimed) == {128, 256, 512}
    assert retimed[128]["median_ms"] > 2.0 and retimed[128]["p20_ms"] < retimed[128]["p80_ms"]


def test_isolated_tuning_from_a_script_without_a_main_guard(tmp_path):
    """A script with no `if __name__ == "__main__"` guard tunes isolated: its benchmark worker
    must not run the script again (multiprocessing's spawn would, and tune there in turn)."""
    import subprocess
    import sys

    script = tmp_path / "script.py"
    script.write_text(
        "import tunekit\n"
        "from tunekit import Space\n"
        "from tunekit.kernels import vector_add\n"
        "from tunekit.testing import faults\n"
        "print('script body ran', flush=True)\n"
        "kernel = tunekit.autotune(space=Space(BLOCK=[64, 2048]), key=['n'], store=None, isolate=True)(faults.faulty_add)\n"
        "x, y, out = vector_add.inputs(4096)\n"
        "vector_add.launch(kernel, x, y, out)\n"
        "assert (out == x + y).all() and kernel.benchmark_workers_started == 1\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("script body ran") == 1


def test_tensors_passed_by_name_are_restored_too():
    """The in-place kernel with its tensors passed as keyword arguments: x == x0 + y afterwards."""
    def three_runs(kernel_call, quantiles=None):
        for _ in range(3):
            kernel_call()
        return [1.0, 1.0, 1.0]

    kernel = tunekit.autotune([tunekit.Config({"BLOCK": b}, num_warps=4) for b in (256, 512)], key=["n"],
                              do_bench=three_runs, store=None)(accumulate)
    x, y, _ = vector_add.inputs(N)
    x0 = x.clone()
    kernel[lambda meta: (triton.cdiv(N, meta["BLOCK"]),)](x_ptr=x, y_ptr=y, n=N)
    assert torch.equal(x, x0 + y)


def test_isolation_reports_what_it_cost():
    """An isolated tuning says how long it waited for its worker to start and spent messaging it."""
    kernel = tunekit.autotune(space=Space(BLOCK=[64, 2048]), key=["n"], store=None, isolate=True)(faults.faulty_add)
    x, y, out = vector_add.inputs(N)
    vector_add.launch(kernel, x, y, out)
    assert kernel.isolation_seconds["starting"] > 0 and kernel.isolation_seconds["messaging"] > 0
    assert all(t.check_seconds > 0 for t in kernel.trials)


@pytest.mark.interpreter_loops
def test_split_k_sums_in_other_orders_pass_the_check():
    """Split-K GEMM (atomic adds into a zeroed float32 output) with SPLIT_K 1, 4 and 16: each
    config sums K in another order, so outputs differ in their last bits; none is `wrong`."""
    from tunekit.kernels import matmul_splitk

    by_split: dict[int, tunekit.Config] = {}
    for config in matmul_splitk.space().configs():
        by_split.setdefault(config.kwargs["SPLIT_K"], config)
    configs = [by_split[s] for s in (1, 4, 16)]
    kernel = tunekit.autotune(configs, key=["M", "N", "K"], reset_to_zero=["c_ptr"],
                              store=None)(matmul_splitk.matmul_splitk_kernel)
    a, b, c = matmul_splitk.inputs(8, 40, 300, dtype=torch.float32)
    matmul_splitk.launch(kernel, a, b, c)
    assert [t.status for t in kernel.trials] == [Status.OK] * 3
    errors = [t.relative_error for t in kernel.trials]
    assert errors[0] == 0.0 and 0 < max(errors) < default_tolerance(torch.float32)
    torch.testing.assert_close(c, matmul_splitk.reference(a, b), rtol=1e-4, atol=1e-3)


def accumulate_product(a_ptr, b_ptr, c_ptr, **_):
    c_ptr += a_ptr.float() @ b_ptr.float()


@pytest.mark.interpreter_loops
def test_a_reference_sees_reset_to_zero_outputs_zeroed_as_the_kernel_does():
    """Split-K accumulates into c (reset_to_zero); the caller's c holds NaN. A reference that
    accumulates too must start from zero, as every launch does: no config is `wrong`."""
    from tunekit.kernels import matmul_splitk

    by_split: dict[int, tunekit.Config] = {}
    for config in matmul_splitk.space().configs():
        by_split.setdefault(config.kwargs["SPLIT_K"], config)
    kernel = tunekit.autotune([by_split[1], by_split[4]], key=["M", "N", "K"], reset_to_zero=["c_ptr"], store=None,
                              reference=accumulate_product)(matmul_splitk.matmul_splitk_kernel)
    a, b, c = matmul_splitk.inputs(8, 40, 300, dtype=torch.float32)
    c.fill_(float("nan"))
    matmul_splitk.launch(kernel, a, b, c)
    assert [t.status for t in kernel.trials] == [Status.OK, Status.OK]
    torch.testing.assert_close(c, matmul_splitk.reference(a, b), rtol=1e-4, atol=1e-3)


@triton.jit
def _partial_sums_kernel(x_ptr, workspace_ptr, n, BLOCK: tl.constexpr, SKIP_LAST: tl.constexpr):
    """Each program sums its block of x into its own slot of a zeroed workspace; the caller sums
    the workspace (how Liger-Kernel's DyT backward reduces dalpha). ``SKIP_LAST``: a wrong config
    whose last program writes nothing."""
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    total = tl.sum(tl.load(x_ptr + offsets, mask=offsets < n, other=0.0), axis=0)
    if not (SKIP_LAST and pid == tl.num_programs(0) - 1):
        tl.store(workspace_ptr + pid, total)


def test_partial_sums_in_a_layout_the_config_sets_are_judged_by_their_total():
    """Injected: a workspace whose slots depend on BLOCK (32 programs of 32, 8 of 128, 4 of 256),
    declared reset_to_zero, and a fastest config that leaves its last slot unwritten. Survives: the
    correct configs, whose totals agree although they write other slots (before, all but the
    first were `wrong`, with a warning on stderr that stock never prints); the wrong one stays
    wrong and never wins."""
    blocks = {32: 3.0, 128: 2.0, 256: 1.5}
    pre_hook, do_bench = times_by_block({**blocks, 64: 0.5})
    configs = [tunekit.Config({"BLOCK": b, "SKIP_LAST": False}, num_warps=4, pre_hook=pre_hook) for b in blocks]
    configs.append(tunekit.Config({"BLOCK": 64, "SKIP_LAST": True}, num_warps=4, pre_hook=pre_hook))
    kernel = tunekit.autotune(configs, key=["n"], reset_to_zero=["workspace_ptr"], store=None,
                              do_bench=do_bench)(_partial_sums_kernel)
    n = 1000
    x = torch.rand(n)
    workspace = torch.zeros(64)
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, workspace, n)
    statuses = {t.config.kwargs["BLOCK"]: t.status for t in kernel.trials if t.source == "measured"}
    assert statuses == {32: Status.OK, 128: Status.OK, 256: Status.OK, 64: Status.WRONG}
    assert kernel.best_config.kwargs["BLOCK"] == 256
    torch.testing.assert_close(workspace.sum(), x.sum())


@triton.jit
def inner_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def test_a_kernel_launched_while_another_is_measured_is_not_tuned_inside_that_measurement(store_path):
    """Injected: kernel A's reference function launches kernel B, both tuned by tunekit (as tunekit's
    own comparisons launch a library's kernels when it replaces PyTorch's with autotuned Triton
    kernels). B is not tuned inside A's measurement: its first config runs for that call only,
    nothing of B is stored; A is tuned; B's first call from outside tunes it."""
    inner = tunekit.autotune([tunekit.Config({"BLOCK": 64}), tunekit.Config({"BLOCK": 128})], key=["n"],
                             store=store_path, isolate=False)(inner_add)

    def reference(x_ptr, y_ptr, out_ptr, n, **_):
        vector_add.launch(inner, x_ptr, y_ptr, out_ptr)

    outer = tunekit.autotune([tunekit.Config({"BLOCK": 256}), tunekit.Config({"BLOCK": 512})], key=["n"],
                             store=store_path, reference=reference, isolate=False)(vector_add.add_kernel)
    x, y, out = vector_add.inputs(N)
    vector_add.launch(outer, x, y, out)
    assert [t.status for t in outer.trials] == [Status.OK, Status.OK]
    torch.testing.assert_close(out, x + y)
    assert inner.cache == {} and inner.trials == []
    assert {json.loads(r["config"])["BLOCK"] for r in ResultsStore(store_path).rows()} == {256, 512}

    out.zero_()
    vector_add.launch(inner, x, y, out)
    assert [t.status for t in inner.trials] == [Status.OK, Status.OK] and len(inner.cache) == 1
    torch.testing.assert_close(out, x + y)


@triton.jit
def add_block_size(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + BLOCK, mask=mask)


def test_outputs_that_change_with_the_config_are_said_at_info_not_warned_about(store_path, caplog):
    """Injected: every config writes other values (x + BLOCK), as a random-number kernel whose
    streams follow the block size does (FlagGems' randn). Survives: the configs that differ from the
    reference are wrong, as before, but the doubt about the reference, a warning on stderr that
    stock Triton never prints, is an info line saying the outputs depend on the config; a wrong
    reference that the others agree against is still warned about (test_per_call.py)."""
    kernel = tunekit.autotune([tunekit.Config({"BLOCK": b}) for b in (32, 64, 128, 256, 512)], key=["n"],
                              store=store_path, strategy="exhaustive", isolate=False)(add_block_size)
    caplog.set_level("INFO", logger="tunekit")
    x = torch.randn(N)
    out = torch.empty_like(x)
    kernel[lambda meta: (triton.cdiv(N, meta["BLOCK"]),)](x, out, N)
    assert [t.status for t in kernel.trials] == [Status.OK] + [Status.WRONG] * 4
    doubts = [r for r in caplog.records if "differ from the reference config" in r.getMessage()]
    assert [r.levelname for r in doubts] == ["INFO"] and "depend on its config" in doubts[0].getMessage()


def test_a_library_that_replaces_pytorchs_kernels_is_not_run_by_tunekits_own_checks(store_path, caplog):
    """Injected: PyTorch's ``equal`` kernel for the tensors' device is replaced from Python
    (torch.library), as FlagGems' use_gems() replaces nearly every ATen kernel with a Triton kernel
    of its own, which tunekit's comparisons would compile, run and even tune. Survives: tuning runs
    no replaced kernel (configs are timed on the call's tensors without checks or guard bands, as
    Triton times them), says why once at info level, and the winner's output is right."""
    import numpy as np

    calls = []

    def equal(a, b):
        calls.append("equal")
        return bool(np.array_equal(a.numpy(), b.numpy()))

    library = torch.library.Library("aten", "IMPL")
    library.impl("equal", equal, "CPU")
    try:
        caplog.set_level("INFO", logger="tunekit")
        kernel = tunekit.autotune([tunekit.Config({"BLOCK": b}) for b in (64, 128)], key=["n"],
                                  store=store_path, isolate=False)(inner_add)
        x, y, out = vector_add.inputs(N)
        vector_add.launch(kernel, x, y, out)
        assert calls == []
    finally:
        library._destroy()
    assert [t.status for t in kernel.trials] == [Status.OK, Status.OK] and torch.equal(out, x + y)
    assert any("replaced from Python" in r.getMessage() and r.levelname == "INFO" for r in caplog.records)


def test_the_relative_error_neither_overflows_nor_underflows_in_float32():
    """Injected: float32 outputs near the ends of its range, whose squares overflow to infinity
    (1e19) or underflow to zero (1e-23) when the root mean square is summed in float32. Survives:
    the errors are what float64 gives (0.5 for twice the reference; 1e-6 for a relative change of
    1e-6); an output that overflows in the difference is infinitely wrong, not NaN (which no
    tolerance comparison would catch)."""
    big = torch.full((1000,), 1e19)
    assert relative_error(2 * big, big) == pytest.approx(0.5, rel=1e-4)
    tiny = torch.full((1000,), 1e-23)
    assert relative_error(tiny * (1 + 1e-6), tiny) == pytest.approx(5e-7, rel=0.2)
    huge = torch.full((10,), 3e38)
    assert relative_error(-huge, huge) == math.inf or relative_error(-huge, huge) > 0.9


def test_a_wrong_reference_is_still_warned_about_when_two_of_the_others_disagree(caplog):
    """Injected: the reference config (the first) is wrong, the second wrong in another way, and the
    next three right, agreeing with one another. Survives: two configs that differ from the
    reference agree, so the reference is doubted with a warning (not the info line of outputs that
    depend on the config)."""
    caplog.set_level("INFO", logger="tunekit")
    check = OutputCheck()
    x = torch.arange(8.0)
    check.snapshot({"x": x, "out": torch.zeros(8)})
    for config, value in (("A", x * 0 + 5), ("B", x * 0 - 3), ("C", x), ("D", x), ("E", x)):
        check.judge({"x": x, "out": value}, config)
    doubts = [r for r in caplog.records if "differ from the reference config" in r.getMessage()]
    assert [r.levelname for r in doubts] == ["WARNING"]
