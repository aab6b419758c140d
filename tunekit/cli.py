"""The ``tunekit`` command line: the store's commands (ls, show, plot, export, import,
heuristics, rm), ``tune`` (a manifest ahead of time), ``compare`` (strategies on recorded spaces)
and ``demo``. ``tunekit --help`` and each command's ``--help`` describe them.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import importlib.util
import json
import keyword
import os
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import __version__, settings
from .console import FORMATS, Column, emit, field, number, print_table
from .keys import TuningKey
from .opening import open_store
from .shipping import is_winners_file
from .store import IMPORTED_RUN_BUDGET, Deleted, StoreError, checked_export_rows, export_rows, write_export
from .trial import Status


class UsageError(Exception):
    """Input a command cannot act on (no such run, an output that exists, a bad option): the
    command prints it and exits with code 2, as argparse does for its own errors."""


def _store(args: argparse.Namespace, *, read_only: bool = True, create: bool = False, changes: bool | None = None):
    """The store that ``--store`` (or ``$TUNEKIT_STORE``, or the user cache) names; it must exist
    unless ``create``. Read-only unless the command changes it. A command that ``changes`` it
    (by default: one not read-only), its dry run included, refuses a winners file (served from
    memory, it would keep nothing)."""
    if (not read_only if changes is None else changes) and is_winners_file(args.store or settings.store_url()):
        raise StoreError(f"the store {args.store or settings.store_url()} is a winners file (served read-only); "
                         "use a database: a .db path or a server URL.")
    return open_store(args.store or True, read_only=read_only, create=create)


def _run_state(run: Mapping[str, Any]) -> str:
    if run["tuning_seconds"] is not None:
        return "finished"
    return "imported" if run["budget"] == IMPORTED_RUN_BUDGET else "unfinished"


RUN_COLUMNS = (
    Column("run", lambda r: r["run_id"][:12]), field("kernel_name", "kernel"), field("device"),
    field("key", width=60), field("strategy"), field("evaluations", "evals"),
    Column("seconds", lambda r: f"{r['tuning_seconds']:.1f}" if r["tuning_seconds"] is not None else r["state"]),
    Column("started", lambda r: time.strftime("%Y-%m-%d %H:%M", time.localtime(r["started_at"]))),
)


def cmd_ls(args: argparse.Namespace) -> int:
    """The runs of a store, newest last."""
    with _store(args) as store:
        runs = [{**run, "state": _run_state(run)} for run in store.runs(kernel=args.kernel)]
    if args.format == "table":
        print(f"store: {store.shown_url}")
        if not runs:
            print("no runs recorded" + (f" of kernel {args.kernel}" if args.kernel else ""))
            return 0
    emit(runs, RUN_COLUMNS, args.format, wide=args.wide)
    return 0


def _find_run(store, prefix: str) -> dict[str, Any]:
    """The one run whose id starts with ``prefix``."""
    matches = [r for r in store.runs() if r["run_id"].startswith(prefix)]
    if len(matches) != 1:
        listed = "" if matches else " (tunekit store ls lists the runs)"
        raise UsageError(f"{'no run matches' if not matches else f'{len(matches)} runs match'} {prefix!r} in "
                         f"{store.shown_url}{listed}")
    return matches[0]


TRIAL_COLUMNS = (
    Column("", lambda r: "*" if r["winner"] else ""), field("id"), field("config", width=70), field("status"),
    field("source"), number("median_ms", ".4f"), number("compile_seconds", ".2f", "compile_s"),
    number("relative_error", ".1e", "rel_error"), field("error", width=50, missing=""),
)


def cmd_show(args: argparse.Namespace) -> int:
    """The trials of one run, in the order they were measured; the winner marked."""
    with _store(args) as store:
        run = _find_run(store, args.run)
        rows = store.rows(run_id=run["run_id"])
        # winners imported after the run's trials are not in the run's row
        winner = run["winner"] or next((w["config"] for w in store.winner_rows() if w["run_id"] == run["run_id"]),
                                       None)
    chosen = _winning_trial(rows, winner)
    trials = [{**row, "winner": row["id"] == chosen} for row in rows]
    if args.format == "table":
        print(f"run {run['run_id']}: {run['kernel_name']} on {run['device']}, key {run['key']}, "
              f"{run['strategy']}, {_run_state(run)}")
        print(f"winner{' (*)' if chosen is not None else ''}: {_winner_text(run, rows, winner, chosen)}")
    emit(trials, TRIAL_COLUMNS, args.format, wide=args.wide)
    return 0


def _winner_text(run: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], winner: str | None,
                 chosen: int | None) -> str:
    """What ``store show`` says of a run's winner, and why where there is none."""
    state = _run_state(run)
    if winner is not None:
        if chosen is not None:
            return winner
        return f"{winner} ({'its trial was not imported' if state == 'imported' else 'measured in an earlier run'})"
    if state == "unfinished":
        return "none yet"
    if state == "imported":
        return "none imported"
    if not rows:
        return "none (the run ended before any config was measured)"
    if all(row["status"] != "ok" for row in rows):
        return "none (every config failed)"
    return "none stored"


