"""Third-party kernel libraries with ``triton.autotune`` swapped for tunekit's, as a user swaps it.

Each measured process is fresh, with a cold Triton cache of its own (and for FlagGems an empty
``FLAGGEMS_CACHE_DIR``, where it keeps its configs' timings): it sets
``triton.autotune = tunekit.autotune`` (variant ``tk``; ``stock`` leaves Triton's; ``tk_patch``
imports the library under ``tunekit.patch_triton()``, which reaches its own subclasses of Triton's
``Autotuner`` too) *before* it imports the library, builds the op's inputs on the GPU, and times the op's first forward call
(every autotuned kernel of the op tuned in it), with ``torch.cuda.synchronize()`` on both sides.
Then it times the op in steady state with ``triton.testing.do_bench`` (the winners' op time), and
saves the op's outputs for the driver to compare with stock's. ``tk_second``: a second process
with the store of a ``tk`` process before it (and a cold Triton cache): what a rerun pays.

The driver runs ``--rounds`` rounds, each op's ``--variants`` in fresh processes, in their order in
even rounds and the reverse in odd ones, then one ``tk_second`` per op, and prints per op and
variant: the first call (median, per-round ratios to stock's), the op time of each variant's winners (median, and tunekit's slowest
over its fastest across rounds), the largest output difference from stock's, and the stderr lines
tunekit's processes printed that stock's did not.

    python benchmarks/real_libraries.py --ops fla:chunk_gla --rounds 5 --json OUT.json
    python benchmarks/real_libraries.py --one fla:chunk_gla:tk --store S.db --save OUT.pt   # one process

Libraries: ``fla`` (flash-linear-attention's ``fla-core`` 0.6.0: about 200 ``triton.autotune``
sites, ``triton.heuristics`` over the autotuner among them; B, T, H, D = ``SHAPE``, bf16, forward),
``liger`` (Liger-Kernel 0.8.5, 14 sites) and ``flag_gems`` (FlagGems 5.0.2, about 400 sites, its
``libentry`` wrapper over the autotuner): ``ROWS`` rows of bf16, forward and backward. Needs a GPU.
"""

from __future__ import annotations

import os
import sys
import tempfile

if __name__ == "__main__" and "--one" in sys.argv:
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="real-lib-cache-")  # before triton is imported

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # swaps, beside it, however this is run
from swaps import VARIANTS, import_swapped  # noqa: E402

#: B, T, H, D of the issue's runs (bf16)
SHAPE = (2, 4096, 16, 128)


def fla_inputs(op: str) -> tuple[Callable[[], Any], str]:
    """The op's call on fresh inputs, and the module it comes from."""
    import torch

    B, T, H, D = SHAPE
    torch.manual_seed(0)
    bf16 = dict(device="cuda", dtype=torch.bfloat16)
    q, k, v = (torch.randn(B, T, H, D, **bf16) for _ in range(3))
    if op == "chunk_gla":
        from fla.ops.gla import chunk_gla

        g = torch.nn.functional.logsigmoid(torch.randn(B, T, H, D, **bf16))
        return lambda: chunk_gla(q, k, v, g)[0], "fla.ops.gla"
    if op == "chunk_gated_delta_rule":
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule

        k = torch.nn.functional.normalize(k.float(), p=2, dim=-1).to(torch.bfloat16)
        g = torch.nn.functional.logsigmoid(torch.randn(B, T, H, **bf16))
        beta = torch.rand(B, T, H, **bf16).sigmoid()
        return lambda: chunk_gated_delta_rule(q, k, v, g, beta)[0], "fla.ops.gated_delta_rule"
    raise SystemExit(f"unknown fla op {op!r}")


#: rows, hidden size of the row-wise ops (bf16): B*T tokens of a 4096-wide model
ROWS = (8192, 4096)


def _forward_backward(forward: Callable[..., Any], inputs: list[Any], seed: int = 1) -> Callable[[], Any]:
    """A call of ``forward(*inputs)`` (an output shaped as ``inputs[0]``) and its backward to every
    input, all outputs flattened into one float32 tensor: both directions' autotuned kernels are
    tuned by the first call."""
    import torch

    generator = torch.Generator(device="cuda").manual_seed(seed)
    # made here, outside any library's replacement of PyTorch's kernels: FlagGems' randn is autotuned
    # and its numbers depend on its config, so each autotuner's winner would draw other gradients
    out_grad = torch.randn(inputs[0].shape, device="cuda", dtype=inputs[0].dtype, generator=generator)

    def call() -> Any:
        out = forward(*inputs)
        grads = torch.autograd.grad(out, inputs, out_grad)
        return torch.cat([out.flatten().float(), *(g.flatten().float() for g in grads)])

    call.parts = [math.prod(inputs[0].shape), *(t.numel() for t in inputs)]  # type: ignore[attr-defined]
    return call


