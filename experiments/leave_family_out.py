"""Choose the default search's design by leave-family-out cross-validation on a frozen corpus,
and report its held-out figures beside the baselines, in one command.

    python experiments/leave_family_out.py --corpus experiments/corpus/v1.json \\
        --designs experiments/corpus/designs.json --seeds 10 --jobs 16 --out DIR

Every design (a strategy with options, ``--designs``) and every baseline (``--baseline``) is
replayed on every space of the corpus with the same seeds and budget; each tuning is appended to
``OUT/runs.jsonl.gz`` as it ends, and a run started again replays only what is missing
(``--stop-after`` stops starting tunings after that many seconds, for time-limited calls).

Then, for each family F of the corpus, the design with the best selection score on the other
families is chosen, and its runs on F are F's held-out runs: no design choice ever sees the
family it is judged on. The selection score is the mean over spaces of log(best / optimum)
averaged at 20, 50 and 200 evaluations (lower is better). With ``--incumbent LABEL`` (what ships
now), another design is chosen only where its lead over LABEL is more than the seeds move it: the
95 % interval of the difference, over a paired bootstrap of the seeds both ran, lies below 0
(``choose``). Without it, any lead, however small, wins. ``OUT/report.md`` gives:

* the held-out figures over every family together and per family: runs within 2 % of the optimum
  in the budget, geometric mean of best / optimum after 20, 50 and 200 evaluations, beside the
  same for each baseline and each design;
* which design each fold chose, and the design chosen on the whole corpus (what ships);
* with ``--transfer LABEL``: LABEL replayed again on every space of a kernel recorded at other
  shapes, the store holding those shapes, and the evaluations to within 5 % with and without;
* the median CPU time the strategy took per proposed config on the corpus's largest space.

The held-out figures are computed once, from the runs; designs are never tuned on them.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path
from typing import NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402
from learned_search import REMEASURED, SELECTION, Table, as_run, fmt, geomean, markdown, read_runs  # noqa: E402

from tunekit.compare import check_replay_batch, replay, same_kernel_elsewhere  # noqa: E402
from tunekit.kerneltuner import is_kernel_tuner  # noqa: E402
from tunekit.metrics import SpaceStats  # noqa: E402
from tunekit.recorded import RecordedSpace  # noqa: E402
from tunekit.strategy import make_strategy  # noqa: E402

CHECKPOINTS = (20, 50, 200)
BASELINES = ("random", "rf", "optuna-gp", "lfbo", "kt:genetic_algorithm")
#: The spaces the shipped default's options were chosen on, and re-measurements of them: the
#: designs here are variants of it, so these are not held out from them, whatever the fold.
SEEN_BY_DEFAULT = SELECTION | REMEASURED
#: The targets the held-out design is held to: runs within 2 %, best / optimum after 20, 50, 200.
TARGETS = {"within": 0.92, 20: 1.12, 50: 1.04, 200: 1.005}
#: A design whose strategy takes more CPU time per proposed config than this (ms; the median over
#: its runs on the corpus's largest space) is not chosen: the cost the default may have.
MAX_MS_PER_CONFIG = 20.0

_loaded: dict[str, dict[str, RecordedSpace]] = {}


def _spaces(manifest: str) -> dict[str, RecordedSpace]:
    if manifest not in _loaded:
        _loaded[manifest] = {entry.name: space for entry, space in corpus.load(Path(manifest))}
    return _loaded[manifest]


def _tuning(manifest: str, space: str, label: str, strategy: str, options: str, seed: int,
            budget: int, history: tuple[str, ...] = (), batch: int = 1) -> dict:
    """One replayed tuning, as a line of runs.jsonl.gz (``cpu_seconds``: what the process spent,
    nearly all of it the strategy's: the replay answers from the records; imports and building
    the Space from the file are left out, which the first tuning of a space in each worker process
    would otherwise pay). ``history``: the spaces the store holds when it starts. ``batch``:
    configs in flight (a design's ``"batch"``; 1, one at a time, unless it names one; before the
    search kept configs in flight, asks of that many told together)."""
    spaces = _spaces(manifest)
    made = strategy if is_kernel_tuner(strategy) else make_strategy(strategy, **json.loads(options))
    spaces[space].space()  # the Space of a recorded file is built once per process: the replay's cost
    started = time.process_time()  # after the strategy's modules were imported: their import is not its time
    run = replay(spaces[space], made, seed, budget, history=[spaces[name] for name in history], batch=batch)
    return {"space": space, "strategy": label, "seed": seed, "budget": budget, "batch": batch,
            "times_ms": [t if math.isfinite(t) else None for t in run.times_ms.tolist()],
            "seconds": run.seconds.tolist(), "cpu_seconds": time.process_time() - started}


def contenders(designs: dict[str, dict], baselines: Sequence[str]) -> dict[str, tuple[str, str]]:
    """label -> (strategy, options as JSON) of every design and baseline."""
    found = {label: (d["strategy"], json.dumps(d.get("options", {}), sort_keys=True)) for label, d in designs.items()}
    for name in baselines:
        found.setdefault(name, (name, "{}"))
    return found


def batches(designs: dict[str, dict]) -> dict[str, int]:
    """label -> configs in flight, of the designs that name a ``"batch"`` (the others, and the
    baselines, ask for one at a time). ``ValueError`` for a batch that is not an int of
    at least 1, or one given to a Kernel Tuner strategy."""
    found = {}
    for label, design in designs.items():
        if "batch" not in design:
            continue
        try:
            found[label] = check_replay_batch(design["strategy"], design["batch"])
        except ValueError as error:
            raise ValueError(f"design {label!r}: {error}") from None
    return found


def replay_all(manifest: Path, labels: dict[str, tuple[str, str]], out: Path, seeds: int, budget: int, jobs: int,
               stop_after: float | None, transfer: Sequence[str] = (), only: Sequence[str] = (),
               families: Sequence[str] = (), batch_of: dict[str, int] | None = None) -> None:
    """Replay what ``out/runs.jsonl.gz`` lacks: every label on every space, and each label of
    ``transfer`` again, as "LABEL + store", on every space of a kernel recorded at other shapes
    with the store holding those shapes (leave one shape out). ``only``: these labels' runs
    alone (a share of the work for one machine; the runs files of several are concatenated).
    ``families``: the spaces of these families alone (runs for a question about them, such as
    ``seed_bootstrap.py --by-family``'s; a report needs every space's). ``batch_of``: label ->
    configs in flight, for the labels that keep more than one (``batches``)."""
    batch_of = batch_of or {}
    target = out / "runs.jsonl.gz"
    out.mkdir(parents=True, exist_ok=True)
    done = {(r["space"], r["strategy"], r["seed"], r["budget"]) for r in read_runs(target, repair=True)}
    spaces = _spaces(str(manifest))
    # the biggest spaces first, so that a time-limited call does not end on a long tail
    names = sorted(spaces, key=lambda name: -len(spaces[name]))
    if families:
        family_of = {entry.name: entry.family for entry in corpus.entries(manifest)}
        names = [name for name in names if family_of[name] in families]
    elsewhere = same_kernel_elsewhere(spaces)
    tasks = [(str(manifest), name, label, strategy, options, seed, budget, (), batch_of.get(label, 1))
             for name in names for label, (strategy, options) in labels.items() for seed in range(seeds)]
    tasks += [(str(manifest), name, f"{label} + store", *labels[label], seed, budget, tuple(elsewhere[name]),
               batch_of.get(label, 1))
              for name in names if elsewhere[name] for label in transfer for seed in range(seeds)]
    if only:
        tasks = [task for task in tasks if task[2] in only]
    replay_missing(tasks, target, done, jobs, stop_after)


def replay_missing(tasks: Sequence[tuple], target: Path, done: set, jobs: int, stop_after: float | None) -> None:
    """Run the ``_tuning`` tasks (manifest, space, label, strategy, options, seed, budget[,
    history[, batch]]) that ``done`` lacks in ``jobs`` processes, appending each result to
    ``target`` as it ends; ``stop_after``: seconds after which no more are started."""
    tasks = [task for task in tasks if (task[1], task[2], task[5], task[6]) not in done]
    print(f"{len(tasks)} tunings to replay ({len(done)} done)", file=sys.stderr, flush=True)
    started = time.perf_counter()
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool, gzip.open(target, "at") as sink:
        queue, running = iter(tasks), {}
        while True:
            late = stop_after is not None and time.perf_counter() - started > stop_after
            while len(running) < jobs and not late and (task := next(queue, None)) is not None:
                running[pool.submit(_tuning, *task)] = task
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                task = running.pop(future)
                try:
                    sink.write(json.dumps(future.result()) + "\n")
                except Exception as error:  # one broken tuning must not cost the others' results
                    print(f"{task[1]} {task[2]} seed {task[5]} failed: {error!r}", file=sys.stderr, flush=True)
                sink.flush()
    print(f"stopped after {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)


def time_alone(manifest: Path, labels: dict[str, tuple[str, str]], out: Path, seeds: int,
               batch_of: dict[str, int] | None = None) -> None:
    """Replay each tunekit label on the corpus's largest space, one tuning at a time in this
    process, and write the CPU time per proposed config to ``out/timing.json``: the cost the
    design limit (``MAX_MS_PER_CONFIG``) is judged by. In the protocol's parallel replays the
    tunings share the host's caches and memory bandwidth, which inflates their CPU time. The
    labels take turns, seed by seed, so that a slow spell of a shared machine falls on all of
    them rather than on whichever label was timed then, after one untimed tuning that warms the
    process (its first tuning paid for more than the others: 17.0 ms against 13.1-14.4). The wall
    time per config is written beside it (``wall_seconds_per_config``): where a library's threads
    ran, the CPU time would exceed it. ``batch_of``: as ``replay_all``'s."""
    batch_of = batch_of or {}
    spaces = _spaces(str(manifest))
    largest = max(spaces, key=lambda name: len(spaces[name]))
    timing: dict[str, list[float]] = {}
    wall: dict[str, list[float]] = {}  # beside the CPU time: threads of a library would make it exceed this
    timed = {label: made for label, made in labels.items() if not is_kernel_tuner(made[0])}
    if timed:
        label, (strategy, options) = next(iter(timed.items()))
        _tuning(str(manifest), largest, label, strategy, options, seeds, 200, batch=batch_of.get(label, 1))
    for seed in range(seeds):
        for label, (strategy, options) in timed.items():
            started = time.perf_counter()
            line = _tuning(str(manifest), largest, label, strategy, options, seed, 200, batch=batch_of.get(label, 1))
            configs = max(1, len(line["times_ms"]))
            wall.setdefault(label, []).append((time.perf_counter() - started) / configs)
            timing.setdefault(label, []).append(line["cpu_seconds"] / configs)
            print(f"{label} seed {seed}: {1e3 * timing[label][-1]:.1f} ms per config "
                  f"({1e3 * wall[label][-1]:.1f} wall)", file=sys.stderr, flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "timing.json").write_text(json.dumps({"space": largest, "machine": platform.node(),
                                                 "processor": _processor(), "seconds_per_config": timing,
                                                 "wall_seconds_per_config": wall}, indent=1))


