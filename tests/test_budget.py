import pytest

from tunekit import Budget


def test_unlimited_budget_never_exhausts():
    assert not Budget().exhausted(evals=10**9, seconds=1e9)


def test_evals_and_seconds_each_stop_a_tuning():
    budget = Budget(evals=5, seconds=2.0)
    assert not budget.exhausted(4, 1.9)
    assert budget.exhausted(5, 0.0)
    assert budget.exhausted(0, 2.0)
    assert budget.evals_left(3) == 2


@pytest.mark.parametrize(
    "kwargs, message",
    [({"evals": 0}, "'evals' parameter of Budget must be an int >= 1"),
     ({"evals": 2.5}, "'evals'"), ({"evals": True}, "'evals'"),
     ({"seconds": -1}, "'seconds' parameter of Budget"), ({"seconds": float("inf")}, "'seconds'")],
)
def test_nonsense_budgets_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Budget(**kwargs)
