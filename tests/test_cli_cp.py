"""``managoat-sandbox cp``: a file or tree between this machine and a sandbox, like
``docker cp``; a progress line on a terminal only, totals under ``--json``."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox import config
from managoat_sandbox._cli.transfer import progress_text, split_remote
from managoat_sandbox.cli import main
from managoat_sandbox.testing import Fake
from managoat_sandbox.types import TransferProgress


@pytest.fixture
def fake() -> Iterator[Fake]:
    instance = Fake()
    config.configure(adapters={"fake": instance})
    sandbox.create("fake", "box")
    yield instance
    instance.reset()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_bytes(b"print(1)\n")
    (root / "run.sh").write_bytes(b"#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    return root


class TerminalStderr(io.StringIO):
    def isatty(self) -> bool:
        return True


def cli(*argv: str) -> int:
    return main(["-p", "fake", *argv])


def test_cp_uploads_and_downloads_a_tree_and_reports_totals_under_json(
    fake: Fake, project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("cp", str(project), "box:/work/project") == 0
    assert fake.file("box", "/work/project/src/main.py") == b"print(1)\n"
    back = tmp_path / "back"
    assert cli("cp", "--json", "box:/work/project", str(back)) == 0
    document = json.loads(capsys.readouterr().out)
    assert document == {
        "ok": True,
        "action": "download",
        "provider": "fake",
        "name": "box",
        "local": str(back),
        "files": 2,
        "bytes": len(b"print(1)\n") + len(b"#!/bin/sh\n"),
    }
    assert (back / "src" / "main.py").read_bytes() == b"print(1)\n"
    assert (back / "run.sh").stat().st_mode & 0o777 == 0o755


def test_cp_shows_a_progress_line_on_a_terminal_and_clears_it(
    fake: Fake, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    err = TerminalStderr()
    monkeypatch.setattr(sys, "stderr", err)
    assert cli("cp", str(project), "box:/work/project") == 0
    shown = err.getvalue()
    assert "\r[####################] 100%  19 B, 2 files of 19 B\x1b[K" in shown
    assert shown.endswith("\r\x1b[K")


def test_cp_prints_nothing_on_stderr_when_it_is_not_a_terminal(
    fake: Fake, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("cp", str(project), "box:/work/project") == 0
    captured = capsys.readouterr()
    assert "\r" not in captured.err and "[" not in captured.err
    assert captured.out == ""


@pytest.mark.parametrize("operands", [("a", "b"), ("box:/a", "box:/b")])
def test_cp_needs_exactly_one_remote_operand(
    fake: Fake, operands: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("cp", *operands) == 2
    assert "exactly one BOX:PATH operand" in capsys.readouterr().err


def test_cp_of_a_missing_local_path_is_one_line(
    fake: Fake, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope"
    assert cli("cp", str(missing), "box:/work/x") == 1
    assert capsys.readouterr().err.endswith(f"error: {missing}: No such file or directory\n")


def test_cp_of_a_missing_remote_path_is_not_found(
    fake: Fake, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("cp", "box:/work/nope", str(tmp_path / "x")) == 1
    assert "NotFound: ('path', '/work/nope')" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("operand", "remote"),
    [
        ("box:/tmp/x", ("box", "/tmp/x")),
        ("./a:b", None),
        ("/abs/a:b", None),
        (":/x", None),
        ("plain", None),
    ],
)
def test_an_operand_is_remote_only_with_a_name_before_its_first_colon(
    operand: str, remote: tuple[str, str] | None
) -> None:
    found = split_remote(operand)
    assert (None if found is None else tuple(found)) == remote


def test_the_progress_text_shows_a_bar_only_with_a_total() -> None:
    assert progress_text(TransferProgress(1, 2048)) == "2.0 KiB, 1 file"
    assert progress_text(TransferProgress(2, 512, 4, 1024)).startswith(
        "[##########..........]  50%"
    )
