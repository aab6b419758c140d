"""Real code swaps ``triton.autotune`` for tunekit's before importing a library, and the library's
kernels are wrapped every which way: ``triton.heuristics`` above or below the autotuner, its own
objects that forward ``[grid]`` and ``run``, kernels in ``__main__``, in closures, several
autotuners over one ``fn``. Each runs here with the same call as under stock Triton, in a fresh
process (the swap happens before the import, as a user makes it), under the interpreter.

The library prints a line at import, as real ones do when they probe the device: it must reach
stderr once (the user's own import), never again from a worker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

LIBRARY = '''
import os, sys
import triton
import triton.language as tl

print("fakelib: probing the device at import", file=sys.stderr)
CONFIGS = [triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})]


@triton.heuristics({"EVEN": lambda args: args["n"] % 64 == 0})
@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def heuristics_over_autotune(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def autotune_over_heuristics(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


class LibraryKernel:
    """A library's own wrapper, forwarding ``[grid]`` and ``run`` (as some wrap for logging)."""

    def __init__(self, fn):
        self.fn = fn

    def __getitem__(self, grid):
        return self.fn[grid]

    def run(self, *args, **kwargs):
        return self.fn.run(*args, **kwargs)


@LibraryKernel
@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def wrapped_by_the_library(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def make_kernel():
    """A kernel made at run time, inside a function (Triton kernels cannot close over locals)."""
    @triton.autotune(configs=CONFIGS, key=["n"])
    @triton.jit
    def shifted(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask) + 1.0,
                 mask=mask)
    return shifted


@triton.jit
def _shared(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


# two autotuners over one JIT function, with different lists
small_blocks = triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"])(_shared)
large_blocks = triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 512})], key=["n"])(_shared)

if os.environ.get("FAKELIB_VARIANT") == "doubled":  # the module builds another kernel in another environment
    @triton.autotune(configs=CONFIGS, key=["n"])
    @triton.jit
    def variant(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, 2 * (tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask)), mask=mask)
else:
    @triton.autotune(configs=CONFIGS, key=["n"])
    @triton.jit
    def variant(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
'''

USER = '''
import functools, os, sys
import torch, triton, triton.language as tl
import tunekit
triton.autotune = {swap}
from fakelib import ops

n = 1000
x, y = torch.rand(n), torch.rand(n)


def check(kernel, expected, **kwargs):
    out = torch.empty(n)
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n, **kwargs)
    assert torch.allclose(out, expected), kernel


@triton.autotune(configs=[triton.Config({{"BLOCK": 64}}), triton.Config({{"BLOCK": 128}})], key=["n"])
@triton.jit
def in_main(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) - tl.load(y_ptr + offs, mask=mask), mask=mask)


if {isolated}:  # a benchmark worker importing fakelib now (a fresh one) builds another kernel
    os.environ["FAKELIB_VARIANT"] = "doubled"
    try:
        check(ops.variant, x + y)
    except tunekit.isolation.IsolationError as error:
        assert "its code differs" in str(error), error
    else:
        raise AssertionError("variant was tuned in a worker that had another kernel")
    del os.environ["FAKELIB_VARIANT"]
check(ops.heuristics_over_autotune, x + y)
check(ops.autotune_over_heuristics, x + y)
check(ops.wrapped_by_the_library, x + y)
check(ops.small_blocks, x + y)
check(ops.large_blocks, x + y)
print("bests:", ops.small_blocks.best_config.kwargs["BLOCK"], ops.large_blocks.best_config.kwargs["BLOCK"])
if {isolated}:  # asked for, and impossible: said by name
    for kernel, why in ((ops.make_kernel(), "inside a function"), (in_main, "in __main__")):
        try:
            check(kernel, x + y)
        except tunekit.isolation.IsolationError as error:
            assert why in str(error), error
        else:
            raise AssertionError(kernel)
else:
    check(ops.make_kernel(), x + y + 1.0)
    check(in_main, x - y)
    os.environ["FAKELIB_VARIANT"] = "doubled"  # nothing imports fakelib again: the user's kernel is tuned
    check(ops.variant, x + y)
