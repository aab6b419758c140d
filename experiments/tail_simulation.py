"""What a live tuning gains, and what it loses, by leaving out its last configs when their
compiles are late, against waiting for them, simulated on recorded spaces with live compile times.

At the end of an evaluation budget the search asks for nothing more, and a live tuning used to
wait for every config in flight: on an H100 host two of three GEMM tunings spent their last 5.5 s
waiting for compiles that the compile timeout then cut
(``benchmarks/results/h100-overdue-2026-12-06/``). A live tuning now leaves those configs out,
unmeasured, once it says they are late (``Feed.overdue`` returns True: the search asked for all it
will, and has a config that works). The simulation is ``straggler_simulation.py``'s (16 compile
workers, 18 in flight at most, the pace on, the late rule on in both arms; compile seconds drawn
per config from the live H100 GEMM compiles; the recording's trials; ``--busy`` seconds per timed
config and ``--strategy-seconds`` per strategy call, fixed, so a rerun prints the same), on the
same 17 H200 recordings of corpus v2, one per kernel family. Per tuning it pairs the two arms,
which are the same until the tail: the seconds to the tuning's end and to reach within 5 % and 2 %
of the optimum (runs that never did count as the end), and the best time found over the optimum
at the end: what leaving configs out lost, where one of them would have been the fastest.

The simulation draws compile seconds at random for each config, so a config that compiles slowly
is no more or less likely to be fast there. ``--near-optimal-compiles`` checks that on the
recordings instead: over every H200 space of corpus v2 that recorded compile times, how many
configs within 2 % of the optimum took more than 3 times the space's mean compile (the late rule's
factor), the ones that leaving late configs out could lose.

    TUNEKIT_SHARED_SPACES=../shared/spaces python experiments/tail_simulation.py [--seeds 10]
    TUNEKIT_SHARED_SPACES=../shared/spaces python experiments/tail_simulation.py --near-optimal-compiles
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from straggler_simulation import (  # noqa: E402
    MEASURES, seconds_to_within, simulated_tuning, simulation_arguments, summary)


def near_optimal_compiles(corpus: dict, within: float = 0.02, factor: float = 3.0) -> None:
    """Per H200 space with compile times: configs within ``within`` of the optimum, and those of
    them whose compile took over ``factor`` times the space's mean compile."""
    import statistics

    near_all = slow_all = 0
    for name, recorded in sorted(corpus.items()):
        seconds = [record.compile_ms / 1e3 for record in recorded.records if record.compile_ms]
        if not name.startswith("h200/") or not seconds:
            continue
        mean = statistics.mean(seconds)
        near = [record.compile_ms / 1e3 for record in recorded.records
                if record.status.value == "ok" and record.time_ms <= (1 + within) * recorded.optimum_ms]
        slow = [value for value in near if value > factor * mean]
        near_all, slow_all = near_all + len(near), slow_all + len(slow)
        print(f"{name}: mean compile {mean:.2f} s, largest {max(seconds):.1f} s; {len(near)} configs within "
              f"{100 * within:g} %, compiled in {min(near):.2f} to {max(near):.2f} s; over {factor:g} x the mean: "
              f"{len(slow)}")
    print(f"over every space: {slow_all} of {near_all} configs within {100 * within:g} % compiled in over "
          f"{factor:g} x their space's mean")


def main() -> None:
    parser = simulation_arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--near-optimal-compiles", action="store_true",
                        help="only check how long the recordings' near-optimal configs took to compile")
    args = parser.parse_args()

    from leave_family_out import _spaces

    if args.near_optimal_compiles:
        near_optimal_compiles(_spaces(str(HERE / "corpus" / "v2.json")))
        return
    from pace_simulation import live_compiles

    from tunekit.search import StopReason

    compiles, cut_share = live_compiles()
    print(f"compiles: {len(compiles)} recorded, {100 * cut_share:.1f} % cut off by the timeout; 16 workers, 18 in "
          f"flight at most, the pace and the late rule on, {args.evals} evaluations, {args.busy} s busy per timed "
          f"config, {args.strategy_seconds} s per strategy call, {args.seeds} seeds")
    corpus = _spaces(str(HERE / "corpus" / "v2.json"))
    ratios: dict[str, list[float]] = {measure: [] for measure in MEASURES}
    left_out, worse, worse_by = 0, 0, []
    tunings = 0
    for name in args.spaces:
        recorded = corpus[name]
        optimum = recorded.optimum_ms

        def tuning(seed: int, leave_late_out: bool):
            return simulated_tuning(recorded, seed, compiles, cut_share, args, overdue=True,
                                    leave_late_out=leave_late_out)

        line = [f"{name}:"]
        for seed in range(args.seeds):
            waited, cut_tail = tuning(seed, False), tuning(seed, True)
            tunings += 1
            before = seconds_to_within(waited.result.steps, optimum, waited.seconds)
            after = seconds_to_within(cut_tail.result.steps, optimum, cut_tail.seconds)
            for index, measure in enumerate(MEASURES):
                ratios[measure].append(after[index] / before[index])
            best_waited = min(step.best_ms for step in waited.result.steps[-1:]) / optimum
            best_cut = min(step.best_ms for step in cut_tail.result.steps[-1:]) / optimum
            late = cut_tail.result.stopped_because is StopReason.LATE
            left_out += late
            if best_cut > best_waited:
                worse += 1
                worse_by.append(best_cut / best_waited)
            line.append(f"{waited.seconds:.1f}->{cut_tail.seconds:.1f}{'*' if late else ''}")
        print(" ".join(line) + "  (seconds to the end, waiting -> leaving the late last out; * left some out)",
              flush=True)
    print(f"left late configs out at the end of {left_out} of {tunings} tunings")
    for measure in MEASURES:
        print(f"  {measure}: {summary(ratios[measure])}")
    print(f"  best at the end worse than waiting's in {worse} of {tunings} tunings"
          + (f", by {', '.join(f'{w:.4f}' for w in sorted(worse_by))}" if worse_by else ""))


if __name__ == "__main__":
    main()
