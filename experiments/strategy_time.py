"""A strategy's CPU time per proposed config on the corpus's largest space (17,956 configs), this
tunekit against another installed one, side by side: each seed's tuning runs in a fresh process
of each, the two alternating, so that both see the same machine at nearly the same moment.

    python experiments/strategy_time.py --seeds 5 [--against SITE] [--strategy default] [--out FILE]

``SITE`` is a folder a tunekit wheel was installed into (``pip install --no-deps --target SITE
tunekit-....whl``), e.g. one built at an earlier commit; without it only this tunekit is timed.
Prints each tuning's milliseconds per config, the medians and their ratio, and in how many tunings
the two proposed the same configs (a change that only saves time must propose the same ones).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _worker(corpus: str, strategy: str, seed: int, budget: int) -> None:
    """One tuning in this process; prints its line as JSON."""
    sys.path.insert(0, str(HERE))
    from leave_family_out import _spaces, _tuning

    import tunekit

    spaces = _spaces(corpus)
    largest = max(spaces, key=lambda name: len(spaces[name]))
    _tuning(corpus, largest, strategy, strategy, "{}", seed, 10)  # imports and the Space, untimed
    line = _tuning(corpus, largest, strategy, strategy, "{}", seed, budget)
    print(json.dumps({"space": largest, "tunekit": tunekit.__file__, "times_ms": line["times_ms"],
                      "ms_per_config": 1e3 * line["cpu_seconds"] / len(line["times_ms"])}))


def _run(site: str | None, corpus: str, strategy: str, seed: int, budget: int) -> dict:
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [site, env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, __file__, "--worker", "--corpus", corpus, "--strategy", strategy,
                          "--seed", str(seed), "--budget", str(budget)],
                         env=env, check=True, capture_output=True, text=True, cwd=HERE.parent).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(HERE / "corpus" / "v1.json"))
    parser.add_argument("--strategy", default="default")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--against", help="a folder another tunekit is installed in")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.corpus, args.strategy, args.seed, args.budget)
        return
    sides = {"this": None, **({"against": args.against} if args.against else {})}
    lines: dict[str, list[dict]] = {side: [] for side in sides}
    for seed in range(args.seeds):
        for side, site in sides.items():
            lines[side].append(_run(site, args.corpus, args.strategy, seed, args.budget))
            print(f"seed {seed} {side}: {lines[side][-1]['ms_per_config']:.1f} ms per config", flush=True)
    medians = {side: statistics.median(line["ms_per_config"] for line in found) for side, found in lines.items()}
    print(f"{lines['this'][0]['space']}, {args.strategy}, {args.budget} evaluations: median "
          + ", ".join(f"{medians[side]:.1f} ms per config ({side}: {lines[side][0]['tunekit']})" for side in sides))
    same = None
    if "against" in sides:
        same = [a["times_ms"] == b["times_ms"] for a, b in zip(lines["this"], lines["against"])]
        print(f"ratio this / against {medians['this'] / medians['against']:.3f}; the same configs proposed in "
              f"{sum(same)} of {len(same)} tunings")
    if args.out:
        sys.path.insert(0, str(HERE))
        from leave_family_out import _processor

        args.out.write_text(json.dumps({"machine": platform.node(), "processor": _processor(),
                                        "strategy": args.strategy, "budget": args.budget,
                                        "ms_per_config": {side: [line["ms_per_config"] for line in found]
                                                          for side, found in lines.items()},
                                        "medians": medians, "same_configs": same}, indent=1) + "\n")


if __name__ == "__main__":
    main()
