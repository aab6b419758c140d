"""Configs for keys never tuned: a small rule fitted on tuned keys, written as a plain Python module.

``tunekit store heuristics`` gathers, for one kernel on one device and Triton build, what the store
knows at every tuned key (``KeyTimes``: the winner, and the time of each config measured there),
fits candidate rules over the key's values (sizes as log2, flags and dtypes as categories), keeps
the one that predicts best when each key in turn is left out, and writes it as a module with one
function, ``config_for(**key) -> dict``, that needs nothing but Python. ``tunekit.autotune(...,
fallback=module.config_for)`` launches its config at keys with no winner.

The rules: the one config best over every key (``constant``), a shallow decision tree whose leaves
hold the config best over their keys, two keys at least (``tree-1`` .. ``tree-3``: scikit-learn's
regression tree over each candidate config's slowdown), and the winner of the nearest key in log2
space (``nearest``). A rule is judged by the slowdown of its config at the left-out key over that
key's best, and the simplest rule within one standard error of the best is written.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from .keys import TuningKey, key_distance
from .store import ResultsStore, StoreError

__all__ = ["KeyTimes", "TunedKeys", "Rule", "Assessment", "fit_rule", "key_times_from_store", "leave_one_out",
           "assess", "choose_rule", "write_module", "RULES"]

#: Rules tried by ``choose_rule``, simplest first.
RULES = ("constant", "tree-1", "tree-2", "tree-3", "nearest")


@dataclass(frozen=True)
class KeyTimes:
    """What is known at one tuned key: the key, its winner, and the
    median ms of every config measured there (None: the config failed there). Configs are
    ``config_json`` texts."""

    key: TuningKey
    winner: str
    times: dict[str, float | None] = field(default_factory=dict)

    def slowdown(self, config: str) -> float | None:
        """The config's time over the best known here; inf if it failed; None if never measured."""
        if config not in self.times:
            return 1.0 if config == self.winner else None
        time_ms = self.times[config]
        if time_ms is None:
            return math.inf
        best = self.best_ms if self.best_ms is not None else time_ms
        return time_ms / best if best > 0 else 1.0

    @cached_property
    def best_ms(self) -> float | None:
        return min((t for t in self.times.values() if t is not None), default=None)


# -- features of a key ------------------------------------------------------------------------

@dataclass(frozen=True)
class Feature:
    """One column of the rules' input: ``log2`` of a positive size or of the product of two (a
    GEMM's M*N is its output's size), a ``flag`` (0/1), or whether a key value (or the dtypes)
    ``equals`` one seen in fitting."""

    kind: str
    name: str  # the key argument, or "dtypes"; for a product, "M*N"
    value: Any = None  # for ``equals``

    def of(self, key: TuningKey) -> float:
        args = key.args
        if self.kind == "log2":
            return sum(math.log2(_size(args.get(name))) for name in self.name.split("*"))
        value = list(key.dtypes) if self.name == "dtypes" else args.get(self.name)
        if self.kind == "flag":
            return float(bool(value))
        return float(value == self.value)


def _size(value: Any) -> float:
    """A size as rules compare it: what is not a positive number counts as 1."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 1


def _features(keys: Sequence[TuningKey]) -> list[Feature]:
    names = sorted({name for key in keys for name in key.names})
    features = []
    sizes = []
    for name in names:
        values = [key.args.get(name) for key in keys]
        if all(isinstance(v, bool) for v in values):
            features.append(Feature("flag", name))
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values):
            sizes.append(name)
        else:
            features += [Feature("equals", name, v) for v in _distinct(values)]
    features += [Feature("log2", name) for name in sizes]
    features += [Feature("log2", f"{a}*{b}") for i, a in enumerate(sizes) for b in sizes[i + 1:]]
    dtypes = _distinct([list(key.dtypes) for key in keys])
    if len(dtypes) > 1:
        features += [Feature("equals", "dtypes", d) for d in dtypes]
    return features


def _distinct(values: Sequence[Any]) -> list[Any]:
    seen: list[Any] = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def _matrix(features: Sequence[Feature], keys: Sequence[TuningKey]) -> np.ndarray:
    return np.array([[f.of(key) for f in features] for key in keys], dtype=float)


# -- rules --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Node:
    """A decision: ``feature <= threshold`` goes to ``left``; a leaf holds a config's index."""

    config: int | None = None
    feature: Feature | None = None
    threshold: float = 0.0
    left: "Node | None" = None
    right: "Node | None" = None


