"""The README runs as written: every ```python block, and the shell blocks that drive the
command line, each in a process of its own on ``local`` (and the built-in ``fake``).

A block that cannot run on its own (it needs your own adapter package, say) says so on
its first line, ``# not run: <why>``, where a reader sees it too; few may.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from .local_cli import ROOT, local_env, run_shell_lines

README = (ROOT / "README.md").read_text(encoding="utf-8")
NOT_RUN = "# not run:"
MOST_NOT_RUN = 2

#: A fenced block, indented or not (inside a list item): its indent, language and text.
FENCE = re.compile(
    r"^(?P<indent>[ ]*)```(?P<lang>\w*)\n(?P<body>.*?)^(?P=indent)```$", re.MULTILINE | re.DOTALL
)


def blocks(language: str) -> list[str]:
    return [
        textwrap.dedent(match["body"])
        for match in FENCE.finditer(README)
        if match["lang"] == language
    ]


PYTHON = blocks("python")
RUNNABLE = [block for block in PYTHON if not block.startswith(NOT_RUN)]
CLI = [block for block in blocks("sh") if "managoat-sandbox " in block]


def label(block: str) -> str:
    return block.splitlines()[0][:40]


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    yield from local_env(tmp_path)


def test_the_readme_has_code_and_few_blocks_that_do_not_run() -> None:
    assert len(RUNNABLE) >= 4
    assert len(PYTHON) - len(RUNNABLE) <= MOST_NOT_RUN
    assert CLI


@pytest.mark.parametrize("block", RUNNABLE, ids=label)
def test_each_python_block_runs(block: str, env: dict[str, str], tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", block],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("block", CLI, ids=label)
def test_each_command_line_block_runs(block: str, env: dict[str, str], tmp_path: Path) -> None:
    lines = [line for line in block.splitlines() if line.strip()]
    run_shell_lines(env, lines, tmp_path)
