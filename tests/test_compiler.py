"""The compile pool compiles real kernels for a Hopper target (GPUTarget("cuda", 90, 32)) in
spawn-started workers on this CPU-only machine, through the JIT's own path."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from triton.backends.compiler import GPUTarget

from tunekit.compiler import CompileJob, CompilePool, TensorSpec, compile_job_for
from tunekit.trial import Status

HOPPER = GPUTarget("cuda", 90, 32)
ADD = ("tunekit.kernels.vector_add", "add_kernel")
pytestmark = pytest.mark.slow


@pytest.fixture
def gpu_compile_env(tmp_path, monkeypatch):
    """Workers inherit this: real compiles (no interpreter) into a private Triton cache."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    return tmp_path / "triton-cache"


def add_job(block: int, warps: int = 4) -> CompileJob:
    spec = TensorSpec(torch.float16)
    return CompileJob(*ADD, HOPPER, (spec, spec, spec, 4096), {"BLOCK": block, "num_warps": warps})


def cache_files(cache: Path) -> set[str]:
    return {str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file()}


def test_parallel_compiles_report_status_and_shared_memory(gpu_compile_env):
    pool = CompilePool(workers=2)
    try:
        results = pool.compile([add_job(256), add_job(1024, 8), add_job(100)])
    finally:
        pool.close()
    assert [r.status for r in results] == [Status.OK, Status.OK, Status.COMPILE_ERROR]
    assert "power of 2" in results[2].error
    assert all(r.seconds > 0 for r in results) and results[0].shared_bytes is not None
    assert any(name.endswith(".cubin") for name in cache_files(gpu_compile_env))


def hanging_job() -> CompileJob:
    """A kernel that unrolls 200,000 steps at compile time: minutes of compiling."""
    return CompileJob("gpu_target_kernels", "slow_to_compile", HOPPER, (TensorSpec(torch.float32),),
                      {"STEPS": 200_000})


def test_a_compile_past_its_timeout_is_cut_off_and_its_worker_replaced(gpu_compile_env):
    """Injected: a compile that takes minutes, timeout 15 s (a fresh worker's first compile takes
    seconds on a loaded machine), one worker. Survives: the timeout is reported, only that worker
    is killed, and a new worker compiles the jobs queued behind it."""
    pool = CompilePool(workers=1)
    try:
        hung, quick = pool.compile([hanging_job(), add_job(512)], timeout=lambda: 15.0)  # as the adaptive one
        assert hung.status is Status.TIMEOUT and "exceeded 15.0 s" in hung.error and 15 <= hung.seconds < 60
        assert quick.status is Status.OK
        assert [r.status for r in pool.compile([add_job(128)])] == [Status.OK]
    finally:
        pool.close()


def test_a_deadline_stops_the_compiles_in_flight_and_leaves_them_out(gpu_compile_env):
    """Injected: two compiles that take minutes, and a deadline 3 s away. Survives: the pool
    returns by the deadline without a result for them (unmeasured, not failed), and compiles
    again afterwards."""
    import time

    pool = CompilePool(workers=2)
    try:
        pool.compile([add_job(256)])  # workers started: the deadline below measures compiles only
        begin = time.time()
        assert list(pool.as_completed([hanging_job(), hanging_job()], deadline=begin + 3)) == []
        assert time.time() - begin < 10
        assert [r.status for r in pool.compile([add_job(128)])] == [Status.OK]
    finally:
        pool.close()


def test_the_users_process_finds_the_workers_binary_in_the_cache(gpu_compile_env):
    pool = CompilePool(workers=1)
    try:
        assert pool.compile([add_job(256)])[0].status is Status.OK
    finally:
        pool.close()
    before = cache_files(gpu_compile_env)
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
    subprocess.run([sys.executable, "-c", script], check=True, env=dict(os.environ), timeout=300)
    assert cache_files(gpu_compile_env) == before  # nothing compiled again


def test_jobs_for_kernels_a_worker_cannot_import_are_declined():
    import triton
    import triton.language as tl

    @triton.jit
    def local_kernel(x_ptr):
        tl.store(x_ptr, 1.0)

    assert compile_job_for(local_kernel, HOPPER, (torch.zeros(1),), {}) is None


def test_a_script_without_a_main_guard_compiles_in_workers(gpu_compile_env, tmp_path):
    """multiprocessing's spawn would run such a script again in every worker; tunekit's workers
    are fresh interpreters that import only the compiler."""
    import subprocess
    import sys

    script = tmp_path / "script.py"
    script.write_text(
        "import torch\n"
        "from triton.backends.compiler import GPUTarget\n"
        "from tunekit.compiler import CompileJob, CompilePool, TensorSpec\n"
        "print('script body ran', flush=True)\n"
        "spec = TensorSpec(torch.float16)\n"
        "jobs = [CompileJob('tunekit.kernels.vector_add', 'add_kernel', GPUTarget('cuda', 90, 32), (spec, spec, spec, 4096),\n"
        "                   {'BLOCK': b, 'num_warps': 4}) for b in (256, 512)]\n"
        "pool = CompilePool(2)\n"
        "print([r.status.value for r in pool.compile(jobs)])\n"
        "pool.close()\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("script body ran") == 1 and "['ok', 'ok']" in done.stdout
