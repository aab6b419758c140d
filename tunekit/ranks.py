"""Ranks of a ``torch.distributed`` job that agree on every config they launch.

In a job with one process per GPU, every rank calls a tuned kernel at the same point of the
program. Tuned independently, ranks could choose different configs (timings differ by noise),
and a rank tuning alone while the others wait in a collective stalls them for the length of a
tuning. With ``ranks="rank0"`` (the default once ``torch.distributed`` is initialised), the ranks
first exchange their keys; for each distinct key the lowest rank holding it decides (the store's
winner, or a tuning on its GPU) while the others wait on a gloo group of tunekit's own (CPU: no
GPU collective is in flight, and its timeout is a tuning's, not NCCL's), then every rank takes its
key's decision. Where all ranks share the key, rank 0 tunes and the winner is broadcast.
``ranks="each"`` lets every rank tune alone, as stock Triton does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from .config import Config, config_from_dict, config_to_dict
from .keys import TuningKey
from .session import TuningError
from .space import Space

logger = logging.getLogger(__name__)

MODES = ("rank0", "each")
#: How long the ranks wait for the deciding rank: a tuning's length, far beyond NCCL's default.
WAIT = timedelta(hours=2)

_group: Any = None
_group_lock = threading.Lock()


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"ranks must be one of {', '.join(map(repr, MODES))}. Got {mode!r} instead.")
    return mode


def _distributed() -> Any:
    """``torch.distributed`` when a job of more than one rank is running, else None."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch without distributed support
        return None
    if not dist.is_available() or not dist.is_initialized() or dist.get_world_size() < 2:
        return None
    return dist


def _object_group(dist: Any) -> Any:
    """tunekit's gloo group over every rank, made by all ranks at their first agreement (creating
    a group is itself collective; the ranks reach it together, at the same miss)."""
    global _group
    with _group_lock:
        if _group is None:
            _group = dist.new_group(backend="gloo", timeout=WAIT)
        return _group


def agree(mode: str, key: TuningKey, space: Space, decide: Callable[[], Config], kernel_name: str) -> Config:
    """The config every rank launches for ``key``: ``decide()`` on the lowest rank holding the key,
    its answer on the others (``mode="rank0"`` in a job of several ranks); ``decide()`` here
    otherwise. A decision that raised raises on every rank of that key."""
    dist = _distributed()
    if mode == "each" or dist is None:
        return decide()
    group = _object_group(dist)
    rank, world = dist.get_rank(), dist.get_world_size()
    keys: list[Any] = [None] * world
    dist.all_gather_object(keys, key.json, group=group)
    decider = keys.index(key.json)
    if len(set(keys)) > 1 and rank == decider:
        logger.info("%s: the ranks call it with %d different keys; the lowest rank of each key decides it",
                    kernel_name, len(set(keys)))
    decision: tuple[str, Any] = ("wait", None)
    failure: Exception | None = None
    if rank == decider:
        try:
            decision = ("config", config_to_dict(decide()))
        except Exception as error:  # every rank must reach the exchange below, or the others hang
            failure = error
            decision = ("error", str(error) if isinstance(error, TuningError) else f"{type(error).__name__}: {error}")
    decisions = _exchange(dist, group, world, decision)
    if failure is not None:
        raise failure
    kind, value = decisions[decider]
    if kind == "error":
        raise TuningError(f"rank {decider} could not tune {kernel_name} for key {key.json}: {value}")
    if rank != decider:
        logger.info("%s %s: rank %d's decision %s", kernel_name, key.json, decider, value)
    return space.canonical(value) or config_from_dict(value)


def _exchange(dist: Any, group: Any, world: int, decision: tuple[str, Any]) -> list[tuple[str, Any]]:
    decisions: list[Any] = [None] * world
    dist.all_gather_object(decisions, decision, group=group)
    return decisions
