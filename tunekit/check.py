"""Output checking: a config whose outputs differ from a reference is a ``wrong`` trial.

Kernel Tuner's ``answer``/``verify`` semantics adapted to Triton launches. Before any config
runs, every tensor argument's value is kept (the *pristine* inputs: the tensors that configs'
copies were made from, or else clones). Each candidate is launched once from the pristine
inputs and its outputs are compared with the reference: the output
of a user-supplied reference function, or by default the output of the first config that
ran. Outputs are the arguments the user names, or else those in ``reset_to_zero`` /
``restore_value`` and every tensor the reference wrote; any other tensor a candidate
changes (an out-of-bounds store into a neighbouring buffer) makes it wrong too.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

logger = logging.getLogger(__name__)

#: Largest relative error (see ``relative_error``) still counted as correct, per output dtype:
#: loose enough for other reduction orders (split-K, atomics) and, in float32, for TF32 dots
#: against an exact reference; a wrong or missing tile gives errors of 0.3 to 1.
TOLERANCES: dict[torch.dtype, float] = {
    torch.float64: 1e-6,
    torch.float32: 1e-2,
    torch.float16: 1e-2,
    torch.bfloat16: 4e-2,
}
#: Configs whose outputs hold NaN or infinity kept, before there is a reference, for a later one to agree with.
_SPECIAL_CANDIDATES = 2
#: Outputs kept of configs that differ from the reference, to tell a wrong reference (they agree
#: with one another) from outputs that depend on the config.
_DIFFERING_KEPT = 3
#: Other floating dtypes (float8 ...): this many units of their precision, at most ``_MAX_TOLERANCE``.
_EPS_MULTIPLE = 4
_MAX_TOLERANCE = 0.25


def default_tolerance(dtype: torch.dtype) -> float:
    """The tolerance for an output of ``dtype``; 0 (exact) for integers and booleans."""
    if dtype in TOLERANCES:
        return TOLERANCES[dtype]
    if dtype.is_floating_point:
        return min(_MAX_TOLERANCE, _EPS_MULTIPLE * torch.finfo(dtype).eps)
    return 0.0


def relative_error(output: torch.Tensor, expected: torch.Tensor) -> float:
    """max |output - expected| / (|expected| + rms(expected)), elementwise.

    Relative per element, so a single wrong tile shows even in a large output; the
    root-mean-square term keeps elements near zero from dominating. NaN or infinity where the
    reference has none (or at other positions) is infinite error; integers compare exactly.
    Computed in float64 for float64 outputs, else in float32 (exact for the narrower dtypes),
    with elementwise operations and reductions only: each distinct operation is a kernel that
    loads at its first use, and a library that replaces PyTorch's kernels compiles each.
    """
    if output.shape != expected.shape:
        return math.inf
    if not (output.dtype.is_floating_point or output.dtype.is_complex):
        return 0.0 if torch.equal(output, expected) else math.inf
    if output.dtype.is_complex or expected.dtype.is_complex:
        work = torch.complex128
    else:
        work = torch.float64 if torch.float64 in (output.dtype, expected.dtype) else torch.float32
    out, ref = output.to(work), expected.to(work)
    finite = torch.isfinite(out) & torch.isfinite(ref)
    count = int(finite.sum())
    if count < out.numel():  # NaN and infinity must match in place and kind; then they are left out
        same = (out == ref) | (torch.isnan(out) & torch.isnan(ref))
        if not bool((finite | same).all()):
            return math.inf
        out, ref = torch.where(finite, out, 0.0), torch.where(finite, ref, 0.0)
    if count == 0:
        return 0.0
    difference = (out - ref).abs()
    magnitude = ref.abs()
    peak = float(magnitude.max())
    if peak == 0.0:  # the reference is all zeros where finite
        return 0.0 if float(difference.max()) == 0.0 else math.inf
    # the root mean square of ref / peak, whose squares neither overflow nor all underflow in float32
    rms = peak * math.sqrt(float((magnitude / peak).square().sum()) / count)
    error = float((difference / (magnitude + rms)).max())
    return error if not math.isnan(error) else math.inf


def norm_relative_error(output: torch.Tensor, expected: torch.Tensor) -> float:
    """||output - expected|| / ||expected|| in Frobenius norm, in float32: the error the recorded
    spaces report per config (an average, so it is smaller than ``relative_error``, which the
    output check uses). Another shape, or NaN or infinity in the output, is infinite error."""
    if output.shape != expected.shape:
        return math.inf
    difference = (output.float() - expected.float()).norm().item()
    return difference / max(expected.float().norm().item(), 1e-30) if math.isfinite(difference) else math.inf


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: correct or not, the largest relative error, and why not."""

    correct: bool
    error: float = 0.0
    message: str | None = None