def liger_inputs(op: str) -> tuple[Callable[[], Any], str]:
    """Liger-Kernel 0.8.5: ``dyt`` is LigerDyTFunction (Dynamic Tanh) forward and backward; both
    kernels are autotuned over 18 configs, the backward with ``reset_to_zero``."""
    import torch

    if op != "dyt":
        raise SystemExit(f"unknown liger op {op!r}")
    from liger_kernel.ops.dyt import LigerDyTFunction

    M, N = ROWS
    torch.manual_seed(0)
    bf16 = dict(device="cuda", dtype=torch.bfloat16, requires_grad=True)
    x = torch.randn(M, N, **bf16)
    alpha = torch.full((1,), 0.5, **bf16)
    gamma, beta = torch.randn(N, **bf16), torch.randn(N, **bf16)
    return _forward_backward(LigerDyTFunction.apply, [x, alpha, gamma, beta]), "liger_kernel.ops.dyt"


def flag_gems_inputs(op: str) -> tuple[Callable[[], Any], str]:
    """FlagGems 5.0.2 through ``flag_gems.use_gems()`` (its ATen overrides), forward and backward:
    ``layer_norm`` (autotuned forward, backward and weight/bias backward kernels) and ``softmax``
    (its backward is autotuned; the forward uses FlagGems' own tuner). FlagGems wraps each
    autotuner in its ``libentry`` cache, which reads the Autotuner's ``best_config``. ``mv`` and
    ``sum`` are tuned by FlagGems' ``LibTuner``, a subclass of Triton's ``Autotuner`` with its own
    ``run``: the one-line switch does not reach it, ``tk_patch`` makes tunekit's class its base."""
    import flag_gems
    import torch

    M, N = ROWS
    torch.manual_seed(0)
    bf16 = dict(device="cuda", dtype=torch.bfloat16, requires_grad=True)
    x = torch.randn(M, N, **bf16)
    if op == "layer_norm":
        weight, bias = torch.randn(N, **bf16), torch.randn(N, **bf16)

        def forward(x: Any, weight: Any, bias: Any) -> Any:
            return torch.nn.functional.layer_norm(x, (N,), weight, bias)

        inputs = [x, weight, bias]
    elif op == "softmax":
        def forward(x: Any) -> Any:
            return torch.softmax(x, dim=-1)

        inputs = [x]
    elif op == "mv":  # FlagGems' mv_kernel, 48 configs (its mm on Hopper has up to 216 and 3 keys)
        vector = torch.randn(N, device="cuda", dtype=torch.bfloat16) / N ** 0.5

        def forward(x: Any) -> Any:
            return x * torch.mv(x, vector)[:, None]

        inputs = [x]
    elif op == "sum":  # a sum over two dims: FlagGems' sum_dim_kernel
        def forward(x: Any) -> Any:
            return x * x.view(M, 64, N // 64).sum(dim=(1, 2), keepdim=True).view(M, 1)

        inputs = [x]
    else:
        raise SystemExit(f"unknown flag_gems op {op!r}")
    call = _forward_backward(forward, inputs)

    def with_gems() -> Any:
        with flag_gems.use_gems():
            return call()

    with_gems.native = call  # type: ignore[attr-defined]  # PyTorch's own kernels: a reference for both variants
    with_gems.parts = call.parts  # type: ignore[attr-defined]
    return with_gems, "flag_gems.ops"


LIBRARIES: dict[str, Callable[[str], tuple[Callable[[], Any], str]]] = {
    "fla": fla_inputs, "liger": liger_inputs, "flag_gems": flag_gems_inputs}


def measure(library: str, op: str, variant: str, store: str, save: str, profile: str | None = None) -> dict[str, Any]:
    """One measured process: swap, import, first call, steady state, outputs saved: the first
    call's, a steady-state call's and, where the library's op has one, the op of PyTorch's own
    (``flag_gems`` outside ``use_gems()``) on the same inputs, each as its parts (output, then the
    gradient of each input)."""
    import torch
    import triton

    if variant != "stock":
        os.environ["TUNEKIT_STORE"] = store
    torch.zeros(1, device="cuda")  # the device is up before the library is imported (lazy imports)
    call, _ = import_swapped(variant, lambda: LIBRARIES[library](op))
    torch.cuda.synchronize()
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    start = time.perf_counter()
    out = call()
    torch.cuda.synchronize()
    first = time.perf_counter() - start
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    steady_ms = triton.testing.do_bench(call, warmup=25, rep=200)
    steady = call()
    native = getattr(call, "native", None)
    torch.save({"first": out.detach().cpu(), "steady": steady.detach().cpu(),
                "native": native().detach().cpu() if native is not None else None,
                "parts": getattr(call, "parts", None)}, save)
    return {"first_call_s": first, "op_ms": steady_ms, **tuned_by(), "tunings": tunings(),
            "tunings_by_own_run": tunings_by_own_run(), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "triton": triton.__version__}


def tunings() -> list[dict[str, Any]]:
    """What each tunekit autotuner of this process did: its kernel, key, winner, seconds, evaluations, workers."""
    import dataclasses
    import gc

    found = []
    for obj in gc.get_objects():
        report = getattr(obj, "tuning_report", None) if _tunekit_made(obj) else None
        if report is not None and dataclasses.is_dataclass(report):
            found.append({"kernel": getattr(getattr(obj, "fn", None), "__name__", str(obj)),
                          **{k: str(v) if not isinstance(v, (int, float)) else v
                             for k, v in dataclasses.asdict(report).items()}})
    return found


def tunings_by_own_run() -> list[dict[str, Any]]:
    """What each autotuner that benchmarked in its own ``run`` did (stock's, or a library's
    subclass, over tunekit's class or Triton's): its kernel, whether its base is tunekit's, how
    many configs it timed and its seconds (Triton's ``configs_timings`` and ``bench_time``, which
    FlagGems' ``LibTuner`` sets too; a winner its own cache held is not timed, so not listed)."""
    import gc

    from triton.runtime.autotuner import Autotuner

    found = []
    for obj in gc.get_objects():
        if isinstance(obj, Autotuner) and getattr(obj, "configs_timings", None) \
                and getattr(obj, "tuning_report", None) is None:
            function = getattr(obj, "base_fn", None) or getattr(obj, "fn", None)
            found.append({"kernel": getattr(function, "__name__", str(obj)), "on_tunekit_base": _tunekit_made(obj),
                          "configs_timed": len(obj.configs_timings), "bench_s": getattr(obj, "bench_time", None)})
    return found


def _tunekit_made(obj: Any) -> bool:
    """Whether ``obj`` is a tunekit autotuner (a library's subclass made under ``patch_triton`` included)."""
    tunekit = sys.modules.get("tunekit")
    return tunekit is not None and isinstance(obj, tunekit.Autotuner)


def tuned_by() -> dict[str, int]:
    """How many autotuners tuned something in this process: by tunekit's search; by a library's own
    ``run`` over tunekit's class (FlagGems' ``LibTuner`` under ``patch_triton``: its policy picks, Triton's
    benchmark times); and by others (stock's, or a library's own subclass of Triton's, which
    ``triton.autotune = tunekit.autotune`` does not reach)."""
    import gc

    from triton.runtime.autotuner import Autotuner

    counts = {"tuned_by_tunekit": 0, "tuned_by_library_run_on_tunekit_base": 0, "tuned_by_others": 0}
    for obj in gc.get_objects():
        if not isinstance(obj, Autotuner):
            continue
        cache = getattr(obj, "cache", None)
        # a library's cache (FlagGems' is a database table) has no length: its configs_timings says it tuned
        tuned = bool(cache) if isinstance(cache, dict) else bool(getattr(obj, "configs_timings", None))
        if _tunekit_made(obj) and ((isinstance(cache, dict) and cache) or getattr(obj, "tuning_report", None)):
            counts["tuned_by_tunekit"] += 1  # its winners in Triton's cache attribute: searched, or from the store
        elif tuned:
            counts["tuned_by_library_run_on_tunekit_base" if _tunekit_made(obj) else "tuned_by_others"] += 1
    return counts


def run_one(library: str, op: str, variant: str, store: str, scratch: str, timeout: float,
            profile: str | None = None) -> dict[str, Any]:
    save = os.path.join(scratch, f"{op}-{variant}-{time.monotonic_ns()}.pt")
    command = [sys.executable, __file__, "--one", f"{library}:{op}:{'tk' if variant == 'tk_second' else variant}",
               "--store", store, "--save", save, *(["--profile", profile] if profile else [])]
    # FlagGems keeps its configs' timings and its generated code in FLAGGEMS_CACHE_DIR (by default
    # in the home directory): a fresh one per process, or a later process reads an earlier one's timings
    env = {**os.environ, "FLAGGEMS_CACHE_DIR": tempfile.mkdtemp(prefix="flaggems-cache-", dir=scratch)}
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"op": op, "variant": variant, "error": f"timed out after {timeout:.0f} s"}
    record: dict[str, Any] = {"op": op, "variant": variant, "process_s": time.perf_counter() - started,
                              "stderr": done.stderr.splitlines()[-400:], "returncode": done.returncode}
    if done.returncode == 0:
        record.update(json.loads(done.stdout.strip().splitlines()[-1]))
        record["saved"] = save
    else:
        record["error"] = done.stderr[-3000:]
    return record


