"""Every code example of the documentation runs, as a reader would run it.

Each page's ``python`` and ``bash`` blocks run in document order in a fresh directory of their
own: a ``python`` block as a script (``python block.py``: Triton needs the kernel's source in a
file), a ``bash`` block under ``bash -euo pipefail``, both under the Triton interpreter on the CPU
with the default store outside it (as a user's cache directory is). A block whose fence names a file (``title="add.py"``,
``title="manifest.toml"``) is written to that file instead of run, for the later blocks to import
or read. A block that
cannot run on a CPU machine in CI (it needs a GPU, the network, or hours) is preceded by an italic
line that tells the reader why, starting with "Needs", "Takes" or "Runs" (``*Needs a GPU: ...*``,
``*Takes hours ...*``); this test checks that only the results pages, the recorded spaces' page and
the set-up commands have such blocks.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # minutes: every page's examples, Triton kernels included

DOCS = Path(__file__).resolve().parents[1] / "docs"
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```|~~~)(?P<lang>[\w-]*)(?P<info>[^\n]*)\n(?P<body>.*?)"
                   r"^(?P=indent)(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL)
#: Languages a block may have: run (python, bash), or shown only: output (text) and a file's
#: contents with ``title=`` (any language). Anything else fails, so no example hides behind a name.
RUN = ("python", "bash")
SKIP = re.compile(r"^\*(?P<reason>(?:Needs|Takes|Runs) .+)\*$")  # the reader sees why a block is not run
TITLE = re.compile(r'title="(?P<name>[^"]+)"')
#: Pages where blocks may go unrun: the measured results (GPU runs and hour-long replays) and the
#: start page's set-up commands (they install packages or serve the site).
MAY_SKIP = {"index.md", "results/learned-search.md", "results/leave-family-out.md", "results/h200.md",
            "research/h200-spaces.md"}


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    code: str
    file: str | None  # written to this file instead of run
    skipped: str | None  # the reason it is not run


def blocks_of(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        if match["lang"] not in RUN and not TITLE.search(match["info"]):
            assert match["lang"] == "text", (f"{page.name}:{text[: match.start()].count(chr(10)) + 1}: a "
                                             f"{match['lang'] or 'plain'} block is neither run nor output (text)")
            continue
        before = text[: match.start()].rstrip().rsplit("\n", 1)[-1].strip()
        skip = SKIP.search(before)
        title = TITLE.search(match["info"])
        found.append(Block(str(page.relative_to(DOCS)), text[: match.start()].count("\n") + 1, match["lang"],
                           textwrap.dedent(match["body"]), title["name"] if title else None,
                           skip["reason"] if skip else None))
    return found


PAGES = sorted(p for p in DOCS.rglob("*.md") if "reference" not in p.parts and not p.name.startswith("_")
               and "_raw" not in p.parts)


def test_the_pages_have_examples_and_unrun_ones_say_why():
    every = [block for page in PAGES for block in blocks_of(page) if block.language in RUN]
    assert len(every) >= 20, "the guides lost their examples"
    for block in every:
        if block.skipped:
            assert block.page in MAY_SKIP, f"{block.page}:{block.line} is not run ({block.skipped}); guides must run"


def test_every_file_a_page_writes_is_used_by_a_later_block():
    """A titled block is written, not run: a later block of its page must import, run or read it."""
    for page in PAGES:
        blocks = blocks_of(page)
        for position, block in enumerate(blocks):
            if block.file:
                name = Path(block.file)
                later = "\n".join(b.code for b in blocks[position + 1:] if not b.file and not b.skipped)
                assert name.name in later or re.search(rf"\b(import|from) {name.stem}\b", later), (
                    f"{block.page}:{block.line}: {block.file} is written but no later block uses it")


def test_the_readme_examples_are_python():
    """The README's fragments do not run (their kernels' bodies are elided) but parse."""
    import ast

    text = (DOCS.parent / "README.md").read_text()
    blocks = [m["body"] for m in FENCE.finditer(text) if m["lang"] == "python"]
    assert blocks
    for body in blocks:
        ast.parse(textwrap.dedent(body))


@pytest.mark.parametrize("page", [p for p in PAGES if any(not b.skipped for b in blocks_of(p))],
                         ids=lambda p: str(p.relative_to(DOCS)))
def test_every_example_on_the_page_runs(page, tmp_path):
    work = tmp_path / "work"  # the default store lives outside it, as in a user's cache directory
    work.mkdir()
    env = dict(os.environ, TRITON_INTERPRET="1", TUNEKIT_STORE=str(tmp_path / "user-cache" / "tunekit.db"),
               PYTHONPATH=os.pathsep.join([str(work), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               PYTHONUNBUFFERED="1")
    env.pop("TUNEKIT_MODE", None)
    for number, block in enumerate(blocks_of(page)):
        if block.skipped:
            continue
        if block.file:
            target = work / block.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.code)
            continue
        if block.language == "python":
            script = work / f"_block_{number}.py"
            script.write_text(block.code)
            command = [sys.executable, str(script)]
        else:
            command = ["bash", "-euo", "pipefail", "-c", block.code]
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (f"{block.page}:{block.line} ({block.language}) exited {done.returncode}\n"
                                      f"--- code\n{block.code}\n--- stdout\n{done.stdout[-3000:]}\n"
                                      f"--- stderr\n{done.stderr[-5000:]}")