@dataclass
class CheckCounts:
    """Configs judged and found wrong over a whole tuning (one per tuning, shared by the checks of
    its calls when it is spread over calls), and whether the doubt about the reference was said."""

    judged: set[str] = field(default_factory=set)  # configs, by name: a reference launched again counts once
    wrong: set[str] = field(default_factory=set)
    warned: bool = False
    workspaces: set[str] = field(default_factory=set)  # reset_to_zero outputs found to hold partial sums
    #: Of the configs that differ from the reference, some were compared with one another (on one
    #: call's inputs), and no two agreed: outputs that depend on the config, not one wrong reference.
    differing_compared: bool = False
    differing_agreed: bool = False


#: ``reference(**kernel_arguments)`` writes what the kernel should write into its output
#: arguments, or returns ``{argument name: expected tensor}``.
Reference = Callable[..., Mapping[str, torch.Tensor] | None]


class OutputCheck:
    """Compares each candidate's outputs with a reference; one per tuning.

    Args:
        outputs: the argument names to compare; by default the declared ones
            (``reset_to_zero``/``restore_value``) plus every tensor the reference wrote.
        reference: see ``Reference``; by default the first config that runs is the reference.
        tolerance: a float for every output, or ``{argument name: float}``; else by dtype.
        declared: the ``reset_to_zero`` and ``restore_value`` names.
        zeroed: the ``reset_to_zero`` names: zeroed before every launch, and before the
            reference function runs, as Triton does.
        counts: the tuning's counts, when its checks are several (one per call); else its own.
    """

    def __init__(
        self,
        outputs: Sequence[str] | None = None,
        reference: Reference | None = None,
        tolerance: float | Mapping[str, float] | None = None,
        declared: Sequence[str] = (),
        zeroed: Sequence[str] = (),
        counts: CheckCounts | None = None,
    ) -> None:
        self.outputs = list(outputs) if outputs is not None else None
        self.reference = reference
        self.tolerance = tolerance
        self.declared = list(declared)
        self.zeroed = list(zeroed)
        self.pristine: dict[str, torch.Tensor] = {}
        self.expected: dict[str, torch.Tensor] | None = None
        self.reference_config: str | None = None
        self.counts = counts if counts is not None else CheckCounts()
        #: Before a reference: the outputs of configs that held NaN or infinity (wrong unless another agrees).
        self._special: list[tuple[str, dict[str, torch.Tensor]]] = []
        #: The outputs of the first few configs found to differ from the reference, by output name.
        self._differing: list[dict[str, torch.Tensor]] = []

    # -- inputs --------------------------------------------------------------------------------

    def snapshot(self, nargs: Mapping[str, Any], pristine: Mapping[str, torch.Tensor] | None = None) -> None:
        """Keep every tensor argument's value before anything runs: what each check starts from.

        ``pristine`` holds those values already when configs run on copies (the tensors copied
        from, which no config writes): they are kept as they are, so that checking needs no
        memory for them; the other tensors are cloned."""
        kept = pristine or {}
        self.pristine = {name: kept[name].detach() if name in kept else value.detach().clone()
                         for name, value in nargs.items() if isinstance(value, torch.Tensor)}

    def restore(self, nargs: Mapping[str, Any]) -> None:
        """Put the pristine values back into the tensors in ``nargs`` (the user's, or clones)."""
        with torch.no_grad():
            for name, value in self.pristine.items():
                target = nargs.get(name)
                if isinstance(target, torch.Tensor) and target.data_ptr() != value.data_ptr():
                    target.copy_(value)

    def warm_up(self) -> None:
        """Compare two elements of every input with themselves, as ``judge`` compares outputs: a
        fresh process's first comparison pays the device's lazy loading of these operations
        (0.1-0.2 s on the H200), which a benchmark worker pays here while the first config compiles."""
        for value in self.pristine.values():
            sample = value.reshape(-1)[:2]
            relative_error(sample, sample)
            _identical(sample, sample)
            if sample.is_floating_point():
                bool(torch.isfinite(sample).all())

    # -- the reference -------------------------------------------------------------------------

    def compute_reference(self, nargs: Mapping[str, Any]) -> None:
        """Run the user's reference function on copies of the pristine inputs."""
        assert self.reference is not None
        copies = {name: (self.pristine[name].clone() if name in self.pristine else value)
                  for name, value in nargs.items()}
        for name in self.zeroed:
            if isinstance(copies.get(name), torch.Tensor):
                copies[name].zero_()
        returned = self.reference(**copies)
        if returned is not None and not isinstance(returned, Mapping):
            raise TypeError("reference must write into its output arguments or return {argument name: tensor}. "
                            f"It returned {type(returned).__name__}.")
        if returned:
            unknown = sorted(set(returned) - set(self.pristine))
            if unknown:
                raise ValueError(f"reference returned {', '.join(unknown)}, which are not tensor arguments of the "
                                 f"kernel; they are: {', '.join(self.pristine)}.")
            self.expected = {name: tensor.detach().to(self.pristine[name].device) for name, tensor in returned.items()}
        else:
            self.expected = {name: copies[name] for name in self._outputs_of(copies)}
        self.reference_config = "the reference function"

    def _outputs_of(self, after: Mapping[str, Any]) -> list[str]:
        if self.outputs is not None:
            return [name for name in self.outputs if name in self.pristine]
        written = [name for name, value in self.pristine.items() if not _identical(after[name], value)]
        return [name for name in self.pristine if name in self.declared or name in written]

    # -- judging -------------------------------------------------------------------------------

    def judge(self, nargs: Mapping[str, Any], config: str) -> Verdict:
        """Judge the outputs in ``nargs`` of one launch of ``config`` from the pristine inputs.

        Without a reference yet, the first config judged becomes it, unless its outputs hold NaN
        or infinity, which cannot be told right from wrong alone: that config is wrong, and the
        first later config whose outputs agree with it (NaN and infinity at the same places: a
        log of 0, a fully masked row) makes those outputs the reference and is judged by them.
        """
        counts = self.counts
        counts.judged.add(config)
        if self.expected is None:
            outputs = self._outputs_of(nargs)
            special = [name for name in outputs if nargs[name].is_floating_point()
                       and not bool(torch.isfinite(nargs[name]).all())]
            if not special:
                self.expected = {name: nargs[name].detach().clone() for name in outputs}
                self.reference_config = config
                logger.info("outputs of %s are the reference for the others: %s", config, ", ".join(outputs) or "none")
                return Verdict(True)
            agreeing = next((held for held in self._special if self._agree(nargs, held[1])), None)
            if agreeing is None:
                if len(self._special) < _SPECIAL_CANDIDATES:
                    self._special.append((config, {name: nargs[name].detach().clone() for name in outputs}))
                counts.wrong.add(config)
                return Verdict(False, math.inf, f"output {', '.join(special)} holds NaN or infinity, and neither a "
                               "reference nor another config says that is right (pass reference= to the autotuner)")
            # two configs put NaN and infinity at the same places: their outputs are the reference
            self.reference_config, self.expected = agreeing
            self._special = []
            logger.info("outputs of %s, which %s agrees with, NaN and infinity included, are the reference for the "
                        "others", self.reference_config, config)
        errors = {name: _error(nargs[name], expected) for name, expected in self.expected.items()}
        failing = [name for name, error in errors.items() if error > self._tolerance(name, nargs[name].dtype)]
        for name in [name for name in failing if name in self.zeroed]:
            sum_error = _partial_sums_error(nargs[name], self.expected[name])
            if sum_error <= self._tolerance(name, nargs[name].dtype):
                failing.remove(name)
                errors[name] = sum_error
                if name not in counts.workspaces:
                    counts.workspaces.add(name)
                    logger.info("%s: output %s holds partial sums in a layout that depends on the config (%s "
                                "writes other elements than %s, with the same total); its total is compared",
                                config, name, config, self.reference_config)
        if not failing and self.outputs is None:  # a tensor that nothing should write was written
            failing = [name for name, value in self.pristine.items()
                       if name not in self.expected and not _identical(nargs[name], value)]
            errors.update({name: math.inf for name in failing})
        worst = max(errors.values(), default=0.0)
        if not failing:
            return Verdict(True, worst)
        counts.wrong.add(config)
        self._note_differing(nargs, [name for name in failing if name in self.expected])
        judged, wrong = len(counts.judged), len(counts.wrong)
        if wrong * 2 > judged and judged >= 4 and self.reference is None and not counts.warned:
            counts.warned = True
            if counts.differing_compared and not counts.differing_agreed:  # outputs that change with the config
                logger.info("%d of %d configs differ from the reference config %s and from one another: this "
                            "kernel's outputs depend on its config (random numbers, the order of atomic additions), "
                            "and those configs count as wrong; pass check=False to time them all, as Triton does",
                            wrong, judged, self.reference_config)
            else:
                logger.warning("%d of %d configs differ from the reference config %s; if that one is wrong, pass "
                               "reference= to the autotuner", wrong, judged, self.reference_config)
        name = max(failing, key=errors.__getitem__)
        if name not in self.expected:
            return Verdict(False, worst, f"it wrote {name}, which {self.reference_config} leaves unchanged")
        return Verdict(False, worst, f"output {name} differs from {self.reference_config}: relative error "
                                     f"{errors[name]:.3g} > tolerance {self._tolerance(name, nargs[name].dtype):.3g}")

    def _note_differing(self, nargs: Mapping[str, Any], names: Sequence[str]) -> None:
        """Compare the outputs ``names`` of a config that differs from the reference with those of
        the earlier such configs (up to ``_DIFFERING_KEPT`` kept): two that agree point at a wrong
        reference (``CheckCounts.differing_agreed``)."""
        counts = self.counts
        if not names or counts.differing_agreed:
            return
        for held in self._differing:
            counts.differing_compared = True
            if self._agree(nargs, {name: t for name, t in held.items() if name in names}):
                counts.differing_agreed = True
                self._differing = []
                return
        if len(self._differing) < _DIFFERING_KEPT:
            self._differing.append({name: nargs[name].detach().clone() for name in names})

    def _agree(self, nargs: Mapping[str, Any], held: Mapping[str, torch.Tensor]) -> bool:
        """Whether the outputs in ``nargs`` equal ``held`` within tolerance (NaN and infinity at the same places)."""
        return all(_error(nargs[name], expected) <= self._tolerance(name, expected.dtype)
                   for name, expected in held.items())

    def _tolerance(self, name: str, dtype: torch.dtype) -> float:
        if isinstance(self.tolerance, Mapping):
            return float(self.tolerance.get(name, default_tolerance(dtype)))
        if self.tolerance is not None:
            return float(self.tolerance)
        return default_tolerance(dtype)


