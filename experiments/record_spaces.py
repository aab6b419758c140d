"""Record complete search spaces of the kernel suite: every config at every shape, then Kernel Tuner files.

For each kernel it first times the PyTorch equivalent (cuBLAS, SDPA, ...) at every shape, then
tunes the kernel's whole Space exhaustively at each shape with ``tunekit.autotune`` into one store
(compiles in parallel worker processes, each kernel timed as soon as it is compiled, with
``do_bench(warmup=5, rep=25)`` as design.md's facts used; the first shape compiles, the others
find the binaries in Triton's cache), and checks every config's output against the float32
reference. ``recorded.json`` and the store are written as it goes, so that a run cut off by the
device's time limit keeps what it finished. ``--export`` then writes one Kernel Tuner cache file
per kernel and shape, which ``tunekit compare`` and Kernel Tuner replay.

    python experiments/record_spaces.py --kernel matmul --workers 16 --out DIR     # on a GPU
    python experiments/record_spaces.py --out DIR [--out DIR2] --export SPACES_DIR  # anywhere
    python experiments/record_spaces.py --quick --out DIR                          # CPU interpreter

``--quick`` records only the first configs of each space (``--limit``) at tiny shapes under the
Triton interpreter: it checks the pipeline, its times mean nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

QUICK = "--quick" in sys.argv
if QUICK:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch
import triton
import triton.testing
from tunekit.kernels import (attention, attention_hopper, causal_conv1d, conv2d, cross_entropy, fp8_gemm, fused_moe,
                             gemv, grouped_gemm, layernorm_backward, matmul, matmul_hopper, matmul_splitk, rmsnorm,
                             softmax, stencil2d, vector_add, w4a16_gemm)

import tunekit
from tunekit.check import norm_relative_error
from tunekit.config import config_to_dict
from tunekit.recorded import from_store_rows, read_space, write_kernel_tuner
from tunekit.trial import Status


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
    space_options: dict = field(default_factory=dict)  # keyword arguments of module.space()
    quick_space_options: dict = field(default_factory=dict)  # the same under --quick


#: The GEMMs and the Hopper attention are recorded in bf16 on the GPU; the Triton interpreter computes
#: bf16 wrongly (numpy has no bf16: a 32^3 product came out with a relative error of 6e9), so the
#: quick mode uses fp16.
LOW_PRECISION = torch.float16 if QUICK else torch.bfloat16


def _matmul(shape, device, module=matmul):
    a, b, c = module.inputs(*shape, dtype=LOW_PRECISION, device=device)
    return (a, b, c), module.reference(a, b).float(), c, {}


def _splitk(shape, device):
    return _matmul(shape, device, matmul_splitk)


def _matmul_hopper(shape, device):
    return _matmul(shape, device, matmul_hopper)


def _rows(module):
    def make(shape, device):
        tensors = module.inputs(*shape, dtype=torch.float16, device=device)
        return tensors, module.reference(*tensors[:-1]).float(), tensors[-1], {}

    return make


def _attention(shape, device, module=attention, dtype=torch.float16):
    *dims, causal = shape
    q, k, v, o = module.inputs(*dims, dtype=dtype, device=device)
    return (q, k, v, o), module.reference(q, k, v, causal).float(), o, {"causal": causal}


def _attention_hopper(shape, device):
    """In bf16, as the live benchmark (benchmarks/hopper_live.py) runs it (see LOW_PRECISION)."""
    return _attention(shape, device, attention_hopper, LOW_PRECISION)


def _vector_add(shape, device):
    x, y, out = vector_add.inputs(*shape, device=device)
    return (x, y, out), vector_add.reference(x, y), out, {}


def _grouped_gemm(shape, device):
    a, b, m_sizes, c = grouped_gemm.inputs(*shape, dtype=LOW_PRECISION, device=device)
    return (a, b, m_sizes, c), grouped_gemm.reference(a, b, m_sizes).float(), c, {}


def _fp8_gemm(shape, device):
    """FP8 operands on the GPU and under the interpreter alike (Triton 3.9's interpreter runs the FP8
    dot); the output is bf16 on the GPU, fp16 in --quick (LOW_PRECISION)."""
    tensors = fp8_gemm.inputs(*shape, dtype=LOW_PRECISION, device=device)
    return tensors, fp8_gemm.reference(*tensors[:-1]), tensors[-1], {}


def _layernorm_backward(shape, device):
    tensors = layernorm_backward.inputs(*shape, dtype=LOW_PRECISION, device=device)
    return tensors, layernorm_backward.reference(*tensors[:5]), tensors[-1], {}


def _conv2d(shape, device):
    *dims, stride, pad = shape
    x, weight, y = conv2d.inputs(*dims, stride, pad, dtype=LOW_PRECISION, device=device)
    return (x, weight, y), conv2d.reference(x, weight, stride, pad), y, {"stride": stride, "pad": pad}


def _cross_entropy(shape, device):
    """The recorded check compares the gradient (the large output); the loss per row is compared
    by tunekit's own check while tuning (with the first config's) and in tests/test_corpus_kernels.py."""
    logits, targets, loss, grad = cross_entropy.inputs(*shape, dtype=LOW_PRECISION, device=device)
    return (logits, targets, loss, grad), cross_entropy.reference(logits, targets)[1], grad, {}


def _fused_moe(shape, device):
    tensors = fused_moe.inputs(*shape, dtype=LOW_PRECISION, device=device)
    return tensors, fused_moe.reference(*tensors[:-1]), tensors[-1], {}


def _in_own_dtype(module):
    """The held-out families' inputs in each kernel's own dtypes (the output last)."""
    def make(shape, device):
        tensors = module.inputs(*shape, device=device)
        return tensors, module.reference(*tensors[:-1]), tensors[-1], {}

    return make


def _rms_norm(x, w, y):
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, eps=rmsnorm.EPS)


def _cublas(a, b, c):
    return torch.matmul(a, b)


def _sdpa(q, k, v, o, causal):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _softmax(x, y):
    return torch.softmax(x, dim=-1)


def _add(x, y, out):
    return x + y


#: What a PyTorch user would call instead, in the kernel's own dtype (cuBLAS for the GEMMs,
#: FlashAttention through SDPA): the "PyTorch" column of the recorded spaces table (docs/research/h200-spaces.md).
TORCH_EQUIVALENT = {
    "matmul": _cublas, "matmul_heldout": _cublas, "matmul_splitk": _cublas, "matmul_unconstrained": _cublas,
    "matmul_hopper": _cublas, "softmax": _softmax, "rmsnorm": _rms_norm, "attention": _sdpa,
    "attention_hopper": _sdpa, "vector_add": _add,
    "grouped_gemm": grouped_gemm.torch_grouped, "fp8_gemm": fp8_gemm.torch_scaled_mm,
    "layernorm_backward": layernorm_backward.torch_backward, "conv2d": conv2d.torch_conv,
    "cross_entropy": cross_entropy.torch_cross_entropy, "fused_moe": fused_moe.torch_moe,
    "w4a16_gemm": w4a16_gemm.torch_dequantized_matmul, "gemv": gemv.torch_mv, "stencil2d": stencil2d.torch_conv,
    "causal_conv1d": causal_conv1d.torch_conv1d,
}
#: How the table names each call.
CALL_NAMES = {_cublas: "`torch.matmul` (cuBLAS)", _sdpa: "`F.scaled_dot_product_attention`",
              _softmax: "`torch.softmax`", _rms_norm: "`F.rms_norm`", _add: "`x + y`",
              grouped_gemm.torch_grouped: "`torch._grouped_mm`", fp8_gemm.torch_scaled_mm: "`torch._scaled_mm`",
              layernorm_backward.torch_backward: "`aten.native_layer_norm_backward`",
              conv2d.torch_conv: "`F.conv2d` (cuDNN, channels-last)",
              cross_entropy.torch_cross_entropy: "`F.cross_entropy` forward and backward",
              fused_moe.torch_moe: "a loop of `torch.matmul` over experts",
              w4a16_gemm.torch_dequantized_matmul: "`torch.matmul` on the weight dequantised beforehand",
              gemv.torch_mv: "`torch.mv`", stencil2d.torch_conv: "single-channel 3x3 `F.conv2d`",
              causal_conv1d.torch_conv1d: "depthwise `F.conv1d` and `F.silu`"}


SUITES = {
    "matmul": Suite(matmul, matmul.matmul_kernel, ["M", "N", "K"],
                    {"square": (4096, 4096, 4096), "large_k": (1024, 1024, 16384), "small_k": (8192, 8192, 256),
                     "decode": (64, 8192, 8192)},
                    {"tiny": (32, 32, 32)}, _matmul),
    # GEMM shapes from decode-sized to square that no rule or strategy was designed on: the held-out
    # shapes of `tunekit store heuristics` (experiments/heuristics.py). Every M, N, K divisible by 16,
    # as the shapes above: the binaries compiled for the first shape serve the others.
    "matmul_heldout": Suite(matmul, matmul.matmul_kernel, ["M", "N", "K"],
                            {"m16_n4096_k4096": (16, 4096, 4096), "m3072_cube": (3072, 3072, 3072),
                             "m128_n4096_k14336": (128, 4096, 14336), "m1024_n5120_k5120": (1024, 5120, 5120),
                             "m32_n14336_k4096": (32, 14336, 4096), "m2048_n8192_k1024": (2048, 8192, 1024),
                             "m256_n11008_k4096": (256, 11008, 4096), "m6144_n6144_k2048": (6144, 6144, 2048),
                             "m512_n4096_k11008": (512, 4096, 11008), "m2048_n2048_k8192": (2048, 2048, 8192),
                             "m8192_n4096_k512": (8192, 4096, 512), "m4096_n1024_k4096": (4096, 1024, 4096),
                             "m1536_cube": (1536, 1536, 1536), "m48_n2048_k8192": (48, 2048, 8192)},
                            {"tiny": (16, 32, 48)}, _matmul),
    # The GEMM space without its shared-memory constraint, at the shipped GEMM shapes: the configs
    # that do not fit fail at launch, with the shared memory their compile reported (issue 13's
    # measure of failure avoidance).
    "matmul_unconstrained": Suite(matmul, matmul.matmul_kernel, ["M", "N", "K"],
                                  {"square": (4096, 4096, 4096), "large_k": (1024, 1024, 16384),
                                   "small_k": (8192, 8192, 256), "decode": (64, 8192, 8192)},
                                  {"tiny": (32, 32, 32)}, _matmul, space_options={"constrained": False}),
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
    # The Hopper kernels (issue 16) at the shapes of matmul and attention above, in bf16.
    "matmul_hopper": Suite(matmul_hopper, matmul_hopper.matmul_hopper_kernel, ["M", "N", "K"],
                           {"square": (4096, 4096, 4096), "large_k": (1024, 1024, 16384),
                            "small_k": (8192, 8192, 256), "decode": (64, 8192, 8192)},
                           {"tiny": (32, 32, 32)}, _matmul_hopper, quick_space_options={"device": "interpreter"}),
    "attention_hopper": Suite(attention_hopper, attention_hopper.attention_hopper_kernel, ["seq_len", "HEAD_DIM", "CAUSAL"],
                              {"prefill_4k": (4, 32, 4096, 128, True), "long_16k": (1, 16, 16384, 128, False)},
                              {"tiny": (1, 2, 40, 32, False)}, _attention_hopper,
                              quick_space_options={"device": "interpreter"}),
    "vector_add": Suite(vector_add, vector_add.add_kernel, ["n"], {"1m": (1 << 20,)}, {"tiny": (4096,)},
                        _vector_add),
    # The corpus of kernel families the suite lacked (leave-family-out tests of the strategies), each
    # at four shapes from decode-like to large; recorded together by run_h200_record_corpus.sh, not by
    # default. Every integer argument keeps its specialisation (divisible by 16 or not) across a
    # family's shapes, so the binaries compiled at the first shape serve the others.
    "cross_entropy": Suite(cross_entropy, cross_entropy.cross_entropy_kernel, ["n_rows", "n_cols"],
                           {"rows128_vocab128k": (128, 128256), "rows2k_vocab32k": (2048, 32000),
                            "rows1k_vocab256k": (1024, 256000), "rows4k_vocab128k": (4096, 128256)},
                           {"tiny": (9, 700)}, _cross_entropy),
    "layernorm_backward": Suite(layernorm_backward, layernorm_backward.layernorm_bwd_dx_kernel,
                                ["n_rows", "n_cols"],
                                {"rows256_n8k": (256, 8192), "rows2k_n4k": (2048, 4096),
                                 "rows8k_n8k": (8192, 8192), "rows32k_n1k": (32768, 1024)},
                                {"tiny": (9, 700)}, _layernorm_backward,
                                # the partial sums' layout depends on GROUP_SIZE_M: tunekit's check compares
                                # dx; the check after tuning compares dx, dw and db (both kernels)
                                {"reset_to_zero": ["lock_ptr"], "check_outputs": ["dx_ptr"]}),
    # ResNet layers, 3x3 with padding 1: batch 1 at the last stage, batch 8 and 32 at earlier ones,
    # and a stride-2 downsampling layer
    "conv2d": Suite(conv2d, conv2d.conv2d_nhwc_kernel,
                    ["M", "H", "W", "C", "K", "P", "Q", "R", "S", "stride", "pad"],
                    {"b1_7x7_c512": (1, 7, 7, 512, 512, 3, 3, 1, 1),
                     "b8_14x14_c256": (8, 14, 14, 256, 256, 3, 3, 1, 1),
                     "b32_56x56_c128_s2": (32, 56, 56, 128, 128, 3, 3, 2, 1),
                     "b32_56x56_c64": (32, 56, 56, 64, 64, 3, 3, 1, 1)},
                    {"tiny": (2, 9, 7, 24, 40, 3, 3, 2, 1)}, _conv2d),
    # (groups, total rows, N, K): mixture-of-experts routings (some groups empty) from decode to prefill
    "grouped_gemm": Suite(grouped_gemm, grouped_gemm.grouped_gemm_kernel, ["G", "N", "K", "M_TOTAL"],
                          {"decode_g8": (8, 64, 4096, 4096), "g24_n8k": (24, 2048, 8192, 2048),
                           "g40_n2k": (40, 4096, 2048, 1024), "prefill_g8": (8, 8192, 4096, 4096)},
                          {"tiny": (3, 48, 40, 56)}, _grouped_gemm),
    "fp8_gemm": Suite(fp8_gemm, fp8_gemm.fp8_gemm_kernel, ["M", "N", "K"],
                      {"decode": (32, 8192, 8192), "m256_n14k": (256, 14336, 4096), "square": (4096, 4096, 4096),
                       "m8k_n14k": (8192, 14336, 4096)},
                      {"tiny": (40, 72, 160)}, _fp8_gemm),
    # (tokens, experts, top k, N, K): Qwen3-30B-A3B's gate-and-up (1536x2048) and down (2048x768)
    # projections, OLMoE's gate-and-up (2048x2048)
    "fused_moe": Suite(fused_moe, fused_moe.fused_moe_kernel, ["N", "K", "EM", "num_valid_tokens"],
                       {"decode_e128": (16, 128, 8, 1536, 2048), "batch512_e64": (512, 64, 8, 2048, 2048),
                        "prefill_e128": (4096, 128, 8, 1536, 2048),
                        "prefill_e128_down": (4096, 128, 8, 2048, 768)},
                       {"tiny": (20, 12, 8, 48, 80)}, _fused_moe),
    # The held-out families (corpus v2): recorded after every design choice of the default search was
    # made, to judge it once on kernels no choice saw. Shapes from decode to large, every integer
    # argument divisible by 16 at every shape, as above.
    # (M, N, K): Llama-3-8B's projections, from a decode batch of 16 to a 2k-token prefill
    "w4a16_gemm": Suite(w4a16_gemm, w4a16_gemm.w4a16_gemm_kernel, ["M", "N", "K"],
                        {"decode_m16": (16, 4096, 4096), "m64_n14k": (64, 14336, 4096),
                         "m256_down": (256, 4096, 14336), "prefill_m2k": (2048, 4096, 4096)},
                        {"tiny": (40, 80, 256)}, _in_own_dtype(w4a16_gemm)),
    # (N, K): the same projections and a 128k-vocabulary head, at batch 1
    "gemv": Suite(gemv, gemv.gemv_kernel, ["N", "K"],
                  {"n4k_k4k": (4096, 4096), "n14k_k4k": (14336, 4096), "n4k_k14k": (4096, 14336),
                   "lm_head_128k": (128256, 4096)},
                  {"tiny": (70, 1000)}, _in_own_dtype(gemv), {"reset_to_zero": ["y_ptr"]}),
    # (H, W): a small square (32 MB read and written), a large one, a tall and a wide one
    "stencil2d": Suite(stencil2d, stencil2d.stencil2d_kernel, ["H", "W"],
                       {"2k_square": (2048, 2048), "8k_square": (8192, 8192), "tall_32k_1k": (32768, 1024),
                        "wide_1k_32k": (1024, 32768)},
                       {"tiny": (37, 70)}, _in_own_dtype(stencil2d)),
    # (batch, seqlen, dim): Mamba-style widths (inner dims 1536 to 5120), long to short sequences;
    # the key lacks the batch (not a kernel argument: causal_conv1d's docstring), the shapes differ without it;
    # two shapes differing only in batch could not be recorded (the second would find the first's winner)
    "causal_conv1d": Suite(causal_conv1d, causal_conv1d.causal_conv1d_kernel, ["seqlen", "dim"],
                           {"b1_l8k_d4k": (1, 8192, 4096), "b8_l2k_d2560": (8, 2048, 2560),
                            "b32_l512_d5120": (32, 512, 5120), "b4_l16k_d1536": (4, 16384, 1536)},
                           {"tiny": (2, 50, 70)}, _in_own_dtype(causal_conv1d)),
}
#: The corpus families, in the order run_h200_record_corpus.sh records them (cheapest first).
CORPUS = ("cross_entropy", "layernorm_backward", "conv2d", "grouped_gemm", "fp8_gemm", "fused_moe")
#: The held-out families of corpus v2, in the order they were recorded.
HELD_OUT = ("causal_conv1d", "stencil2d", "w4a16_gemm", "gemv")


def config_id(params) -> str:
    return json.dumps(dict(params), sort_keys=True)


class Progress:
    """``recorded.json``, rewritten atomically after every step, so that a run cut off by the
    device's time limit still says what it finished (and the store holds every trial)."""

    def __init__(self, out: Path, quick: bool) -> None:
        self.path = out / "recorded.json"
        if self.path.exists():
            self.data = json.loads(self.path.read_text())
        else:
            self.data = {"device": "cpu (interpreter)" if quick else torch.cuda.get_device_name(),
                         "torch": torch.__version__, "triton": triton.__version__, "spaces": []}

    def entry(self, kernel: str, shape: str) -> dict:
        for row in self.data["spaces"]:
            if (row["kernel"], row["shape"]) == (kernel, shape):
                return row
        row = {"kernel": kernel, "shape": shape}
        self.data["spaces"].append(row)
        return row

    def save(self) -> None:
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self.data, indent=1))
        temporary.replace(self.path)