def cmd_plot(args: argparse.Namespace) -> int:
    """A PNG of one run's history: each trial's time against its position and the seconds since
    the run started, coloured by status, with the best so far and the winner."""
    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError("tunekit store plot needs matplotlib: pip install \"tunekit[plots]\"")
    from .history_plot import plot_history, split_history

    with _store(args) as store:
        run = _find_run(store, args.run)
        rows = store.rows(run_id=run["run_id"])
    if not rows:
        raise UsageError(f"run {run['run_id']} holds no trials: nothing to plot")
    out = args.out or f"tunekit-run-{run['run_id'][:12]}.png"
    try:
        target = plot_history(run, rows, out, _winning_trial(rows, run["winner"]))
    except (FileExistsError, ValueError) as error:
        raise UsageError(str(error)) from error
    except ImportError as error:  # installed, but broken (a wheel of another Python, say)
        raise UsageError(f"tunekit store plot needs matplotlib, whose import failed: {error}") from error
    except OSError as error:
        raise _cannot_write(out, error) from error
    evaluations, retimed = split_history(rows)
    print(f"wrote {target}: {len(evaluations)} evaluations"
          f"{f' and {len(retimed)} finalists re-timed' if retimed else ''} of run {run['run_id'][:12]}")
    return 0


def _winning_trial(rows: Sequence[Mapping[str, Any]], winner: str | None) -> int | None:
    """The id of the trial the run chose its winner by: the winner's last ok timing (the
    finalists' re-timing, where there was one)."""
    ids = [row["id"] for row in rows if winner is not None and row["config"] == winner and row["status"] == "ok"]
    return ids[-1] if ids else None


def cmd_export(args: argparse.Namespace) -> int:
    """Trials or winners as CSV or JSONL (``-``: to stdout), or one kernel's space for Kernel Tuner."""
    with _store(args) as store:
        if args.format in ("kerneltuner", "t4"):
            return _export_space(store, args)
        run_id = _find_run(store, args.run)["run_id"] if args.run else None
        if args.winners:
            rows = [row for row in store.winner_rows() if (args.kernel is None or row["kernel_name"] == args.kernel)
                    and (run_id is None or row["run_id"] == run_id)]
        else:
            rows = store.rows(kernel=args.kernel, run_id=run_id)
        if not rows and (args.kernel or run_id):
            what = "winners" if args.winners else "trials"
            kernels = sorted({run["kernel_name"] for run in store.runs()})
            raise UsageError(f"no {what} of {_filters(args.kernel, run_id)} in {store.shown_url}; nothing "
                             f"written. Kernels there: {', '.join(kernels) or 'none'}.")
    if args.out == "-":
        write_export(rows, sys.stdout, args.format or "jsonl")
        return 0
    try:
        target = export_rows(rows, args.out, args.format)
    except (FileExistsError, ValueError) as error:
        raise UsageError(str(error)) from error
    except OSError as error:
        raise _cannot_write(args.out, error) from error
    print(f"wrote {len(rows)} rows to {target}")
    return 0


def _filters(kernel: str | None, run_id: str | None) -> str:
    """The export filters given, as a message names them."""
    return " and ".join(part for part in (kernel and f"kernel {kernel}", run_id and f"run {run_id}") if part)


