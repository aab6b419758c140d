"""Performance models, scikit-learn estimators over encoded configs and shape features;
imported as ``tunekit.perfmodels``.

* ``PerfModel``: wraps any scikit-learn regressor (log time) and classifier (failure).
* ``RandomForest``: random forests for both, with the spread of the trees for exploration.

Each offers ``as_perf_model(key)``, the callable Triton's ``prune_configs_by`` takes.
"""

from .base import PerfModel, dtype_bytes, key_of, trials_from_rows
from .forest import RandomForest

__all__ = ["PerfModel", "RandomForest", "dtype_bytes", "key_of", "trials_from_rows"]
