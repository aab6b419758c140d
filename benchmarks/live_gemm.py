"""Live GEMM tuning on a GPU: each strategy tunes design.md's whole 984-config space from a cold
Triton cache, and what it found is re-timed interleaved against the recorded optimum of the
space, the winner of stock ``triton.autotune`` over the tutorial's 8 configs, and cuBLAS.

    python benchmarks/live_gemm.py --strategy random --strategy optuna --seeds 0 1 --seconds 60 --json OUT.json

For every (strategy, seed): tuning wall time (compile workers started, compiles, benchmarks and
the strategy's own time; from the first launch to its return), evaluations, the winner, its
output's error, and its time in the shipped H200 recording of the same shape. Then every
distinct winner, the recorded optimum, stock's tutorial winner and ``torch.matmul`` are timed
in ``--rounds`` interleaved rounds (``do_bench(warmup=25, rep=100)`` each); ratios are taken
per round and reported as medians with 95 % bootstrap intervals over rounds.

Stock ``triton.autotune`` over the whole space compiles serially: hours. It is not run; its
cost is estimated, and labelled as such, from the recorded compile times of all 984 configs plus
984 times stock's per-config benchmark time, measured with a warm cache on ``--stock-sample``
configs (the same configs are also tuned cold, to check the recorded compile times against
stock's own). Needs a GPU and the shipped H200 recording of ``--shape``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time

import numpy as np
import torch
import triton
import triton.testing
from tunekit.kernels import matmul, shipped

import tunekit
from tunekit.check import norm_relative_error
from tunekit.config import config_from_dict, config_json, config_to_dict


def fresh_kernel() -> triton.runtime.JITFunction:
    """A new JITFunction of the same source: no kernel compiled in this process is shared."""
    return triton.jit(matmul.matmul_kernel.fn)


def cold_cache(scratch: str, name: str) -> None:
    """Point Triton (and compile workers started from now on) at an empty cache directory."""
    os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, f"cache-{name}")


def timed_launch(kernel, a, b, c) -> float:
    start = time.perf_counter()
    matmul.launch(kernel, a, b, c)
    torch.cuda.synchronize()
    return time.perf_counter() - start


def warm_start(kernel, shape: str) -> int:
    """Put the shipped H200 recordings of the other GEMM shapes into ``kernel``'s store, as
    earlier tunings on this device would have left them; returns the trials added."""
    from tunekit.store import new_run_id

    added = 0
    for row in shipped.index()["spaces"]:
        if row["kernel"] != "matmul" or row["shape"] == shape:
            continue
        run_id = new_run_id()
        kernel.store.start_run(kernel.identity, row["key"], strategy="shipped", budget=None, run_id=run_id)
        for trial in shipped.load("matmul", row["shape"]).trials():
            kernel.store.record(kernel.identity, row["key"], trial, strategy="shipped", run_id=run_id)
            added += 1
    return added


def median_and_interval(values: list[float], seed: int = 0) -> tuple[float, float, float]:
    """The median and a 95 % percentile-bootstrap interval of it."""
    values_array = np.asarray(values)
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(values_array, size=(2000, len(values_array))), axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return float(np.median(values_array)), float(low), float(high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategy", action="append", required=True,
                        help="repeatable; NAME+transfer: the store first gets the shipped recordings of the other "
                             "GEMM shapes (cross-shape warm start)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="each tuning's seconds budget")
    parser.add_argument("--evals", type=int, default=None, help="each tuning's evaluations budget")
    parser.add_argument("--shape", default="square", help="a matmul shape of the shipped H200 recording")
    parser.add_argument("--workers", type=int, default=None, help="compile workers (default: the CPU count)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--stock-sample", type=int, default=8, help="configs for the stock whole-space estimate")
    parser.add_argument("--json")
    args = parser.parse_args()

    recorded = shipped.load("matmul", args.shape)
    (row,) = [r for r in shipped.index()["spaces"] if (r["kernel"], r["shape"]) == ("matmul", args.shape)]
    m, n, k = row["dims"]
    recorded_ms = {json.dumps(dict(r.params), sort_keys=True): r.time_ms for r in recorded.records if r.ok}
    optimum_params = min(recorded_ms, key=recorded_ms.get)
    optimum = config_from_dict(json.loads(optimum_params))

    def recorded_time(config: triton.Config) -> float | None:
        return recorded_ms.get(json.dumps(config_to_dict(config), sort_keys=True))

    a, b, c = matmul.inputs(m, n, k, dtype=torch.bfloat16, device="cuda")
    expected = torch.matmul(a, b)
    scratch = tempfile.mkdtemp(prefix="tunekit-live-")
    stores = os.path.dirname(os.path.abspath(args.json)) if args.json else scratch  # kept beside the results
    print(f"GEMM {m}x{n}x{k} bf16 on {torch.cuda.get_device_name()}, triton {triton.__version__}, "
          f"torch {torch.__version__}; space {len(matmul.space())} configs; recorded optimum "
          f"{recorded_ms[optimum_params]:.4f} ms: {optimum}", flush=True)

    tunings = []
    for strategy in args.strategy:
        for seed in args.seeds:
            cold_cache(scratch, f"{strategy}-{seed}")
            kernel = tunekit.autotune(space=matmul.space(), key=["M", "N", "K"], strategy=strategy.split("+")[0],
                                      seed=seed, budget=tunekit.Budget(evals=args.evals, seconds=args.seconds),
                                      store=os.path.join(stores, f"{strategy}-{seed}.db"),
                                      compile_workers=args.workers, warmup=5, rep=25)(fresh_kernel())
            if strategy.endswith("+transfer"):
                print(f"  {strategy}: the store holds {warm_start(kernel, args.shape)} trials of the other shapes",
                      flush=True)
            c.fill_(float("nan"))
            wall = timed_launch(kernel, a, b, c)
            winner = kernel.best_config
            measured = [t for t in kernel.trials if t.source == "measured"]
            found_recorded = recorded_time(winner)
            tunings.append({
                "strategy": strategy, "seed": seed, "wall_seconds": wall, "evaluations": len(measured),
                "failed": sum(not t.ok for t in measured), "winner": config_json(winner),
                "winner_error": norm_relative_error(c, expected), "winner_recorded_ms": found_recorded,
                "winner_recorded_over_optimum": found_recorded / recorded_ms[optimum_params] if found_recorded else None,
                "_kernel": kernel,
            })
            over = tunings[-1]["winner_recorded_over_optimum"]
            print(f"  {strategy:<16} seed {seed}: {wall:6.1f} s wall, {len(measured):4d} evaluations, winner "
                  f"recorded at {found_recorded} ms ({over if over is None else f'{over:.3f}'} of the optimum), "
                  f"error {tunings[-1]['winner_error']:.1e}: {winner}", flush=True)

    cold_cache(scratch, "stock-tutorial")
    stock = triton.autotune(matmul.tutorial_configs(), key=["M", "N", "K"])(fresh_kernel())
    c.fill_(float("nan"))
    stock_wall = timed_launch(stock, a, b, c)
    stock_error = norm_relative_error(c, expected)
    print(f"  stock tutorial list (8 configs, cold cache): {stock_wall:.1f} s, error {stock_error:.1e}, winner "
          f"{stock.best_config} recorded at {recorded_time(stock.best_config)} ms", flush=True)

    # stock over a sample, cold then warm: its per-config benchmark cost and compile cost
    sample = [config_from_dict(p) for p in random.Random(0).sample([dict(r.params) for r in recorded.records
                                                                    if r.ok], args.stock_sample)]
    cold_cache(scratch, "stock-sample")
    sample_cold = timed_launch(triton.autotune(sample, key=["M", "N", "K"])(fresh_kernel()), a, b, c)
    sample_warm = timed_launch(triton.autotune(sample, key=["M", "N", "K"])(fresh_kernel()), a, b, c)
    compile_ms = {json.dumps(dict(r.params), sort_keys=True): r.compile_ms for r in recorded.records}
    sample_compile = sum(compile_ms[json.dumps(config_to_dict(s), sort_keys=True)] for s in sample) / 1e3
    whole_compile = sum(compile_ms.values()) / 1e3
    stock_estimate = whole_compile + len(recorded) * sample_warm / len(sample)
    print(f"  stock on {len(sample)} sampled configs: {sample_cold:.1f} s cold, {sample_warm:.1f} s warm "
          f"(cold - warm = {sample_cold - sample_warm:.1f} s; recorded compile times of these configs: "
          f"{sample_compile:.1f} s)", flush=True)
    print(f"  ESTIMATE, not run: stock over all {len(recorded)} configs = {whole_compile:.0f} s recorded compile "
          f"+ {len(recorded)} x {sample_warm / len(sample):.3f} s warm = {stock_estimate:.0f} s", flush=True)

    # interleaved re-timing of every distinct config found, the optimum, stock's winner and cuBLAS
    cold_cache(scratch, "retime")
    raw = fresh_kernel()
    contestants = {"optimum": optimum, "stock_tutorial": stock.best_config}
    for tuning in tunings:
        contestants.setdefault(tuning["winner"], config_from_dict(json.loads(tuning["winner"])))
    calls = {name: (lambda config=config: matmul.launch(raw, a, b, c, **config.all_kwargs()))
             for name, config in contestants.items()}
    calls["cublas"] = lambda: torch.matmul(a, b)
    for call in calls.values():
        call()  # compile before the rounds
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(args.rounds):
        for name, call in calls.items():
            samples[name].append(triton.testing.do_bench(call, warmup=25, rep=100))

    def ratios(name: str, against: str) -> tuple[float, float, float]:
        return median_and_interval([x / y for x, y in zip(samples[name], samples[against])])

    print(f"\nre-timed interleaved, {args.rounds} rounds: median ratio [95 % CI]")
    print(f"  {'config':<48} {'median us':>9}  {'/ optimum':>22}  {'/ cuBLAS':>22}")
    report = {}
    for name in calls:
        label = {"optimum": "recorded optimum", "stock_tutorial": "stock tutorial winner", "cublas": "cuBLAS"}.get(
            name, "found by " + ", ".join(sorted({f"{t['strategy']}/{t['seed']}" for t in tunings
                                                  if t["winner"] == name})))
        to_optimum, to_cublas = ratios(name, "optimum"), ratios(name, "cublas")
        report[name] = {"label": label, "median_ms": statistics.median(samples[name]), "over_optimum": to_optimum,
                        "over_cublas": to_cublas}
        print(f"  {label:<48} {statistics.median(samples[name]) * 1e3:9.1f}  "
              f"{to_optimum[0]:.3f} [{to_optimum[1]:.3f}, {to_optimum[2]:.3f}]  "
              f"{to_cublas[0]:.3f} [{to_cublas[1]:.3f}, {to_cublas[2]:.3f}]")
    for strategy in args.strategy:
        mine = [t for t in tunings if t["strategy"] == strategy]
        print(f"  {strategy}: median over {len(mine)} seeds: wall {statistics.median(t['wall_seconds'] for t in mine):.1f} s, "
              f"{statistics.median(t['evaluations'] for t in mine):.0f} evaluations, found/optimum re-timed "
              f"{statistics.median(report[t['winner']]['over_optimum'][0] for t in mine):.3f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"shape": [m, n, k], "device": torch.cuda.get_device_name(), "triton": triton.__version__,
                       "torch": torch.__version__, "seconds_budget": args.seconds, "evals_budget": args.evals,
                       "optimum": optimum_params, "optimum_recorded_ms": recorded_ms[optimum_params],
                       "tunings": [{k: v for k, v in t.items() if not k.startswith("_")} for t in tunings],
                       "stock_tutorial": {"wall_seconds": stock_wall, "winner": config_json(stock.best_config),
                                          "error": stock_error},
                       "stock_sample": {"configs": len(sample), "cold_seconds": sample_cold,
                                        "warm_seconds": sample_warm, "recorded_compile_seconds": sample_compile,
                                        "whole_space_estimate_seconds": stock_estimate,
                                        "whole_space_recorded_compile_seconds": whole_compile},
                       "samples_ms": samples, "report": report}, handle, indent=1)


if __name__ == "__main__":
    main()
