"""``tunekit demo``: the point of the tool in a minute.

With a GPU, it tunes the suite's GEMM live (4096^3, bf16) with a strategy and a seconds budget,
tunes the same kernel with stock ``triton.autotune`` over the 8 configs of Triton's tutorial, and
re-times both winners interleaved with ``torch.matmul``. Without one, it replays the H200 spaces
shipped in ``tunekit.kernels`` with every registered strategy but those in ``NOT_REPLAYED``, prints how many
evaluations each needed to come within 2 % of each space's optimum, and writes the comparison's
tables and tuning-curve PNGs.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import strategy as strategy_registry
from .console import print_table


#: Registered strategies the demo leaves out: exhaustive search needs no comparison, one replay
#: of Optuna's GP sampler takes from 20 s to many minutes, and lfbo (Helion's search, for comparison)
#: would add to the demo's time (each is replayed when named: --strategy lfbo).
NOT_REPLAYED = ("exhaustive", "optuna-gp", "lfbo")


def replay(strategies: Sequence[str] | None, seeds: int, budget: int, out: str | os.PathLike, jobs: int = 1,
           progress: bool | None = None) -> int:
    """Replay the shipped H200 spaces, print the table, write the outputs to ``out``; ``progress``:
    a progress bar on stderr, None: where stderr is a terminal."""
    from .compare import clear_outputs, run_comparison, summary_rows, write_outputs
    from .kernels import shipped

    strategies = list(strategies or [s for s in strategy_registry.available() if s not in NOT_REPLAYED])
    index = shipped.index()
    started = time.perf_counter()
    comparison = run_comparison(shipped.paths(), strategies, seeds, budget, jobs=jobs, progress=progress)
    written = write_outputs(comparison, out, f"tunekit demo --seeds {seeds} --budget {budget}")
    rows = summary_rows(comparison)
    learned = [s for s in strategies if s in ("default", "rf")]
    if learned:  # the same strategy with the store holding the kernel's other shapes
        transfer = run_comparison(shipped.paths(), learned[:1], seeds, budget, jobs=jobs, transfer=True,
                                  progress=progress)
        write_outputs(transfer, Path(out) / "with-store", f"tunekit demo (with the store) --seeds {seeds}")
        rows += [dict(row, strategy=f"{row['strategy']} + store") for row in summary_rows(transfer)]
        strategies = [*strategies, f"{learned[0]} + store"]
    else:
        clear_outputs(Path(out) / "with-store")  # an earlier demo's, of a strategy not replayed now
    print(f"Replayed {len(rows)} tunings ({len(strategies)} strategies x {seeds} seeds x "
          f"{len(index['spaces'])} spaces, {budget} evaluations each) in {time.perf_counter() - started:.1f} s, "
          f"no GPU needed.\nThe spaces: every config of the kernel suite measured on an {index['device']} "
          f"(torch {index['torch']}, Triton {index['triton']}), shipped in tunekit.kernels.")
    if learned:
        print(f"'{strategies[-1]}': each tuning starts with the store holding the kernel's other shapes, as it "
              "would after tuning them (leave one shape out).")
    print()
    by_space = {row["space"].rsplit("/", 1)[-1]: row["space"] for row in rows}

    def median_evals(space: str, strategy: str) -> str:
        reached = [row["evals_to_1.02"] for row in rows if (row["space"], row["strategy"]) == (space, strategy)]
        values = sorted(math.inf if value == "" else value for value in reached)
        median = statistics.median(values)
        return f"{median:g}" if math.isfinite(median) else f">{budget}"

    header = ["space", "configs", "best ms", "PyTorch ms", *strategies]
    table = []
    for entry in index["spaces"]:
        space = by_space[Path(entry["file"]).name.removesuffix(".json.gz")]
        table.append([f"{entry['kernel']}/{entry['shape']}", entry["configs"], f"{entry['best_ms']:.4f}",
                      f"{entry['torch_ms']:.4f}", *(median_evals(space, s) for s in strategies)])
    print("Evaluations to come within 2 % of the space's optimum (median over seeds):")
    print_table(table, header)
    figures = [path for path in written.values() if path.suffix == ".png"]
    tables = [path for path in written.values() if path.suffix != ".png"]
    print(f"\nWrote {', '.join(map(str, tables))}" + (f", and {len(figures)} figures (PNG)." if figures else
          ". No figures: they need matplotlib (pip install 'tunekit[plots]')."))
    return 0


def live(strategy: str | None, seconds: float, rounds: int = 5) -> int:
    """Tune the GEMM on the GPU with tunekit and with stock Triton; print what each found."""
    import torch
    import triton
    import triton.testing

    import tunekit
    from tunekit.config import config_json

    from .kernels import matmul

    m = n = k = 4096
    a, b, c = matmul.inputs(m, n, k, dtype=torch.bfloat16, device="cuda")
    scratch = tempfile.mkdtemp(prefix="tunekit-demo-")  # the two cold compile caches and the store
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    print(f"GEMM {m}x{n}x{k} bf16 on {torch.cuda.get_device_name()}: tunekit over {len(matmul.space())} configs "
          f"(strategy {strategy or 'default'}, {seconds:g} s budget) against stock triton.autotune over the "
          "tutorial's 8 configs, each from its own cold compile cache.")
    results = {}
    for name in ("tunekit", "stock"):
        os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, f"cache-{name}")
        fresh = triton.jit(matmul.matmul_kernel.fn)
        if name == "tunekit":
            kernel = tunekit.autotune(space=matmul.space(), key=["M", "N", "K"], strategy=strategy,
                                      budget=tunekit.Budget(seconds=seconds), store=os.path.join(scratch, "store.db"))(fresh)
        else:
            kernel = triton.autotune(matmul.tutorial_configs(), key=["M", "N", "K"])(fresh)
        start = time.perf_counter()
        matmul.launch(kernel, a, b, c)
        torch.cuda.synchronize()
        results[name] = (kernel, time.perf_counter() - start)
        torch.testing.assert_close(c, torch.matmul(a, b), rtol=2e-2, atol=2e-1)
    calls: dict[str, Callable[..., Any]] = {
        name: (lambda kernel=kernel: matmul.launch(kernel, a, b, c)) for name, (kernel, _) in results.items()}
    calls["torch.matmul"] = lambda: torch.matmul(a, b)
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            samples[name].append(triton.testing.do_bench(call, warmup=25, rep=100))
    table = []
    for name, values in samples.items():
        ratio = statistics.median(x / y for x, y in zip(values, samples["torch.matmul"]))
        tuned = results.get(name)
        table.append([name, f"{statistics.median(values) * 1e3:.1f}", f"{ratio:.3f}",
                      f"{tuned[1]:.1f}" if tuned else "", json.loads(config_json(tuned[0].best_config)) if tuned else ""])
    print_table(table, ["", "median us", "/ torch.matmul", "tuning s", "config"])
    print(f"(medians of {rounds} interleaved do_bench rounds; ratios per round)")
    return 0
