"""Recorded search spaces: every config of a space measured once, read from and written to files.

Formats:

* Kernel Tuner cache files (``.json`` or ``.json.gz``), including the unclosed files Kernel
  Tuner leaves while it writes;
* T4, the auto-tuning community's results schema (``schema_version`` 1.0.0);
* tunekit's own export (``tunekit store export x.jsonl``), one trial per line.

A recorded space holds only the configs that were recorded: the restrictions of the original
tuning are not stored, so a config absent from the file is infeasible, not unknown.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.util
import json
import math
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .config import Config, config_from_dict, config_json, config_to_dict
from .keys import TuningKey
from .space import Space
from .trial import Source, Status, Timing, Trial

_KT_FAILURES = {
    "CompilationFailedConfig": Status.COMPILE_ERROR,
    "RuntimeFailedConfig": Status.RUNTIME_ERROR,
}
_KT_INFEASIBLE = "InvalidConfig"
#: Entry fields tunekit adds to the Kernel Tuner files it writes (Kernel Tuner ignores them):
#: the quantiles, the output's error, and the exact failure status the failure string loses.
_KT_EXTRA_FIELDS = ("time_p20", "time_p80", "relative_error", "shared_bytes")
_KT_STATUS_FIELD = "tunekit_status"
_T4_STATUS = {
    "correct": Status.OK,
    "compile": Status.COMPILE_ERROR,
    "runtime": Status.RUNTIME_ERROR,
    "timeout": Status.TIMEOUT,
    "correctness": Status.WRONG,
}
_T4_FAILURE_TEXT = {
    Status.COMPILE_ERROR: "CompilationFailedConfig",
    Status.OUT_OF_RESOURCES: "RuntimeFailedConfig",
    Status.RUNTIME_ERROR: "RuntimeFailedConfig",
    Status.TIMEOUT: "RuntimeFailedConfig",
    Status.WRONG: "RuntimeFailedConfig",
}


class RecordedSpaceError(ValueError):
    """A recorded-space file that cannot be read as what it claims to be; the message says where."""


@dataclass(frozen=True)
class Record:
    """One recorded config: its parameters, what happened, and what it cost to find out (ms)."""

    params: Mapping[str, Any]
    status: Status
    time_ms: float | None
    compile_ms: float = 0.0
    benchmark_ms: float = 0.0
    verification_ms: float = 0.0
    #: What a format keeps beside the median: quantiles (``time_p20``, ``time_p80``), the
    #: output's ``relative_error`` against the reference, and the ``shared_bytes`` its compile
    #: reported (also for a config that then failed for want of shared memory), where recorded.
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK and self.time_ms is not None

    @property
    def evaluation_seconds(self) -> float:
        """What evaluating this config cost when it was recorded: compile + benchmark + verification."""
        return (self.compile_ms + self.benchmark_ms + self.verification_ms) / 1e3


@dataclass
class RecordedSpace:
    """A fully measured space: its records in file order, and the Space they span."""

    name: str
    param_names: list[str]
    records: list[Record]
    kernel_name: str = ""
    device: str = ""
    problem_size: Any = None
    tune_params: dict[str, list] = field(default_factory=dict)
    source: str = ""

    def __post_init__(self) -> None:
        if not self.records:
            raise RecordedSpaceError(f"{self.source or self.name}: no recorded configs")
        self._by_id = {config_json(self.config(r)): r for r in self.records}
        if len(self._by_id) != len(self.records):
            raise RecordedSpaceError(f"{self.source or self.name}: the same config is recorded twice")

    @staticmethod
    def config(record: Record) -> Config:
        return config_from_dict(record.params)

    def space(self) -> Space:
        """Exactly the recorded configs (failed ones too: a strategy may still propose them)."""
        if not hasattr(self, "_space"):
            self._space = Space.from_configs([self.config(r) for r in self.records])
        return self._space

    def key(self) -> TuningKey:
        """The tuning key the space was measured at: the problem size when it is one of
        tunekit's keys (``{"args": ..., "dtypes": ...}``); a Kernel Tuner problem size (a number
        or a list of them) as ``problem_size`` or ``problem_size_0``, ``problem_size_1``, ..., so
        that a perf model sees the shape; else one naming the space."""
        size = self.problem_size
        if isinstance(size, str):
            try:
                size = json.loads(size)
            except json.JSONDecodeError:
                pass
        if isinstance(size, dict) and "args" in size:
            return TuningKey.from_dict(size)
        if _is_number(size):
            return TuningKey(("problem_size",), (size,), ())
        if isinstance(size, list) and size and all(_is_number(v) for v in size):
            return TuningKey(tuple(f"problem_size_{i}" for i in range(len(size))), tuple(size), ())
        return TuningKey(("space",), (self.name,), ())

    def trials(self) -> list[Trial]:
        """Every record as a stored trial at ``key()``: what a store holding this space would give."""
        key = self.key()
        return [Trial(self.config(r), r.status,
                      Timing(r.time_ms, r.time_ms, r.time_ms) if r.ok and r.time_ms is not None else None,
                      r.compile_ms / 1e3, key=key, source=Source.STORE) for r in self.records]

    def lookup(self, config: Config | Mapping[str, Any]) -> Record | None:
        flat = config_to_dict(config) if isinstance(config, Config) else config_to_dict(config_from_dict(config))
        return self._by_id.get(config_json(flat))

    @property
    def valid_times(self) -> np.ndarray:
        return np.array([r.time_ms for r in self.records if r.ok], dtype=float)

    @property
    def optimum_ms(self) -> float:
        return float(self.valid_times.min())

    @property
    def has_costs(self) -> bool:
        """Whether the records carry compile and benchmark times (for curves over seconds)."""
        return any(r.compile_ms or r.benchmark_ms for r in self.records)

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 (hex) of what was measured: the parameter names and every record's config,
        status, time and costs, in config order. Not of the name, the path or the file format, so
        that a replay seeded from it (``tunekit.compare.replay``) gives the same tuning wherever
        the file lies and whichever format holds it."""
        rows = sorted([text, r.status.value, r.time_ms, r.compile_ms, r.benchmark_ms, r.verification_ms]
                      for text, r in self._by_id.items())
        return hashlib.sha256(json.dumps([self.param_names, rows]).encode()).hexdigest()

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        return f"RecordedSpace({self.name!r}, {len(self.records)} configs, {len(self.valid_times)} valid)"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# -- reading ----------------------------------------------------------------------------------


