"""A conformance suite for ResultsStore backends: SQLite files, in-memory, any SQLAlchemy URL.

A backend's tests inherit ``StoreConformance`` and provide a ``store`` fixture.
"""

from __future__ import annotations

import time

from tunekit.config import Config
from tunekit.store import Claim, KernelIdentity, ResultsStore, new_run_id
from tunekit.trial import Status, Timing, Trial

IDENTITY = KernelIdentity("k", "hash1", "3.x", "interpreter", "host_clock")
KEY = '{"args": {"n": 8}, "dtypes": []}'


def ok_trial(block: int, ms: float) -> Trial:
    return Trial(Config({"BLOCK": block}, num_warps=4), Status.OK, Timing(ms, ms * 0.9, ms * 1.1), compile_seconds=0.5)


def hammer(url: str, writer: int, count: int) -> None:
    """Write ``count`` trials as fast as possible: run in several processes at once to test
    that concurrent writers lose nothing (importable, so spawn-started processes can run it)."""
    store = ResultsStore(url)
    for i in range(count):
        store.record(IDENTITY, KEY, ok_trial(writer * 1000 + i, 1.0), strategy=f"writer{writer}", run_id=str(writer))


def finish_runs(url: str, writer: int, count: int) -> None:
    """Start and finish ``count`` runs, one per key ``{"n": i}``, each with a winner: run in several
    processes at once to test that runs finishing the same keys together all succeed."""
    store = ResultsStore(url)
    for i in range(count):
        key, run = f'{{"n": {i}}}', f"{writer}-{i}"
        store.start_run(IDENTITY, key, strategy=f"writer{writer}", budget=None, run_id=run)
        store.finish_run(IDENTITY, key, run_id=run, winner=ok_trial(64 << writer, 1.0 + writer), evaluations=1,
                         tuning_seconds=0.1, space_hash="h")


