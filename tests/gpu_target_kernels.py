"""Kernels and a child process for the compile-pool tests: compiled for an H100/H200 target on a
CPU-only machine.

A process that imported Triton for the interpreter cannot compile for a GPU (Triton's own
library functions are interpreted there), and compile workers are forked copies of the process
that asks, so the compiles run in a child started with the interpreter off: ``compile_rounds``
there, ``run_compile_rounds`` here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import triton
import triton.language as tl

TESTS = Path(__file__).parent


class Result(NamedTuple):
    """One compile's result, as the child reported it."""

    status: str
    seconds: float
    error: str | None
    shared_bytes: int | None
    output: str


@triton.jit
def slow_to_compile(x_ptr, STEPS: tl.constexpr):
    # unrolled at compile time: STEPS large enough makes the compiler run for minutes
    acc = tl.load(x_ptr)
    for i in tl.static_range(STEPS):
        acc = acc * 1.0001 + i
    tl.store(x_ptr, acc)


def run_compile_rounds(rounds: list[dict[str, Any]], workers: int, cache: Path, timeout: float = 600) -> list[dict]:
    """Compile ``rounds`` in one pool of ``workers`` in a child process with the interpreter off;
    per round: results (status, seconds, error, shared bytes, output) in job order (None: left
    out at the deadline), its wall seconds, and the workers started so far. A round is
    ``{"jobs": [[module, kernel, args, kwargs], ...], "timeout": s, "deadline": s, "more": [...]}``,
    ``"more"``'s jobs given to the round one per result taken (as a tuning that asks for a config
    as each trial comes), their results after the jobs'; a tensor
    argument is ``{"tensor": "float16"}`` (``"misaligned": true`` for one 8 bytes off)."""
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": str(cache)}
    call = f"import gpu_target_kernels as g; g.compile_rounds({json.dumps(rounds)!r}, {workers})"
    done = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(TESTS)!r}); {call}"],
                          capture_output=True, text=True, env=env, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for round_ in report:
        round_["results"] = [r if r is None else Result(*r) for r in round_["results"]]
    return report


def compile_rounds(rounds_json: str, workers: int) -> None:
    """The child's side of ``run_compile_rounds``: prints the results as one JSON line."""
    import importlib
    import time

    import torch
    from triton.backends.compiler import GPUTarget

    from tunekit.compiler import CompilePool, TensorSpec, compile_job_for

    def argument(value: Any) -> Any:
        if isinstance(value, dict) and value.get("real"):  # a CPU tensor, as a launch passes one
            tensor = torch.zeros(64, dtype=getattr(torch, value["tensor"]))
            return tensor[1:] if value.get("misaligned") else tensor
        if isinstance(value, dict):
            return TensorSpec(getattr(torch, value["tensor"]), not value.get("misaligned", False))
        return value

    pool = CompilePool(workers)
    report = []

    def job_of(module: str, name: str, args: list, kwargs: dict) -> Any:
        return compile_job_for(getattr(importlib.import_module(module), name), GPUTarget("cuda", 90, 32),
                               tuple(argument(a) for a in args), {k: argument(v) for k, v in kwargs.items()})

    try:
        for round_ in json.loads(rounds_json):
            jobs = [job_of(*job) for job in round_["jobs"]]
            later = [job_of(*job) for job in round_.get("more", [])]
            results: list[Any] = [None] * (len(jobs) + len(later))
            start = time.time()
            deadline = start + round_["deadline"] if "deadline" in round_ else None
            timeout = round_.get("timeout")
            taken, given = [0], [0]

            def more() -> list[Any]:
                if given[0] < min(taken[0], len(later)):
                    given[0] += 1
                    return [later[given[0] - 1]]
                return []

            for index, result in pool.as_completed(jobs, (lambda: timeout) if timeout else None, deadline,
                                                   more=more if later else None):
                taken[0] += 1
                results[index] = [result.status.value, result.seconds, result.error, result.shared_bytes,
                                  result.output]
            report.append({"results": results, "seconds": time.time() - start, "started": pool.started})
    finally:
        pool.close()
    print(json.dumps(report))
