"""Drop-in check on a GPU: ``tunekit.autotune(configs=...)`` against ``triton.autotune`` on one GEMM config list.

Both tune the same list exhaustively from a cold Triton compile cache of their own: tunekit
compiles in parallel worker processes, stock Triton compiles serially in the process. Reported:
tuning wall time of each, the statuses tunekit recorded, and the two winners re-timed
interleaved against each other and cuBLAS (``torch.matmul``) in this run, as medians of
per-round ratios.

    python benchmarks/gemm_dropin.py [--configs 64] [--shape 4096 4096 4096] [--json OUT.json]

The list is the 8 configs of Triton's matmul tutorial plus ``--configs`` configs drawn (seeded)
from the full 1,152-config space of design.md *without* its shared-memory constraint, so that
some of them fail with OutOfResources as they would in real use. Needs a GPU.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import tempfile
import time
from collections import Counter

import torch
import triton
import triton.testing

import tunekit
from tunekit.config import config_from_dict, config_json
from tunekit.kernels import matmul


def config_list(extra: int, seed: int) -> list[triton.Config]:
    domains = matmul.space().domains
    names = list(domains)
    everything = [dict(zip(names, values)) for values in itertools.product(*domains.values())]
    drawn = [config_from_dict(c) for c in random.Random(seed).sample(everything, extra)]
    tutorial = matmul.tutorial_configs()
    ids = {config_json(c) for c in tutorial}
    return tutorial + [c for c in drawn if config_json(c) not in ids]


def interleaved_ms(contestants: dict, rounds: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in contestants}
    for _ in range(rounds):
        for name, call in contestants.items():
            samples[name].append(triton.testing.do_bench(call, warmup=25, rep=100))
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", type=int, default=64)
    parser.add_argument("--shape", type=int, nargs=3, default=(4096, 4096, 4096))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--compile-timeout", type=float, default=None, help="seconds per compile (tunekit)")
    parser.add_argument("--json")
    args = parser.parse_args()

    m, n, k = args.shape
    configs = config_list(args.configs, args.seed)
    a, b, c = matmul.inputs(m, n, k, dtype=torch.bfloat16, device="cuda")
    reference = torch.matmul(a, b)
    scratch = tempfile.mkdtemp(prefix="tunekit-gemm-")

    # tunekit: its own cold cache, parallel compile workers, a fresh store
    os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "cache-tunekit")
    ours = tunekit.autotune(configs, key=["M", "N", "K"], store=os.path.join(scratch, "store.db"),
                            compile_workers=args.workers, compile_timeout=args.compile_timeout)(triton.jit(matmul.matmul_kernel.fn))
    start = time.perf_counter()
    matmul.launch(ours, a, b, c)
    torch.cuda.synchronize()
    ours_wall = time.perf_counter() - start
    ours_error = ((c.float() - reference.float()).norm() / reference.float().norm()).item()
    statuses = Counter(t.status.value for t in ours.trials)
    compile_cpu_seconds = sum(t.compile_seconds or 0.0 for t in ours.trials)
    ours_config = ours.best_config

    # stock: another cold cache, another JITFunction (no shared in-memory kernels)
    os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "cache-stock")
    stock = triton.autotune(configs, key=["M", "N", "K"])(triton.jit(matmul.matmul_kernel.fn))
    c.fill_(float("nan"))
    start = time.perf_counter()
    matmul.launch(stock, a, b, c)
    torch.cuda.synchronize()
    stock_wall = time.perf_counter() - start
    stock_error = ((c.float() - reference.float()).norm() / reference.float().norm()).item()
    stock_config = stock.best_config
    stock_failed = sum(1 for t in stock.configs_timings.values() if t[0] == float("inf"))

    # the two winners and cuBLAS, interleaved, as cached launches
    contestants = {
        "tunekit_winner": lambda: matmul.launch(ours, a, b, c),
        "stock_winner": lambda: matmul.launch(stock, a, b, c),
        "cublas": lambda: torch.matmul(a, b),
    }
    samples = interleaved_ms(contestants, args.rounds)
    ratio_stock = statistics.median(o / s for o, s in zip(samples["tunekit_winner"], samples["stock_winner"]))
    ratio_cublas = statistics.median(o / s for o, s in zip(samples["tunekit_winner"], samples["cublas"]))
    same = config_json(ours_config) == config_json(stock_config)
    # does the shared memory a worker compiled for predict which configs run out of resources?
    limit = triton.runtime.driver.active.utils.get_device_properties(torch.cuda.current_device())["max_shared_mem"]
    measured = [t for t in ours.trials if t.shared_bytes is not None]
    predicted = sum((t.shared_bytes > limit) == (t.status.value == "out_of_resources") for t in measured)

    print(f"GEMM {m}x{n}x{k} bf16, {len(configs)} configs, {torch.cuda.get_device_name()}, triton {triton.__version__}")
    print(f"  tunekit: {ours_wall:7.1f} s wall (parallel compile, {compile_cpu_seconds:.0f} compile-seconds), "
          f"statuses {dict(statuses)}, rel. error {ours_error:.1e}")
    print(f"  stock:   {stock_wall:7.1f} s wall (serial compile), {stock_failed} configs inf, rel. error {stock_error:.1e}")
    print(f"  tuning wall time tunekit / stock: {ours_wall / stock_wall:.3f}")
    print(f"  tunekit winner: {ours_config}")
    print(f"  stock winner:   {stock_config}   same config: {same}")
    for name, values in samples.items():
        print(f"  {name:<15} {statistics.median(values) * 1e3:8.1f} us (median of {args.rounds} interleaved do_bench)")
    print(f"  tunekit winner / stock winner: {ratio_stock:.3f}; tunekit winner / cuBLAS: {ratio_cublas:.3f}")
    print(f"  compiled shared memory > {limit} B predicts out_of_resources for {predicted} of {len(measured)} configs")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({
                "shape": [m, n, k], "configs": len(configs), "device": torch.cuda.get_device_name(),
                "triton": triton.__version__, "torch": torch.__version__,
                "tunekit_wall_s": ours_wall, "stock_wall_s": stock_wall, "tunekit_statuses": statuses,
                "tunekit_compile_seconds": compile_cpu_seconds, "stock_inf_configs": stock_failed,
                "tunekit_winner": config_json(ours_config), "stock_winner": config_json(stock_config),
                "same_winner": same, "samples_ms": samples, "ratio_tunekit_over_stock": ratio_stock,
                "ratio_tunekit_over_cublas": ratio_cublas, "errors": [ours_error, stock_error],
                "max_shared_mem": limit, "shared_memory_predicts_oor": [predicted, len(measured)],
                "trials": [{"config": t.config_id, "status": t.status.value, "ms": t.time_ms,
                            "compile_s": t.compile_seconds, "source": t.source,
                            "shared_bytes": t.shared_bytes,
                            "error": (t.error or "")[:300]} for t in ours.trials],
            }, handle, indent=1)


if __name__ == "__main__":
    main()
