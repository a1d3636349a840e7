"""Every script in ``examples/`` runs, and shows what its docstring promises.

Each example runs as a subprocess (``sys.executable``), on the ``local``
provider with ``MANAGOAT_SANDBOX_LOCAL_ROOT`` set to a temporary directory, in
a temporary working directory, with a timeout; so an example that rots fails
here, not in a user's hands.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox import config

REPO = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
TIMEOUT = 60  # seconds per example: generous, each takes about a second


def run(
    tmp_path: pathlib.Path,
    *argv: str,
    env: dict[str, str] | None = None,
    cwd: pathlib.Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python *argv`` (from ``cwd``, else a scratch directory) on ``local``, its
    sandboxes under ``tmp_path``; ``env`` is added to this process's environment."""
    root = tmp_path / "sandboxes"
    root.mkdir(exist_ok=True)
    scratch = tmp_path / "cwd"
    scratch.mkdir(exist_ok=True)
    inherited = {key: value for key, value in os.environ.items() if key != "CI_FANOUT_COMMAND"}
    environment = {
        **inherited,
        "MANAGOAT_SANDBOX_LOCAL_ROOT": str(root),
        "PYTHONDONTWRITEBYTECODE": "1",  # no __pycache__ next to the examples
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, *argv],
        cwd=cwd or scratch,
        env=environment,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def explain(result: subprocess.CompletedProcess[str]) -> str:
    """The run's status and output, for an assertion's message."""
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


def left_behind(tmp_path: pathlib.Path) -> frozenset[str]:
    """The local sandboxes an example left under its root (it must destroy each)."""
    with config.override("local", root=str(tmp_path / "sandboxes")):
        names = sandbox.list_all_names("local")
    assert isinstance(names, frozenset)
    return names


def test_quickstart(tmp_path: pathlib.Path) -> None:
    result = run(tmp_path, str(EXAMPLES / "quickstart.py"))
    assert result.returncode == 0, explain(result)
    assert "stdin round trip -> ping" in result.stdout
    assert "attach replay -> exit 0" in result.stdout
    assert result.stdout.rstrip().endswith("destroyed")
    assert left_behind(tmp_path) == frozenset()


def test_ci_fanout_streams_every_job_s_lines_whole_and_exits_0(tmp_path: pathlib.Path) -> None:
    result = run(tmp_path, str(EXAMPLES / "ci_fanout.py"))
    assert result.returncode == 0, explain(result)
    lines = result.stdout.splitlines()
    for job in range(1, 5):
        for step in (1, 2, 3):
            assert f"[job {job}] step {step} of job {job}" in lines, explain(result)
        # Printed in two writes, the last line still comes out whole.
        assert f"[job {job}] job {job}: all steps done" in lines, explain(result)
        assert f"job {job}: exit 0" in lines
    assert "all 4 jobs passed" in lines
    assert left_behind(tmp_path) == frozenset()


def test_ci_fanout_exits_nonzero_when_a_job_s_command_fails(tmp_path: pathlib.Path) -> None:
    failing = 'echo "testing $JOB"; echo "job $JOB broke" >&2; [ "$JOB" != 3 ]'
    result = run(tmp_path, str(EXAMPLES / "ci_fanout.py"), env={"CI_FANOUT_COMMAND": failing})
    assert result.returncode == 1, explain(result)
    lines = result.stdout.splitlines()
    assert "[job 3 stderr] job 3 broke" in lines
    assert "job 3: exit 1" in lines
    assert "job 1: exit 0" in lines
    assert "1 of 4 jobs failed" in lines
    assert left_behind(tmp_path) == frozenset()


def test_streaming(tmp_path: pathlib.Path) -> None:
    result = run(tmp_path, str(EXAMPLES / "streaming.py"))
    assert result.returncode == 0, explain(result)
    out = result.stdout
    assert "callback: command ended with Exit(" in out and "code=0)" in out, explain(result)
    assert "queue got: echo: HELLO" in out and "queue got: echo: WORLD" in out
    assert "queue: exit 0" in out
    assert "session line 3" in out and "replay: exit 7" in out, explain(result)
    assert left_behind(tmp_path) == frozenset()


def test_workspace_downloads_the_test_report(tmp_path: pathlib.Path) -> None:
    result = run(tmp_path, str(EXAMPLES / "workspace.py"))
    assert result.returncode == 0, explain(result)
    out = result.stdout
    assert "uploaded 2 files" in out
    assert "upload: 2 files" in out and "download: 1 files" in out  # the progress callback
    assert "--- reports/unittest.txt ---" in out
    assert "Ran 2 tests" in out and "\nOK" in out, explain(result)
    assert left_behind(tmp_path) == frozenset()


def test_vendor_sdk_on_emulator_passes_under_pytest(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("e2b")
    example = "examples/test_vendor_sdk_on_emulator.py"  # as its docstring runs it
    result = run(tmp_path, "-m", "pytest", "-q", "-p", "no:cacheprovider", example, cwd=REPO)
    assert result.returncode == 0, explain(result)
    assert "3 passed" in result.stdout, explain(result)


def test_fourth_adapter_passes_the_conformance_suite(tmp_path: pathlib.Path) -> None:
    result = run(tmp_path, str(EXAMPLES / "fourth_adapter.py"))
    assert result.returncode == 0, explain(result)
    # unittest reports on stderr: "Ran N tests", then "OK" (with the skipped count).
    assert "\nOK" in result.stderr, explain(result)
    assert "FAIL" not in result.stderr and "ERROR" not in result.stderr
