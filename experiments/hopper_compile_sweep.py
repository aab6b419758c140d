"""Compile every config of the Hopper GEMM's unconstrained H200 space for sm_90 on a CPU and record
what the compiler does with each: status, seconds and the shared memory it allocated.

Compiling needs no GPU (tunekit's compile pool targets one with a stub driver), so this is how the
Space's feasibility constraints (``matmul_hopper.compiles`` and the shared-memory estimate of
``matmul_hopper.fits_h200``) were found and are checked, for the Triton installed:

    python experiments/hopper_compile_sweep.py --out experiments/results/hopper_compile/triton-3.6.0.jsonl.gz

Then ``--summary FILE`` prints the failures by knob combination and the largest shared memory
against the estimate. Two workers compile the 5,248 configs in about 15 minutes.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import sys

os.environ["TRITON_INTERPRET"] = "0"

import torch
import triton
from triton.backends.compiler import GPUTarget

from tunekit.compiler import CompileJob, CompilePool, TensorSpec
from tunekit.config import config_to_dict
from tunekit.kernels import matmul_hopper

#: The launch the configs are compiled for: bf16 A, B, C and the square shape's sizes.
ARGS = (TensorSpec(torch.bfloat16),) * 3 + (4096, 4096, 4096)


def sweep(out: str, workers: int, chunk: int = 200) -> None:
    """Compile ``matmul_hopper.space(constrained=False)`` chunk by chunk into ``out`` (gzipped JSON lines)."""
    configs = [config_to_dict(c) for c in matmul_hopper.space(constrained=False).configs()]
    pool = CompilePool(workers=workers)
    try:
        with gzip.open(out, "wt") as sink:
            sink.write(json.dumps({"triton": triton.__version__, "target": "cuda:90", "configs": len(configs)}) + "\n")
            for start in range(0, len(configs), chunk):
                part = configs[start:start + chunk]
                jobs = [CompileJob(matmul_hopper.__name__, "matmul_hopper_kernel", GPUTarget("cuda", 90, 32), ARGS, c)
                        for c in part]
                for config, result in zip(part, pool.compile(jobs)):
                    sink.write(json.dumps({"config": config, "status": result.status.value, "seconds": result.seconds,
                                           "shared_bytes": result.shared_bytes,
                                           "error": (result.error or "")[-200:]}) + "\n")
                print(f"{start + len(part)} of {len(configs)} compiled", file=sys.stderr, flush=True)
    finally:
        pool.close()


def summary(path: str) -> str:
    """Failures by (num_ctas, WARP_SPECIALIZE, EPILOGUE_SUBTILE, num_warps), whether
    ``matmul_hopper.compiles`` predicts each outcome, and the shared memory against the estimate."""
    with gzip.open(path, "rt") as source:
        header, *rows = [json.loads(line) for line in source]
    if len(rows) != header["configs"]:
        raise ValueError(f"{path} holds {len(rows)} of the {header['configs']} configs its sweep set out to compile: "
                         "it was cut off; sweep again into a new file")
    lines = [f"Triton {header['triton']}, {header['target']}: {len(rows)} configs"]
    groups: dict[tuple, collections.Counter] = collections.defaultdict(collections.Counter)
    for row in rows:
        c = row["config"]
        groups[(c["num_ctas"], c["WARP_SPECIALIZE"], c["EPILOGUE_SUBTILE"], c["num_warps"])][row["status"]] += 1
    lines.append("num_ctas, WARP_SPECIALIZE, EPILOGUE_SUBTILE, num_warps: statuses")
    lines += [f"  {key}: {dict(counts)}" for key, counts in sorted(groups.items())]
    agree = sum((row["status"] == "ok") == matmul_hopper.compiles(row["config"]) for row in rows)
    lines.append(f"matmul_hopper.compiles predicts {agree} of {len(rows)} outcomes")
    compiled = [row for row in rows if row["status"] == "ok"]
    over = [row for row in compiled if row["shared_bytes"] > matmul_hopper.shared_memory(row["config"])]
    lines.append(f"shared memory above the estimate: {len(over)} of {len(compiled)} compiled configs")
    seconds = sorted(row["seconds"] for row in compiled)
    lines.append(f"compile seconds (one at a time per worker): median {seconds[len(seconds) // 2]:.2f}, "
                 f"largest {seconds[-1]:.2f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="where to write the sweep (.jsonl.gz); it must not exist")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--summary", metavar="FILE", help="print the summary of a sweep")
    args = parser.parse_args()
    if args.summary:
        print(summary(args.summary))
        return
    if not args.out:
        parser.error("--out or --summary is required")
    if os.path.exists(args.out):
        raise SystemExit(f"{args.out} exists; tunekit does not overwrite files: choose a new name")
    sweep(args.out, args.workers)
    print(summary(args.out))


if __name__ == "__main__":
    main()
