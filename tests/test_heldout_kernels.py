"""The held-out kernel families of corpus v2 (W4A16 GEMM, split-K GEMV, 2D stencil, causal conv1d)
against their references under the interpreter, at small shapes with ragged edges."""

from __future__ import annotations

import inspect
import json

import pytest
import torch
from tunekit.kernels import causal_conv1d, gemv, stencil2d, w4a16_gemm

from tunekit.check import norm_relative_error

pytestmark = pytest.mark.interpreter_loops

KERNELS = {w4a16_gemm: w4a16_gemm.w4a16_gemm_kernel, gemv: gemv.gemv_kernel, stencil2d: stencil2d.stencil2d_kernel,
           causal_conv1d: causal_conv1d.causal_conv1d_kernel}



@pytest.mark.parametrize("module", list(KERNELS), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_spaces_are_those_recorded_and_name_the_kernels_parameters(module):
    """Each Space holds exactly the configs of corpus v2's recordings of it (a changed Space would
    no longer be the kernel those files measured), fewer than its product (the constraints act)."""
    from pathlib import Path

    from tunekit.recorded import read_space

    space = module.space()
    name = module.__name__.rsplit(".", 1)[-1]
    folder = Path(__file__).resolve().parents[1] / "experiments" / "corpus" / "h200-heldout"
    recorded = [read_space(path) for path in sorted(folder.glob(f"{name}-*.json.gz"))]
    assert len(recorded) == 4
    expected = {json.dumps(config.all_kwargs(), sort_keys=True) for config in space.configs()}
    for file in recorded:
        assert {json.dumps(file.config(r).all_kwargs(), sort_keys=True) for r in file.records} == expected, file.name
    assert len(space) < space.cartesian_size
    parameters = set(inspect.signature(KERNELS[module].fn).parameters)
    assert set(space.domains) - {"num_warps", "num_stages"} <= parameters


def test_w4a16_unpacks_every_nibble_and_scales_by_group():
    values = torch.randint(0, 16, (256, 5), generator=torch.Generator().manual_seed(1))
    values[7::8, 0] = 15  # the top nibble sets int32's sign bit
    words = w4a16_gemm.pack(values)
    assert words.dtype == torch.int32 and (words < 0).any()
    # value k % 8 in bits 4 (k % 8) up: 0..7 make the word 0x76543210
    assert w4a16_gemm.pack(torch.arange(8).reshape(8, 1)).item() == 0x76543210
    scales = torch.arange(1, 11, dtype=torch.float32).reshape(2, 5)
    expected = (values.float() - 8) * scales.repeat_interleave(w4a16_gemm.GROUP_SIZE, dim=0)
    assert torch.equal(w4a16_gemm.dequantize(words, scales), expected)


def test_w4a16_gemm_matches_the_dequantised_product(spread):
    a, words, scales, c = w4a16_gemm.inputs(40, 80, 256)
    expected = w4a16_gemm.reference(a, words, scales)
    for config in spread(w4a16_gemm) + [{"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 128, "GROUP_M": 8}]:
        c.fill_(float("nan"))
        w4a16_gemm.launch(w4a16_gemm.w4a16_gemm_kernel, a, words, scales, c, **config)
        assert norm_relative_error(c, expected) < 1e-3, config
    with pytest.raises(ValueError, match="scale group"):
        w4a16_gemm.inputs(16, 32, 200)
    with pytest.raises(ValueError, match="needs 16 rows of words"):  # K unmasked: a mismatch would read past A
        w4a16_gemm.launch(w4a16_gemm.w4a16_gemm_kernel, a[:, :128], words, scales, c, **spread(w4a16_gemm)[0])
    with pytest.raises(Exception, match="inside one scale group"):  # a tile over two groups: refused, not wrong
        w4a16_gemm.launch(w4a16_gemm.w4a16_gemm_kernel, a, words, scales, c,
                          BLOCK_M=16, BLOCK_N=32, BLOCK_K=256, GROUP_M=1)


def test_gemv_slices_of_k_add_up_in_any_number(spread):
    w, x, y = gemv.inputs(70, 1000)
    expected = gemv.reference(w, x)
    # one slice storing, slices adding, and more slices than K tiles (empty slices)
    for config in spread(gemv) + [{"BLOCK_N": 16, "BLOCK_K": 512, "SPLIT_K": 8}]:
        y.zero_()
        gemv.launch(gemv.gemv_kernel, w, x, y, **config)
        assert norm_relative_error(y, expected) < 1e-5, config


def test_stencil_step_matches_the_convolution_at_every_edge(spread):
    x, out = stencil2d.inputs(37, 70)
    expected = stencil2d.reference(x)
    assert norm_relative_error(stencil2d.torch_conv(x, out), expected) < 1e-6
    for config in spread(stencil2d) + [{"BLOCK_Y": 8, "BLOCK_X": 32, "ITER_Y": 2}]:
        out.fill_(float("nan"))
        stencil2d.launch(stencil2d.stencil2d_kernel, x, out, **config)
        assert norm_relative_error(out, expected) < 1e-6, config
    with pytest.raises(ValueError, match="out of its shape and strides"):  # the kernel indexes both alike
        stencil2d.launch(stencil2d.stencil2d_kernel, x, out.T.contiguous().T, **spread(stencil2d)[0])


def test_causal_conv1d_sees_only_the_past(spread):
    x, weight, bias, out = causal_conv1d.inputs(2, 50, 70)
    expected = causal_conv1d.reference(x, weight, bias)
    direct = torch.zeros(2, 50, 70)
    for t in range(50):
        for w in range(causal_conv1d.WIDTH):
            if t - causal_conv1d.WIDTH + 1 + w >= 0:
                direct[:, t] += x[:, t - causal_conv1d.WIDTH + 1 + w].float() * weight[:, w].float()
    assert norm_relative_error(expected, torch.nn.functional.silu(direct + bias.float())) < 1e-6
    for config in spread(causal_conv1d) + [{"BLOCK_L": 16, "BLOCK_D": 32, "ITER_L": 2}]:
        out.fill_(float("nan"))
        causal_conv1d.launch(causal_conv1d.causal_conv1d_kernel, x, weight, bias, out, **config)
        assert norm_relative_error(out, expected) < 1e-3, config
