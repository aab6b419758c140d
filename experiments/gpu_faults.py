"""The GPU fault check: configs that make an illegal memory access, hang, or compute a wrong
tile, tuned by tunekit (isolated, its default on a GPU for a kernel tuned the first time) in
this process; then, each in a child process, the illegal access tuned in-process by tunekit
(``isolate=False``) and by stock ``triton.autotune``, to show what isolation saves; then what
isolation costs: the same seeded sample of GEMM configs tuned exhaustively, isolated and not,
each from its own cold Triton cache, with each config's time in both.

    python experiments/gpu_faults.py --out OUT        # writes OUT/gpu_faults.json and OUT/store.db

Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import triton

import tunekit
from tunekit.config import config_json
from tunekit.kernels import matmul
from tunekit.testing import faults

N = 1 << 20


def healthy() -> bool:
    """Whether this process can still use its GPU."""
    try:
        a = torch.randn(512, 512, device="cuda")
        value = (a @ a).sum().item()
        torch.cuda.synchronize()
        return value == value
    except Exception:
        return False


def inputs():
    generator = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(N, device="cuda", generator=generator)
    y = torch.randn(N, device="cuda", generator=generator)
    return x, y, torch.full_like(x, float("nan")), torch.zeros(1, dtype=torch.int32, device="cuda")


def launch(kernel, x, y, out, flag):
    kernel[lambda meta: (triton.cdiv(N, meta["BLOCK"]),)](x, y, out, flag, N)


def isolated(out_dir: Path) -> dict:
    kernel = tunekit.autotune(space=faults.space(), key=["n"], strategy="exhaustive", store=out_dir / "store.db",
                              run_timeout=30)(faults.faulty_add_gpu)
    x, y, out, flag = inputs()
    x0, y0 = x.clone(), y.clone()
    start = time.perf_counter()
    error = None
    try:
        launch(kernel, x, y, out, flag)
        torch.cuda.synchronize()
    except Exception as caught:  # reported, not raised: the point is what survives
        error = repr(caught)
    return {
        "seconds": time.perf_counter() - start, "error": error,
        "workers_started": kernel.benchmark_workers_started,
        "trials": [{"BLOCK": t.config.kwargs["BLOCK"], "status": t.status.value, "error": (t.error or "")[:300],
                    "median_ms": t.time_ms if t.ok else None} for t in kernel.trials],
        "winner": kernel.best_config.kwargs.get("BLOCK") if error is None else None,
        "output_correct": bool(torch.equal(out, x + y)), "inputs_untouched": bool(torch.equal(x, x0) and torch.equal(y, y0)),
        "healthy_after": healthy(),
    }


def child(which: str) -> None:
    """One in-process tuning over a good config and the illegal access; prints a JSON line."""
    configs = [tunekit.Config({"BLOCK": b}, num_warps=4) for b in (64, faults.SEGFAULT_BLOCK, 2048)]
    if which == "stock":
        kernel = triton.autotune(configs, key=["n"])(faults.faulty_add_gpu)
    else:
        kernel = tunekit.autotune(configs, key=["n"], store=None, isolate=False)(faults.faulty_add_gpu)
    x, y, out, flag = inputs()
    error = None
    try:
        launch(kernel, x, y, out, flag)
        torch.cuda.synchronize()
    except Exception as caught:
        error = repr(caught)[:300]
    print(json.dumps({"error": error, "healthy_after": healthy()}), flush=True)


def in_child(which: str) -> dict:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--child", which], capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return {"returncode": done.returncode, "seconds": time.perf_counter() - start,
            "result": json.loads(lines[-1]) if lines else None, "stderr_tail": done.stderr[-1500:]}


def gemm(isolate: str, budget: int) -> None:
    """Exhaustive tuning of ``budget`` GEMM configs (a seeded sample of the space) from the cold
    cache in $TRITON_CACHE_DIR, isolated or not; prints a JSON line with each config's time."""
    sample = random.Random(0).sample(matmul.space().configs(), budget)
    kernel = tunekit.autotune(sample, key=["M", "N", "K"], store=None, strategy="exhaustive",
                              isolate=isolate == "isolated", finalists=3)(triton.jit(matmul.matmul_kernel.fn))
    a, b, c = matmul.inputs(4096, 4096, 4096, dtype=torch.bfloat16, device="cuda")
    start = time.perf_counter()
    matmul.launch(kernel, a, b, c)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    statuses: dict[str, int] = {}
    for t in kernel.trials:
        statuses[t.status.value] = statuses.get(t.status.value, 0) + 1
    expected = a.float() @ b.float()
    print(json.dumps({
        "isolate": isolate, "seconds": seconds, "statuses": statuses, "winner": str(kernel.best_config),
        "workers_started": kernel.benchmark_workers_started, "isolation_seconds": kernel.isolation_seconds,
        "compile_seconds": sum(t.compile_seconds or 0.0 for t in kernel.trials),
        "bench_seconds": sum(t.bench_seconds or 0.0 for t in kernel.trials),
        "check_seconds": sum(t.check_seconds or 0.0 for t in kernel.trials),
        "winner_relative_error": ((c.float() - expected).norm() / expected.norm()).item(),
        "largest_check_error": max((t.relative_error or 0.0) for t in kernel.trials),
        "times_ms": {config_json(t.config): t.time_ms for t in kernel.trials if t.ok},
    }), flush=True)


