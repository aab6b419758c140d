"""Where ``DefaultSearch(warm_scaled=True)`` changes the warm start, and how fast the configs it
adds are: for each space of the corpus whose kernel is recorded at other shapes, with the store
holding those shapes and the strategy seeded as the protocol's transfer replays seed it (seeds 0
to N-1), the warm-start configs the option brings in, in how many seeds, and each one's recorded
time over the space's optimum. From the recordings alone; about a minute for 5 seeds.

    python experiments/warm_scaled_fired.py --corpus experiments/corpus/v2.json --seeds 5
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from leave_family_out import _spaces
from tunekit.strategies import DefaultSearch

from tunekit.budget import Budget
from tunekit.compare import same_kernel_elsewhere
from tunekit.config import config_to_dict
from tunekit.recorded import RecordedSpace
from tunekit.strategy import SearchContext, derive_seed
from tunekit.trial import Trial


def warm_start(scaled: bool, recorded: RecordedSpace, history: tuple[Trial, ...], seed: int) -> list[int]:
    """The Space positions of the configs ``default`` measures first at ``recorded`` with
    ``history`` in the store, seeded as ``tunekit.compare.replay`` seeds it (the warm start alone:
    not in turn with the spread, nor with ``warm_robust``'s turn, as when ``warm_scaled`` was judged)."""
    strategy = DefaultSearch(warm_scaled=scaled, warm_interleaved=False, warm_robust=False)
    space = recorded.space()
    strategy.start(SearchContext(space, Budget(evals=200), recorded.key(), derive_seed(seed, recorded.digest),
                                 history))
    return [space.position(config) for config in strategy.ask(strategy.warm_start)]


def speed(recorded: RecordedSpace, position: int) -> str:
    record = recorded.lookup(recorded.space().configs()[position])
    if record is None:
        return "not recorded"
    return f"{record.time_ms / recorded.optimum_ms:.3f} x the optimum" if record.ok else "failed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parent / "corpus" / "v2.json")
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    spaces = _spaces(str(args.corpus))
    elsewhere = same_kernel_elsewhere(spaces)
    names = [name for name in sorted(spaces) if elsewhere[name]]
    fired = 0
    for name in names:
        recorded = spaces[name]
        history = tuple(trial for other in elsewhere[name] for trial in spaces[other].trials())
        added: Counter[int] = Counter()
        for seed in range(args.seeds):
            without = set(warm_start(False, recorded, history, seed))
            added.update(p for p in warm_start(True, recorded, history, seed) if p not in without)
        fired += bool(added)
        for position, seeds in sorted(added.items()):
            config = config_to_dict(recorded.space().configs()[position])
            print(f"{name}: {config} in {seeds} of {args.seeds} seeds, {speed(recorded, position)}")
    print(f"the option changed the warm start on {fired} of {len(names)} spaces in at least one of {args.seeds} seeds")


if __name__ == "__main__":
    main()
