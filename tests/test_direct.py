"""The direct launch's guard (``tunekit.direct``) against Triton's own binder.

A cached call launches the kept kernel directly only while the call's specialisation, as
Triton's binder computes it for a Hopper target, and the compile options Triton adds to every
call are those the kept kernel was compiled for. No GPU here: the adapter is tunekit's real one
over a driver that answers for an sm_90 target (so the binder and backend are Triton's real ones,
made by ``JITFunction.device_caches``), the kernel is a real ``JITFunction``, and what stands in
for a GPU is the launcher at the end, which records its arguments instead of launching (the H200
run of ``benchmarks/direct_launch.py`` launches for real).
"""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.runtime.jit import JITFunction

from tunekit import compat
from tunekit.compiler import _StubDriver
from tunekit.direct import KEPT_PER_DEVICE, DirectLaunch, positional_guard

SCALE = 2.0  # a global the kernel reads: JITFunction.run refuses to launch once it changes


def scaled_add(x_ptr, bias_ptr, out_ptr, n, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    value = tl.load(x_ptr + offsets, mask=mask) * SCALE
    if HAS_BIAS:
        value += tl.load(bias_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, value, mask=mask)


class HopperDriver(_StubDriver):
    """Triton's active driver on a machine with an H100-class GPU, as far as the direct launch
    asks: the sm_90 target (Triton's real binder and backend are made for it), and a current
    device and stream the test sets."""

    def __init__(self) -> None:
        super().__init__(GPUTarget("cuda", 90, 32))
        self.device, self.stream = 0, 7

    def get_current_device(self):
        return self.device

    def get_current_stream(self, device=None):
        return self.stream


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
    """The real adapter, over a Hopper driver made Triton's active one for the test."""
    from triton.runtime.driver import driver

    # what the driver config holds, read without making a driver: "_active" from Triton 3.5
    # (None until one is made), "active" in 3.4 (a lazy proxy)
    slot = "_active" if "_active" in vars(driver) else "active"
    before = vars(driver)[slot]
    hopper = HopperDriver()
    driver.set_active(hopper)
    made = compat.LaunchAdapter()
    made.driver = hopper
    yield made
    setattr(driver, slot, before)


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
    adapter.driver.stream = 9
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
        adapter.driver.device = 1
    assert direct(call, {}, (4,)) is None
    assert compiled.launches == []
    adapter.driver.device = 0
    assert direct(unchanged, {}, (4,)) is compiled  # the control: the unchanged call launches directly
    assert len(compiled.launches) == 1


def test_hooks_debug_and_changed_globals_send_calls_through_jit_run(kernel, adapter, monkeypatch):
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
    assert direct(call, {}, (4,)) is None  # another compile option: another kernel
    debug_build = RecordingKernel()
    direct.keep(call, {}, debug_build)
    assert direct(call, {}, (4,)) is debug_build
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
        [0, 1, 2.0, 0.0, -0.0, (1, 2), (1.0, 2), (True, 2)],
    ]
    draw = random.Random(0)
    agreed = {True: 0, False: 0}
    for _ in range(400):
        kept_call = [draw.choice(pool) for pool in pools]
        call = list(kept_call)
        for position in draw.sample(range(len(pools)), draw.randint(0, 2)):  # change up to two arguments
            call[position] = draw.choice(pools[position])
        guard = positional_guard(kept_call, [p.is_constexpr for p in jit.params])
        text = adapter.specialisation_text
        same = text(binder(*call)[1]) == text(binder(*kept_call)[1])
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


def test_kernels_are_kept_per_device(kernel, adapter):
    x, bias, out = tensors()
    call = (x, bias, out, 4096)
    direct, on_0 = kept(kernel, adapter, call)
    adapter.driver.device = 1
    assert direct(call, {}, (4,)) is None  # nothing compiled for device 1 yet
    on_1 = RecordingKernel()
    direct.keep(call, {}, on_1)
    assert direct(call, {}, (4,)) is on_1
    adapter.driver.device = 0
    assert direct(call, {}, (4,)) is on_0


