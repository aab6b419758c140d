"""Readers and writers of recorded spaces, on hand-written files and on the shared recorded spaces."""

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest

import tunekit
from tunekit.recorded import (RecordedSpaceError, read_kernel_tuner, read_space, read_t4, write_kernel_tuner,
                              write_t4)
from tunekit.keys import TuningKey
from tunekit.trial import Status

SHARED = Path(__file__).resolve().parents[2] / "shared" / "spaces"


def kt_entry(x, y, time, **extra):
    return {"block_x": x, "tile": y, "time": time, "times": [time] if isinstance(time, float) else [],
            "compile_time": 100.0, "benchmark_time": 20.0, "verification_time": 0, **extra}


def write_kt(path, entries, keys=("block_x", "tile")):
    data = {"device_name": "Test GPU", "kernel_name": "k", "problem_size": [64], "tune_params_keys": list(keys),
            "tune_params": {"block_x": [16, 32, 64], "tile": [1, 2]}, "objective": "time",
            "cache": {f"{e['block_x']},{e['tile']}": e for e in entries}}
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt") as handle:
        json.dump(data, handle)
    return path


ENTRIES = [kt_entry(16, 1, 3.0), kt_entry(16, 2, "CompilationFailedConfig"), kt_entry(32, 1, 1.5),
           kt_entry(32, 2, "InvalidConfig"), kt_entry(64, 1, "RuntimeFailedConfig"), kt_entry(64, 2, 1e20)]


@pytest.mark.parametrize("name", ["space.json", "space.json.gz"])
def test_kernel_tuner_cache_statuses(tmp_path, name):
    space = read_space(write_kt(tmp_path / name, ENTRIES))
    assert len(space) == 5  # InvalidConfig: rejected by the restrictions, not part of the space
    statuses = {(r.params["block_x"], r.params["tile"]): r.status for r in space.records}
    assert statuses == {(16, 1): Status.OK, (16, 2): Status.COMPILE_ERROR, (32, 1): Status.OK,
                        (64, 1): Status.RUNTIME_ERROR, (64, 2): Status.RUNTIME_ERROR}
    assert space.optimum_ms == 1.5 and space.device == "Test GPU"
    assert space.lookup({"block_x": 32, "tile": 1}).evaluation_seconds == pytest.approx(0.12)
    assert space.lookup({"block_x": 32, "tile": 2}) is None  # infeasible
    assert len(space.space()) == 5


def test_a_kernel_tuner_problem_size_becomes_the_key_a_perf_model_sees(tmp_path):
    """Kernel Tuner files give the shape as ``problem_size`` (a number or a list): it is the key,
    so that a model fit on several sizes of a kernel learns the shape; without one, the key names
    the space."""
    from tunekit.perfmodels.base import key_features

    path = write_kt(tmp_path / "space.json", ENTRIES)
    assert read_space(path).key() == TuningKey(("problem_size_0",), (64,), ())
    assert key_features(read_space(path).key()) == {"problem_size_0": 6.0}
    data = json.loads(path.read_text())
    for size, key in ((20000000, {"problem_size": 20000000}), ("a callable", {"space": "mine"}), (None, {"space": "mine"})):
        data["problem_size"] = size
        path.write_text(json.dumps(data))
        assert read_space(path, name="mine").key() == TuningKey.from_dict({"args": key, "dtypes": []})


def test_an_unclosed_kernel_tuner_file_is_read_as_kernel_tuner_writes_it(tmp_path):
    """Kernel Tuner writes the header, then one '"key": {...},' line per evaluation, and closes at the end."""
    closed = json.loads((write_kt(tmp_path / "full.json", ENTRIES)).read_text())
    header = {k: v for k, v in closed.items() if k != "cache"}
    lines = [json.dumps(header)[:-1] + ', "cache": {']
    lines += [f'"{key}": {json.dumps(entry)},' for key, entry in closed["cache"].items()]
    (tmp_path / "writing.json").write_text("\n".join(lines) + "\n")
    assert len(read_space(tmp_path / "writing.json")) == 5
    (tmp_path / "cut.json").write_text("\n".join(lines) + '\n"64,3": {"block_x": 64, "ti')  # killed mid-write
    assert len(read_space(tmp_path / "cut.json")) == 5


def test_a_parameter_order_that_does_not_match_the_header_is_refused(tmp_path):
    data = json.loads(write_kt(tmp_path / "a.json", ENTRIES).read_text())
    data["tune_params_keys"] = ["tile", "block_x"]
    (tmp_path / "b.json").write_text(json.dumps(data))
    with pytest.raises(RecordedSpaceError, match="parameter order is inconsistent"):
        read_space(tmp_path / "b.json")