@dataclass(frozen=True)
class Rule:
    """A fitted rule: ``configs`` (flat dicts) and either a decision ``tree`` over the key or the
    ``points`` (key, config index) whose nearest gives the config."""

    kind: str
    configs: tuple[dict[str, Any], ...]
    tree: Node | None = None
    points: tuple[tuple[TuningKey, int], ...] = ()

    def config_for(self, key: TuningKey) -> dict[str, Any]:
        """The config for ``key``."""
        if self.tree is not None:
            node = self.tree
            while node.config is None:
                assert node.feature is not None and node.left is not None and node.right is not None  # a decision
                node = node.left if node.feature.of(key) <= node.threshold else node.right
            return dict(self.configs[node.config])
        _, index = min(self.points, key=lambda point: key_distance(key, point[0]))
        return dict(self.configs[index])


def _log_slowdowns(data: Sequence[KeyTimes], candidates: Sequence[str]) -> np.ndarray:
    """log(slowdown) of every candidate at every key, for fitting. A failure counts as twice the
    key's worst known slowdown; a config never measured at a key as that worst (a rule should
    not bet on configs it knows nothing about there)."""
    table = np.empty((len(data), len(candidates)))
    for row, key_times in enumerate(data):
        known = [key_times.slowdown(c) for c in candidates]
        finite = [s for s in known if s is not None and math.isfinite(s)]
        worst = math.log(max(finite + [2.0]))
        for column, slowdown in enumerate(known):
            table[row, column] = worst if slowdown is None else (
                worst + math.log(2.0) if math.isinf(slowdown) else math.log(slowdown))
    return table


def _candidates(data: Sequence[KeyTimes]) -> list[str]:
    """Configs a rule may choose: every key's winner, and every config measured at over half the keys."""
    counts: dict[str, int] = {}
    for key_times in data:
        for config in key_times.times:
            counts[config] = counts.get(config, 0) + 1
    return _distinct([k.winner for k in data] + sorted(c for c, n in counts.items() if 2 * n > len(data)))


def fit_rule(data: Sequence[KeyTimes], kind: str) -> Rule:
    """Fit one of ``RULES`` on the tuned keys ``data``."""
    if not data:
        raise ValueError("No tuned keys to fit a rule on.")
    if kind not in RULES:
        raise ValueError(f"Unknown rule {kind!r}. Valid rules: {', '.join(RULES)}.")
    if kind == "nearest":
        winners = _distinct([k.winner for k in data])
        return Rule(kind, tuple(json.loads(c) for c in winners),
                    points=tuple((k.key, winners.index(k.winner)) for k in data))
    candidates = _candidates(data)
    slowdowns = _log_slowdowns(data, candidates)
    depth = 0 if kind == "constant" else int(kind.split("-")[1])
    features = _features([k.key for k in data])
    if depth == 0 or not features or len(data) < 4:  # a leaf holds 2 keys at least: one config pooled over them
        chosen = int(np.argmin(slowdowns.mean(axis=0)))
        return Rule(kind, (json.loads(candidates[chosen]),), tree=Node(config=0))
    from sklearn.tree import DecisionTreeRegressor

    model = DecisionTreeRegressor(max_depth=depth, min_samples_leaf=2, random_state=0)
    model.fit(_matrix(features, [k.key for k in data]), slowdowns)
    used: list[int] = []

    def node(index: int) -> Node:
        tree = model.tree_
        if tree.children_left[index] == -1:  # a leaf: the candidate best on average over its keys
            best = int(np.argmin(tree.value[index][:, 0]))
            if best not in used:
                used.append(best)
            return Node(config=used.index(best))
        return Node(feature=features[tree.feature[index]], threshold=float(tree.threshold[index]),
                    left=node(tree.children_left[index]), right=node(tree.children_right[index]))

    root = node(0)
    return Rule(kind, tuple(json.loads(candidates[i]) for i in used), tree=root)


