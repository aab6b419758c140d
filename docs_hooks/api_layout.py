"""MkDocs hook: lay out the installed package's tree for mkdocstrings.

``strategies/``, ``perfmodels/`` and ``kernels/`` live at the repository's top level and install as
``tunekit.strategies``, ``tunekit.perfmodels`` and ``tunekit.kernels`` (pyproject's package-dir).
Griffe reads sources from search paths, where ``./tunekit`` lacks them; so at start-up this
links ``build/api-src/tunekit/`` to ``tunekit/``'s files and to the three plugin packages, and
mkdocstrings reads from there (``paths`` in mkdocs.yml).
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = {"strategies": "strategies", "perfmodels": "perfmodels", "kernels": "kernels"}


def on_startup(command, dirty, **kwargs) -> None:  # before mkdocstrings checks its search paths
    tree = ROOT / "build" / "api-src" / "tunekit"
    if tree.exists():
        foreign = [p.name for p in tree.iterdir() if not p.is_symlink()]
        if foreign:
            raise SystemExit(f"{tree} holds files this hook did not make ({', '.join(foreign[:5])}); move them")
        shutil.rmtree(tree)  # links only: what this hook made
    tree.mkdir(parents=True)
    for entry in (ROOT / "tunekit").iterdir():
        if entry.name != "__pycache__":
            (tree / entry.name).symlink_to(entry)
    for name, source in PLUGINS.items():
        (tree / name).symlink_to(ROOT / source, target_is_directory=True)
