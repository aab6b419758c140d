"""``default`` as it was before a step followed the values' size (``Space.ordered_domains``):
its neighbours and steps taken in the order each domain lists its values, which for a Space made
from a config list (every recorded space) is the order the configs came in. For cross-validating
that fix against what it replaced:

    designs: {"default-listed-steps": {"strategy": "listed_steps:ListedStepsDefault"}}
"""

from __future__ import annotations

import copy
import dataclasses

from tunekit.strategies.default import DefaultSearch

from tunekit.space import Space
from tunekit.strategy import SearchContext


class _ListedOrder(Space):
    @property
    def ordered_domains(self) -> dict[str, tuple]:
        return self.domains


class ListedStepsDefault(DefaultSearch):
    """``DefaultSearch`` whose steps move through each domain in its listed order."""

    name = "default-listed-steps"

    def start(self, context: SearchContext) -> None:
        listed = copy.copy(context.space)  # shares the configs, index and encoding already made
        listed.__class__ = _ListedOrder
        # not the positions in the ordered domains, which differ here: the copy's own, made anew
        # (written into a shared cache, they would reorder the original Space's)
        listed._value_positions = ({False: context.space._value_positions[False]}
                                   if False in context.space._value_positions else {})
        super().start(dataclasses.replace(context, space=listed))