def _open_text(path: Path) -> str:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                return handle.read()
        return path.read_text(encoding="utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as error:
        raise RecordedSpaceError(f"{path}: cannot be read ({error})") from error


def _repair_unclosed(text: str) -> str:
    """Close a Kernel Tuner cache file that was still being written: drop a cut-off last entry,
    a trailing comma, and add the two closing braces Kernel Tuner writes at the end."""
    body = text.rstrip()
    last_entry = body.rfind("\n")
    if last_entry > 0 and not body.endswith(("}", "},")):
        body = body[:last_entry].rstrip()  # the last line was cut off mid-entry
    if body.endswith(","):
        body = body[:-1]
    return body + "\n}\n}"


def _load_json(path: Path, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as first:
        if '"cache"' not in text:
            raise RecordedSpaceError(f"{path}: not valid JSON ({first})") from first
        try:
            return json.loads(_repair_unclosed(text))
        except json.JSONDecodeError:
            raise RecordedSpaceError(
                f"{path}: not valid JSON, and not an unclosed Kernel Tuner cache file either ({first})"
            ) from first


def _number(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def read_kernel_tuner(path: str | os.PathLike, name: str | None = None) -> RecordedSpace:
    """A Kernel Tuner cache file (``.json`` or ``.json.gz``, closed or still being written)."""
    path = Path(path)
    data = _load_json(path, _open_text(path))
    if not isinstance(data, dict) or "cache" not in data or "tune_params_keys" not in data:
        raise RecordedSpaceError(f"{path}: not a Kernel Tuner cache file (no 'cache' or 'tune_params_keys')")
    keys = list(data["tune_params_keys"])
    tune_params = dict(data.get("tune_params") or {})
    domains = {p: {str(v) for v in values} for p, values in tune_params.items()}
    records = []
    for cache_key, entry in data["cache"].items():
        if not isinstance(entry, dict) or "time" not in entry:
            raise RecordedSpaceError(f"{path}: entry {cache_key!r} has no 'time'")
        missing = [p for p in keys if p not in entry]
        if missing:
            raise RecordedSpaceError(f"{path}: entry {cache_key!r} lacks parameter(s) {', '.join(missing)}")
        params = {p: entry[p] for p in keys}
        if cache_key != ",".join(str(params[p]) for p in keys):
            raise RecordedSpaceError(
                f"{path}: entry {cache_key!r} does not match its parameters in the header's order "
                f"{keys} ({','.join(str(params[p]) for p in keys)}): the parameter order is inconsistent"
            )
        outside = [p for p in keys if p in domains and str(params[p]) not in domains[p]]
        if outside:
            raise RecordedSpaceError(
                f"{path}: entry {cache_key!r} has {', '.join(f'{p}={params[p]!r}' for p in outside)}, "
                "outside the values listed in 'tune_params'"
            )
        value = entry["time"]
        if isinstance(value, str):
            if value == _KT_INFEASIBLE:
                continue  # restrictions rejected it: not part of the space
            if value not in _KT_FAILURES:
                raise RecordedSpaceError(f"{path}: entry {cache_key!r} has an unknown failure {value!r}")
            status, time_ms = _KT_FAILURES[value], None
            if entry.get(_KT_STATUS_FIELD) in {s.value for s in Status if s is not Status.OK}:
                status = Status(entry[_KT_STATUS_FIELD])
        elif isinstance(value, (int, float)) and math.isfinite(value) and value < 1e20:
            status, time_ms = Status.OK, float(value)
        elif isinstance(value, (int, float)):
            status, time_ms = Status.RUNTIME_ERROR, None  # old files mark failures with 1e20
        else:
            raise RecordedSpaceError(f"{path}: entry {cache_key!r} has a 'time' of type {type(value).__name__}")
        extra = {f: entry[f] for f in _KT_EXTRA_FIELDS if isinstance(entry.get(f), (int, float))}
        records.append(Record(params, status, time_ms, _number(entry.get("compile_time")),
                              _number(entry.get("benchmark_time")), _number(entry.get("verification_time")), extra))
    return RecordedSpace(
        name=name or _default_name(path), param_names=keys, records=records,
        kernel_name=str(data.get("kernel_name", "")), device=str(data.get("device_name") or path.stem.split(".")[0]),
        problem_size=data.get("problem_size"), tune_params=tune_params, source=str(path),
    )


#: The T4 version tunekit reads and writes, and where Kernel Tuner ships the T4 schemas.
_T4_VERSION = "1.0.0"
_T4_SCHEMAS = Path("schema") / "T4"
_T4_SCHEMA_HINT = "pip install jsonschema kernel_tuner to have the file checked against the T4 schema"


def _t4_schema(version: str) -> Any:
    """Kernel Tuner's T4 results schema for ``version`` (``_T4_VERSION``'s where it ships no
    other); None where jsonschema or Kernel Tuner is not installed. Kernel Tuner is not imported."""
    spec = importlib.util.find_spec("kernel_tuner")
    if importlib.util.find_spec("jsonschema") is None or spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))) / _T4_SCHEMAS
    versions = [version] if re.fullmatch(r"\d+\.\d+\.\d+", version) else []
    for candidate in (root / v / "results-schema.json" for v in [*versions, _T4_VERSION]):
        if candidate.is_file():
            return _schema_at(candidate)
    return None


