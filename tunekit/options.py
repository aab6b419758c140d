"""The decorator's options, checked at decoration: a mistaken one is an error that names it,
before anything is compiled or stored."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from . import settings
from .budget import Budget
from .config import Config, config_json
from .isolation import kernel_address
from .session import TuningOptions
from .space import Space
from .strategy import Strategy, make_strategy

logger = logging.getLogger(__name__)

#: Used when the user gives a Space but neither a strategy nor a budget.
DEFAULT_SEARCH_BUDGET = Budget(evals=64)


def check_options(
    name: str,
    arg_names: Sequence[str],
    *,
    key: Sequence[str],
    reset_to_zero: Sequence[str] | None,
    restore_value: Sequence[str] | None,
    check_outputs: Sequence[str] | None,
    reference: Callable[..., Any] | None,
    tolerance: float | Mapping[str, float] | None,
    flags: Mapping[str, Any],
    default_config: Config | None,
    timeouts: Mapping[str, float | None],
    budget: Budget | None,
    finalists: int | None,
    fallback: Callable[..., Any] | None,
    key_buckets: Any,
) -> None:
    """Raise ``ValueError`` or ``TypeError`` for the first option of kernel ``name`` that is
    mistaken: argument lists naming what the kernel does not take, flags that are not booleans
    (``flags``: option name -> value; ``isolate`` may be None), timeouts that are not seconds > 0,
    options of the wrong type, and combinations that contradict each other."""
    for param, names in (("key", key), ("reset_to_zero", reset_to_zero), ("restore_value", restore_value),
                         ("check_outputs", check_outputs)):
        if isinstance(names, str):
            raise ValueError(f"{param} must be a list of argument names, not the string {names!r}.")
        if not isinstance(names, Iterable) and not (names is None and param != "key"):  # key is required
            raise TypeError(f"{param} must be a list of argument names. Got {names!r} instead.")
        unknown = [n for n in names or () if n not in arg_names]
        if unknown:
            raise ValueError(
                f"{param} of {name} names {', '.join(map(repr, unknown))}, which "
                f"{'is not an argument' if len(unknown) == 1 else 'are not arguments'} of the kernel. "
                f"Its arguments are: {', '.join(arg_names)}."
            )
    if reference is not None and not callable(reference):
        raise TypeError(f"reference must be a function of the kernel's arguments. Got {reference!r} instead.")
    tolerances = tolerance.values() if isinstance(tolerance, Mapping) else [tolerance]
    if any(t is not None and not (isinstance(t, (int, float)) and t >= 0) for t in tolerances):
        raise ValueError(f"tolerance must be a number >= 0 or {{argument name: number}}. Got {tolerance!r} instead.")
    if isinstance(tolerance, Mapping) and (unknown := sorted(set(tolerance) - set(arg_names))):
        raise ValueError(f"tolerance of {name} names {', '.join(map(repr, unknown))}, not an argument of the "
                         f"kernel. Its arguments are: {', '.join(arg_names)}.")
    for option, flag in flags.items():
        allowed = (True, False, None) if option == "isolate" else (True, False)
        if not any(flag is value for value in allowed):
            raise TypeError(f"{option} must be {' or '.join(map(str, allowed))}. Got {flag!r} instead.")
    if default_config is not None and not isinstance(default_config, Config):
        raise TypeError(f"default_config must be a triton.Config. Got {default_config!r} instead.")
    for option, seconds in timeouts.items():
        if seconds is not None and not (isinstance(seconds, (int, float)) and seconds > 0):
            raise ValueError(f"{option} must be a number of seconds > 0 or None. Got {seconds!r} instead.")
    if budget is not None and not isinstance(budget, Budget):
        raise TypeError(f"budget must be a tunekit.Budget. Got {budget!r} instead.")
    if finalists is not None and (isinstance(finalists, bool) or not isinstance(finalists, int) or finalists < 1):
        raise ValueError(f"finalists must be an int >= 1 or None. Got {finalists!r} instead.")
    if fallback is not None and not callable(fallback):
        raise TypeError(f"fallback must be a function config_for(**key) -> dict (tunekit store heuristics writes "
                        f"one). Got {fallback!r} instead.")
    if flags.get("background") and budget is not None and budget.per_call:
        raise ValueError("background=True and Budget(per_call=...) both keep tuning off a long first call; choose "
                         "one.")
    if budget is not None and budget.per_call and key_buckets:
        raise ValueError("Budget(per_call=...) times each call's configs on that call's inputs; with key_buckets "
                         "one key holds several shapes, whose times cannot be compared. Leave out one of them.")


def background_and_isolation(fn: Any, name: str, background: bool, isolate: bool | None) -> tuple[bool, bool | None]:
    """``background`` and ``isolate`` as the tuning uses them. A background tuning runs its configs
    in a benchmark worker, not in the serving process's threads (isolated unless the user says
    otherwise); a kernel no worker can import is tuned at its calls instead, said here once."""
    if not background:
        return background, isolate
    if isolate is not True and kernel_address(fn) is None:
        logger.warning("%s: tuned at the first call of each key, not in the background: background tunings run "
                       "their configs in a benchmark worker, and no worker can import a kernel defined in "
                       "__main__ or inside a function; define it at the top level of a module", name)
        return False, isolate
    if isolate is False and settings.interpreting():
        raise ValueError("background=True under the Triton interpreter needs isolate (the interpreter is not "
                         "thread-safe: the background tuning runs its configs in a benchmark worker).")
    return True, True if isolate is None else isolate


def search_space(configs: Sequence[Config] | None, space: Space | None, key: Sequence[str], arg_names: Sequence[str],
                 name: str) -> Space:
    """The Space to search: ``configs`` (first, in their order), ``space``'s configs, or Triton's
    single default config when neither is given; checked against the kernel's arguments and
    enumerated now, so that a constraint that rejects all or raises fails before any compile. A
    tuned parameter named in ``key`` is refused with a Space; with a config list it is left out
    of the key, as stock ``triton.autotune`` does."""
    if space is not None and not isinstance(space, Space):
        raise TypeError(f"space must be a tunekit.Space. Got {space!r} instead.")
    if configs is not None and (isinstance(configs, Config) or not isinstance(configs, Iterable)
                                or (space is None and not configs)):
        error = ValueError if isinstance(configs, Sequence) else TypeError  # [] is a list, but empty
        raise error("configs must be a list of at least one triton.Config (leave it out for Triton's "
                    f"single default config). Got {configs!r} instead.")
    if configs and space is not None:
        listed = list(configs)
        ids = {config_json(c) for c in listed}
        searched = Space.from_configs(listed + [c for c in space.configs() if config_json(c) not in ids])
    elif space is not None:
        searched = space
    else:
        searched = Space.from_configs(list(configs) if configs else [Config({}, num_warps=4, num_stages=3, num_ctas=1)])
    searched.check_kernel(arg_names, name)
    tuned_keys = [k for k in key if k in searched.meta_params]
    if tuned_keys:
        problem = (f"key of {name} names {', '.join(map(repr, tuned_keys))}, which the autotuner sets from its "
                   "configs, so it is no part of the key (the call does not pass it)")
        if space is not None:  # tunekit's own API: refused
            raise ValueError(f"{problem}: every call would share one winner. key names the call's own arguments "
                             "that change what is fastest (sizes, strides, flags).")
        logger.info("%s, as in stock triton.autotune", problem)  # a config list: stock's behaviour, kept
    len(searched)
    return searched


def tuning_options(configs: Sequence[Config] | None, space: Space | None, strategy: str | Strategy | None,
                   budget: Budget | None, store: Any, cache_results: bool, **options: Any) -> tuple[TuningOptions, Any]:
    """The tuning options with their defaults, and the store to use. Exhaustive search of a
    config list (as stock), else the default strategy within ``DEFAULT_SEARCH_BUDGET``; one
    finalist without a store (nothing persists: as stock, no re-timing), else the default count;
    ``cache_results`` (stock's persistence of timings) turns on the default store."""
    from . import strategies

    if strategy is None:
        strategy = "exhaustive" if configs and space is None else strategies.DEFAULT
    chosen = make_strategy(strategy)
    if budget is None and chosen.name != "exhaustive":
        budget = DEFAULT_SEARCH_BUDGET
    if (store is None or store is False) and cache_results:
        store = True
    if options.get("finalists") is None:
        options["finalists"] = 1 if store is None or store is False else settings.DEFAULTS.finalists
    return TuningOptions(strategy=chosen, budget=budget or Budget(), **options), store