def _error(output: torch.Tensor, expected: torch.Tensor) -> float:
    """``relative_error``, 0 without its operations for bitwise equal outputs (most kernels without
    reductions): each of them loads onto the device at its first use in a fresh process."""
    return 0.0 if _identical(output, expected) else relative_error(output, expected)


def _partial_sums_error(output: torch.Tensor, expected: torch.Tensor) -> float:
    """The relative error of the totals of a ``reset_to_zero`` output that holds partial sums in a
    layout the config sets (one slot per program, and the block size sets how many programs, as
    in Liger-Kernel's DyT backward): inf unless the two write other elements, so that a config
    writing the same elements with other values stays wrong, and one that leaves a slot unwritten
    has another total."""
    if output.shape != expected.shape or not output.is_floating_point():
        return math.inf
    if torch.equal(output != 0, expected != 0) or not bool(torch.isfinite(output).all()):
        return math.inf
    total, expected_total = output.double().sum(), expected.double().sum()
    scale = max(float(output.double().abs().sum()), float(expected.double().abs().sum()))
    return float((total - expected_total).abs()) / scale if scale > 0 else 0.0


def _identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equal (NaN at the same places counts as equal)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return bool(torch.equal(a.view(_same_width_int(a.dtype)), b.view(_same_width_int(b.dtype))))
    return bool(torch.equal(a, b))


def _same_width_int(dtype: torch.dtype) -> torch.dtype:
    return {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[torch.tensor([], dtype=dtype).element_size()]
