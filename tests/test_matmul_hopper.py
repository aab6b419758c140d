"""The Hopper GEMM: every knob the interpreter runs is checked against PyTorch there; warp
specialization and clusters, which the interpreter ignores, are compiled for a Hopper target on
this CPU-only machine, where the compiler's shared memory bounds the Space's estimate; the
recorded compiles of the whole space for sm_90 (Triton 3.6 and 3.9) check its constraints."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch
from tunekit.kernels import matmul, matmul_hopper

import tunekit
from tunekit import Budget
from tunekit.config import config_to_dict

pytestmark = pytest.mark.interpreter_loops


def test_the_h200_space_is_larger_than_the_tutorials_and_every_config_fits():
    """The new knobs multiply the tutorial-style space; the constraints drop what an H200 cannot
    run (shared memory, registers) and knob combinations Triton does not take or compile."""
    space = matmul_hopper.space()
    assert len(space) >= 3 * len(matmul.space())
    assert len(space) < len(matmul_hopper.space(constrained=False)) < space.cartesian_size
    for config in map(config_to_dict, space.configs()):
        assert matmul_hopper.shared_memory(config) <= matmul_hopper.H200_SHARED_MEMORY
        assert not (config["FLATTEN"] and config["WARP_SPECIALIZE"])
    knobs = {name: {config_to_dict(c)[name] for c in space.configs()} for name in
             ("PERSISTENT", "WARP_SPECIALIZE", "FLATTEN", "EPILOGUE_SUBTILE", "num_ctas")}
    assert all(values == {0, 1} or values == {1, 2} for values in knobs.values()), knobs


@pytest.mark.parametrize("version", ["3.6.0", "3.9.0"])
def test_the_constraints_hold_for_every_config_compiled_for_hopper(version):
    """Every config of ``space(constrained=False)`` was compiled for sm_90 with each Triton
    (experiments/hopper_compile_sweep.py, on a CPU; 3.6 is the H200's): with 3.6 ``compiles`` is
    exactly what compiled, with 3.9 everything it admits compiled (3.9 takes more), and no compiled
    config used more shared memory than the Space's estimate."""
    path = Path(__file__).resolve().parents[1] / "experiments" / "results" / "hopper_compile" / f"triton-{version}.jsonl.gz"
    with gzip.open(path, "rt") as source:
        header, *rows = [json.loads(line) for line in source]
    assert header["triton"] == version and header["target"] == "cuda:90"
    assert sorted(json.dumps(row["config"], sort_keys=True) for row in rows) == sorted(
        json.dumps(config_to_dict(c), sort_keys=True) for c in matmul_hopper.space(constrained=False).configs())
    compiled = {json.dumps(row["config"], sort_keys=True) for row in rows if row["status"] == "ok"}
    admitted = {json.dumps(config_to_dict(c), sort_keys=True) for c in matmul_hopper.space().configs()}
    assert admitted == compiled if version == "3.6.0" else admitted < compiled
    assert {row["status"] for row in rows} == {"ok", "compile_error"}
    assert all(row["shared_bytes"] <= matmul_hopper.shared_memory(row["config"]) for row in rows if row["status"] == "ok")


def test_the_interpreter_space_leaves_out_what_the_interpreter_ignores():
    space = matmul_hopper.space("interpreter")
    assert {config_to_dict(c)["WARP_SPECIALIZE"] for c in space.configs()} == {0}
    assert {c.num_ctas for c in space.configs()} == {1}
    with pytest.raises(ValueError, match="knows 'h200' and 'interpreter'. Got 'mi300'"):
        matmul_hopper.space("mi300")


@pytest.mark.parametrize("persistent,flatten,subtile,group", [(0, 0, 0, 1), (1, 0, 1, 8), (1, 1, 0, 8), (1, 1, 1, 1)])
def test_each_schedule_matches_pytorch_on_ragged_tiles(persistent, flatten, subtile, group):
    """M, N and K are not multiples of the tiles: the descriptors clip the edges."""
    a, b, c = matmul_hopper.inputs(40, 48, 72, dtype=torch.float32)
    matmul_hopper.launch(matmul_hopper.matmul_hopper_kernel, a, b, c, BLOCK_M=16, BLOCK_N=32, BLOCK_K=16,
                         GROUP_M=group, PERSISTENT=persistent, WARP_SPECIALIZE=0, FLATTEN=flatten,
                         EPILOGUE_SUBTILE=subtile, num_warps=4, num_stages=2)
    torch.testing.assert_close(c, matmul_hopper.reference(a, b), rtol=1e-4, atol=1e-3)


def test_tuned_by_tunekit_under_the_interpreter():
    kernel = tunekit.autotune(space=matmul_hopper.space("interpreter"), key=["M", "N", "K"], strategy="default",
                              budget=Budget(evals=3), store=None, seed=0)(matmul_hopper.matmul_hopper_kernel)
    a, b, c = matmul_hopper.inputs(32, 40, 48, dtype=torch.float32)
    matmul_hopper.launch(kernel, a, b, c)
    torch.testing.assert_close(c, matmul_hopper.reference(a, b), rtol=1e-4, atol=1e-3)


def test_tensors_a_descriptor_cannot_take_or_that_do_not_multiply_are_refused_by_name():
    """Caught before the launch: the kernel would read or write past them."""
    a, b, c = matmul_hopper.inputs(16, 20, 16, dtype=torch.bfloat16)  # 20 bf16 = 40 bytes per row of b
    with pytest.raises(ValueError, match="matmul_hopper needs b contiguous, 16-byte aligned, with rows of a multiple"):
        matmul_hopper.launch(matmul_hopper.matmul_hopper_kernel, a, b, c)
    a, b, c = matmul_hopper.inputs(16, 32, 16, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"needs a \(M, K\), b \(K, N\) and c \(M, N\); got a \(16, 16\), b \(32, 32\)"):
        matmul_hopper.launch(matmul_hopper.matmul_hopper_kernel, a, torch.zeros(32, 32, dtype=torch.bfloat16), c)
    with pytest.raises(ValueError, match="needs a, b, c of one floating-point dtype; c is torch.float16, a torch.bfloat16"):
        matmul_hopper.launch(matmul_hopper.matmul_hopper_kernel, a, b, c.half())
    with pytest.raises(ValueError, match=r"needs a \(M, K\), b \(K, N\) and c \(M, N\); got a \(16, 16, 1\)"):
        matmul_hopper.launch(matmul_hopper.matmul_hopper_kernel, a[..., None], b, c)


@pytest.mark.slow
def test_warp_specialization_and_clusters_compile_for_hopper_within_the_estimated_shared_memory(tmp_path, monkeypatch):
    """The interpreter ignores warp specialization and clusters, so they are compiled here for a
    Hopper target (sm_90) instead, as tunekit's compile pool does for a GPU: each config compiles,
    and the shared memory the compiler reports is within the Space's estimate (the constraint that
    keeps configs which cannot fit out of the H200 space is an upper bound; it was found 24 bytes
    short, the pipeline's barriers, by this test)."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    import gpu_target_kernels

    configs = [dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, PERSISTENT=1, WARP_SPECIALIZE=1, FLATTEN=0,
                    EPILOGUE_SUBTILE=1, num_warps=8, num_stages=2, num_ctas=1),
               dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, PERSISTENT=1, WARP_SPECIALIZE=0, FLATTEN=1,
                    EPILOGUE_SUBTILE=0, num_warps=4, num_stages=4, num_ctas=2),
               dict(BLOCK_M=256, BLOCK_N=128, BLOCK_K=64, GROUP_M=1, PERSISTENT=0, WARP_SPECIALIZE=1, FLATTEN=0,
                    EPILOGUE_SUBTILE=0, num_warps=8, num_stages=2, num_ctas=1)]
    spec = {"tensor": "bfloat16"}
    jobs = [["tunekit.kernels.matmul_hopper", "matmul_hopper_kernel", [spec, spec, spec, 4096, 4096, 4096], config]
            for config in configs]
    [round_] = gpu_target_kernels.run_compile_rounds([{"jobs": jobs}], 2, tmp_path / "triton-cache")
    for config, result in zip(configs, round_["results"]):
        assert result.status == "ok", (config, result.error)
        assert 0 < result.shared_bytes <= matmul_hopper.shared_memory(config), (config, result.shared_bytes)
    assert all(matmul_hopper.space().canonical(config) is not None for config in configs)  # the H200 space holds them