def _difference(x: Any, y: Any) -> float:
    """max |x - y| / max |y|."""
    x, y = x.float(), y.float()
    return float((x - y).abs().max() / y.abs().max().clamp_min(1e-12))


def largest_difference(a: str, b: str) -> float:
    """The largest difference between the first calls' outputs saved at ``a`` and ``b``."""
    import torch

    return _difference(torch.load(a)["first"], torch.load(b)["first"])


def differences_by_part(saved: str, stock_saved: str) -> dict[str, list[float]]:
    """Per part (output, then each input's gradient): this process's first call against stock's,
    its steady-state call against its first, and both variants' first calls (and this one's steady
    call) against PyTorch's own op."""
    import torch

    mine, stock = torch.load(saved), torch.load(stock_saved)
    bounds = [0]
    for size in mine["parts"] or [mine["first"].numel()]:
        bounds.append(bounds[-1] + size)

    def by_part(x: Any, y: Any) -> list[float]:
        return [round(_difference(x[a:b], y[a:b]), 6) for a, b in zip(bounds, bounds[1:])]

    found = {"vs_stock": by_part(mine["first"], stock["first"]), "steady_vs_first": by_part(mine["steady"], mine["first"])}
    if mine["native"] is not None:
        found["vs_native"] = by_part(mine["first"], mine["native"])
        found["steady_vs_native"] = by_part(mine["steady"], mine["native"])
        found["stock_vs_native"] = by_part(stock["first"], stock["native"])
    return found


