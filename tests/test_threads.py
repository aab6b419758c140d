"""The worker service's threads (``tunekit.threads``): compiles in this process and background
tunings run there, and nothing of theirs runs on in the user's process once stopped (a timeout,
the process's exit)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from tunekit.compiler import CompilePool, CompileResult
from tunekit.threads import Stopped, TaskThreads, check_stopped, interruptible
from tunekit.trial import Status


def _busy_in_python(seconds: float, marks: list[str]) -> str:
    """Python work that ends only after ``seconds`` (a compile's passes between C++ calls),
    interruptible as a compile is."""
    try:
        with interruptible():
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                time.sleep(0.01)
        marks.append("ended by itself")
        return "done"
    finally:
        marks.append("left")


def test_a_stopped_task_ends_at_once_inside_an_interruptible_region_and_its_future_says_so():
    threads = TaskThreads()
    marks: list[str] = []
    future = threads.start("busy", _busy_in_python, 60.0, marks)
    time.sleep(0.2)
    started = time.monotonic()
    threads.stop(future)
    with pytest.raises(Stopped):
        future.result(5)
    assert time.monotonic() - started < 2.0
    assert marks == ["left"]  # its own cleanup ran; it did not run on to the end
    assert threads.running() == []


def test_outside_an_interruptible_region_a_stop_waits_for_the_tasks_next_check():
    """A stop must not land in a task's bookkeeping (a set of compiling threads, an Event): the
    task sees it where it checks, and the work between its checks completes."""
    threads = TaskThreads()
    begun: list[int] = []
    steps: list[int] = []

    def steps_with_checks() -> None:
        for step in range(100):
            check_stopped()
            begun.append(step)
            end = time.monotonic() + 0.05
            while time.monotonic() < end:  # bookkeeping a stop must not cut short
                pass
            steps.append(step)

    future = threads.start("careful", steps_with_checks)
    time.sleep(0.2)
    threads.stop(future)
    with pytest.raises(Stopped):
        future.result(5)
    assert 0 < len(steps) < 100 and steps == begun  # each step it began, it finished


def test_a_stop_kills_the_process_started_in_an_interruptible_region_and_no_other():
    """Injected: a task that starts a long-lived child outside any interruptible region (a
    background tuning's zygote), then waits on another child for a minute inside one (a compile
    in ``ptxas``). Survives: the first child; the second is killed, and the task ends within seconds."""
    threads = TaskThreads()
    kept: list[subprocess.Popen] = []

    def compile_in_ptxas() -> None:
        kept.append(subprocess.Popen(["sleep", "60"]))
        with interruptible():
            subprocess.run(["sleep", "60"])

    future = threads.start("waits", compile_in_ptxas)
    time.sleep(0.5)
    started = time.monotonic()
    threads.stop(future)
    with pytest.raises((Stopped, subprocess.SubprocessError)):
        future.result(10)
    assert time.monotonic() - started < 5.0
    try:
        assert kept[0].poll() is None  # the child started outside the region lives on
    finally:
        kept[0].kill()
        kept[0].wait()


def test_a_task_whose_thread_cannot_start_leaves_no_trace(monkeypatch):
    """Injected: ``Thread.start`` fails (the system's thread limit). Survives: the executor, which
    lists no task for it and starts the next one."""
    threads = TaskThreads()

    def no_thread(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    with monkeypatch.context() as patched:
        patched.setattr(threading.Thread, "start", no_thread)
        with pytest.raises(RuntimeError, match="can't start"):
            threads.start("doomed", sum, [1, 2])
    assert threads.running() == []
    assert threads.start("next", sum, [1, 2]).result(5) == 3


def test_stops_that_race_a_tasks_end_leave_every_future_settled_and_no_stray_exception(monkeypatch):
    """Injected: 300 short tasks, each stopped at a random moment around its end (an async
    exception can arrive after the function returned). Survives: every future ends with the
    task's result or ``Stopped``; no thread dies of an exception outside its task."""
    stray: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: stray.append(args.exc_value))
    threads = TaskThreads()
    rng = random.Random(0)
    futures = []
    def short(i: int) -> int:
        with interruptible():
            sum(range(rng.randrange(1, 20_000)))
        return i

    for i in range(300):
        future = threads.start("short", short, i)
        time.sleep(rng.random() * 0.002)
        threads.stop(future)
        futures.append(future)
    for i, future in enumerate(futures):
        try:
            assert future.result(10) == i
        except (Stopped, Exception) as error:  # a cancelled future raises CancelledError
            assert isinstance(error, Stopped) or future.cancelled()
    assert stray == [] and threads.running() == []


def test_a_compile_in_this_process_past_its_timeout_is_stopped_not_left_running():
    """Injected: a compile in a thread of this process (no worker can take it) that would run for
    a minute, timeout 0.5 s. Survives: the round, which gets a timeout result at once; the thread,
    which ends instead of compiling on in the user's process."""
    threads = TaskThreads()
    pool = CompilePool(workers=2, threads=threads)
    marks: list[str] = []

    def compile_here(index: int) -> CompileResult:
        _busy_in_python(60.0, marks)
        return CompileResult(Status.OK, 60.0)

    started = time.monotonic()
    results = dict(pool.as_completed([None], timeout=0.5, local=compile_here))
    assert results[0].status is Status.TIMEOUT and time.monotonic() - started < 5.0
    deadline = time.monotonic() + 5.0
    while threads.running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threads.running() == [] and marks == ["left"]
    pool.close()


def test_closing_a_pool_stops_its_compiles_in_threads_and_the_round_waiting_on_them_ends():
    """Injected: the pool is closed (the process exits) while a caller waits on a round of two
    one-minute compiles in threads. Survives: the caller, whose round ends with the stopped
    compile left out (not measured, not failed) instead of waiting forever for its result."""
    threads = TaskThreads()
    pool = CompilePool(workers=1, threads=threads)
    marks: list[str] = []
    got: list[tuple[int, CompileResult]] = []
    rounds = pool.as_completed([None, None], local=lambda index: _busy_in_python(60.0, marks) and None)
    consumer = threading.Thread(target=lambda: got.extend(rounds), daemon=True)
    consumer.start()
    time.sleep(0.5)
    pool.close(wait=True)
    assert marks == ["left"]
    consumer.join(5)
    assert not consumer.is_alive() and got == []


def test_a_stopped_tuning_waiting_on_a_compile_round_ends_at_once():
    """Injected: the process exits (``stop_all``) while a tuning task waits on a round whose one
    compile in a thread would take a minute. Survives: nothing keeps running: both end in seconds."""
    threads = TaskThreads()
    pool = CompilePool(workers=1, threads=threads)
    marks: list[str] = []
    tuning = threads.start("tuning", lambda: list(pool.as_completed(
        [None], local=lambda index: _busy_in_python(60.0, marks) and None)))
    time.sleep(0.5)
    started = time.monotonic()
    threads.stop_all(5.0)
    assert tuning.done() and threads.running() == [] and time.monotonic() - started < 3.0
    with pytest.raises(Stopped):
        tuning.result()


def test_a_stopped_tuning_waiting_on_its_benchmark_worker_ends_within_a_second():
    """Injected: the process exits while a tuning waits up to a minute for its benchmark worker's
    answer (a pipe nobody writes to). Survives: the wait, which sees the stop within 0.1 s."""
    from multiprocessing import Pipe
    from types import SimpleNamespace

    from tunekit.isolation import IsolatedRunner

    reading, writing = Pipe(duplex=False)
    runner = SimpleNamespace(_worker=SimpleNamespace(poll=reading.poll))
    threads = TaskThreads()
    waiting = threads.start("tuning", IsolatedRunner._poll, runner, 60.0)
    time.sleep(0.3)
    started = time.monotonic()
    threads.stop_all(5.0)
    assert waiting.done() and time.monotonic() - started < 1.0
    with pytest.raises(Stopped):
        waiting.result()
    writing.send("late")  # and a wait outside any task is a plain wait
    assert IsolatedRunner._poll(runner, 1.0) is True  # type: ignore[arg-type]


SLOW_REFERENCE = textwrap.dedent("""
    import time

    def slow_reference(x_ptr, y_ptr, out_ptr, n, **rest):
        time.sleep(0.5)  # every config's check takes a while: the tuning is under way at exit
        return {"out_ptr": x_ptr + y_ptr}
""")

BACKGROUND_AT_EXIT = textwrap.dedent("""
    import os, sys, time
    os.environ["TRITON_INTERPRET"] = "1"
    import torch, tunekit
    from tunekit.kernels import vector_add
    from slow_reference import slow_reference

    kernel = tunekit.autotune(space=vector_add.space(), key=["n"], strategy="exhaustive", store=sys.argv[1],
                              background=True, reference=slow_reference)(vector_add.add_kernel)
    x, y, out = vector_add.inputs(4096)
    vector_add.launch(kernel, x, y, out)
    from tunekit.store import ResultsStore
    store = ResultsStore(sys.argv[1], read_only=True)
    end = time.monotonic() + 60
    while not store.rows() and time.monotonic() < end:  # the tuning is under way: a config was measured
        time.sleep(0.2)
    import threading
    print([t.name for t in threading.enumerate() if t.name.startswith("tunekit-add")], time.time(), flush=True)
""")


@pytest.mark.slow
def test_a_script_ending_during_a_background_tuning_stops_it_and_exits_cleanly(tmp_path):
    """Injected: the script ends while its background tuning is under way (a config checked every
    half second, dozens left). Survives: the process exits within seconds with code 0 and a clean
    stderr; the tuning is stopped, not frozen mid-way: its run is closed in the store, with what
    was measured before the exit."""
    store = tmp_path / "s.db"
    (tmp_path / "slow_reference.py").write_text(SLOW_REFERENCE)
    child = subprocess.run([sys.executable, "-c", BACKGROUND_AT_EXIT, str(store)], capture_output=True, text=True,
                           timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert child.returncode == 0 and child.stderr == "", child.stderr[-2000:]
    running, ended_at = child.stdout.rsplit(" ", 1)
    assert running == "['tunekit-add_kernel']"  # the tuning ran when the script ended
    assert time.time() - float(ended_at) < 15  # stopped: not the minute its other configs would take
    from tunekit.kernels import vector_add
    from tunekit.store import ResultsStore

    reading = ResultsStore(store, read_only=True)
    assert 0 < len(reading.rows()) < len(vector_add.space())
    (run,) = reading.runs()
    assert run["finished_at"] is not None and run["winner"] is None
