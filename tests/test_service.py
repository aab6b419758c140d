"""The worker service: one per process, shared by kernels and keys; budgets that hold; workers that
die with their parent, however it dies, and leave nothing on stderr.

Real compiles for a Hopper target run in compile workers on this CPU-only machine; benchmark
workers run kernels under the Triton interpreter."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest
import torch

import tunekit
from tunekit import Space, Status
from tunekit.kernels import vector_add
from tunekit.service import service
from tunekit.store import ResultsStore
from tunekit.testing import faults

N = 4096
TESTS = Path(__file__).parent


def descendants(pid: int) -> list[int]:
    try:
        children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []
    return children + [d for c in children for d in descendants(c)]


def running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


# -- one service for every kernel and key ------------------------------------------------------


def test_one_warm_benchmark_worker_serves_every_kernel_and_key(store_path):
    """Three isolated tunings in one process (two keys of one kernel, then another kernel): the
    first starts a benchmark worker, the others reuse it, and each run's costs are in the store."""
    service().shutdown(keep_zygote=True)
    first = tunekit.autotune(space=Space(BLOCK=[64, 2048]), key=["n"], store=store_path, isolate=True)(faults.faulty_add)
    other = tunekit.autotune(space=Space(BLOCK=[128, 1024]), key=["n"], store=store_path,
                             isolate=True)(vector_add.add_kernel)
    started = []
    for kernel, n in ((first, N), (first, 2 * N), (other, N)):
        x, y, out = vector_add.inputs(n)
        vector_add.launch(kernel, x, y, out)
        assert torch.equal(out, x + y)
        started.append(kernel.tuning_report.benchmark_workers_started)
    assert started == [1, 0, 0]
    costs = [json.loads(run["costs"]) for run in ResultsStore(store_path).runs()]
    assert [c["benchmark_workers_started"] for c in costs] == [1, 0, 0]
    # the first waited for the worker it started (how long against the others' waits is timing
    # noise on a loaded machine: the zygote starts a worker in milliseconds)
    assert costs[0]["seconds_waiting_for_workers"] > 0


def test_a_worker_forked_from_the_zygote_gets_the_callers_large_environment(monkeypatch, tmp_path):
    """A caller's environment of 50 KB (a CUDA machine's is several KB) reaches a worker forked from
    the zygote, with the caller's import path: the worker imports a module only that path finds."""
    from tunekit.workers import Worker

    zygote = None
    end = time.monotonic() + 120
    while zygote is None and time.monotonic() < end:  # spawned at first use: ready once it imported torch
        zygote = service().zygote()
        time.sleep(0.2)
    assert zygote is not None
    (tmp_path / "only_here.py").write_text("import os\ndef serve(connection):\n"
                                           "    from tunekit.workers import receive, send\n"
                                           "    send(connection, (os.environ['TUNEKIT_TEST_PADDING'][:3], len(os.environ['TUNEKIT_TEST_PADDING'])))\n")
    monkeypatch.setenv("TUNEKIT_TEST_PADDING", "abc" + "x" * 50_000)
    monkeypatch.syspath_prepend(str(tmp_path))
    worker = Worker("only_here:serve", zygote)
    try:
        assert worker.forked and worker.poll(60) and worker.receive() == ("abc", 50_003)
    finally:
        worker.kill()


# -- budgets ----------------------------------------------------------------------------------------


