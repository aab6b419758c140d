"""The corpus kernel families (grouped GEMM, FP8 GEMM, layer-norm backward, implicit-GEMM convolution,
cross-entropy, fused MoE) against their float32 references under the interpreter, at small shapes."""

from __future__ import annotations

import inspect

import pytest
import torch
from tunekit.kernels import conv2d, cross_entropy, fp8_gemm, fused_moe, grouped_gemm, layernorm_backward

import tunekit
from tunekit.check import norm_relative_error

pytestmark = pytest.mark.interpreter_loops

KERNELS = {
    grouped_gemm: grouped_gemm.grouped_gemm_kernel, fp8_gemm: fp8_gemm.fp8_gemm_kernel,
    layernorm_backward: layernorm_backward.layernorm_bwd_dx_kernel, conv2d: conv2d.conv2d_nhwc_kernel,
    cross_entropy: cross_entropy.cross_entropy_kernel, fused_moe: fused_moe.fused_moe_kernel,
}
#: The valid configs of each Space (the recording's cost grows with them; run_h200_record_corpus.sh's estimate).
SIZES = {grouped_gemm: 178, fp8_gemm: 184, layernorm_backward: 164, conv2d: 150, cross_entropy: 96, fused_moe: 178}



@pytest.mark.parametrize("module", list(KERNELS), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_spaces_are_sized_for_one_recording_and_constrained(module):
    space = module.space()
    assert len(space) == SIZES[module]
    assert len(space) < space.cartesian_size  # the constraints remove configs
    parameters = set(inspect.signature(KERNELS[module].fn).parameters)
    assert set(space.domains) - {"num_warps", "num_stages"} <= parameters


def test_grouped_gemm_walks_every_groups_tiles_empty_groups_included(spread):
    a, b, m_sizes, c = grouped_gemm.inputs(5, 96, 48, 80)
    assert 0 in m_sizes.tolist() and sum(m_sizes.tolist()) == 96
    expected = grouped_gemm.reference(a, b, m_sizes).float()
    for config in spread(grouped_gemm) + [{"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 64, "NUM_PROGRAMS": 3}]:
        c.fill_(float("nan"))
        grouped_gemm.launch(grouped_gemm.grouped_gemm_kernel, a, b, m_sizes, c, **config)
        assert norm_relative_error(c, expected) < 1e-3, config


def test_fp8_gemm_applies_both_scales(spread):
    a, b, a_scale, b_scale, c = fp8_gemm.inputs(40, 72, 160, dtype=torch.float16)
    assert a.dtype == b.dtype == torch.float8_e4m3fn
    expected = fp8_gemm.reference(a, b, a_scale, b_scale)
    plain = torch.randn(40, 160, generator=torch.Generator().manual_seed(0))
    assert norm_relative_error(fp8_gemm.quantize(plain)[0].float() * fp8_gemm.quantize(plain)[1], plain) < 0.05
    for config in spread(fp8_gemm):
        c.fill_(float("nan"))
        fp8_gemm.launch(fp8_gemm.fp8_gemm_kernel, a, b, a_scale, b_scale, c, **config)
        assert norm_relative_error(c, expected) < 1e-3, config


def test_layernorm_backward_matches_autograd_with_every_lock_count(spread):
    tensors = layernorm_backward.inputs(37, 300)
    x, dy, w, mean, rstd, *_, out = tensors
    expected = layernorm_backward.reference(x, dy, w, mean, rstd)
    x32, w32 = x.float().requires_grad_(), w.float().requires_grad_()
    b32 = torch.zeros_like(w32, requires_grad=True)
    torch.nn.functional.layer_norm(x32, (300,), w32, b32, eps=layernorm_backward.EPS).backward(dy.float())
    assert norm_relative_error(expected, torch.cat([x32.grad, w32.grad[None], b32.grad[None]])) < 1e-5
    # more partial-sum rows than programs, fewer, and column tiles narrower than a row
    configs = spread(layernorm_backward, 2) + [{"BLOCK_N": 128, "ROWS": 4, "GROUP_SIZE_M": 4}]
    for config in configs:
        out.fill_(float("nan"))
        layernorm_backward.launch(layernorm_backward.layernorm_bwd_dx_kernel, *tensors, **config)
        assert norm_relative_error(out[:37], expected[:37]) < 1e-3, config  # dx
        assert norm_relative_error(out[37:], expected[37:]) < 1e-3, config  # dw, db


def test_layernorm_backward_tuned_with_its_recording_options_compares_dx_only():
    """The recording's options: the locks zeroed before each launch, the partial sums (whose rows
    depend on GROUP_SIZE_M) left out of tunekit's check."""
    kernel = tunekit.autotune(space=layernorm_backward.space(), key=["n_rows", "n_cols"], strategy="random",
                              budget=tunekit.Budget(evals=3), store=None, seed=2, reset_to_zero=["lock_ptr"],
                              check_outputs=["dx_ptr"])(layernorm_backward.layernorm_bwd_dx_kernel)
    tensors = layernorm_backward.inputs(12, 200)
    layernorm_backward.launch(kernel, *tensors)
    assert [t.status.value for t in kernel.trials] == ["ok"] * 3
    assert norm_relative_error(tensors[-1], layernorm_backward.reference(*tensors[:5])) < 1e-3


@pytest.mark.parametrize("shape", [(2, 9, 7, 24, 40, 3, 3, 2, 1), (1, 6, 6, 16, 16, 1, 1, 1, 0)],
                         ids=["3x3_stride2_pad1", "1x1"])
def test_conv2d_matches_cudnn_layout_and_padding(shape, spread):
    *dims, stride, pad = shape
    x, weight, y = conv2d.inputs(*dims, stride, pad)
    expected = conv2d.reference(x, weight, stride, pad)
    assert torch.equal(conv2d.torch_conv(x.float(), weight.float(), y, stride, pad).permute(0, 2, 3, 1), expected)
    for config in spread(conv2d, 2):
        y.fill_(float("nan"))
        conv2d.launch(conv2d.conv2d_nhwc_kernel, x, weight, y, stride=stride, pad=pad, **config)
        assert norm_relative_error(y, expected) < 1e-3, config


def test_cross_entropy_loss_and_gradient_with_ignored_rows(spread):
    logits, targets, loss, grad = cross_entropy.inputs(19, 1500, dtype=torch.float16, seed=3)
    assert (targets == cross_entropy.IGNORE_INDEX).any()
    expected_loss, expected_grad = cross_entropy.reference(logits, targets)
    assert torch.allclose(expected_loss.sum() / (targets != -100).sum(),
                          torch.nn.functional.cross_entropy(logits.float(), targets))
    for config in spread(cross_entropy, 2) + [{"BLOCK_V": 512, "ROWS": 8}]:
        loss.fill_(float("nan"))
        grad.fill_(float("nan"))
        cross_entropy.launch(cross_entropy.cross_entropy_kernel, logits, targets, loss, grad, **config)
        assert norm_relative_error(loss, expected_loss) < 1e-5, config
        assert norm_relative_error(grad, expected_grad) < 1e-3, config
        assert not grad[targets == cross_entropy.IGNORE_INDEX].any()


def test_fused_moe_gathers_each_expert_and_skips_padding(spread):
    tensors = fused_moe.inputs(20, 12, 8, 48, 80, dtype=torch.float16)
    a, w, _, sorted_ids, expert_ids, _, c = tensors
    assert sorted_ids.numel() == fused_moe.ALIGN * expert_ids.numel()
    expected = fused_moe.reference(*tensors[:-1])
    assert norm_relative_error(fused_moe.torch_moe(a.float(), w.float(), *tensors[2:6], c.float()), expected) < 1e-6
    for config in spread(fused_moe, 2) + [{"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 16}]:
        c.fill_(float("nan"))
        fused_moe.launch(fused_moe.fused_moe_kernel, *tensors, **config)
        assert norm_relative_error(c, expected) < 1e-3, config


@pytest.mark.slow
def test_recording_script_records_and_exports_every_corpus_family(tmp_path):
    """``record_spaces.py --quick`` for each family, one export of them all, and a replay of the
    exported files by ``tunekit compare``."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "experiments" / "record_spaces.py"
    families = ["cross_entropy", "layernorm_backward", "conv2d", "grouped_gemm", "fp8_gemm", "fused_moe",
                "causal_conv1d", "stencil2d", "w4a16_gemm", "gemv"]
    for family in families:
        done = subprocess.run([sys.executable, str(script), "--quick", "--kernel", family, "--out",
                               str(tmp_path / family)], capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        (row,) = json.loads((tmp_path / family / "recorded.json").read_text())["spaces"]
        assert (row["statuses"], row["wrong"]) == ({"ok": 3}, 0) and max(row["errors"].values()) < 1e-3, row
    outs = [arg for family in families for arg in ("--out", str(tmp_path / family))]
    exported = subprocess.run([sys.executable, str(script), *outs, "--export", str(tmp_path / "spaces")],
                              capture_output=True, text=True, timeout=600, check=False)
    assert exported.returncode == 0, exported.stderr[-2000:]
    assert len(json.loads((tmp_path / "spaces" / "index.json").read_text())["spaces"]) == len(families)
    compared = subprocess.run([sys.executable, "-m", "tunekit.cli", "compare", "--space",
                               str(tmp_path / "spaces" / "*.json.gz"), "--strategy", "random", "--seeds", "1",
                               "--budget", "5", "--out", str(tmp_path / "compare")],
                              capture_output=True, text=True, timeout=600, check=False)
    assert compared.returncode == 0, compared.stderr[-2000:]
    assert f"{len(families)} tunings of {len(families)} spaces" in compared.stdout
