"""Tuning keys: what a winner is cached by, bucketing of changing shapes, nearest-key lookup.

A key is what ``triton.autotune`` uses: the values of the ``key`` arguments, then the dtype
of every argument that has one. ``KeyBuckets`` maps key values to buckets (for example the
next power of two), so that decode-like shapes that change on every call share a tuning.
"""

from __future__ import annotations

import json
import logging
import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import triton

logger = logging.getLogger(__name__)

Bucket = Callable[[Any], Any]


def next_power_of_2(value: Any) -> Any:
    """The bucket of a positive int: the smallest power of two >= it (others unchanged)."""
    if type(value) is int and value > 0:  # not bool; on the hot path, so no isinstance chain
        return 1 << (value - 1).bit_length()
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:  # an int subclass
        return triton.next_power_of_2(value)
    return value


BUCKETS: dict[str, Bucket] = {"pow2": next_power_of_2}


def resolve_buckets(key: Sequence[str], buckets: Mapping[str, Bucket | str] | str | None) -> dict[str, Bucket]:
    """Turn ``key_buckets=`` (a name for every key argument, or name -> bucket) into callables."""
    if buckets is None:
        return {}
    if isinstance(buckets, str):
        buckets = {name: buckets for name in key}
    resolved = {}
    for name, bucket in buckets.items():
        if name not in key:
            raise ValueError(f"key_buckets names {name!r}, which is not in key {list(key)}.")
        if isinstance(bucket, str):
            if bucket not in BUCKETS:
                raise ValueError(f"Unknown key bucket {bucket!r}. Valid buckets: {', '.join(BUCKETS)}.")
            bucket = BUCKETS[bucket]
        if not callable(bucket):
            raise ValueError(f"key_buckets[{name!r}] must be a callable or a bucket name. Got {bucket!r} instead.")
        resolved[name] = bucket
    return resolved


@dataclass(frozen=True, eq=False)
class TuningKey:
    """What a winner is cached and stored by: the ``key`` arguments present in the call (their
    values after bucketing), then the dtype of every argument that has one, as Triton keys.

    The one form of a key in-process (strategies, perf models, heuristics, replays): ``json``
    is the store's form (its only serialisation), ``args`` the key arguments by name,
    ``triton_key`` the tuple stock ``triton.autotune`` caches by.
    """

    names: tuple[str, ...]
    values: tuple
    dtypes: tuple[str, ...]

    @classmethod
    def from_dict(cls, key: Mapping[str, Any]) -> "TuningKey":
        """From ``{"args": {name: value}, "dtypes": [...]}`` (what strategies see, and the store's JSON)."""
        args = dict(key.get("args", {}))
        return cls(tuple(args), tuple(args.values()), tuple(str(d) for d in key.get("dtypes", ())))

    @classmethod
    def from_json(cls, text: str) -> "TuningKey":
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_call(cls, names: Sequence[str], key: tuple) -> "TuningKey":
        """From the Autotuner's cache key of a call: the values of ``names``, then dtypes."""
        return cls(tuple(names), tuple(key[: len(names)]), tuple(str(d) for d in key[len(names):]))

    @cached_property
    def json(self) -> str:
        return key_json(self.names, self.values + self.dtypes)

    @cached_property
    def args(self) -> dict[str, Any]:
        """The key arguments by name, as the store holds them (sorted by name, JSON values)."""
        args: dict[str, Any] = json.loads(self.json)["args"]
        return args

    def as_dict(self) -> dict[str, Any]:
        """Deprecated: ``{"args": ..., "dtypes": [...]}``, the form strategies saw before keys were
        ``TuningKey``s; use ``args`` and ``dtypes``."""
        warnings.warn("TuningKey.as_dict() is deprecated: use key.args and key.dtypes", DeprecationWarning,
                      stacklevel=2)
        values: dict[str, Any] = json.loads(self.json)
        return values

    def __getitem__(self, name: str) -> Any:
        """Deprecated: ``key["args"]`` and ``key["dtypes"]`` as on the dict strategies were given
        before; use the attributes."""
        if name not in ("args", "dtypes"):
            raise KeyError(name)
        warnings.warn(f'key["{name}"] is deprecated: a key is a TuningKey, use key.{name}', DeprecationWarning,
                      stacklevel=2)
        return dict(self.args) if name == "args" else list(self.dtypes)

    def get(self, name: str, default: Any = None) -> Any:
        """Deprecated: ``key.get("args", {})`` as on the dict strategies were given before."""
        if name not in ("args", "dtypes"):
            return default
        warnings.warn(f'key.get("{name}") is deprecated: a key is a TuningKey, use key.{name}', DeprecationWarning,
                      stacklevel=2)
        return dict(self.args) if name == "args" else list(self.dtypes)

    __iter__ = None  # __getitem__ does not make a key a sequence: iterating one is a TypeError

    def __eq__(self, other: object) -> bool:  # the store's identity: argument order and tuple/list do not count
        return isinstance(other, TuningKey) and self.json == other.json

    def __hash__(self) -> int:
        return hash(self.json)

    @property
    def triton_key(self) -> tuple:
        """The key as one tuple of plain values: stock Triton's cache key (``Autotuner.cache``)."""
        return self.values + self.dtypes


