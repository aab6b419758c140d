"""Ranks of a ``torch.distributed`` job that agree on every config they launch.

Tuned independently, the ranks of a job could choose different configs for one key (timings
differ by noise), and every rank would spend a tuning. With ``ranks="first"`` (the default once
``torch.distributed`` is initialised with several ranks), the first rank to reach a kernel's key
decides it (its stored winner, or a tuning on its GPU) and publishes the decision in the job's
key-value store (the one ``init_process_group`` rendezvoused through); a rank that reaches the key
later waits for that decision and launches it. Nothing here is a collective: a rank waits only
for a key some rank has started to decide, so ranks that call different kernels or shapes, or
call a kernel in a different order or not at all, never wait for each other. A rank that waits
does so on the host; if it has a GPU collective pending that the deciding rank has yet to join
(rank 1 runs an all-reduce then the kernel, rank 0 the kernel then the all-reduce), the deciding
rank's timing waits for that collective and the job stalls: call tuned kernels in the same order
relative to collectives on every rank, as SPMD code does. Ranks on different kinds of GPU decide
apart (the device is part of the decision's name). ``ranks="each"`` tunes every rank alone, as
stock Triton does.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from .config import Config, config_from_dict, config_to_dict
from .session import TuningError
from .space import Space

logger = logging.getLogger(__name__)

MODES = ("first", "each")
#: How long a rank waits for another rank's decision: a tuning's length, and more.
WAIT = timedelta(hours=2)


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"ranks must be one of {', '.join(map(repr, MODES))}. Got {mode!r} instead.")
    return mode


def _job_store() -> Any:
    """The key-value store of the running ``torch.distributed`` job of several ranks, else None."""
    try:
        import torch.distributed as dist
        from torch.distributed import distributed_c10d
    except ImportError:  # pragma: no cover - torch without distributed support
        return None
    if not dist.is_available() or not dist.is_initialized() or dist.get_world_size() < 2:
        return None
    return distributed_c10d._get_default_store()


def agree(mode: str, name: str, space: Space, decide: Callable[[], Config]) -> Config:
    """The config to launch for the decision ``name`` (a kernel's identity, device, Space and key):
    ``decide()`` on the first rank that gets here, its published answer on every other rank. A
    decision that raised (or was interrupted) raises on every rank that waits for it, and the
    next call of any rank decides afresh. Without a job of several ranks, or with
    ``mode="each"``, ``decide()``."""
    store = _job_store() if mode == "first" else None
    if store is None:
        return decide()
    import torch.distributed as dist

    # an elastic restart keeps the job's store: decisions of an earlier attempt are not this one's
    prefix = f"tunekit/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/{name}"
    attempt = store.add(f"{prefix}/attempts", 0)  # a failed decision moves every rank to the next one
    decision_key = f"{prefix}/{attempt}/decision"
    if store.add(f"{prefix}/{attempt}/deciders", 1) == 1:
        try:
            config = decide()
        except BaseException as error:
            store.set(decision_key, json.dumps({"rank": dist.get_rank(),
                                                "error": f"{type(error).__name__}: {error}"}))
            store.add(f"{prefix}/attempts", 1)
            raise
        store.set(decision_key, json.dumps({"rank": dist.get_rank(), "config": config_to_dict(config)}))
        return config
    try:
        store.wait([decision_key], WAIT)
    except Exception as error:  # the store's timeout, or its loss: the deciding rank's process died
        raise TuningError(f"no rank published the config for {name} within {WAIT}: {error}") from error
    decision = json.loads(store.get(decision_key))
    if "error" in decision:
        raise TuningError(f"rank {decision['rank']} could not decide {name}: {decision['error']}")
    logger.info("%s: rank %d's decision %s", name, decision["rank"], decision["config"])
    return space.canonical(decision["config"]) or config_from_dict(decision["config"])
