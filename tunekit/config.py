"""Triton's ``Config``, re-exported, and its canonical (JSON) form used by the store.

tunekit uses ``triton.Config`` itself, so configs move between ``triton.autotune`` and
``tunekit.autotune`` unchanged. The canonical form is the flat mapping of every tunable
parameter (meta-parameters plus ``num_warps``, ``num_stages``, ``num_ctas``, ``maxnreg``):
it is what a Space enumerates, what constraints see and what the store keys trials by.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Mapping

from triton import Config

#: Parameters that are compile options, not kernel arguments.
COMPILE_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
_OPTION_DEFAULTS = {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None}

__all__ = ["Config", "COMPILE_OPTIONS", "config_to_dict", "config_from_dict", "config_json", "config_source"]


def config_to_dict(config: Config) -> dict[str, Any]:
    """Flatten a Config into ``{param: value}`` (compile options included, ``None`` left out)."""
    flat = dict(config.kwargs)
    for option in COMPILE_OPTIONS:
        value = getattr(config, option, None)
        if value is not None:
            flat[option] = value
    return flat


def config_from_dict(params: Mapping[str, Any], pre_hook: Callable[..., Any] | None = None) -> Config:
    """Build a Config from a flat mapping; compile options not given take Triton's defaults."""
    kwargs = {name: value for name, value in params.items() if name not in COMPILE_OPTIONS}
    options = {name: params.get(name, default) for name, default in _OPTION_DEFAULTS.items()}
    return Config(kwargs, pre_hook=pre_hook, **options)


#: ``json.dumps(..., sort_keys=True, default=str)``'s encoder, made once: ``dumps`` makes one per
#: call, a sixth of the time a Space of 17,956 configs takes to index them.
_CANONICAL_JSON = json.JSONEncoder(sort_keys=True, default=str)


def config_json(config: Config | Mapping[str, Any]) -> str:
    """The canonical text of a config: sorted-key JSON of its flat form (pre_hook not included)."""
    flat = config_to_dict(config) if isinstance(config, Config) else dict(config)
    return _CANONICAL_JSON.encode(flat)


def config_source(config: Config) -> str:
    """The Python that builds ``config``, e.g. ``triton.Config({'BLOCK': 256}, num_warps=4,
    num_stages=3)``: what to paste into ``configs=[...]`` to pin a winner. A ``pre_hook`` is code,
    not a value: it is written by its qualified name, which pastes as is for a module-level function."""
    options = [f"{name}={getattr(config, name)!r}" for name in COMPILE_OPTIONS
               if getattr(config, name, None) is not None
               and (name in ("num_warps", "num_stages") or getattr(config, name) != _OPTION_DEFAULTS[name])]
    if getattr(config, "ir_override", None) is not None:
        options.append(f"ir_override={config.ir_override!r}")
    if config.pre_hook is not None:
        options.append(f"pre_hook={getattr(config.pre_hook, '__qualname__', repr(config.pre_hook))}")
    return f"triton.Config({dict(config.kwargs)!r}{''.join(', ' + option for option in options)})"


def readable_repr(instance: Any) -> str:
    """A dataclass's repr with its configs written as ``config_source`` writes them
    (``triton.Config`` has no repr of its own: ``<Config object at 0x...>``)."""
    def shown(value: Any) -> str:
        return config_source(value) if isinstance(value, Config) else repr(value)

    fields = ", ".join(f"{f.name}={shown(getattr(instance, f.name))}" for f in dataclasses.fields(instance) if f.repr)
    return f"{type(instance).__name__}({fields})"