@functools.cache
def _schema_at(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _validate_t4(path: Path, data: Any) -> bool:
    """Validate ``data`` against Kernel Tuner's T4 schema; False where it cannot be (not installed).
    The error names the file and the place in the JSON (``$.results[3].invalidity``)."""
    schema = _t4_schema(str(data.get("schema_version", "")))
    if schema is None:
        return False
    from jsonschema import validators
    from jsonschema.exceptions import best_match

    error = best_match(validators.validator_for(schema)(schema).iter_errors(data))
    if error is not None:
        message = error.message if len(error.message) <= 200 else error.message[:200] + "..."
        raise RecordedSpaceError(f"{path}: {error.json_path} does not follow the T4 results schema "
                                 f"(Kernel Tuner's): {message}")
    return True


def read_t4(path: str | os.PathLike, name: str | None = None) -> RecordedSpace:
    """A T4 results file (``schema_version`` 1.0.0), validated against the T4 schema where
    jsonschema and Kernel Tuner (which ships the schema) are installed. Without them only what
    the reader needs is checked, and an error says what to install."""
    path = Path(path)
    data = _load_json(path, _open_text(path))
    if not isinstance(data, dict) or "results" not in data or "schema_version" not in data:
        raise RecordedSpaceError(f"{path}: not a T4 results file (no 'results' or 'schema_version' in $)")
    validated = _validate_t4(path, data)

    def unreadable(where: str, problem: str) -> RecordedSpaceError:
        """What the schema would have said, had it been there to check."""
        return RecordedSpaceError(f"{path}: {where} {problem}" + ("" if validated else f" ({_T4_SCHEMA_HINT})"))

    if not isinstance(data["results"], list):
        raise unreadable("$.results", "is not a list")
    records: list[Record] = []
    names: list[str] | None = None
    for index, result in enumerate(data["results"]):
        where = f"$.results[{index}]"
        # the reader's needs, checked by the schema where it is installed
        if not isinstance(result, dict) or "configuration" not in result:
            raise unreadable(where, "is not an object with a 'configuration'")
        if not isinstance(result["configuration"], dict):
            raise unreadable(f"{where}.configuration", "is not an object")
        invalidity, times = result.get("invalidity", "correct"), result.get("times", {})
        measurements = result.get("measurements", [])
        if invalidity != "constraints" and invalidity not in _T4_STATUS:
            raise unreadable(f"{where}.invalidity", f"is {invalidity!r}, not one of {['constraints', *_T4_STATUS]}")
        if not isinstance(times, dict):
            raise unreadable(f"{where}.times", "is not an object")
        if not isinstance(measurements, list) or not all(isinstance(m, dict) for m in measurements):
            raise unreadable(f"{where}.measurements", "is not a list of objects")
        # what the schema allows but a recorded space cannot hold
        params = dict(result["configuration"])
        if names is None:
            names = list(params)
        elif list(params) != names:
            raise RecordedSpaceError(f"{path}: {where}.configuration has parameters {list(params)}, "
                                     f"$.results[0] had {names}")
        if invalidity == "constraints":
            continue
        status = _T4_STATUS[invalidity]
        time_ms = None
        if status is Status.OK:
            values = [m.get("value") for m in measurements if m.get("name") == "time"]
            if not values or not _is_number(values[0]):
                raise RecordedSpaceError(f"{path}: {where}.measurements: the result is 'correct' but has no "
                                         "numeric time measurement")
            time_ms = float(values[0])
        compile_ms = _number(times.get("compilation", times.get("compilation_time")))
        runtimes = times.get("runtimes") or []
        benchmark_ms = float(sum(_number(t) for t in runtimes)) if isinstance(runtimes, list) else 0.0
        records.append(Record(params, status, time_ms, compile_ms, benchmark_ms, _number(times.get("validation"))))
    return RecordedSpace(name=name or _default_name(path), param_names=names or [], records=records,
                         source=str(path))


def read_tunekit_export(
    path: str | os.PathLike, name: str | None = None, kernel: str | None = None, key: str | None = None
) -> RecordedSpace:
    """Trials exported by ``tunekit store export FILE.jsonl`` for one kernel and key."""
    path = Path(path)
    rows = []
    for number, line in enumerate(_open_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise RecordedSpaceError(f"{path}: line {number} is not JSON ({error})") from error
    return from_store_rows(rows, name or _default_name(path), kernel, key, source=str(path))


def from_store_rows(
    rows: Sequence[Mapping[str, Any]], name: str = "store", kernel: str | None = None, key: str | None = None,
    source: str = "store",
) -> RecordedSpace:
    """A recorded space from store rows (``ResultsStore.rows`` or an export) of one kernel, device and key."""
    rows = [r for r in rows if r.get("source") == "measured"]
    if kernel is not None:
        rows = [r for r in rows if r.get("kernel_name") == kernel]
    if key is not None:
        rows = [r for r in rows if r.get("key") == key]
    groups = {(r.get("kernel_name"), r.get("device"), r.get("key")) for r in rows}
    if len(groups) != 1:
        raise RecordedSpaceError(
            f"{source}: holds {len(groups)} (kernel, device, key) groups of measured trials; "
            "choose one with kernel= and key=" if groups else f"{source}: no measured trials"
        )
    latest = {row["config"]: row for row in rows}  # a config measured twice keeps its latest trial
    configs = {text: json.loads(text) for text in latest}
    # Every parameter any config sets; one a config leaves out (``maxnreg`` where only some set it)
    # is None there, as in Triton's Config.
    names = list(dict.fromkeys(name for params in configs.values() for name in params))
    records = []
    for text, row in latest.items():
        params = {name: configs[text].get(name) for name in names}
        status = Status(row["status"])
        extra = {"time_p20": row.get("p20_ms"), "time_p80": row.get("p80_ms")} if status is Status.OK else {}
        extra["shared_bytes"] = row.get("shared_bytes")
        records.append(Record(params, status, row.get("median_ms") if status is Status.OK else None,
                              1e3 * _number(row.get("compile_seconds")), 1e3 * _number(row.get("bench_seconds")),
                              extra={k: v for k, v in extra.items() if v is not None}))
    kernel_name, device, key_text = groups.pop()
    return RecordedSpace(name=name, param_names=names, records=records, kernel_name=kernel_name or "",
                         device=device or "", problem_size=key_text, source=source)


def read_space(path: str | os.PathLike, name: str | None = None) -> RecordedSpace:
    """Read any supported format, told apart by content (not by file name)."""
    path = Path(path)
    if not path.exists():
        raise RecordedSpaceError(f"{path}: no such file")
    text = _open_text(path)
    head = text.lstrip()[:1]
    if head == "{" and '"schema_version"' in text and '"results"' in text and '"cache"' not in text[:4096]:
        return read_t4(path, name)
    if head == "{" and '"cache"' in text:
        return read_kernel_tuner(path, name)
    if head == "{" and '"config"' in text.splitlines()[0]:
        return read_tunekit_export(path, name)
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        raise RecordedSpaceError(f"{path}: not valid JSON ({error})") from error
    raise RecordedSpaceError(f"{path}: not a Kernel Tuner cache file, a T4 results file or a tunekit export")


def _default_name(path: Path) -> str:
    """``grandparent/parent/stem``: unique among the shared spaces, where GPUs repeat across kernels."""
    stem = path.name.removesuffix(".gz").removesuffix(".json").removesuffix(".jsonl")
    return "/".join([*path.resolve().parent.parts[-2:], stem])


# -- writing ----------------------------------------------------------------------------------


def _refuse_existing(path: Path) -> None:
    if path.exists():
        raise FileExistsError(f"{path} exists; tunekit does not overwrite files. Choose another name.")


def write_kernel_tuner(space: RecordedSpace, path: str | os.PathLike) -> Path:
    """A Kernel Tuner cache file that Kernel Tuner's simulation mode can replay."""
    path = Path(path)
    _refuse_existing(path)
    keys = space.param_names
    tune_params = space.tune_params or {
        p: sorted({r.params[p] for r in space.records}, key=lambda v: (str(type(v)), v)) for p in keys
    }
    cache = {}
    for record in space.records:
        entry = {p: record.params[p] for p in keys}
        if record.ok:
            entry.update(time=record.time_ms, times=[record.time_ms])
        else:
            entry.update(time=_T4_FAILURE_TEXT.get(record.status, "RuntimeFailedConfig"))
            entry[_KT_STATUS_FIELD] = record.status.value
        entry.update({f: record.extra[f] for f in _KT_EXTRA_FIELDS if f in record.extra})
        entry.update(compile_time=record.compile_ms, verification_time=record.verification_ms,
                     benchmark_time=record.benchmark_ms, strategy_time=0, framework_time=0,
                     timestamp=time.strftime("%Y-%m-%d %H:%M:%S+00:00", time.gmtime()))
        cache[",".join(str(record.params[p]) for p in keys)] = entry
    data = {"device_name": space.device, "kernel_name": space.kernel_name, "problem_size": space.problem_size,
            "tune_params_keys": keys, "tune_params": tune_params, "objective": "time", "cache": cache}
    _write_json(path, data)
    return path


def write_t4(space: RecordedSpace, path: str | os.PathLike) -> Path:
    """A T4 results file (``schema_version`` 1.0.0)."""
    path = Path(path)
    _refuse_existing(path)
    invalidity = {v: k for k, v in _T4_STATUS.items()} | {Status.OUT_OF_RESOURCES: "runtime"}
    results = []
    for record in space.records:
        value: Any = record.time_ms if record.ok else _T4_FAILURE_TEXT.get(record.status, "RuntimeFailedConfig")
        results.append({
            "timestamp": time.strftime("%Y-%m-%d %H:%M:%S+00:00", time.gmtime()),
            "configuration": {p: record.params[p] for p in space.param_names},
            "times": {"compilation": record.compile_ms, "framework": 0, "search_algorithm": 0,
                      "validation": record.verification_ms,
                      **({"runtimes": [record.benchmark_ms]} if record.benchmark_ms else {})},
            "invalidity": invalidity[record.status],
            "correctness": int(record.status is Status.OK),
            "measurements": [{"name": "time", "value": value, "unit": "ms" if record.ok else ""}],
            "objectives": ["time"],
        })
    _write_json(path, {"schema_version": "1.0.0", "metadata": {"timeunit": "miliseconds"}, "results": results})
    return path


def _write_json(path: Path, data: Any) -> None:
    """Write to a temporary name and rename, so a crash never leaves half a file."""
    partial = path.with_name(path.name + ".partial")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(partial, "xt", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(partial, path)