def _processor() -> str:
    """The CPU's model name (``platform.processor()`` is empty on most Linux systems)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def checkpoints(table: Table) -> list[int]:
    """The checkpoints within the budget (the budget itself where it is under the first)."""
    return [n for n in CHECKPOINTS if n <= table.budget] or [table.budget]


def selection_score(table: Table, label: str, spaces: Sequence[str]) -> float:
    """Mean over ``spaces`` of log(best / optimum) averaged over the checkpoints (lower is better);
    inf where the label lacks runs on one of them."""
    if any((space, label) not in table.runs for space in spaces):
        return math.inf
    per_space = [statistics.fmean(math.log(r) for n in checkpoints(table) for r in table.ratio_after(space, label, n))
                 for space in spaces]
    return statistics.fmean(per_space)


def figures(table: Table, label: str, spaces: Sequence[str], timed: set[str] | None = None) -> dict:
    """The figures of ``label`` over ``spaces``: runs within 2 %, geomeans of best / optimum at the
    checkpoints, and the mean score over evaluations and, on the ``timed`` spaces (whose costs
    are real), over simulated seconds (``tunekit.metrics``)."""
    spaces = [s for s in spaces if (s, label) in table.runs]
    if not spaces:
        return {}
    reached = [w for s in spaces for w in table.within(s, label)]
    found: dict = {"spaces": len(spaces), "within": statistics.fmean(reached), "reached": sum(reached),
                   "runs": len(reached)}
    for n in checkpoints(table):
        found[n] = geomean(r for s in spaces for r in table.ratio_after(s, label, n))
    for name, seconds, chosen in (("score", False, spaces),
                                  ("score_seconds", True, [s for s in spaces if timed is None or s in timed])):
        scores = [v for v in (table.score(s, label, seconds) for s in chosen) if not math.isnan(v)]
        found[name] = statistics.fmean(scores) if scores else math.nan
    return found


def row(name: str, found: dict, points: Sequence[int]) -> list[str]:
    if not found:
        return [name, *["-"] * (4 + len(points))]
    return [name, str(found["spaces"]), f"{100 * found['within']:.1f} % ({found['reached']} of {found['runs']})",
            *(fmt(found[n]) for n in points),
            fmt(found["score"]), fmt(found["score_seconds"])]


def affordable(ms_per_config: dict[str, float], designs: Sequence[str], limit: float = MAX_MS_PER_CONFIG
               ) -> list[str]:
    """The designs whose median CPU time per proposed config is within ``limit`` ms (a design not
    timed counts as within it); every design where none is."""
    within = [label for label in designs if not ms_per_config.get(label, 0.0) > limit]
    return within or list(designs)


#: Bootstrap replicates over the seeds when a design's lead over the incumbent is judged.
LEAD_REPLICATES = 2000


class Choice(NamedTuple):
    """The design a fold (or the whole corpus) chose and, where an incumbent was weighed against a
    design of a better selection score, that design (``leader``) and the difference of their
    scores on the seeds both ran with its 95 % interval (``lead``; negative: the leader ahead).
    ``remark``: why an incumbent named was not weighed."""

    label: str
    leader: str | None = None
    lead: tuple[float, float, float] | None = None
    remark: str = ""

    def note(self) -> str:
        """The choice's grounds in words ('' where the best score alone chose)."""
        if self.remark:
            return self.remark
        if self.leader is None or self.lead is None:
            return ""
        difference, low, high = self.lead
        figures = f"{difference:+.4f} ({low:+.4f} to {high:+.4f})"
        if self.label == self.leader:
            return f"ahead of the incumbent by {figures}, more than the seeds move"
        return (f"kept: {self.leader} scored better, by {figures} on the seeds both ran, within what the "
                "seeds move")


