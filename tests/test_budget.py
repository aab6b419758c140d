import time

import pytest
import torch
import triton
import triton.language as tl

import tunekit
from tunekit import Budget, Space
from tunekit.deadline import Deadline, SimulatedClock


def test_an_unlimited_budget_never_ends():
    deadline = Deadline(SimulatedClock(), Budget().seconds)
    deadline.clock.advance(1e9)
    assert Budget().evals_left(10**9) is None and not deadline.expired() and deadline.cap(5.0) == 5.0


def test_evals_and_seconds_each_stop_a_tuning():
    budget = Budget(evals=5, seconds=2.0)
    assert budget.evals_left(3) == 2 and budget.evals_left(5) == 0
    deadline = Deadline(SimulatedClock(), budget.seconds)
    deadline.clock.advance(1.9)
    assert not deadline.expired() and deadline.cap(10.0) == pytest.approx(0.1) and deadline.cap(10.0, floor=1.0) == 1.0
    assert deadline.earlier(0.5).expired()
    deadline.clock.advance(0.1)
    assert deadline.expired() and deadline.remaining() == 0.0


@pytest.mark.parametrize(
    "kwargs, message",
    [({"evals": 0}, "'evals' parameter of Budget must be an int >= 1"),
     ({"evals": 2.5}, "'evals'"), ({"evals": True}, "'evals'"),
     ({"seconds": -1}, "'seconds' parameter of Budget"), ({"seconds": float("inf")}, "'seconds'")],
)
def test_nonsense_budgets_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Budget(**kwargs)


SLOW_LAUNCHES: list[float] = []


def _slow() -> None:  # called from the interpreted kernel body: Python runs it
    SLOW_LAUNCHES.append(time.perf_counter())
    time.sleep(0.6)


_SLOW_BLOCK = tl.constexpr(64)


@triton.jit
def slow_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    if BLOCK == _SLOW_BLOCK:
        _slow()
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def test_a_seconds_budget_that_ends_during_a_slow_configs_check_times_it_by_that_launch():
    """Injected: the first config takes 0.6 s a launch (a sleep in the kernel body) and the budget
    is 0.5 s, in this process. Survives: the config is launched once while tuning (its check,
    whose launch is its time), not timed over further launches after the deadline; it is the
    winner, and the call's result is right."""
    SLOW_LAUNCHES.clear()
    kernel = tunekit.autotune(space=Space(BLOCK=[64, 128], num_warps=[4]), key=["n"], strategy="exhaustive",
                              budget=Budget(seconds=0.5), store=None, isolate=False)(slow_add)
    x, y = torch.rand(64), torch.rand(64)
    out = torch.empty(64)
    kernel[lambda meta: (1,)](x, y, out, 64)
    (trial,) = kernel.trials
    assert trial.ok and trial.config.kwargs["BLOCK"] == 64 and trial.time_ms >= 600
    assert len(SLOW_LAUNCHES) == 2  # the check's launch, then the call's own
    assert torch.equal(out, x + y)