def _cannot_write(out: str, error: OSError) -> UsageError:
    """One line for an output file that could not be written: which, why, and what to do."""
    target = Path(out)
    if not target.parent.is_dir():
        return UsageError(f"cannot write {target}: directory {target.parent} does not exist; create it first or "
                          "choose another path.")
    reason = (error.strerror or str(error)).lower()
    return UsageError(f"cannot write {target}: {reason}; choose another path.")


def cmd_import(args: argparse.Namespace) -> int:
    """Merge an export (winners or trials) into the store, skipping what it already holds."""
    from .shipping import read_export

    target = str(args.store or settings.store_url())
    rows = read_export(args.file)
    checked_export_rows(rows, args.file)  # before the store is opened: a refused import creates nothing
    if not rows:
        print(f"tunekit: {args.file} holds no rows: nothing to import into {target}.", file=sys.stderr)
        return 2
    with _store(args, read_only=False, create=True) as store:
        merged = store.merge(rows, source=args.file)
        print(f"store: {store.shown_url}: added {merged.trials} trials and {merged.winners} winners from "
              f"{args.file}; {merged.skipped} rows were already held")
    return 0


def cmd_heuristics(args: argparse.Namespace) -> int:
    """Fit a rule for the kernel's keys with no winner and write it as a Python module."""
    from . import config_rules
    if Path(args.out).exists():
        raise UsageError(f"{args.out} exists; tunekit does not overwrite files. Choose another name.")
    stem = Path(args.out).stem
    if Path(args.out).suffix != ".py" or not stem.isidentifier() or keyword.iskeyword(stem):
        args.parser.error(f"{args.out} cannot be imported as a module (fallback=module.config_for): give a file "
                          "name such as my_rule.py (letters, digits and underscores, ending in .py; not a Python "
                          "keyword)")
    if stem in sys.stdlib_module_names or stem in sys.builtin_module_names or importlib.util.find_spec(stem):
        args.parser.error(f"{args.out} would hide the module {stem} that Python imports already (a script run "
                          "beside it would import the rule instead); choose another name, such as my_rule.py")
    store = _store(args)
    try:
        tuned = config_rules.key_times_from_store(store, args.kernel, device=args.device, triton_version=args.triton)
    except StoreError as error:
        raise UsageError(str(error)) from error
    data = tuned.keys
    rule, assessments = config_rules.choose_rule(data)
    if assessments:
        print(f"leaving each of the {len(data)} tuned keys out in turn, the config each rule gave over that key's best:")
        print_table([(a.kind, f"{a.geomean:.3f}", f"{a.worst:.3f}", a.measured, a.failed) for a in assessments],
                    ("rule", "geomean", "worst", "keys measured", "failed"))
    else:
        print(f"{len(data)} tuned keys with no timings of other configs to compare by, or too few to leave one out: "
              "the rule is the nearest key's winner")
    try:
        path = config_rules.write_module(rule, args.out, kernel=args.kernel, provenance=tuned.provenance(),
                                       assessments=assessments)
    except FileExistsError as error:
        raise UsageError(str(error)) from error
    except OSError as error:
        raise _cannot_write(args.out, error) from error
    print(f"wrote {path}: {rule.kind}, {len(rule.configs)} configs; use it as fallback=config_for")
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    """Delete trials (and, unless --status is given, runs and winners) that match every filter."""
    if not (args.run or args.kernel or args.key or args.status):
        args.parser.error("give at least one filter: --run, --kernel, --key or --status (nothing was deleted)")
    if args.key and not (args.kernel or args.run):
        args.parser.error("--key needs --kernel (or --run): kernels share keys such as one size and three float32 "
                          "pointers, and every kernel's trials at that key would go (nothing was deleted)")
    with _store(args, read_only=args.dry_run, changes=True) as store:
        run_id = _find_run(store, args.run)["run_id"] if args.run else None
        deleted = store.delete(run_id=run_id, kernel=args.kernel, key=args.key, status=args.status,
                               dry_run=args.dry_run)
    counts = _counted(deleted)
    if args.dry_run:
        print(f"would delete {counts} from {store.shown_url} (--dry-run: nothing was deleted)")
    else:
        print(f"deleted {counts} from {store.shown_url}")
    return 0


