"""Processes tuning one key into one store at once: one measures, the others wait for its winner."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest
import triton
from tunekit.kernels import vector_add

import tunekit
from tunekit.claims import LEASE_SECONDS
from tunekit.store import Claim, ResultsStore

#: One process: tunes vector add at one key into the store named by argv[1], after waiting for
#: the start signal (a file) so that the processes reach the key together; prints its winner.
PROCESS = textwrap.dedent("""
    import json, os, sys, time
    import triton
    import tunekit
    from tunekit.config import config_json
    from tunekit.kernels import vector_add
    from tunekit.store import ResultsStore

    store, start, how = sys.argv[1:4]
    options = {"background": {"background": True}, "per_call": {"budget": tunekit.Budget(evals=8, per_call=2)},
               "at_once": {}}[how]
    kernel = tunekit.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (64, 128, 256, 512)
                                       for w in (2, 4)], key=["n"], store=store, **options)(vector_add.add_kernel)
    x, y, out = vector_add.inputs(4096)
    while not os.path.exists(start):
        time.sleep(0.01)
    kernel[vector_add.grid(4096)](x, y, out, 4096)
    if how == "background":
        kernel.wait_for_tuning()
    polled = ResultsStore(store)  # opened once: a new store object 50 times a second races the others' checkpoints
    while how == "per_call" and not polled.winner_rows():  # one call after another, as a loop runs
        kernel[vector_add.grid(4096)](x, y, out, 4096)
        time.sleep(0.02)
    kernel[vector_add.grid(4096)](x, y, out, 4096)  # the winner from now on
    assert bool((out == x + y).all())
    print(json.dumps({"winner": config_json(kernel.best_config), "measured": len([t for t in kernel.trials
                                                                                  if t.source == "measured"])}))
""")


@pytest.mark.parametrize("processes,how", [(2, "at_once"), (2, "per_call"),
                                           pytest.param(2, "background", marks=pytest.mark.slow),
                                           pytest.param(4, "at_once", marks=pytest.mark.slow)])
def test_processes_tuning_one_key_into_one_store_measure_each_config_once_and_agree(tmp_path, processes, how):
    """Injected: ``processes`` processes reach one untuned key of one SQLite store at the same
    moment, tuning it in one call, over calls (``Budget(per_call=2)``) or in the background.
    Survives: every config is measured once in all (one process tunes; the others wait for its
    winner, or launch their fallback meanwhile), and every process ends up launching the winner
    the store holds."""
    store, start = tmp_path / "shared.db", tmp_path / "start"
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join(sys.path))
    running = [subprocess.Popen([sys.executable, "-c", PROCESS, str(store), str(start), how], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(processes)]
    ResultsStore(store)  # created before the processes open it, as a user's store would be
    start.touch()
    reports = []
    for process in running:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-3000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    rows = [r for r in ResultsStore(store).rows() if r["strategy"] != "finalists"]
    configs = [r["config"] for r in rows]
    assert len(configs) == 8 and len(set(configs)) == 8, configs
    assert sorted(r["measured"] for r in reports) == [0] * (processes - 1) + [8]
    (stored,) = ResultsStore(store).winner_rows()
    assert [r["winner"] for r in reports] == [stored["config"]] * processes


def test_the_claim_of_a_process_that_died_on_this_host_is_taken_over_at_once(tmp_path):
    """Injected: a claim on the key held by a process of this host that has exited (a crash mid-
    tuning), its lease far from over. Survives: the next process tunes the key at once, without
    waiting for the lease to end."""
    store_path = tmp_path / "shared.db"
    kernel = tunekit.autotune(configs=[triton.Config({"BLOCK": b}) for b in (64, 128)], key=["n"],
                              store=str(store_path))(vector_add.add_kernel)
    x, y, out = vector_add.inputs(256)
    key = kernel.tuning_key((x, y, out, 256), {}).json
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    store = ResultsStore(store_path)
    owner = f"{socket.gethostname()}:{gone.stdout.strip()}:1"
    assert store.claim(kernel.identity, kernel.space_hash, key, owner=owner, lease=LEASE_SECONDS) is Claim.CLAIMED
    started = time.monotonic()
    kernel[vector_add.grid(256)](x, y, out, 256)
    assert time.monotonic() - started < LEASE_SECONDS / 2
    assert len([t for t in kernel.trials if t.source == "measured"]) == 2 and bool((out == x + y).all())
