"""Forest features beyond the Space's encoding and alignment, for screening with the protocol
(``leave_family_out.py``; a design names ``"strategy": "feature_variants:SizeProductsDefault"``).

``SizeProductsDefault`` is ``DefaultSearch`` whose forests (this key's, the prior's, the failure
forest) also see, for each pair of meta-parameters whose values are positive integers (sizes;
not Triton's compile options), the log2 of their product: a block's threads (``block_size_x x
block_size_y``), a tile's area, a block's extent with its per-thread tile (``block_size_x x
tile_size_x``). A tree that splits on each size alone needs several splits to single out a
product. Proposed from the convolution spaces of Kernel Tuner's corpus, where ``default`` ends
more than 2 % from the optimum in 17 % of its runs (``results/size-products/``). Domains of one
value are taken too, so some features are shifted copies of one size's log or constants. Pairwise products of the parameters were
tried once before as features of ``default``'s forest, on the six spaces of
``learned_search.py``'s ``SELECTION``, and not kept.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from tunekit.perfmodels import RandomForest
from tunekit.perfmodels.base import KeyLike
from tunekit.strategies.default import DefaultSearch

from tunekit.config import COMPILE_OPTIONS
from tunekit.space import Space

__all__ = ["SizeProductsDefault", "SizeProductsForest", "VaryingSizeProductsDefault", "VaryingSizeProductsForest",
           "size_columns"]


def size_columns(space: Space, least_values: int = 1) -> list[tuple[int, tuple[np.ndarray, np.ndarray]]]:
    """The encoding's columns of meta-parameters whose values are all positive integers (not
    compile options, not booleans) and number ``least_values`` or more, each with its domain's
    encoded values, sorted, and their values' log2 in the same order."""
    columns = []
    for column, (name, domain) in enumerate(space.domains.items()):
        if name in COMPILE_OPTIONS or len(domain) < max(1, least_values):
            continue
        if all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in domain):
            encoded = space.encode([{name: value} for value in domain])[:, column]
            order = np.argsort(encoded)
            columns.append((column, (encoded[order], np.log2(np.asarray(domain, dtype=np.float64))[order])))
    return columns


class SizeProductsForest(RandomForest):
    """``RandomForest`` whose features end with the log2 of every pair of sizes' product
    (``size_columns``); a value missing or outside a domain gives ``MISSING``'s -1."""

    #: ``size_columns``' ``least_values``: 1 takes domains of one value too (the form replayed first)
    least_values = 1

    def features_of_encoded(self, encoded: np.ndarray, key: KeyLike | None) -> np.ndarray:
        base = super().features_of_encoded(encoded, key)
        columns = getattr(self, "_size_columns", None)
        if columns is None:
            columns = self._size_columns = size_columns(self.space, self.least_values)
        logs = []
        for column, (known, log2) in columns:
            at = np.clip(np.searchsorted(known, encoded[:, column]), 0, len(known) - 1)
            logs.append(np.where(known[at] == encoded[:, column], log2[at], math.nan))
        pairs = [np.where(np.isnan(a + b), -1.0, a + b) for a, b in itertools.combinations(logs, 2)]
        return np.hstack([base, np.column_stack(pairs)]) if pairs else base


class SizeProductsDefault(DefaultSearch):
    """``DefaultSearch`` whose forests are ``SizeProductsForest`` (module docstring)."""

    name = "default-size-products"
    model_class = SizeProductsForest


class VaryingSizeProductsForest(SizeProductsForest):
    """``SizeProductsForest`` over the sizes whose domains hold two values or more: no shifted
    copy of one size's log (a product with a one-value domain), no constant."""

    least_values = 2


class VaryingSizeProductsDefault(DefaultSearch):
    """``DefaultSearch`` whose forests are ``VaryingSizeProductsForest``."""

    name = "default-varying-size-products"
    model_class = VaryingSizeProductsForest
