"""The journaling shim, the replayer and the session lister, run by real bash."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from managoat_sandbox.providers.e2b import shim

from ..conftest import wait_until

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def env(home: Path) -> dict[str, str]:
    return {"HOME": str(home), "PATH": os.environ["PATH"]}


def bash(script: str, env: dict[str, str], **kwargs: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["bash", "-c", script],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kwargs,
    )  # type: ignore[call-overload]


def processes_mentioning(text: str) -> dict[int, bytes]:
    """Live processes whose command line contains ``text``: pid → command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if text.encode() in cmdline:
                found[int(entry.name)] = cmdline
    return found


@pytest.mark.parametrize("arg", ["plain", "a'b", "$HOME", "`id`", "x\ny", '"q"', "", "*"])
def test_quote_is_read_back_verbatim(arg: str, env: dict[str, str]) -> None:
    out = subprocess.run(
        ["bash", "-c", f"printf %s {shim.quote(arg)}"], env=env, capture_output=True, check=True
    ).stdout
    assert out == arg.encode()


def test_the_shim_passes_output_through_journals_it_and_keeps_the_code(
    home: Path, env: dict[str, str]
) -> None:
    tag = shim.new_tag()
    script = shim.script(
        tag,
        "bash",
        ["-c", "read x; echo out:$x:$K:$HOME; echo err >&2; exit 7"],
        {"K": "v", "HOME": "/elsewhere"},
    )
    process = bash(script, env)
    out, err = process.communicate(b"in\n", timeout=10)
    assert (process.returncode, out, err) == (7, b"out:in:v:/elsewhere\n", b"err\n")
    base = home / ".fountain" / tag
    assert Path(f"{base}.out").read_bytes() == out
    assert Path(f"{base}.err").read_bytes() == err
    assert shim.parse_exit(Path(f"{base}.exit").read_bytes()) == 7
    assert not Path(f"{base}.rc").exists()


@pytest.mark.skipif(shutil.which("setsid") is None, reason="no setsid here")
def test_a_command_signalling_its_own_group_leaves_the_shim_to_journal_it(
    home: Path, env: dict[str, str]
) -> None:
    """``kill 0`` from the command reaches its own group only: the tees forward and
    journal what it printed, the shim records 137 and nothing is added to its stderr.
    (The shim runs in a session of its own, so a broken shim's signal reaches no one
    else.)"""
    tag = shim.new_tag()
    script = shim.script(tag, "bash", ["-c", "echo up; kill -KILL 0"])
    process = bash(script, env, start_new_session=True)
    out, err = process.communicate(timeout=10)
    assert (process.returncode, out, err) == (137, b"up\n", b"")
    base = home / ".fountain" / tag
    assert Path(f"{base}.out").read_bytes() == b"up\n"
    assert shim.parse_exit(Path(f"{base}.exit").read_bytes()) == 137


@pytest.mark.parametrize("cmd", ["no-such-command-mg", "/no/such/program"])
def test_a_command_not_found_is_told_by_the_shell_not_by_setsid(
    env: dict[str, str], cmd: str
) -> None:
    process = bash(shim.script(shim.new_tag(), cmd, ["x"]), env)
    _, err = process.communicate(timeout=10)
    assert process.returncode == 127
    assert cmd.encode() in err and b"setsid" not in err, err


def test_the_replayer_replays_from_byte_zero_tails_and_ends_with_the_code(
    env: dict[str, str],
) -> None:
    tag = shim.new_tag()
    spawned = bash(shim.script(tag, "bash", ["-c", "echo first; echo e1 >&2; cat; exit 3"]), env)
    assert spawned.stdout is not None and spawned.stdin is not None
    assert spawned.stdout.readline() == b"first\n"
    replayer = bash(shim.replayer(tag), env)
    assert replayer.stdout is not None
    assert replayer.stdout.readline() == b"first\n"
    spawned.stdin.write(b"later\n")
    spawned.stdin.close()
    assert replayer.stdout.readline() == b"later\n"
    assert spawned.wait(10) == 3
    assert replayer.wait(10) == 3
    assert replayer.stdout.read() == b""
    assert replayer.stderr is not None and replayer.stderr.read() == b"e1\n"
    spawned.stdout.close()
    assert spawned.stderr is not None
    spawned.stderr.close()


def test_a_killed_replayer_leaves_no_process_behind(home: Path, env: dict[str, str]) -> None:
    tag = shim.new_tag()
    spawned = bash(shim.script(tag, "cat", []), env)
    # attach replays only sessions whose journal exists: wait for the shim to make it
    assert wait_until((home / ".fountain" / f"{tag}.cmd").exists, timeout=5)
    replayer = bash(shim.replayer(tag), env)
    assert wait_until(lambda: _followers(tag) != [], timeout=5)
    replayer.send_signal(signal.SIGKILL)
    replayer.wait(5)
    assert wait_until(lambda: _followers(tag) == [], timeout=5), _followers(tag)
    for stream in (spawned.stdin, replayer.stdout, replayer.stderr):
        assert stream is not None
        stream.close()
    assert spawned.wait(10) == 0
    assert spawned.stdout is not None and spawned.stderr is not None
    spawned.stdout.close()
    spawned.stderr.close()


def _followers(tag: str) -> list[int]:
    """The replayer's ``tail`` processes of the session."""
    return [
        pid
        for pid, cmdline in processes_mentioning(f"{tag}.out").items()
        if cmdline.startswith(b"tail")
    ]


def test_the_lister_lists_journaled_sessions_only(home: Path, env: dict[str, str]) -> None:
    tags = [shim.new_tag() for _ in range(2)]
    for tag in tags:
        bash(shim.script(tag, "echo", ["a b"]), env).communicate(timeout=10)
    (home / ".fountain" / "stray.txt").write_text("x")
    out = subprocess.run(
        ["bash", "-c", shim.lister()], env=env, capture_output=True, check=True
    ).stdout
    sessions = shim.parse_listing(out)
    assert [s.id for s in sessions] == sorted(tags)
    assert all(s.command == "echo a b" and s.created_at is not None for s in sessions)


def test_the_lister_of_a_sandbox_without_journal_is_empty(env: dict[str, str]) -> None:
    out = subprocess.run(["bash", "-c", shim.lister()], env=env, capture_output=True, check=False)
    assert (out.returncode, out.stdout) == (0, b"")


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"9\n", 9),
        (b" 0 ", 0),
        (b"-1\n", -1),
        (b"bad", None),
        (b"", None),
        (None, None),
        (b"1 2", None),
    ],
)
def test_parse_exit(data: bytes | None, code: int | None) -> None:
    assert shim.parse_exit(data) == code


def test_tags_are_unique_session_ids() -> None:
    tags = {shim.new_tag() for _ in range(1000)}
    assert len(tags) == 1000
    assert all(shim.is_tag(tag) for tag in tags)
    assert not shim.is_tag("other-1") and not shim.is_tag("fountain-a/b")