def test_compile_options_with_the_call_or_from_the_knobs_take_part(kernel, adapter, monkeypatch):
    """``enable_fp_fusion=False`` with the call, the JIT function's ``debug``, Triton 3.9's
    ``fpsan_homomorphic_casts``, or ``knobs.compilation.instrumentation_mode`` set in a scope (as
    Triton's gsan does) compiles another kernel in ``JITFunction.run``: the kept one is not
    launched for it, and neither is a kernel kept under the other mode outside it."""
    x, bias, out = tensors()
    call = (x, bias, out, 4096)
    direct, compiled = kept(kernel, adapter, call)
    assert direct(call, {"enable_fp_fusion": False}, (4,)) is None
    direct.keep(call, {"enable_fp_fusion": False}, RecordingKernel())  # not kept
    assert direct(call, {}, (4,)) is compiled
    kernel.debug = True  # @triton.jit(debug=True)
    assert direct(call, {}, (4,)) is None
    kernel.debug = None
    assert direct(call, {}, (4,)) is compiled
    if hasattr(knobs.compilation, "fpsan_homomorphic_casts"):  # Triton 3.9
        monkeypatch.setattr(knobs.compilation, "fpsan_homomorphic_casts", not knobs.compilation.fpsan_homomorphic_casts)
        assert direct(call, {}, (4,)) is None
        monkeypatch.undo()
        assert direct(call, {}, (4,)) is compiled
    if hasattr(knobs.compilation, "instrumentation_mode"):  # Triton 3.6 on
        monkeypatch.setattr(knobs.compilation, "instrumentation_mode", "gsan")
        assert direct(call, {}, (4,)) is None
        instrumented = RecordingKernel()
        direct.keep(call, {}, instrumented)
        assert direct(call, {}, (4,)) is instrumented
        monkeypatch.setattr(knobs.compilation, "instrumentation_mode", "")
        assert direct(call, {}, (4,)) is compiled


def test_an_int_and_an_equal_float_constexpr_are_other_kernels(kernel, adapter):
    """``HAS_BIAS=1`` and ``HAS_BIAS=1.0`` compare equal, and Triton 3.4 compiles each apart."""
    x, bias, out = tensors()
    direct = DirectLaunch(adapter, kernel, {"BLOCK": 1024})
    compiled = RecordingKernel()
    direct.keep((x, bias, out, 4096), {"HAS_BIAS": 1}, compiled)
    assert direct((x, bias, out, 4096), {"HAS_BIAS": 1.0}, (4,)) is None
    assert direct((x, bias, out, 4096), {"HAS_BIAS": 1}, (4,)) is compiled
    positional = DirectLaunch(adapter, kernel, {"BLOCK": 1024})
    positional.keep((x, bias, out, 4096, 1), {}, compiled)
    assert positional((x, bias, out, 4096, 1.0), {}, (4,)) is None


def test_cleared_triton_caches_drop_the_kept_kernels(kernel, adapter):
    x, bias, out = tensors()
    call = (x, bias, out, 4096)
    direct, compiled = kept(kernel, adapter, call)
    kernel.device_caches.clear()  # what a user does to make Triton compile again
    assert direct(call, {}, (4,)) is None
    again = RecordingKernel()
    direct.keep(call, {}, again)
    assert direct(call, {}, (4,)) is again


def test_calls_cycling_through_more_specialisations_than_kept_stop_being_kept(kernel, adapter):
    from tunekit.direct import MAX_KEEPS_PER_DEVICE

    x, bias, out = tensors()
    direct = DirectLaunch(adapter, kernel, {"HAS_BIAS": True, "BLOCK": 1024})
    for n in range(MAX_KEEPS_PER_DEVICE + 1):
        direct.keep((x, bias, out, 2**n + 1), {}, RecordingKernel())
    assert direct((x, bias, out, 2**MAX_KEEPS_PER_DEVICE + 1), {}, (4,)) is None
    direct.keep((x, bias, out, 5), {}, RecordingKernel())
    assert direct((x, bias, out, 5), {}, (4,)) is None


def test_tensors_passed_by_keyword_are_not_kept_alive(kernel, adapter):
    import gc
    import weakref

    x, bias, _ = tensors()
    out = torch.empty(1 << 20)
    direct = DirectLaunch(adapter, kernel, {"HAS_BIAS": True, "BLOCK": 1024})
    direct.keep((x, bias), {"out_ptr": out, "n": 4096}, RecordingKernel())
    alive = weakref.ref(out)
    del out
    gc.collect()
    assert alive() is None


def varargs(x_ptr, *sizes, BLOCK: tl.constexpr):
    pass


