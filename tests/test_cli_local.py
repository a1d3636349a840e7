"""The command line as a user runs it: separate processes on ``local``, whose
sandboxes persist across them, in a sandbox root of the test's own."""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox._engine import isolation

from .conftest import wait_until
from .local_cli import ROOT, local_env, run_cli, run_shell_lines


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    yield from local_env(tmp_path)


def running(marker: str) -> bool:
    """Whether a process whose command line is ``sleep <marker>`` is alive (sandboxed
    processes are visible in the host's /proc, whatever their PID namespace)."""
    wanted = f"sleep\0{marker}\0".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes() == wanted:
                    return True
            except OSError:  # it ended while we looked
                continue
    return False


def test_an_exec_timeout_kills_the_command_and_leaves_no_session(env: dict[str, str]) -> None:
    assert run_cli(env, "create", "box").returncode == 0
    assert run_cli(env, "exec", "box", "--", "true").returncode == 0  # the agent is up
    marker = f"300.{secrets.randbelow(10**9)}"
    cli = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "managoat_sandbox",
            "exec",
            "--timeout",
            "2",
            "box",
            "--",
            "sleep",
            marker,
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert wait_until(lambda: running(marker), timeout=30)
        out, err = cli.communicate(timeout=60)
    finally:
        cli.kill()
    assert cli.returncode == 124
    assert (out, err) == (
        "",
        "managoat-sandbox: error: Unavailable: ('exec_timeout', 2.0) (no exit within 2 s)\n",
    )
    assert wait_until(lambda: not running(marker), timeout=30)
    assert sandbox.list_sessions(sandbox.build_handle("local", "box")) == []
    listed = run_cli(env, "sessions", "box")
    assert (listed.returncode, listed.stdout) == (0, "")


def test_read_and_ls_give_back_what_write_and_a_command_left(
    env: dict[str, str], tmp_path: Path
) -> None:
    data = bytes(range(256)) * 64 + b"\x1b[2J\x00"
    assert run_cli(env, "create", "box").returncode == 0
    wrote = subprocess.run(
        [sys.executable, "-m", "managoat_sandbox", "write", "box", "/tmp/d/every-byte.bin"],
        env=env,
        cwd=ROOT,
        input=data,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert wrote.returncode == 0, wrote.stderr
    fifo = sandbox.host_path(sandbox.build_handle("local", "box"), "/tmp/d/fifo")
    assert run_cli(env, "exec", "box", "--", "mkfifo", fifo).returncode == 0
    read = subprocess.run(
        [sys.executable, "-m", "managoat_sandbox", "read", "box", "/tmp/d/every-byte.bin"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert (read.returncode, read.stdout, read.stderr) == (0, data, b"")
    assert (
        run_cli(
            env, "read", "box", "/tmp/d/every-byte.bin", "-o", str(tmp_path / "copy")
        ).returncode
        == 0
    )
    assert (tmp_path / "copy").read_bytes() == data
    refused = run_cli(env, "read", "box", "/tmp/d/fifo")
    assert refused.returncode == 1
    assert refused.stderr.startswith("managoat-sandbox: error: Invalid: ('path', 'not_a_file')")
    listed = run_cli(env, "ls", "box", "/tmp/d")
    assert listed.returncode == 0
    rows = [line.split("\t") for line in listed.stdout.splitlines()]
    assert [(row[0], row[2], row[4]) for row in rows] == [
        ("file", str(len(data)), "every-byte.bin"),
        ("other", "0", "fifo"),
    ]


# -- the examples of --help, run as printed ---------------------------------------

SUBCOMMANDS = [
    "create",
    "get",
    "list",
    "suspend",
    "resume",
    "exec",
    "spawn",
    "attach",
    "sessions",
    "terminate",
    "policy",
    "url",
    "write",
    "read",
    "ls",
    "cp",
    "checkpoint",
    "restore",
    "destroy",
]


def examples(help_text: str) -> list[str]:
    """The lines of the ``examples`` section of a help text, as printed."""
    section = help_text.split("\nexamples", 1)[1].split(":\n", 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in section.splitlines() if line.strip()]


def test_the_top_level_help_examples_run_as_printed(env: dict[str, str], tmp_path: Path) -> None:
    shown = run_cli(env, "--help")
    lines = examples(shown.stdout)
    assert lines[0] == "managoat-sandbox create box"
    assert "hello\nstatus 3\n" in run_shell_lines(env, lines, tmp_path)


@pytest.mark.parametrize("subcommand", SUBCOMMANDS)
def test_each_subcommands_help_examples_run_as_printed(
    env: dict[str, str], tmp_path: Path, subcommand: str
) -> None:
    if subcommand == "policy" and not isolation.support().available:
        pytest.skip("network policies need an isolated local sandbox")
    lines = examples(run_cli(env, subcommand, "--help").stdout)
    assert any(f"managoat-sandbox {subcommand} " in line for line in lines)
    setup = [] if subcommand == "create" else ["managoat-sandbox create box"]
    run_shell_lines(env, setup + lines, tmp_path)


def test_the_cli_exec_leaves_no_session_and_spawn_one_as_the_local_page_says(
    env: dict[str, str],
) -> None:
    page = " ".join((Path(ROOT) / "docs" / "local-sandbox.md").read_text().split())
    assert "The CLI's `exec` is the library's `exec`: on `local` it leaves no session" in page
    assert "The CLI's `spawn` leaves a session like any other spawn" in page
    assert run_cli(env, "create", "box").returncode == 0
    ran = run_cli(env, "exec", "box", "--", "sh", "-c", "echo hi; exit 3")
    assert (ran.returncode, ran.stdout) == (3, "hi\n")
    assert run_cli(env, "sessions", "box").stdout == ""
    spawned = run_cli(env, "spawn", "box", "--", "echo", "spawned")
    assert spawned.returncode == 0
    listed = run_cli(env, "sessions", "box").stdout.splitlines()
    assert len(listed) == 1 and listed[0].endswith("\techo spawned")
