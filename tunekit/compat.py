"""Every private or version-dependent API of Triton that tunekit touches, in one place.

Checked on Triton 3.4.0 (the floor: its interpreter, in CI's lowest-versions run), 3.6.0 (the
H200: compiles and launches) and 3.9.0 (CPU: the interpreter, and compiles for an sm_90 target).
A release that lays these out otherwise fails here, by name, not deep inside a tuning.

PyTorch's one private attribute, ``torch.library._impls`` (the operators given kernels from Python,
as ``"namespace/operator/dispatch key"``), is read by ``aten_replaced``: checked on torch 2.11 and 2.13.

Optuna's private GP API is used here alone (``finite_candidates_gp_sampler``):
``GPSampler._optimize_acqf`` with ``SearchSpace.get_normalized_params`` taking the trial's
parameters is overridden, and ``GPRegressor._fit_kernel_params`` (with ``_cache_matrix`` and the
way ``fit_kernel_params`` makes a regressor of the cached kernel) is wrapped so that a sampler may
keep its last kernel: checked on Optuna 4.8 (the floor, in CI's lowest-versions run: the second
argument appeared there) and 5.1.
"""

from __future__ import annotations

import contextvars
import os
import sys
import threading
from collections.abc import Callable
from typing import Any


#: ATen operators that tunekit's output checks and guard bands launch on the tuned tensors' device.
CHECK_OPERATORS = ("_to_copy", "abs", "add.Tensor", "sub.Tensor", "div.Tensor", "pow.Tensor_Scalar", "isfinite",
                   "isnan", "equal", "eq.Tensor", "ne.Scalar", "bitwise_and.Tensor", "bitwise_or.Tensor", "all",
                   "max", "sum", "count_nonzero", "argmax", "flip", "fill_.Scalar", "copy_", "stack", "where.self")


def aten_replaced(device_type: str) -> list[str]:
    """The operators of ``CHECK_OPERATORS`` whose kernels for ``device_type`` ("cuda", "cpu")
    were replaced from Python (``torch.library``, as FlagGems' ``use_gems()`` replaces nearly all
    of them with Triton kernels of its own): tunekit's comparisons would run, compile and tune
    those kernels. Empty where ``torch.library`` does not say."""
    import torch.library

    replaced: set[str] = getattr(torch.library, "_impls", set())
    key = {"cuda": "CUDA", "cpu": "CPU", "xpu": "XPU", "mps": "MPS"}.get(device_type, device_type.upper())
    return [op for op in CHECK_OPERATORS if f"aten/{op}/{key}" in replaced]


class NoDeviceError(RuntimeError):
    """Triton has no GPU driver here and the interpreter is off: nothing can compile or launch."""


def triton_build_key() -> str:
    """Triton's key of its own build (a hash of its files): what its cache is keyed by.
    ``triton.runtime.cache`` from 3.5, ``triton.compiler.compiler`` before. Triton keeps it once
    computed; one computing in ``prefetch_triton_build_key``'s thread is waited for."""
    finish_prefetch()
    try:
        from triton.runtime.cache import triton_key
    except ImportError:  # Triton 3.4
        from triton.compiler.compiler import triton_key
    return triton_key()


#: The thread of ``prefetch_triton_build_key``, once started.
_prefetch: list[threading.Thread] = []
_prefetch_lock = threading.Lock()


def prefetch_triton_build_key() -> None:
    """Compute ``triton_build_key`` in a thread of this process, once: it reads and hashes
    Triton's files (0.3-0.5 s on the H200), which a kernel's first miss needs for its store
    identity, and which then overlaps the caller's work and the driver's start instead of adding
    to them. Join it (``triton_build_key`` does) before this process forks."""
    with _prefetch_lock:
        if not _prefetch:
            thread = threading.Thread(target=_quietly(triton_build_key), name="tunekit-triton-key", daemon=True)
            thread.start()
            _prefetch.append(thread)
            if hasattr(os, "register_at_fork"):  # forks of the caller's own (a data loader's workers) too
                os.register_at_fork(before=finish_prefetch)


def finish_prefetch() -> None:
    """Wait for ``prefetch_triton_build_key``'s thread, if it runs: before a fork, which copies
    only the forking thread (a lock that thread holds, an import's, would stay held in the child)."""
    with _prefetch_lock:
        prefetching = _prefetch[0] if _prefetch else None
    if prefetching is not None and prefetching is not threading.current_thread():
        prefetching.join()


