"""The agent's lifetime: sessions outlive the Python process that started them, and an
agent that dies ends its commands with closed_before_exit, never a guessed code. A process
that used a sandbox leaves nothing of its own behind: no child once the sandbox is
destroyed, nothing unclosed to warn about at exit while the sandbox lives on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from managoat_sandbox import reasons
from managoat_sandbox._engine import events
from managoat_sandbox._engine.box import Box
from managoat_sandbox.errors import CommandExited, Unavailable
from managoat_sandbox.frames import Error, Exit, Stdout
from managoat_sandbox.providers.local import Local
from managoat_sandbox.testing.mailbox import Mailbox, is_exit, is_stdout

from .conftest import agent_pid


def collect(box: Mailbox, ref: object, timeout: float = 10) -> tuple[bytes, object]:
    terminal = box.expect(lambda f: f.ref == ref and f.terminal, timeout)
    data = b"".join(f.data for f in box.history(ref) if isinstance(f, Stdout))
    return data, terminal


def run_python(root: Path, body: str, *flags: str) -> subprocess.CompletedProcess[bytes]:
    script = textwrap.dedent(f"""
        import json
        from managoat_sandbox import config
        from managoat_sandbox.providers.local import Local
        config.configure("local", root={str(root)!r})
        adapter = Local()
        handle = adapter.build_handle("shared")
    """) + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, *flags, "-c", script], capture_output=True, timeout=60, check=False
    )


def own_children() -> set[int]:
    """This process's children, zombies included (read from ``/proc``, nothing else)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
                found.add(int(entry))
    return found


def test_destroy_reaps_what_this_process_launched_for_the_sandbox(local: Local) -> None:
    before = own_children()
    handle = local.create("reaped")
    launched = own_children() - before
    assert launched, "the sandbox's agent starts as a child of this process"
    local.destroy(handle)
    assert launched.isdisjoint(own_children()), "destroy left a child (or a zombie) behind"


@pytest.mark.parametrize("destroyed", [False, True], ids=["left-running", "destroyed"])
def test_a_process_that_used_a_sandbox_exits_without_resource_warnings(
    local: Local, root: Path, destroyed: bool
) -> None:
    body = f"""
        adapter.create("shared")
        assert adapter.exec(handle, "echo", ["hi"]).output == b"hi\\n"
        if {destroyed}:
            adapter.destroy(handle)
    """
    ran = run_python(root, body, "-X", "dev")
    assert ran.returncode == 0, ran.stderr
    assert b"ResourceWarning" not in ran.stderr, ran.stderr.decode()
    assert local.list_all_names() == (frozenset() if destroyed else {"shared"})


def test_sessions_outlive_the_process_that_started_them(local: Local, root: Path) -> None:
    handle = local.create("shared")
    started = run_python(
        root,
        """
        command = adapter.spawn(handle, "bash", ["-c", "echo first; read x; echo got $x; exit 5"],
                                stdin=True)
        print(command.frames.get(timeout=10).data.decode(), end="")
        print(json.dumps(command.session_id))
        adapter.stop_command(command)
    """,
    )
    assert started.returncode == 0, started.stderr
    assert started.stdout.startswith(b"first\n")
    [session] = local.list_sessions(handle)
    assert session.command == "bash -c echo first; read x; echo got $x; exit 5"
    assert json.loads(started.stdout.splitlines()[-1]) == session.id
    box = Mailbox()
    attached = local.attach(handle, session.id, owner=box, stdin=True)
    assert box.expect(is_stdout(attached.ref), 10).data == b"first\n"
    local.write_stdin(attached, b"hello\n")
    assert collect(box, attached.ref) == (b"first\ngot hello\n", Exit(attached.ref, 5))
    replay = Mailbox()
    finished = local.attach(handle, session.id, owner=replay, stdin=True)
    assert collect(replay, finished.ref) == (b"first\ngot hello\n", Exit(finished.ref, 5))
    with pytest.raises(CommandExited):
        local.write_stdin(finished, b"late")
    local.stop_command(attached)
    local.stop_command(finished)


