"""Performance models (scikit-learn estimators over encoded configs and shape features);
imported as ``tunekit.perfmodels``. The models themselves arrive with the learned-search issue;
until then this package holds nothing."""
