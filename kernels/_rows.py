"""What the row-wise kernels (softmax, RMSNorm) share: their Space and their launch grid."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import triton

from tunekit.space import Space


def fits_registers(config: Mapping[str, Any]) -> bool:
    """Keep one tile within what a program can hold: at most 64 elements per thread."""
    return config["BLOCK_N"] * config["ROWS"] <= 64 * 32 * config["num_warps"]


def space() -> Space:
    """Column tile width, rows per program, warps and stages: 424 configs."""
    return Space(
        BLOCK_N=[128, 256, 512, 1024, 2048, 4096, 8192], ROWS=[1, 2, 4, 8],
        num_warps=[1, 2, 4, 8, 16], num_stages=[1, 2, 3, 4],
        constraints=[fits_registers],
    )


def grid(n_rows: int):
    return lambda meta: (triton.cdiv(n_rows, meta["ROWS"]),)
