"""Built-in search strategies, one module each; imported as ``tunekit.strategies``.

A new strategy is one module with a ``Strategy`` subclass and one ``register_strategy`` line
below (or, from another package, an entry point in the ``tunekit.strategies`` group).
"""

from tunekit.strategy import available, register_strategy

from .default import DefaultSearch
from .exhaustive import Exhaustive
from .forest import ForestSearch
from .optuna_tpe import OptunaSearch
from .random import RandomSearch

register_strategy("exhaustive", Exhaustive)
register_strategy("random", RandomSearch)
register_strategy("optuna", OptunaSearch)
register_strategy("rf", ForestSearch)
register_strategy("default", DefaultSearch)

#: The strategy used when the user names none and gives a Space: chosen by replaying recorded
#: spaces (experiments/learned_search.py; the README says which spaces were held out).
DEFAULT = "default"

__all__ = ["available", "DefaultSearch", "Exhaustive", "ForestSearch", "OptunaSearch", "RandomSearch", "DEFAULT"]
