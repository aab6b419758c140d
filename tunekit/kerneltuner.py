"""Kernel Tuner's search strategies replayed on a recorded space (``tunekit compare --strategy kt:NAME``).

Kernel Tuner runs in its simulation mode on a temporary Kernel Tuner copy of the recorded file
(the user's file is never touched; the copy is removed afterwards). The recorded files store no
restrictions, so the restriction given is "the config is in the file", failed configs included:
both tuners then search the same configs and both count a failed config as an evaluation. Kernel
Tuner's ``seed`` is ignored by most of its strategies, so Python's and NumPy's generators are
seeded before every run. Kernel Tuner may revisit a config; only first visits count, as in
tunekit, up to the same budget. Simulated seconds are the recorded compile + benchmark +
verification times of the configs visited (tunekit adds its strategy's measured time too).

Kernel Tuner is an optional dependency (``pip install "tunekit[experiments]"``), imported only
when one of its strategies is run or checked.
"""

from __future__ import annotations

import dataclasses
import gzip
import importlib.util
import random
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .metrics import Run
from .plots import slug
from .recorded import RecordedSpace, write_kernel_tuner

#: How ``tunekit compare`` names a Kernel Tuner strategy: ``kt:genetic_algorithm``.
PREFIX = "kt:"
INSTALL = 'pip install "tunekit[experiments]"'


def is_kernel_tuner(spec: str) -> bool:
    """Whether a strategy spec names one of Kernel Tuner's strategies (``kt:NAME``)."""
    return spec.startswith(PREFIX)


def strategies() -> list[str]:
    """The names of Kernel Tuner's strategies; raises ``ValueError`` when it is not installed."""
    if importlib.util.find_spec("kernel_tuner") is None:
        raise ValueError(f"Kernel Tuner's strategies (kt:NAME) need Kernel Tuner, which is not installed: {INSTALL}")
    from kernel_tuner import interface

    return sorted(getattr(interface, "strategy_map", {}))


def check_strategy(spec: str) -> str:
    """The Kernel Tuner strategy that ``spec`` (``kt:NAME``) names, checked before any work:
    ``ValueError`` when Kernel Tuner is missing or has no strategy of that name."""
    name = spec.removeprefix(PREFIX)
    try:
        known = strategies()
    except ValueError as error:
        raise ValueError(f"strategy {spec!r}: {error}") from None
    if known and name not in known:
        raise ValueError(f"strategy {spec!r}: Kernel Tuner has no strategy {name!r}. Its strategies: "
                         f"{', '.join(PREFIX + k for k in known)}.")
    return name


def replay_kernel_tuner(recorded: RecordedSpace, strategy: str, seed: int, budget: int,
                        seconds: float | None = None, scratch: str | Path | None = None) -> Run:
    """One tuning of ``recorded`` by Kernel Tuner's ``strategy`` (a name, or ``kt:NAME``) in its
    simulation mode, as a tunekit ``Run`` named ``kt:NAME``: at most ``budget`` first visits, and
    none started once ``seconds`` of recorded cost are spent. ``scratch``: a directory for the
    Kernel Tuner copy, kept there for the next run of the space (the caller removes it); without
    it the copy goes to a temporary directory removed before this returns."""
    name = check_strategy(PREFIX + strategy.removeprefix(PREFIX))
    if scratch is None:
        with tempfile.TemporaryDirectory(prefix="tunekit-kt-") as temporary:
            return _replay(recorded, name, seed, budget, seconds, Path(temporary))
    return _replay(recorded, name, seed, budget, seconds, Path(scratch))


def _replay(recorded: RecordedSpace, strategy: str, seed: int, budget: int, seconds: float | None,
            scratch: Path) -> Run:
    from constraint import FunctionConstraint
    from kernel_tuner import tune_kernel
    from kernel_tuner import util as kt_util

    copy = kernel_tuner_copy(recorded, scratch)
    cache = kt_util.read_cache(str(copy), open_cache=False)
    names = cache["tune_params_keys"]
    tune_args = kt_util.infer_args_from_cache(cache)
    order = list(tune_args["tune_params"])  # Kernel Tuner hands restrictions values in this order
    recorded_configs = {tuple(entry[p] for p in order) for entry in cache["cache"].values()}

    def in_file(*values: Any) -> bool:
        return values in recorded_configs

    random.seed(seed)
    np.random.seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results, _ = tune_kernel(**tune_args, cache=str(copy), simulation_mode=True,
                                 restrictions=[FunctionConstraint(in_file)], strategy=strategy,
                                 strategy_options={"max_fevals": budget}, quiet=True, seed=seed)
    times: list[float] = []
    clocks: list[float] = []
    seen: set[tuple] = set()
    clock = 0.0
    for result in results:
        if len(times) == budget or (seconds is not None and clock >= seconds):
            break
        config = tuple(result[p] for p in names)
        if config in seen:
            continue
        seen.add(config)
        record = recorded.lookup(dict(zip(names, config)))
        if record is None:  # outside the file (some strategies skip the restriction): a failed evaluation
            value = None
        else:
            clock += record.evaluation_seconds
            value = result.get("time")
        times.append(float(value) if isinstance(value, (int, float)) and value < 1e20 else float("inf"))
        clocks.append(clock)
    return Run(recorded.name, PREFIX + strategy, seed, budget, np.array(times, dtype=float),
               np.array(clocks, dtype=float))


def kernel_tuner_copy(recorded: RecordedSpace, scratch: Path) -> Path:
    """A Kernel Tuner cache file of ``recorded`` in ``scratch`` (made once per space): the source
    decompressed where it is a closed Kernel Tuner cache with a size Kernel Tuner reads, else one
    written from the records (a T4 file, a tunekit export, a cache still being written, or the
    shipped recordings, which keep their tuning key as the size; simulation mode reads no size)."""
    scratch.mkdir(parents=True, exist_ok=True)
    copy = scratch / (slug(recorded.name) + ".json")  # names repeat across kernels (RTX_3090.json.gz)
    if copy.exists():
        return copy
    partial = copy.with_name(copy.name + ".partial")
    if not (_is_size(recorded.problem_size) and _decompressed_cache(recorded.source, partial)):
        partial.unlink(missing_ok=True)
        write_kernel_tuner(dataclasses.replace(recorded, problem_size=[1]), partial)
    partial.replace(copy)
    return copy


def _is_size(value: Any) -> bool:
    """Whether Kernel Tuner reads ``value`` as a problem size: an int or a list of them."""
    values = value if isinstance(value, list) else [value]
    return bool(values) and all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def _decompressed_cache(source: str, target: Path) -> bool:
    """Copy ``source`` to ``target``, decompressed, if it is a closed Kernel Tuner cache file (its
    header names ``tune_params_keys``; it ends with a brace): what Kernel Tuner itself would read."""
    if not source or not Path(source).is_file():
        return False
    opener: Any = gzip.open if source.endswith(".gz") else open
    try:
        with opener(source, "rb") as handle:
            head = handle.read(1 << 16)
            if b'"tune_params_keys"' not in head:  # a T4 file or a tunekit export
                return False
            with open(target, "wb") as out:
                out.write(head)
                shutil.copyfileobj(handle, out)
        with open(target, "rb") as written:
            written.seek(max(0, target.stat().st_size - 64))
            return written.read().rstrip().endswith(b"}")
    except (OSError, EOFError):
        return False
