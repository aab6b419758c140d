"""An in-process crash happens once: the config that killed a tuning process is recorded and
never launched in-process again.

Injected: ``faults.faulty_add``'s ``SEGFAULT_BLOCK`` config, whose store lands far out of
bounds and kills the interpreter's process with SIGSEGV, tuned in-process (the interpreter's
default) in a child process. Survives: the store, which holds the config's in-flight mark; the
next tuning (another process) records the config as crashed, checks configs in a benchmark
worker from then on, and picks a correct config.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
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
    # the crash is resolved by the config's run in the worker: the next key is tuned in-process again
    x, y, out = vector_add.inputs(2 * N)
    vector_add.launch(kernel, x, y, out)
    assert torch.equal(out, x + y) and kernel.tuning_report.seconds_messaging == 0


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


def run_script(body: str, store_path: Path, *args: str) -> subprocess.CompletedProcess:
    """``body`` as a script file beside the store (its kernels live in ``__main__``: no worker can
    import them), run with the store's path and ``args``."""
    script = store_path.parent / "script.py"
    script.write_text(textwrap.dedent(body))
    command = [sys.executable, str(script), str(store_path), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TRITON_INTERPRET="1"))


SCRIPT_KERNEL = """
    import sys
    import torch, triton, triton.language as tl, tunekit
    from tunekit.kernels import vector_add

    @triton.jit
    def script_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        value = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
        if BLOCK == 128 and n >= 2000:  # far out of bounds from n = 2000 on: a fault that depends on the shape
            tl.store(out_ptr + offsets + (1 << 40), value)
        else:
            tl.store(out_ptr + offsets, value, mask=mask)

    n = int(sys.argv[2])
    kernel = tunekit.autotune(space=tunekit.Space(BLOCK=[128, 64], num_warps=[4]), key=["n"],
                              strategy="exhaustive", store=sys.argv[1])(script_add)
    x, y, out = vector_add.inputs(n)
    vector_add.launch(kernel, x, y, out)
    print("ok", torch.equal(out, x + y), kernel.best_config.kwargs["BLOCK"])
"""


def test_a_crash_of_a_kernel_no_worker_can_import_happens_once(store_path):
    """Injected: a segfaulting config of a kernel defined in the script (``__main__``), which a
    benchmark worker cannot import, so tuning stays in-process. Survives: the second run skips the
    crashed config and tunes; so do later runs."""
    assert run_script(SCRIPT_KERNEL, store_path, "4096").returncode == -signal.SIGSEGV
    for _ in range(2):
        again = run_script(SCRIPT_KERNEL, store_path, "4096")
        assert again.returncode == 0 and again.stdout.split() == ["ok", "True", "64"], again.stderr[-2000:]


def test_a_config_that_ran_at_one_shape_and_crashes_at_another_crashes_once(store_path):
    """Injected: a config that runs at n = 1000 and stores far out of bounds at n = 4000, tuned
    in-process at 1000 (so the store knows it ran), then at 4000. Survives: the run after the
    crash at 4000 records it and tunes."""
    first = run_script(SCRIPT_KERNEL, store_path, "1000")
    assert first.returncode == 0 and first.stdout.split()[:2] == ["ok", "True"], first.stderr[-2000:]
    assert run_script(SCRIPT_KERNEL, store_path, "4000").returncode == -signal.SIGSEGV
    again = run_script(SCRIPT_KERNEL, store_path, "4000")
    assert again.returncode == 0 and again.stdout.split() == ["ok", "True", "64"], again.stderr[-2000:]


def test_a_mark_whose_process_id_now_belongs_to_another_process_is_a_crash(store_path):
    """Injected: an in-flight mark whose process id is now this live process's, with another start
    time (a restarted container reuses process ids). Survives: the mark is taken for a crash."""
    from tunekit.store import _InFlightRow

    kernel = tunekit.autotune(space=Space(BLOCK=[64, 128], num_warps=[4]), key=["n"],
                              store=str(store_path))(vector_add.add_kernel)
    with ResultsStore(str(store_path)) as store:
        with store.in_flight(kernel.identity, "{}", '{"BLOCK": 64}', run_id="earlier"):
            with store._session(write=True) as session:  # the mark as the container's earlier process left it
                session.query(_InFlightRow).update({"process_start": "another-boot:1"})
            assert [t.config.kwargs["BLOCK"] for t in store.record_crashes(kernel.identity)] == [64]


HOOK_SCRIPT = """
    import sys
    import torch, tunekit
    from tunekit.kernels import vector_add
    from tunekit.testing import faults

    def my_hook(nargs, reset_only=False):  # the user's hook, in the script: no worker can import it
        nargs["out_ptr"].zero_()

    kernel = tunekit.autotune(space=tunekit.Space(BLOCK=[faults.SEGFAULT_BLOCK, 64], num_warps=[4]), key=["n"],
                              strategy="exhaustive", store=sys.argv[1], pre_hook=my_hook)(faults.faulty_add)
    x, y, out = vector_add.inputs(1024)
    vector_add.launch(kernel, x, y, out)
    print("ok", torch.equal(out, x + y), kernel.best_config.kwargs["BLOCK"])
"""