def lead(table: Table, challenger: str, incumbent: str, spaces: Sequence[str],
         replicates: int = LEAD_REPLICATES) -> tuple[float, float, float]:
    """``challenger``'s selection score minus ``incumbent``'s on ``spaces`` (negative: a lead), over
    the seeds both ran on every one of them, and the 95 % percentile interval of that difference
    over a paired bootstrap of those seeds: each replicate draws them with replacement and takes
    both labels' runs of those seeds on every space (``seed_bootstrap.py``'s draws). Where they
    share no seed, the difference of their selection scores; with fewer than two, the interval
    is unbounded."""
    by_seed = {label: [{run.seed: run for run in table.runs[space, label]} for space in spaces]
               for label in (challenger, incumbent)}
    seeds = sorted(set.intersection(*(set(runs) for label in by_seed for runs in by_seed[label])))
    if not seeds:
        observed = selection_score(table, challenger, spaces) - selection_score(table, incumbent, spaces)
        return observed, -math.inf, math.inf
    points = checkpoints(table)

    def logs(label: str) -> np.ndarray:
        """spaces x seeds: each run's log best / optimum, the mean over the checkpoints."""
        return np.array([[statistics.fmean(math.log(table.run_ratio_after(runs[seed], n)) for n in points)
                          for seed in seeds] for runs in by_seed[label]])

    differences = logs(challenger) - logs(incumbent)
    observed = float(differences.mean(axis=1).mean())  # as selection_score averages: over seeds, then spaces
    if len(seeds) < 2:
        return observed, -math.inf, math.inf
    drawn = np.random.default_rng(0).integers(0, len(seeds), size=(replicates, len(seeds)))
    replicated = differences[:, drawn].mean(axis=(0, 2))  # spaces x replicates x seeds -> replicates
    low, high = np.percentile(replicated, [2.5, 97.5])
    return observed, float(low), float(high)


