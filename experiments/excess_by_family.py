"""Which families a label's miss of the optimum comes from: for each family of a corpus, its share
of the label's summed log(best / optimum) after the budget, its geometric mean, and its runs that
end more than 2 % away, beside how many of those runs the search's early stop ended.

    python experiments/excess_by_family.py --runs RUNS --corpus experiments/corpus/v2.json --label LABEL

(``TUNEKIT_SHARED_SPACES`` as for ``leave_family_out.py``.) It reads a protocol's runs file
(``leave_family_out.py``'s ``runs.jsonl.gz``) and prints a table; it chooses nothing.
"""

from __future__ import annotations

import argparse
import collections
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus  # noqa: E402
from learned_search import geomean, read_runs  # noqa: E402

WITHIN = 1.02  # the protocol's "within 2 %"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", required=True, type=Path)
    parser.add_argument("--corpus", default="experiments/corpus/v2.json")
    parser.add_argument("--label", required=True)
    args = parser.parse_args()
    optimum, family, size = {}, {}, {}
    for entry, space in corpus.load(args.corpus, verify=False):
        optimum[entry.name], family[entry.name], size[entry.name] = space.optimum_ms, entry.family, len(space)
    by_family: dict[str, list[tuple[float, bool]]] = collections.defaultdict(list)
    nothing_ran = 0
    for run in read_runs(args.runs):
        if run["strategy"] != args.label or run["space"] not in optimum:
            continue
        times = [t for t in run["times_ms"] if t is not None and math.isfinite(t)]
        if not times:
            nothing_ran += 1
            continue
        # ended before the budget and before the space ran out: the search's early stop
        stopped = len(run["times_ms"]) < min(run["budget"], size[run["space"]])
        by_family[family[run["space"]]].append((min(times) / optimum[run["space"]], stopped))
    if not by_family:
        raise SystemExit(f"no runs of {args.label!r} on the corpus's spaces in {args.runs}")
    total = sum(math.log(ratio) for runs in by_family.values() for ratio, _ in runs)
    print(f"{args.label}: {sum(map(len, by_family.values()))} runs; summed log(best / optimum) {total:.3f}"
          + (f"; {nothing_ran} runs with no working config left out" if nothing_ran else ""))
    print("| family | runs | share of the log excess | geometric mean | over 2 % | of those, stopped early |")
    print("|---|---|---|---|---|---|")
    for name, runs in sorted(by_family.items(), key=lambda item: -sum(math.log(r) for r, _ in item[1])):
        excess = sum(math.log(ratio) for ratio, _ in runs)
        over = [stopped for ratio, stopped in runs if ratio > WITHIN]
        print(f"| {name} | {len(runs)} | {excess / total if total else 0:.2f} | {geomean(r for r, _ in runs):.4f} "
              f"| {len(over)} | {sum(over)} |")


if __name__ == "__main__":
    main()