def test_a_seconds_budget_holds_with_the_finalists_retimed(store_path):
    """Injected: a config that never returns, third of five, under a 6 s budget, with a store (so
    three finalists are re-timed). Survives: the call returns within the budget plus 1 s; the
    hanging config is left unmeasured; the winner is a correct config."""
    kernel = tunekit.autotune(space=Space(BLOCK=[64, 2048, faults.HANG_BLOCK, 1024, 4096], num_warps=[4]),
                              key=["n"], strategy="exhaustive", budget=tunekit.Budget(seconds=6),
                              store=store_path, isolate=True)(faults.faulty_add)
    x, y, out = vector_add.inputs(N)
    start = time.perf_counter()
    vector_add.launch(kernel, x, y, out)
    elapsed = time.perf_counter() - start
    assert elapsed <= 6 + 1, elapsed
    assert faults.HANG_BLOCK not in [t.config.kwargs["BLOCK"] for t in kernel.trials]
    assert kernel.best_config.kwargs["BLOCK"] in (64, 2048) and torch.equal(out, x + y)


def test_a_budget_that_ends_before_any_measurement_falls_back_with_a_warning(store_path, capsys, monkeypatch):
    """Injected: the first config hangs and the budget is 3 s. Survives: no TuningError; the
    default config is used, with a warning that says so; nothing is stored as the winner, and
    nothing tells the user to pin the fallback."""
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")
    kernel = tunekit.autotune(space=Space(BLOCK=[faults.HANG_BLOCK, 64], num_warps=[4]), key=["n"],
                              strategy="exhaustive", budget=tunekit.Budget(seconds=3), store=store_path,
                              isolate=True, default_config=tunekit.Config({"BLOCK": 2048}, num_warps=4))(faults.faulty_add)
    x, y, out = vector_add.inputs(N)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        vector_add.launch(kernel, x, y, out)
    assert time.perf_counter() - start <= 3 + 1
    (fallback,) = [w for w in caught if "ended before any config was measured" in str(w.message)]
    assert "BLOCK: 2048" in str(fallback.message)
    assert fallback.filename == __file__  # the line that launched the kernel, not one of tunekit's
    assert kernel.best_config.kwargs["BLOCK"] == 2048 and torch.equal(out, x + y)
    assert kernel.tuning_report.fallback and ResultsStore(store_path).winner_rows() == []
    printed = capsys.readouterr().out
    assert "best config selected: BLOCK: 2048" in printed and "configs=[" not in printed


def test_a_budget_that_ends_in_a_hanging_config_never_launches_it(store_path):
    """Injected: the first config hangs, the budget is 2 s and there is no default config. Survives:
    a TuningError that says why, instead of launching the config that was cut off mid-run (it
    would hang the caller's process) or one that was never compiled."""
    kernel = tunekit.autotune(space=Space(BLOCK=[faults.HANG_BLOCK, 64], num_warps=[4]), key=["n"],
                              strategy="exhaustive", budget=tunekit.Budget(seconds=2), store=store_path,
                              isolate=True)(faults.faulty_add)
    x, y, out = vector_add.inputs(N)
    start = time.perf_counter()
    with pytest.raises(tunekit.TuningError, match="no config is known to be safe to launch"):
        vector_add.launch(kernel, x, y, out)
    assert time.perf_counter() - start <= 2 + 1
    assert ResultsStore(store_path).winner_rows() == []


# -- the Autotuner's compile path for a GPU target ---------------------------------------------------


HOPPER_COMPILE_CHILD = """
import json, os, sys
os.environ["TRITON_INTERPRET"] = "0"
sys.path.insert(0, {tests!r})
import torch
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver
import tunekit
from tunekit.compiler import _StubDriver
from tunekit.deadline import Clock, Deadline
from tunekit.keys import TuningKey
from tunekit.session import TuningSession
import gpu_target_kernels

kernel = tunekit.autotune(space=tunekit.Space(STEPS=[1, 2, 3, 4, 5, 6, 7, 8, 100_000]), key=[], store=None,
                          compile_workers=2, compile_timeout=20)(gpu_target_kernels.slow_to_compile)
driver.set_active(_StubDriver(GPUTarget("cuda", 90, 32)))
session = TuningSession(kernel.launch, kernel.space, kernel.options, kernel.store, kernel.identity,
                        TuningKey((), (), ("torch.float32",)), kernel.space_hash)
given = []  # the first config alone, then one more per call: as a tuning measures its fallback first
def more():
    left = kernel.space.configs()[len(given):len(given) + 1]
    given.extend(left)
    return left
results = dict(session.compile([], more, (torch.zeros(4),), {{}}, Deadline(Clock(), None)))
print(json.dumps({{"results": {{i: [r.status.value, r.seconds, r.shared_bytes] for i, r in results.items()}},
                  "workers_started": session._compile_workers_started}}))
"""