def choose(table: Table, designs: Sequence[str], spaces: Sequence[str], incumbent: str | None = None
           ) -> Choice:
    """The design of the best selection score on ``spaces``. With an ``incumbent`` among
    ``designs`` with runs on every space: of the designs that score better than it, the best of
    those whose lead over it is more than the seeds move it (``lead``'s interval below 0), else
    the incumbent: a lead within the seeds is a tie, and a tie keeps what ships. Each design
    that scores better is weighed (no correction for their number)."""
    scores = {label: selection_score(table, label, spaces) for label in designs}
    best = min(designs, key=lambda label: scores[label])
    if incumbent is None:
        return Choice(best)
    if incumbent not in scores:
        return Choice(best, remark=f"the incumbent is not a candidate ({incumbent})")
    if not math.isfinite(scores[incumbent]):
        return Choice(best, remark=f"the incumbent lacks runs on these spaces ({incumbent})")
    ahead = [label for label in designs if scores[label] < scores[incumbent]]
    if not ahead:
        return Choice(incumbent)
    leads = {label: lead(table, label, incumbent, spaces) for label in ahead}
    clear = [label for label in ahead if leads[label][2] < 0]
    if clear:
        chosen = min(clear, key=lambda label: scores[label])
        return Choice(chosen, chosen, leads[chosen])
    return Choice(incumbent, best, leads[best])