@pytest.mark.parametrize("breakage, message", [
    (lambda d: d["cache"]["16,1"].update(block_x=128) or d, "does not match its parameters"),
    (lambda d: d["cache"].update({"128,1": kt_entry(128, 1, 1.0)}) or d, "outside the values listed"),
    (lambda d: d["cache"]["16,1"].pop("time") and d, "has no 'time'"),
    (lambda d: d["cache"]["16,1"].update(time="Exploded") or d, "unknown failure 'Exploded'"),
    (lambda d: d.pop("tune_params_keys") and d, "not a Kernel Tuner cache file"),
])
def test_inconsistent_files_get_an_error_that_names_the_problem(tmp_path, breakage, message):
    data = breakage(json.loads(write_kt(tmp_path / "a.json", ENTRIES).read_text()))
    (tmp_path / "b.json").write_text(json.dumps(data))
    with pytest.raises(RecordedSpaceError, match=message):
        read_kernel_tuner(tmp_path / "b.json")


def test_garbage_and_missing_files(tmp_path):
    (tmp_path / "x.json").write_text("{ not json")
    with pytest.raises(RecordedSpaceError, match="not valid JSON"):
        read_space(tmp_path / "x.json")
    (tmp_path / "y.json.gz").write_bytes(b"\x1f\x8b\x08truncated")
    with pytest.raises(RecordedSpaceError, match="cannot be read"):
        read_space(tmp_path / "y.json.gz")
    with pytest.raises(RecordedSpaceError, match="no such file"):
        read_space(tmp_path / "z.json")


def test_a_recorded_space_cut_off_mid_way_is_refused(tmp_path):
    """Injected: a shipped H200 recording cut to half its bytes (an interrupted download)."""
    from tunekit.kernels import shipped

    original = sorted(shipped.paths())[0]
    cut = tmp_path / original.name
    cut.write_bytes(original.read_bytes()[: original.stat().st_size // 2])
    with pytest.raises(RecordedSpaceError, match=f"{cut.name}.*cannot be read"):
        read_space(cut)


def test_kernel_tuner_and_t4_round_trips(tmp_path):
    original = read_space(write_kt(tmp_path / "a.json", ENTRIES))
    again_kt = read_kernel_tuner(write_kernel_tuner(original, tmp_path / "b.json.gz"))
    again_t4 = read_t4(write_t4(original, tmp_path / "c.json"))
    for again in (again_kt, again_t4):
        assert [(r.params, r.status, r.time_ms) for r in again.records] == [
            (r.params, r.status if r.status is not Status.TIMEOUT else Status.RUNTIME_ERROR, r.time_ms)
            for r in original.records]
        assert again.lookup({"block_x": 16, "tile": 1}).compile_ms == 100.0
        assert again.digest == original.digest  # what was measured, whichever format and path hold it
    with pytest.raises(FileExistsError):
        write_t4(original, tmp_path / "c.json")


def test_the_digest_changes_with_what_was_measured(tmp_path):
    """A replay's seed comes from the digest: any changed measurement makes another space."""
    digest = read_space(write_kt(tmp_path / "a.json", ENTRIES)).digest
    slower = [kt_entry(16, 1, 3.5), *ENTRIES[1:]]
    costlier = [kt_entry(16, 1, 3.0, compile_time=900.0), *ENTRIES[1:]]
    failed = [kt_entry(16, 1, "RuntimeFailedConfig"), *ENTRIES[1:]]
    others = [read_space(write_kt(tmp_path / f"{i}.json", entries)).digest
              for i, entries in enumerate((slower, costlier, failed, ENTRIES[1:]))]
    assert len({digest, *others}) == 5


def test_a_space_tuned_by_tunekit_exports_to_kernel_tuner(tmp_path):
    from tunekit.cli import main
    from tunekit.kernels import vector_add

    store = tmp_path / "store.db"
    kernel = tunekit.autotune(space=tunekit.Space(BLOCK=[128, 256, 512], num_warps=[2, 4]), key=["n"],
                              strategy="exhaustive", store=store)(vector_add.add_kernel)
    x, y, out = vector_add.inputs(1024)
    kernel[vector_add.grid(1024)](x, y, out, 1024)
    assert main(["store", "export", str(tmp_path / "add.json"), "--store", str(store), "--format", "kerneltuner",
                 "--kernel", "add_kernel"]) == 0
    space = read_space(tmp_path / "add.json")
    measured = {t.config_id: t.time_ms for t in kernel.trials}
    assert len(space) == 6 and {tunekit.config.config_json(space.config(r)): r.time_ms
                                for r in space.records} == measured
    assert all(r.benchmark_ms > 0 for r in space.records)


@pytest.mark.parametrize("fmt", ["kerneltuner", "t4"])
def test_configs_that_set_maxnreg_beside_configs_that_do_not_export_and_read_back(tmp_path, fmt):
    """``maxnreg`` set on one config only: the export used to fail with KeyError 'maxnreg'."""
    import triton

    from tunekit.cli import main
    from tunekit.kernels import vector_add

    store = tmp_path / "store.db"
    configs = [triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256}, maxnreg=128)]
    kernel = tunekit.autotune(configs=configs, key=["n"], store=store)(vector_add.add_kernel)
    x, y, out = vector_add.inputs(1024)
    kernel[vector_add.grid(1024)](x, y, out, 1024)
    assert main(["store", "export", str(tmp_path / "add.json"), "--store", str(store), "--format", fmt,
                 "--kernel", "add_kernel"]) == 0
    space = read_space(tmp_path / "add.json")
    assert sorted(tunekit.config.config_json(space.config(r)) for r in space.records) == \
        sorted(t.config_id for t in kernel.trials)