def _compile_child_report(template: str, tmp_path) -> dict:
    """Run a child script of this section (the interpreter off, Triton's cache in ``tmp_path``)
    and return the JSON it printed last."""
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(template.format(tests=str(TESTS))))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_the_autotuners_compile_path_compiles_for_hopper_in_threads_and_workers(tmp_path):
    """The tuning session's compile step, as the Autotuner runs it on a GPU, for a Hopper target on
    this CPU-only machine (a fresh process: Triton imported for real compiles): nine configs, one
    of which compiles for minutes, given the first alone and then one more each time the round
    asks (as a tuning that measures its fallback first, then keeps configs in flight); they
    compile in threads of the process at once and in compile workers once those are ready (forked
    once a second config comes); shared memory is reported; the slow one is cut off at the
    compile timeout (20 s) alone."""
    report = _compile_child_report(HOPPER_COMPILE_CHILD, tmp_path)
    results = {int(i): r for i, r in report["results"].items()}
    assert sorted(results) == list(range(9))
    assert all(status == "ok" and seconds > 0 and shared is not None for status, seconds, shared in
               (results[i] for i in range(8)))
    assert results[8][0] == "timeout" and report["workers_started"] >= 1
    assert any(p.name.endswith(".cubin") for p in (tmp_path / "cache").rglob("*"))


OVERDUE_CHILD = """
import json, os, sys, time
os.environ["TRITON_INTERPRET"] = "0"
sys.path.insert(0, {tests!r})
import torch
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver
import tunekit
from tunekit.compiler import _StubDriver
from tunekit.deadline import Clock, Deadline
from tunekit.keys import TuningKey
from tunekit.session import TuningSession
import gpu_target_kernels

kernel = tunekit.autotune(space=tunekit.Space(STEPS=[1, 2, 3, 100_000, 4]), key=[], store=None,
                          compile_workers=2, compile_timeout=30)(gpu_target_kernels.slow_to_compile)
driver.set_active(_StubDriver(GPUTarget("cuda", 90, 32)))
session = TuningSession(kernel.launch, kernel.space, kernel.options, kernel.store, kernel.identity,
                        TuningKey((), (), ("torch.float32",)), kernel.space_hash)
configs, given, events, begin = kernel.space.configs(), [], [], time.perf_counter()
def more():  # the first four one per call, the last only once the others are said to be late
    left = configs[len(given):len(given) + 1] if len(given) < 4 or "late" in events else []
    given.extend(left)
    return left
def overdue():
    events.append("late")
    events.append(round(time.perf_counter() - begin, 2))
    return LEAVE_OUT
def leave_late_out():
    events.append("left out")
for index, result in session.compile([], more, (torch.zeros(4),), {{}}, Deadline(Clock(), None), overdue=overdue,
                                     leave_late_out=leave_late_out):
    events.append([index, result.status.value, round(time.perf_counter() - begin, 2)])
print(json.dumps({{"events": events, "compile_seconds": session._compile_seconds_here,
                  "seconds": time.perf_counter() - begin}}))
"""


