"""The frozen corpus of fully recorded spaces that search designs are chosen and judged on.

A corpus is a JSON manifest (``experiments/corpus/v1.json``): per space its file, where that file
lives (``shared``: the community's Kernel Tuner files, ``$TUNEKIT_SHARED_SPACES``; ``shipped``: the
H200 spaces inside tunekit; ``corpus``: the H200 spaces recorded for v1, in ``corpus/h200/``;
``heldout``: those recorded for v2 after the default search's design was chosen, in
``corpus/h200-heldout/``), its kernel family and the digest of what it measured (``RecordedSpace.digest``).
``load`` refuses a space whose digest changed, so a corpus version means the same measurements
wherever it is read. A new space makes a new version; a version, once results were reported on it,
is never edited.

Families group the spaces of one kernel implementation (its shapes, GPUs and re-measurements):
leaving a family out leaves out everything a design could have learned about that kernel.

    python experiments/corpus.py freeze experiments/corpus/v3.json --previous experiments/corpus/v2.json
    python experiments/corpus.py show experiments/corpus/v1.json     # families and counts
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tunekit.kernels import shipped
from tunekit.recorded import RecordedSpace, read_space

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("TUNEKIT_SHARED_SPACES", HERE.parents[1] / "shared" / "spaces")) / "kerneltuner"
#: The H200 spaces recorded for the corpus (experiments/run_h200_record_corpus.sh).
RECORDED = HERE / "corpus" / "h200"
#: The H200 spaces of the families recorded for v2 after the default search's design was chosen.
RECORDED_HELD_OUT = HERE / "corpus" / "h200-heldout"

#: Families of the community's files, by their kernel's name.
SHARED_FAMILIES = {"convolution_kernel": "kt-convolution", "Xgemm": "kt-gemm", "cn_pnpoly": "kt-pnpoly"}
#: Families of the shipped H200 spaces, by their kernel module: one implementation's variants together.
SHIPPED_FAMILIES = {"matmul": "triton-gemm", "matmul_hopper": "triton-gemm", "matmul_splitk": "triton-gemm",
                    "attention": "triton-attention", "attention_hopper": "triton-attention",
                    "softmax": "triton-softmax", "rmsnorm": "triton-rmsnorm"}


@dataclass(frozen=True)
class Entry:
    """One space of a corpus."""

    name: str
    root: str
    file: str
    family: str
    digest: str
    #: Whether the file's compile and benchmark times are real costs, so that scores over
    #: simulated seconds mean something there (v1's own recordings: warm-cache compile times).
    seconds: bool = True

    def path(self, manifest: Path) -> Path:
        base = {"shared": SHARED, "shipped": shipped.DIRECTORY, "corpus": RECORDED,
                "heldout": RECORDED_HELD_OUT}[self.root]
        return base / self.file


def discover() -> list[tuple[str, str, str, str]]:
    """(name, root, file, family) of every space there is to freeze: the community's files (the T4
    copy of one of them left out), the shipped H200 spaces, and the corpus's own recordings (v1's
    and the held-out families'), whose family is their kernel module."""
    if not any(SHARED.rglob("*.json.gz")):
        raise SystemExit(f"no community spaces under {SHARED}: set TUNEKIT_SHARED_SPACES to the folder holding "
                         "kerneltuner/")
    found = []
    for path in sorted(SHARED.rglob("*.json.gz")):
        if "t4_example" in path.parts:
            continue
        space = read_space(path)
        relative = path.relative_to(SHARED).as_posix()
        found.append((relative.removesuffix(".json.gz"), "shared", relative, SHARED_FAMILIES[space.kernel_name]))
    for row in shipped.index()["spaces"]:
        found.append((f"h200/{row['kernel']}-{row['shape']}", "shipped", row["file"], SHIPPED_FAMILIES[row["kernel"]]))
    for root, folder in (("corpus", RECORDED), ("heldout", RECORDED_HELD_OUT)):
        for path in sorted(folder.glob("*.json.gz")):
            module = path.name.split("-")[0]  # the kernel module, as record_spaces.py names the files
            found.append((f"h200/{path.name.removesuffix('.json.gz')}", root, path.name,
                          f"triton-{module.replace('_', '-')}"))
    return found


def freeze(manifest: Path, previous: Path | None = None) -> list[Entry]:
    """Write a new corpus version at ``manifest`` (never over an existing one). A space of the
    ``previous`` version that measured the same keeps what that version says of it (``seconds``:
    whether its costs are real, which the files cannot say)."""
    if manifest.exists():
        raise SystemExit(f"{manifest} exists: a corpus version is never rewritten; freeze a new version")
    known = {(e.name, e.digest): e for e in entries(previous)} if previous is not None else {}
    frozen = []
    for name, root, file, family in discover():
        digest = read_space(Entry(name, root, file, family, "").path(manifest)).digest
        earlier = known.get((name, digest))
        frozen.append(Entry(name, root, file, family, digest, earlier.seconds if earlier else True))
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"version": manifest.stem, "spaces": [vars(e) for e in frozen]}, indent=1) + "\n")
    return frozen


def load(manifest: Path | str, verify: bool = True) -> list[tuple[Entry, RecordedSpace]]:
    """The corpus's spaces, each read and named by its entry; with ``verify``, a ``SystemExit``
    naming every space whose file is missing or whose measurements differ from the frozen ones."""
    manifest = Path(manifest)
    listed = entries(manifest)
    spaces, problems = [], []
    repeated = [name for name, count in Counter(e.name for e in listed).items() if count > 1]
    if repeated:
        problems.append(f"names given to more than one space: {', '.join(repeated)}")
    for entry in listed:
        path = entry.path(manifest)
        if not path.exists():
            problems.append(f"{entry.name}: {path} is missing")
            continue
        space = read_space(path, name=entry.name)
        if verify and space.digest != entry.digest:
            problems.append(f"{entry.name}: {path} measures something else than the frozen corpus")
        spaces.append((entry, space))
    if problems:
        raise SystemExit(f"corpus {manifest} cannot be used as frozen:\n  " + "\n  ".join(problems))
    return spaces


def entries(manifest: Path | str) -> list[Entry]:
    """The manifest's entries (names, families, files, digests), without reading the spaces."""
    return [Entry(**row) for row in json.loads(Path(manifest).read_text())["spaces"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("freeze", "show"))
    parser.add_argument("manifest", type=Path)
    parser.add_argument("--previous", type=Path, help="freeze: the version this one follows (its flags carry over)")
    args = parser.parse_args()
    if args.command == "freeze":
        listed = freeze(args.manifest, args.previous)
    else:
        listed = [entry for entry, _ in load(args.manifest)]
    families = Counter(entry.family for entry in listed)
    print(f"{len(listed)} spaces in {len(families)} families:")
    for family, count in sorted(families.items()):
        print(f"  {family}: {count}")


if __name__ == "__main__":
    sys.exit(main())
