"""How one kernel is launched for tuning: the description both runners and the benchmark worker take.

A ``Launch`` holds what Triton's ``Autotuner`` keeps for its benchmark calls (the function
under the autotuner, argument names, ``reset_to_zero``/``restore_value``, the user's hooks,
the timer) and the output-check options, and nothing of one tuning. The Autotuner builds one;
``tunekit.isolation`` sends it to a worker process (without the function, which the worker
imports again), so the worker never builds an Autotuner.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from triton.runtime.autotuner import Heuristics

from .benchmark import Benchmarker, KernelCall
from .check import CheckCounts, OutputCheck
from .compiler import unwrap_jit
from .config import Config


@dataclass(frozen=True)
class Launch:
    """Everything needed to check and time configs of one kernel, given its arguments.

    ``fn`` is what the Autotuner wraps (a ``JITFunction``, or ``Heuristics`` over one); hooks
    follow ``triton.autotune``: a user's ``pre_hook`` replaces the resetting of
    ``reset_to_zero`` and the saving of ``restore_value``, and ``post_hook`` the restoring.
    """

    fn: Any
    kernel_name: str
    arg_names: tuple[str, ...]
    benchmarker: Benchmarker
    reset_to_zero: tuple[str, ...] = ()
    restore_value: tuple[str, ...] = ()
    user_pre_hook: Callable[..., Any] | None = None
    user_post_hook: Callable[..., Any] | None = None
    check_outputs: tuple[str, ...] | None = None
    reference: Callable[..., Any] | None = None
    tolerance: float | Mapping[str, float] | None = None
    #: The kernel may write bytes of its tensors' allocations outside the tensors (padding).
    writes_padding: bool = False

    def without_fn(self) -> "Launch":
        """This launch with no function: what travels to a worker process, which imports it."""
        return replace(self, fn=None)

    def named(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The kernel's arguments by name (kwargs may also hold launch options such as ``grid``)."""
        return {**dict(zip(self.arg_names, args)), **{k: v for k, v in kwargs.items() if k in self.arg_names}}

    def output_check(self, counts: CheckCounts | None = None) -> OutputCheck:
        """A new OutputCheck with this kernel's check options (one per call tuned on), counting
        into the tuning's ``counts``."""
        return OutputCheck(self.check_outputs, self.reference, self.tolerance,
                           declared=[*self.reset_to_zero, *self.restore_value], zeroed=self.reset_to_zero,
                           counts=counts)

    def pre_hook(self, nargs: dict[str, Any], reset_only: bool = False) -> dict[str, Any]:
        """Before a launch: the user's pre_hook, or zero ``reset_to_zero`` and (unless
        ``reset_only``) copy ``restore_value``. Returns the copies to restore."""
        if self.user_pre_hook is not None:  # as stock calls it: reset_only only when set
            self.user_pre_hook(nargs, reset_only=True) if reset_only else self.user_pre_hook(nargs)
            return {}
        for name in self.reset_to_zero:
            if nargs.get(name) is not None:
                nargs[name].zero_()
        if reset_only:
            return {}
        return {name: nargs[name].clone() for name in self.restore_value if nargs.get(name) is not None}

    def post_hook(self, nargs: dict[str, Any], copies: dict[str, Any], exception: BaseException | None) -> None:
        """After a launch: the user's post_hook, or put the ``restore_value`` copies back."""
        if self.user_post_hook is not None:
            self.user_post_hook(nargs, exception=exception)
            return
        for name, value in copies.items():
            nargs[name].copy_(value)

    def call(self, config: Config, args: tuple, kwargs: dict[str, Any]) -> KernelCall:
        """One launch of ``config`` with Triton's hook semantics: what the timer calls repeatedly."""
        current = dict(kwargs, **config.all_kwargs())
        nargs = {**dict(zip(self.arg_names, args)), **current}

        def kernel_call() -> None:
            if config.pre_hook:
                config.pre_hook(nargs)
            copies = self.pre_hook(nargs)
            try:
                self.fn.run(*args, **current)
            except Exception as error:
                try:
                    self.post_hook(nargs, copies, error)
                finally:
                    raise
            self.post_hook(nargs, copies, None)

        return kernel_call

    def launch_once(self, config: Config, args: tuple, kwargs: dict[str, Any], nargs: dict[str, Any]) -> None:
        """Launch ``config`` once for the output check: outputs reset as before every launch,
        nothing restored afterwards (the check reads them)."""
        if config.pre_hook:
            config.pre_hook(nargs)
        self.pre_hook(nargs, reset_only=True)
        self.fn.run(*args, **kwargs, **config.all_kwargs())

    def check_call(self, args: Sequence[Any], kwargs: Mapping[str, Any], tuned: Sequence[str]) -> None:
        """Raise a ``TypeError`` naming the problem when the call's arguments cannot bind to the
        kernel's parameters once the tuned ones (and any heuristics' values) are added: too many
        or too few, or a tuned parameter passed by position. Such a call fails the same way with
        every config: it is the caller's mistake, raised before any config is tried, so nothing of
        it reaches the store (where the corrected call would find those failures again). A tuned
        parameter passed by name is a ``ValueError``, worded as stock Triton's."""
        conflicts = kwargs.keys() & set(tuned)
        if conflicts:
            raise ValueError(f"{self.kernel_name} was called with {', '.join(sorted(conflicts))}, which the autotuner "
                             "tunes. Make sure that you don't re-define auto-tuned symbols.")
        python_fn = getattr(unwrap_jit(self.fn), "fn", None)
        if not callable(python_fn):
            return
        signature = inspect.signature(python_fn)
        parameters = list(signature.parameters)
        added = {*tuned, *self._heuristic_names()}
        by_position = [name for name in parameters[:len(args)] if name in added]
        name = self.kernel_name
        if by_position:
            which = ", ".join(by_position)
            raise TypeError(f"{name} was called with {len(args)} positional arguments, so {which} got one, but "
                            f"{'it is' if len(by_position) == 1 else 'they are'} set by the autotuner (or its "
                            "heuristics): leave "
                            f"{which} out of the call ({name}'s parameters: {', '.join(parameters)}). "
                            "Nothing was tuned or stored.")
        # heuristics' values replace the caller's (as Triton's Heuristics does); tuned ones passed by
        # keyword were refused before this
        named = {key: None for key in [*kwargs, *added] if key in parameters}
        try:
            signature.bind(*args, **named)
        except TypeError as error:
            raise TypeError(f"{name}'s arguments do not match its parameters ({', '.join(parameters)}; "
                            f"{', '.join(sorted(added)) or 'none'} set by the autotuner or its heuristics): {error}. "
                            "Nothing was tuned or stored.") from None

    def _heuristic_names(self) -> list[str]:
        """The parameters that ``triton.heuristics`` between the Autotuner and the JIT function set."""
        names, fn = [], self.fn
        while fn is not unwrap_jit(fn):
            if isinstance(fn, Heuristics):
                names.extend(fn.values)
            fn = fn.fn
        return names

    def jit_kwargs(self, args: tuple, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments the JITFunction will see: heuristics applied, launch-only ones dropped."""
        call = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
        fn = self.fn
        while fn is not unwrap_jit(fn):
            if isinstance(fn, Heuristics):
                for name, heuristic in fn.values.items():
                    call[name] = heuristic({**dict(zip(fn.arg_names, args)), **call})
            fn = fn.fn
        return call

    def heuristic_values(self, config: Config, args: tuple, kwargs: Mapping[str, Any]) -> dict[str, str]:
        """What ``triton.heuristics`` under the Autotuner set for ``config`` on these arguments, as
        text: a benchmark worker, which imported the kernel again, checks its own against them."""
        names = self._heuristic_names()
        if not names:
            return {}
        call = self.jit_kwargs(args, dict(kwargs, **config.all_kwargs()))
        return {name: repr(call[name]) for name in names}

    def grid_of(self, config: Config, args: tuple, kwargs: Mapping[str, Any]) -> Any:
        """The launch grid of ``config`` as a tuple, as the JIT would compute it from a grid function."""
        grid = kwargs.get("grid")
        if not callable(grid):
            return grid
        call = self.jit_kwargs(args, dict(kwargs, **config.all_kwargs()))
        return tuple(grid({**dict(zip(self.arg_names, args)), **call}))
