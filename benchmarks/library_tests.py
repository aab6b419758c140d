"""Third-party libraries' own GPU tests of their autotuned ops, run with stock ``triton.autotune``,
with ``triton.autotune = tunekit.autotune`` and with the library imported inside
``tunekit.patch_triton()``: pass, fail, skip and error counts side by side.

For each library, ``python -m pytest FILES -k SELECTION -q -p libtests_plugin`` runs once per
variant (``--variants``, in that order: ``stock``, ``tk``, ``tk_patch``) in a fresh process, each
with a fresh ``TRITON_CACHE_DIR`` and ``FLAGGEMS_CACHE_DIR`` (FlagGems keeps its configs' timings
there; shared, a later run would read an earlier one's), and for tunekit's a fresh
``TUNEKIT_STORE``; ``libtests_plugin.py`` swaps the autotuner before any conftest imports the
library. Outcomes come from ``--junitxml`` (from the plugin's per-test log when a run is killed).
The test files are the libraries' own, at pinned commits, in ``.libtests/`` (ignored by git), made
by ``benchmarks/get_library_tests.sh``; on the device they travel with ``carry: [".libtests"]``.

    python benchmarks/library_tests.py --json OUT.json                  # all three, within --budget
    python benchmarks/library_tests.py --libraries liger --timeout 120
    python benchmarks/library_tests.py --collect-only                   # what each selection collects
    python benchmarks/library_tests.py --libraries flag_gems --variants stock tk_patch

Selections (liger and flag_gems aimed at about a minute each with stock autotune from a cold cache on
an H200, before FlagGems' ``LibTuner`` tests were added (stock then took 76 to 110 s on an H100); the whole run's ``--budget`` is shared out by weight, 1 : 1 : 2.5, among the runs still to
come, so what a run leaves goes to the later ones):

* ``liger`` (Liger-Kernel tests at main ead96b61, wheel 0.8.5), ``test/transformers/test_dyt.py``:
  LigerDyT / LigerDyTFunction forward and backward, both kernels autotuned over 18 configs keyed on
  the constexpr ``N``, so each hidden size, dtype and beta / no beta tunes both again. 7 of 24
  tests, 4 such tunings: hidden 4096 with and without beta in float32, without in bfloat16, and the
  odd size 1023 (one row) without beta in float32. ``test/utils.py`` imports transformers and
  tokenizers for other tests: stand-ins (``LIBTESTS_STUBS``) where they are not installed.
* ``flag_gems`` (FlagGems tag v5.0.2): ``tests/test_layer_norm.py`` and ``tests/test_softmax.py``,
  30 of 144 tests (45 of 165 with the two files below): layer_norm forward (3 kernels by row width: <= 128, <= 4096, looped) at its 5
  shapes, with and without weight, in bfloat16, and the two persistent shapes in float32;
  layer_norm backward (2 autotuned kernels) in bfloat16 at (4096, 100) and (4096, 256); softmax
  backward (autotuned inner and non-inner kernels) at its 3 shapes, both dims, with and without
  -inf, in bfloat16. Left out: float16 and the rest of the dtype grid (the same kernels again), and
  softmax forward (``triton.heuristics`` only, nothing autotuned). Added for FlagGems' ``LibTuner``
  (a subclass of Triton's ``Autotuner`` with its own ``run``, reached only by ``tk_patch``):
  ``tests/test_mv.py`` in bfloat16 (``mv_kernel``, 48 configs, at its 3 shapes) and
  ``tests/test_amax.py`` (12 tests, each through ``amax_kernel``, 4 configs).
* ``fla`` (flash-linear-attention tests at main bc3b101d; wheel fla-core 0.6.0): in 0.6.0 most of
  chunk_gla's and chunk_gated_delta_rule's kernels use FLA's own ``fla_cache_autotune`` (a
  subclass of Triton's Autotuner, which the swap does not reach); the swap reaches ``chunk_fwd_h``
  and ``chunk_bwd_dh`` (chunk_gla), ``fused_recurrent`` (the gla test's reference), and
  ``chunk_scaled_dot_kkt_fwd`` and ``solve_tril`` (chunk_gated_delta_rule at chunk size 16 or 32;
  at the default 64 none of its kernels). 2 of 130 tests: ``test_gdn.py::test_chunk_with_chunk_size``
  at chunk 32 (D 32, float32) and ``test_gla.py::test_chunk`` at B4-T2048-H8-D64 float16, both
  forward and backward. Cold compiles dominate and this does not fit a minute: chunk_gla's forward
  alone took 72 s stock on the H200 (D 128, bf16), so expect 3 to 5 min for the stock run: after
  the others in one 570 s call it is cut off (partial results); give it a call of its own
  (``--libraries fla --timeout 280``). Left out: the Blackwell guard and the FlashQLA tests (other GPUs, a
  package we do not carry), the default-path test_chunk cases (no kernel the swap reaches),
  varlen, state_v_first and every further D, dtype or chunk size (each as many compiles again).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

sys.path.insert(0, str(Path(__file__).resolve().parent))  # swaps, beside it, however this is run
from swaps import VARIANTS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LIBTESTS = ROOT / ".libtests"
OUTCOMES = ("passed", "failed", "error", "skipped", "timed_out", "not_run")
#: what each run prints as it ends
SHOWN = ("variant", "seconds", "limit_s", "timed_out", "returncode", "autotune", "collected", "counts")


@dataclasses.dataclass(frozen=True)
class Library:
    """One library's test run: files (relative to ``.libtests/<name>``), ``-k`` selection, the
    modules to stand in for when missing, and its weight in the shared time budget."""

    files: tuple[str, ...]
    select: str
    stubs: tuple[str, ...] = ()
    weight: float = 1.0
    #: what ``tk_patch`` imports inside ``tunekit.patch_triton()`` before the tests import the library
    imports: tuple[str, ...] = ()


LIBRARIES: dict[str, Library] = {
    "liger": Library(
        ("test/transformers/test_dyt.py",),
        "(4096 and not (dtype1 and True)) or (1023 and False and not dtype1)",
        ("transformers", "transformers.tokenization_utils_base", "tokenizers", "tokenizers.models",
         "tokenizers.pre_tokenizers", "tokenizers.trainers"), imports=("liger_kernel.ops",)),
    "flag_gems": Library(
        ("tests/test_layer_norm.py", "tests/test_softmax.py", "tests/test_mv.py", "tests/test_amax.py"),
        "(test_layer_norm[ and (dtype2 or (dtype1 and (shape1 or shape4))))"
        " or (test_layer_norm_backward and dtype2 and (shape1 or shape4))"
        " or (test_accuracy_softmax_backward and dtype2)"
        " or (test_mv and dtype2) or test_amax", imports=("flag_gems",)),
    "fla": Library(
        ("tests/ops/test_gdn.py", "tests/ops/test_gla.py"),
        "(test_chunk_with_chunk_size and chunk32) or (test_gla and test_chunk[B4-T2048-H8-D64-)",
        weight=2.5, imports=("fla.ops",)),
}


def junit_name(nodeid: str) -> str:
    """A node id as junit XML names the test: ``classname::name``."""
    parts = nodeid.split("::")
    classname = ".".join([parts[0].removesuffix(".py").replace("/", "."), *parts[1:-1]])
    return f"{classname}::{parts[-1]}"


def read_junit(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Outcome and failure message of every test case in a junit XML file."""
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    for case in ElementTree.parse(path).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        outcome = "passed"
        for tag, label in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            found = case.find(tag)
            if found is not None:
                outcome = label
                messages[name] = (found.get("message") or "")[:300]
                break
        if outcomes.get(name, "passed") == "passed":
            outcomes[name] = outcome
    return outcomes, messages