def cross_validate(table: Table, families: dict[str, list[str]], designs: Sequence[str],
                   incumbent: str | None = None) -> dict[str, Choice]:
    """family -> the design chosen on every other family (``choose``)."""
    chosen = {}
    for family in families:
        training = [s for other, spaces in families.items() if other != family for s in spaces]
        chosen[family] = choose(table, designs, training, incumbent)
    return chosen


def report(manifest: Path, out: Path, designs: Sequence[str], baselines: Sequence[str], budget: int,
           seeds: int, incumbent: str | None = None) -> str:
    spaces = _spaces(str(manifest))
    entries = {entry.name: entry for entry in corpus.entries(manifest)}
    runs = [as_run(r) for r in read_runs(out / "runs.jsonl.gz")]
    cpu = {}
    for line in read_runs(out / "runs.jsonl.gz"):
        cpu.setdefault((line["space"], line["strategy"]), []).append(line.get("cpu_seconds", math.nan) /
                                                                    max(1, len(line["times_ms"])))
    table = Table(runs, {name: SpaceStats.of(space) for name, space in spaces.items()}, budget)
    families: dict[str, list[str]] = {}
    for name, entry in entries.items():
        families.setdefault(entry.family, []).append(name)
    largest = max(spaces, key=lambda name: len(spaces[name]))
    in_parallel = {label: 1e3 * statistics.median(cpu[largest, label])
                   for label in [*designs, *baselines] if (largest, label) in cpu}
    timing_file = out / "timing.json"
    timing = json.loads(timing_file.read_text()) if timing_file.exists() else None
    alone = ({label: 1e3 * statistics.median(values) for label, values in timing["seconds_per_config"].items()}
             if timing and timing["space"] == largest else {})
    judged_alone = bool(alone) and all(label in alone for label in designs)  # one measure for every design
    candidates = affordable(alone if judged_alone else in_parallel, designs)
    choices = cross_validate(table, families, candidates, incumbent)
    chosen = {family: choice.label for family, choice in choices.items()}
    held_out = [(family, name) for family, names in families.items() for name in names]
    # the held-out table: each family's runs of the design chosen without it
    held = Table([r for r in runs for family, name in held_out if r.space == name and r.strategy == chosen[family]],
                 table.stats, budget)
    for key in list(held.runs):
        held.runs[key[0], "held-out"] = held.runs.pop(key)
    everything = sorted(spaces)
    lines = [f"# Leave-family-out: {manifest.name}, {len(spaces)} spaces in {len(families)} families, "
             f"budget {budget}, {seeds} seeds", ""]
    short = [(name, label) for name in everything for label in [*designs, *baselines]
             if len(table.runs.get((name, label), [])) < seeds]
    if short:
        lines += [f"**Incomplete:** {len(short)} (space, strategy) pairs have fewer than {seeds} runs, for example "
                  f"{short[0][1]} on {short[0][0]}; the figures below are over the runs there are.", ""]
    points = checkpoints(table)
    header = ["strategy", "spaces", "runs within 2 %", *(f"best/opt @{n}" for n in points), "score",
              "score over seconds"]
    timed = {name for name, entry in entries.items() if entry.seconds}
    lines += ["## All families, held out", ""]
    lines += markdown(header, [row("held-out design", figures(held, "held-out", everything, timed), points)]
                      + [row(label, figures(table, label, everything, timed), points)
                         for label in [*baselines, *designs]])
    larger = [name for name in everything if len(spaces[name]) > budget]
    lines += ["", f"On the {len(larger)} spaces of more configs than the budget (on the others every "
              "strategy can measure the whole space, so runs within 2 % at the end say little):", ""]
    lines += markdown(header, [row("held-out design", figures(held, "held-out", larger, timed), points)]
                      + [row(label, figures(table, label, larger, timed), points)
                         for label in [*baselines, *designs]])
    unseen = [name for name in everything if name not in SEEN_BY_DEFAULT]
    lines += ["", f"On the {len(unseen)} spaces that `default`'s options were not chosen on (its design looked at "
              f"{len(everything) - len(unseen)} spaces of the corpus, or re-measurements of them, before this "
              "protocol: they are not held out from any variant of it):", ""]
    lines += markdown(header, [row("held-out design", figures(held, "held-out", unseen, timed), points)]
                      + [row(label, figures(table, label, unseen, timed), points)
                         for label in [*baselines, *designs]])
    target = figures(held, "held-out", everything)
    if target:
        lines += ["", "Targets: " + ", ".join([
            f"runs within 2 % {100 * target['within']:.1f} % (target >= {100 * TARGETS['within']:.0f} %)",
            *(f"@{n} {target[n]:.3f} (target <= {TARGETS[n]})" for n in points)])]
    lines += ["", f"Scores: `tunekit.metrics`' score (0: calculated random search, 1: the optimum at once), the "
              f"mean over spaces; over seconds on the {len(timed)} spaces whose recorded costs are real.",
              "", "## Per family, held out", ""]
    for family, names in sorted(families.items()):
        note = choices[family].note()
        lines += [f"### {family} ({len(names)} spaces; chosen without it: {chosen[family]}"
                  + (f"; {note}" if note else "") + ")", ""]
        # every design too, where there is a choice: what the fold chose against, family by family
        lines += markdown(header, [row("held-out design", figures(held, "held-out", names, timed), points)]
                          + [row(label, figures(table, label, names, timed), points)
                             for label in [*baselines, *(designs if len(designs) > 1 else ())]])
        lines.append("")
    lines += transfer_rows(table, spaces)
    whole = choose(table, candidates, everything, incumbent)
    if incumbent is not None:
        lines += [f"Incumbent: {incumbent}. Another design is chosen only where its lead over it is more "
                  f"than the seeds move it ({LEAD_REPLICATES} replicates of a paired bootstrap over the "
                  "seeds; 95 % interval of the selection score's difference below 0)"
                  + ("." if incumbent in candidates else f"; but it takes more than {MAX_MS_PER_CONFIG:g} ms "
                     "per config, so it is no candidate, and the best score chooses."), ""]
    note = whole.note()
    lines += [f"Chosen on the whole corpus (what ships): {whole.label}{f' ({note})' if note else ''}.", ""]
    where_alone = f" (on {', '.join(filter(None, (timing['machine'], timing['processor'])))})" if alone else ""
    lines += [f"## Strategy CPU time per proposed config on {largest} ({len(spaces[largest])} configs)", "",
              "The median over tunings of the CPU time per proposed config: alone, one tuning at a time in one "
              f"process{where_alone}; and among the protocol's "
              "replays, run in parallel on every core. The limit on a design is judged by the time "
              f"{'alone' if judged_alone else 'in parallel (not every design was timed alone)'}.", ""]
    lines += markdown(["strategy", "alone", "in parallel"],
                      [[label, fmt(alone.get(label, math.nan), 1), fmt(in_parallel.get(label, math.nan), 1)]
                       for label in [*designs, *baselines] if label in alone or label in in_parallel])
    costly = [label for label in designs if label not in candidates]
    if costly:
        lines += ["", f"Not chosen by any fold, for taking more than {MAX_MS_PER_CONFIG:g} ms per config: "
                  + ", ".join(costly) + "."]
    return "\n".join(lines) + "\n"


