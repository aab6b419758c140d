"""Built-in search strategies, one module each; imported as ``tunekit.strategies``.

A new strategy is one module with a ``Strategy`` subclass and one line in ``_BUILT_IN`` below
(or, from another package, an entry point in the ``tunekit.strategies`` group). Built-ins are
registered by path and imported when first used: the learned ones need scikit-learn, whose
import takes seconds that ``import tunekit`` should not cost a user of the exhaustive search.
"""

from __future__ import annotations

import importlib
from typing import Any

from tunekit.strategy import available, register_strategy, strategy_class

_BUILT_IN = {
    "exhaustive": ("exhaustive", "Exhaustive"),
    "random": ("random", "RandomSearch"),
    "optuna": ("optuna_tpe", "OptunaSearch"),
    "optuna-gp": ("optuna_tpe", "OptunaGPSearch"),
    "rf": ("forest", "ForestSearch"),
    "default": ("default", "DefaultSearch"),
    "lfbo": ("lfbo", "LFBOSearch"),
}
for _name, (_module, _class) in _BUILT_IN.items():
    register_strategy(_name, f"{__name__}.{_module}:{_class}")

#: The strategy used when the user names none and gives a Space: chosen by replaying recorded
#: spaces (experiments/learned_search.py; docs/results/learned-search.md says which spaces were held out).
DEFAULT = "default"

__all__ = ["available", "DefaultSearch", "Exhaustive", "ForestSearch", "LFBOSearch", "OptunaSearch", "OptunaGPSearch",
           "RandomSearch", "DEFAULT"]


def __getattr__(name: str) -> Any:
    """The strategy classes (``tunekit.strategies.ForestSearch``), imported on first use."""
    for registered, (module, cls) in _BUILT_IN.items():
        if cls == name:
            return strategy_class(registered)
    if name in {module for module, _ in _BUILT_IN.values()}:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
