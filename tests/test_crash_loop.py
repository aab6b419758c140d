"""An in-process crash happens once: the config that killed a tuning process is recorded and
never launched in-process again.

Injected: ``faults.faulty_add``'s ``SEGFAULT_BLOCK`` config, whose store lands far out of
bounds and kills the interpreter's process with SIGSEGV, tuned in-process (the interpreter's
default) in a child process. Survives: the store, which holds the config's in-flight mark; the
next tuning (another process) records the config as crashed, checks configs in a benchmark
worker from then on, and picks a correct config.
"""

from __future__ import annotations

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
    assert kernel.tuning_report.benchmark_workers_started == 1  # isolated from now on
    with ResultsStore(str(store_path)) as store:
        history = store.history(kernel.identity)
    (crash,) = [t for t in history if t.config.kwargs["BLOCK"] == faults.SEGFAULT_BLOCK]
    assert crash.crashed and crash.status is Status.RUNTIME_ERROR
    assert "died while launching it in-process" in crash.error
    assert all(t.config.kwargs["BLOCK"] != faults.SEGFAULT_BLOCK for t in kernel.trials if t.source == "measured")


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
