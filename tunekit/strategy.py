"""The Strategy plugin interface and the registry of strategies.

A strategy decides which configs to try next and nothing else: it never compiles,
benchmarks or writes the store. The Autotuner drives it in Optuna's ask-and-tell style:

    strategy.start(context)          # once per tuning (one kernel, one key)
    configs = strategy.ask(n)        # up to n proposals; [] means "nothing more to try"
    strategy.tell(trials)            # what became of them (and of anything else measured)

A live tuning keeps several configs in flight: it asks for as many as it compiles at once, then
tells each trial as it is timed and asks for one more. So at an ask, configs asked for earlier
may not be told yet (pending); a strategy that models them (``DefaultSearch``'s believer) knows
them as the configs it proposed and was not told of, and one that needs their trials first may
propose nothing until they come.

The Autotuner tunes every key with a fresh copy of the strategy the user gave, so state kept
on ``self`` after ``start`` belongs to one tuning. Proposals that the Space rejects, that were
already measured, or that the store already holds cost no budget; the store's answer is told
back like any other trial.
"""

from __future__ import annotations

import abc
import copy
import hashlib
import importlib
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import numpy as np

from .budget import Budget
from .config import Config
from .keys import TuningKey, as_key
from .space import Space
from .trial import Trial

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearchContext:
    """What a strategy is given at the start of a tuning.

    Attributes:
        space: the configs to search.
        budget: what this tuning may spend (the Autotuner enforces it; a strategy may plan by it).
        key: the tuning key (``key.args``: the key arguments by name; ``key.dtypes``).
        seed: the seed of this tuning, derived from the user's seed and the key.
        history: earlier trials of the same kernel on this device and timing method, on
            every key, oldest first (read only): what cross-shape learning starts from.
    """

    space: Space
    budget: Budget
    key: TuningKey
    seed: int
    history: Sequence[Trial] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        key = as_key(self.key)  # a key given in its {"args": ..., "dtypes": ...} form too
        if key is None:
            raise TypeError("SearchContext needs a key: a TuningKey. Got None instead.")
        object.__setattr__(self, "key", key)

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)


def derive_seed(seed: int | None, key: Any) -> int:
    """A reproducible per-key seed: different keys explore differently, the same key the same way."""
    digest = hashlib.sha256(repr((seed, key)).encode()).digest()
    return int.from_bytes(digest[:8], "little")


class Strategy(abc.ABC):
    """Base class of search strategies.

    Subclasses take their options as keyword arguments of ``__init__`` and store them
    unmodified (nothing is learned there), implement ``ask``, and usually ``tell``.
    """

    #: The registry name; set by subclasses.
    name: str = ""
    #: Whether what is told changes what is asked next. A strategy that does not learn
    #: (exhaustive, random) is asked for more configs in flight: pending ones cost it nothing.
    adaptive: bool = True

    def start(self, context: SearchContext) -> None:
        """Begin a tuning. Subclasses that override it call ``super().start(context)``."""
        self.context = context
        self.rng = context.rng()

    @abc.abstractmethod
    def ask(self, n: int) -> list[Config]:
        """Propose up to ``n`` configs to evaluate next (compiled in parallel with those in flight).
        An empty list means nothing to propose: while configs are in flight, until the next of
        them is told (the strategy is asked again then); with none in flight, nothing more, and
        the search ends."""

    def tell(self, trials: Sequence[Trial]) -> None:  # noqa: B027 - a no-op hook by design
        """Learn from trials: each of those asked for as it is measured, and any answered from the store."""

    def overdue(self) -> None:  # noqa: B027 - a no-op hook by design
        """The configs asked for and not told yet are late: in a live tuning no compile has
        finished for three times the mean seconds of its compiles (one held until the compile
        timeout, or far slower than the others), and the search queued nothing new meanwhile. A
        strategy that proposes nothing until its pending trials are told may go on without them;
        it is asked again right after, and told again after as long while none finishes.
        Replays never call it."""

    def clone(self) -> "Strategy":
        """A fresh copy with the same options, for one tuning."""
        return copy.deepcopy(self)

    def __repr__(self) -> str:
        options = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if k not in ("context", "rng"))
        return f"{type(self).__name__}({options})"


#: Strategy classes by name, or ``"module:Class"`` to import when the name is first used (the
#: learned strategies import scikit-learn, seconds that ``import tunekit`` should not cost).
_REGISTRY: dict[str, type[Strategy] | str] = {}
ENTRY_POINT_GROUP = "tunekit.strategies"


def check_count(strategy: Strategy, option: str) -> None:
    """Refuse a ``strategy`` option that is not an int of at least 1, naming the strategy and the
    option as the user gave them (a bool is refused, though Python counts it an int)."""
    value = getattr(strategy, option)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{type(strategy).__name__}({option}={value!r}): expected an int of at least 1")


