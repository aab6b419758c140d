import pytest

from tunekit import Budget
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