def test_another_process_attaches_to_a_live_session_and_gets_its_real_exit(
    local: Local, root: Path
) -> None:
    handle = local.create("shared")
    box = Mailbox()
    command = local.spawn(
        handle, "bash", ["-c", "echo one; read x; echo two; exit 7"], owner=box, stdin=True
    )
    box.expect(is_stdout(command.ref), 10)
    watcher = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            from managoat_sandbox import config
            from managoat_sandbox.providers.local import Local
            from managoat_sandbox.frames import Stdout, Exit
            config.configure("local", root={str(root)!r})
            adapter = Local()
            attached = adapter.attach(adapter.build_handle("shared"), {command.session_id!r})
            while True:
                frame = attached.frames.get(timeout=20)
                print(repr(frame), flush=True)
                if frame.terminal:
                    break
        """),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert watcher.stdout is not None
    first = watcher.stdout.readline()
    assert b"one" in first
    local.write_stdin(command, b"go\n")
    out, err = watcher.communicate(timeout=30)
    assert watcher.returncode == 0, err
    assert b"two" in out and b"Exit(" in out and b"code=7" in out
    assert box.expect(is_exit(command.ref), 10) == Exit(command.ref, 7)


def test_an_agent_that_dies_ends_its_commands_with_closed_before_exit(
    local: Local, root: Path
) -> None:
    handle = local.create("fragile")
    box = Mailbox()
    command = local.spawn(handle, "bash", ["-c", "echo hi; exec sleep 300"], owner=box)
    box.expect(is_stdout(command.ref), 10)
    os.kill(agent_pid(root, handle), signal.SIGKILL)
    error = box.expect(lambda f: f.ref == command.ref and f.terminal, 10)
    assert error == Error(command.ref, Unavailable(reasons.CLOSED_BEFORE_EXIT))
    box.refute(is_exit(command.ref), 0.1)
    replay = Mailbox()
    assert command.session_id is not None
    attached = local.attach(handle, command.session_id, owner=replay)
    assert collect(replay, attached.ref) == (
        b"hi\n",
        Error(attached.ref, Unavailable(reasons.CLOSED_BEFORE_EXIT)),
    )
    assert local.exec(handle, "echo", ["next"]).output == b"next\n"


def test_following_a_finished_session_from_now_gives_only_its_end(local: Local, root: Path) -> None:
    handle = local.create("done")
    box = Mailbox()
    command = local.spawn(handle, "bash", ["-c", "echo output; exit 4"], owner=box)
    box.expect(is_exit(command.ref), 10)
    assert command.session_id is not None
    engine_box = Box.open(root / "done")
    try:
        follower = engine_box.attach(command.session_id, from_end=True)
        assert follower is not None
        assert follower.read(timeout=10) == [events.Exited(4)]
        replay = engine_box.attach(command.session_id)
        assert replay is not None
        assert replay.read(timeout=10) == [events.Output(1, b"output\n"), events.Exited(4)]
    finally:
        engine_box.close()


def test_sessions_a_dead_agent_left_are_recorded_lost_by_the_next_one(
    local: Local, root: Path
) -> None:
    handle = local.create("orphans")
    command = local.spawn(handle, "sleep", ["300"])
    assert command.session_id is not None
    engine_box = Box.open(root / "orphans")
    assert engine_box.running(command.session_id)
    os.kill(agent_pid(root, handle), signal.SIGKILL)
    local.exec(handle, "true")
    assert not engine_box.running(command.session_id)
    session = engine_box.session(command.session_id)
    assert session is not None and session.end() == {"lost": "agent_gone"}
    local.stop_command(command)


def test_a_zero_timeout_read_of_a_live_process_is_a_timeout_not_an_end(
    local: Local, root: Path
) -> None:
    local.create("patient")
    engine_box = Box.open(root / "patient")
    _, subscription = engine_box.spawn(
        "s-wait", ["sleep", "300"], env=engine_box.environment(), cwd=engine_box.agent_path(".")
    )
    assert subscription is not None
    with pytest.raises(TimeoutError):
        subscription.read(timeout=0)
    assert not subscription.ended
    subscription.close()
