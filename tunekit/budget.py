"""The budget of one tuning: evaluations and/or wall-clock seconds."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """How much one tuning (one kernel, one key) may spend.

    An evaluation is one config compiled and timed, or failed, for the first time in this
    tuning. A config answered from the store, a duplicate proposal, a config the Space's
    constraints reject and the final re-timing of finalists are not evaluations. Seconds are
    the wall-clock seconds of the tuning call, parallel compiles and the finalists' re-timing
    included; ``tunekit.deadline.Deadline`` holds them, for everything that must stop in time.
    ``None`` means no limit on that axis; ``Budget()`` is unlimited.

    ``per_call=k`` spreads the tuning over the kernel's calls (triton-lang/triton #9401): each call
    of an untuned key measures at most k configs, on that call's own inputs, then launches the best
    so far, until the budget is spent; so a training loop tunes over its first steps instead of
    stalling the first one. ``seconds`` then counts the seconds spent tuning inside the calls.

    Examples:
        >>> Budget(evals=60, seconds=120).evals_left(58)
        2
    """

    evals: int | None = None
    seconds: float | None = None
    per_call: int | None = None

    def __post_init__(self) -> None:
        if self.evals is not None and (
            isinstance(self.evals, bool) or not isinstance(self.evals, int) or self.evals < 1
        ):
            raise ValueError(f"The 'evals' parameter of Budget must be an int >= 1 or None. Got {self.evals!r} instead.")
        if self.seconds is not None and (
            isinstance(self.seconds, bool)
            or not isinstance(self.seconds, (int, float))
            or not math.isfinite(self.seconds)
            or self.seconds <= 0
        ):
            raise ValueError(
                f"The 'seconds' parameter of Budget must be a finite number > 0 or None. Got {self.seconds!r} instead."
            )

        if self.per_call is not None and (
            isinstance(self.per_call, bool) or not isinstance(self.per_call, int) or self.per_call < 1
        ):
            raise ValueError(f"The 'per_call' parameter of Budget must be an int >= 1 or None. Got {self.per_call!r} "
                             "instead.")
        if self.per_call is not None and self.evals is None and self.seconds is None:
            raise ValueError("Budget(per_call=...) needs evals or seconds: a tuning spread over calls must end.")

    def evals_left(self, evals: int) -> int | None:
        """Evaluations still allowed, or None when unlimited."""
        return None if self.evals is None else max(0, self.evals - evals)