def _quietly(function: Callable[[], Any]) -> Callable[[], None]:
    def run() -> None:
        try:
            function()
        except Exception:  # noqa: BLE001 - the miss computes it again and says what failed
            pass

    return run


def active_driver() -> Any:
    """Triton's active driver, or a ``NoDeviceError`` that says what to do when there is none
    (a CPU machine without ``TRITON_INTERPRET=1``: Triton's own error is "0 active drivers")."""
    from triton.runtime.driver import driver

    try:
        active = driver.active
        active.get_current_target  # noqa: B018 - Triton 3.4's lazy proxy makes the driver here
        return active
    except RuntimeError as error:
        if "active drivers" not in str(error):
            raise
        raise NoDeviceError(
            "tunekit: Triton found no GPU driver on this machine and TRITON_INTERPRET is not set: set "
            "TRITON_INTERPRET=1 to run Triton kernels on the CPU with its interpreter (torch CPU tensors), or run on "
            "a machine with an NVIDIA or AMD GPU") from None


def active_target() -> Any:
    """The ``GPUTarget`` Triton compiles for in this process."""
    return active_driver().get_current_target()


def set_active_driver(stub: Any) -> None:
    """Make ``stub`` Triton's active driver (a compile worker's: answers without a GPU)."""
    from triton.runtime.driver import driver

    driver.set_active(stub)


def has_triton_allocator() -> bool:
    """Whether ``triton.set_allocator`` was called here. From Triton 3.5 the allocator is a
    context variable (``triton.runtime._allocation._allocator``), in 3.4 a plain module global;
    an unknown layout reads as no allocator, never as an error."""
    allocation = sys.modules.get("triton.runtime._allocation")
    current = getattr(allocation, "_allocator", None)
    null = getattr(allocation, "NullAllocator", None)
    if current is not None and hasattr(current, "get") and callable(current.get):  # a ContextVar
        current = current.get()
    if current is None or not isinstance(null, type):
        return False
    return not isinstance(current, null)


def warm_up_cuda_utils() -> None:
    """Build or load Triton's CUDA utilities (a C module compiled into its cache on first use);
    loading it initialises no device."""
    from triton.backends.nvidia.driver import CudaUtils

    CudaUtils()


def triton_error_types() -> tuple[type, type, tuple[type, ...]]:
    """(OutOfResources, CompilationError, the ptxas error types): what a failed config raises."""
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources, PTXASError

    return OutOfResources, CompilationError, (PTXASError,)


class _KernelReuse:
    """What one GP proposal asks of Optuna's kernel fit. ``kept``: the length-scale tensors of the
    sampler's cached kernels (Optuna builds a regressor to refit from the cached one's tensors, and
    from fresh ones where it has no cache or falls back to its default kernel); a regressor built
    from one of them keeps its kernel instead of being fitted again. ``fitted``: a fit returned;
    ``failed``: a fit raised (Optuna then tries its default kernel, or keeps it)."""

    def __init__(self, kept: list[Any]) -> None:
        self.kept = kept
        self.fitted = False
        self.failed = False


_KERNEL_REUSE: contextvars.ContextVar[_KernelReuse | None] = contextvars.ContextVar("tunekit_kernel_reuse",
                                                                                      default=None)


def _wrap_kernel_fit() -> None:
    """Wrap Optuna's ``GPRegressor._fit_kernel_params`` (once per process) so that, under
    ``_KERNEL_REUSE``, a regressor that Optuna's ``fit_kernel_params`` built from a kept kernel (the
    sampler's last fit, over the new trials) caches its matrices instead of running L-BFGS; where they
    do not factor, it is fitted. Every other call, tunekit's or not, goes to Optuna's method (looked up
    in the wrapper's ``tunekit_wraps``). The class is patched, not ``fit_kernel_params``: Optuna's GP
    sampler reaches that function through a lazy module that copies it when first loaded."""
    import numpy as np
    from optuna._gp.gp import GPRegressor

    if getattr(GPRegressor._fit_kernel_params, "tunekit_wraps", None) is not None:
        return

    def _fit_kernel_params(self: Any, *args: Any, **kwargs: Any) -> Any:
        asked = _KERNEL_REUSE.get()
        if asked is None:
            return _fit_kernel_params.tunekit_wraps(self, *args, **kwargs)  # type: ignore[attr-defined]
        if any(self.inverse_squared_lengthscales is kept for kept in asked.kept):
            try:
                self._cache_matrix()
                return self
            except (RuntimeError, np.linalg.LinAlgError):  # Cholesky's error in Optuna 5 and in 4.8
                pass
        try:
            fitted = _fit_kernel_params.tunekit_wraps(self, *args, **kwargs)  # type: ignore[attr-defined]
        except BaseException:
            asked.failed = True
            raise
        asked.fitted = True
        return fitted

    _fit_kernel_params.tunekit_wraps = GPRegressor._fit_kernel_params  # type: ignore[attr-defined]
    GPRegressor._fit_kernel_params = _fit_kernel_params  # type: ignore[method-assign]