def read_log(path: Path) -> tuple[list[str], str, dict[str, str]]:
    """The plugin's log: collected tests, what ``triton.autotune`` was, and each reported test's
    outcome (``timed_out``: set up, never torn down)."""
    collected: list[str] = []
    autotune = ""
    phases: dict[str, dict[str, str]] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        record = json.loads(line)
        if "collected" in record:
            collected, autotune = [junit_name(n) for n in record["collected"]], record["autotune"]
        else:
            phases.setdefault(junit_name(record["nodeid"]), {})[record["when"]] = record["outcome"]
    outcomes = {}
    for name, done in phases.items():
        failed = [when for when, outcome in done.items() if outcome == "failed"]
        if failed:
            outcomes[name] = "failed" if failed == ["call"] else "error"
        elif "skipped" in done.values():
            outcomes[name] = "skipped"
        else:
            outcomes[name] = "passed" if "teardown" in done else "timed_out"
    return collected, autotune, outcomes


def run_pytest(name: str, variant: str, limit: float, scratch: str, collect: bool = False) -> dict[str, Any]:
    """One pytest process of the library's selection; its outcomes, counts and time."""
    library = LIBRARIES[name]
    folder = Path(tempfile.mkdtemp(prefix=f"{name}-{variant}-", dir=scratch))
    env = {k: v for k, v in os.environ.items() if k not in ("LIBTESTS_VARIANT", "LIBTESTS_IMPORTS", "TUNEKIT_STORE")}
    env.update(TRITON_CACHE_DIR=str(folder / "triton-cache"), FLAGGEMS_CACHE_DIR=str(folder / "flaggems-cache"),
               LIBTESTS_LOG=str(folder / "log.jsonl"),
               LIBTESTS_SOFT_S=f"{0.85 * limit:.0f}", LIBTESTS_STUBS=",".join(library.stubs),
               PYTHONPATH=os.pathsep.join([str(ROOT / "benchmarks"), *filter(None, [env.get("PYTHONPATH")])]))
    env.update(LIBTESTS_VARIANT=variant)
    if variant != "stock":
        env.update(TUNEKIT_STORE=str(folder / "store.db"))
    if variant == "tk_patch":
        if not library.imports:
            raise SystemExit(f"{name}: tk_patch needs the library's modules to import in the block (Library.imports)")
        env.update(LIBTESTS_IMPORTS=",".join(library.imports))
    command = [sys.executable, "-m", "pytest", *(str(LIBTESTS / name / f) for f in library.files),
               "-k", library.select, "-q", "-p", "libtests_plugin", "-p", "no:cacheprovider",
               f"--junitxml={folder / 'junit.xml'}", *(["--collect-only"] if collect else [])]
    started = time.perf_counter()
    timed_out = False
    # cwd: FlagGems' conftest writes a report file there; own session: a kill reaches any worker
    with subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, start_new_session=True) as process:
        try:
            output, _ = process.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(process.pid, signal.SIGKILL)
            try:
                output, _ = process.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                output = ""
    seconds = time.perf_counter() - started
    collected, autotune, outcomes = read_log(folder / "log.jsonl")
    messages: dict[str, str] = {}
    if (folder / "junit.xml").exists() and not collect:
        outcomes, messages = read_junit(folder / "junit.xml")
    outcomes.update({test: "not_run" for test in collected if test not in outcomes})
    store = folder / "store.db"
    return {"variant": variant, "seconds": round(seconds, 1), "limit_s": round(limit), "timed_out": timed_out,
            "returncode": process.returncode, "autotune": autotune, "collected": len(collected),
            "counts": {o: sum(v == o for v in outcomes.values()) for o in OUTCOMES},
            "outcomes": outcomes, "messages": messages,
            "store_bytes": store.stat().st_size if store.exists() else None,
            "output_tail": (output or "").splitlines()[-25:]}


