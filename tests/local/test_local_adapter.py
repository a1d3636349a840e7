"""The local adapter's own promises: names, files, sessions across processes, supervisor
death, suspend, checkpoints, termination and isolation of the host environment."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from managoat_sandbox import _engine as engine
from managoat_sandbox import config
from managoat_sandbox.errors import (
    AlreadyExists,
    CommandExited,
    Invalid,
    NotFound,
    NotSupported,
    RestoreFailed,
    Unavailable,
)
from managoat_sandbox.frames import Error, Exit, Stderr, Stdout
from managoat_sandbox.providers.local import Local
from managoat_sandbox.testing.mailbox import Mailbox, is_exit, is_stdout
from managoat_sandbox.types import NetworkPolicy

from ..conftest import wait_until

ESCAPES = ["../x", "a/b", "/abs", ".hidden", ".", "..", "x" * 201, "nul\x00byte", ""]


def collect(box: Mailbox, ref: object, timeout: float = 10) -> tuple[bytes, object]:
    """Everything stdout delivered to ``ref`` up to its terminal frame, and that frame."""
    terminal = box.expect(lambda f: f.ref == ref and f.terminal, timeout)
    data = b"".join(f.data for f in box.history(ref) if isinstance(f, Stdout))
    return data, terminal


@pytest.mark.parametrize("name", ESCAPES)
def test_names_that_could_escape_the_root_are_invalid_before_the_disk(
    local: Local, root: Path, name: str
) -> None:
    before = sorted(root.parent.rglob("*")) if root.exists() else []
    for call in (local.create, local.create_new, local.build_handle):
        with pytest.raises(Invalid):
            call(name)
    assert (sorted(root.parent.rglob("*")) if root.exists() else []) == before


def test_a_root_that_cannot_be_created_names_its_path(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    config.configure("local", root=str(blocker / "root"))
    with pytest.raises(Invalid, match=str(blocker)):
        Local().create("box")


def test_create_adopts_create_new_refuses_and_destroy_is_definitive(local: Local) -> None:
    first = local.create("box")
    local.write_file(first, "/keep", b"1")
    again = local.create("box")
    assert local.host_path(again, "/keep") == local.host_path(first, "/keep")
    assert Path(local.host_path(again, "/keep")).read_bytes() == b"1"
    with pytest.raises(AlreadyExists):
        local.create_new("box")
    fresh = local.create_new("fresh")
    assert fresh.instance_id and local.get(fresh).raw["instance_id"] == fresh.instance_id
    assert local.list_all_names() == {"box", "fresh"}
    local.destroy(first)
    local.destroy(first)
    with pytest.raises(NotFound):
        local.get(first)
    assert local.list_all_names() == {"fresh"}


def test_a_symlink_in_the_root_is_not_a_sandbox(local: Local, root: Path, tmp_path: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "link").symlink_to(outside)
    with pytest.raises(NotFound):
        local.get(local.build_handle("link"))
    with pytest.raises(Invalid):
        local.create("link")
    assert "link" not in local.list_all_names()
    assert list(outside.iterdir()) == []


def test_write_file_stays_inside_the_sandbox(local: Local, tmp_path: Path) -> None:
    handle = local.create("files")
    local.write_file(handle, "/etc/app/.env", ["A=", b"1\n"], mode=0o600)
    target = Path(local.host_path(handle, "/etc/app/.env"))
    assert target.read_bytes() == b"A=1\n"
    assert target.stat().st_mode & 0o777 == 0o600
    assert local.exec(handle, "cat", ["etc/app/.env"]).output == b"A=1\n"
    with pytest.raises(Invalid):
        local.write_file(handle, "../../escape", b"x")
    outside = tmp_path / "outside-dir"
    outside.mkdir()
    local.exec(handle, "ln", ["-s", str(outside), "sneaky"])
    with pytest.raises(Invalid):
        local.write_file(handle, "/sneaky/x", b"x")
    assert list(outside.iterdir()) == []


def test_the_host_environment_and_its_secrets_stay_outside(
    local: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPRITES_TOKEN", "canary-host-secret")
    handle = local.create("env")
    output = local.exec(handle, "env", [], env={"MINE": "yes"}).output
    assert b"canary-host-secret" not in output
    assert b"MINE=yes" in output
    assert f"HOME={local.host_path(handle, '/')}".encode() in output


def test_sessions_outlive_the_process_that_started_them(local: Local, root: Path) -> None:
    handle = local.create("shared")
    script = textwrap.dedent(
        f"""
        import json
        from managoat_sandbox import config
        from managoat_sandbox.providers.local import Local
        config.configure("local", root={str(root)!r})
        adapter = Local()
        handle = adapter.build_handle("shared")
        command = adapter.spawn(handle, "bash", ["-c", "echo first; read x; echo got $x; exit 5"],
                                stdin=True)
        print(command.frames.get(timeout=10).data.decode(), end="")
        print(json.dumps(command.session_id))
        adapter.stop_command(command)
        """
    )
    started = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, timeout=60, check=False
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
    data, terminal = collect(box, attached.ref)
    assert data == b"first\ngot hello\n"
    assert terminal == Exit(attached.ref, 5)
    replay = Mailbox()
    finished = local.attach(handle, session.id, owner=replay, stdin=True)
    assert collect(replay, finished.ref) == (b"first\ngot hello\n", Exit(finished.ref, 5))
    with pytest.raises(CommandExited):
        local.write_stdin(finished, b"late")
    local.stop_command(attached)
    local.stop_command(finished)


def test_a_supervisor_that_dies_without_an_exit_record_is_closed_before_exit(
    local: Local,
) -> None:
    handle = local.create("orphan")
    box = Mailbox()
    command = local.spawn(handle, "bash", ["-c", "echo hi; exec sleep 30"], owner=box)
    box.expect(is_stdout(command.ref), 10)
    session_dir = command.private.session_dir
    info = engine.read_process(session_dir)
    assert info is not None and info.pgid is not None
    try:
        os.kill(info.supervisor_pid, signal.SIGKILL)
        error = box.expect(lambda f: isinstance(f, Error) and f.ref == command.ref, 10)
        assert error.reason == Unavailable("closed_before_exit")
        box.refute(is_exit(command.ref), 0.1)
        replay = Mailbox()
        attached = local.attach(handle, session_dir.name, owner=replay)
        replay.expect(lambda f: isinstance(f, Error) and f.ref == attached.ref, 10)
    finally:
        os.killpg(info.pgid, signal.SIGKILL)


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_suspend_stops_every_process_group_and_resume_continues_them(local: Local) -> None:
    handle = local.create("sleepy")
    command = local.spawn(handle, "bash", ["-c", "while :; do sleep 0.05; done"], stdin=True)
    info = engine.read_process(command.private.session_dir)
    assert info is not None and info.pid is not None
    local.suspend(handle)
    assert local.get(handle).status == "suspended"
    assert wait_until(lambda: _state(info.pid) == "T")
    resumed = local.resume(handle)
    assert local.get(resumed).status == "running"
    assert wait_until(lambda: _state(info.pid) != "T")
    local.stop_command(command)


def test_terminate_is_confirmed_by_the_supervisor_record(local: Local) -> None:
    handle = local.create("term")
    box = Mailbox()
    graceful = local.spawn(handle, "sleep", ["30"], owner=box)
    forced = local.spawn(handle, "bash", ["-c", "trap '' TERM; echo armed; sleep 30"], owner=box)
    box.expect(is_stdout(forced.ref), 10)
    ids = {s.command: s.id for s in local.list_sessions(handle)}
    local.terminate_session(handle, ids["sleep 30"], timeout=5)
    assert box.expect(is_exit(graceful.ref), 10) == Exit(graceful.ref, 143)
    with pytest.raises(Unavailable) as caught:
        local.terminate_session(handle, ids[next(k for k in ids if "trap" in k)], timeout=0.2)
    assert caught.value.detail == "termination_unconfirmed"
    local.terminate_session(handle, ids[next(k for k in ids if "trap" in k)], mode="force")
    assert box.expect(is_exit(forced.ref), 10) == Exit(forced.ref, 137)
    local.terminate_session(handle, ids["sleep 30"])
    local.terminate_session(handle, "absent")
    with pytest.raises(Unavailable):
        local.terminate_session(handle, "absent", mode="force")


def test_exec_timeout_abandons_and_kills_its_process(local: Local) -> None:
    handle = local.create("slow")
    marker = Path(local.host_path(handle, "/alive"))
    with pytest.raises(Unavailable) as caught:
        local.exec(handle, "bash", ["-c", "sleep 0.3; touch alive; sleep 30"], timeout=0.1)
    assert caught.value.detail == ("exec_timeout", 0.1)
    execs = Path(local.host_path(handle, "/")).parent / "execs"
    assert list(execs.iterdir()) == []
    assert not marker.exists()


def test_exec_keeps_stderr_apart_unless_merged(local: Local) -> None:
    handle = local.create("streams")
    args = ["-c", "echo out; echo err >&2; exit 4"]
    assert local.exec(handle, "bash", args) == (b"out\n", 4)
    merged = local.exec(handle, "bash", args, stderr_to_stdout=True)
    assert sorted(merged.output.splitlines()) == [b"err", b"out"] and merged.exit_code == 4
    assert local.exec(handle, "no-such-program-xyz", []).exit_code == 127
    assert local.exec(handle, "pwd", [], dir="/").output.strip() == local.host_path(
        handle, "/"
    ).encode()


def test_tty_spawns_get_a_terminal_and_no_stderr(local: Local) -> None:
    handle = local.create("tty")
    box = Mailbox()
    command = local.spawn(handle, "bash", ["-c", "[ -t 1 ] && echo tty; echo e >&2"], owner=box,
                          tty=True)
    data, terminal = collect(box, command.ref)
    assert terminal == Exit(command.ref, 0)
    assert b"tty" in data and b"e" in data
    assert not [f for f in box.history(command.ref) if isinstance(f, Stderr)]


def test_checkpoints_snapshot_and_restore_the_files(local: Local) -> None:
    handle = local.create("cp")
    local.write_file(handle, "/data/state", b"v1")
    checkpoint = local.create_checkpoint(handle, comment="before")
    local.write_file(handle, "/data/state", b"v2")
    local.write_file(handle, "/data/new", b"n")
    local.restore_checkpoint(handle, checkpoint)
    assert local.exec(handle, "cat", ["data/state"]).output == b"v1"
    assert not Path(local.host_path(handle, "/data/new")).exists()
    with pytest.raises(RestoreFailed):
        local.restore_checkpoint(handle, "cp-missing")
    with pytest.raises(Invalid):
        local.restore_checkpoint(handle, "../../etc")


def test_network_policy_and_public_url_are_honest_about_absence(local: Local) -> None:
    handle = local.create("net")
    assert "network_policy" not in local.capabilities()
    with pytest.raises(NotSupported):
        local.apply_network_policy(handle, NetworkPolicy(allow=[]))
    assert local.public_url(handle) is None


def test_meta_records_name_and_creation(local: Local, root: Path) -> None:
    local.create("meta")
    meta = json.loads((root / "meta" / "meta.json").read_text())
    assert meta["name"] == "meta" and meta["instance_id"] is None and meta["created_at"]