# -- choosing a rule ------------------------------------------------------------------------------

def leave_one_out(data: Sequence[KeyTimes], kind: str) -> list[float | None]:
    """Per key, the slowdown at that key of the config the rule fitted on all other keys gives
    (inf: it failed there; None: never measured there)."""
    slowdowns = []
    for index, key_times in enumerate(data):
        rule = fit_rule([k for i, k in enumerate(data) if i != index], kind)
        config = json.dumps(rule.config_for(key_times.key), sort_keys=True, default=str)
        slowdowns.append(key_times.slowdown(config))
    return slowdowns


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


#: What a config never measured at the left-out key counts as when rules are compared.
UNKNOWN_SLOWDOWN = 1.5


@dataclass(frozen=True)
class Assessment:
    """A rule's leave-one-key-out result: per key, the slowdown of its config there (inf: it
    failed there; None: never measured there)."""

    kind: str
    slowdowns: tuple[float | None, ...]

    @property
    def measured(self) -> int:
        return sum(1 for s in self.slowdowns if s is not None and math.isfinite(s))

    @property
    def failed(self) -> int:
        return sum(1 for s in self.slowdowns if s is not None and math.isinf(s))

    @property
    def geomean(self) -> float:
        """Over the keys where the config was measured."""
        return geomean([s for s in self.slowdowns if s is not None and math.isfinite(s)])

    @property
    def worst(self) -> float:
        return max((s for s in self.slowdowns if s is not None and math.isfinite(s)), default=math.nan)

    def scores(self) -> list[float]:
        """log slowdown per key that did not fail, a config never measured counting as ``UNKNOWN_SLOWDOWN``."""
        return [math.log(UNKNOWN_SLOWDOWN if s is None else s) for s in self.slowdowns
                if s is None or math.isfinite(s)]


def assess(data: Sequence[KeyTimes], kind: str) -> Assessment:
    return Assessment(kind, tuple(leave_one_out(data, kind)))


def choose_rule(data: Sequence[KeyTimes], kinds: Sequence[str] = RULES) -> tuple[Rule, list[Assessment]]:
    """The rule to write, fitted on every key, and every rule's leave-one-key-out assessment.

    Among the rules whose configs failed at the fewest left-out keys, the simplest (``kinds`` is
    in order of complexity) whose mean log slowdown is within one standard error of the best
    rule's: CART's one-standard-error rule, since a handful of keys tells close rules apart by
    noise, and the simpler rule generalises more often. With fewer than 3 keys, or winners alone
    (no timings of other configs to compare by), the nearest key's winner is the rule."""
    if len(data) < 3 or not any(len(k.times) > 1 for k in data):  # nothing to compare configs by: winners only
        return fit_rule(data, "nearest"), []
    assessments = [assess(data, kind) for kind in kinds]
    fewest = min(a.failed for a in assessments)
    eligible = [a for a in assessments if a.failed == fewest]
    means = {a.kind: float(np.mean(a.scores())) if a.scores() else math.inf for a in eligible}
    best = min(eligible, key=lambda a: means[a.kind])
    scores = best.scores()
    error = float(np.std(scores, ddof=1) / math.sqrt(len(scores))) if len(scores) > 1 else 0.0
    chosen = next(a for a in eligible if means[a.kind] <= means[best.kind] + error)
    return fit_rule(data, chosen.kind), assessments


