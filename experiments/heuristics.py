"""How well ``tunekit store heuristics`` predicts configs for shapes never tuned (issue 15, item 2).

Every figure is the time of a predicted config at a shape over that shape's optimum, both read
from complete recordings of the space at that shape (every config measured on the H200):

1. The shipped recordings (``kernels/h200``), each kernel's shapes left out one at a time: each
   rule fitted on the kernel's other shapes.
2. Held-out GEMM shapes (``record_spaces.py``'s ``matmul_heldout`` suite, recorded for this and
   used to fit nothing): the rule ``tunekit store heuristics`` would write from the 4 shipped GEMM
   shapes, beside the nearest tuned key's winner (what tunekit fell back to before), the single
   config best over the 4 shapes, and the best of the Triton tutorial's 8 configs at that shape
   (what stock ``triton.autotune`` with that list picks, timing all 8 there). A last column fits the
   rule on all other GEMM shapes (the shipped ones and the other held-out ones) instead.

    python experiments/heuristics.py [--heldout experiments/results/heuristics/spaces] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from tunekit.config import config_json
from tunekit.config_rules import RULES, KeyTimes, choose_rule, fit_rule, geomean, leave_one_out
from tunekit.keys import TuningKey, nearest_key
from tunekit.kernels import matmul
from tunekit.recorded import read_space

#: The held-out shapes recorded first: their table was seen with an earlier design of the rules (the
#: tree's leaves then held one key, and the best rule leaving one key out was written). The design
#: was changed (two keys per leaf, the one-standard-error rule) and frozen before the other shapes
#: were seen; the report gives both groups apart.
SEEN_DURING_DESIGN = {"m16_n4096_k4096", "m3072_cube", "m128_n4096_k14336", "m1024_n5120_k5120", "m32_n14336_k4096",
                      "m2048_n8192_k1024", "m256_n11008_k4096"}

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "kernels" / "h200"
HELDOUT = ROOT / "experiments" / "results" / "heuristics" / "spaces"


def key_times(index: Path) -> dict[str, list[tuple[str, KeyTimes]]]:
    """Per kernel, (shape, KeyTimes) of every recording that ``index`` lists."""
    found: dict[str, list[tuple[str, KeyTimes]]] = {}
    for row in json.loads(index.read_text())["spaces"]:
        recorded = read_space(index.parent / row["file"])
        times = {config_json(record.params): record.time_ms if record.ok else None for record in recorded.records}
        winner = min((c for c, t in times.items() if t is not None), key=times.get)
        kernel = "matmul" if row["kernel"] == "matmul_heldout" else row["kernel"]
        found.setdefault(kernel, []).append((row["shape"], KeyTimes(TuningKey.from_json(row["key"]), winner, times)))
    return found


def slowdown_of(config: dict, at: KeyTimes) -> float:
    value = at.slowdown(json.dumps(config, sort_keys=True, default=str))
    return math.nan if value is None else value


def fmt(values: list[float]) -> str:
    finite = [v for v in values if math.isfinite(v)]
    failed = len(values) - len(finite)
    return f"{geomean(finite):.3f} / {max(finite):.3f}" + (f" ({failed} not measured or failed)" if failed else "")


def shipped_table(shipped: dict[str, list[tuple[str, KeyTimes]]]) -> list[str]:
    lines = ["| kernel | shapes | " + " | ".join(RULES) + " |", "|---|---|" + "---|" * len(RULES)]
    for kernel, rows in shipped.items():
        data = [k for _, k in rows]
        cells = []
        for kind in RULES:
            values = [math.nan if v is None else v for v in leave_one_out(data, kind)]
            cells.append(fmt(values))
        lines.append(f"| {kernel} | {len(data)} | " + " | ".join(cells) + " |")
    return lines


def heldout_table(train: list[tuple[str, KeyTimes]], heldout: list[tuple[str, KeyTimes]]) -> tuple[list[str], str]:
    data = [k for _, k in train]
    rule, _ = choose_rule(data)
    constant = fit_rule(data, "constant")
    tutorial = [config_json(c) for c in matmul.tutorial_configs()]
    winners = {k.key: k.winner for k in data}
    everything = data + [k for _, k in heldout]
    columns: dict[str, list[float]] = {"rule": [], "nearest key": [], "single best": [], "tutorial's 8": [],
                                       "rule, all other GEMM shapes": []}
    seen: dict[str, list[float]] = {name: [] for name in columns}
    unseen: dict[str, list[float]] = {name: [] for name in columns}
    lines = [f"| shape (M, N, K) | {' | '.join(columns)} |", "|---|" + "---|" * len(columns)]
    for shape, at in heldout:
        near = nearest_key(at.key, winners)
        others = [k for k in everything if k is not at]
        values = {
            "rule": slowdown_of(rule.config_for(at.key), at),
            "nearest key": slowdown_of(json.loads(winners[near]), at),
            "single best": slowdown_of(constant.config_for(at.key), at),
            "tutorial's 8": min(at.slowdown(c) for c in tutorial),
            "rule, all other GEMM shapes": slowdown_of(choose_rule(others)[0].config_for(at.key), at),
        }
        for name, value in values.items():
            columns[name].append(value)
            (seen if shape in SEEN_DURING_DESIGN else unseen)[name].append(value)
        dims = ", ".join(str(at.key.args[n]) for n in ("M", "N", "K"))
        mark = " (seen)" if shape in SEEN_DURING_DESIGN else ""
        lines.append(f"| {shape}{mark} ({dims}) | " + " | ".join(f"{v:.3f}" for v in values.values()) + " |")
    for label, group in (("all", columns), ("seen during design", seen), ("never seen", unseen)):
        if group[next(iter(group))]:
            count = len(group[next(iter(group))])
            lines.append(f"| **geomean / worst, {label} ({count})** | " + " | ".join(fmt(v) for v in group.values())
                         + " |")
    return lines, rule.kind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--heldout", type=Path, default=HELDOUT, help="exported held-out recordings (index.json)")
    parser.add_argument("--out", type=Path, help="write report.md there")
    args = parser.parse_args()
    shipped = key_times(SHIPPED / "index.json")
    report = ["# Configs for shapes never tuned (`tunekit store heuristics`)", "",
              "Each cell: the predicted config's time over the shape's optimum, geomean / worst, from complete "
              "H200 recordings (`python experiments/heuristics.py`).", "",
              "## Shipped recordings, each shape left out in turn", ""] + shipped_table(shipped)
    if (args.heldout / "index.json").exists():
        heldout = key_times(args.heldout / "index.json")["matmul"]
        lines, kind = heldout_table(shipped["matmul"], heldout)
        report += ["", f"## {len(heldout)} held-out GEMM shapes (bf16), rules fitted on the 4 shipped GEMM shapes",
                   "", f"The rule chosen leaving one of the 4 shapes out: `{kind}`.", ""] + lines
    text = "\n".join(report) + "\n"
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report.md").write_text(text)


if __name__ == "__main__":
    main()
