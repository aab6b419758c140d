"""How a live tuning's pace (``TuningSession._in_flight_wanted``: the configs it keeps in flight)
costs wall time, simulated with the compile times live GEMM tunings measured.

A live tuning compiles the configs in flight in ``--workers`` worker processes and times them
one at a time in its own process, the first compiled first; jobs go to free workers between
timings. ``tunekit.testing.live`` simulates that on a clock with tunekit's own ``Search``: here
each config's compile takes a time drawn from the compiles of the stores in
``experiments/results/in-flight/live-call-2-tunings.tar`` (an H100 host, 16 workers, the 984-config
GEMM space; those that hit the compile timeout take ``SLOW_COMPILE_SECONDS`` unless the timeout
cuts them first), each timed config keeps the
process busy ``--busy`` seconds (check, benchmark, the search's tell and ask), and a compile past
the session's adaptive timeout (none until 8 compiles succeeded, then 20 times their median, at
least 10 s, asked again as compiles finish) is cut there. It prints, per rule
and busy time, the paced tuning's wall time over one that keeps its whole batch in flight
(median, 90th percentile and largest over the seeds) and the configs in flight at the asks of
the tuning's second half. It does not credit what fewer in flight buy: picks that know more
trials (``README.md`` in ``experiments/results/in-flight/``: replays at 6 and 18 in flight).

    python experiments/pace_simulation.py [--seeds 20] [--evals 100] [--workers 16] [--batch 18]
"""

from __future__ import annotations

import argparse
import gzip
import math
import random
import statistics
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace

from tunekit import ResultsStore
from tunekit.config import config_json
from tunekit.session import COMPILED_AHEAD, PACE_AFTER, PACE_WINDOW, TuningSession
from tunekit.space import Space
from tunekit.strategies import Exhaustive
from tunekit.testing.live import simulate_live_tuning
from tunekit.trial import Status, Timing, Trial

STORES = Path(__file__).resolve().parent / "results" / "in-flight" / "live-call-2-tunings.tar"


def recorded_compiles(tar: Path) -> tuple[list[float], int]:
    """The compile seconds of every compiled config of the live tunings' stores, and how many
    compiles were cut off by the timeout."""
    seconds, cut = [], 0
    with tempfile.TemporaryDirectory() as folder, tarfile.open(tar) as archive:
        archive.extractall(folder, filter="data")
        for packed in sorted(Path(folder).rglob("*.db.gz")):
            store_path = packed.with_suffix("")
            store_path.write_bytes(gzip.decompress(packed.read_bytes()))
            for row in ResultsStore(store_path, read_only=True).rows():
                if row["source"] != "measured":
                    continue
                if row["status"] == Status.TIMEOUT.value and row["compile_seconds"]:
                    cut += 1
                elif row["compile_seconds"]:
                    seconds.append(row["compile_seconds"])
    return seconds, cut


def live_compiles() -> tuple[list[float], float]:
    """The live tunings' compile seconds (``STORES``), and the share of compiles the timeout cut."""
    seconds, cut = recorded_compiles(STORES)
    return seconds, cut / (cut + len(seconds))


def median_plus_two(session: SimpleNamespace) -> int | None:
    """The first Little's-law rule, replaced: the median compile (of all compiles seen)."""
    here, busy = session._compile_seconds_here, session._busy_seconds
    if len(here) < PACE_AFTER or len(busy) < PACE_AFTER:
        return None
    return math.ceil(statistics.median(here) / max(statistics.median(busy[-PACE_WINDOW:]), 1e-3)) + COMPILED_AHEAD


RULES = {"shipped (2 x mean + 2)": TuningSession._in_flight_wanted, "median + 2": median_plus_two}


#: What a compile that the live tunings' timeout cut would have taken: in the H200 recording of
#: the GEMM space (corpus v2's ``h200/matmul-square``) 12 of 984 compiles took over a minute, the
#: longest 138 s. The timeout cuts it sooner once it stands.
SLOW_COMPILE_SECONDS = 120.0


