"""What ``default``'s start costs a live tuning when it waits for every one of its trials, against
going on without those the tuning says are late (``Feed.overdue``), simulated on recorded spaces
with live compile times.

A live tuning keeps configs in flight; ``default``'s space-filling start (10 configs) and its warm
start hold every other pick until their trials are told, so one compile held until the compile
timeout kept the other workers idle (13.9 s of a 28 s tuning on an H100 host). A live tuning now
says the configs in flight are late once no compile has finished for ``OVERDUE_FACTOR`` times the
mean seconds of its compiles, at least ``OVERDUE_FLOOR_SECONDS`` (``TuningSession._overdue_after``),
and the start goes on without them. Here ``tunekit.testing.live`` simulates the live pipeline (16
compile workers, 18 in flight at most, the pace on, one process timing) with tunekit's ``Search``
and ``default`` as it ships: each config's compile takes seconds drawn from the live H100 GEMM
tunings' compiles (``pace_simulation.drawn_compiles``, the share cut off by the timeout included),
drawn from the seed and the config alone, so that every variant of a seed draws the same seconds
for a config; its trial is the recording's (``ReplayEvaluator.trial``); timing it keeps the process busy ``--busy``
seconds, and each strategy call costs ``--strategy-seconds`` (not its real time: the runs do not
depend on the machine's load). Replays never say a config is late: what they measure is unchanged.
Both arms wait for the tuning's last configs however late (``leave_late_out=False``): what leaving
those out does is ``tail_simulation.py``'s question.

Each ``--rules`` entry ``FACTOR:FLOOR`` is a variant with those two constants (by default what
ships alone); the per-space lines show the first. Per variant it prints the paired ratios of its seconds over those of waiting for every
trial, to reach within 5 % and 2 % of the space's optimum (runs that never did count as the
tuning's end) and to end the tuning (100 evaluations, fewer where ``default`` stops early): over
every tuning, and over those where the variant said configs were late at any time (not only
while the start waited). The spaces are corpus v2's H200 recordings, one per kernel family, none chosen
on this rule.

    TUNEKIT_SHARED_SPACES=../shared/spaces python experiments/straggler_simulation.py [--seeds 10]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import numpy as np

from tunekit.metrics import first_reaching

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SPACES = ["h200/matmul-square", "h200/matmul-decode", "h200/softmax-wide", "h200/rmsnorm-hidden_4k",
          "h200/attention-prefill_4k", "h200/matmul_splitk-decode", "h200/matmul_hopper-square",
          "h200/conv2d-b32_56x56_c64", "h200/cross_entropy-rows1k_vocab256k", "h200/fp8_gemm-square",
          "h200/fused_moe-prefill_e128", "h200/grouped_gemm-prefill_g8", "h200/layernorm_backward-rows8k_n8k",
          "h200/causal_conv1d-b8_l2k_d2560", "h200/gemv-n4k_k4k", "h200/stencil2d-2k_square",
          "h200/w4a16_gemm-prefill_m2k"]
WITHIN = (0.05, 0.02)
MEASURES = [f"to {100 * share:g} %" for share in WITHIN] + ["to the end"]


def seconds_to_within(steps, optimum_ms: float, end_seconds: float) -> list[float]:
    """The simulated second at which the best time first came within each share of ``WITHIN``
    of the optimum (``end_seconds`` where it never did), and ``end_seconds``."""
    best = np.array([step.best_ms for step in steps])
    reached = [first_reaching(best, (1 + share) * optimum_ms) for share in WITHIN]
    return [steps[at - 1].seconds if at is not None else end_seconds for at in reached] + [end_seconds]


def simulated_tuning(recorded, seed: int, compiles: list[float], cut_share: float, args: argparse.Namespace,
                     strategy=None, **options):
    """One simulated live tuning of ``strategy`` (by default ``default`` as it ships) on
    ``recorded``: 16 workers, 18 in flight at most, the pace on, ``args.evals`` evaluations,
    compile seconds drawn per config from ``compiles`` (``cut_share`` of them slow), ``args.busy``
    and ``args.strategy_seconds``; ``options``: ``simulate_live_tuning``'s ``overdue``,
    ``leave_late_out`` and ``history``."""
    from pace_simulation import compile_timeout, drawn_compiles

    from tunekit.replay import ReplayEvaluator
    from tunekit.strategy import make_strategy
    from tunekit.testing.live import simulate_live_tuning

    space = recorded.space()
    return simulate_live_tuning(
        strategy or make_strategy("default"), space, drawn_compiles(seed, compiles, cut_share, per_config=True),
        ReplayEvaluator(recorded).trial, args.busy, paced=True, workers=16, batch=18,
        evals=min(args.evals, len(space)), seed=seed, timeout=compile_timeout, key=recorded.key(),
        strategy_seconds=args.strategy_seconds, **options)


def summary(ratios: list[float]) -> str:
    """The median, geometric mean, 5th and 95th percentiles of paired ratios, and how many are
    more than 10 % either side of 1."""
    if not ratios:
        return "none"
    ratios = sorted(ratios)
    percentile = lambda q: ratios[int(q * (len(ratios) - 1))]  # noqa: E731
    return (f"median {statistics.median(ratios):.3f}, geometric mean "
            f"{math.exp(statistics.mean(math.log(r) for r in ratios)):.3f}, 5th / 95th percentile "
            f"{percentile(0.05):.3f} / {percentile(0.95):.3f}; under 0.9 in {sum(r < 0.9 for r in ratios)}, "
            f"over 1.1 in {sum(r > 1.1 for r in ratios)} of {len(ratios)}")


def simulation_arguments(description: str) -> argparse.ArgumentParser:
    """The arguments ``simulated_tuning`` reads, and the spaces: both simulations' parser."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--evals", type=int, default=100)
    parser.add_argument("--busy", type=float, default=0.05, help="seconds the timing process spends per timed config")
    parser.add_argument("--strategy-seconds", type=float, default=0.02, help="simulated seconds per strategy call")
    parser.add_argument("--spaces", nargs="+", default=SPACES)
    return parser


