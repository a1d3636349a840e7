"""The escape battery: what a hostile command tries, and that each attempt fails.

Every test here attacks an isolated sandbox and is skipped, never run, where the
host cannot isolate: an attack that escapes would really happen. Every attack
aims only at this test's own temporary directory (never at ``/`` or a real host
path), so even an escape could not damage the machine.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from managoat_sandbox._engine import launch
from managoat_sandbox.frames import Exit
from managoat_sandbox.providers.local import Local
from managoat_sandbox.testing.mailbox import Mailbox, is_exit, is_stdout
from managoat_sandbox.types import Handle

from ..conftest import wait_until
from .conftest import agent_pid, namespace_members, requires_isolation

pytestmark = requires_isolation

SECRET = "canary-caller-secret-7f3a"


def sh(local: Local, handle: Handle, script: str, **kwargs: Any) -> tuple[str, int]:
    output, code = local.exec(handle, "bash", ["-c", script], stderr_to_stdout=True, **kwargs)
    return output.decode(errors="replace"), code


def streams(local: Local, handle: Handle, script: str) -> tuple[str, str]:
    """The script's stdout and stderr, kept apart.

    Merged streams join in arrival order, which two pipes do not fix: a test that
    asserts how the output ends reads stdout alone.
    """
    result = local.exec(handle, "bash", ["-c", script])
    return result.output.decode(errors="replace"), result.stderr.decode(errors="replace")


def finishes(call: Callable[[], object], within: float = 20.0) -> bool:
    """Whether ``call`` returns (or raises) within ``within`` seconds, waited on an event."""
    done = threading.Event()

    def run() -> None:
        try:
            call()
        except Exception:
            pass
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    return done.wait(within)


@pytest.fixture
def target(local: Local) -> Handle:
    return local.create("target")


@pytest.fixture
def bait(tmp_path: Path) -> Iterator[Path]:
    """A directory of the test's own, holding a secret file, that no command may reach."""
    path = tmp_path / "bait"
    path.mkdir()
    (path / "secret.txt").write_text(SECRET)
    yield path