def record(name: str, suite: Suite, out: Path, progress: Progress, quick: bool, limit: int | None,
           workers: int | None, warmup: float = 5, rep: float = 25, only: list[str] | None = None) -> None:
    """Time the PyTorch equivalent at every shape first, then tune and verify shape by shape."""
    device = "cpu" if quick else "cuda"
    store = out / "store.db"
    shapes = suite.quick_shapes if quick else suite.shapes
    if only:
        unknown = sorted(set(only) - set(shapes))
        if unknown:
            raise SystemExit(f"{name} has no shape {', '.join(unknown)}; its shapes: {', '.join(shapes)}")
        shapes = {shape_name: shape for shape_name, shape in shapes.items() if shape_name in only}
    for shape_name, shape in shapes.items():
        row = progress.entry(name, shape_name)
        if row.get("complete"):
            raise FileExistsError(f"{out} already holds a recording of {name} at {shape_name}; tunekit does not "
                                  "overwrite it: choose a new directory")
        tensors, _, _, launch_options = suite.make(shape, device)
        row.update(dims=list(shape), torch_ms=None)
        if not quick:
            equivalent = TORCH_EQUIVALENT[name]
            try:
                row["torch_ms"] = triton.testing.do_bench(lambda: equivalent(*tensors, **launch_options),
                                                          warmup=warmup, rep=rep)
            except Exception as failure:  # noqa: BLE001 - PyTorch's time is a comparison; the space is the point
                row["torch_error"] = repr(failure)[:500]
                print(f"{name} {shape_name}: the PyTorch equivalent failed ({row['torch_error']}); recording goes on",
                      flush=True)
        progress.save()
    for shape_name, shape in shapes.items():
        row = progress.entry(name, shape_name)
        budget = tunekit.Budget(evals=limit) if limit else None
        space = suite.module.space(**(suite.quick_space_options if quick else suite.space_options))
        kernel = tunekit.autotune(space=space, key=suite.key, strategy="exhaustive", budget=budget,
                                  store=store, warmup=warmup, rep=rep, finalists=3, compile_workers=workers,
                                  **suite.options)(suite.kernel)
        tensors, expected, output, launch_options = suite.make(shape, device)
        start = time.perf_counter()
        suite.module.launch(kernel, *tensors, **launch_options)
        if not quick:
            torch.cuda.synchronize()
        row["tuning_seconds"] = time.perf_counter() - start
        row["winner_relative_error"] = norm_relative_error(output, expected)
        if kernel.run_id is None:  # the store already held this key's winner: nothing was recorded now
            raise FileExistsError(f"{out} already holds a recording of {name} at {shape_name}; tunekit does not "
                                  "overwrite it: choose a new directory")
        (run,) = [r for r in kernel.store.runs(kernel=suite.kernel.__name__) if r["run_id"] == kernel.run_id]
        row.update(key=run["key"], run_id=kernel.run_id, winner=str(kernel.best_config), errors={},
                   do_bench={"warmup": warmup, "rep": rep})
        # every config that ran, launched once more on zeroed outputs and checked against the reference
        for trial in kernel.trials:
            if trial.ok:
                output.zero_()
                suite.module.launch(suite.kernel, *tensors, **launch_options, **trial.config.all_kwargs())
                row["errors"][config_id(config_to_dict(trial.config))] = norm_relative_error(output, expected)
        statuses: dict[str, int] = {}
        for trial in kernel.trials:
            statuses[trial.status.value] = statuses.get(trial.status.value, 0) + 1
        ok = [t for t in kernel.trials if t.ok]
        row.update(configs=len(kernel.trials), statuses=statuses, complete=True,
                   best_ms=min((t.time_ms for t in ok), default=None),
                   wrong=sum(error > suite.tolerance for error in row["errors"].values()) + statuses.get("wrong", 0),
                   tolerance=suite.tolerance)
        progress.save()
        torch_ms = row["torch_ms"]
        print(f"{name:14s} {shape_name:11s} {row['configs']:5d} configs, {statuses}, {row['wrong']} wrong, "
              f"best {row['best_ms']} ms, torch {torch_ms} ms, winner error {row['winner_relative_error']:.1e}, "
              f"{row['tuning_seconds']:.0f} s", flush=True)


