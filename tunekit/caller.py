"""Warnings that point at the user's code: the innermost frame outside tunekit and Triton.

A fixed ``stacklevel`` counts frames, and the count changes with how a launch reaches tunekit
(``kernel[grid]``, ``triton.heuristics`` stacked above, a launch helper of ``tunekit.kernels``),
so a warning would name a line of tunekit or Triton instead of the call that caused it.
"""

from __future__ import annotations

import sys
import warnings

#: Packages whose frames a warning skips: tunekit's own (its plugin packages included) and Triton's.
_INTERNAL = ("tunekit", "triton")


def warn_at_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)`` attributed to the innermost frame outside tunekit and
    Triton (the outermost frame when every one is theirs)."""
    frame, stacklevel = sys._getframe(1), 2  # stacklevel 1 would name this function
    while frame.f_back is not None and frame.f_globals.get("__name__", "").partition(".")[0] in _INTERNAL:
        frame, stacklevel = frame.f_back, stacklevel + 1
    warnings.warn(message, category, stacklevel=stacklevel)
