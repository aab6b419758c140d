"""A mistaken call is the caller's error: raised before or instead of a tuning, never stored.

Stored failures are reused by later tunings of the same key, so a call that fails with every
config (an argument too many, a missing one, a tuned one passed by position, an argument of a
type the kernel cannot take) must leave nothing in the store: the corrected call, in this or a
later process, then tunes as if the mistake never happened.
"""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import tunekit
from tunekit import Config
from tunekit.kernels import vector_add
from tunekit.store import ResultsStore

N = 1024
CONFIGS = [Config({"BLOCK": 128}, num_warps=4), Config({"BLOCK": 256}, num_warps=4)]


def tuned_add(store_path):
    return tunekit.autotune(CONFIGS, key=["n"], store=str(store_path))(vector_add.add_kernel)


def trials_in(store_path, kernel) -> list:
    """Every trial the store at ``store_path`` holds for ``kernel``, as a later process reads them."""
    store = ResultsStore(str(store_path))
    try:
        return store.history(kernel.identity)
    finally:
        store.close()


def test_a_tuned_parameter_passed_by_position_is_refused_before_any_config_and_stores_nothing(store_path):
    kernel = tuned_add(store_path)
    x, y, out = vector_add.inputs(N)
    with pytest.raises(TypeError, match=r"BLOCK got one, but it is set by the autotuner \(or its heuristics\): leave BLOCK out"):
        kernel[vector_add.grid(N)](x, y, out, N, 1024)
    assert trials_in(store_path, kernel) == []

    corrected = tuned_add(store_path)  # as a later process would: the same store, a new kernel object
    corrected[vector_add.grid(N)](x, y, out, N)
    torch.testing.assert_close(out, vector_add.reference(x, y))
    assert {t.status for t in corrected.trials} == {tunekit.Status.OK}


def test_a_missing_argument_is_named(store_path):
    kernel = tuned_add(store_path)
    x, y, out = vector_add.inputs(N)
    with pytest.raises(TypeError, match=r"add_kernel's arguments do not match.*missing a required argument: 'n'"):
        kernel[vector_add.grid(N)](x, y, out)
    assert trials_in(store_path, kernel) == []


def test_the_same_failure_with_every_config_is_not_stored_and_the_corrected_call_tunes(store_path):
    """Injected: ``y`` as a Python list, which the kernel cannot take; every config fails at its
    launch with the same error. Survives: nothing stored, the corrected call tunes and is right."""
    kernel = tuned_add(store_path)
    x, y, out = vector_add.inputs(N)
    with pytest.raises(tunekit.TuningError, match="all with the same error, so the call may be at fault: none of these run-time failures was stored"):
        kernel[vector_add.grid(N)](x, y.tolist(), out, N)
    assert trials_in(store_path, kernel) == []

    corrected = tuned_add(store_path)
    corrected[vector_add.grid(N)](x, y, out, N)
    torch.testing.assert_close(out, vector_add.reference(x, y))
    assert len(trials_in(store_path, kernel)) >= len(CONFIGS)


def test_failures_are_stored_once_a_config_runs(store_path):
    """Injected: one config whose launch fails (a BLOCK the kernel cannot take), one that runs.
    Survives: the failure is stored beside the success, so no later tuning tries it again."""
    configs = [Config({"BLOCK": 100}, num_warps=4), Config({"BLOCK": 128}, num_warps=4)]  # arange needs a power of 2
    kernel = tunekit.autotune(configs, key=["n"], store=str(store_path))(vector_add.add_kernel)
    x, y, out = vector_add.inputs(N)
    kernel[vector_add.grid(N)](x, y, out, N)
    assert sorted(t.status.value for t in trials_in(store_path, kernel)) == ["ok", "runtime_error"]


def test_an_output_too_short_for_every_config_is_not_stored(store_path):
    """Injected: ``out`` one element shorter than ``n`` says, so every config stores past its end
    (caught by the guard bands: every config ``wrong``). Survives: nothing stored; the corrected
    call tunes and is right."""
    kernel = tuned_add(store_path)
    x, y, out = vector_add.inputs(N)
    with pytest.raises(tunekit.TuningError, match="all with the same error, so the call may be at fault"):
        kernel[vector_add.grid(N)](x, y, torch.empty(N - 1), N)
    assert trials_in(store_path, kernel) == []

    corrected = tuned_add(store_path)
    corrected[vector_add.grid(N)](x, y, out, N)
    torch.testing.assert_close(out, vector_add.reference(x, y))


@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def add_even(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + tl.load(y_ptr + offsets))
    else:
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
                 mask=mask)


def test_a_value_that_a_heuristic_replaces_may_still_be_passed(store_path):
    """Stock Triton accepts ``EVEN=True`` from the caller when a heuristic sets EVEN (the heuristic's
    value wins); so does tunekit's check of the call."""
    kernel = tunekit.autotune(CONFIGS, key=["n"], store=str(store_path))(add_even)
    x, y, out = vector_add.inputs(N)
    kernel[vector_add.grid(N)](x, y, out, N, EVEN=False)
    torch.testing.assert_close(out, vector_add.reference(x, y))


@triton.jit
def add_up_to_256(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK <= 256)  # BLOCK 512 fails, whatever the call
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def test_a_mistaken_call_does_not_poison_the_key_when_another_config_fails_its_own_way(store_path):
    """Injected: ``out`` of 100 elements for n = 5000 (every config that runs stores past it:
    ``wrong``), in a Space where BLOCK 512 fails a static assert whatever the call. Survives: the
    run-time failures are held back, since no config ran correctly, so the corrected call tunes and
    is right instead of finding every config stored as failed."""
    space = tunekit.Space(BLOCK=[64, 128, 256, 512], num_warps=[4])
    x, y, out = vector_add.inputs(5000)
    kernel = tunekit.autotune(space=space, key=["n"], strategy="exhaustive", store=str(store_path))(add_up_to_256)
    with pytest.raises(tunekit.TuningError, match="so the call may be at fault: none of these run-time failures"):
        kernel[vector_add.grid(5000)](x, y, torch.empty(100), 5000)
    corrected = tunekit.autotune(space=space, key=["n"], strategy="exhaustive", store=str(store_path))(add_up_to_256)
    corrected[vector_add.grid(5000)](x, y, out, 5000)
    torch.testing.assert_close(out, vector_add.reference(x, y))
    assert corrected.best_config.kwargs["BLOCK"] != 512