def _shared_table():
    rows = []
    for line in (SHARED / "README.md").read_text().splitlines():
        match = re.match(r"\| `([^`]+\.json\.gz)` \|[^|]*\|[^|]*\| (\d+) \| (\d+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \|", line)
        if match:
            rows.append((match[1], *map(int, match.groups()[1:4]), float(match[5]), float(match[6])))
    return rows


@pytest.mark.skipif(not (SHARED / "README.md").exists(), reason="../shared/spaces is not beside this checkout")
def test_every_shared_space_reads_as_its_readme_describes():
    table = _shared_table()
    assert len(table) == 25
    for name, params, records, valid, best, median in table:
        space = read_space(SHARED / "kerneltuner" / name)
        times = space.valid_times
        assert (len(space.param_names), len(space), len(times)) == (params, records, valid), name
        assert float(times.min()) == pytest.approx(best, rel=1e-3) and float(np.median(times)) == pytest.approx(
            median, rel=1e-3), name
    t4 = read_space(SHARED / "kerneltuner" / "t4_example" / "convolution_milo_A6000_original_T4.json.gz")
    kt = read_space(SHARED / "kerneltuner" / "convolution_milo" / "A6000_original.json.gz")
    assert [(r.params, r.status, r.time_ms) for r in t4.records] == [
        (r.params, kt.lookup(r.params).status, kt.lookup(r.params).time_ms) for r in t4.records]


def t4_result(x, invalidity="correct", time=1.0, **changes):
    result = {"timestamp": "2025-01-01 00:00:00+00:00", "configuration": {"block_x": x},
              "times": {"compilation": 10.0, "runtimes": [1.0]}, "invalidity": invalidity, "correctness": 1,
              "measurements": [{"name": "time", "value": time, "unit": "ms"}], "objectives": ["time"]}
    result.update(changes)
    return {k: v for k, v in result.items() if v is not None}


def write_t4_file(path, results):
    path.write_text(json.dumps({"schema_version": "1.0.0", "results": results}))
    return path


SCHEMA_BREAKAGES = [  # (result 1 as written, the path in the JSON the error names, what it says)
    (t4_result(2, invalidity="lost"), r"\$\.results\[1\]\.invalidity", "'lost' is not one of"),
    (t4_result(2, configuration=[2]), r"\$\.results\[1\]\.configuration", "is not of type 'object'"),
    (t4_result(2, times={"compilation_time": "slow"}), r"\$\.results\[1\]\.times\.compilation_time",
     "is not of type 'number'"),
    (t4_result(2, correctness=None), r"\$\.results\[1\]", "'correctness' is a required property"),
]


@pytest.mark.parametrize("broken, where, message", SCHEMA_BREAKAGES)
def test_a_t4_file_is_checked_against_kernel_tuners_schema(tmp_path, broken, where, message):
    """Where jsonschema and Kernel Tuner are installed, a T4 file is validated against the schema
    Kernel Tuner ships: the error names the file and the offending place in the JSON."""
    pytest.importorskip("jsonschema")
    pytest.importorskip("kernel_tuner")
    path = write_t4_file(tmp_path / "broken.json", [t4_result(1), broken])
    with pytest.raises(RecordedSpaceError, match=rf"broken\.json.*{where}.*{message}") as error:
        read_space(path)
    assert "pip install" not in str(error.value)


def test_without_the_schema_a_t4_file_the_reader_cannot_use_says_what_to_install(tmp_path, monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jsonschema" else
                        find_spec(name, *a))
    for broken, where, _ in SCHEMA_BREAKAGES[:2]:
        path = write_t4_file(tmp_path / "broken.json", [t4_result(1), broken])
        with pytest.raises(RecordedSpaceError, match=rf"broken\.json.*{where}.*pip install jsonschema kernel_tuner"):
            read_space(path)
    # what the reader needs is there: read (the schema would want 'correctness')
    assert len(read_space(write_t4_file(tmp_path / "lenient.json", [t4_result(1), SCHEMA_BREAKAGES[3][0]]))) == 2


def test_what_the_t4_schema_allows_but_a_space_cannot_hold_is_refused(tmp_path):
    """A 'correct' result without a time, parameters that change between results, a config twice."""
    no_time = t4_result(2, measurements=[{"name": "energy", "value": 3.0}])
    other_names = t4_result(2, configuration={"block_y": 2})
    for results, message in (([t4_result(1), no_time], r"\$\.results\[1\]\.measurements.*no numeric time"),
                             ([t4_result(1), other_names], r"\$\.results\[1\]\.configuration.*block_y"),
                             ([t4_result(1), t4_result(1, time=2.0)], "the same config is recorded twice")):
        with pytest.raises(RecordedSpaceError, match=rf"t4\.json.*{message}"):
            read_space(write_t4_file(tmp_path / "t4.json", results))