@pytest.mark.slow
def test_a_compile_held_far_longer_than_the_others_is_said_to_be_late_and_the_round_goes_on(tmp_path):
    """The tuning session's compile step for a Hopper target on this CPU-only machine (real
    compiles, a fresh process): three quick configs, then one that compiles for minutes, and
    nothing more to compile. Once no compile has finished for ``OVERDUE_FACTOR`` times the mean of
    the three (at least ``OVERDUE_FLOOR_SECONDS``), the round says the one left is late (``overdue``), and takes the config
    given after that, which compiles while the slow one is still running; it says so again each
    time as long passes without a finished compile, until the slow one is cut off at the compile
    timeout (30 s)."""
    report = _compile_child_report(OVERDUE_CHILD.replace("LEAVE_OUT", "False"), tmp_path)
    from tunekit.session import OVERDUE_FACTOR, OVERDUE_FLOOR_SECONDS

    events, compiled = report["events"], report["compile_seconds"]
    results = [event for event in events if isinstance(event, list)]
    assert sorted((index, status) for index, status, _ in results[:3]) == [(0, "ok"), (1, "ok"), (2, "ok")]
    assert [(index, status) for index, status, _ in results[3:]] == [(4, "ok"), (3, "timeout")]
    first, then = (max(OVERDUE_FLOOR_SECONDS, OVERDUE_FACTOR * sum(compiled[:n]) / n) for n in (3, 4))
    said = [events[i + 1] for i, event in enumerate(events) if event == "late"]
    slack = 5.0  # the round polls between results; a loaded machine polls late
    assert first - 0.02 <= said[0] - results[2][2] <= first + slack  # since the third result (times to 0.01 s)
    assert said[0] < results[3][2] < said[1]
    assert then - 0.02 <= said[1] - results[3][2] <= then + slack
    assert all(then - 0.02 <= later - earlier <= then + slack for earlier, later in zip(said[1:], said[2:]))
    assert said[-1] < results[4][2] < said[-1] + then + slack and results[4][2] >= 30


@pytest.mark.slow
def test_late_compiles_the_search_may_leave_out_are_stopped_at_once(tmp_path):
    """The same compile step, where the search answers that the configs in flight are the last it
    will ask for (``overdue()`` returns True): once the three quick configs are compiled and the
    slow one is late, the round ends there, without its result, long before the compile timeout
    (30 s) would cut it."""
    report = _compile_child_report(OVERDUE_CHILD.replace("LEAVE_OUT", "True"), tmp_path)
    events = report["events"]
    results = [event for event in events if isinstance(event, list)]
    assert sorted((index, status) for index, status, _ in results) == [(0, "ok"), (1, "ok"), (2, "ok")]
    said = [events[i + 1] for i, event in enumerate(events) if event == "late"]
    assert len(said) == 1 and said[0] < 20 and events[-2:] == [said[0], "left out"]
    assert report["seconds"] < 25  # the round ended there: the slow compile was not waited for


@pytest.mark.slow
def test_configs_no_worker_has_started_are_compiled_before_late_ones_are_left_out(tmp_path):
    """Two workers, three quick configs, then two that compile for minutes and three quick ones
    given together, and the search answering that they are the last (``overdue()`` True). The
    two slow ones hold both workers, so the quick ones wait for a worker: they are not late, and
    the round waits for them (the compile timeout, 30 s, frees the workers) before it leaves
    anything out. Every quick config gets its result."""
    child = OVERDUE_CHILD.replace("LEAVE_OUT", "True").replace(
        "STEPS=[1, 2, 3, 100_000, 4]", "STEPS=[1, 2, 3, 100_000, 100_001, 4, 5, 6]").replace(
        'left = configs[len(given):len(given) + 1] if len(given) < 4 or "late" in events else []',
        "left = configs[len(given):len(given) + 1] if len(given) < 3 else configs[len(given):]")
    report = _compile_child_report(child, tmp_path)
    results = {index: status for index, status, _ in (e for e in report["events"] if isinstance(e, list))}
    assert {results.get(index) for index in (0, 1, 2, 5, 6, 7)} == {"ok"}, report["events"]
    assert "late" in report["events"]  # said late while the quick ones waited, and not left out then


# -- lifetime -------------------------------------------------------------------------------------

