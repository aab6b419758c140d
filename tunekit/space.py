"""The search space: finite domains per parameter plus constraints.

A ``Space`` is what a strategy searches. It enumerates its valid configs in a fixed order,
samples without replacement, gives the neighbours of a config, and encodes a config as
numbers for perf models. A plain list of ``Config`` is a Space too (``Space.from_configs``):
it enumerates exactly that list, pre-hooks included.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .config import COMPILE_OPTIONS, Config, config_from_dict, config_json, config_source, config_to_dict

Constraint = Callable[[Mapping[str, Any]], bool]


def is_power_of_two(value: Any) -> bool:
    """A positive int that is a power of two (bools are not)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0 and value & (value - 1) == 0


def _describe(constraint: Constraint) -> str:
    return getattr(constraint, "__name__", repr(constraint))


class Space:
    """Finite parameter domains and constraints over them.

    Args:
        constraints: callables on the flat config dict (meta-parameters and compile options);
            a config is valid when every one returns true.
        **domains: parameter name -> list of values. ``num_warps``, ``num_stages``,
            ``num_ctas`` and ``maxnreg`` become compile options of the Config, every other
            name a meta-parameter passed to the kernel.

    Examples:
        >>> space = Space(BLOCK=[64, 128, 256], num_warps=[2, 4],
        ...               constraints=[lambda c: c["BLOCK"] // c["num_warps"] >= 32])
        >>> len(space)
        5
    """

    def __init__(self, constraints: Sequence[Constraint] | None = None, **domains: Sequence[Any]) -> None:
        if not domains:
            raise ValueError("A Space needs at least one parameter domain, e.g. Space(BLOCK=[64, 128]).")
        self.domains: dict[str, tuple] = {}
        for name, values in domains.items():
            if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
                raise ValueError(f"The domain of parameter {name!r} must be a list of values. Got {values!r} instead.")
            values = tuple(values)
            if not all(isinstance(value, Hashable) for value in values):
                raise ValueError(f"The domain of parameter {name!r} must be a list of single values "
                                 f"(numbers, strings, booleans or None). Got {list(values)!r} instead.")
            # numpy scalars (from np.arange, an array) as Python's: numbers are then numbers to
            # the encoding and the steps, as the kernel's constexprs expect
            values = tuple(value.item() if isinstance(value, np.generic) else value for value in values)
            values = tuple(dict.fromkeys(values))  # drop repeats, keep order
            if not values:
                raise ValueError(f"The domain of parameter {name!r} is empty: give it at least one value.")
            self.domains[name] = values
        if constraints is not None and (callable(constraints) or isinstance(constraints, (str, bytes))
                                        or not isinstance(constraints, Iterable)):
            raise ValueError(
                f"constraints must be a list of callables on a config dict. Got {constraints!r} instead.")
        self.constraints: tuple[Constraint, ...] = tuple(constraints or ())
        for constraint in self.constraints:
            if not callable(constraint):
                raise ValueError(f"A constraint must be a callable on a config dict. Got {constraint!r} instead.")
        self._explicit: list[Config] | None = None
        self._valid: list[Config] | None = None
        self._index: dict[str, int] | None = None
        self._encoded: np.ndarray | None = None
        self._ordered: dict[str, tuple] | None = None
        self._value_positions: dict[bool, np.ndarray] = {}

    @classmethod
    def from_configs(cls, configs: Sequence[Config], constraints: Sequence[Constraint] | None = None) -> "Space":
        """A Space that holds exactly ``configs`` (in order, pre-hooks kept); domains are derived."""
        configs = list(configs)
        if not configs:
            raise ValueError("Space.from_configs needs at least one Config.")
        names: dict[str, None] = {}
        for config in configs:
            if not isinstance(config, Config):
                raise ValueError(f"Space.from_configs takes triton.Config objects. Got {config!r} instead.")
            names.update(dict.fromkeys(config_to_dict(config)))
        domains = {
            name: [config_to_dict(c)[name] for c in configs if name in config_to_dict(c)] for name in names
        }
        space = cls(constraints=constraints, **domains)
        space._explicit = configs
        return space

    # -- enumeration -------------------------------------------------------------------------

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(self.domains)

    @property
    def meta_params(self) -> tuple[str, ...]:
        """Parameters passed to the kernel as constexpr arguments (not compile options)."""
        return tuple(name for name in self.domains if name not in COMPILE_OPTIONS)

    def satisfies(self, params: Mapping[str, Any]) -> bool:
        """Whether a flat config passes every constraint; a constraint that raises is an error."""
        for constraint in self.constraints:
            try:
                accepted = constraint(params)
            except Exception as error:
                raise ValueError(
                    f"Constraint {_describe(constraint)} raised {type(error).__name__}: {error} on config {dict(params)}"
                ) from error
            if not accepted:
                return False
        return True

    def _enumerate(self) -> list[Config]:
        if self._explicit is not None:
            candidates: Iterable[Config] = self._explicit
            if self.constraints:
                valid = [c for c in candidates if self.satisfies(config_to_dict(c))]
            else:
                valid = list(candidates)
        else:
            names = list(self.domains)
            valid = []
            for values in itertools.product(*self.domains.values()):
                params = dict(zip(names, values))
                if self.satisfies(params):
                    valid.append(config_from_dict(params))
        if not valid:
            raise ValueError(
                f"The constraints of this Space reject every one of its {self.cartesian_size} configs: "
                f"check {', '.join(_describe(c) for c in self.constraints)}."
            )
        return valid

    @property
    def cartesian_size(self) -> int:
        if self._explicit is not None:
            return len(self._explicit)
        return math.prod(len(values) for values in self.domains.values())

    def configs(self) -> list[Config]:
        """Every valid config, in a fixed order (the list's order for ``from_configs``)."""
        if self._valid is None:
            self._valid = self._enumerate()
            self._index = {config_json(c): i for i, c in enumerate(self._valid)}
        return self._valid

    def __len__(self) -> int:
        return len(self.configs())

    def __iter__(self) -> Iterator[Config]:
        return iter(self.configs())

    def index(self, config: Config | Mapping[str, Any]) -> int | None:
        """Position of a config in ``configs()``, or None if it is not a valid config of the Space."""
        self.configs()
        assert self._index is not None
        if not isinstance(config, Config):
            config = config_from_dict(config)  # fills in Triton's default compile options
        return self._index.get(config_json(config))

    def position(self, config: Config) -> int:
        """``index``, for a config that must be one of the Space's: a ValueError naming it otherwise."""
        index = self.index(config)
        if index is None:
            raise ValueError(f"{config_source(config)} is not a config of the Space")
        return index

    def canonical_positions(self) -> np.ndarray:
        """For each position in ``configs()``, the position ``index`` gives its config: itself,
        except for the earlier copies of a config listed more than once (``from_configs`` keeps a
        list's repeats), so that a mask over positions marks every copy at once."""
        configs = self.configs()
        assert self._index is not None
        if len(self._index) == len(configs):
            return np.arange(len(configs))
        return np.array([self._index[config_json(c)] for c in configs], dtype=int)

    def __contains__(self, config: object) -> bool:
        return isinstance(config, (Config, Mapping)) and self.index(config) is not None

    def canonical(self, config: Config | Mapping[str, Any]) -> Config | None:
        """The Space's own Config object equal to ``config`` (pre-hooks restored), or None."""
        position = self.index(config)
        return None if position is None else self.configs()[position]

    # -- search helpers ----------------------------------------------------------------------

    def sample(self, n: int, rng: np.random.Generator, exclude: Iterable[str] = ()) -> list[Config]:
        """Up to ``n`` distinct valid configs drawn uniformly, none of whose ids is in ``exclude``."""
        excluded = set(exclude)
        pool = [c for c in self.configs() if config_json(c) not in excluded]
        if not pool:
            return []
        picks = rng.choice(len(pool), size=min(n, len(pool)), replace=False)
        return [pool[i] for i in picks]

    @property
    def ordered_domains(self) -> dict[str, tuple]:
        """Each parameter's values in the order a step moves through them: numbers ascending
        (a missing value, None, before every number), other values as the domain lists them.
        Domains keep the order they were given in, and a Space made from a config list takes the
        order the configs came in (``num_warps`` 2, 1, 4, 8), which says nothing about which
        values are near."""
        if self._ordered is None:
            self._ordered = {name: tuple(sorted(domain, key=lambda v: -math.inf if v is None else v))
                             if self._numeric(name) else domain for name, domain in self.domains.items()}
        return dict(self._ordered)  # a copy: the Space's own must not change under later calls

    def value_positions(self, ordered: bool = True) -> np.ndarray:
        """Each config's parameters as the positions of their values in ``ordered_domains`` (in
        ``domains``, as given, where not ``ordered``): configs x parameters, -1 where a config
        lacks a parameter whose domain has no None; made once (read-only), as a search that steps
        through the domains needs them for every config of the Space at its start. One pass over
        the configs gives the positions in ``domains``; the ordered ones and ``encoded()`` are
        looked up from them, value by value."""
        if False not in self._value_positions:
            # a domain's values are hashable (Space refuses others) and distinct
            lookups = [(name, {value: i for i, value in enumerate(domain)}) for name, domain in self.domains.items()]
            configs = self.configs()
            # one flat pass, no list per config: those lists set off garbage collections, which
            # cost the more objects the process holds
            flat = (lookup.get(params.get(name), -1)
                    for params in map(config_to_dict, configs) for name, lookup in lookups)
            in_domains = np.fromiter(flat, dtype=int, count=len(configs) * len(lookups))
            in_domains = in_domains.reshape(len(configs), len(lookups))
            in_domains.setflags(write=False)
            self._value_positions[False] = in_domains
        if ordered and True not in self._value_positions:
            in_domains = self._value_positions[False]
            # each column through its domain's order: position in ``domains`` -> in ``ordered_domains``
            # (the last entry, for -1, keeps -1)
            orders = [np.array([ordered_domain.index(value) for value in domain] + [-1], dtype=int)
                      for domain, ordered_domain in zip(self.domains.values(), self.ordered_domains.values())]
            positions = np.column_stack([order[in_domains[:, j]] for j, order in enumerate(orders)])
            positions.setflags(write=False)
            self._value_positions[True] = positions
        return self._value_positions[ordered]

    def neighbours(self, config: Config | Mapping[str, Any], method: str = "adjacent") -> list[Config]:
        """Valid configs that differ from ``config`` in one parameter.

        ``adjacent``: that parameter moves to the next lower or higher value (``ordered_domains``);
        ``hamming``: it takes any other value of its domain.
        """
        if method not in ("adjacent", "hamming"):
            raise ValueError(f"neighbours() method must be 'adjacent' or 'hamming'. Got {method!r} instead.")
        params = config_to_dict(config) if isinstance(config, Config) else dict(config)
        found = []
        for name, domain in self.ordered_domains.items():
            if params.get(name) not in domain:
                continue
            position = domain.index(params[name])
            if method == "adjacent":
                others = [domain[i] for i in (position - 1, position + 1) if 0 <= i < len(domain)]
            else:
                others = [v for v in domain if v != params[name]]
            for value in others:
                candidate = self.canonical({**params, name: value})
                if candidate is not None:
                    found.append(candidate)
        return found

    # -- encoding for models -----------------------------------------------------------------

    @property
    def feature_names(self) -> list[str]:
        return [f"log2_{n}" if self._log_scaled(n) else n for n in self.domains]

    def _log_scaled(self, name: str) -> bool:
        values = [v for v in self.domains[name] if v is not None]
        return bool(values) and all(is_power_of_two(v) for v in values)

    def _numeric(self, name: str) -> bool:
        return all(
            v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in self.domains[name]
        )

    def encode(self, configs: Config | Mapping[str, Any] | Sequence[Config | Mapping[str, Any]]) -> np.ndarray:
        """Configs as numbers: log2 for power-of-two domains, the value for other numbers, the
        domain index for anything else; a missing value (``maxnreg=None``) is -1. One row per config."""
        single = isinstance(configs, (Config, Mapping))
        rows: list[Config | Mapping[str, Any]] = (
            [configs] if isinstance(configs, (Config, Mapping)) else list(configs))
        encoded = np.empty((len(rows), len(self.domains)), dtype=np.float64)
        # each column's encoding, chosen once per call: a search encodes its trials at every step
        columns = []
        for name, domain in self.domains.items():
            if self._log_scaled(name):
                columns.append((name, math.log2))
            elif self._numeric(name):
                columns.append((name, float))
            else:
                columns.append((name, _position_in(domain)))
        for i, config in enumerate(rows):
            params = config_to_dict(config) if isinstance(config, Config) else config
            encoded[i] = [-1.0 if (value := params.get(name)) is None else encode(value) for name, encode in columns]
        return encoded[0] if single else encoded

    def encoded(self) -> np.ndarray:
        """``encode(configs())``, made once (read-only): every search of this Space scores all of
        its configs, and a replay runs many searches of one Space. Each config's values are encoded
        as its domains list them: where a Space made from configs kept one of two equal values
        (64 and 64.0, 0.0 and -0.0), the configs holding the other are encoded with it, which
        compares equal."""
        if self._encoded is None:
            in_domains = self.value_positions(ordered=False)  # configs() refuses a Space without configs
            # each domain's values encoded once (the last entry, for a config lacking the
            # parameter: -1, as ``encode`` gives), then looked up by every config's positions
            tables = [self.encode([{name: value} for value in domain])[:, j].tolist() + [-1.0]
                      for j, (name, domain) in enumerate(self.domains.items())]
            self._encoded = np.column_stack([np.asarray(table)[in_domains[:, j]] for j, table in enumerate(tables)])
            self._encoded.setflags(write=False)
        return self._encoded

    # -- checks against a kernel -------------------------------------------------------------

    def check_kernel(self, arg_names: Sequence[str], kernel_name: str = "kernel") -> None:
        """Refuse meta-parameters the kernel does not take."""
        unknown = [name for name in self.meta_params if name not in arg_names]
        if unknown:
            raise ValueError(
                f"The Space tunes {', '.join(unknown)}, which {kernel_name} does not take as an argument. "
                f"Its arguments are: {', '.join(arg_names)}."
            )

    def __repr__(self) -> str:
        domains = ", ".join(f"{name}={list(values)}" for name, values in self.domains.items())
        extra = f", constraints={len(self.constraints)}" if self.constraints else ""
        return f"Space({domains}{extra})"


def _position_in(domain: Sequence[Any]) -> Callable[[Any], float]:
    """A value's position in ``domain`` as a float; -1 for a value outside it."""
    positions = {value: float(i) for i, value in enumerate(domain)}

    def position(value: Any) -> float:
        try:
            return positions.get(value, -1.0)
        except TypeError:  # unhashable, so in no domain
            return -1.0
    return position