def _counted(deleted: Deleted) -> str:
    def plural(count: int, noun: str) -> str:
        return f"{count} {noun}{'' if count == 1 else 's'}"

    trials, runs = plural(deleted.trials, "trial"), plural(deleted.runs, "run")
    claims = f" and {plural(deleted.claims, 'claim')}" if deleted.claims else ""
    return f"{trials}, {runs}{',' if claims else ' and'} {plural(deleted.winners, 'winner')}{claims}"


def _at_least_one(what: str) -> Callable[[str], int]:
    """An argparse type: an int >= 1 (0 used to mean the default of ``--budget``, silently)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"must be an int >= 1 ({what}). Got {text!r} instead.")
        return value

    return parse


_processes = _at_least_one("worker processes")
_budget = _at_least_one("evaluations per tuning")


def _tuning_key(text: str) -> str:
    """``--key``: a tuning key in JSON, as ls and export show it, turned into the store's form."""
    try:
        key = json.loads(text)
    except json.JSONDecodeError:
        key = None
    if not isinstance(key, dict) or not isinstance(key.get("args"), dict):
        raise argparse.ArgumentTypeError(f"not a tuning key in JSON: {text!r}; give it as export writes it, e.g. "
                                         '\'{"args": {"n": 4096}, "dtypes": ["torch.float32"]}\'')
    return TuningKey.from_dict(key).json