def smoke(name: str, suite: Suite, quick: bool) -> bool:
    """Launch the first config of the kernel's space once at each of its quick shapes (on the GPU;
    under the interpreter with ``--quick``) and check it against the reference; records nothing.
    Prints ``SMOKE-START name`` before and ``SMOKE-OK name`` or ``SMOKE-FAIL name`` after, so that a
    caller can tell a family that hung (started, never finished) from one not tried."""
    device = "cpu" if quick else "cuda"
    print(f"SMOKE-START {name}", flush=True)
    configs = suite.module.space(**(suite.quick_space_options if quick else suite.space_options)).configs()
    ok = True
    for shape_name, shape in suite.quick_shapes.items():
        tensors, expected, output, launch_options = suite.make(shape, device)
        for config in configs[:1]:
            start = time.perf_counter()
            try:
                output.zero_()
                suite.module.launch(suite.kernel, *tensors, **launch_options, **config.all_kwargs())
                if not quick:
                    torch.cuda.synchronize()
                error = norm_relative_error(output, expected)
                verdict = f"error {error:.1e}"
                ok &= error <= suite.tolerance
            except Exception as failure:  # noqa: BLE001 - a smoke reports every failure and goes on
                verdict = f"failed: {failure!r}"[:300]
                ok = False
            print(f"  {name} {shape_name} {config_id(config_to_dict(config))}: {verdict}, "
                  f"{time.perf_counter() - start:.1f} s", flush=True)
    print(f"SMOKE-{'OK' if ok else 'FAIL'} {name}", flush=True)
    return ok