# -- the store --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TunedKeys:
    """The tuned keys of one kernel on one device and Triton build, and where they came from."""

    kernel: str
    device: str
    triton_version: str
    source: str
    keys: list[KeyTimes]

    def provenance(self) -> str:
        return (f"Fitted on the winners of {len(self.keys)} keys ({self.device}, Triton {self.triton_version}) in "
                f"{self.source}, {time.strftime('%Y-%m-%d')}.")


def key_times_from_store(store: ResultsStore, kernel: str, *, device: str | None = None,
                         triton_version: str | None = None) -> TunedKeys:
    """Every key of ``kernel`` with a winner, on one device and Triton build (``device`` and
    ``triton_version`` choose among several; an error lists them) and one Space (the latest
    winner's), with the median of every config measured there."""
    winners = [row for row in store.winner_rows() if row["kernel_name"] == kernel]
    if not winners:
        known = sorted({row["kernel_name"] for row in store.winner_rows()})
        raise StoreError(f"{store.shown_url} holds no winner of kernel {kernel!r}"
                         + (f"; it holds winners of {', '.join(known)}." if known else "; it holds no winners."))
    for column, wanted in (("device", device), ("triton_version", triton_version)):
        if wanted is not None:
            winners = [row for row in winners if row[column] == wanted]
        found = sorted({row[column] for row in winners})
        if len(found) != 1:
            option = "--device" if column == "device" else "--triton"
            raise StoreError(f"{store.shown_url}: winners of {kernel} on "
                             + (f"{len(found)} {column} values ({'; '.join(found)}): choose one with {option}."
                                if found else f"no {column} {wanted!r}."))
    latest = max(winners, key=lambda row: row["created_at"])
    winners = [row for row in winners if row["space_hash"] == latest["space_hash"]
               and (row["source_hash"], row["timing_method"]) == (latest["source_hash"], latest["timing_method"])]
    # trials of the runs that chose these winners: configs of this Space (an older Space's may be gone)
    runs = {row["run_id"] for row in winners}
    measured: dict[str, dict[str, list[float | None]]] = {}
    for row in store.rows(kernel=kernel, device=latest["device"]):
        if row["run_id"] not in runs or (row["source_hash"], row["triton_version"], row["timing_method"]) != (
                latest["source_hash"], latest["triton_version"], latest["timing_method"]):
            continue
        config = json.dumps(json.loads(row["config"]), sort_keys=True, default=str)
        time_ms = row["median_ms"] if row["status"] == "ok" else None
        measured.setdefault(row["key"], {}).setdefault(config, []).append(time_ms)
    data = []
    for row in winners:
        times = {config: (None if None in values else float(np.median([v for v in values if v is not None])))
                 for config, values in measured.get(row["key"], {}).items()}
        data.append(KeyTimes(TuningKey.from_json(row["key"]), json.dumps(json.loads(row["config"]), sort_keys=True,
                                                                  default=str), times))
    return TunedKeys(kernel, latest["device"], latest["triton_version"], store.shown_url, data)


# -- the module -------------------------------------------------------------------------------------

