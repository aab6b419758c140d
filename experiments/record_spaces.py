"""Record complete search spaces of the kernel suite: every config at every shape, then Kernel Tuner files.

For each kernel and shape, ``tunekit.autotune`` tunes the kernel's whole Space exhaustively into
one store (compiles in parallel worker processes; ``do_bench(warmup=5, rep=25)`` as design.md's
facts used), times the PyTorch or cuBLAS equivalent in the same run, checks the winner's output
against the reference, and exports the space as a Kernel Tuner cache file that ``tunekit compare``
and Kernel Tuner replay.

    python experiments/record_spaces.py --kernel matmul --out DIR            # on a GPU, real shapes
    python experiments/record_spaces.py --quick --out DIR                    # CPU interpreter, tiny shapes

``--quick`` records only the first configs of each space (``--limit``) at tiny shapes under the
Triton interpreter: it checks the pipeline, its times mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

QUICK = "--quick" in sys.argv
if QUICK:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

import tunekit  # noqa: E402
from tunekit.kernels import attention, matmul, matmul_splitk, rmsnorm, softmax, vector_add  # noqa: E402
from tunekit.recorded import from_store_rows, write_kernel_tuner  # noqa: E402


@dataclass(frozen=True)
class Suite:
    """How to record one kernel: its module, key, shapes, and what its launch needs."""

    module: Any
    kernel: Any
    key: list[str]
    shapes: dict[str, tuple]
    quick_shapes: dict[str, tuple]
    make: Callable  # (shape, device) -> (tensors, reference output, output tensor, launch kwargs)
    options: dict = field(default_factory=dict)
    tolerance: float = 2e-2


#: GEMMs are recorded in bf16 on the GPU; the Triton interpreter computes bf16 wrongly (numpy has no
#: bf16: a 32^3 product came out with a relative error of 6e9), so the quick mode uses fp16.
GEMM_DTYPE = torch.float16 if QUICK else torch.bfloat16


def _matmul(shape, device, module=matmul):
    a, b, c = module.inputs(*shape, dtype=GEMM_DTYPE, device=device)
    return (a, b, c), module.reference(a, b).float(), c, {}


def _splitk(shape, device):
    return _matmul(shape, device, matmul_splitk)


def _rows(module):
    def make(shape, device):
        tensors = module.inputs(*shape, dtype=torch.float16, device=device)
        return tensors, module.reference(*tensors[:-1]).float(), tensors[-1], {}

    return make


def _attention(shape, device):
    *dims, causal = shape
    q, k, v, o = attention.inputs(*dims, dtype=torch.float16, device=device)
    return (q, k, v, o), attention.reference(q, k, v, causal).float(), o, {"causal": causal}


def _vector_add(shape, device):
    x, y, out = vector_add.inputs(*shape, device=device)
    return (x, y, out), vector_add.reference(x, y), out, {}


SUITES = {
    "matmul": Suite(matmul, matmul.matmul_kernel, ["M", "N", "K"],
                    {"square": (4096, 4096, 4096), "large_k": (1024, 1024, 16384), "small_k": (8192, 8192, 256),
                     "decode": (64, 8192, 8192)},
                    {"tiny": (32, 32, 32)}, _matmul),
    "matmul_splitk": Suite(matmul_splitk, matmul_splitk.matmul_splitk_kernel, ["M", "N", "K"],
                           {"decode": (64, 8192, 8192), "decode_16": (16, 4096, 14336)}, {"tiny": (16, 32, 64)},
                           _splitk, {"reset_to_zero": ["c_ptr"]}),
    "softmax": Suite(softmax, softmax.softmax_kernel, ["n_rows", "n_cols"],
                     {"wide": (4096, 32768), "vocab": (1024, 128256)}, {"tiny": (8, 300)}, _rows(softmax)),
    "rmsnorm": Suite(rmsnorm, rmsnorm.rmsnorm_kernel, ["n_rows", "n_cols"],
                     {"hidden_4k": (16384, 4096), "hidden_8k": (16384, 8192)}, {"tiny": (8, 300)}, _rows(rmsnorm)),
    "attention": Suite(attention, attention.attention_kernel, ["seq_len", "HEAD_DIM", "CAUSAL"],
                       {"prefill_4k": (4, 32, 4096, 128, True), "long_16k": (1, 16, 16384, 128, False)},
                       {"tiny": (1, 2, 40, 32, False)}, _attention),
    "vector_add": Suite(vector_add, vector_add.add_kernel, ["n"], {"1m": (1 << 20,)}, {"tiny": (4096,)},
                        _vector_add),
}


def record(name: str, suite: Suite, out: Path, quick: bool, limit: int | None, workers: int | None) -> list[dict]:
    device = "cpu" if quick else "cuda"
    store = out / "store.db"
    rows = []
    for shape_name, shape in (suite.quick_shapes if quick else suite.shapes).items():
        budget = tunekit.Budget(evals=limit) if limit else None
        kernel = tunekit.autotune(space=suite.module.space(), key=suite.key, strategy="exhaustive", budget=budget,
                                  store=store, warmup=5, rep=25, finalists=3, compile_workers=workers,
                                  **suite.options)(suite.kernel)
        tensors, expected, output, launch_options = suite.make(shape, device)
        start = time.perf_counter()
        suite.module.launch(kernel, *tensors, **launch_options)
        seconds = time.perf_counter() - start
        error = ((output.float() - expected).norm() / expected.norm()).item()
        reference_ms = None
        if not quick:
            import triton.testing

            reference_ms = triton.testing.do_bench(lambda: suite.module.reference(*tensors[:-1]), warmup=5, rep=25)
        statuses: dict[str, int] = {}
        for trial in kernel.trials:
            statuses[trial.status.value] = statuses.get(trial.status.value, 0) + 1
        if kernel.run_id is None:  # the store already held this key's winner: nothing was recorded now
            raise FileExistsError(f"{out} already holds a recording of {name} at {shape_name}; tunekit does not "
                                  "overwrite it: choose a new directory")
        (run,) = [r for r in kernel.store.runs(kernel=suite.kernel.__name__) if r["run_id"] == kernel.run_id]
        key_text = json.loads(run["key"])
        space = from_store_rows(kernel.store.rows(kernel=suite.kernel.__name__, key=run["key"]),
                                name=f"{name}/{shape_name}")
        write_kernel_tuner(space, out / f"{name}-{shape_name}.json.gz")  # refuses to overwrite a file
        best = min((t.time_ms for t in kernel.trials if t.ok), default=float("nan"))
        rows.append({"kernel": name, "shape": shape_name, "dims": list(shape), "key": key_text,
                     "configs": len(space), "valid": int(len(space.valid_times)), "statuses": statuses,
                     "best_ms": best, "reference_ms": reference_ms, "winner": str(kernel.best_config),
                     "winner_relative_error": error, "tuning_seconds": seconds, "file": f"{name}-{shape_name}.json.gz"})
        print(f"{name:14s} {shape_name:11s} {len(space):5d} configs, {statuses}, best {best:.4f} ms, "
              f"reference {reference_ms if reference_ms is None else f'{reference_ms:.4f} ms'}, "
              f"winner error {error:.1e}, {seconds:.0f} s", flush=True)
        if error > suite.tolerance:
            print(f"  WARNING: the winner's output is off by {error:.1e} (tolerance {suite.tolerance})", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", action="append", choices=sorted(SUITES), help="default: every kernel")
    parser.add_argument("--quick", action="store_true", help="CPU interpreter, tiny shapes, --limit configs")
    parser.add_argument("--limit", type=int, default=None, help="record only the first N configs of each space")
    parser.add_argument("--workers", type=int, default=None, help="compile workers")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    limit = args.limit or (3 if args.quick else None)
    rows = []
    for name in args.kernel or sorted(SUITES):
        rows += record(name, SUITES[name], out, args.quick, limit, args.workers)
    meta = {"device": "cpu (interpreter)" if args.quick else torch.cuda.get_device_name(),
            "torch": torch.__version__, "triton": __import__("triton").__version__, "spaces": rows}
    (out / "recorded.json").write_text(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
