"""The Hopper attention forward: checked against PyTorch under the interpreter, and compiled for
a Hopper target on this CPU-only machine, where the compiler's shared memory bounds the Space's
estimate and warp specialization is shown to fail (why the Space leaves it out)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tunekit.kernels import attention_hopper

import tunekit
from tunekit import Budget
from tunekit.config import config_to_dict

pytestmark = pytest.mark.interpreter_loops


@pytest.mark.parametrize("causal,heavy_first", [(False, 0), (True, 0), (True, 1)])
@pytest.mark.parametrize("block_m,block_n", [(16, 16), (32, 16), (32, 32)])
def test_matches_pytorch_with_a_sequence_that_is_not_a_multiple_of_the_tiles(causal, heavy_first, block_m, block_n):
    """40 = 2 x 16 + 8: the last query and key tiles run past the sequence (the descriptors clip
    them, the last key tile is masked) and the causal loop splits at the diagonal, in either
    order of the query tiles."""
    q, k, v, o = attention_hopper.inputs(2, 2, 40, 32, dtype=torch.float32)
    attention_hopper.launch(attention_hopper.attention_hopper_kernel, q, k, v, o, causal=causal, BLOCK_M=block_m,
                            BLOCK_N=block_n, WARP_SPECIALIZE=0, HEAVY_FIRST=heavy_first, num_warps=4, num_stages=2)
    torch.testing.assert_close(o, attention_hopper.reference(q, k, v, causal), rtol=1e-4, atol=1e-5)


def test_tuned_by_tunekit_under_the_interpreter():
    kernel = tunekit.autotune(space=attention_hopper.space("interpreter"), key=["seq_len", "HEAD_DIM", "CAUSAL"],
                              strategy="default", budget=Budget(evals=3), store=None,
                              seed=0)(attention_hopper.attention_hopper_kernel)
    q, k, v, o = attention_hopper.inputs(1, 2, 48, 16, dtype=torch.float32)
    attention_hopper.launch(kernel, q, k, v, o, causal=True)
    torch.testing.assert_close(o, attention_hopper.reference(q, k, v, True), rtol=1e-4, atol=1e-5)


def test_the_spaces_keep_what_runs_where():
    h200 = [config_to_dict(c) for c in attention_hopper.space().configs()]
    assert len(h200) < attention_hopper.space().cartesian_size
    assert all(c["BLOCK_M"] % c["BLOCK_N"] == 0 for c in h200)  # the causal split's diagonal
    assert all(attention_hopper.shared_memory(c) <= attention_hopper.H200_SHARED_MEMORY for c in h200)
    assert {c["num_warps"] for c in h200} == {4, 8} and {c["BLOCK_M"] for c in h200} == {64, 128, 256}
    assert all({config_to_dict(c)["HEAVY_FIRST"] for c in space.configs()} == {0, 1}
               for space in (attention_hopper.space(), attention_hopper.space("interpreter")))
    with pytest.raises(ValueError, match="knows 'h200' and 'interpreter'"):
        attention_hopper.space("a100")


def test_tensors_a_descriptor_cannot_take_are_refused_by_name():
    """Caught before the launch, where Triton would fail deep in the kernel or read past them."""
    q, k, v, o = attention_hopper.inputs(1, 2, 16, 16, dtype=torch.float32)
    launch = lambda *tensors: attention_hopper.launch(attention_hopper.attention_hopper_kernel, *tensors)
    with pytest.raises(ValueError, match=r"needs k contiguous, 16-byte aligned.*strides \(512, 256, 1, 16\)"):
        launch(q, k.transpose(2, 3), v, o)
    misaligned = torch.empty(q.numel() + 1)[1:].view(q.shape)
    with pytest.raises(ValueError, match=r"needs v contiguous, 16-byte aligned.*\(mod 16: 4\)"):
        launch(q, k, misaligned, o)
    with pytest.raises(ValueError, match="needs q, k, v, o of one floating-point dtype; o is torch.float16, q torch.float32"):
        launch(q, k, v, o.half())
    with pytest.raises(ValueError, match=r"of one shape \(batch, heads, sequence, head_dim\); got \(2, 16, 16\)"):
        launch(q[0], k[0], v[0], o[0])
    q, k, v, o = attention_hopper.inputs(1, 2, 40, 24, dtype=torch.float32)
    with pytest.raises(ValueError, match="head_dim that is a power of two, 16 or more; got 24"):
        launch(q, k, v, o)


@pytest.mark.slow
def test_configs_compile_for_hopper_within_the_estimated_shared_memory_but_not_warp_specialized(tmp_path,
                                                                                                monkeypatch):
    """Compiled for sm_90 here, as tunekit's compile pool does for a GPU, causal and not: each
    config of the Space compiles and the shared memory the compiler reports is within the Space's
    estimate; the same config warp-specialized fails in Triton's warp-specialization pass (if a
    Triton release makes it compile, the Space should try it)."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    import gpu_target_kernels

    configs = [dict(BLOCK_M=128, BLOCK_N=64, WARP_SPECIALIZE=0, HEAVY_FIRST=0, num_warps=4, num_stages=3),
               dict(BLOCK_M=128, BLOCK_N=128, WARP_SPECIALIZE=0, HEAVY_FIRST=1, num_warps=8, num_stages=2),
               dict(BLOCK_M=128, BLOCK_N=64, WARP_SPECIALIZE=1, HEAVY_FIRST=0, num_warps=4, num_stages=3)]
    assert [attention_hopper.space().canonical(c) is not None for c in configs] == [True, True, False]
    spec = {"tensor": "bfloat16"}
    jobs = [["tunekit.kernels.attention_hopper", "attention_hopper_kernel", [spec, spec, spec, spec, 0.088, 128, 4096],
             dict(config, HEAD_DIM=128, CAUSAL=causal)] for config in configs for causal in (False, True)]
    [round_] = gpu_target_kernels.run_compile_rounds([{"jobs": jobs}], 2, tmp_path / "triton-cache")
    results = round_["results"]
    for job, result in zip(jobs[:4], results):
        assert result.status == "ok", (job[3], result.error)
        assert 0 < result.shared_bytes <= attention_hopper.shared_memory(job[3]), (job[3], result.shared_bytes)
    for job, result in zip(jobs[4:], results[4:]):
        assert result.status == "compile_error" and "PassManager::run failed" in result.error, result.error


def test_a_compiler_pass_that_gives_up_is_a_compile_error_not_a_runtime_error():
    """What Triton raises when a pass fails (as warp specialization does above) is a plain
    RuntimeError; the store must not count it as a launch that went wrong."""
    from tunekit.benchmark import classify
    from tunekit.trial import Status

    assert classify(RuntimeError("PassManager::run failed")) is Status.COMPILE_ERROR
    assert classify(RuntimeError("CUDA error: an illegal memory access was encountered")) is Status.RUNTIME_ERROR