def check_growth(strategy: Strategy, option: str) -> None:
    """Refuse a ``strategy`` option that is neither None nor a finite number of at least 0 (a share
    of trials grown since a model's last fit), naming the strategy and the option."""
    value = getattr(strategy, option)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise ValueError(f"{type(strategy).__name__}({option}={value!r}): expected None or a finite number "
                         "of at least 0")


def register_strategy(name: str, cls: type[Strategy] | str) -> None:
    """Make ``cls`` available as ``strategy=name``; ``cls`` may be ``"module:Class"``, imported
    when the name is first used."""
    if isinstance(cls, str):
        if ":" not in cls:
            raise ValueError(f"register_strategy({name!r}, {cls!r}): a lazy strategy is 'module:Class'.")
    elif not (isinstance(cls, type) and issubclass(cls, Strategy)):
        raise TypeError(f"register_strategy({name!r}, ...) needs a Strategy subclass. Got {cls!r} instead.")
    _REGISTRY[name] = cls


def strategy_class(name: str) -> type[Strategy]:
    """The class registered as ``name``, imported now if it was registered by path."""
    cls = _REGISTRY[name]
    if isinstance(cls, str):
        module, _, attribute = cls.partition(":")
        loaded = getattr(importlib.import_module(module), attribute)
        register_strategy(name, loaded)
        cls = loaded
    return cls


def _load_entry_points() -> None:
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        if entry.name in _REGISTRY:
            continue
        try:
            register_strategy(entry.name, entry.load())
        except Exception as error:  # a broken third-party plugin must not break tunekit
            logger.warning("Strategy plugin %r (%s) could not be loaded: %s", entry.name, entry.value, error)


def available() -> list[str]:
    """Names of every registered strategy, built-in and from installed plugins.

    This module is the interface and never imports its plugins: the built-in ones register
    themselves when ``tunekit.strategies`` is imported, which ``import tunekit`` does (and
    importing this module imports the ``tunekit`` package first); others come from entry points.
    """
    _load_entry_points()
    return sorted(_REGISTRY)


def import_strategy(spec: str) -> type[Strategy]:
    """The Strategy subclass that ``spec`` (``"module:Class"``, ``"package.module:Class"``) names,
    imported from ``sys.path``: a strategy used by path, without registering it (what a process
    that never ran the user's ``register_strategy`` can still find). ``ValueError`` says what is wrong."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"strategy {spec!r}: give a registered name or module:Class (for example "
                         "my_strategies:Reverse).")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is None or not (module_name == error.name or module_name.startswith(error.name + ".")):
            raise ValueError(f"strategy {spec!r}: importing {module_name} failed: {error}") from error
        raise ValueError(f"strategy {spec!r}: no module named {error.name!r} on the import path; run from the "
                         f"directory that holds {module_name.replace('.', '/')}.py, or add that directory to "
                         "PYTHONPATH.") from error
    except Exception as error:  # the user's module raised while importing: say so, and which
        raise ValueError(f"strategy {spec!r}: importing {module_name} failed: "
                         f"{type(error).__name__}: {error}") from error
    loaded: Any = module
    for part in attribute.split("."):
        if not hasattr(loaded, part):
            raise ValueError(f"strategy {spec!r}: {module_name} ({getattr(module, '__file__', '?')}) has no "
                             f"attribute {attribute!r}; name a Strategy subclass defined there.")
        loaded = getattr(loaded, part)
    if not (isinstance(loaded, type) and issubclass(loaded, Strategy)):
        raise ValueError(f"strategy {spec!r}: {attribute} is {loaded!r}, not a subclass of tunekit.Strategy; "
                         "name a class that derives from tunekit.Strategy.")
    return loaded


def make_strategy(strategy: str | Strategy, **options: Any) -> Strategy:
    """Turn what the user passed (a name, ``"module:Class"``, or an instance) into a Strategy instance."""
    if isinstance(strategy, Strategy):
        return strategy
    if isinstance(strategy, type) and issubclass(strategy, Strategy):
        return strategy(**options)
    if not isinstance(strategy, str):
        raise TypeError(f"strategy must be a registered name or a Strategy instance. Got {strategy!r} instead.")
    names = available()
    if strategy in _REGISTRY:
        return strategy_class(strategy)(**options)
    if ":" in strategy:
        return import_strategy(strategy)(**options)
    raise ValueError(f"Unknown strategy {strategy!r}. Valid strategies: {', '.join(names)}; or module:Class, "
                     "naming an importable Strategy subclass.")