def drawn_compiles(seed: int, compiles: list[float], cut_share: float,
                   per_config: bool = False) -> Callable[[object], float]:
    """Each config's compile seconds, drawn once per config: a recorded compile's seconds, or, in
    ``cut_share`` of them, ``SLOW_COMPILE_SECONDS``. Drawn in the order the configs first
    compile, or with ``per_config`` from the seed and the config alone (the same config draws the
    same seconds in tunings that compile it at another turn)."""
    rng = random.Random(seed)
    drawn: dict[str, float] = {}

    def compile_seconds(config) -> float:
        name = config_json(config)
        if name not in drawn:
            draws = random.Random(f"{seed}:{name}") if per_config else rng
            drawn[name] = SLOW_COMPILE_SECONDS if draws.random() < cut_share else draws.choice(compiles)
        return drawn[name]

    return compile_seconds


def compile_timeout(seen: Sequence[float]) -> float | None:
    """The session's adaptive compile timeout (``TuningSession._adaptive_compile_timeout``), given
    the seconds of the compiles that succeeded so far: none until 8, then 20 times their median,
    at least 10 s."""
    return TuningSession._adaptive_compile_timeout(SimpleNamespace(_compile_seconds_seen=list(seen)))


def tuning(rule, seed: int, compiles: list[float], cut_share: float, busy: float, workers: int, batch: int,
           evals: int) -> tuple[float, list[int]]:
    """One simulated tuning (``tunekit.testing.live``) paced by ``rule`` (None: the whole batch in
    flight): its seconds, and the configs in flight at each ask. Each config's compile takes a
    recorded compile's seconds, or, in ``cut_share`` of them, ``SLOW_COMPILE_SECONDS`` unless the
    adaptive timeout cuts it first."""
    shipped = TuningSession._in_flight_wanted
    if rule is not None:
        TuningSession._in_flight_wanted = rule  # type: ignore[method-assign]
    try:
        simulated = simulate_live_tuning(
            Exhaustive(), Space(a=list(range(40)), b=list(range(40))), drawn_compiles(seed, compiles, cut_share),
            lambda config: Trial(config, Status.OK, Timing(1.0, 1.0, 1.0)), busy, paced=rule is not None,
            workers=workers, batch=batch, evals=evals, seed=seed, timeout=compile_timeout)
    finally:
        TuningSession._in_flight_wanted = shipped  # type: ignore[method-assign]
    return simulated.seconds, simulated.in_flight_at_asks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--evals", type=int, default=100)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--batch", type=int, default=18)
    parser.add_argument("--busy", type=float, nargs="+", default=[0.01, 0.05, 0.1, 0.2, 0.5])
    args = parser.parse_args()
    compiles, cut = recorded_compiles(STORES)
    cut_share = cut / (cut + len(compiles))
    print(f"{len(compiles)} recorded compiles: median {statistics.median(compiles):.3f} s, mean "
          f"{statistics.mean(compiles):.3f} s; {cut} cut off by the timeout ({100 * cut_share:.1f} %)")
    print(f"{args.workers} workers, {args.batch} in flight at most, {args.evals} evaluations, {args.seeds} seeds")
    for busy in args.busy:
        for name, rule in RULES.items():
            ratios, flights = [], []
            for seed in range(args.seeds):
                paced, asks = tuning(rule, seed, compiles, cut_share, busy, args.workers, args.batch, args.evals)
                whole, _ = tuning(None, seed, compiles, cut_share, busy, args.workers, args.batch, args.evals)
                ratios.append(paced / whole)
                flights += asks[len(asks) // 2:]
            ratios.sort()
            print(f"busy {busy:.2f} s per timed config, {name}: wall over the whole batch's median "
                  f"{statistics.median(ratios):.3f}, 90th percentile {ratios[int(0.9 * (len(ratios) - 1))]:.3f}, "
                  f"largest {ratios[-1]:.3f}; in flight at the second half's asks: median "
                  f"{statistics.median(flights):g}")


if __name__ == "__main__":
    main()