def write_module(rule: Rule, path: str | Path, *, kernel: str, provenance: str,
                 assessments: Sequence[Assessment] = ()) -> Path:
    """Write ``rule`` as a Python module with ``config_for(**key) -> dict`` (the key's arguments by
    name, and ``dtypes`` if the rule tells dtypes apart). Refuses to overwrite a file."""
    target = Path(path)
    if target.exists():
        raise FileExistsError(f"{target} exists; tunekit does not overwrite files. Choose another name.")
    lines = [f'"""Configs for {kernel} at keys with no tuned winner, written by `tunekit store heuristics`.', "",
             f"{provenance}", f"Rule: {_describe(rule)}."]
    if assessments:
        lines += ["", "Leaving each tuned key out in turn, the config each rule gave ran at this multiple of that",
                  "key's best (geomean, worst; keys where it was measured):"]
        lines += [f"    {a.kind:9s} {a.geomean:.3f}, {a.worst:.3f} ({a.measured} keys"
                  + (f", failed at {a.failed}" if a.failed else "") + ")" for a in assessments]
    lines += ["", "Needs nothing but Python: `tunekit.autotune(..., fallback=config_for)`, or call it yourself.", '"""',
              ""] + (["import math", ""] if rule.points else []) + ["CONFIGS = ["]
    lines += [f"    {_literal(config)}," for config in rule.configs]
    lines += ["]"]
    if rule.points:
        lines += ["", "#: (tuned key, index into CONFIGS of its winner)", "POINTS = ["]
        lines += [f"    ({_literal(key.args)}, {list(key.dtypes)!r}, {i}),"
                  for key, i in rule.points]
        lines += ["]"]
    lines += ["", "", "def config_for(**key):",
              '    """The config (a dict of Triton meta-parameters and compile options) for a call whose key',
              '    arguments have these values; ``dtypes`` (a list of str) is the key\'s dtypes."""',
              "    dtypes = [str(d) for d in key.pop(\"dtypes\", [])]"]
    if rule.tree is not None:
        lines += _render(rule.tree, indent=1)
        lines += ["", "", "def _size(key, name):",
                  '    """A size as the rule compares it (what is not a positive number counts as 1)."""',
                  "    value = key.get(name)",
                  "    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 1"]
    else:
        lines += ["    best = min(POINTS, key=lambda point: _distance(key, dtypes, point[0], point[1]))",
                  "    return dict(CONFIGS[best[2]])", "", "",
                  "def _distance(key, dtypes, args, point_dtypes):",
                  '    """|log2 a - log2 b| summed over the sizes, 100 per other difference (dtypes among them)."""',
                  "    distance = 0.0 if dtypes == point_dtypes else 100.0",
                  "    for name in set(key) | set(args):",
                  "        a, b = key.get(name), args.get(name)",
                  "        if a == b:",
                  "            continue",
                  "        sizes = all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in (a, b))",
                  "        distance += abs(math.log2(a) - math.log2(b)) if sizes else 100.0",
                  "    return distance"]
    text = "\n".join(lines) + "\n"
    with open(target, "x") as handle:
        handle.write(text)
    return target


def _literal(mapping: Mapping[str, Any]) -> str:
    """A dict as Python source (True, None: not JSON's true, null), keys sorted."""
    return "{" + ", ".join(f"{name!r}: {mapping[name]!r}" for name in sorted(mapping)) + "}"


def _describe(rule: Rule) -> str:
    if rule.kind == "constant":
        return "one config for every key (the best over the tuned keys)"
    if rule.kind == "nearest":
        return f"the winner of the nearest of {len(rule.points)} tuned keys (log2 of the sizes)"
    return f"a decision tree of depth {rule.kind.split('-')[1]} over the key, {len(rule.configs)} configs"


def _render(node: Node, indent: int) -> list[str]:
    pad = "    " * indent
    if node.config is not None:
        return [f"{pad}return dict(CONFIGS[{node.config}])"]
    feature, threshold = node.feature, node.threshold
    assert feature is not None and node.left is not None and node.right is not None  # not a leaf: a decision
    if feature.kind == "log2":  # log2(v) <= t  <=>  v <= 2**t
        product = " * ".join(f"_size(key, {name!r})" for name in feature.name.split("*"))
        test = f"{product} <= {2 ** threshold!r}"
    elif feature.kind == "flag":
        test = f"not key.get({feature.name!r})"
    elif feature.name == "dtypes":
        test = f"dtypes != {list(feature.value)!r}"
    else:
        test = f"key.get({feature.name!r}) != {feature.value!r}"
    return [f"{pad}if {test}:"] + _render(node.left, indent + 1) + _render(node.right, indent)
