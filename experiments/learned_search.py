"""Learned search against every other strategy, on the shared Kernel Tuner spaces and the shipped
H200 spaces: the tables of the learned search results (docs/results/learned-search.md), in one command.

    python experiments/learned_search.py --seeds 10 --out experiments/results/learned_search --jobs 2

Parts, each written to ``OUT/PART/runs.jsonl.gz`` (one replayed tuning per line: its space,
strategy, seed and the time and clock after every evaluation) and resumed from there:

* ``tunekit``: tunekit's strategies on the 25 shared Kernel Tuner files and the 12 H200 spaces;
* ``kernel_tuner``: Kernel Tuner's strategies on the same files, in its simulation mode
  (``tunekit.kerneltuner`` says how they are made comparable);
* ``transfer``: the H200 spaces again, each tuning starting with the store holding the kernel's
  other shapes (leave one shape out).

Every tuning has the same budget (``--budget``, 200 evaluations) and ``--seeds`` seeds. Then
``OUT/report.md`` is written from whatever runs exist (``--report-only`` writes it alone):

* per strategy, over all spaces, over the six spaces the default strategy's design was chosen
  on (``SELECTION``) and over the held-out rest: the share of runs within 2 % of the optimum
  in the budget, the geometric mean of best / optimum after 20, 50 and 200 evaluations, the
  score over evaluations and over seconds (``tunekit.metrics``), and the share of failing
  configs tried after the 20th evaluation beside the spaces' own share;
* per space, runs within 2 % of ``default`` and ``rf``;
* the H200 spaces with and without the store: median evaluations to within 2 % and 5 %.

and ``OUT/curves.png``, the tuning curves over the held-out spaces.

``--shard K/N`` replays every N-th tuning only, and ``--stop-after S`` stops starting tunings
after S seconds, so that a part can be spread over machines and time-limited calls.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from tunekit.compare import replay, same_kernel_elsewhere
from tunekit.kernels import shipped
from tunekit.metrics import (Run, SpaceStats, best_so_far, first_reaching, score_over_evaluations,
                             score_over_seconds)
from tunekit.recorded import RecordedSpace, read_space

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("TUNEKIT_SHARED_SPACES", HERE.parents[1] / "shared" / "spaces")) / "kerneltuner"
TUNEKIT_STRATEGIES = ["random", "optuna", "optuna-gp", "rf", "default"]
KT_STRATEGIES = ["greedy_ils", "genetic_algorithm", "dual_annealing", "simulated_annealing", "pso", "mls",
                 "bayes_opt"]
TRANSFER_STRATEGIES = ["optuna", "rf", "default"]
#: The only spaces looked at while the default strategy's design and options were chosen,
#: named before any was replayed; every other space is held out.
SELECTION = {f"kt_data/{kernel}/{gpu}" for kernel in ("convolution", "gemm", "pnpoly")
             for gpu in ("RTX_3090", "RTX_2080_Ti")}
#: Re-measurements of four of those spaces (same kernels, GPUs and configs, another measuring
#: method): not held out either, so reported apart.
REMEASURED = {f"methodology_variant/{kernel}/{gpu}" for kernel in ("convolution", "pnpoly")
              for gpu in ("RTX_3090", "RTX_2080_Ti")}
CHECKPOINTS = (20, 50, 200)


def shared_paths() -> list[Path]:
    return sorted(p for p in SHARED.rglob("*.json.gz") if "t4_example" not in p.parts)


def all_paths() -> list[Path]:
    return shared_paths() + [Path(p) for p in shipped.paths()]


# -- replaying --------------------------------------------------------------------------------

_spaces: dict[str, RecordedSpace] = {}


def _space(path: str) -> RecordedSpace:
    if path not in _spaces:
        _spaces[path] = read_space(path)
    return _spaces[path]


def _tunekit_task(path: str, strategy: str, seed: int, budget: int, history: Sequence[str]) -> Run:
    return replay(_space(path), strategy, seed, budget, history=[_space(p) for p in history])


def _kernel_tuner_task(path: str, strategy: str, seed: int, budget: int, history: Sequence[str]) -> Run:
    from tunekit.kerneltuner import replay_kernel_tuner

    return replay_kernel_tuner(_space(path), strategy, seed, budget,
                               scratch=Path(os.environ["TMPDIR_KT"]) / str(os.getpid()))


def part_tasks(part: str, budget: int, seeds: int, strategies: Sequence[str] | None = None) -> list[tuple]:
    """(function, path, strategy, seed, budget, history paths) of every tuning of a part;
    ``strategies``: those of the part's kind instead of its defaults (Kernel Tuner's names for
    the ``kernel_tuner`` part, tunekit's for the others)."""
    defaults = {"tunekit": TUNEKIT_STRATEGIES, "transfer": TRANSFER_STRATEGIES, "kernel_tuner": KT_STRATEGIES}[part]
    if strategies:
        theirs = part == "kernel_tuner"
        defaults = [s for s in strategies if (s in KT_STRATEGIES) == theirs]
    if part == "transfer":
        paths = [str(p) for p in shipped.paths()]
        spaces = {_space(p).name: p for p in paths}
        elsewhere = same_kernel_elsewhere({name: _space(p) for name, p in spaces.items()})
        return [(_tunekit_task, p, s, seed, budget, tuple(spaces[o] for o in elsewhere[_space(p).name]))
                for p in paths for s in defaults for seed in range(seeds)]
    function = _tunekit_task if part == "tunekit" else _kernel_tuner_task
    return [(function, str(p), s, seed, budget, ()) for p in all_paths() for s in defaults for seed in range(seeds)]


