"""How much the in-flight replays of ``replay_fingerprint.py`` hang on the last bit of the believer's
made-up times: its in-flight digest with every made-up time moved one ulp up or down (what a CPU
whose ``exp`` differs in the last bit would make up). A digest other than the unmoved one says
that bit changes the picks.

    TUNEKIT_SHARED_SPACES=../shared/spaces OMP_NUM_THREADS=1 python experiments/made_up_times_probe.py up

About 40 s on one core.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay_fingerprint  # noqa: E402

import tunekit.strategies.default as default  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("direction", choices=["up", "down"])
    args = parser.parse_args()
    towards = np.inf if args.direction == "up" else -np.inf
    made_up_time = default.made_up_time
    default.made_up_time = lambda log_time: float(np.nextafter(made_up_time(log_time), towards))
    print(f"made-up times one ulp {args.direction}: {replay_fingerprint.digest_of(replay_fingerprint.batch_fingerprint())}")


if __name__ == "__main__":
    main()