COMPILING_CHILD = """
import os, sys
os.environ["TRITON_INTERPRET"] = "0"
sys.path.insert(0, {tests!r})
import torch
from triton.backends.compiler import GPUTarget
import gpu_target_kernels
from tunekit.compiler import TensorSpec, compile_job_for
from tunekit.service import service
job = compile_job_for(gpu_target_kernels.slow_to_compile, GPUTarget("cuda", 90, 32), (TensorSpec(torch.float32),),
                      {{"STEPS": 200_000}})
print("compiling", flush=True)
with service().compile_pool(2) as pool:
    for index, result in pool.as_completed([job, job]):
        print(index, result, flush=True)
"""

TUNING_CHILD = """
import os
os.environ["TRITON_INTERPRET"] = "1"
import tunekit
from tunekit import Space
from tunekit.kernels import vector_add
from tunekit.testing import faults
kernel = tunekit.autotune(space=Space(BLOCK=[faults.HANG_BLOCK, 64]), key=["n"], strategy="exhaustive", store=None,
                          isolate=True, run_timeout=600)(faults.faulty_add)
x, y, out = vector_add.inputs(4096)
print("tuning", flush=True)
vector_add.launch(kernel, x, y, out)
"""


def start_child(code: str, tmp_path: Path) -> subprocess.Popen:
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(code))
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def workers_of(child: subprocess.Popen, word: str, at_least: int) -> list[int]:
    """Wait for the child to say ``word`` and to have ``at_least`` processes under it at work."""
    assert child.stdout.readline().strip() == word
    end = time.monotonic() + 120
    while time.monotonic() < end:
        found = descendants(child.pid)
        if len(found) >= at_least:
            time.sleep(2.0)  # let them get to work (a compile under way, a kernel running)
            return descendants(child.pid)
        time.sleep(0.2)
    pytest.fail(f"the child started {descendants(child.pid)} only")


def kill_and_collect(child: subprocess.Popen, how: signal.Signals, workers: list[int]) -> str:
    """Send ``how`` to the child; assert that none of ``workers`` outlives it by 10 s; its stderr."""
    child.send_signal(how)
    _, stderr = child.communicate(timeout=60)
    end = time.monotonic() + 10
    while any(running(pid) for pid in workers) and time.monotonic() < end:
        time.sleep(0.1)
    assert not [pid for pid in workers if running(pid)], workers
    return stderr


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_compile_workers_die_with_a_killed_parent(tmp_path, how):
    """Injected: a process compiling two minutes-long kernels for Hopper in two compile workers is
    killed. Survives: nothing; every worker and compiler under it is gone within seconds, and no
    traceback reaches stderr."""
    child = start_child(COMPILING_CHILD.format(tests=str(TESTS)), tmp_path)
    stderr = kill_and_collect(child, how, workers_of(child, "compiling", at_least=2))
    assert "Traceback" not in stderr and "Error" not in stderr, stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_benchmark_worker_dies_with_a_killed_parent(tmp_path, how):
    """Injected: a process whose isolated tuning is stuck in a hanging config is killed. Survives:
    nothing: its benchmark worker is gone within seconds, and no traceback reaches stderr."""
    child = start_child(TUNING_CHILD, tmp_path)
    stderr = kill_and_collect(child, how, workers_of(child, "tuning", at_least=1))
    assert "Traceback" not in stderr, stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["returns", "raises"])
