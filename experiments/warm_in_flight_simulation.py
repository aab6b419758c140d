"""What ``warm_variants.py``'s ``warm_in_flight`` (with the store, few configs in flight until
enough trials are told) costs or saves a live tuning in seconds, simulated with live compile
times: the replays count evaluations, where fewer configs in flight buy better picks; a live
tuning also pays for compiling fewer at once.

``straggler_simulation.simulated_tuning``'s live pipeline (16 compile workers, 18 in flight at
most, the pace on, one process timing, each config's compile seconds drawn from the live H100 GEMM
tunings' compiles by the seed and the config, so both arms of a seed draw the same seconds for a
config), on each space of corpus v2 whose kernel is recorded at other shapes, the store holding
those shapes' recordings (as the transfer replays do). Per space and seed it runs the design of
``--designs`` that ships and the candidate, and prints the paired ratios candidate / shipped of
the seconds to within 5 % of the optimum (the tuning's end where never) and to the end.

    TUNEKIT_SHARED_SPACES=../shared/spaces python experiments/warm_in_flight_simulation.py --seeds 2 --evals 60
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from straggler_simulation import seconds_to_within, simulated_tuning, simulation_arguments, summary  # noqa: E402

SHIPPED = "default-gp15-stalled50-c512-local-forest-believer-inflight18"
CANDIDATE = "default-gp15-stalled50-c512-local-forest-believer-inflight18-warm-cap3-until20"


def main() -> None:
    parser = simulation_arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--designs", type=Path, default=HERE / "corpus" / "designs-inflight18-warm-cap.json",
                        help=f"holds {CANDIDATE}")
    parser.add_argument("--candidate", default=CANDIDATE)
    parser.set_defaults(spaces=None)  # every space of a kernel recorded at other shapes
    args = parser.parse_args()

    from leave_family_out import _spaces
    from pace_simulation import live_compiles

    from tunekit.compare import same_kernel_elsewhere
    from tunekit.strategy import make_strategy

    shipped = json.loads((HERE / "corpus" / "designs-inflight18.json").read_text())[SHIPPED]
    candidate = json.loads(args.designs.read_text())[args.candidate]
    if candidate.get("batch") != shipped["batch"]:  # simulated_tuning keeps 18 in flight at most, as shipped's
        raise SystemExit(f"{args.candidate}: batch {candidate.get('batch')!r}, expected {shipped['batch']}")
    corpus = _spaces(str(HERE / "corpus" / "v2.json"))
    elsewhere = same_kernel_elsewhere(corpus)
    names = [name for name in sorted(corpus) if elsewhere[name]] if args.spaces is None else args.spaces
    compiles, cut_share = live_compiles()
    print(f"{len(names)} spaces, {args.seeds} seeds, {args.evals} evaluations, 16 workers, 18 in flight at most, "
          f"the pace on, {args.busy} s busy per timed config, {args.strategy_seconds} s per strategy call; "
          f"{args.candidate} over {SHIPPED}", flush=True)
    ratios: dict[str, list[float]] = {"to 5 %": [], "to the end": []}
    for name in names:
        recorded = corpus[name]
        history = [trial for other in elsewhere[name] for trial in corpus[other].trials()]
        line = [f"{name}:"]
        for seed in range(args.seeds):
            seconds = []
            for design in (shipped, candidate):
                tuning = simulated_tuning(recorded, seed, compiles, cut_share, args,
                                          make_strategy(design["strategy"], **design["options"]),
                                          history=history, overdue=True)
                to_5, _, to_end = seconds_to_within(tuning.result.steps, recorded.optimum_ms, tuning.seconds)
                seconds.append((to_5, to_end))
            (base_5, base_end), (cap_5, cap_end) = seconds
            ratios["to 5 %"].append(cap_5 / base_5)
            ratios["to the end"].append(cap_end / base_end)
            line.append(f"seed {seed}: to 5 % {base_5:.1f} -> {cap_5:.1f} s, to the end {base_end:.1f} -> {cap_end:.1f} s;")
        print(" ".join(line), flush=True)
    for measure, found in ratios.items():
        print(f"{args.candidate} / {SHIPPED}, {measure}: {summary(found)}")


if __name__ == "__main__":
    main()