def summarize(records: list[dict[str, Any]], ops: list[str], variants: list[str]) -> list[dict[str, Any]]:
    """Per op and variant other than stock: the figures beside stock's (``tk``'s row first: the
    one-line switch; then ``tk_patch``'s, if run)."""
    rows = []
    for op in ops:
        def of(variant: str) -> list[dict[str, Any]]:
            return [r for r in records if r["op"] == op and r["variant"] == variant and "first_call_s" in r]

        for variant in [v for v in variants if v != "stock"]:
            rows.append(_beside_stock(op, variant, of("stock"), of(variant), of("tk_second") if variant == "tk" else [],
                                      [r for r in records if r["op"] == op and r["variant"] in (variant, "stock")
                                       and "error" in r]))
    return rows


def _beside_stock(op: str, variant: str, stock: list[dict[str, Any]], tk: list[dict[str, Any]],
                  second: list[dict[str, Any]], failed: list[dict[str, Any]]) -> dict[str, Any]:
    row: dict[str, Any] = {"op": op, "variant": variant, "rounds": min(len(stock), len(tk)), "failed": failed}
    if stock and tk:
        pairs = list(zip(stock, tk))
        row["stock_first_s"] = statistics.median(r["first_call_s"] for r in stock)
        row["tk_first_s"] = statistics.median(r["first_call_s"] for r in tk)
        row["first_ratio_of_medians"] = row["tk_first_s"] / row["stock_first_s"]
        row["first_ratio_per_round"] = statistics.median(t["first_call_s"] / s["first_call_s"] for s, t in pairs)
        row["stock_op_ms"] = statistics.median(r["op_ms"] for r in stock)
        row["tk_op_ms"] = statistics.median(r["op_ms"] for r in tk)
        row["op_ratio"] = row["tk_op_ms"] / row["stock_op_ms"]
        row["tk_op_spread"] = max(r["op_ms"] for r in tk) / min(r["op_ms"] for r in tk)
        row["stock_op_spread"] = max(r["op_ms"] for r in stock) / min(r["op_ms"] for r in stock)
        row["largest_difference"] = max(largest_difference(t["saved"], s["saved"]) for s, t in pairs)
        row["differences_by_part"] = [differences_by_part(t["saved"], s["saved"]) for s, t in pairs]
        row["tunings"] = tk[0].get("tunings")
        row["kernels_tuned_by_tunekit"] = tk[0].get("tuned_by_tunekit")
        row["kernels_tuned_by_library_run_on_tunekit_base"] = tk[0].get("tuned_by_library_run_on_tunekit_base")
        row["tunings_by_own_run"] = tk[0].get("tunings_by_own_run")
        row["kernels_tuned_by_others"] = tk[0].get("tuned_by_others")
        stock_lines = {line for r in stock for line in r["stderr"]}
        row["new_stderr_lines"] = sorted({line for r in tk for line in r["stderr"]} - stock_lines)[:10]
    if second and stock:
        row["second_s"] = statistics.median(r["first_call_s"] for r in second)
        row["second_over_stock_first"] = row["second_s"] / row["stock_first_s"]
    return row


