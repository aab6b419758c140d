"""``tunekit tune`` on 1 GPU and on every GPU of the host, same manifest, same budgets, in one run.

Each pass starts from an empty store and a cold Triton cache in a fresh process (the command a
user runs), one after the other; then the two passes' winners are re-timed side by side on GPU 0,
alternating, so that "the same winners within timing noise" is measured, not assumed.

    python benchmarks/tune_gpus.py --out DIR [--manifest tunekit.kernels:manifests/h200.toml]
        [--evals 40] [--seconds 60]

Writes DIR/summary.json and prints the wall-clock seconds of both passes, their ratio, and per
key both winners with their re-timed medians and ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def tune_pass(manifest: str, gpus: str, evals: int, seconds: float, directory: Path) -> dict:
    """One ``tunekit tune`` in a fresh process with a cold cache; its seconds and store."""
    store = directory / f"store-{gpus.replace(',', '_')}.db"
    cache = Path(tempfile.mkdtemp(prefix="triton-cache-"))
    env = dict(os.environ, TRITON_CACHE_DIR=str(cache))
    command = [sys.executable, "-m", "tunekit.cli", "tune", manifest, "--store", str(store), "--gpus", gpus,
               "--evals", str(evals), "--seconds", str(seconds), "--no-progress"]
    begin = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - begin
    shutil.rmtree(cache, ignore_errors=True)
    (directory / f"tune-{gpus}.log").write_text(done.stdout + done.stderr)
    return {"gpus": gpus, "seconds": elapsed, "returncode": done.returncode, "store": str(store),
            "table": done.stdout}


def retime_winners(manifest: str, stores: list[str], rounds: int = 5) -> list[dict]:
    """Per key, each store's winner re-timed on GPU 0, the stores' winners alternating."""
    import torch
    import triton

    from tunekit.ahead import prepared_call
    from tunekit.manifest import load_manifest
    from tunekit.store import ResultsStore

    rows = []
    opened = [ResultsStore(s, read_only=True) for s in stores]
    for entry in load_manifest(manifest):
        kernel = entry.kernel
        for shape in entry.shapes:
            args, kwargs, key, space = prepared_call(entry, shape, "cuda:0")
            winners = [store.winners(kernel.identity).get(key.json) for store in opened]
            if any(w is None for w in winners):
                rows.append({"kernel": kernel.kernel_name, "shape": shape.label(), "winners": winners})
                continue
            configs = [space.canonical(json.loads(w[0])) for w in winners]
            times: list[list[float]] = [[] for _ in configs]
            for _ in range(rounds):
                for position, config in enumerate(configs):
                    call = {**{k: v for k, v in kwargs.items() if k not in ("grid", "warmup")},
                            **config.all_kwargs()}
                    grid = kwargs["grid"]

                    def launch(call=call, grid=grid):
                        kernel.fn[grid](*args, **call)

                    times[position].append(triton.testing.do_bench(launch, warmup=25, rep=100))
            medians = [sorted(t)[len(t) // 2] for t in times]
            rows.append({"kernel": kernel.kernel_name, "shape": shape.label(), "key": key.json,
                         "winners": [w[0] for w in winners], "retimed_ms": medians,
                         "ratio": medians[1] / medians[0]})
            torch.cuda.synchronize()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--manifest", default="tunekit.kernels:manifests/h200.toml")
    parser.add_argument("--evals", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    import torch

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    count = torch.cuda.device_count()
    every = ",".join(str(d) for d in range(count))
    passes = [tune_pass(args.manifest, "0", args.evals, args.seconds, out)]
    if count > 1:
        passes.append(tune_pass(args.manifest, every, args.evals, args.seconds, out))
    summary = {"gpus": count, "device": torch.cuda.get_device_name(0), "evals": args.evals,
               "seconds_per_key": args.seconds, "passes": [{k: v for k, v in p.items() if k != "table"}
                                                          for p in passes]}
    for p in passes:
        print(f"--- tunekit tune --gpus {p['gpus']}: {p['seconds']:.1f} s, exit {p['returncode']}\n{p['table']}")
    if len(passes) == 2:
        summary["speedup"] = passes[0]["seconds"] / passes[1]["seconds"]
        summary["winners"] = retime_winners(args.manifest, [p["store"] for p in passes])
        print(f"1 GPU {passes[0]['seconds']:.1f} s, {count} GPUs {passes[1]['seconds']:.1f} s: "
              f"{summary['speedup']:.2f} x faster")
        for row in summary["winners"]:
            if "ratio" in row:
                print(f"{row['kernel']:22} {row['shape']:45} 1 GPU {row['retimed_ms'][0]:.4f} ms, "
                      f"{count} GPUs {row['retimed_ms'][1]:.4f} ms: {row['ratio']:.3f}")
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0 if all(p["returncode"] == 0 for p in passes) else 1


if __name__ == "__main__":
    sys.exit(main())