#: What ``index.json`` keeps of each recording (``recorded.json`` also holds every config's error).
INDEX_FIELDS = ("kernel", "shape", "dims", "key", "configs", "valid", "wrong", "statuses", "best_ms", "torch_ms",
                "tolerance", "winner", "winner_relative_error", "tuning_seconds", "do_bench", "file")


def export(outs: list[Path], destination: Path, append: bool = False) -> list[Path]:
    """Kernel Tuner files (``destination/KERNEL-SHAPE.json.gz``) of every complete recording in
    the ``outs`` directories, and ``destination/index.json`` describing them. With ``append`` an
    existing index recorded with the same device and software gains the new spaces. Nothing in
    ``destination`` is overwritten, and an export that fails leaves it as it was: the files are
    written aside first, then moved in, then the index is replaced.

    Each config was compiled once, at the first shape, where the binary serves every shape (the
    specialisations on divisibility by 16 agree); a kernel whose key holds a compile-time constant
    (attention's ``CAUSAL``) compiles again for each value. Every shape's record carries the cold
    compile time: the largest the store holds for the config. Configs whose output was off by
    more than the tolerance are recorded as ``wrong``.
    """
    index_path = destination / "index.json"
    index, environment = [], None
    if os.path.lexists(index_path) and not append:
        raise FileExistsError(f"{index_path} exists; tunekit does not overwrite files: choose a new directory "
                              "or --append to it")
    if os.path.lexists(index_path):
        try:
            existing = json.loads(index_path.read_text())
            environment = {key: existing[key] for key in ("device", "torch", "triton")}
            index = existing["spaces"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{index_path} is not an index this script wrote ({error!r}); nothing was exported") from None
    recordings = []
    for out in outs:
        if not (out / "store.db").is_file():  # ResultsStore would create an empty one
            raise FileNotFoundError(f"{out} has no store.db (gunzip a shipped store.db.gz first); nothing was exported")
        data = json.loads((out / "recorded.json").read_text())
        found = {key: data[key] for key in ("device", "torch", "triton")}
        if environment not in (None, found):
            raise ValueError(f"{out} was recorded with {found}, the others with {environment}: one index holds one")
        environment = found
        recordings += [(out, row) for row in data["spaces"] if row.get("complete")]
    names = [_space_file(row, destination).name for _, row in recordings]
    repeated = sorted({name for name in names if names.count(name) > 1} | {row["file"] for row in index} & set(names))
    taken = [name for name in names if os.path.lexists(destination / name)]
    if repeated or taken:
        raise FileExistsError(f"{', '.join(sorted(set(repeated + taken)))}: recorded more than once or already in "
                              f"{destination}; tunekit does not overwrite files")
    destination.mkdir(parents=True, exist_ok=True)
    aside = Path(tempfile.mkdtemp(prefix=".export-", dir=destination))
    try:
        for out, row in recordings:
            path = _export_one(row, tunekit.ResultsStore(out / "store.db"), aside)
            records = read_space(path).records
            # wrong: off the reference in the check after tuning, or already in tunekit's own check while tuning
            row.update(valid=sum(r.ok for r in records), wrong=sum(r.status is Status.WRONG for r in records),
                       file=path.name)
            index.append({key: row.get(key) for key in INDEX_FIELDS})
        new_index = aside / "index.json"
        new_index.write_text(json.dumps({**(environment or {}), "spaces": index}, indent=1) + "\n")
        for name in names:
            (aside / name).rename(destination / name)
        new_index.replace(index_path)
    finally:
        shutil.rmtree(aside, ignore_errors=True)
    return [destination / name for name in names]


def _space_file(row: dict, destination: Path) -> Path:
    return destination / f"{row['kernel']}-{row['shape']}.json.gz"


def _export_one(row: dict, store: tunekit.ResultsStore, destination: Path) -> Path:
    suite = SUITES[row["kernel"]]
    rows = store.rows(kernel=suite.kernel.__name__)
    cold_compile: dict[str, float] = {}
    for trial in rows:
        if trial.get("compile_seconds") is not None:
            cold_compile[trial["config"]] = max(cold_compile.get(trial["config"], 0.0), trial["compile_seconds"])
    space = from_store_rows([dict(r, compile_seconds=cold_compile.get(r["config"], r.get("compile_seconds")))
                             for r in rows if r["run_id"] == row["run_id"]],
                            name=f"{row['kernel']}/{row['shape']}")
    records = []
    for record in space.records:
        error = row["errors"].get(config_id(record.params))
        if error is None:
            records.append(record)
            continue
        wrong = error > row["tolerance"]
        records.append(replace(record, status=Status.WRONG if wrong else record.status,
                               time_ms=None if wrong else record.time_ms,
                               extra={**record.extra, "relative_error": error if math.isfinite(error) else 1e300}))
    space.records = records
    return write_kernel_tuner(space, _space_file(row, destination))


def markdown_table(index: dict) -> str:
    """The recorded spaces table (docs/research/h200-spaces.md) of an ``index.json``; rows timed with
    other ``do_bench`` settings than the default's are marked, with a note under the table."""
    default = {"warmup": 5, "rep": 25}
    marks: dict[str, str] = {}
    lines = ["| kernel | shape | dims | configs | valid | wrong | best ms | PyTorch ms | best / PyTorch | PyTorch call |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in index["spaces"]:
        dims = "x".join(str(d) for d in row["dims"] if not isinstance(d, bool))
        dims += ", causal" if row["dims"][-1] is True else ""
        timing = {key: float(value) for key, value in (row.get("do_bench") or default).items()}
        setting = f"warmup={timing['warmup']:g}, rep={timing['rep']:g}"
        mark = marks.setdefault(setting, "*" * (len(marks) + 1)) if timing != default else ""
        best, torch_ms = row["best_ms"], row["torch_ms"]
        ratio = f"{best / torch_ms:.2f}" if best is not None and torch_ms else "-"
        lines.append(f"| {row['kernel']} | {row['shape']}{mark} | {dims} | {row['configs']} "
                     f"| {row['valid']} | {row['wrong']} | {_ms(best)} | {_ms(torch_ms)} "
                     f"| {ratio} | {CALL_NAMES[TORCH_EQUIVALENT[row['kernel']]]} |")
    notes = "".join(f" ({mark}: `do_bench({setting})`)" for setting, mark in marks.items())
    return "\n".join([f"{index['device']}, torch {index['torch']}, Triton {index['triton']}; times are medians of "
                      f"`do_bench(warmup=5, rep=25)`{notes}, PyTorch's measured in the same run.", ""] + lines)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def space_facts(index_path: Path) -> str:
    """Per kernel, from the exported files beside ``index.json``: cold compile seconds (median,
    99th percentile, sum over the configs of its first shape) and the largest output error."""
    import numpy as np

    lines, seen = [], set()
    errors = []
    for row in json.loads(index_path.read_text())["spaces"]:
        space = read_space(index_path.parent / row["file"])
        errors += [r.extra["relative_error"] for r in space.records if "relative_error" in r.extra]
        if row["kernel"] in seen:
            continue
        seen.add(row["kernel"])
        compile_s = np.array([r.compile_ms for r in space.records]) / 1e3
        lines.append(f"{row['kernel']}: compile s median {np.median(compile_s):.2f}, p99 "
                     f"{np.percentile(compile_s, 99):.3g}, sum {compile_s.sum():.0f} over {len(compile_s)} configs")
    lines.append(f"largest relative error of any config: {max(errors):.1e} over {len(errors)} measurements")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", action="append", choices=sorted(SUITES), help="default: every kernel of the suite at its shipped shapes (not matmul_heldout, "
                        "matmul_unconstrained, matmul_hopper, attention_hopper, nor the corpus families: "
                        f"{', '.join(CORPUS + HELD_OUT)})")
    parser.add_argument("--quick", action="store_true", help="CPU interpreter, tiny shapes, --limit configs")
    parser.add_argument("--limit", type=int, default=None, help="record only the first N configs of each space")
    parser.add_argument("--workers", type=int, default=None, help="compile workers")
    parser.add_argument("--shape", action="append", help="record only these shapes of the kernel (repeatable)")
    parser.add_argument("--warmup", type=float, default=5, help="do_bench's warmup, ms (default 5)")
    parser.add_argument("--rep", type=float, default=25, help="do_bench's rep, ms (default 25)")
    parser.add_argument("--export", metavar="DIR", help="write the Kernel Tuner files of --out's recordings to DIR")
    parser.add_argument("--append", action="store_true", help="with --export: add to DIR's existing index.json")
    parser.add_argument("--smoke", action="store_true", help="launch the first config of each --kernel (default: "
                        "the corpus families) at its quick shapes and check it; records nothing (exit status 1 "
                        "if one failed)")
    parser.add_argument("--table", metavar="INDEX", help="print the recorded spaces table of an exported index.json")
    parser.add_argument("--out", action="append",
                        help="where to record; with --export, the recordings to export (repeatable)")
    args = parser.parse_args()
    if args.table:
        index_path = Path(args.table)
        print(markdown_table(json.loads(index_path.read_text())))
        print(space_facts(index_path))
        return
    if args.smoke:
        names = args.kernel or list(CORPUS)
        results = [smoke(name, SUITES[name], args.quick) for name in names]
        raise SystemExit(0 if all(results) else 1)
    if not args.out:
        parser.error("--out is required")
    if args.append and not args.export:
        parser.error("--append goes with --export")
    if args.export:
        for path in export([Path(out) for out in args.out], Path(args.export), args.append):
            print(path)
        return
    if len(args.out) > 1:
        parser.error("record into one --out directory at a time")
    out = Path(args.out[0])
    out.mkdir(parents=True, exist_ok=True)
    limit = args.limit or (3 if args.quick else None)
    progress = Progress(out, args.quick)
    for name in args.kernel or sorted(set(SUITES) - {"matmul_heldout", "matmul_unconstrained", "matmul_hopper",
                                                     "attention_hopper", *CORPUS, *HELD_OUT}):
        record(name, SUITES[name], out, progress, args.quick, limit, args.workers, args.warmup, args.rep, args.shape)


if __name__ == "__main__":
    main()
