"""What ``tunekit tune`` tunes: a manifest of kernels, the shapes to tune each at, and how to
make inputs for a shape.

A manifest is a TOML file (a path, or a package's resource: ``tunekit.kernels:manifests/tiny.toml``)::

    [[kernels]]
    kernel = "tunekit.kernels.tuned:matmul"    # decorated with tunekit.autotune
    inputs = "tunekit.kernels.matmul:inputs"   # inputs(**shape) -> the tensors the launch takes
    launch = "tunekit.kernels.matmul:launch"   # launch(kernel, *tensors, **rest); default: the
                                               # inputs module's launch
    budget = {evals = 60, seconds = 120}       # optional; default: the decorator's
    shapes = [{m = 4096, n = 4096, k = 4096, dtype = "torch.bfloat16"}]

or a Python module (a file, or an import path) with ``MANIFEST``, a list of dicts of the same form
in which objects may stand for the import paths. A shape's values go to the ``inputs`` function
by name; a name it does not take but ``launch`` does (attention's ``causal``) goes to ``launch``.
Strings ``"torch.<name>"`` stand for that attribute of torch (a dtype).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .budget import Budget

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FIELDS = ("kernel", "inputs", "launch", "shapes", "budget")


class ManifestError(ValueError):
    """A manifest that cannot be used: the message names the file, the entry and the problem."""


@dataclass(frozen=True)
class Shape:
    """One shape of an entry: the ``inputs`` function's arguments and the launch's extra ones."""

    inputs: dict[str, Any]
    launch: dict[str, Any] = field(default_factory=dict)

    def label(self) -> str:
        return ", ".join(f"{k}={_shown(v)}" for k, v in {**self.inputs, **self.launch}.items())


@dataclass(frozen=True)
class ManifestEntry:
    """A kernel of a manifest: the Autotuner, its import path, how to make and launch inputs."""

    name: str
    kernel: Any
    inputs: Callable[..., tuple]
    launch: Callable[..., Any]
    shapes: tuple[Shape, ...]
    budget: Budget | None = None

    def make_inputs(self, shape: Shape, device: str) -> tuple:
        """The tensors of ``shape`` on ``device`` (passed if the inputs function takes ``device``)."""
        arguments = dict(shape.inputs)
        if "device" in inspect.signature(self.inputs).parameters:
            arguments.setdefault("device", device)
        tensors = self.inputs(**arguments)
        return tensors if isinstance(tensors, tuple) else tuple(tensors)


def load_manifest(source: str | Path) -> list[ManifestEntry]:
    """The entries of a TOML file, a Python file, or a module's import path."""
    text = str(source)
    if text.endswith(".toml"):
        try:
            document = tomllib.loads(_toml_text(text))
        except tomllib.TOMLDecodeError as error:
            raise ManifestError(f"Manifest {text} is not valid TOML: {error}.") from error
        unknown = set(document) - {"kernels"}
        if unknown:
            raise ManifestError(f"Manifest {text}: unknown top-level entries {', '.join(sorted(unknown))}; "
                                "a manifest holds [[kernels]] tables.")
        raw = document.get("kernels")
    else:
        raw = getattr(_module(text), "MANIFEST", None)
        if raw is None:
            raise ManifestError(f"Manifest {text} defines no MANIFEST list.")
    if not isinstance(raw, list) or not raw:
        raise ManifestError(f"Manifest {text} lists no kernels.")
    return [_entry(item, f"{text}, kernel {position + 1}") for position, item in enumerate(raw)]


def _toml_text(text: str) -> str:
    """A TOML file's text, or a package resource's (``package:path/in/package.toml``)."""
    path = Path(text)
    package, _, resource = text.partition(":")
    if not path.exists() and resource and "/" not in package and "\\" not in package:
        from importlib.resources import files

        try:
            return files(package).joinpath(resource).read_text()
        except (ImportError, OSError) as error:
            raise ManifestError(f"Manifest {text}: package {package} has no resource {resource} ({error}).") from error
    try:
        return path.read_text()
    except OSError as error:
        raise ManifestError(f"Manifest {text} could not be read: {error.strerror}.") from error


def _module(text: str):
    path = Path(text)
    if path.suffix == ".py":
        if not path.is_file():
            raise ManifestError(f"Manifest {text} does not exist.")
        spec = importlib.util.spec_from_file_location(f"_tunekit_manifest_{path.stem}", path)
        assert spec is not None and spec.loader is not None  # a .py file: Python's source loader
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as error:
            raise ManifestError(f"Manifest {text} failed to run: {type(error).__name__}: {error}.") from error
        return module
    try:
        return importlib.import_module(text)
    except ModuleNotFoundError as error:
        if error.name is not None and (text == error.name or text.startswith(error.name + ".")):
            raise ManifestError(f"Manifest {text} is neither a .toml or .py file nor an importable module "
                                f"({error}).") from error
        raise ManifestError(f"Manifest module {text} failed to import: {error}.") from error
    except Exception as error:
        raise ManifestError(f"Manifest module {text} failed to import: {type(error).__name__}: {error}.") from error


