"""The compile pool compiles real kernels for a Hopper target (GPUTarget("cuda", 90, 32)) in
workers forked from the process that asks, on this CPU-only machine, through the JIT's own
path. The pools run in a child process with the interpreter off (``gpu_target_kernels``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tunekit.compiler import CompileJob, CompilePool, compile_job_for
from tunekit.trial import Status

pytestmark = pytest.mark.slow

ADD = ["tunekit.kernels.vector_add", "add_kernel"]
HALF = {"tensor": "float16"}


@pytest.fixture
def compile_rounds(tmp_path, monkeypatch):
    """Runs compile rounds in a child process with a private Triton cache; gives the cache too."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    import gpu_target_kernels

    cache = tmp_path / "triton-cache"

    def run(rounds: list[dict], workers: int = 2) -> list[dict]:
        return gpu_target_kernels.run_compile_rounds(rounds, workers, cache)

    run.cache = cache
    return run


def add(block: int, warps: int = 4) -> list:
    return [*ADD, [HALF, HALF, HALF, 4096], {"BLOCK": block, "num_warps": warps}]


HANGING = ["gpu_target_kernels", "slow_to_compile", [{"tensor": "float32"}], {"STEPS": 200_000}]


def cache_files(cache: Path) -> set[str]:
    return {str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file()}


def test_parallel_compiles_report_status_and_shared_memory(compile_rounds):
    [round_] = compile_rounds([{"jobs": [add(256), add(1024, 8), add(100)]}])
    statuses = [r[0] for r in round_["results"]]
    assert statuses == ["ok", "ok", "compile_error"], round_["results"]
    assert "power of 2" in round_["results"][2][2]
    assert all(r[1] > 0 for r in round_["results"]) and round_["results"][0][3] is not None
    assert any(name.endswith(".cubin") for name in cache_files(compile_rounds.cache))


def test_tensors_passed_by_keyword_compile_in_workers(compile_rounds):
    """A launch that names every argument (as flash-linear-attention's do): its tensors go to the
    workers as their specs, as positional ones do, so its configs compile in 2 workers, not in
    threads of this process."""
    tensor = {"tensor": "float16", "real": True}
    by_keyword = [*ADD, [], {"x_ptr": tensor, "y_ptr": tensor, "out_ptr": tensor, "n": 4096, "BLOCK": 256}]
    misaligned = [*ADD, [], {"x_ptr": tensor, "y_ptr": {**tensor, "misaligned": True}, "out_ptr": tensor,
                             "n": 4096, "BLOCK": 512}]
    [round_] = compile_rounds([{"jobs": [by_keyword, misaligned]}])
    # without a job for the workers, and no threads here in this round, each would be a compile error
    assert [r[0] for r in round_["results"]] == ["ok", "ok"], round_["results"]
    assert round_["started"] == 2


def test_jobs_given_as_results_come_are_compiled_by_the_same_workers(compile_rounds):
    """A round of 2 jobs on 2 workers that is given a job after each of its first 3 results (as a
    tuning keeps configs in flight): all 5 are compiled in the round, by the 2 workers started
    for it, the given ones indexed after the first 2."""
    [round_] = compile_rounds([{"jobs": [add(256), add(512)], "more": [add(128), add(1024, 8), add(100)]}])
    assert [r[0] for r in round_["results"]] == ["ok", "ok", "ok", "ok", "compile_error"], round_["results"]
    assert "power of 2" in round_["results"][4][2]
    assert round_["started"] == 2


def test_a_compile_past_its_timeout_is_cut_off_and_its_worker_replaced(compile_rounds):
    """Injected: a compile that takes minutes, timeout 15 s (a first compile takes seconds on a
    loaded machine), one compile at a time. Survives: the timeout is reported, only that worker
    is killed, and a new worker compiles the jobs queued behind it."""
    first, second = compile_rounds([{"jobs": [HANGING, add(512)], "timeout": 15.0}, {"jobs": [add(128)]}], workers=1)
    (hung, quick), [again] = first["results"], second["results"]
    assert hung[0] == "timeout" and "exceeded 15.0 s" in hung[2] and 15 <= hung[1] < 60
    assert quick[0] == "ok" and again[0] == "ok"


def test_a_deadline_stops_the_compiles_in_flight_and_leaves_them_out(compile_rounds):
    """Injected: two compiles that take minutes, and a deadline 3 s away. Survives: the pool
    returns by the deadline without a result for them (unmeasured, not failed), and compiles
    again afterwards."""
    warm, cut, after = compile_rounds([{"jobs": [add(256)]}, {"jobs": [HANGING, HANGING], "deadline": 3},
                                       {"jobs": [add(128)]}])
    assert cut["results"] == [None, None] and cut["seconds"] < 10
    assert after["results"][0][0] == "ok"


