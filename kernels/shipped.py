"""The kernel suite's complete spaces recorded on an NVIDIA H200, shipped inside the package.

``kernels/h200/`` holds one Kernel Tuner cache file per kernel and shape (every config of the
kernel's Space: median, 20th and 80th percentile times, cold compile time, status, and the
output's relative error against the float32 reference) and ``index.json`` (the GPU, the software
versions, and per space its shape, counts, best time and the PyTorch equivalent's time measured
in the same run). ``experiments/record_spaces.py`` recorded and exported them. They let anyone
replay and compare search strategies on real H200 measurements without a GPU.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tunekit.recorded import RecordedSpace, read_space

DIRECTORY = Path(__file__).with_name("h200")


def index() -> dict[str, Any]:
    """``index.json``: ``device``, ``torch``, ``triton`` and ``spaces`` (one dict per file)."""
    return json.loads((DIRECTORY / "index.json").read_text())


def paths(kernel: str | None = None) -> list[Path]:
    """The shipped files, in the index's order; only ``kernel``'s where given."""
    return [DIRECTORY / row["file"] for row in index()["spaces"] if kernel in (None, row["kernel"])]


def load(kernel: str, shape: str) -> RecordedSpace:
    """The recorded space of ``kernel`` at ``shape`` (a name of the index, e.g. ``"square"``)."""
    rows = index()["spaces"]
    for row in rows:
        if (row["kernel"], row["shape"]) == (kernel, shape):
            return read_space(DIRECTORY / row["file"], name=f"h200/{kernel}-{shape}")
    known = ", ".join(f"{r['kernel']}/{r['shape']}" for r in rows)
    raise KeyError(f"no shipped space for {kernel}/{shape}; the shipped ones are {known}")