def test_a_command_cannot_read_the_callers_environment_or_memory(
    local: Local, target: Handle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("E2B_API_KEY", SECRET)
    handle = local.create("reader")
    out, _ = sh(
        local,
        handle,
        "env; tr '\\0' '\\n' < /proc/$PPID/environ; "
        "cat /proc/1/environ; head -c 64 /proc/1/mem; ls /proc/1/fd; "
        "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; done",
    )
    assert SECRET not in out
    assert "Permission denied" in out
    assert str(os.getpid()) not in sh(local, handle, "ls /proc")[0].split()


def test_a_command_cannot_read_or_write_host_files(
    local: Local, target: Handle, bait: Path
) -> None:
    stdout, stderr = streams(
        local,
        target,
        f"cat {bait}/secret.txt; ls {bait}; mkdir -p {bait}/y; echo pwned > {bait}/x; cat {bait}/x",
    )
    assert SECRET not in stdout + stderr and "No such file" in stderr
    assert stdout == "pwned\n"
    assert sorted(os.listdir(bait)) == ["secret.txt"]
    home = Path.home()
    listing, _ = sh(local, target, f"ls -A {home}")
    # The only thing of the caller's home a sandbox may see is the way to the Python
    # installation that runs its agent, bound read-only when it lives there.
    _, python_paths = launch.agent_python()
    allowed = {
        Path(p).relative_to(home).parts[0]
        for p in python_paths
        if Path(p).is_relative_to(home) and Path(p) != home
    }
    assert set(listing.split()) <= allowed | {
        "ls:",
        "cannot",
        "access",
        f"'{home}':",
        "No",
        "such",
        "file",
        "or",
        "directory",
    }


def test_a_command_cannot_reach_another_sandbox_nor_forge_its_exit(
    local: Local, target: Handle, root: Path
) -> None:
    victim = local.create("victim")
    local.write_file(victim, "/secret.txt", SECRET.encode())
    box = Mailbox()
    running = local.spawn(
        victim, "bash", ["-c", "echo started; read x; exit 1"], owner=box, stdin=True
    )
    box.expect(is_stdout(running.ref), 10)
    state = root / "victim" / "state"
    assert running.session_id is not None
    session = state / "sessions" / running.session_id
    out, _ = sh(
        local,
        target,
        f"cat {root}/victim/fs/secret.txt ../../victim/fs/secret.txt "
        f"/proc/1/root/secret.txt; "
        f'echo \'{{"code": 0, "signal": null}}\' > {session}/exit.json; '
        f"printf 'forged' >> {session}/journal; ls {state}",
    )
    assert SECRET not in out
    local.write_stdin(running, b"go\n")
    assert box.expect(is_exit(running.ref), 10) == Exit(running.ref, 1)
    output = b"".join(getattr(f, "data", b"") for f in box.history(running.ref))
    assert output == b"started\n"


def test_session_state_and_the_agent_are_out_of_reach(
    local: Local, target: Handle, root: Path
) -> None:
    command = local.spawn(target, "sleep", ["30"])
    state = root / "target" / "state"
    stdout, stderr = streams(
        local,
        target,
        f"ls {state} {state}/sessions; ls /proc/1/cwd /proc/1/root/; "
        "ls -la /proc/1/fd; kill -9 1; kill -STOP 1; echo done",
    )
    out = stdout + stderr
    assert "agent.sock" not in out and "journal" not in out and command.session_id not in out
    assert stdout.endswith("done\n")
    assert local.exec(target, "echo", ["the agent survived"]).output == b"the agent survived\n"
    local.stop_command(command)


def test_a_command_sees_only_its_own_processes(local: Local, target: Handle) -> None:
    local.create("neighbour")
    out, _ = sh(local, target, "ps -e -o pid=,comm=")
    pids = {line.split()[0] for line in out.splitlines()}
    assert pids <= {"1", *{str(n) for n in range(2, 30)}}
    assert "pytest" not in out and "python" in out


def test_planted_links_never_carry_write_file_out_of_the_sandbox(
    local: Local, target: Handle, bait: Path, tmp_path: Path
) -> None:
    plant = tmp_path / "plant"
    sh(
        local,
        target,
        f"mkdir -p {plant}/d; ln -s {bait} {plant}/out; "
        f"ln -s ../../../../../../../../.. {plant}/up; ln -s / {plant}/d/root; "
        f"ln -s {bait}/secret.txt {plant}/file",
    )
    for path in (
        f"{plant}/out/pwned",
        f"{plant}/up{bait}/pwned",
        f"{plant}/d/root{bait}/pwned",
        f"{plant}/file",
    ):
        local.write_file(target, path, b"pwned")
    assert sorted(os.listdir(bait)) == ["secret.txt"]
    assert (bait / "secret.txt").read_text() == SECRET
    assert not plant.exists()
    out, _ = sh(local, target, f"cat {bait}/pwned; cat {plant}/file")
    assert out == "pwnedpwned"


def test_nothing_a_command_leaves_behind_can_hang_the_caller(
    local: Local, target: Handle, tmp_path: Path
) -> None:
    trap = tmp_path / "trap"
    sh(local, target, f"mkdir -p {trap}; mkfifo {trap}/fifo; ln -s fifo {trap}/l")
    assert finishes(lambda: local.write_file(target, f"{trap}/fifo", b"x"))
    assert finishes(lambda: local.write_file(target, f"{trap}/l", b"x"))
    assert not trap.exists()
    assert finishes(lambda: local.create_checkpoint(target))
    timeout_check = threading.Event()

    def stubborn() -> None:
        try:
            local.exec(target, "bash", ["-c", "trap '' TERM HUP INT; exec sleep 300"], timeout=1)
        except Exception:
            timeout_check.set()

    assert finishes(stubborn)
    assert timeout_check.is_set()
    # A background child holding the output keeps the command running (as with
    # subprocess) until the caller's deadline; one with its own output does not.
    held = threading.Event()

    def holder() -> None:
        try:
            local.exec(target, "bash", ["-c", "(setsid sleep 300 &); echo hi"], timeout=1)
        except Exception:
            held.set()

    assert finishes(holder)
    assert held.is_set()
    daemon = "(setsid sleep 300 >/dev/null 2>&1 &); echo hi"
    assert local.exec(target, "bash", ["-c", daemon], timeout=20).output == b"hi\n"


def test_destroy_kills_every_process_of_the_sandbox(
    local: Local, target: Handle, root: Path
) -> None:
    local.spawn(
        target,
        "bash",
        [
            "-c",
            "setsid nohup sleep 300 >/dev/null 2>&1 & "
            "(sleep 300 &) ; (setsid bash -c 'sleep 300 & wait' &); "
            "exec sleep 300",
        ],
    )
    agent = agent_pid(root, target)
    assert wait_until(lambda: len(namespace_members(agent)) >= 6)
    members = namespace_members(agent)
    local.destroy(target)

    def all_gone() -> bool:
        return not [pid for pid in members if Path(f"/proc/{pid}").exists()]

    assert wait_until(all_gone, timeout=10)


def test_host_loopback_services_are_never_reachable(local: Local, target: Handle) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            accepted.append(server.accept())

    client = (
        "import socket, http.client\n"
        f"for a in [('127.0.0.1', {port})]:\n"
        "    try: socket.create_connection(a, timeout=5); print('direct ok')\n"
        "    except OSError as e: print('direct', e)\n"
        "c = http.client.HTTPConnection('127.0.0.1', 3128, timeout=10)\n"
        f"c.set_tunnel('127.0.0.1', {port})\n"
        "try: c.request('GET', '/'); print('proxy ok')\n"
        "except OSError as e: print('proxy', e)\n"
    )
    out, _ = sh(local, target, f'python3 -c "{client}"')
    accept()
    server.close()
    assert "direct ok" not in out and "proxy ok" not in out
    assert "403" in out
    assert accepted == []
