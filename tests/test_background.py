"""background=True: a key with no winner launches a fallback at once and is tuned in a thread;
later calls switch to the winner, never while switching is unsafe (capture, tracing)."""

from __future__ import annotations

import json

import pytest
import torch
import triton
import triton.language as tl

import tunekit
import tunekit.autotuner
from tunekit.config import config_to_dict
from tunekit.kernels import vector_add
from tunekit.store import ResultsStore

N = 3000


def make(store, **options):
    return tunekit.autotune(space=vector_add.space(), key=["n"], strategy="random", budget=tunekit.Budget(evals=3),
                            store=str(store), background=True, **options)(vector_add.add_kernel)


def call(kernel, n=N):
    x, y, out = vector_add.inputs(n)
    vector_add.launch(kernel, x, y, out)
    assert torch.equal(out, x + y)
    return x, y, out


def test_the_first_call_launches_the_fallback_and_a_later_call_the_winner_tuned_on_copies(tmp_path, monkeypatch):
    """Injected: the caller frees its tensors' memory as soon as the first call returns. Survives:
    the tuning, which ran on copies taken during the call (every trial ok)."""
    default = tunekit.Config({"BLOCK": 128}, num_warps=2)
    kernel = make(tmp_path / "s.db", default_config=default)
    for tensor in call(kernel):
        tensor.untyped_storage().resize_(0)
    assert config_to_dict(kernel.best_config) == config_to_dict(default)
    switching = {"allowed": False}
    monkeypatch.setattr(tunekit.autotuner, "may_switch", lambda: switching["allowed"])
    assert kernel.wait_for_tuning(timeout=300)
    (winner,) = ResultsStore(tmp_path / "s.db", read_only=True).winner_rows()
    call(kernel)  # done, but inside a capture or a trace: the fallback still
    assert config_to_dict(kernel.best_config) == config_to_dict(default)
    switching["allowed"] = True
    call(kernel)
    assert config_to_dict(kernel.best_config) == json.loads(winner["config"])
    assert all(t.ok for t in kernel.trials) and len(kernel.trials) == 3
    assert config_to_dict(kernel.trials[0].config) == config_to_dict(default)  # measured first: never a slower winner
    assert not kernel.tuning.pending  # the winner is on the hot path now


def test_a_failed_background_tuning_keeps_the_fallback_and_says_so(tmp_path, caplog):
    """Injected: a reference that no config matches, so every config is wrong and the tuning raises
    TuningError in its thread. Survives: the caller, which goes on launching the fallback."""
    kernel = make(tmp_path / "s.db",
                  reference=lambda **arguments: {"out_ptr": torch.full_like(arguments["out_ptr"], 7.0)})
    x, y, out = vector_add.inputs(N)
    vector_add.launch(kernel, x, y, out)  # the fallback runs; every config then differs from the reference
    assert kernel.wait_for_tuning(timeout=300)
    first = config_to_dict(kernel.best_config)
    vector_add.launch(kernel, x, y, out)
    assert config_to_dict(kernel.best_config) == first
    assert "the background tuning failed; the default config stays in use" in caplog.text


def test_background_needs_isolation_under_the_interpreter(tmp_path):
    with pytest.raises(ValueError, match="needs isolate"):
        make(tmp_path / "s.db", isolate=False)


def test_a_kernel_no_worker_can_import_is_tuned_at_its_first_call_and_says_why(caplog):
    """A kernel defined inside a function (as in __main__) with background=True: its background
    tuning failed in the worker, and the advice to pass isolate=False was refused under the
    interpreter; now the first call of a key tunes it, and the decoration says why once."""

    @triton.jit
    def local_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
                 mask=mask)

    kernel = tunekit.autotune(space=vector_add.space(), key=["n"], strategy="random", budget=tunekit.Budget(evals=3),
                              store=None, background=True)(local_add)
    assert "tuned at the first call of each key, not in the background" in caplog.text
    call(kernel)
    assert kernel.tuning_report is not None and kernel.tuning_report.evaluations == 3
    assert not kernel.tuning.pending


def test_tensors_held_in_a_tuple_are_not_copyable_so_nothing_reads_them_after_the_call():
    from tunekit.background import NotCopyable, snapshot

    x = torch.ones(4)
    with pytest.raises(NotCopyable, match="argument pair holds tensors in a tuple"):
        snapshot(["pair", "n"], ((x, x), 4), {})
    args, _ = snapshot(["x", "n"], (x, 4), {})
    assert torch.equal(args[0], x) and args[0].data_ptr() != x.data_ptr()


def test_the_background_thread_sees_the_callers_triton_allocator():
    """A kernel that builds tensor descriptors on the device needs the allocator the caller set
    with ``triton.set_allocator``; Triton keeps it in a context variable, which a new thread does
    not inherit. The background tuning runs in a copy of the caller's context, so it sees it."""
    import triton
    from triton.runtime import _allocation

    from tunekit.background import Pending
    from tunekit.config import Config

    def allocator(size, alignment, stream):
        return torch.empty(size, dtype=torch.int8)

    seen = []
    triton.set_allocator(allocator)
    try:
        pending = Pending.start("allocator-check", Config({}), "the default config",
                                lambda: seen.append(_allocation._allocator.get()) or Config({}))
        pending.future.result(30)
    finally:
        triton.set_allocator(_allocation.NullAllocator())
    assert seen == [allocator]


def test_a_worker_gets_a_triton_allocator_when_its_caller_has_one():
    """Tuning in a worker process (isolation) runs the kernel there: a caller with an allocator set
    says so in the context it sends, and the worker then sets one of its own (the caller's may not
    pickle); a caller without one leaves the worker without one."""
    import triton
    from triton.runtime import _allocation

    from tunekit import workers

    before = _allocation._allocator.get()
    try:
        triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8))
        with_allocator = workers.callers_context()
        triton.set_allocator(_allocation.NullAllocator())
        without = workers.callers_context()
        assert with_allocator["triton_allocator"] and not without["triton_allocator"]
        workers.take_callers_context(with_allocator)
        assert _allocation._allocator.get() is workers.device_allocator
    finally:
        triton.set_allocator(before)