def call_key(kernel_name: str, names: Sequence[str], key: tuple) -> TuningKey:
    """The ``TuningKey`` of a call whose cache key (the values of ``names``, then dtypes) is
    ``key``. A tensor passed as a key argument is keyed by its shape and dtype, not by its printed
    values (Triton caches by the tensor object: every new tensor is looked up again); said once
    per kernel."""
    tensors = [i for i, value in enumerate(key[: len(names)]) if hasattr(value, "data_ptr")]
    if tensors:
        key = tuple(f"tensor(shape={list(v.shape)}, dtype={v.dtype})" if i in tensors else v for i, v in enumerate(key))
        if kernel_name not in _told_tensor_keys:
            _told_tensor_keys.add(kernel_name)
            logger.warning("key of %s names %s, a tensor: stored by its shape and dtype, and in this process by the "
                           "tensor object, as Triton caches it (every new tensor is looked up again); key on a size "
                           "argument instead", kernel_name, ", ".join(repr(names[i]) for i in tensors))
    return TuningKey.from_call(names, key)


#: Kernels told that a tensor in their key is keyed by its shape and dtype.
_told_tensor_keys: set[str] = set()


def key_json(names: Sequence[str], key: tuple) -> str:
    """The store's text for a key: ``{"args": {name: value}, "dtypes": [...]}``."""
    values, dtypes = key[: len(names)], key[len(names) :]
    return json.dumps(
        {"args": dict(zip(names, values)), "dtypes": [str(d) for d in dtypes]}, sort_keys=True, default=str
    )


def value_distance(a: Any, b: Any) -> float:
    """How far apart two values of a key argument are: |log2 a - log2 b| for positive sizes, 0 for
    equal values, inf for anything else."""
    if a == b:
        return 0.0
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in (a, b))
    if numbers:
        return abs(math.log2(a) - math.log2(b))
    return math.inf


#: What a difference in kind adds to a key distance (other dtypes, an argument only one key has,
#: values that are not both positive sizes): more than any gap between sizes.
UNLIKE = 100.0


def key_distance(a: TuningKey, b: TuningKey) -> float:
    """How far apart two keys are, the one rule of the runtime fallback, the default strategy
    and ``tunekit store heuristics``: |log2 x - log2 y| summed over the sizes, ``UNLIKE`` for
    each other difference (so a key of other dtypes is nearest only where none has these)."""
    distance = 0.0 if list(a.dtypes) == list(b.dtypes) else UNLIKE
    ours, theirs = a.args, b.args
    for name in set(ours) | set(theirs):
        apart = value_distance(ours.get(name), theirs.get(name))
        distance += apart if math.isfinite(apart) else UNLIKE
    return distance


def alike(a: TuningKey, b: TuningKey) -> bool:
    """Keys of the same arguments and dtypes whose values differ at most in size."""
    return key_distance(a, b) < UNLIKE


def nearest_key(target: TuningKey, candidates: Iterable[TuningKey]) -> TuningKey | None:
    """The candidate nearest ``target`` by ``key_distance`` (ties: the first); None without any."""
    return min(candidates, key=lambda candidate: key_distance(target, candidate), default=None)


def as_key(key: TuningKey | Mapping[str, Any] | None) -> TuningKey | None:
    """A key given to a public function (a perf model's ``predict``) as a ``TuningKey``; its
    ``{"args": {...}, "dtypes": [...]}`` form is taken too. Raises TypeError on anything else."""
    if key is None or isinstance(key, TuningKey):
        return key
    if isinstance(key, Mapping) and isinstance(key.get("args"), Mapping):
        return TuningKey.from_dict(key)
    raise TypeError(f"A tuning key must be a TuningKey or a mapping {{'args': {{...}}, 'dtypes': [...]}}. "
                    f"Got {key!r} instead.")
