"""What ``default``'s start costs a live tuning when it waits for every one of its trials, against
going on without those the tuning says are late (``Feed.overdue``), simulated on recorded spaces
with live compile times.

A live tuning keeps configs in flight; ``default``'s space-filling start (10 configs) and its warm
start hold every other pick until their trials are told, so one compile held until the compile
timeout kept the other workers idle (13.9 s of a 28 s tuning on an H100 host). A live tuning now
says the configs in flight are late once no compile has finished for three times its compiles'
mean seconds (``TuningSession._overdue_after``), and the start goes on without them. Here
``tunekit.testing.live`` simulates the live pipeline (16 compile workers, 18 in flight, one
process timing) with tunekit's ``Search`` and ``default`` as it ships: each config's compile takes
seconds drawn from the live H100 GEMM tunings' compiles (``pace_simulation.drawn_compiles``, the
share cut off by the timeout included), its time is the recorded space's, and timing it keeps the
process busy ``--busy`` seconds. Both variants of a seed draw the same compile seconds per config.
Replays never say a config is late: what they measure is unchanged.

Per space it prints, over the seeds, the median of each variant's seconds to reach within 5 % and
2 % of the space's optimum (runs that never did count as the tuning's end) and to end the tuning,
and the median of the paired ratios (late ones told over none told); then the same over every space. The spaces are corpus v2's
H200 recordings, one per kernel family, none chosen on this rule.

    TUNEKIT_SHARED_SPACES=../shared/spaces python experiments/straggler_simulation.py [--seeds 10]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SPACES = ["h200/matmul-square", "h200/matmul-decode", "h200/softmax-wide", "h200/rmsnorm-hidden_4k",
          "h200/attention-prefill_4k", "h200/matmul_splitk-decode", "h200/matmul_hopper-square",
          "h200/conv2d-b32_56x56_c64", "h200/cross_entropy-rows1k_vocab256k", "h200/fp8_gemm-square",
          "h200/fused_moe-prefill_e128", "h200/grouped_gemm-prefill_g8", "h200/layernorm_backward-rows8k_n8k",
          "h200/causal_conv1d-b8_l2k_d2560", "h200/gemv-n4k_k4k", "h200/stencil2d-2k_square",
          "h200/w4a16_gemm-prefill_m2k"]
WITHIN = (0.05, 0.02)
MEASURES = [f"to {100 * share:g} %" for share in WITHIN] + ["all evaluations"]


def seconds_to_within(steps, optimum_ms: float, end_seconds: float) -> list[float]:
    """The simulated second at which the best time first came within each share of ``WITHIN``
    of the optimum (``end_seconds`` where it never did), and ``end_seconds``."""
    reached = []
    for share in WITHIN:
        at = next((step.seconds for step in steps if step.best_ms <= (1 + share) * optimum_ms), end_seconds)
        reached.append(at)
    return reached + [end_seconds]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--evals", type=int, default=100)
    parser.add_argument("--busy", type=float, default=0.05, help="seconds the timing process spends per timed config")
    parser.add_argument("--spaces", nargs="+", default=SPACES)
    args = parser.parse_args()

    from leave_family_out import _spaces
    from pace_simulation import STORES, compile_timeout, drawn_compiles, recorded_compiles

    from tunekit.strategy import make_strategy
    from tunekit.testing.live import simulate_live_tuning
    from tunekit.trial import Status, Timing, Trial

    compiles, cut = recorded_compiles(STORES)
    cut_share = cut / (cut + len(compiles))
    print(f"compiles: {len(compiles)} recorded, {100 * cut_share:.1f} % cut off by the timeout; 16 workers, 18 in "
          f"flight, {args.evals} evaluations, {args.busy} s busy per timed config, {args.seeds} seeds")
    corpus = _spaces(str(HERE / "corpus" / "v2.json"))
    variants = {"waits for all": False, "late ones told": True}
    ratios_everywhere: dict[str, list[float]] = {measure: [] for measure in MEASURES}
    for name in args.spaces:
        recorded = corpus[name]
        space, optimum = recorded.space(), recorded.optimum_ms

        def trial_of(config, recorded=recorded) -> Trial:
            record = recorded.lookup(config)
            assert record is not None, "the Space holds the recorded configs alone"
            if not record.ok:
                return Trial(config, record.status, error="failed when recorded")
            return Trial(config, Status.OK, Timing(record.time_ms, record.time_ms, record.time_ms))

        reached: dict[str, list[list[float]]] = {variant: [] for variant in variants}
        for seed in range(args.seeds):
            for variant, overdue in variants.items():
                tuning = simulate_live_tuning(
                    make_strategy("default"), space, drawn_compiles(seed, compiles, cut_share), trial_of, args.busy,
                    paced=True, workers=16, batch=18, evals=min(args.evals, len(space)), seed=seed,
                    timeout=compile_timeout, key=recorded.key(), overdue=overdue)
                reached[variant].append(seconds_to_within(tuning.result.steps, optimum, tuning.seconds))
        line = [f"{name} ({len(space)} configs):"]
        for index, measure in enumerate(MEASURES):
            before = [r[index] for r in reached["waits for all"]]
            after = [r[index] for r in reached["late ones told"]]
            ratios = [a / b for a, b in zip(after, before) if b > 0]
            ratios_everywhere[measure] += ratios
            line.append(f"{measure}: {statistics.median(before):.1f} s -> {statistics.median(after):.1f} s, "
                        f"paired median {statistics.median(ratios):.3f};")
        print(" ".join(line), flush=True)
    for measure, ratios in ratios_everywhere.items():
        ratios.sort()
        print(f"every space, {measure}: paired ratio median {statistics.median(ratios):.3f}, "
              f"geometric mean {math.exp(statistics.mean(math.log(r) for r in ratios)):.3f}, "
              f"quartiles {ratios[len(ratios) // 4]:.3f} / {ratios[3 * len(ratios) // 4]:.3f}, "
              f"faster in {sum(r < 1 for r in ratios)} and slower in {sum(r > 1 for r in ratios)} of {len(ratios)}")


if __name__ == "__main__":
    main()
