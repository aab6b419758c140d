"""A fingerprint of the proposals of every strategy, for changes that must only save work: the
times 44 replayed tunings measure, in order, on four spaces of the corpus (its largest and three
H200 GEMM and convolution spaces): `default`, `lfbo`, `optuna`, `optuna-gp` and `rf`, 2 seeds each
(budget 120, `optuna-gp` 60), and `default` with the store on two of them. A second digest covers
configs in flight, which those replays never have: `default` with 18 in flight (as a live tuning
with 16 or more CPUs keeps them; before that change, this digest was of asks of 32 told together)
on the three GEMM and convolution spaces, 2 seeds, and with the store on two of them. Run it with two tunekits (``PYTHONPATH=SITE`` puts another installed one
first) and compare the digests; ``--out`` keeps every tuning's times, and ``--against`` names the
tunings whose times differ from another run's ``--out`` file (one written before the second
digest existed lacks its 10 tunings: "in one file only"). Before `987f671` the second depended on
the CPU (`4d881b5a503bfce6` on the Intel Xeon CPU machine of earlier sessions, `0a2fd0d88d4e4c97`
on an AMD EPYC one, the same code at `864cdc5` on both): the believer's made-up times came from
NumPy's `exp`, which on CPUs with AVX-512 is Intel's SVML. They now come from `math.exp`, and an
H200 host's Xeon gives `0a2fd0d88d4e4c97` with NumPy's AVX-512 code on and off, where the tunekit
before gave `4d881b5a503bfce6` with it on (`benchmarks/results/h200-fingerprint-avx512-2026-12-07/`).
The first digest, `224200c3d65d5b60`, was the same on both CPU machines.

    python experiments/replay_fingerprint.py [--out FILE.json] [--against OTHER.json] [--in-flight-only]

A minute or two on one core alone.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from leave_family_out import _spaces, _tuning  # noqa: E402

import tunekit  # noqa: E402
from tunekit.compare import same_kernel_elsewhere  # noqa: E402

CORPUS = str(Path(__file__).resolve().parent / "corpus" / "v2.json")
SPACES = ("h200/matmul-square", "h200/w4a16_gemm-m64_n14k", "h200/conv2d-b8_14x14_c256")
STRATEGIES = ("default", "lfbo", "optuna-gp", "rf", "optuna")


def fingerprint() -> dict[str, list]:
    """label -> the times one tuning measured."""
    spaces = _spaces(CORPUS)
    largest = max(spaces, key=lambda name: len(spaces[name]))
    times = {}
    for space in (largest, *SPACES):
        for strategy in STRATEGIES:
            for seed in (0, 1):
                budget = 60 if strategy == "optuna-gp" else 120
                times[f"{space}|{strategy}|{seed}"] = _tuning(CORPUS, space, strategy, strategy, "{}", seed,
                                                              budget)["times_ms"]
    elsewhere = same_kernel_elsewhere(spaces)
    for space in SPACES[:2]:
        for seed in (0, 1):
            times[f"{space}|default with the store|{seed}"] = _tuning(CORPUS, space, "default", "default", "{}", seed,
                                                                      120, tuple(elsewhere[space]))["times_ms"]
    return times


def batch_fingerprint(batch: int = 18) -> dict[str, list]:
    """label -> the times one tuning of ``default`` measured with ``batch`` configs in flight."""
    spaces = _spaces(CORPUS)
    elsewhere = same_kernel_elsewhere(spaces)
    times = {}
    for space in SPACES:
        for seed in (0, 1):
            times[f"{space}|default at {batch}|{seed}"] = _tuning(CORPUS, space, "default", "default", "{}", seed, 120,
                                                                  batch=batch)["times_ms"]
    for space in SPACES[:2]:
        for seed in (0, 1):
            times[f"{space}|default at {batch} with the store|{seed}"] = _tuning(
                CORPUS, space, "default", "default", "{}", seed, 120, tuple(elsewhere[space]), batch)["times_ms"]
    return times


def digest_of(times: dict[str, list]) -> str:
    return hashlib.sha256(json.dumps(times, sort_keys=True).encode()).hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--against", type=Path, help="another run's --out file: the tunings whose times differ")
    parser.add_argument("--in-flight-only", action="store_true", help="only the second digest's tunings")
    args = parser.parse_args()
    times = {} if args.in_flight_only else fingerprint()
    batched = batch_fingerprint()
    if times:
        print(f"{len(times)} tunings, tunekit {tunekit.__file__}: {digest_of(times)}")
    print(f"{len(batched)} tunings with 18 configs in flight, tunekit {tunekit.__file__}: {digest_of(batched)}")
    times.update(batched)
    if args.out:
        args.out.write_text(json.dumps(times, sort_keys=True) + "\n")
    if args.against:
        other = json.loads(args.against.read_text())
        if args.in_flight_only:
            other = {label: found for label, found in other.items() if label in batched}
        same = [label for label in times if label in other and times[label] == other[label]]
        differ = sorted(label for label in times if label in other and times[label] != other[label])
        missing = sorted(times.keys() ^ other.keys())
        print(f"against {args.against}: {len(same)} of {len(times)} tunings measure the same times; "
              f"{len(differ)} differ" + "".join(f"\n  {label}" for label in differ)
              + (f"; in one file only: {', '.join(missing)}" if missing else ""))


if __name__ == "__main__":
    main()