def versions() -> dict[str, str]:
    """Installed versions of what the runs depend on (without importing any of it)."""
    found = {}
    for package in ("torch", "triton", "pytest", "tunekit", "fla-core", "liger_kernel", "flag_gems",
                    "transformers", "tokenizers", "PyYAML", "einops", "numpy", "packaging"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "absent"
    return found


def compare(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One library's row: counts and seconds of each variant, and per other variant the tests whose
    outcome differs from the baseline's (stock's, or without a stock run the first variant's)."""
    row: dict[str, Any] = {"library": name, "files": LIBRARIES[name].files, "select": LIBRARIES[name].select,
                           "runs": runs, "differing": {}}
    if not runs:
        return row
    base = next((run for run in runs if run["variant"] == "stock"), runs[0])
    row["baseline"] = base["variant"]
    for run in runs:
        if run is not base:
            row["differing"][run["variant"]] = {
                test: [base["outcomes"].get(test, "not_run"), run["outcomes"].get(test, "not_run")]
                for test in sorted(base["outcomes"].keys() | run["outcomes"].keys())
                if base["outcomes"].get(test, "not_run") != run["outcomes"].get(test, "not_run")}
    return row


def counts_text(run: dict[str, Any] | None) -> str:
    """passed/failed/skipped/error, and how many tests the run never finished."""
    if run is None:
        return "-"
    c = run["counts"]
    text = f"{c['passed']}/{c['failed']}/{c['skipped']}/{c['error']}"
    return text + (f" +{c['not_run'] + c['timed_out']} unrun" if c["not_run"] + c["timed_out"] else "")


def print_table(rows: list[dict[str, Any]], variants: list[str]) -> None:
    """Per library and variant: counts, seconds, how many outcomes differ from the baseline's
    (``compare``); then each differing test (with the message of its failure or skip, the
    variant's first)."""
    print(f"{'library':<10} {'variant':<9} {'tests':>5}  {'p/f/s/e':<18} {'seconds':>8}  differ from")
    for row in rows:
        runs = {run["variant"]: run for run in row["runs"]}
        for variant in variants:
            run = runs.get(variant)
            seconds = f"{run['seconds']:.0f}{'!' if run['timed_out'] else ''}" if run else "-"
            differ = (f"{len(row['differing'][variant])} ({row['baseline']})" if variant in row["differing"]
                      else "baseline" if variant == row.get("baseline") else "-")
            print(f"{row['library']:<10} {variant:<9} {run['collected'] if run else '-':>5}  {counts_text(run):<18} "
                  f"{seconds:>8}  {differ}")
    for row in rows:
        runs = {run["variant"]: run for run in row["runs"]}
        for variant, differing in row["differing"].items():
            for test, (base_outcome, outcome) in differing.items():
                message = runs[variant]["messages"].get(test) or runs[row["baseline"]]["messages"].get(test, "")
                print(f"  {row['library']}: {test}: {row['baseline']} {base_outcome}, {variant} {outcome} "
                      f"{message[:160]}")
    print("(seconds with ! were cut off at their limit; - : not run)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--libraries", nargs="+", default=list(LIBRARIES), choices=list(LIBRARIES))
    parser.add_argument("--variants", nargs="+", default=["stock", "tk"], choices=list(VARIANTS),
                        help="; ".join(f"{name}: {what}" for name, what in VARIANTS.items()))
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per pytest run, at most")
    parser.add_argument("--budget", type=float, default=540.0,
                        help="seconds for all runs, shared out by weight among the runs still to come")
    parser.add_argument("--select", action="append", default=[], metavar="LIBRARY=EXPR",
                        help="replace a library's -k selection")
    parser.add_argument("--collect-only", action="store_true",
                        help="only collect (no GPU needed for fla and liger)")
    parser.add_argument("--json", help="write the environment, arguments and rows here")
    args = parser.parse_args()
    for spec in args.select:
        name, _, expression = spec.partition("=")
        LIBRARIES[name] = dataclasses.replace(LIBRARIES[name], select=expression)
    missing = [name for name in args.libraries if not (LIBTESTS / name / "pytest.ini").exists()]
    if missing:
        raise SystemExit(f"no tests for {missing} in {LIBTESTS}: run benchmarks/get_library_tests.sh first")
    scratch = tempfile.mkdtemp(prefix="libtests-")
    plan = [(name, variant) for name in args.libraries for variant in args.variants]
    deadline = time.monotonic() + args.budget
    rows = []
    for name in args.libraries:
        runs = []
        for variant in args.variants:
            weights = sum(LIBRARIES[n].weight for n, _ in plan)
            share = max(0.0, deadline - time.monotonic()) * LIBRARIES[name].weight / weights
            limit = min(args.timeout, share)
            plan.remove((name, variant))
            if limit < 10:
                print(f"{name} {variant}: skipped, the budget is spent", flush=True)
                continue
            run = run_pytest(name, variant, limit, scratch, args.collect_only)
            runs.append(run)
            print(json.dumps({"library": name, **{k: run[k] for k in SHOWN}}), flush=True)
            if run["collected"] == 0 or run["returncode"] not in (0, 1):
                print("\n".join(run["output_tail"]), flush=True)
        rows.append(compare(name, runs))
    print_table(rows, args.variants)
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"environment": versions(), "arguments": vars(args), "rows": rows}, file, indent=1)


if __name__ == "__main__":
    main()