def test_a_script_that_tuned_leaves_no_worker_and_nothing_of_tunekit_on_stderr(tmp_path, ending):
    """A script tunes isolated (its benchmark worker kept warm afterwards) and then ends, normally or
    with an exception of its own: its workers go with it, and stderr holds nothing from tunekit
    (only the script's own traceback when it raised)."""
    code = TUNING_CHILD.replace("faults.HANG_BLOCK, 64", "64, 2048").replace("run_timeout=600", "run_timeout=60")
    if ending == "raises":
        code += "raise RuntimeError('the script failed after tuning')\n"
    child = start_child(code, tmp_path)
    assert child.stdout.readline().strip() == "tuning"
    _, stderr = child.communicate(timeout=300)
    if ending == "returns":
        assert child.returncode == 0 and stderr == "", stderr[-2000:]
    else:
        assert child.returncode == 1 and stderr.count("Traceback") == 1, stderr[-2000:]
        assert stderr.rstrip().endswith("RuntimeError: the script failed after tuning")
    time.sleep(1.0)
    leftovers = [p for p in Path("/proc").iterdir() if p.name.isdigit() and running(int(p.name))
                 and "serve(" in _cmdline(int(p.name)) and f", {child.pid}" in _cmdline(int(p.name))]
    assert leftovers == []


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


USERS_SIGTERM_HANDLER_CHILD = """
import os, signal, sys, time
def save_checkpoint(signum, frame):
    print("checkpoint saved by", os.getpid(), flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, save_checkpoint)
from tunekit.workers import Zygote
zygote = Zygote.fork()
print(os.getpid(), zygote.pid, flush=True)
time.sleep(120)
"""


def test_a_users_sigterm_handler_runs_in_the_users_process_only(tmp_path):
    """Injected: a script with its own SIGTERM handler (a training job saving a checkpoint) forks
    the worker zygote, as on a GPU machine at decoration, and a scheduler sends SIGTERM to the whole
    process group. Survives: the handler runs once, in the script's process, not in the zygote, and
    the zygote is gone."""
    script = tmp_path / "job.py"
    script.write_text(USERS_SIGTERM_HANDLER_CHILD)
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    main, zygote = (int(pid) for pid in child.stdout.readline().split())
    os.killpg(child.pid, signal.SIGTERM)
    stdout, stderr = child.communicate(timeout=60)
    assert stdout.splitlines() == [f"checkpoint saved by {main}"], (stdout, stderr)
    end = time.monotonic() + 10
    while running(zygote) and time.monotonic() < end:
        time.sleep(0.1)
    assert not running(zygote)


INTERRUPTED_CHILD = """
import os, signal, threading, time
os.environ["TRITON_INTERPRET"] = "1"
signal.signal(signal.SIGINT, signal.default_int_handler)
import tunekit
from tunekit import Space
from tunekit.kernels import vector_add
from tunekit.testing import faults
hanging = tunekit.autotune(space=Space(BLOCK=[faults.HANG_BLOCK, 64]), key=["n"], strategy="exhaustive", store=None,
                           isolate=True, run_timeout=600)(faults.faulty_add)
x, y, out = vector_add.inputs(4096)
threading.Timer(8.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()  # Ctrl-C in a notebook
try:
    vector_add.launch(hanging, x, y, out)
except KeyboardInterrupt:
    print("interrupted", flush=True)
good = tunekit.autotune(space=Space(BLOCK=[64, 1024, 2048]), key=["n"], strategy="exhaustive", store=None,
                        isolate=True)(vector_add.add_kernel)
start = time.perf_counter()
vector_add.launch(good, x, y, out)
print(round(time.perf_counter() - start, 1), sorted(t.status.value for t in good.trials), bool((out == x + y).all()))
"""


@pytest.mark.slow
def test_tuning_again_after_an_interrupted_tuning_gets_a_fresh_worker(tmp_path):
    """Injected: Ctrl-C (caught, as in a notebook) while the benchmark worker runs a config that
    hangs; then another kernel is tuned in the same process. Survives: the second tuning gets a
    fresh worker, not the busy one (whose stale reply or endless run it would wait for): it finishes
    with every config ok and the right output."""
    child = start_child(INTERRUPTED_CHILD, tmp_path)
    stdout, stderr = child.communicate(timeout=240)
    lines = stdout.splitlines()
    assert child.returncode == 0 and lines[0] == "interrupted", (stdout, stderr[-2000:])
    seconds, statuses = lines[1].split(" ", 1)
    assert float(seconds) < 60 and statuses == "['ok', 'ok', 'ok'] True"


