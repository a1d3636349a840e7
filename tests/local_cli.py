"""Helpers for tests that run the command line and README code as a user does: in
processes of their own, on ``local``, in a sandbox root of the test's own."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import managoat_sandbox as sandbox
from managoat_sandbox import config

ROOT = Path(__file__).resolve().parents[1]


def local_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a child process, with its own local root and this checkout on
    ``PYTHONPATH``; every sandbox left in the root is destroyed afterwards (their agents
    are long-lived processes). A generator for a fixture to wrap."""
    root = tmp_path / "root"
    environ = {
        **os.environ,
        "MANAGOAT_SANDBOX_LOCAL_ROOT": str(root),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "PYTHONPATH": str(ROOT),
    }
    environ.pop("MANAGOAT_SANDBOX_PROVIDER", None)
    config.configure("local", root=str(root))
    yield environ
    config.configure("local", root=str(root))
    for name in sandbox.list_all_names("local"):
        sandbox.destroy(sandbox.build_handle("local", name))


def run_cli(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m managoat_sandbox ARGV`` with no stdin."""
    return subprocess.run(
        [sys.executable, "-m", "managoat_sandbox", *argv],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def run_shell_lines(env: dict[str, str], lines: list[str], cwd: Path) -> str:
    """Run ``lines`` in one bash (so a variable one sets is there for the next) with
    ``managoat-sandbox`` meaning this checkout; fail at the first line that fails.
    Returns stdout."""
    script = [f'managoat-sandbox() {{ "{sys.executable}" -m managoat_sandbox "$@"; }}']
    for number, line in enumerate(lines):
        script += [line, f'[ $? -eq 0 ] || {{ echo "line {number} failed" >&2; exit 1; }}']
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, (lines, done.stdout, done.stderr)
    return done.stdout