def drive(args: argparse.Namespace) -> None:
    scratch = tempfile.mkdtemp(prefix="real-lib-")
    records: list[dict[str, Any]] = []
    last_store: dict[str, str] = {}
    deadline = time.monotonic() + args.budget
    for round_index in range(args.rounds):
        for spec in args.ops:
            library, op = spec.split(":")
            order = args.variants if round_index % 2 == 0 else args.variants[::-1]
            for variant in order:
                if time.monotonic() > deadline:
                    break
                store = os.path.join(tempfile.mkdtemp(dir=scratch), "store.db")
                profile = (os.path.join(args.profile_dir, f"{op}-{variant}.prof")
                           if args.profile_dir and round_index == 0 else None)
                record = run_one(library, op, variant, store, scratch, args.timeout, profile)
                record["round"] = round_index
                records.append(record)
                if variant == "tk":
                    last_store[op] = store
                print(json.dumps({k: v for k, v in record.items() if k not in ("stderr", "saved")}), flush=True)
    for spec in args.ops:
        library, op = spec.split(":")
        if op in last_store and time.monotonic() < deadline:
            record = run_one(library, op, "tk_second", last_store[op], scratch, args.timeout)
            records.append(record)
            print(json.dumps({k: v for k, v in record.items() if k not in ("stderr", "saved")}), flush=True)
    rows = summarize(records, [spec.split(":")[1] for spec in args.ops], args.variants)
    for row in rows:
        print(json.dumps({k: v for k, v in row.items() if k != "failed"}), flush=True)
        for failure in row["failed"]:
            print(f"FAILED {failure['op']}:{failure['variant']}: {failure['error'][-1500:]}", flush=True)
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"arguments": vars(args), "shapes": {"fla": SHAPE, "liger": ROWS, "flag_gems": ROWS},
                       "records": records, "summary": rows}, file, indent=1, default=str)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--one", metavar="LIBRARY:OP:VARIANT", help="measure one process and print one JSON line")
    parser.add_argument("--store", help="with --one: tunekit's store")
    parser.add_argument("--save", help="with --one: where the op's output is saved")
    parser.add_argument("--ops", nargs="+", default=["fla:chunk_gla", "fla:chunk_gated_delta_rule", "liger:dyt",
                                                     "flag_gems:layer_norm", "flag_gems:softmax"],
                        metavar="LIBRARY:OP")
    parser.add_argument("--variants", nargs="+", default=["stock", "tk"], choices=list(VARIANTS),
                        help="what each round measures, stock included (tk_second follows tk's last store): "
                        + "; ".join(f"{name}: {what}" for name, what in VARIANTS.items()))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per measured process")
    parser.add_argument("--budget", type=float, default=540.0, help="seconds for all rounds (the rest is skipped)")
    parser.add_argument("--json", help="write the records and the summary here")
    parser.add_argument("--profile", help="with --one: write a cProfile of the first call here")
    parser.add_argument("--profile-dir", help="profile the first round's first calls into OP-VARIANT.prof here")
    args = parser.parse_args()
    if args.one:
        library, op, variant = args.one.split(":")
        print(json.dumps(measure(library, op, variant, args.store, args.save, args.profile)), flush=True)
        return
    drive(args)


if __name__ == "__main__":
    main()