print("all ok")
'''


def run_user(tmp_path: Path, swap: str, isolated: bool = False) -> subprocess.CompletedProcess:
    (tmp_path / "fakelib").mkdir(exist_ok=True)
    (tmp_path / "fakelib" / "__init__.py").write_text("")
    (tmp_path / "fakelib" / "ops.py").write_text(LIBRARY)
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(USER.format(swap=swap, isolated=isolated)))
    env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEKIT_STORE": str(tmp_path / "store.db"),
           "PYTHONPATH": str(tmp_path)}
    env.pop("FAKELIB_VARIANT", None)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, env=env,
                          cwd=tmp_path)


@pytest.mark.slow
def test_every_wrapping_tunes_with_the_same_call_and_nothing_new_on_stderr(tmp_path):
    done = run_user(tmp_path, "tunekit.autotune")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "all ok" in done.stdout
    assert "bests: 32" in done.stdout or "bests: 64" in done.stdout  # each autotuner chose from its own list
    assert done.stdout.split("bests: ")[1].split()[1] in ("256", "512")
    assert done.stderr.splitlines() == ["fakelib: probing the device at import"], done.stderr[-3000:]


@pytest.mark.slow
def test_benchmark_workers_find_wrapped_kernels_and_keep_the_librarys_output(tmp_path):
    """``isolate=True`` for every kernel: a benchmark worker imports the library again to get each
    kernel. Heuristics over the autotuner and the library's wrapper are looked through there,
    and what the import prints stays out of the user's stderr. Kernels no worker can have (in
    ``__main__``, inside a function) or that the import builds otherwise there (``variant``: the
    user changed the environment the module reads) are refused by name: isolation was asked for."""
    done = run_user(tmp_path, "functools.partial(tunekit.autotune, isolate=True)", isolated=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "all ok" in done.stdout
    assert done.stderr.splitlines() == ["fakelib: probing the device at import"], done.stderr[-3000:]


def test_an_explicit_isolate_with_a_kernel_no_worker_can_import_says_why(tmp_path):
    """``isolate=True`` is a request: for a kernel defined inside a function it is refused by name
    before anything runs (an IsolationError naming the kernel and how to make it importable)."""
    import torch
    import triton
    import triton.language as tl

    import tunekit
    from tunekit.isolation import IsolationError

    @tunekit.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"],
                      isolate=True, store=str(tmp_path / "s.db"))
    @triton.jit
    def local(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, 1.0, mask=offs < n)

    x = torch.zeros(100)
    with pytest.raises(IsolationError, match="local is defined in __main__ or inside a function"):
        local[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, 100)


@pytest.mark.skipif(os.path.exists("/dev/nvidia0"), reason="a machine with a GPU: the kernel runs there")
def test_without_a_gpu_or_the_interpreter_one_line_says_what_to_set_and_nothing_is_stored(tmp_path):
    script = textwrap.dedent("""
        import torch, triton, triton.language as tl
        import tunekit

        @tunekit.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
        @triton.jit
        def fill(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 1.0, mask=offs < n)

        x = torch.zeros(100)
        try:
            fill[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, 100)
        except tunekit.NoDeviceError as error:
            print(error)
    """)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TUNEKIT_STORE"] = str(tmp_path / "store.db")
    (tmp_path / "script.py").write_text(script)  # Triton reads a kernel's source from its file
    done = subprocess.run([sys.executable, str(tmp_path / "script.py")], capture_output=True, text=True, timeout=300,
                          env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = done.stdout.splitlines()
    assert "TRITON_INTERPRET=1" in line and "no GPU driver" in line
    assert not (tmp_path / "store.db").exists()


HEURISTIC_MODULE = '''
import os
import triton
import triton.language as tl

WIDE = os.environ.get("HEURMOD_WIDE") == "1"  # read at import


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
@triton.heuristics({"STEP": lambda args: 2 if WIDE else 1})
@triton.jit
def strided_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr, STEP: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs * STEP, mask=offs * STEP < n), mask=offs < n)
'''

HEURISTIC_USER = '''
import functools, os
import torch, triton
import tunekit
triton.autotune = functools.partial(tunekit.autotune, isolate=True)
import heurmod

os.environ["HEURMOD_WIDE"] = "1"  # after the import: a benchmark worker's heuristics would differ
x, out = torch.arange(256.0), torch.empty(256)
try:
    heurmod.strided_copy[lambda meta: (triton.cdiv(256, meta["BLOCK"]),)](x, out, 256)
except tunekit.isolation.IsolationError as error:
    print("refused:", error)
'''


@pytest.mark.slow
def test_a_benchmark_worker_whose_heuristics_differ_refuses(tmp_path):
    """Heuristics under the autotuner come from the worker's own import of the module; where they set
    other values there (the module read an environment variable the user changed since), the worker
    refuses by name instead of timing another kernel."""
    (tmp_path / "heurmod.py").write_text(HEURISTIC_MODULE)
    (tmp_path / "user.py").write_text(HEURISTIC_USER)
    env = {**os.environ, "TRITON_INTERPRET": "1", "TUNEKIT_STORE": str(tmp_path / "store.db"),
           "PYTHONPATH": str(tmp_path)}
    env.pop("HEURMOD_WIDE", None)
    done = subprocess.run([sys.executable, str(tmp_path / "user.py")], capture_output=True, text=True, timeout=300,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "refused:" in done.stdout and "heuristics set {'STEP': '2'}" in done.stdout, done.stdout