def test_a_crash_with_a_hook_from_the_script_happens_once_and_the_kernel_stays_usable(store_path):
    """Injected: a segfaulting config of an importable kernel tuned with a ``pre_hook`` defined in the
    script. Survives: after the crash, isolation is wanted but the hook cannot reach a worker, so the
    next runs tune in-process without the crashed config, instead of failing to start a worker."""
    assert run_script(HOOK_SCRIPT, store_path).returncode == -signal.SIGSEGV
    for _ in range(2):
        again = run_script(HOOK_SCRIPT, store_path)
        assert again.returncode == 0 and again.stdout.split() == ["ok", "True", "64"], again.stderr[-2000:]



CRASHING_MODULE = """
import os
import triton, triton.language as tl

OFFSET = 1 << 40  # far out of bounds: the interpreter's process dies


@triton.jit
def crashing_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    value = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
    if BLOCK == 32:
        tl.store(out_ptr + offsets + OFFSET, value)
    else:
        tl.store(out_ptr + offsets, value, mask=mask)


if os.environ.get("CRASHMOD_VARIANT"):  # imported again with this set, the module builds another kernel
    @triton.jit
    def crashing_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):  # noqa: F811
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)
"""

USER = """
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch, triton
import tunekit
import crashmod

os.environ["CRASHMOD_VARIANT"] = "1"  # after the import: a benchmark worker would get another kernel
kernel = tunekit.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"],
                          store=sys.argv[1])(crashmod.crashing_add)
x, y, out = torch.rand(1024), torch.rand(1024), torch.empty(1024)
kernel[lambda meta: (triton.cdiv(1024, meta["BLOCK"]),)](x, y, out, 1024)
assert torch.equal(out, x + y)
print("winner", kernel.best_config.kwargs["BLOCK"], kernel.tuning_report.benchmark_workers_started)
"""


@pytest.mark.slow
def test_a_crash_is_answered_from_the_store_when_the_benchmark_worker_gives_way(store_path, tmp_path):
    """Injected: a config that kills the process in-process, then a second run in which the benchmark
    worker that should re-measure it refuses (the module, imported again there, builds another
    kernel). Survives: the tuning goes on in the caller's process, where the crashed config is
    answered with its stored crash (never launched, not stored again, so a later tuning with a
    worker still measures it), and the good config wins; the worker's start is counted."""
    (tmp_path / "crashmod.py").write_text(CRASHING_MODULE)
    (tmp_path / "user.py").write_text(USER)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("CRASHMOD_VARIANT", None)
    run = lambda: subprocess.run([sys.executable, str(tmp_path / "user.py"), str(store_path)],  # noqa: E731
                                 capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    died = run()
    assert died.returncode == -signal.SIGSEGV, died.stderr[-2000:]
    again = run()
    assert again.returncode == 0, again.stderr[-2000:]
    assert "winner 64 1" in again.stdout, again.stdout
    assert "not in a benchmark worker" in again.stderr and "its code differs" in again.stderr
    with ResultsStore(str(store_path)) as store:
        crashed = [row for row in store.rows() if json.loads(row["config"])["BLOCK"] == 32]
    assert len(crashed) == 1 and crashed[0]["error"].startswith("crashed:"), crashed


EXITING_SCRIPT = """
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch, triton, triton.language as tl
import tunekit


def leave(code):  # called from the interpreted kernel body: Python runs it
    if code == 99:
        os._exit(3)  # the process ends here, without a word
    sys.exit(0)  # a config that asks the interpreter to stop


@triton.jit
def leaving_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, HOW: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    if BLOCK == 32:
        leave(HOW)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


kernel = tunekit.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"],
                          store=sys.argv[1])(leaving_add)
n = int(sys.argv[2])
x, y, out = torch.rand(n), torch.rand(n), torch.empty(n)
kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n, HOW=int(sys.argv[3]))
assert torch.equal(out, x + y)
print("after the call: winner", kernel.best_config.kwargs["BLOCK"])
"""


def run_exiting(tmp_path, store_path, n: int, how: int) -> subprocess.CompletedProcess:
    script = tmp_path / "exiting.py"
    script.write_text(EXITING_SCRIPT)
    return subprocess.run([sys.executable, str(script), str(store_path), str(n), str(how)], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_a_config_that_exits_the_process_kills_it_once_not_once_per_key(store_path, tmp_path):
    """Injected: a config (of a kernel in the script, which no benchmark worker can import) that
    calls ``os._exit`` in-process. Survives: the store; the next runs, at this key and at new keys,
    never launch that config again and pick the other."""
    died = run_exiting(tmp_path, store_path, 1024, 99)
    assert died.returncode == 3, died.stderr[-2000:]
    for n in (1024, 2048, 4096):
        done = run_exiting(tmp_path, store_path, n, 99)
        assert done.returncode == 0 and "winner 64" in done.stdout, (n, done.stderr[-2000:])


@pytest.mark.slow
def test_a_config_that_calls_sys_exit_is_a_failed_config_not_the_end_of_the_script(store_path, tmp_path):
    """Injected: a config whose launch raises ``SystemExit(0)``. Survives: the script goes on after
    its call with a correct winner, and the config is stored as a runtime error naming SystemExit."""
    done = run_exiting(tmp_path, store_path, 1024, 0)
    assert done.returncode == 0 and "after the call: winner 64" in done.stdout, done.stderr[-2000:]
    with ResultsStore(str(store_path)) as store:
        [row] = [row for row in store.rows() if json.loads(row["config"])["BLOCK"] == 32]
    assert row["status"] == "runtime_error" and "SystemExit" in row["error"], row