def _export_space(store, args: argparse.Namespace) -> int:
    """One kernel's measured space (one device, one key) in a format Kernel Tuner can replay."""
    from .recorded import RecordedSpaceError, from_store_rows, write_kernel_tuner, write_t4

    if not args.kernel:
        raise UsageError("--format kerneltuner|t4 exports one kernel's space: give --kernel")
    rows = store.rows(kernel=args.kernel, key=args.key, device=args.device)
    try:
        space = from_store_rows(rows, name=args.kernel)
        writer = write_kernel_tuner if args.format == "kerneltuner" else write_t4
        if args.out == "-":
            with tempfile.TemporaryDirectory() as scratch:
                sys.stdout.write(writer(space, Path(scratch) / "space.json").read_text())
            return 0
        target = writer(space, args.out)
    except (RecordedSpaceError, FileExistsError) as error:
        raise UsageError(str(error)) from error
    except OSError as error:
        raise _cannot_write(args.out, error) from error
    print(f"wrote {len(space)} configs of {args.kernel} ({space.device}, key {space.problem_size}) to {target}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from .compare import check_output_directory, run_comparison, write_outputs
    from .recorded import RecordedSpaceError

    paths = [p for pattern in args.space for p in (sorted(glob.glob(pattern, recursive=True)) or [pattern])]
    started = time.perf_counter()
    try:
        check_output_directory(args.out)
    except FileExistsError as error:
        raise UsageError(str(error)) from error

    try:
        comparison = run_comparison(paths, args.strategy, args.seeds, args.budget, args.seconds, args.jobs,
                                    args.progress, args.threshold or (), args.transfer, batch=args.batch)
        written = write_outputs(comparison, args.out, " ".join(["tunekit", *sys.argv[1:]]))
    except (RecordedSpaceError, ValueError, FileExistsError) as error:
        raise UsageError(str(error)) from error
    print(f"{len(comparison.runs)} tunings of {len(comparison.spaces)} spaces replayed in "
          f"{time.perf_counter() - started:.1f} s; wrote {', '.join(str(p) for p in written.values())}")
    report_lines = written["report"].read_text().splitlines()
    table = report_lines.index("## Aggregate over spaces")
    print("\n".join(report_lines[table: table + 4 + len(comparison.strategies) + 1]))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Tune the GEMM live on a GPU, or replay the shipped H200 spaces on a machine without one."""
    from . import demo

    if args.replay or settings.interpreting() or not _has_gpu():
        from .compare import check_output_directory

        try:
            check_output_directory(args.out)
            return demo.replay(args.strategy, args.seeds, args.budget, args.out, args.jobs, args.progress)
        except (ValueError, FileExistsError) as error:
            raise UsageError(str(error)) from error
    return demo.live(args.strategy[0] if args.strategy else None, args.seconds)


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


PLAN_COLUMNS = (field("kernel"), field("shape", width=40), field("key", width=60), field("store", "in the store"))
OUTCOME_COLUMNS = (
    field("kernel"), field("shape", width=40), field("key", width=50), field("status"),
    field("winner", width=70), number("time_ms", ".4g", "ms"), Column("evals", lambda o: o["evaluations"] or "-"),
    Column("seconds", lambda o: f"{o['seconds']:.1f}" if o["seconds"] else "-"), field("device"),
)


def cmd_tune(args: argparse.Namespace) -> int:
    """Tune a manifest's (kernel, shapes) ahead of time into the store; resumable."""
    from .ahead import ManifestTuning, plan, select_devices
    from .database import MissingStoreError
    from .manifest import ManifestError, load_manifest

    try:
        entries = load_manifest(args.manifest)
        devices = select_devices(args.gpus)
    except (ManifestError, ValueError) as error:
        raise UsageError(str(error)) from error
    shown_devices = ", ".join("cpu" if d is None else f"cuda:{d}" for d in devices)
    if args.dry_run:
        try:
            store = _store(args, changes=True)
        except MissingStoreError:
            store = None
        device = entries[0].kernel.tuning.identity.device
        if args.format == "table":
            shown = store.shown_url if store is not None else f"{args.store or 'default'} (does not exist)"
            print(f"store: {shown}; devices: {shown_devices}; what the store holds for {device}")
        emit(plan(entries, store), PLAN_COLUMNS, args.format, wide=args.wide)
        return 0
    with _store(args, read_only=False, create=True) as store:
        print(f"store: {store.shown_url}; devices: {shown_devices}", file=sys.stderr)
        outcomes = ManifestTuning(entries, store, devices, evals=args.evals, seconds=args.seconds, lease=args.lease,
                                  progress=args.progress).run()
    emit([dataclasses.asdict(o) for o in outcomes], OUTCOME_COLUMNS, args.format, wide=args.wide)
    for outcome in outcomes:
        if outcome.detail:
            print(f"{outcome.kernel} {outcome.shape}: {outcome.detail}", file=sys.stderr)
    return 1 if any(o.status in ("failed", "error") for o in outcomes) else 0


def _ratio(text: str) -> float:
    """A target as a ratio to the optimum: a finite number > 1 (``compare --threshold``)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (1.0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a ratio to the optimum > 1, such as 1.1. Got {text!r} instead.")
    return value


def _strategy(text: str) -> str:
    """``compare --strategy``: a registered name, ``module:Class`` or ``kt:NAME``, checked now so
    that a bad one costs no replay. The current directory goes first on the import path, as with
    ``python -m``, so that a ``my_strategies.py`` beside the user is found (workers inherit the path)."""
    from .compare import check_strategy

    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        return check_strategy(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


class _HelpWithEpilog(argparse.Action):
    """``--help`` whose epilog is written only when asked for: listing the strategies loads every
    installed strategy plugin, which no other use of the command should pay for."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, help: str | None = None,
                 epilog: Callable[[], str] = str) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)
        self.epilog = epilog

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        parser.epilog = self.epilog()
        parser.print_help()
        parser.exit()


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Each option's default, where it has one its help does not already state."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help = action.help or ""
        if action.option_strings and action.default not in (None, False, argparse.SUPPRESS) \
                and "default" not in help:
            help += " (default: %(default)s)"
        return help


def _compare_epilog() -> str:
    from .strategy import available

    return (f"Strategies (--strategy): a registered name: {', '.join(available())}; or module:Class, a "
            "tunekit.Strategy subclass importable from the current directory or PYTHONPATH (for "
            "example my_strategies:Reverse); or kt:NAME, Kernel Tuner's strategy NAME on the same "
            'spaces, seeds and budgets (for example kt:genetic_algorithm; pip install '
            '"tunekit[experiments]"). Each is named in the report as given.')


def _seconds(text: str) -> float:
    """A number of seconds > 0 (``--seconds``, ``--lease``)."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0. Got {text!r} instead.")
    return value


def _triton_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("triton")
    except PackageNotFoundError:
        return "not installed"


DESCRIPTION = """\
tunekit: tune Triton kernels, and inspect, ship and compare what was measured.

