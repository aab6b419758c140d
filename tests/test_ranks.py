"""Ranks of a torch.distributed job (gloo, under the interpreter) agree on every config."""

import json
import multiprocessing

import pytest

from tunekit.testing.ranks import SPACES, run_rank


def run_job(tmp_path, mode: str, calls: list[list[tuple[str, int]]], fail: str = "") -> list[dict]:
    world = len(calls)
    if fail == "first":
        (tmp_path / "failing").touch()
    context = multiprocessing.get_context("spawn")
    ranks = [context.Process(target=run_rank, args=(rank, world, str(tmp_path), mode, calls, fail))
             for rank in range(world)]
    for process in ranks:
        process.start()
    for process in ranks:
        process.join(240)
    for process in ranks:  # a rank that hung must not keep pytest waiting
        if process.is_alive():
            process.terminate()
    assert [p.exitcode for p in ranks] == [0] * world, "a rank hung or died"
    return [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(world)]


def test_ranks_launch_one_decision_and_only_the_deciding_rank_measures(tmp_path):
    """3 ranks, one key: whichever rank decides, all launch its config; one rank measured the 4
    configs, the others nothing."""
    results = run_job(tmp_path, "first", [[("wide", 3000)]] * 3)
    assert [r["calls"][0].get("error") for r in results] == [None] * 3
    assert len({r["calls"][0]["block"] for r in results}) == 1
    assert all(r["calls"][0]["correct"] for r in results)
    assert sorted(r["trials"] for r in results) == [0, 0, len(SPACES["wide"])]


def test_each_rank_tunes_alone_when_asked_and_then_they_disagree(tmp_path):
    results = run_job(tmp_path, "each", [[("wide", 3000)]] * 2)
    assert [r["calls"][0]["block"] for r in results] == SPACES["wide"][:2]
    assert [r["trials"] for r in results] == [len(SPACES["wide"])] * 2


def test_ranks_that_call_different_keys_kernels_or_orders_never_wait_for_each_other(tmp_path):
    """Injected: rank 0 calls wide(1000), narrow(1000), wide(2000); rank 1 calls narrow(1000),
    wide(1000) and stops. Survives: no rank hangs; per kernel and key the ranks that call it launch
    one config from that kernel's Space; wide(2000), called by rank 0 alone, is decided by it."""
    calls = [[("wide", 1000), ("narrow", 1000), ("wide", 2000)], [("narrow", 1000), ("wide", 1000)]]
    results = run_job(tmp_path, "first", calls)
    assert [c.get("error") for r in results for c in r["calls"]] == [None] * 5
    launched = {}
    for result in results:
        for call in result["calls"]:
            assert call["block"] in SPACES[call["kernel"]] and call["correct"]
            launched.setdefault((call["kernel"], call["n"]), set()).add(call["block"])
    assert all(len(blocks) == 1 for blocks in launched.values()), launched


def test_a_decision_that_fails_raises_on_every_rank_and_none_hangs(tmp_path):
    results = run_job(tmp_path, "first", [[("wide", 3000)]] * 3, fail="always")
    errors = [r["calls"][0]["error"] for r in results]
    assert sum("could not decide add_kernel" in e for e in errors) == 2, errors


def test_after_a_failed_decision_the_next_call_decides_afresh(tmp_path):
    """Injected: every timing fails until the ranks' first call is over, so the first decision
    fails on every rank. The ranks call the kernel again: a new decision is made and all launch it."""
    results = run_job(tmp_path, "first", [[("wide", 3000), ("wide", 3000)]] * 2, fail="first")
    assert all("error" in r["calls"][0] for r in results)
    assert [c.get("error") for c in (r["calls"][1] for r in results)] == [None, None]
    assert len({r["calls"][1]["block"] for r in results}) == 1 and all(r["calls"][1]["correct"] for r in results)


def test_an_unknown_mode_is_refused():
    import tunekit
    from tunekit.kernels import vector_add

    with pytest.raises(ValueError, match="ranks must be one of 'first', 'each'"):
        tunekit.autotune(space=tunekit.Space(BLOCK=[128]), key=["n"], ranks="rank0")(vector_add.add_kernel)