def read_runs(path: Path, repair: bool = False) -> list[dict]:
    """The runs written so far. A replay killed while writing leaves a cut-off last line: it is
    dropped, and with ``repair`` the file is rewritten without it, so that appending goes on."""
    if not path.exists():
        return []
    runs, cut = [], False
    with gzip.open(path, "rt") as lines:
        try:
            for line in lines:
                try:
                    runs.append(json.loads(line))
                except json.JSONDecodeError:
                    cut = True
        except (EOFError, gzip.BadGzipFile):
            cut = True
    if cut and repair:
        whole = path.with_suffix(".repaired")
        with gzip.open(whole, "wt") as sink:
            sink.writelines(json.dumps(run) + "\n" for run in runs)
        whole.replace(path)
    return runs


def replay_part(part: str, out: Path, budget: int, seeds: int, jobs: int, shard: tuple[int, int],
                stop_after: float | None, strategies: Sequence[str] | None) -> None:
    """Replay the part's tunings that ``out/part/runs.jsonl.gz`` lacks, appending each as it ends."""
    target = out / part / "runs.jsonl.gz"
    target.parent.mkdir(parents=True, exist_ok=True)
    done = {(r["space"], r["strategy"], r["seed"], r["budget"]) for r in read_runs(target, repair=True)}
    run_strategy = (lambda s: f"kt:{s}") if part == "kernel_tuner" else (lambda s: s)  # as runs name it
    tasks = [t for i, t in enumerate(part_tasks(part, budget, seeds, strategies)) if i % shard[1] == shard[0]
             and (_space(t[1]).name, run_strategy(t[2]), t[3], budget) not in done]
    print(f"{part}: {len(tasks)} tunings to replay ({len(done)} already done)", file=sys.stderr, flush=True)
    os.environ.setdefault("TMPDIR_KT", tempfile.mkdtemp(prefix="learned-search-"))  # Kernel Tuner's file copies
    started = time.perf_counter()
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool, gzip.open(target, "at") as sink:
        queue, running = iter(tasks), {}
        while True:
            late = stop_after is not None and time.perf_counter() - started > stop_after
            while len(running) < jobs and not late:
                task = next(queue, None)
                if task is None:
                    break
                running[pool.submit(*task)] = task
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                _, path, strategy, seed, _, history = running.pop(future)
                try:
                    run = future.result()
                except Exception as error:  # one broken tuning must not cost the others' results
                    print(f"{part}: {path} {strategy} seed {seed} failed: {error!r}", file=sys.stderr, flush=True)
                    continue
                sink.write(json.dumps({"space": run.space, "strategy": run.strategy, "seed": seed,
                                       "budget": run.budget, "transfer": bool(history),
                                       "times_ms": [t if math.isfinite(t) else None for t in run.times_ms.tolist()],
                                       "seconds": run.seconds.tolist()}) + "\n")
                sink.flush()
    print(f"{part}: stopped after {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)


# -- the tables -------------------------------------------------------------------------------


def as_run(row: dict) -> Run:
    times = np.array([math.inf if t is None else t for t in row["times_ms"]], dtype=float)
    return Run(row["space"], row["strategy"], row["seed"], row["budget"], times, np.array(row["seconds"], dtype=float))


def geomean(values: Iterable[float]) -> float:
    values = list(values)
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else math.nan


class Table:
    """The per-(space, strategy) statistics of a set of runs."""

    def __init__(self, runs: Sequence[Run], stats: dict[str, SpaceStats], budget: int) -> None:
        self.stats, self.budget = stats, budget
        self.runs: dict[tuple[str, str], list[Run]] = {}
        seen = set()
        for run in runs:
            if run.budget != budget or (run.space, run.strategy, run.seed) in seen:
                continue  # another budget's run, or a second copy of one (concatenated shards)
            seen.add((run.space, run.strategy, run.seed))
            self.runs.setdefault((run.space, run.strategy), []).append(run)

    def strategies(self) -> list[str]:
        return list(dict.fromkeys(strategy for _, strategy in self.runs))

    def spaces(self, strategy: str) -> list[str]:
        return [space for space, s in self.runs if s == strategy]

    def best(self, run: Run) -> np.ndarray:
        return best_so_far(run.times_ms, self.stats[run.space].worst)

    def within(self, space: str, strategy: str, threshold: float = 1.02) -> list[bool]:
        optimum = self.stats[space].optimum
        return [bool(len(r.times_ms)) and float(self.best(r)[-1]) <= optimum * threshold
                for r in self.runs[space, strategy]]

    def ratio_after(self, space: str, strategy: str, evaluations: int) -> list[float]:
        return [self.run_ratio_after(r, evaluations) for r in self.runs[space, strategy]]

    def run_ratio_after(self, run: Run, evaluations: int) -> float:
        """One run's best / optimum after ``evaluations`` (its last where it made fewer; the
        space's worst where it made none)."""
        stats = self.stats[run.space]
        if not len(run.times_ms):
            return stats.worst / stats.optimum
        return float(self.best(run)[min(evaluations, len(run.times_ms)) - 1]) / stats.optimum

    def score(self, space: str, strategy: str, seconds: bool = False) -> float:
        """``tunekit.metrics``' score, within the budget only (a run is never scored where it did
        not run; NaN where the space's score range starts past the budget)."""
        stats, runs = self.stats[space], self.runs[space, strategy]
        if seconds:
            return score_over_seconds(stats, [(self.best(r), r.seconds) for r in runs], self.budget)
        return score_over_evaluations(stats, [self.best(r) for r in runs], self.budget)

    def failing_share(self, space: str, strategy: str, after: int = 20) -> float:
        """Share of failing configs among the evaluations after the ``after``-th, over all seeds."""
        tail = np.concatenate([r.times_ms[after:] for r in self.runs[space, strategy]] or [np.empty(0)])
        return float(np.isinf(tail).mean()) if len(tail) else math.nan

    def evals_to(self, space: str, strategy: str, threshold: float) -> float:
        """Median over seeds of the evaluations to within ``threshold`` (unreached: infinite)."""
        return float(np.median(self.evals_to_per_seed(space, strategy, threshold)))

    def evals_to_per_seed(self, space: str, strategy: str, threshold: float) -> list[float]:
        """Each run's evaluations to within ``threshold`` of the optimum (unreached: infinite)."""
        target = self.stats[space].optimum * threshold
        reached = [first_reaching(self.best(run), target) for run in self.runs[space, strategy]]
        return [math.inf if r is None else float(r) for r in reached]


def space_failure_share(stats: SpaceStats) -> float:
    return 1.0 - len(stats.sorted_times) / stats.n_total


def fmt(value: float, digits: int = 3) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "-"
    return f"{value:.{digits}f}" if math.isfinite(value) else "not reached"


def aggregate_rows(table: Table, names: Sequence[str]) -> list[list[str]]:
    rows = []
    for strategy in table.strategies():
        spaces = [s for s in table.spaces(strategy) if s in names]
        if not spaces:
            continue
        within = [w for s in spaces for w in table.within(s, strategy)]
        seeds = sorted({len(table.runs[s, strategy]) for s in spaces})
        cells = [strategy, str(len(spaces)), "-".join(map(str, (seeds[0], seeds[-1]) if len(seeds) > 1 else seeds)),
                 f"{100 * statistics.fmean(within):.0f} %"]
        cells += [fmt(geomean(r for s in spaces for r in table.ratio_after(s, strategy, n)))
                  for n in CHECKPOINTS if n <= table.budget]
        for seconds in (False, True):
            scores = [table.score(s, strategy, seconds) for s in spaces]
            scores = [v for v in scores if not math.isnan(v)]
            cells.append(fmt(statistics.fmean(scores)) if scores else "-")
        failing = [s for s in spaces if space_failure_share(table.stats[s]) > 0
                   and not math.isnan(table.failing_share(s, strategy))]
        if failing:
            shares = [table.failing_share(s, strategy) / space_failure_share(table.stats[s]) for s in failing]
            cells.append(f"{statistics.median(shares):.2f} ({sum(v <= 0.5 for v in shares)} of {len(failing)})")
        else:
            cells.append("-")
        rows.append(cells)
    return rows


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def report(out: Path, budget: int) -> str:
    parts = {part: [as_run(r) for r in read_runs(out / part / "runs.jsonl.gz")]
             for part in ("tunekit", "kernel_tuner", "transfer")}
    runs = parts["tunekit"] + parts["kernel_tuner"]
    spaces = {r.space for r in runs + parts["transfer"]}
    stats = {}
    for path in all_paths():
        space = _space(str(path))
        if space.name in spaces:
            stats[space.name] = SpaceStats.of(space)
    table = Table(runs, stats, budget)
    names = sorted(stats)
    held_out = [n for n in names if n not in SELECTION | REMEASURED]
    header = ["strategy", "spaces", "seeds", f"runs within 2 % in {budget}",
              *(f"best / optimum after {n}" for n in CHECKPOINTS if n <= budget), "score (evaluations)",
              "score (seconds)",
              "failing share after 20 / space's share: median (spaces ≤ 0.5)"]
    lines = [f"# Learned search: budget {budget} evaluations", "",
             "Scores count only the part of each space's score range within the budget (spaces whose range "
             "starts past it have none). Seconds are the recorded compile and benchmark times of the configs "
             "tried, plus, for tunekit's strategies, their own measured time on this machine (Kernel Tuner's "
             "simulation adds none). Failing share: failed configs among the evaluations after the 20th, over "
             "the space's own share of failing configs, on spaces that have any.", ""]
    for label, subset in (("All spaces", names), ("Held out (not looked at while designing `default`)", held_out),
                          ("Selection (the six spaces the design was chosen on)", sorted(SELECTION & set(names))),
                          ("Re-measured selection spaces (methodology_variant: not held out)",
                           sorted(REMEASURED & set(names))),
                          ("Shipped H200 spaces (held out without the store)",
                           [n for n in names if n.startswith("kernels/h200")])):
        rows = aggregate_rows(table, subset)
        lines += [f"## {label}", ""] + markdown(header, rows) + [""]
        most = max((int(r[1]) for r in rows), default=0)
        partial = [f"`{r[0]}` ({r[1]} of {most})" for r in rows if int(r[1]) < most]
        if partial:  # a replay stopped early (--stop-after) covers the first spaces only
            lines += [f"Replayed on fewer of these spaces: {', '.join(partial)}; those rows are over those "
                      "spaces only, and not comparable with the others.", ""]
    if {"default", "rf"} <= set(table.strategies()):
        lines += ["## Runs within 2 % per space: `default` against `rf`", ""]
        rows = []
        for name in names:
            if (name, "default") in table.runs and (name, "rf") in table.runs:
                d, r = (statistics.fmean(table.within(name, s)) for s in ("default", "rf"))
                split = "selection" if name in SELECTION else "re-measured" if name in REMEASURED else "held out"
                rows.append([name, split, f"{100 * d:.0f} %", f"{100 * r:.0f} %",
                             f"{len(table.runs[name, 'default'])} / {len(table.runs[name, 'rf'])}",
                             "**fewer**" if d < r else ""])
        lines += markdown(["space", "split", "default", "rf", "seeds", ""], rows) + [""]
    if parts["transfer"]:
        alone = Table(parts["tunekit"], stats, budget)
        with_store = Table(parts["transfer"], stats, budget)
        lines += ["## H200 spaces with the store holding the kernel's other shapes", "",
                  "Median evaluations over seeds to within 2 % and 5 % of the optimum, alone (empty store) and "
                  "with the store.", ""]
        rows = []
        for name in sorted({r.space for r in parts["transfer"]}):
            for strategy in TRANSFER_STRATEGIES:
                if (name, strategy) not in with_store.runs or (name, strategy) not in alone.runs:
                    continue
                seeds = {r.seed for r in with_store.runs[name, strategy]} & {r.seed for r in alone.runs[name, strategy]}
                for side in (alone, with_store):  # the same seeds on both sides
                    side.runs[name, strategy] = [r for r in side.runs[name, strategy] if r.seed in seeds]
                cells = [name, strategy]
                for threshold in (1.02, 1.05):
                    before, after = alone.evals_to(name, strategy, threshold), with_store.evals_to(name, strategy,
                                                                                                   threshold)
                    cells += [fmt(before, 1), fmt(after, 1) + (" **worse**" if after > before else "")]
                rows.append(cells)
        lines += markdown(["space", "strategy", "to 2 % alone", "to 2 % with store", "to 5 % alone",
                           "to 5 % with store"], rows) + [""]
        summary = []
        for strategy in TRANSFER_STRATEGIES:
            mine = [r for r in rows if r[1] == strategy]
            if not mine:
                continue
            number = lambda cell: math.inf if cell.startswith("not") else float(cell.split()[0])  # noqa: E731
            cells = [strategy, str(len(mine))]
            for column in (3, 5):
                cells.append(fmt(statistics.median(number(r[column]) for r in mine), 1))
            cells += [str(sum("worse" in r[3] for r in mine)), str(sum("worse" in r[5] for r in mine))]
            summary.append(cells)
        lines += markdown(["strategy", "spaces", "median over spaces: to 2 % with store", "to 5 % with store",
                           "spaces worse with the store (2 %)", "(5 %)"], summary) + [""]
    return "\n".join(lines) + "\n"


def figure(out: Path, budget: int) -> Path:
    """``OUT/curves.png``: on the held-out spaces, the geometric mean over every run (space and
    seed) of best found / optimum after each evaluation, per strategy: the tables' statistic."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [as_run(r) for part in ("tunekit", "kernel_tuner") for r in read_runs(out / part / "runs.jsonl.gz")]
    stats = {_space(str(p)).name: SpaceStats.of(_space(str(p))) for p in all_paths()}
    table = Table(runs, stats, budget)
    held_out = {n for n in stats if n not in SELECTION | REMEASURED}
    evaluations = np.arange(1, budget + 1)
    shown = ["default", "optuna", "rf", "random", "kt:genetic_algorithm", "kt:dual_annealing", "kt:pso"]
    fig, axis = plt.subplots(figsize=(7, 4.2))
    for strategy in (s for s in shown if s in table.strategies()):
        logs = [np.log(np.pad(table.best(r), (0, budget - len(r.times_ms)), mode="edge")[:budget] / stats[space].optimum)
                for space in table.spaces(strategy) if space in held_out
                for r in table.runs[space, strategy] if len(r.times_ms)]  # a run stopped early keeps its best
        axis.plot(evaluations, np.exp(np.mean(logs, axis=0)), label=strategy.replace("kt:", "Kernel Tuner "),
                  linestyle="--" if strategy.startswith("kt:") else "-")
    axis.set_xscale("log")
    axis.set_ylim(0.99, 2.0)
    axis.set_xlabel("evaluations")
    axis.set_ylabel("best found / optimum (geometric mean)")
    axis.set_title(f"{len(held_out)} held-out recorded spaces, 20 seeds", fontsize=10)
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=8)
    fig.tight_layout()
    path = out / "curves.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--part", action="append", choices=["tunekit", "kernel_tuner", "transfer"],
                        help="default: all three")
    parser.add_argument("--strategy", action="append",
                        help="replay these strategies instead of each part's defaults")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--shard", default="0/1", help="K/N: replay every N-th tuning, starting at the K-th")
    parser.add_argument("--stop-after", type=float, default=None, help="start no tuning after this many seconds")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    shard = tuple(int(v) for v in args.shard.split("/"))
    if not args.report_only:
        for part in args.part or ["tunekit", "kernel_tuner", "transfer"]:
            replay_part(part, args.out, args.budget, args.seeds, args.jobs, shard, args.stop_after, args.strategy)
    text = report(args.out, args.budget)
    (args.out / "report.md").write_text(text)
    figure(args.out, args.budget)
    print(text)


if __name__ == "__main__":
    main()