def main() -> None:
    parser = simulation_arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--rules", nargs="+", default=None, help="FACTOR:FLOOR variants (default: what ships)")
    args = parser.parse_args()

    from leave_family_out import _spaces
    from pace_simulation import live_compiles

    import tunekit.session as session

    shipped = (session.OVERDUE_FACTOR, session.OVERDUE_FLOOR_SECONDS)
    rules = [tuple(map(float, rule.split(":"))) for rule in args.rules] if args.rules else [shipped]
    compiles, cut_share = live_compiles()
    print(f"compiles: {len(compiles)} recorded, {100 * cut_share:.1f} % cut off by the timeout; 16 workers, 18 in "
          f"flight at most, the pace on, {args.evals} evaluations, {args.busy} s busy per timed config, "
          f"{args.strategy_seconds} s per strategy call, {args.seeds} seeds; rules (factor, floor): {rules}")
    corpus = _spaces(str(HERE / "corpus" / "v2.json"))
    ratios: dict[tuple, dict[str, list[float]]] = {(rule, only): {m: [] for m in MEASURES}
                                                  for rule in rules for only in (False, True)}
    said_late: dict[tuple, int] = {rule: 0 for rule in rules}
    for name in args.spaces:
        recorded = corpus[name]
        optimum = recorded.optimum_ms

        def tuning(seed: int, overdue: bool):
            return simulated_tuning(recorded, seed, compiles, cut_share, args, overdue=overdue, leave_late_out=False)

        line = [f"{name}:"]
        for seed in range(args.seeds):
            waited = tuning(seed, False)
            before = seconds_to_within(waited.result.steps, optimum, waited.seconds)
            for rule in rules:
                session.OVERDUE_FACTOR, session.OVERDUE_FLOOR_SECONDS = rule
                try:
                    told = tuning(seed, True)
                finally:
                    session.OVERDUE_FACTOR, session.OVERDUE_FLOOR_SECONDS = shipped
                after = seconds_to_within(told.result.steps, optimum, told.seconds)
                said_late[rule] += bool(told.said_late_at)
                for index, measure in enumerate(MEASURES):
                    ratio = after[index] / before[index]
                    ratios[rule, False][measure].append(ratio)
                    if told.said_late_at:
                        ratios[rule, True][measure].append(ratio)
                if rule == rules[0]:
                    line.append(f"{before[0]:.1f}->{after[0]:.1f}{'*' if told.said_late_at else ''}")
        print(" ".join(line) + "  (seconds to 5 %, waiting for all -> the first rule; * said late)", flush=True)
    for rule in rules:
        print(f"rule factor {rule[0]:g}, floor {rule[1]:g} s: said configs were late in {said_late[rule]} of "
              f"{args.seeds * len(args.spaces)} tunings")
        for only in (False, True):
            for measure in MEASURES:
                print(f"  {'where said late' if only else 'every tuning'}, {measure}: "
                      f"{summary(ratios[rule, only][measure])}")


if __name__ == "__main__":
    main()
