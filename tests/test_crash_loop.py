"""An in-process crash happens once: the config that killed a tuning process is recorded and
never launched in-process again.

Injected: ``faults.faulty_add``'s ``SEGFAULT_BLOCK`` config, whose store lands far out of
bounds and kills the interpreter's process with SIGSEGV, tuned in-process (the interpreter's
default) in a child process. Survives: the store, which holds the config's in-flight mark; the
next tuning (another process) records the config as crashed, checks configs in a benchmark
worker from then on, and picks a correct config.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import torch

import tunekit
from tunekit import Space, Status
from tunekit.kernels import vector_add
from tunekit.store import ResultsStore
from tunekit.testing import faults

N = 1024
#: the segfaulting config first, then a good one
SPACE = dict(BLOCK=[faults.SEGFAULT_BLOCK, 64], num_warps=[4])


def tune_in_child(store_path) -> subprocess.CompletedProcess:
    script = textwrap.dedent(f"""
        import os
        os.environ["TRITON_INTERPRET"] = "1"
        import tunekit
        from tunekit.kernels import vector_add
        from tunekit.testing import faults
        kernel = tunekit.autotune(space=tunekit.Space(**{SPACE!r}), key=["n"], strategy="exhaustive",
                                  store={str(store_path)!r})(faults.faulty_add)
        x, y, out = vector_add.inputs({N})
        vector_add.launch(kernel, x, y, out)
    """)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)


def test_a_config_that_kills_the_process_in_process_is_recorded_and_then_isolated(store_path):
    died = tune_in_child(store_path)
    assert died.returncode == -signal.SIGSEGV, died.stderr[-2000:]

    kernel = tunekit.autotune(space=Space(**SPACE), key=["n"], strategy="exhaustive",
                              store=str(store_path))(faults.faulty_add)
    x, y, out = vector_add.inputs(N)
    vector_add.launch(kernel, x, y, out)
    assert torch.equal(out, x + y) and kernel.best_config.kwargs["BLOCK"] == 64
    with ResultsStore(str(store_path)) as store:
        history = store.history(kernel.identity)
    crash, retry = [t for t in history if t.config.kwargs["BLOCK"] == faults.SEGFAULT_BLOCK]
    assert crash.crashed and crash.status is Status.RUNTIME_ERROR
    assert "died while launching it in-process" in crash.error
    # measured again, in a benchmark worker (the process might have been killed from outside): it
    # killed that worker, not this process, and that failure is stored
    assert retry.status is Status.RUNTIME_ERROR and not retry.crashed and "benchmark worker died" in retry.error
    assert kernel.tuning_report.benchmark_workers_started >= 1  # at least the successor of the one it killed


def test_a_config_marked_crashed_by_an_outside_kill_is_measured_again_isolated(store_path):
    """Injected: a process killed from outside (SIGKILL) while a good config was in flight. Survives:
    the config is recorded as crashed (nothing tells the two deaths apart), then measured again in a
    benchmark worker, where it runs: it can still win."""
    kernel = tunekit.autotune(space=Space(BLOCK=[64, 128], num_warps=[4]), key=["n"], strategy="exhaustive",
                              store=str(store_path))(vector_add.add_kernel)
    key = '{"args": {"n": 1024}, "dtypes": ["torch.float32", "torch.float32", "torch.float32"]}'
    script = textwrap.dedent(f"""
        import os, signal
        import tunekit
        from tunekit.kernels import vector_add
        from tunekit.store import ResultsStore
        kernel = tunekit.autotune(space=tunekit.Space(BLOCK=[64, 128], num_warps=[4]), key=["n"],
                                  store={str(store_path)!r})(vector_add.add_kernel)
        store = ResultsStore({str(store_path)!r})
        with store.in_flight(kernel.identity, {key!r}, '{{"BLOCK": 64, "num_ctas": 1, "num_stages": 3, "num_warps": 4}}',
                             run_id="killed"):
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, TRITON_INTERPRET="1"))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]

    x, y, out = vector_add.inputs(N)
    vector_add.launch(kernel, x, y, out)
    assert torch.equal(out, x + y) and kernel.tuning_report.seconds_messaging > 0  # checked in a worker
    measured = {t.config.kwargs["BLOCK"]: t for t in kernel.trials if t.source == "measured"}
    assert measured[64].ok and measured[128].ok
    with ResultsStore(str(store_path)) as store:
        assert [t.config.kwargs["BLOCK"] for t in store.history(kernel.identity) if t.crashed] == [64]


def test_a_mark_of_a_live_process_is_left_alone_and_a_finished_launch_leaves_none(store_path):
    kernel = tunekit.autotune(space=Space(BLOCK=[64, 128], num_warps=[4]), key=["n"], strategy="exhaustive",
                              store=str(store_path))(vector_add.add_kernel)
    x, y, out = vector_add.inputs(N)
    vector_add.launch(kernel, x, y, out)
    with ResultsStore(str(store_path)) as store:
        with store.in_flight(kernel.identity, '{"other": 1}', "{}", run_id="live"):
            assert store.record_crashes(kernel.identity) == []  # this process is alive
        assert store.record_crashes(kernel.identity) == []  # and its mark went with the block
        assert all(not t.crashed for t in store.history(kernel.identity))