def test_a_kernel_with_star_args_launches_what_the_binder_binds(adapter):
    x = torch.zeros(64)
    jit = JITFunction(varargs)
    try:
        jit.device_caches[0][-1](x, 16, 32, BLOCK=64)
    except TypeError:  # a Triton release whose binder takes no *args (its JITFunction.run fails the same)
        pytest.skip("this Triton has no *args kernels")
    direct = DirectLaunch(adapter, jit, {"BLOCK": 64})
    compiled = RecordingKernel()
    direct.keep((x, 16, 32), {}, compiled)
    seen = []
    assert direct((x, 16, 32), {}, lambda meta: seen.append(dict(meta)) or (1,)) is compiled
    bound = jit.device_caches[0][-1](x, 16, 32, BLOCK=64)[0]
    assert compiled.launches[0][9:] == tuple(bound.values())
    assert seen == [dict(bound)]


class ScriptedDirect:
    """Stands in for a key's DirectLaunch in the Autotuner: answers None (launch through
    ``JITFunction.run``) until told to launch, and records what it is given."""

    def __init__(self) -> None:
        self.calls, self.kept, self.answer = [], [], None

    def __call__(self, args, kwargs, grid):
        self.calls.append((args, dict(kwargs), grid))
        return self.answer

    def keep(self, args, kwargs, kernel) -> None:
        self.kept.append((args, dict(kwargs), kernel))


def test_the_autotuner_hands_a_hit_to_its_direct_launch_and_keeps_what_jit_run_launched():
    """Under the interpreter no DirectLaunch is made (no GPU driver); one scripted in its place
    shows the hot path's wiring: a hit goes to it with the call's own keyword arguments and the
    grid; where it answers None the call goes through ``JITFunction.run``, whose kernel it is
    given to keep; where it launches, ``JITFunction.run`` is not called; a warm-up call and a
    config with a ``pre_hook`` never reach it."""
    import tunekit
    from tunekit.kernels import vector_add

    n = 4096
    kernel = tunekit.autotune([triton.Config({"BLOCK": 1024})], key=["n"], store=None)(vector_add.add_kernel)
    x, y, out = vector_add.inputs(n)
    grid = vector_add.grid(n)
    kernel[grid](x, y, out, n)  # tunes
    [(key, (config, constants, made))] = kernel._tuned.items()
    assert made is None  # the interpreter: no direct launch
    scripted = ScriptedDirect()
    kernel._tuned[key] = (config, constants, scripted)
    out.zero_()
    returned = kernel[grid](x, y, out, n)
    torch.testing.assert_close(out, x + y)  # launched through JITFunction.run
    assert scripted.calls == [((x, y, out, n), {}, grid)]
    assert scripted.kept == [((x, y, out, n), {}, returned)]
    scripted.answer = launched = object()
    out.zero_()
    assert kernel[grid](x, y, out, n) is launched
    assert not out.any()  # JITFunction.run did not launch
    kernel.run(x, y, out, n, grid=grid, warmup=True)
    assert len(scripted.calls) == 2
    hooked = []
    kernel._tuned[key] = (triton.Config({"BLOCK": 1024}, pre_hook=lambda nargs: hooked.append(1)), constants, scripted)
    kernel[grid](x, y, out, n)
    assert hooked == [1] and len(scripted.calls) == 2


def applies(x_ptr, n, ACT: tl.constexpr):
    pass


def identity(x):
    return x


def plus_one(x):
    return x + 1


def test_two_jit_functions_of_one_name_given_as_a_constexpr_are_other_kernels(adapter):
    """Triton 3.6 on keys a JIT function given as a constexpr by its source (``cache_key``); two
    of one module and name (a factory's, a notebook cell run again) print alike."""
    plus_one.__qualname__ = plus_one.__name__ = "identity"
    first, second = JITFunction(identity), JITFunction(plus_one)
    assert repr(first) == repr(second) and first.cache_key != second.cache_key
    x = torch.zeros(16)
    for by_keyword in (True, False):
        direct = DirectLaunch(adapter, JITFunction(applies), {})
        compiled = RecordingKernel()
        if by_keyword:
            direct.keep((x, 16), {"ACT": first}, compiled)
            assert direct((x, 16), {"ACT": second}, (1,)) is None
            assert direct((x, 16), {"ACT": first}, (1,)) is compiled
        else:
            direct.keep((x, 16, first), {}, compiled)
            assert direct((x, 16, second), {}, (1,)) is None
            assert direct((x, 16, first), {}, (1,)) is compiled