class StoreConformance:
    def test_a_recorded_trial_comes_back(self, store: ResultsStore):
        run = new_run_id()
        store.record(IDENTITY, KEY, ok_trial(64, 1.5), strategy="random", run_id=run)
        store.record(IDENTITY, KEY, Trial(Config({"BLOCK": 128}), Status.COMPILE_ERROR, error="boom"),
                     strategy="random", run_id=run)
        history = store.history(IDENTITY)
        assert [t.status for t in history] == [Status.OK, Status.COMPILE_ERROR]
        assert history[0].timing == Timing(1.5, 1.5 * 0.9, 1.5 * 1.1)
        assert history[0].config.kwargs == {"BLOCK": 64} and history[0].compile_seconds == 0.5
        assert history[1].error == "boom"
        assert [r["run_id"] for r in store.rows(run_id=run)] == [run, run]

    def test_trials_of_another_device_or_timer_are_not_mixed(self, store: ResultsStore):
        store.record(IDENTITY, KEY, ok_trial(64, 1.0), strategy="s", run_id="r")
        for other in (
            KernelIdentity("k", "hash1", "3.x", "NVIDIA H200", "cuda_event"),
            KernelIdentity("k", "hash2", "3.x", "interpreter", "host_clock"),
            KernelIdentity("k", "hash1", "3.y", "interpreter", "host_clock"),
        ):
            assert store.history(other) == []

    def test_a_claim_is_exclusive_until_given_back_expired_or_finished(self, store: ResultsStore):
        space = "space1"
        assert store.claim(IDENTITY, space, KEY, owner="a", lease=60) == Claim.CLAIMED
        assert store.claim(IDENTITY, space, KEY, owner="b", lease=60) == Claim.TAKEN
        assert store.claim(IDENTITY, "space2", KEY, owner="b", lease=60) == Claim.CLAIMED  # another Space
        assert store.claim(IDENTITY, space, KEY, owner="a", lease=60) == Claim.CLAIMED  # its own, again
        assert not store.renew_claim(IDENTITY, space, KEY, owner="b", lease=60)
        store.release_claim(IDENTITY, space, KEY, owner="a")  # given back: anyone, at once, not a takeover
        assert store.claim(IDENTITY, space, KEY, owner="b", lease=0.05) == Claim.CLAIMED
        assert store.renew_claim(IDENTITY, space, KEY, owner="b", lease=0.05)
        time.sleep(0.1)  # b stops renewing: its claim expires
        assert store.claim(IDENTITY, space, KEY, owner="c", lease=60) == Claim.CLAIMED
        assert not store.renew_claim(IDENTITY, space, KEY, owner="b", lease=60)
        store.release_claim(IDENTITY, space, KEY, owner="b", outcome="winner")  # not b's any more: ignored
        assert store.claim(IDENTITY, space, KEY, owner="d", lease=60) == Claim.TAKEN
        store.start_run(IDENTITY, KEY, strategy="s", budget=None, run_id="c-run")
        store.finish_run(IDENTITY, KEY, run_id="c-run", winner=ok_trial(64, 1.0), evaluations=1, tuning_seconds=0.1,
                         space_hash=space)
        store.release_claim(IDENTITY, space, KEY, owner="c", outcome="winner")
        assert store.claim(IDENTITY, space, KEY, owner="d", lease=60) == Claim.DONE
        claim = store.claims(IDENTITY, space)[KEY]
        assert (claim["owner"], claim["outcome"], claim["takeovers"]) == ("c", "winner", 1)
        store.delete(run_id="c-run")  # the winner goes, the claim stays: the key is tuned again
        assert store.claim(IDENTITY, space, KEY, owner="d", lease=60) == Claim.CLAIMED
        assert store.delete(kernel=IDENTITY.name).claims == 2 and store.claims(IDENTITY, space) == {}

    def test_a_claim_whose_winner_another_space_replaced_is_tuned_again(self, store: ResultsStore):
        for space in ("A", "B"):
            assert store.claim(IDENTITY, space, KEY, owner="a", lease=60) == Claim.CLAIMED
            store.start_run(IDENTITY, KEY, strategy="s", budget=None, run_id=space)
            store.finish_run(IDENTITY, KEY, run_id=space, winner=ok_trial(64, 1.0), evaluations=1,
                             tuning_seconds=0.1, space_hash=space)
            store.release_claim(IDENTITY, space, KEY, owner="a", outcome="winner")
        assert store.claim(IDENTITY, "B", KEY, owner="b", lease=60) == Claim.DONE
        assert store.claim(IDENTITY, "A", KEY, owner="b", lease=60) == Claim.CLAIMED  # its winner is B's now

    def test_a_failed_claim_is_retried_by_a_later_run_only(self, store: ResultsStore):
        space, run_began = "space1", store.store_time()
        assert store.claim(IDENTITY, space, KEY, owner="a", lease=60, retry_failed_before=run_began) == Claim.CLAIMED
        store.release_claim(IDENTITY, space, KEY, owner="a", outcome="failed: every config failed")
        assert store.claim(IDENTITY, space, KEY, owner="b", lease=60, retry_failed_before=run_began) == Claim.FAILED
        time.sleep(0.01)
        later_run = store.store_time()
        assert store.claim(IDENTITY, space, KEY, owner="b", lease=60, retry_failed_before=later_run) == Claim.CLAIMED
        assert store.claims(IDENTITY, space)[KEY]["finished_at"] is None

    def test_winner_is_replaced_by_a_later_run(self, store: ResultsStore):
        for run, ms in (("r1", 2.0), ("r2", 1.0)):
            store.start_run(IDENTITY, KEY, strategy="s", budget=None, run_id=run)
            store.finish_run(IDENTITY, KEY, run_id=run, winner=ok_trial(int(64 / ms), ms), evaluations=3,
                             tuning_seconds=0.1, space_hash="h")
        config, median, space_hash = store.winners(IDENTITY)[KEY]
        assert '"BLOCK": 64' in config and median == 1.0 and space_hash == "h"
        assert [r["evaluations"] for r in store.runs()] == [3, 3]