def gemm_in_child(isolate: str, budget: int, scratch: str) -> dict:
    env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(scratch, f"cache-{isolate}"))
    done = subprocess.run([sys.executable, __file__, "--gemm", isolate, "--budget", str(budget)], env=env,
                          capture_output=True, text=True, timeout=420)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return {"returncode": done.returncode, "result": json.loads(lines[-1]) if lines else None,
            "stderr_tail": done.stderr[-1500:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", choices=["stock", "tunekit"])
    parser.add_argument("--gemm", choices=["isolated", "in_process"])
    parser.add_argument("--budget", type=int, default=48, help="GEMM configs tuned, isolated and not")
    parser.add_argument("--skip-gemm", action="store_true")
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    if args.gemm:
        return gemm(args.gemm, args.budget)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "gpu_faults.json"
    if path.exists():
        raise FileExistsError(f"{path} exists; choose another --out")
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}

    def save():
        path.write_text(json.dumps(report, indent=1))

    report["isolated"] = isolated(args.out)
    save()
    print(json.dumps(report["isolated"], indent=1), flush=True)
    for which in ("tunekit", "stock"):
        report[f"in_process_{which}"] = in_child(which)
        save()
        print(which, json.dumps(report[f"in_process_{which}"]["result"]), report[f"in_process_{which}"]["returncode"],
              flush=True)
    if not args.skip_gemm:
        with tempfile.TemporaryDirectory() as scratch:
            for isolate in ("isolated", "in_process"):
                report[f"gemm_{isolate}"] = gemm_in_child(isolate, args.budget, scratch)
                save()
        runs = [report[f"gemm_{isolate}"]["result"] for isolate in ("isolated", "in_process")]
        if all(runs):
            both = runs[0]["times_ms"].keys() & runs[1]["times_ms"].keys()
            ratios = sorted(runs[0]["times_ms"][c] / runs[1]["times_ms"][c] for c in both)
            report["gemm_comparison"] = {
                "configs_timed_in_both": len(both),
                "seconds_isolated_over_in_process": runs[0]["seconds"] / runs[1]["seconds"],
                "time_ratio_isolated_over_in_process": {"median": statistics.median(ratios), "min": ratios[0],
                                                        "max": ratios[-1]},
            }
            save()
        print(json.dumps({k: v for k, v in report.items() if k.startswith("gemm")}, indent=1)[:4000], flush=True)


if __name__ == "__main__":
    main()
