"""tunekit: a drop-in replacement for ``triton.autotune`` with pluggable search strategies
and a persistent results store.

    import tunekit

    @tunekit.autotune(space=tunekit.Space(BLOCK=[256, 512, 1024], num_warps=[2, 4, 8]),
                      key=["n"], strategy="random", budget=tunekit.Budget(evals=6))
    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr): ...
"""

from triton import heuristics

# mypy checks strategies/ as the package strategies: it cannot see it as tunekit.strategies (package-dir)
from . import strategies  # type: ignore[attr-defined]  # noqa: F401 - registers the built-in strategies
from .autotuner import Autotuner, TuningError, autotune
from .benchmark import Benchmarker
from .budget import Budget
from .compat import NoDeviceError
from .config import Config
from .keys import next_power_of_2
from .opening import open_store
from .space import Space
from .store import KernelIdentity, ResultsStore, StoreError
from .strategy import SearchContext, Strategy, register_strategy
from .trial import Status, Timing, Trial
from .triton_patch import patch_triton

__version__ = "0.1.0"

__all__ = [
    "Autotuner",
    "Benchmarker",
    "Budget",
    "Config",
    "KernelIdentity",
    "NoDeviceError",
    "ResultsStore",
    "SearchContext",
    "Space",
    "Status",
    "StoreError",
    "Strategy",
    "Timing",
    "Trial",
    "TuningError",
    "autotune",
    "heuristics",
    "next_power_of_2",
    "open_store",
    "patch_triton",
    "register_strategy",
]