def test_a_warm_worker_finds_a_kernel_on_a_path_added_after_it_started(tmp_path, monkeypatch):
    """A benchmark worker kept warm from one tuning serves the next, of a kernel in a directory
    the caller put on its import path only afterwards (a notebook's sys.path.append)."""
    first = tunekit.autotune(space=Space(BLOCK=[64, 2048]), key=["n"], store=None, isolate=True)(faults.faulty_add)
    x, y, out = vector_add.inputs(N)
    vector_add.launch(first, x, y, out)
    (tmp_path / "late_kernels.py").write_text(Path(vector_add.__file__).read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    import late_kernels

    second = tunekit.autotune(space=Space(BLOCK=[64, 2048]), key=["n"], store=None, isolate=True)(late_kernels.add_kernel)
    vector_add.launch(second, x, y, out)
    assert second.tuning_report.benchmark_workers_started == 0  # the warm one
    assert [t.status for t in second.trials] == [Status.OK, Status.OK] and torch.equal(out, x + y)


def test_a_kernel_loaded_from_a_file_by_path_is_not_sent_to_workers(tmp_path):
    """A module a worker could not import by name (loaded with spec_from_file_location, or from a
    directory no longer on the path) gives no worker address: its configs compile in threads and
    run in this process, instead of failing in workers."""
    import importlib.util

    from tunekit.isolation import kernel_address

    assert kernel_address(vector_add.add_kernel) == ("tunekit.kernels.vector_add", "add_kernel")
    spec = importlib.util.spec_from_file_location("kernels_by_path", vector_add.__file__)
    module = importlib.util.module_from_spec(spec)
    sys.modules["kernels_by_path"] = module
    try:
        spec.loader.exec_module(module)
        assert kernel_address(module.add_kernel) is None
    finally:
        del sys.modules["kernels_by_path"]


INHERITED_PIPE_CHILD = """
import subprocess, sys
from tunekit.workers import Zygote
helper = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
zygote = Zygote.fork()  # as at decoration on a GPU machine, after the script opened a pipe
helper.stdin.close()  # the end of input for the helper
try:
    helper.wait(timeout=20)
    print("helper finished", flush=True)
except subprocess.TimeoutExpired:
    print("helper still waiting", flush=True)
    helper.kill()
zygote.close()
"""


def test_the_zygote_lets_go_of_the_users_open_files(tmp_path):
    """Injected: a script opens a pipe to a helper process, forks the zygote (as at decoration on
    a GPU machine), then closes the pipe. Survives: the helper sees the end of its input; the zygote
    does not hold the pipe open."""
    script = tmp_path / "pipe.py"
    script.write_text(INHERITED_PIPE_CHILD)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "helper finished", (done.stdout, done.stderr[-2000:])


def test_triton_build_key_computed_ahead_in_a_thread_is_the_key_a_miss_gets():
    """The build key a kernel's first miss needs (its store identity) is computed in one thread at
    decoration, outside the interpreter, while the caller goes on; the miss, and any fork (which
    copies only the forking thread), wait for that thread. Run in a fresh process: the thread is
    started once per process."""
    script = textwrap.dedent("""
        import threading
        from tunekit import compat
        compat.prefetch_triton_build_key()
        compat.prefetch_triton_build_key()
        threads = [t for t in threading.enumerate() if t.name == "tunekit-triton-key"]
        key = compat.triton_build_key()
        assert len(compat._prefetch) == 1 and len(threads) <= 1
        assert not compat._prefetch[0].is_alive()
        try:
            from triton.runtime.cache import triton_key
        except ImportError:
            from triton.compiler.compiler import triton_key
        assert key == triton_key() and len(key) > 16
        print("ok")
    """)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
