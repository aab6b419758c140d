"""A manifest for the tests of ``tunekit tune``: a vector add tuned exhaustively over 5 configs at
6 shapes, whose timing sleeps ``TUNEKIT_TEST_BENCH_SLEEP`` seconds (default 0.2) so that a test can
stop a process in the middle of a key, and fails while ``TUNEKIT_TEST_BENCH_FAIL`` is set.
Importable by the processes a test starts."""

from __future__ import annotations

import os
import time

import tunekit
from tunekit.kernels import vector_add

BLOCKS = [128, 256, 512, 1024, 2048]
SIZES = [1000 * i for i in range(1, 7)]


def slow_bench(fn, **_):
    fn()
    if os.environ.get("TUNEKIT_TEST_BENCH_FAIL"):
        raise RuntimeError("injected: TUNEKIT_TEST_BENCH_FAIL is set")
    time.sleep(float(os.environ.get("TUNEKIT_TEST_BENCH_SLEEP", "0.2")))
    return 1.0


slow_add = tunekit.autotune(space=tunekit.Space(BLOCK=BLOCKS), key=["n"], strategy="exhaustive",
                            do_bench=slow_bench)(vector_add.add_kernel)

MANIFEST = [{"kernel": slow_add, "inputs": vector_add.inputs, "launch": vector_add.launch,
             "shapes": [{"n": n} for n in SIZES]}]