Every command reads the store that --store names, else $TUNEKIT_STORE, else a SQLite file in the
user's cache directory. Listing commands print a table, or JSON or CSV with --format (--json);
JSON keeps every field, with keys and configs as objects. Usage errors exit with code 2."""


def _output_options(parser: argparse.ArgumentParser, what: str) -> None:
    """--format/--json and --wide on a command that lists ``what``."""
    parser.add_argument("--format", choices=FORMATS, default="table",
                        help=f"print the {what} as a table (default), JSON (every field) or CSV")
    parser.add_argument("--json", dest="format", action="store_const", const="json", help="same as --format json")
    parser.add_argument("--wide", action="store_true", help="in a table, show keys and configs in full, not cut")


def _epilog() -> str:
    """The strategies and the shipped recorded spaces, for --help."""
    from .kernels import shipped
    from .strategy import available

    spaces = ", ".join(path.name.removesuffix(".json.gz") for path in shipped.paths())
    return (f"strategies: {', '.join(available())}\n\n"
            "recorded H200 spaces shipped with tunekit (tunekit demo replays them all), for tunekit compare --space\n"
            f"{shipped.DIRECTORY}/NAME.json.gz:\n{textwrap.fill(spaces, 100, initial_indent='  ', subsequent_indent='  ', break_on_hyphens=False)}")


def _formatted(parser: argparse.ArgumentParser) -> None:
    """``parser`` and every parser under it show the options' defaults."""
    parser.formatter_class = _HelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _formatted(child)


