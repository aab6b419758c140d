"""Performance models, scikit-learn estimators over encoded configs and shape features;
imported as ``tunekit.perfmodels``.

* ``PerfModel``: wraps any scikit-learn regressor (log time) and classifier (failure).
* ``RandomForest``: random forests for both, with the spread of the trees for exploration.
* ``SharedMemoryModel``: the shared memory compiles report, and which configs exceed the limit.

Each offers ``as_perf_model(key)``, the callable Triton's ``prune_configs_by`` takes.
"""

from .base import (PerfModel, alignment_columns, alignment_features, dtype_bytes, key_of, relative_to_fastest,
                   trials_from_rows)
from .forest import RandomForest
from .shared_memory import SharedMemoryModel

__all__ = ["PerfModel", "RandomForest", "SharedMemoryModel", "alignment_columns", "alignment_features",
           "dtype_bytes", "key_of", "relative_to_fastest", "trials_from_rows"]
