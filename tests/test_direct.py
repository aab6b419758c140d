"""The direct launch's guard (``tunekit.direct``) against Triton's own binder.

A cached call launches the kept kernel directly only while the call's specialisation, as
Triton's binder computes it for a Hopper target, is one the kept kernels were compiled for. No
GPU here: the binder is Triton's real one (``create_function_from_signature`` with the CUDA
backend for sm_90), the kernel is a real ``JITFunction``, and what stands in for a GPU is the
launcher at the end, which records its arguments instead of launching (the H200 run of
``benchmarks/direct_launch.py`` launches for real).
"""

from __future__ import annotations

import functools

import pytest
import torch
import triton
import triton.language as tl
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import make_backend
from triton.runtime.jit import JITFunction, create_function_from_signature

from tunekit import compat
from tunekit.direct import KEPT_PER_DEVICE, DirectLaunch, positional_guard

SCALE = 2.0  # a global the kernel reads: JITFunction.run refuses to launch once it changes


def scaled_add(x_ptr, bias_ptr, out_ptr, n, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    value = tl.load(x_ptr + offsets, mask=mask) * SCALE
    if HAS_BIAS:
        value += tl.load(bias_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, value, mask=mask)


class HopperAdapter(compat.LaunchAdapter):
    """The adapter on a machine with an H100-class GPU: Triton's binder for sm_90, a current
    device and stream the test sets."""

    def __init__(self) -> None:
        self.device, self.stream = 0, 7
        self.current_device = lambda: self.device
        self.current_stream = lambda device: self.stream
        self._runtime = knobs.runtime
        self._backend = make_backend(GPUTarget("cuda", 90, 32))

    @functools.lru_cache(maxsize=None)  # noqa: B019 - one binder per kernel, as Triton keeps per device
    def _binder_of(self, jit: JITFunction):
        return create_function_from_signature(jit.signature, jit.params, self._backend)

    def binder(self, jit_function, device):
        return self._binder_of(jit_function)

    @staticmethod
    def backend(jit_function, device):
        return "cuda"


class RecordingKernel:
    """A compiled kernel whose launcher records each launch's arguments."""

    def __init__(self) -> None:
        self.function, self.packed_metadata = "function handle", "packed metadata"
        self.launches: list[tuple] = []

    def run(self, *arguments) -> None:
        self.launches.append(arguments)


@pytest.fixture
def kernel():
    jit = JITFunction(scaled_add)
    jit.used_global_vals = {("SCALE", id(globals())): (SCALE, globals())}  # what compiling it records
    return jit


@pytest.fixture
def adapter():
    return HopperAdapter()


def tensors(n: int = 4096, dtype=torch.float32):
    return torch.ones(n, dtype=dtype), torch.ones(n, dtype=dtype), torch.empty(n, dtype=dtype)


def kept(kernel, adapter, args, constants=None):
    """A DirectLaunch holding a recording kernel for ``args``: what JITFunction.run's first launch leaves."""
    direct = DirectLaunch(adapter, kernel, constants or {"HAS_BIAS": True, "BLOCK": 1024, "num_warps": 4})
    compiled = RecordingKernel()
    direct.keep(args, {}, compiled)
    return direct, compiled


def test_a_call_of_the_kept_specialisation_launches_the_kept_kernel_on_the_current_stream(kernel, adapter):
    x, bias, out = tensors()
    direct, compiled = kept(kernel, adapter, (x, bias, out, 4096))
    other_x, other_bias, other_out = tensors(8192)  # another size divisible by 16, other aligned tensors
    adapter.stream = 9
    assert direct((other_x, other_bias, other_out, 8192), {}, lambda meta: (triton.cdiv(8192, meta["BLOCK"]),)) \
        is compiled
    [launch] = compiled.launches
    assert launch[:9] == (8, 1, 1, 9, "function handle", "packed metadata", None, None, None)
    assert launch[9:] == (other_x, other_bias, other_out, 8192, True, 1024)  # every parameter, constexprs too


@pytest.mark.parametrize("change", ["misaligned view", "n == 1", "n not divisible by 16", "another dtype",
                                    "a None bias", "another constexpr value", "another device"])
def test_a_call_that_changes_the_specialisation_goes_through_jit_run(kernel, adapter, change):
    x, bias, out = tensors()
    constants = {"BLOCK": 1024, "num_warps": 4}  # HAS_BIAS comes with the call, by position
    direct, compiled = kept(kernel, adapter, (x, bias, out, 4096, True), constants)
    unchanged = (x, bias, out, 4096, True)
    call = {"misaligned view": (tensors(4097)[0][1:], bias, out, 4096, True),
            "n == 1": (x, bias, out, 1, True),
            "n not divisible by 16": (x, bias, out, 4095, True),
            "another dtype": (*tensors(dtype=torch.float16)[:2], out, 4096, True),
            "a None bias": (x, None, out, 4096, True),
            "another constexpr value": (x, bias, out, 4096, False),
            "another device": unchanged}[change]
    if change == "another device":
        adapter.device = 1
    assert direct(call, {}, (4,)) is None
    assert compiled.launches == []
    adapter.device = 0
    assert direct(unchanged, {}, (4,)) is compiled  # the control: the unchanged call launches directly
    assert len(compiled.launches) == 1


def test_hooks_debug_and_changed_globals_send_every_call_through_jit_run(kernel, adapter, monkeypatch):
    x, bias, out = tensors()
    direct, compiled = kept(kernel, adapter, (x, bias, out, 4096))
    call = (x, bias, out, 4096)
    kernel.pre_run_hooks.append(lambda *args, **kwargs: None)
    assert direct(call, {}, (4,)) is None
    kernel.pre_run_hooks.clear()

    def profiler(metadata) -> None:
        pass

    hook = knobs.runtime.launch_enter_hook
    if hasattr(hook, "add"):  # a HookChain (Triton 3.5 on)
        hook.add(profiler)
        try:
            assert direct(call, {}, (4,)) is None
        finally:
            hook.remove(profiler)
    monkeypatch.setattr(knobs.runtime, "debug", True)
    assert direct(call, {}, (4,)) is None
    direct.keep(call, {}, RecordingKernel())  # what a debug build launched is not kept
    monkeypatch.setattr(knobs.runtime, "debug", False)
    assert direct(call, {}, (4,)) is compiled
    compiled.launches.clear()
    monkeypatch.setitem(globals(), "SCALE", 3.0)
    assert direct(call, {}, (4,)) is None
    monkeypatch.setitem(globals(), "SCALE", 2.0)
    assert direct(call, {}, (4,)) is compiled
    assert len(compiled.launches) == 1


def test_keyword_arguments_of_the_call_take_part_in_the_guard(kernel, adapter):
    """A call passing a parameter by name (``HAS_BIAS`` here, left out of the constants) binds as
    Triton binds it."""
    x, bias, out = tensors()
    direct = DirectLaunch(adapter, kernel, {"BLOCK": 1024, "num_warps": 4})
    compiled = RecordingKernel()
    direct.keep((x, bias, out, 4096), {"HAS_BIAS": True}, compiled)
    assert direct((x, bias, out, 4096), {"HAS_BIAS": False}, (4,)) is None
    assert direct((x, bias, out, 4096), {"HAS_BIAS": True}, (4,)) is compiled


def test_a_few_specialisations_are_kept_per_device_the_latest_first_out_last(kernel, adapter):
    x, bias, out = tensors()
    direct = DirectLaunch(adapter, kernel, {"HAS_BIAS": True, "BLOCK": 1024, "num_warps": 4})
    sizes = [4096, 4095, 1, 2**35, 2**35 + 1][:KEPT_PER_DEVICE + 1]  # 16 | n, not, 1, 64-bit 16 | n, not
    compiled = {}
    for n in sizes:
        compiled[n] = RecordingKernel()
        direct.keep((x, bias, out, n), {}, compiled[n])
    assert direct((x, bias, out, sizes[0]), {}, (4,)) is None  # the oldest went out
    for n in sizes[1:]:
        assert direct((x, bias, out, n), {}, (4,)) is compiled[n]
    direct.keep((x, bias, out, sizes[-1]), {}, compiled[sizes[-1]])  # kept again: not twice
    assert len(direct._kept[0]) == KEPT_PER_DEVICE


def test_a_kernel_still_compiling_or_not_loaded_is_not_kept(kernel, adapter):
    x, bias, out = tensors()
    direct = DirectLaunch(adapter, kernel, {"HAS_BIAS": True, "BLOCK": 1024})
    unloaded = RecordingKernel()
    unloaded.function = None
    direct.keep((x, bias, out, 4096), {}, unloaded)
    direct.keep((x, bias, out, 4096), {}, object())  # e.g. a future of an asynchronous compile
    assert direct((x, bias, out, 4096), {}, (4,)) is None


def test_no_direct_launch_under_the_interpreter_for_heuristics_or_when_switched_off(kernel, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert compat.LaunchAdapter.for_this_triton() is None
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(compat.LaunchAdapter, "__init__", lambda self: None)  # no GPU driver here
    assert DirectLaunch.for_function(kernel, {}) is not None
    assert DirectLaunch.for_function(triton.heuristics({"BLOCK": lambda args: 1024})(kernel), {}) is None
    monkeypatch.setenv("TUNEKIT_DIRECT_LAUNCH", "0")
    assert DirectLaunch.for_function(kernel, {}) is None


def test_an_unknown_triton_release_has_no_adapter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(triton, "__version__", "4.0.0")
    assert compat.LaunchAdapter.for_this_triton() is None


def many_kinds(x_ptr, maybe_ptr, n, m, scale, flag, MODE: tl.constexpr):
    pass


def test_the_positional_guard_accepts_exactly_the_calls_of_the_kept_specialisation(adapter):
    """Pairs of calls (the second changes up to two arguments of the first) drawn from tensors (aligned or not, two dtypes), None, integers of every
    width Triton tells apart (1, divisible by 16 or not, 64-bit, unsigned 64-bit, negative),
    floats, booleans and a positional constexpr: the guard generated for the first call accepts
    the second exactly where Triton's binder gives both the same specialisation."""
    import random

    jit = JITFunction(many_kinds)
    binder = adapter.binder(jit, 0)
    base = torch.zeros(64)
    pools = [
        [base[:32], base[1:33], torch.zeros(32, dtype=torch.float16)],
        [None, base[4:36], base[:32]],
        [1, 16, 17, 2**31, 2**31 + 1, 2**63 + 16, -16, -17, 0],
        [1, 32, 33, 2**40],
        [1.5, 2.0],
        [True, False],
        [0, 1],
    ]
    draw = random.Random(0)
    agreed = {True: 0, False: 0}
    for _ in range(400):
        kept_call = [draw.choice(pool) for pool in pools]
        call = list(kept_call)
        for position in draw.sample(range(len(pools)), draw.randint(0, 2)):  # change up to two arguments
            call[position] = draw.choice(pools[position])
        guard = positional_guard(kept_call, [p.is_constexpr for p in jit.params])
        same = binder(*call)[1] == binder(*kept_call)[1]
        assert guard(*call) is same, (kept_call, call)
        agreed[same] += 1
    assert min(agreed.values()) > 20  # both verdicts were exercised


def not_specialised(x_ptr, n, BLOCK: tl.constexpr):
    pass


def test_a_call_the_positional_guard_is_stricter_on_launches_through_the_binder(adapter):
    """With ``do_not_specialize``, Triton gives n = 16 and n = 17 one specialisation; the
    generated guard tells them apart, and the binder then finds the kept kernel."""
    jit = JITFunction(not_specialised, do_not_specialize=["n"])
    direct = DirectLaunch(adapter, jit, {"BLOCK": 64})
    compiled = RecordingKernel()
    x = torch.zeros(64)
    direct.keep((x, 16), {}, compiled)
    assert direct((x, 17), {}, (1,)) is compiled
    assert compiled.launches[0][9:] == (x, 17, 64)


def test_a_grid_function_gets_every_parameter_by_name(kernel, adapter):
    x, bias, out = tensors()
    direct, compiled = kept(kernel, adapter, (x, bias, out, 4096))
    seen = []
    direct((x, bias, out, 4096), {}, lambda meta: seen.append(dict(meta)) or (1,))
    assert seen == [{"x_ptr": x, "bias_ptr": bias, "out_ptr": out, "n": 4096, "HAS_BIAS": True, "BLOCK": 1024}]
