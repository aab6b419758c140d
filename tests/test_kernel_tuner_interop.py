"""Files written by Kernel Tuner's own code read by tunekit, and the other way round."""

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tunekit.cli import main
from tunekit.recorded import read_space, write_kernel_tuner, write_t4
from tunekit.trial import Status

kernel_tuner = pytest.importorskip("kernel_tuner")
from kernel_tuner import util as kt_util  # noqa: E402

TUNE_PARAMS = {"block_size_x": [32, 64, 128, 256], "tile": [1, 2, 4], "unroll": [0, 1]}


def kernel_tuner_writes_a_cache(path: Path, close: bool) -> int:
    """A cache file as Kernel Tuner writes it during a live tuning: its header code, then one
    store_cache call per benchmarked config; failures as its ErrorConfig objects."""
    kernel_options = SimpleNamespace(kernel_name="never_seen", problem_size=(4096,))
    tuning_options = SimpleNamespace(tune_params=TUNE_PARAMS, simulation_mode=False, objective="time")
    runner = SimpleNamespace(get_device_info=lambda: SimpleNamespace(name="Fake GPU"))
    cache = kt_util.process_cache(str(path), kernel_options, tuning_options, runner)
    rng = np.random.default_rng(3)
    written = 0
    for x in TUNE_PARAMS["block_size_x"]:
        for tile in TUNE_PARAMS["tile"]:
            for unroll in TUNE_PARAMS["unroll"]:
                params = {"block_size_x": x, "tile": tile, "unroll": unroll}
                if x == 256 and tile == 4:
                    params["time"] = kt_util.RuntimeFailedConfig()
                else:
                    params.update(time=float(1 + abs(np.log2(x / 64)) + abs(tile - 2) + rng.random() / 10),
                                  compile_time=500.0, benchmark_time=30.0, verification_time=0)
                kt_util.store_cache(",".join(str(params[k]) for k in TUNE_PARAMS), params, str(path), cache)
                written += 1
    if close:
        kt_util.close_cache(str(path))
    return written


@pytest.mark.parametrize("close", [True, False], ids=["closed", "still-being-written"])
def test_a_cache_file_written_by_kernel_tuner_is_read_and_compared(tmp_path, close):
    path = tmp_path / "never_seen.json"
    written = kernel_tuner_writes_a_cache(path, close)
    space = read_space(path)
    assert len(space) == written == 24
    assert sum(r.status is Status.RUNTIME_ERROR for r in space.records) == 2
    assert space.device == "Fake GPU" and space.kernel_name == "never_seen"
    out = tmp_path / "out"
    assert main(["compare", "--space", str(path), "--strategy", "random", "--seeds", "4", "--budget", "12",
                 "--out", str(out)]) == 0
    assert {"summary.csv", "curves.csv", "report.md", "curves.png"} <= {p.name for p in out.iterdir()}


def test_kernel_tuner_replays_a_space_written_by_tunekit(tmp_path):
    kernel_tuner_writes_a_cache(tmp_path / "kt.json", close=True)
    ours = write_kernel_tuner(read_space(tmp_path / "kt.json"), tmp_path / "ours.json")
    from kernel_tuner.interface import tune_cache

    results, _ = tune_cache(str(ours), strategy="brute_force", quiet=True)
    best = min(r["time"] for r in results if isinstance(r["time"], float))
    assert best == pytest.approx(read_space(ours).optimum_ms)


def test_t4_output_follows_kernel_tuners_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    kernel_tuner_writes_a_cache(tmp_path / "kt.json", close=True)
    t4 = write_t4(read_space(tmp_path / "kt.json"), tmp_path / "t4.json")
    schema_path = Path(kernel_tuner.__file__).parent / "schema" / "T4" / "1.0.0" / "results-schema.json"
    jsonschema.validate(json.loads(t4.read_text()), json.loads(schema_path.read_text()))


@pytest.mark.parametrize("format", ["kerneltuner", "t4", "unclosed"])
def test_kernel_tuner_replays_its_strategy_on_a_recorded_space(tmp_path, format):
    """``tunekit compare --strategy kt:NAME``: the same run whatever the file's format."""
    from tunekit.kerneltuner import replay_kernel_tuner

    kernel_tuner_writes_a_cache(tmp_path / "kt.json", close=format != "unclosed")
    space = read_space(tmp_path / "kt.json")
    if format == "t4":
        space = read_space(write_t4(space, tmp_path / "t4.json"))
    run = replay_kernel_tuner(space, "random_sample", seed=0, budget=24)  # all 24
    assert run.strategy == "kt:random_sample"
    assert len(run.times_ms) == 24 and int(np.isinf(run.times_ms).sum()) == 2  # failures count as evaluations
    assert run.times_ms.min() == pytest.approx(space.optimum_ms)
    assert run.seconds[-1] == pytest.approx(22 * 0.53)  # recorded compile + benchmark of the 22 that ran
    cut = replay_kernel_tuner(space, "kt:random_sample", seed=0, budget=24, seconds=2.0)
    assert list(cut.times_ms) == list(run.times_ms[:len(cut.times_ms)])  # the same run, cut where tunekit's is:
    assert cut.seconds[-2] < 2.0 <= cut.seconds[-1]  # none started once 2 s are spent


@pytest.mark.slow
@pytest.mark.skipif(not (Path(__file__).resolve().parents[2] / "shared" / "spaces").exists(),
                    reason="../shared/spaces is not beside this checkout")
def test_the_side_by_side_experiment_quick_mode_writes_its_report(tmp_path):
    import subprocess

    script = Path(__file__).resolve().parents[1] / "experiments" / "kernel_tuner_side_by_side.py"
    done = subprocess.run([sys.executable, str(script), "--quick", "--seeds", "2", "--kt-strategy", "random_sample",
                           "--kt-strategy", "genetic_algorithm", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| kt:genetic_algorithm |" in report and "| random |" in report and "Kernel Tuner 1." in report
    assert json.loads((tmp_path / "out" / "run.json").read_text())["kernel_tuner"] == kernel_tuner.__version__
