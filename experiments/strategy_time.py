"""A strategy's CPU time per proposed config on the corpus's largest space (17,956 configs), this
tunekit against another installed one, side by side: each seed's tuning runs in a fresh process
of each, the two alternating, so that both see the same machine at nearly the same moment.

    python experiments/strategy_time.py --seeds 5 [--against SITE] [--strategy default] [--out FILE]
        [--corpus MANIFEST] [--space NAME] [--against-strategy NAME] [--this-name A --against-name B]
        [--options JSON] [--against-options JSON]

``SITE`` is a folder a tunekit wheel was installed into (``pip install --no-deps --target SITE
tunekit-....whl``), e.g. one built at an earlier commit; without it only this tunekit is timed.
Prints each tuning's milliseconds per config, the medians and their ratio, and in how many tunings
the two measured the same sequence of times (a change that only saves time must propose the same
configs; two configs of equal recorded times would look the same). ``--space`` and
``--against-strategy`` check that two strategies propose the same configs on another space
(``--strategy listed_steps:ListedStepsDefault --against-strategy default``). ``--against-strategy``
or ``--against-options`` without ``--against`` time two strategies, or one with two sets of
options, of this tunekit side by side (``--against-options '{"alignment": false}'``: what one
option costs).

Each timed tuning is the first on its Space in its process (a tuning of the corpus's smallest
space warms the imports first): what a tunekit makes once per Space, it pays there.
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


def timed_and_warm_up(corpus: str, space: str | None = None) -> tuple[str, str]:
    """The space to time (``space``, or the corpus's largest) and the smallest other one, whose
    tuning warms the imports first."""
    sys.path.insert(0, str(HERE))
    from leave_family_out import _spaces

    spaces = _spaces(corpus)
    timed = space or max(spaces, key=lambda name: len(spaces[name]))
    others = [name for name in spaces if name != timed]
    if not others:
        raise SystemExit(f"{corpus} has one space: the imports are warmed on another than the timed one")
    return timed, min(others, key=lambda name: len(spaces[name]))


def _worker(corpus: str, space: str | None, strategy: str, options: str, seed: int, budget: int) -> None:
    """One tuning in this process; prints its line as JSON."""
    sys.path.insert(0, str(HERE))
    from leave_family_out import _tuning

    import tunekit

    timed, smallest = timed_and_warm_up(corpus, space)
    _tuning(corpus, smallest, strategy, strategy, options, seed, 10)  # the imports, untimed
    line = _tuning(corpus, timed, strategy, strategy, options, seed, budget)
    print(json.dumps({"space": timed, "tunekit": tunekit.__file__, "times_ms": line["times_ms"],
                      "ms_per_config": 1e3 * line["cpu_seconds"] / len(line["times_ms"])}))


def _run(site: str | None, corpus: str, space: str | None, strategy: str, options: str, seed: int,
         budget: int) -> dict:
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [site, env.get("PYTHONPATH")]))
    command = [sys.executable, __file__, "--worker", "--corpus", corpus, "--strategy", strategy,
               "--options", options, "--seed", str(seed), "--budget", str(budget), *(["--space", space] if space else [])]
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=HERE.parent, check=False)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(HERE / "corpus" / "v1.json"))
    parser.add_argument("--space", help="a space of the corpus (default: its largest)")
    parser.add_argument("--strategy", default="default")
    parser.add_argument("--against-strategy", help="the other side's strategy (default: --strategy)")
    parser.add_argument("--options", default="{}", help="JSON: the strategy's options")
    parser.add_argument("--against-options", help="JSON: the other side's options (default: --options)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--against", help="a folder another tunekit is installed in")
    parser.add_argument("--this-name", default="this", help="what to call this side (a commit, an option)")
    parser.add_argument("--against-name", default="against", help="what to call the other side")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.corpus, args.space, args.strategy, args.options, args.seed, args.budget)
        return
    two_sides = bool(args.against or args.against_strategy or args.against_options)
    if two_sides and args.this_name == args.against_name:
        parser.error(f"--this-name and --against-name are both {args.this_name!r}: the two sides need two names")
    sides = {args.this_name: (None, args.strategy, args.options)}
    if two_sides:
        sides[args.against_name] = (args.against, args.against_strategy or args.strategy,
                                    args.against_options or args.options)
    lines: dict[str, list[dict]] = {side: [] for side in sides}
    for seed in range(args.seeds):
        for side, (site, strategy, options) in sides.items():
            lines[side].append(_run(site, args.corpus, args.space, strategy, options, seed, args.budget))
            print(f"seed {seed} {side}: {lines[side][-1]['ms_per_config']:.1f} ms per config", flush=True)
    medians = {side: statistics.median(line["ms_per_config"] for line in found) for side, found in lines.items()}
    first = next(iter(lines.values()))[0]
    print(f"{first['space']}, {args.budget} evaluations: median "
          + ", ".join(f"{medians[side]:.1f} ms per config ({side}: {sides[side][1]} {sides[side][2]}, "
                      f"{lines[side][0]['tunekit']})"
                      for side in sides))
    same = None
    if two_sides:
        this, against = lines[args.this_name], lines[args.against_name]
        same = [a["times_ms"] == b["times_ms"] for a, b in zip(this, against)]
        print(f"ratio {args.this_name} / {args.against_name} {medians[args.this_name] / medians[args.against_name]:.3f}; "
              f"the same sequence of measured times in {sum(same)} of {len(same)} tunings")
    if args.out:
        sys.path.insert(0, str(HERE))
        from leave_family_out import _processor

        args.out.write_text(json.dumps({"machine": platform.node(), "processor": _processor(),
                                        "space": first["space"], "budget": args.budget,
                                        "strategies": {side: [strategy, json.loads(options)]
                                                       for side, (_, strategy, options) in sides.items()},
                                        "ms_per_config": {side: [line["ms_per_config"] for line in found]
                                                          for side, found in lines.items()},
                                        "medians": medians, "same_times": same}, indent=1) + "\n")


if __name__ == "__main__":
    main()
