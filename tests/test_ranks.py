"""Ranks of a torch.distributed job (gloo, under the interpreter) agree on every config."""

import json
import multiprocessing

import pytest

from tunekit.testing.ranks import SPACES, run_rank


def run_job(tmp_path, mode: str, calls: list[list[tuple[str, int]]], fail: bool = False) -> list[dict]:
    world = len(calls)
    context = multiprocessing.get_context("spawn")
    ranks = [context.Process(target=run_rank, args=(rank, world, str(tmp_path), mode, calls, fail))
             for rank in range(world)]
    for process in ranks:
        process.start()
    for process in ranks:
        process.join(240)
    assert [p.exitcode for p in ranks] == [0] * world, "a rank hung or died"
    return [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(world)]


def test_ranks_launch_one_decision_and_only_the_deciding_rank_measures(tmp_path):
    """3 ranks, one key: whichever rank decides, all launch its config; one rank measured the 4
    configs, the others nothing."""
    results = run_job(tmp_path, "first", [[("wide", 3000)]] * 3)
    assert [r.get("error") for r in results] == [None] * 3
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
    assert [r.get("error") for r in results] == [None, None]
    launched = {}
    for result in results:
        for call in result["calls"]:
            assert call["block"] in SPACES[call["kernel"]] and call["correct"]
            launched.setdefault((call["kernel"], call["n"]), set()).add(call["block"])
    assert all(len(blocks) == 1 for blocks in launched.values()), launched


def test_a_decision_that_fails_raises_on_every_rank_and_none_hangs(tmp_path):
    results = run_job(tmp_path, "first", [[("wide", 3000)]] * 3, fail=True)
    assert all("error" in r for r in results)
    assert sum("could not decide add_kernel" in r["error"] for r in results) == 2


def test_an_unknown_mode_is_refused():
    import tunekit
    from tunekit.kernels import vector_add

    with pytest.raises(ValueError, match="ranks must be one of 'first', 'each'"):
        tunekit.autotune(space=tunekit.Space(BLOCK=[128]), key=["n"], ranks="rank0")(vector_add.add_kernel)