def resolve(reference: Any, what: str, where: str) -> Any:
    """``reference`` itself, or the object an import path ``package.module:name`` names."""
    if not isinstance(reference, str):
        return reference
    module_name, _, attribute = reference.partition(":")
    dotted = all(part.isidentifier() for part in (*module_name.split("."), *attribute.split(".")))
    if not module_name or not attribute or not dotted:
        raise ManifestError(f"{where}: {what} {reference!r} is not an import path; write it as package.module:name "
                            "(module and attribute names joined by dots; a file path is not one).")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ManifestError(f"{where}: {what} {reference!r}: module {module_name} cannot be imported ({error}).") \
            from error
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ManifestError(f"{where}: {what} {reference!r}: {module_name} has no {attribute}.")
        target = getattr(target, part)
    return target


def _entry(item: Any, where: str) -> ManifestEntry:
    from .autotuner import Autotuner

    if not isinstance(item, Mapping):
        raise ManifestError(f"{where}: an entry is a table (kernel, inputs, shapes), not {type(item).__name__}.")
    unknown = set(item) - set(FIELDS)
    missing = {"kernel", "inputs", "shapes"} - set(item)
    if unknown or missing:
        problems = [f"unknown fields {', '.join(sorted(unknown))}"] if unknown else []
        problems += [f"missing {', '.join(sorted(missing))}"] if missing else []
        raise ManifestError(f"{where}: {'; '.join(problems)} (fields: {', '.join(FIELDS)}).")
    name = item["kernel"] if isinstance(item["kernel"], str) else getattr(item["kernel"], "kernel_name", "kernel")
    where = f"{where} ({name})"
    kernel = resolve(item["kernel"], "kernel", where)
    if not isinstance(kernel, Autotuner):
        raise ManifestError(f"{where}: the kernel is a {type(kernel).__name__}, not a kernel decorated with "
                            "tunekit.autotune.")
    inputs = resolve(item["inputs"], "inputs", where)
    launch_reference = item.get("launch")
    if launch_reference is None:
        home = sys.modules.get(getattr(inputs, "__module__", ""), None)
        launch_reference = getattr(home, "launch", None)
        if launch_reference is None:
            raise ManifestError(f"{where}: no launch given, and the inputs function's module has none.")
    launch = resolve(launch_reference, "launch", where)
    for function, what in ((inputs, "inputs"), (launch, "launch")):
        if not callable(function):
            raise ManifestError(f"{where}: {what} is a {type(function).__name__}, not a function.")
    shapes = item["shapes"]
    if not isinstance(shapes, list) or not shapes:
        raise ManifestError(f"{where}: shapes is a non-empty list of tables of the inputs function's arguments.")
    return ManifestEntry(name, kernel, inputs, launch, tuple(_shape(s, inputs, launch, where) for s in shapes),
                         _budget(item.get("budget"), where))


def _shape(values: Any, inputs: Callable, launch: Callable, where: str) -> Shape:
    if not isinstance(values, Mapping):
        raise ManifestError(f"{where}: a shape is a table of arguments, not {values!r}.")
    takes_inputs = inspect.signature(inputs).parameters
    takes_launch = inspect.signature(launch).parameters
    to_inputs, to_launch = {}, {}
    for name, value in values.items():
        value = _torch_attribute(value, where)
        if name in takes_inputs:
            to_inputs[name] = value
        elif name in takes_launch:
            to_launch[name] = value
        else:
            raise ManifestError(f"{where}: shape argument {name!r} is taken by neither the inputs function "
                                f"({', '.join(takes_inputs)}) nor launch.")
    return Shape(to_inputs, to_launch)


def _torch_attribute(value: Any, where: str) -> Any:
    if isinstance(value, str) and value.startswith("torch."):
        import torch

        if not hasattr(torch, value[len("torch."):]):
            raise ManifestError(f"{where}: torch has no {value[len('torch.'):]} ({value!r}).")
        return getattr(torch, value[len("torch."):])
    return value


def _budget(value: Any, where: str) -> Budget | None:
    if value is None or isinstance(value, Budget):
        return value
    if not isinstance(value, Mapping) or set(value) - {"evals", "seconds"}:
        raise ManifestError(f"{where}: budget is a table with evals and/or seconds, not {value!r}.")
    try:
        return Budget(**value)
    except (TypeError, ValueError) as error:
        raise ManifestError(f"{where}: budget {dict(value)}: {error}") from error


def _shown(value: Any) -> str:
    return str(value).replace("torch.", "")