def finite_candidates_gp_sampler(seed: int, n_startup_trials: int, candidates: Callable[[], list[dict]],
                                 refit_growth: float | None = None) -> Any:
    """Optuna's ``GPSampler`` whose acquisition is maximised over ``candidates()`` (Optuna's
    parameter dicts) by scoring each, through the method Optuna names for overriding the
    acquisition's optimisation; with no candidates left, Optuna's own optimisation runs.

    ``refit_growth``: None, the kernel is fitted at every proposal (Optuna's way); a number, it is
    fitted again only once the completed trials grew by that fraction of those of its last fit (at
    least one), the posterior taking every trial with the last fit's kernel in between (the fit is
    most of a proposal's time and its kernel moves little from one trial to the next). A kernel
    Optuna did not fit (its default, after a failed fit or a change of the search space's
    dimensions) is never kept: the next proposal fits."""
    import numpy as np
    import optuna
    import torch

    if refit_growth is not None:
        _wrap_kernel_fit()

    class FiniteCandidatesGPSampler(optuna.samplers.GPSampler):
        _fitted_on = 0  # completed trials at the kernel's last fit; 0: the next proposal fits

        def _sample_relative_impl(self, study: Any, completed_trials: list, *args: Any, **kwargs: Any) -> Any:
            asked = None
            if refit_growth is not None:
                grown = len(completed_trials) - self._fitted_on
                keep = self._fitted_on > 0 and grown < max(1.0, refit_growth * self._fitted_on)
                cached = [*(self._gprs_cache_list or ()), *(self._constraints_gprs_cache_list or ())]
                asked = _KernelReuse([gpr.inverse_squared_lengthscales for gpr in cached] if keep else [])
            token = _KERNEL_REUSE.set(asked)
            try:
                # Optuna runs this under ``torch.device("cpu")``, a TorchFunctionMode through which every
                # torch call of the GP's fit passes in Python (about 7 % of a default tuning's time).
                # With torch functions' overrides off, the tensors are made on the CPU all the same.
                with torch._C.DisableTorchFunction():
                    return super()._sample_relative_impl(study, completed_trials, *args, **kwargs)
            finally:
                _KERNEL_REUSE.reset(token)
                if asked is not None and asked.failed:
                    self._fitted_on = 0  # Optuna kept its default kernel somewhere: fit at the next proposal
                elif asked is not None and asked.fitted:
                    self._fitted_on = len(completed_trials)

        def _optimize_acqf(self, acqf: Any, best_params: Any) -> Any:
            params = candidates()
            if not params:
                return super()._optimize_acqf(acqf, best_params)
            normalized = acqf.search_space.get_normalized_params(params, params)
            return normalized[int(np.argmax(acqf.eval_acqf_no_grad(normalized)))]

    return FiniteCandidatesGPSampler(seed=seed, n_startup_trials=n_startup_trials)


#: The Triton releases whose ``JITFunction.run`` ``DirectLaunch`` knows (checked on each one's
#: ``runtime/jit.py``): the binder is the last item of ``JITFunction.device_caches[device]``, a
#: compiled kernel launches as ``kernel.run(grid_0, grid_1, grid_2, stream, kernel.function,
#: kernel.packed_metadata, launch_metadata, enter_hook, exit_hook, *bound_args.values())``, and
#: the launch hooks are ``knobs.runtime.launch_enter_hook``/``launch_exit_hook`` (a callable or
#: None in 3.4, a ``HookChain`` from 3.5). Another release launches through ``JITFunction.run``.
DIRECT_LAUNCH_RELEASES = ((3, 4), (3, 5), (3, 6), (3, 7), (3, 8), (3, 9))