def test_the_users_process_finds_the_workers_binary_in_the_cache(compile_rounds):
    [round_] = compile_rounds([{"jobs": [add(256)]}], workers=1)
    assert round_["results"][0][0] == "ok"
    before = cache_files(compile_rounds.cache)
    script = textwrap.dedent("""
        import torch
        from triton.backends.compiler import GPUTarget
        from triton.runtime.driver import driver
        from tunekit.compiler import _StubDriver, TensorSpec
        from tunekit.kernels.vector_add import add_kernel
        driver.set_active(_StubDriver(GPUTarget("cuda", 90, 32)))
        spec = TensorSpec(torch.float16)
        add_kernel.warmup(spec, spec, spec, 4096, BLOCK=256, num_warps=4, grid=(1,))
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300,
                   env={**os.environ, "TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": str(compile_rounds.cache)})
    assert cache_files(compile_rounds.cache) == before  # nothing compiled again


def test_a_script_compiles_its_own_kernels_in_workers_without_running_again(tmp_path):
    """Kernels defined in the script being run (``__main__``, no main guard) and inside a function
    (as generated kernels are): multiprocessing's spawn would run the script again in every
    worker, and a fresh interpreter could not find either kernel; tunekit's compile workers are
    forked copies of the script's process. What the compiler prints there (the error of a config
    that does not compile, Triton's warnings) stays out of the script's output."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import torch, triton, triton.language as tl
        from triton.backends.compiler import GPUTarget
        from tunekit.compiler import CompilePool, TensorSpec, compile_job_for
        print('script body ran')  # not flushed: a fork must not print it again

        @triton.jit
        def copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        def make_fill():
            @triton.jit
            def fill(x_ptr, BLOCK: tl.constexpr):
                tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)
            return fill

        spec, target = TensorSpec(torch.float16), GPUTarget('cuda', 90, 32)
        jobs = [compile_job_for(copy, target, (spec, spec, 4096), {'BLOCK': b}) for b in (256, 512)]
        jobs += [compile_job_for(make_fill(), target, (spec,), {'BLOCK': b}) for b in (64, 3)]
        pool = CompilePool(2)
        results = pool.compile(jobs)
        print([r.status.value for r in results], pool.started, 'power of 2' in results[3].error)
        pool.close()
    """))
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTHONUNBUFFERED", None)  # its stdout, a pipe, is buffered: what it holds at a fork is copied
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("script body ran") == 1
    assert "['ok', 'ok', 'ok', 'compile_error'] 2 True" in done.stdout, done.stdout
    assert "power of 2" not in done.stderr


def test_arguments_that_hold_tensors_compile_in_this_process_not_in_a_worker():
    """A tuple of tensors or a tensor descriptor carries a tensor a worker would have to rebuild on
    a device (a copy of a process holding a CUDA context cannot start one): no job for workers."""
    import torch
    from triton.backends.compiler import GPUTarget
    from triton.tools.tensor_descriptor import TensorDescriptor

    from tunekit.compiler import TensorSpec
    from tunekit.kernels import vector_add

    target = GPUTarget("cuda", 90, 32)
    x = torch.zeros(64, 64)
    assert compile_job_for(vector_add.add_kernel, target, (x, x, x, 64), {"BLOCK": 64}) is not None
    assert compile_job_for(vector_add.add_kernel, target, ((x, x), x, x, 64), {"BLOCK": 64}) is None
    by_keyword = compile_job_for(vector_add.add_kernel, target, (), {"x_ptr": x, "y_ptr": x[:, 1:], "out_ptr": x,
                                                                      "n": 64, "BLOCK": 64})
    assert by_keyword is not None  # a tensor named by keyword goes as its spec, with its alignment
    assert by_keyword.kwargs["x_ptr"] == TensorSpec(torch.float32, True)
    assert by_keyword.kwargs["y_ptr"] == TensorSpec(torch.float32, False)
    assert compile_job_for(vector_add.add_kernel, target, (), {"x_ptr": (x, x), "y_ptr": x, "out_ptr": x,
                                                               "n": 64, "BLOCK": 64}) is None
    descriptor = TensorDescriptor.from_tensor(x, [16, 16])
    assert compile_job_for(vector_add.add_kernel, target, (descriptor, x, x, 64), {"BLOCK": 64}) is None


def test_a_fork_that_fails_leaves_the_compiles_to_threads(monkeypatch):
    """Injected: ``os.fork`` failing with EAGAIN (a process limit; ENOMEM under strict overcommit).
    Survives: no exception; every job is compiled by the threads of this process."""
    from tunekit.compiler import CompileResult, kernel_token

    def no_fork():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    jobs = [CompileJob(kernel_token(no_fork), None, (), {"BLOCK": b}) for b in (1, 2, 3)]
    pool = CompilePool(workers=2)
    try:
        results = dict(pool.as_completed(jobs, local=lambda index: CompileResult(Status.OK, 0.0)))
    finally:
        pool.close()
    assert sorted(results) == [0, 1, 2] and {r.status for r in results.values()} == {Status.OK}
    assert pool.started == 0


def test_jobs_given_as_results_are_taken_join_the_round(monkeypatch):
    """``as_completed(more=...)``, as a tuning that asks for a config as each trial comes: a job
    given after each of the first 3 results is compiled in the same round, indexed after the
    others, and each was asked for only once a result was taken before it (compiled here in
    threads: ``os.fork`` fails, as in the test above)."""
    from tunekit.compiler import CompileResult, kernel_token

    def no_fork():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    token = kernel_token(no_fork)
    taken, given_after = [], []

    def more():
        if len(given_after) < 3 and len(given_after) < len(taken):
            given_after.append(len(taken))
            return [CompileJob(token, None, (), {"BLOCK": 10 + len(given_after)})]
        return []

    pool = CompilePool(workers=2)
    try:
        for index, result in pool.as_completed([CompileJob(token, None, (), {"BLOCK": b}) for b in (1, 2)],
                                               local=lambda index: CompileResult(Status.OK, 0.0), more=more):
            taken.append(index)
    finally:
        pool.close()
    assert sorted(taken) == [0, 1, 2, 3, 4]
    assert len(given_after) == 3 and all(after >= k + 1 for k, after in enumerate(given_after))
    assert taken.index(2) >= given_after[0] and taken.index(4) >= given_after[2]
