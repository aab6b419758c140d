"""Ranks of a torch.distributed job (gloo, under the interpreter) agree on every config."""

import json
import multiprocessing

import pytest

from tunekit.testing.ranks import BLOCKS, run_rank


def run_job(tmp_path, world: int, mode: str, sizes: list[int], fail: bool = False) -> list[dict]:
    context = multiprocessing.get_context("spawn")
    ranks = [context.Process(target=run_rank, args=(rank, world, str(tmp_path), mode, sizes, fail))
             for rank in range(world)]
    for process in ranks:
        process.start()
    for process in ranks:
        process.join(240)
    assert [p.exitcode for p in ranks] == [0] * world
    return [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(world)]


def test_ranks_launch_rank0s_winner_and_only_rank0_tunes(tmp_path):
    """3 ranks with one key: rank 0 measures every config and chooses BLOCKS[0]; ranks 1 and 2,
    whose own timings would choose BLOCKS[1] and BLOCKS[2], launch it too and measure nothing."""
    results = run_job(tmp_path, 3, "rank0", [3000, 3000, 3000])
    assert [r.get("error") for r in results] == [None] * 3
    assert [r["block"] for r in results] == [BLOCKS[0]] * 3
    assert all(r["correct"] for r in results)
    assert [r["trials"] for r in results] == [len(BLOCKS), 0, 0]


def test_each_rank_tunes_alone_when_asked_and_then_they_disagree(tmp_path):
    results = run_job(tmp_path, 2, "each", [3000, 3000])
    assert [r["block"] for r in results] == [BLOCKS[0], BLOCKS[1]]
    assert [r["trials"] for r in results] == [len(BLOCKS)] * 2


def test_ranks_with_different_keys_take_the_decision_of_the_lowest_rank_of_their_key(tmp_path):
    """4 ranks, two keys: ranks 0 and 2 call with n=1000, ranks 1 and 3 with n=2000. Rank 0
    decides the first (BLOCKS[0]), rank 1 the second (its own timings: BLOCKS[1])."""
    results = run_job(tmp_path, 4, "rank0", [1000, 2000, 1000, 2000])
    assert [r["block"] for r in results] == [BLOCKS[0], BLOCKS[1], BLOCKS[0], BLOCKS[1]]
    assert [r["trials"] for r in results] == [len(BLOCKS), len(BLOCKS), 0, 0]


def test_a_tuning_that_fails_on_rank0_raises_on_every_rank_and_none_hangs(tmp_path):
    results = run_job(tmp_path, 2, "rank0", [3000, 3000], fail=True)
    assert "error" in results[0]
    assert results[1]["error"].startswith("TuningError: rank 0 could not tune add_kernel")


def test_an_unknown_mode_is_refused():
    import tunekit
    from tunekit.kernels import vector_add

    with pytest.raises(ValueError, match="ranks must be one of 'rank0', 'each'"):
        tunekit.autotune(space=tunekit.Space(BLOCK=BLOCKS), key=["n"], ranks="all")(vector_add.add_kernel)