def transfer_rows(table: Table, spaces: dict[str, RecordedSpace]) -> list[str]:
    """With the store holding the kernel's other shapes, against without: on every space of a
    kernel recorded at other shapes, the median evaluations to within 5 % of the optimum (item 4
    of the targets: within 10 on every space of a kernel of 3+ shapes, never slower on any)."""
    lines = []
    elsewhere = same_kernel_elsewhere(spaces)
    for stored in sorted({label for _, label in table.runs if label.endswith(" + store")}):
        alone = stored.removesuffix(" + store")
        names = [n for n in sorted(spaces) if elsewhere[n] and (n, stored) in table.runs
                 and (n, alone) in table.runs]
        if not names:
            continue
        pairs = {n: (table.evals_to(n, alone, 1.05), table.evals_to(n, stored, 1.05)) for n in names}
        three = [n for n in names if len(elsewhere[n]) >= 2]
        within = sum(pairs[n][1] <= 10 for n in three)
        slower = sum(w > a for a, w in pairs.values())
        lines += [f"## Transfer: {stored}, evaluations to within 5 % (median over seeds)", "",
                  f"{within} of the {len(three)} spaces of kernels of 3+ shapes within 10 evaluations with the "
                  f"store; slower with it than without on {slower} of all {len(names)} spaces of kernels "
                  "recorded at other shapes.", ""]
        lines += markdown(["space", "shapes", "without the store", "with it"],
                          [[n, str(len(elsewhere[n]) + 1), fmt(a, 1), fmt(w, 1)] for n, (a, w) in pairs.items()])
        lines.append("")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parent / "corpus" / "v1.json")
    parser.add_argument("--designs", type=Path, required=True,
                        help="JSON: label -> {strategy, options}, the candidates for the default")
    parser.add_argument("--baseline", action="append", help=f"repeat (default: {', '.join(BASELINES)})")
    parser.add_argument("--no-baselines", action="store_true", help="the designs alone, no baseline")
    parser.add_argument("--transfer", action="append", default=[],
                        help="a design replayed again with the store holding its kernel's other shapes; repeat")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--stop-after", type=float, default=None, help="stop starting tunings after S seconds")
    parser.add_argument("--only", action="append", default=[], metavar="LABEL",
                        help='replay only this label\'s runs (repeat; "LABEL + store" for its transfer runs)')
    parser.add_argument("--family", action="append", default=[],
                        help="replay only this family's spaces (repeat; with --replay-only)")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--replay-only", action="store_true", help="replay, and leave the report for later")
    parser.add_argument("--time-alone", type=int, default=0, metavar="SEEDS",
                        help="first time each tunekit strategy alone on the largest space, SEEDS tunings each")
    parser.add_argument("--incumbent", metavar="LABEL",
                        help="the design that ships now: another is chosen only where it leads it by more "
                             "than the seeds move the lead")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    designs = json.loads(args.designs.read_text())
    if args.incumbent is not None and args.incumbent not in designs:
        parser.error(f"--incumbent {args.incumbent!r}: not a design of {args.designs} ({', '.join(designs)})")
    if args.no_baselines and args.baseline:
        parser.error("--no-baselines with --baseline: name baselines or none")
    baselines = [] if args.no_baselines else args.baseline or list(BASELINES)
    for label in args.transfer:
        if label not in designs and label not in baselines or label.startswith("kt:"):
            parser.error(f"--transfer {label}: name a design or a tunekit baseline (Kernel Tuner's strategies "
                         "take no store)")
    replayable = {*contenders(designs, baselines), *(f"{label} + store" for label in args.transfer)}
    for label in args.only:
        if label not in replayable:
            parser.error(f"--only {label!r}: not a design, a baseline or a --transfer label's \"+ store\" runs "
                         f"({', '.join(sorted(replayable))})")
    if args.family:
        if not args.replay_only:
            parser.error("--family: a report needs every space's runs; add --replay-only")
        known = {entry.family for entry in corpus.entries(args.corpus)}
        for family in args.family:
            if family not in known:
                parser.error(f"--family {family!r}: not a family of {args.corpus} ({', '.join(sorted(known))})")
    try:
        batch_of = batches(designs)
    except ValueError as error:
        parser.error(f"--designs {args.designs}: {error}")
    if args.time_alone:
        time_alone(args.corpus, contenders(designs, baselines), args.out, args.time_alone, batch_of)
    if not args.report_only:
        replay_all(args.corpus, contenders(designs, baselines), args.out, args.seeds, args.budget, args.jobs,
                   args.stop_after, args.transfer, args.only, args.family, batch_of=batch_of)
    if args.replay_only:
        return
    text = report(args.corpus, args.out, list(designs), baselines, args.budget, args.seeds, args.incumbent)
    (args.out / "report.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