def build_parser() -> argparse.ArgumentParser:
    from .demo import NOT_REPLAYED

    not_replayed = " and ".join([", ".join(NOT_REPLAYED[:-1]), NOT_REPLAYED[-1]] if len(NOT_REPLAYED) > 1
                                else NOT_REPLAYED)
    parser = argparse.ArgumentParser(prog="tunekit", description=DESCRIPTION, add_help=False)
    parser.add_argument("-h", "--help", action=_HelpWithEpilog, epilog=_epilog, help="show this help message and exit")
    parser.add_argument("--version", action="version", version=f"tunekit {__version__} (Triton {_triton_version()})")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    store_flag: dict[str, Any] = {
        "help": f"store path or SQLAlchemy URL (default: ${settings.ENV_STORE} or the user cache)"}

    store = commands.add_parser("store", help="inspect, export, plot and clean up a results store",
                                description="Inspect, export, plot and clean up a results store.")
    store_commands = store.add_subparsers(dest="store_command", required=True, metavar="STORE_COMMAND")
    ls = store_commands.add_parser("ls", help="list the runs: kernel, device, key, strategy, evaluations",
                                   description="List the runs (tunings) a store holds, oldest first.")
    ls.add_argument("--store", **store_flag)
    ls.add_argument("--kernel", help="only this kernel's runs (its name, as the table shows it)")
    _output_options(ls, "runs")
    ls.set_defaults(handler=cmd_ls)
    show = store_commands.add_parser("show", help="show the trials of a run, the winner marked",
                                     description="Show the trials of one run in the order they were measured; the "
                                                 "trial the winner was chosen by is marked *.")
    show.add_argument("run", help="the run's id, or enough of its start to be unique (tunekit store ls lists them)")
    show.add_argument("--store", **store_flag)
    _output_options(show, "trials")
    show.set_defaults(handler=cmd_show)
    plot = store_commands.add_parser("plot", help="draw one run's history to a PNG",
                                     description="Draw one run's history: each evaluation's time against its position "
                                                 "and the seconds since the run started, coloured by status, with the "
                                                 "best so far, the finalists' re-timings and the winner. Needs "
                                                 "matplotlib (pip install \"tunekit[plots]\").")
    plot.add_argument("run", help="the run's id, or enough of its start to be unique")
    plot.add_argument("--store", **store_flag)
    plot.add_argument("--out", help="the image to write, in the format its suffix names: .png, .svg, .pdf, ... "
                                    "(default: tunekit-run-RUN.png; never overwritten)")
    plot.set_defaults(handler=cmd_plot)
    export = store_commands.add_parser("export", help="export trials or winners (CSV, JSONL), or a kernel's space",
                                       description="Export trials, or the winners (--winners), to CSV or JSONL that "
                                                   "tunekit store import reads; or one kernel's measured space as a "
                                                   "Kernel Tuner cache file or a T4 results file.")
    export.add_argument("out", help="the file to write (never overwritten); - writes to stdout")
    export.add_argument("--store", **store_flag)
    export.add_argument("--run", help="only this run's trials (an id, or enough of its start to be unique)")
    export.add_argument("--kernel", help="only this kernel's trials or winners")
    export.add_argument("--winners", action="store_true", help="export the stored winner of every key instead")
    export.add_argument("--format", choices=("csv", "jsonl", "kerneltuner", "t4"),
                        help="csv/jsonl: rows (default: by the file's suffix; jsonl for -); kerneltuner/t4: one "
                             "kernel's space")
    export.add_argument("--key", type=_tuning_key,
                        help="with kerneltuner/t4: the key, JSON as stored, when the kernel has several")
    export.add_argument("--device", help="with kerneltuner/t4: the device, when there are several")
    export.set_defaults(handler=cmd_export)
    imported = store_commands.add_parser("import", help="merge an export (winners or trials) into a store",
                                         description="Merge an export (winners or trials) into a store, skipping "
                                                     "the rows it already holds.")
    imported.add_argument("file", help="a .jsonl or .csv file that tunekit store export wrote")
    imported.add_argument("--store", **store_flag)
    imported.set_defaults(handler=cmd_import)
    heuristics = store_commands.add_parser(
        "heuristics", help="fit a rule giving configs for keys never tuned; write it as a Python module",
        description="Fit a rule that gives a config for keys never tuned, from a kernel's winners, and write it as a "
                    "Python module to use as fallback=module.config_for.")
    heuristics.add_argument("out", help="the module to write, OUT.py (never overwritten)")
    heuristics.add_argument("--kernel", required=True, help="the kernel's name, as the store shows it")
    heuristics.add_argument("--store", help=store_flag["help"] + "; a winners .jsonl file too")
    heuristics.add_argument("--device", help="the device whose winners to use, when there are several")
    heuristics.add_argument("--triton", help="the Triton build whose winners to use, when there are several")
    heuristics.set_defaults(handler=cmd_heuristics, parser=heuristics)
    rm = store_commands.add_parser("rm", help="delete trials, runs and winners by run, kernel, key or status",
                                   description="Delete the trials (and, unless --status is given, the runs and "
                                               "winners) that match every filter given.")
    rm.add_argument("--store", **store_flag)
    rm.add_argument("--run", help="a run id (a prefix is enough): its trials, the run and the winner it chose")
    rm.add_argument("--kernel", help="a kernel's trials, runs and winners")
    rm.add_argument("--key", type=_tuning_key,
                    help="a tuning key, JSON as export writes it, with --kernel: its trials, runs and winners")
    rm.add_argument("--status", choices=[status.value for status in Status],
                    help="only trials of this status (runs and winners are kept)")
    rm.add_argument("--dry-run", action="store_true", help="say what would be deleted, and delete nothing")
    rm.set_defaults(handler=cmd_rm, parser=rm)

    tune = commands.add_parser("tune", help="tune a manifest of kernels and shapes ahead of time, on every GPU",
                               description="Tune a manifest's kernels at its shapes into the store, spread over the "
                                           "GPUs; resumable, and several hosts may share one store.")
    tune.add_argument("manifest", help="a TOML or Python manifest (a path, a module, or package:resource.toml)")
    tune.add_argument("--store", **store_flag)
    tune.add_argument("--gpus", default="all", help="all (default) or device numbers, e.g. 0,1")
    tune.add_argument("--evals", type=_budget, default=None, help="evaluations per key (default: the manifest's, "
                      "else the decorator's budget)")
    tune.add_argument("--seconds", type=_seconds, default=None, help="seconds per key (default: the manifest's, else "
                      "the decorator's)")
    tune.add_argument("--lease", type=_seconds, default=60.0,
                      help="seconds a claim on a key lasts unless renewed (a dead host's keys wait this long)")
    tune.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                      help="one progress bar per device (default: on a terminal)")
    tune.add_argument("--dry-run", action="store_true", help="list what would be tuned and what the store holds")
    _output_options(tune, "outcomes (or with --dry-run, the plan)")
    tune.set_defaults(handler=cmd_tune)

    compare = commands.add_parser("compare", help="compare search strategies on recorded spaces", add_help=False,
                                  description="Replay search strategies on fully recorded spaces (Kernel Tuner cache "
                                              "files, T4 files, tunekit exports) with the same budgets and seeds, "
                                              "and write a report, tables and tuning curves. No GPU needed.")
    compare.add_argument("-h", "--help", action=_HelpWithEpilog, epilog=_compare_epilog,
                         help="show this help message and exit")
    compare.add_argument("--space", action="append", required=True,
                         help="a Kernel Tuner cache file, T4 file or tunekit export (glob patterns allowed); repeat")
    compare.add_argument("--strategy", action="append", required=True, type=_strategy,
                         help="a registered name, module:Class or kt:NAME (listed below); repeat")
    compare.add_argument("--seeds", type=_at_least_one("seeds per space and strategy"), default=20,
                         help="seeds per space and strategy (default 20): the tables give medians over them")
    compare.add_argument("--budget", type=_budget, default=None,
                         help="evaluations per tuning (default: per space, where calculated random search "
                              "reaches the end of the score range, over evaluations and over seconds)")
    compare.add_argument("--seconds", type=float, default=None, help="simulated seconds per tuning, besides --budget")
    compare.add_argument("--jobs", type=_processes, default=1, help="worker processes")
    compare.add_argument("--threshold", type=_ratio, action="append",
                         help="another target, as a ratio to the optimum (1.02 and 1.05 are always reported); repeat")
    compare.add_argument("--transfer", action="store_true",
                         help="each tuning starts with the store holding the given spaces of the same kernel at "
                              "other shapes (leave one shape out)")
    compare.add_argument("--batch", type=_at_least_one("configs in flight"), default=1,
                         help="configs each tunekit strategy has in flight: asked for that many, then told each "
                              "trial and asked for one more (default 1; a live tuning on a GPU keeps a learning "
                              "strategy's compile workers busy and two more: 18 with 16 or more CPUs)")
    compare.add_argument("--out", required=True, help="output directory (new, or one tunekit wrote before)")
    compare.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                         help="a progress bar on stderr (default: on a terminal)")
    compare.set_defaults(handler=cmd_compare)

    demo = commands.add_parser("demo", help="tune a GEMM live (GPU) or replay the shipped H200 spaces (no GPU)",
                               description="With a GPU: tune the kernel suite's GEMM live beside stock "
                                           "triton.autotune and torch.matmul. Without one (or with --replay): replay "
                                           "the recorded H200 spaces shipped with tunekit with every registered strategy "
                                           f"but {not_replayed}, and write tables and tuning curves.")
    demo.add_argument("--strategy", action="append", help="a registered name; repeat (default: every strategy but "
                      f"{not_replayed} when replaying, the default strategy live)")
    demo.add_argument("--replay", action="store_true", help="replay even where a GPU is present")
    demo.add_argument("--seeds", type=int, default=3, help="replay: seeds per strategy and space")
    demo.add_argument("--budget", type=_budget, default=50, help="replay: evaluations per tuning")
    demo.add_argument("--jobs", type=_processes, default=min(4, os.cpu_count() or 1), help="replay: processes")
    demo.add_argument("--out", default="tunekit-demo", help="replay: where the tables and PNGs go")
    demo.add_argument("--seconds", type=float, default=60.0, help="live: tunekit's tuning budget")
    demo.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                      help="replay: a progress bar on stderr (default: on a terminal)")
    demo.set_defaults(handler=cmd_demo)
    _formatted(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # a kernel or path a terminal's encoding lacks: escaped, not a crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    args = build_parser().parse_args(argv)
    try:
        status: int = args.handler(args)
        sys.stdout.flush()  # here, so that a reader that went away is caught below, not at exit
        return status
    except (UsageError, StoreError) as error:
        print(f"tunekit: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `tunekit store ls | head -1`: the reader has what it wanted
        # What is still buffered would fail again at exit: stdout goes to /dev/null (Python's
        # documented recipe for SIGPIPE).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