class LaunchAdapter:
    """What launching a compiled kernel without ``JITFunction.run`` needs of this Triton: its
    binder (the function that binds a call's arguments and computes their specialisation), the
    current device and stream, the per-call compile options ``JITFunction.run`` adds, whether a
    hook is set, and the launcher's arguments."""

    def __init__(self) -> None:
        from triton import knobs
        from triton.runtime.driver import driver

        active = driver.active
        self.current_device: Callable[[], int] = active.get_current_device
        self.current_stream: Callable[[int], Any] = active.get_current_stream
        self._runtime = knobs.runtime
        self._compilation = knobs.compilation

    @staticmethod
    def for_this_triton() -> "LaunchAdapter | None":
        """The adapter, or None where Triton's release is not one of ``DIRECT_LAUNCH_RELEASES``,
        the interpreter is on, or no GPU driver is active."""
        import triton

        release = tuple(int(part) for part in triton.__version__.split(".")[:2] if part.isdigit())
        if release not in DIRECT_LAUNCH_RELEASES or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
            return None
        try:
            return LaunchAdapter()
        except RuntimeError:  # no active driver
            return None

    @staticmethod
    def binder(jit_function: Any, device: int) -> Callable[..., tuple[dict[str, Any], list, dict[str, Any]]]:
        """``jit_function``'s binder for ``device`` (made if it is not yet): ``binder(*args,
        **kwargs)`` gives the bound arguments (every parameter, in order), their specialisation
        and the other options."""
        return jit_function.device_caches[device][-1]

    @staticmethod
    def binder_now(jit_function: Any, device: int) -> Any:
        """The binder ``jit_function`` holds for ``device`` now, or None: a new one after its
        caches were cleared (to compile again) means the kernels kept before are stale."""
        caches = jit_function.device_caches.get(device)
        return None if caches is None else caches[-1]

    @staticmethod
    def backend(jit_function: Any, device: int) -> str:
        """The backend ``jit_function`` compiles for on ``device`` ("cuda", "hip"): the target
        before the backend and the binder in ``device_caches[device]``."""
        return jit_function.device_caches[device][-3].backend

    @staticmethod
    def specialisation_text(specialisation: list) -> str:
        """A specialisation as text, as Triton keys its kernel cache: 3.4 and 3.5 by its text
        (``2`` and ``2.0``, ``0.0`` and ``-0.0`` apart), 3.6 on with each JIT function given as
        a constexpr replaced by its ``cache_key`` (two functions of one name apart). Both at
        once: stricter than either release, never looser."""
        from triton.runtime import jit

        callables = tuple({jit.JITFunction, getattr(jit, "JITCallable", jit.JITFunction)})

        def keyed(value: Any) -> Any:
            if isinstance(value, callables):
                return f"{value!r}:{value.cache_key}"
            if isinstance(value, list):
                return [keyed(item) for item in value]
            if isinstance(value, tuple):
                items = [keyed(item) for item in value]
                return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
            return value

        return str(keyed(specialisation))

    def options(self, jit_function: Any) -> tuple:
        """The compile options ``JITFunction.run`` adds to every call from the JIT function and
        Triton's knobs: ``debug`` (both), and from 3.6 ``instrumentation_mode``, from 3.9
        ``fpsan_homomorphic_casts``; a kernel compiled under other values is another kernel."""
        compilation = self._compilation
        return (jit_function.debug, self._runtime.debug, getattr(compilation, "instrumentation_mode", None),
                getattr(compilation, "fpsan_homomorphic_casts", None))

    def plain(self) -> bool:
        """Whether no hook asks ``JITFunction.run`` for more than the compiled kernel's launch:
        no launch hook (a profiler such as Proton sets them), no pipeline-stage hook (3.7 on)."""
        runtime = self._runtime
        if getattr(runtime, "add_stages_inspection_hook", None) is not None:
            return False
        for hook in (runtime.launch_enter_hook, runtime.launch_exit_hook):
            if hook is not None and getattr(hook, "calls", True):
                return False
        return True

    @staticmethod
    def launcher(kernel: Any) -> tuple[Callable[..., Any], Any, Any] | None:
        """(launcher, function handle, packed metadata) of a compiled kernel whose handles are
        loaded, or None for anything else (a compile still running, the interpreter's)."""
        if getattr(kernel, "function", None) is None or not hasattr(kernel, "packed_metadata"):
            return None
        return kernel.run, kernel.function, kernel.packed_metadata
