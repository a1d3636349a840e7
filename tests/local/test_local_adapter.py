"""The local adapter's own promises: names, files, sessions, suspend, termination,
checkpoints, the mode it reports, and what creation leaves behind when it fails."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from managoat_sandbox import config, reasons
from managoat_sandbox._engine import launch, process_tree
from managoat_sandbox.errors import (
    AlreadyExists,
    DeadlineExpired,
    Invalid,
    NotFound,
    RestoreFailed,
    Unavailable,
)
from managoat_sandbox.frames import Exit, Stderr, Stdout
from managoat_sandbox.providers.local import Local
from managoat_sandbox.testing.mailbox import Mailbox, is_exit, is_stdout
from managoat_sandbox.types import NetworkPolicy

from ..conftest import wait_until
from .conftest import agent_pid, namespace_members, process_state, requires_isolation

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
    assert local.exec(again, "cat", ["/keep"]).output == b"1"
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


def test_write_file_paths_mean_what_they_mean_to_a_command(local: Local) -> None:
    handle = local.create("files")
    local.write_file(handle, "/etc/app/.env", b"A=1\n", mode=0o600)
    local.write_file(handle, "notes.txt", b"in the home\n")
    out = local.exec(
        handle, "bash", ["-c", "cat /etc/app/.env; stat -c %a /etc/app/.env; cat notes.txt; pwd"]
    ).output
    home = local.host_path(handle, ".")
    assert out == f"A=1\n600\nin the home\n{home}\n".encode()
    local.write_file(handle, "/etc/app/.env", b"B=2\n")
    assert local.exec(handle, "stat", ["-c", "%a", "/etc/app/.env"]).output == b"600\n"
    for bad in ("", "nul\x00"):
        with pytest.raises(Invalid):
            local.write_file(handle, bad, b"x")
    with pytest.raises(Invalid):
        local.write_file(handle, "/etc/app", b"a directory")


@requires_isolation
def test_isolated_paths_are_the_sandbox_own_and_system_paths_are_read_only(
    local: Local,
) -> None:
    handle = local.create("paths")
    assert local.host_path(handle, "/etc/app.env") == "/etc/app.env"
    assert local.host_path(handle, "data/x") == "/home/user/data/x"
    for system in ("/usr/local/bin/tool", "/bin/tool", "/proc/1/environ", "/etc/passwd"):
        with pytest.raises(Invalid) as caught:
            local.write_file(handle, system, b"x")
        assert "read-only" in str(caught.value.detail)


def test_the_host_environment_stays_outside_and_the_caller_env_goes_in(
    local: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPRITES_TOKEN", "canary-host-secret")
    handle = local.create("env")
    output = local.exec(handle, "env", [], env={"MINE": "yes"}).output
    assert b"canary-host-secret" not in output
    assert b"MINE=yes" in output
    assert f"HOME={local.host_path(handle, '.')}\n".encode() in output


def test_suspend_freezes_every_process_and_resume_continues_them(local: Local, root: Path) -> None:
    handle = local.create("sleepy")
    box = Mailbox()
    command = local.spawn(
        handle,
        "bash",
        ["-c", "setsid sleep 300 & (sleep 300 &); echo up; while :; do sleep 0.05; done"],
        owner=box,
    )
    box.expect(is_stdout(command.ref), 10)
    agent = agent_pid(root, handle)
    isolated = local.get(handle).raw["isolation"] == "namespaces"

    def members() -> list[int]:
        if isolated:
            return [pid for pid in namespace_members(agent) if pid != agent]
        return process_tree.descendants(agent)

    # bash, the setsid'd sleep and the double-forked one (the loop's short sleeps come and go)
    assert wait_until(lambda: len(members()) >= 3)
    frozen = members()
    local.suspend(handle)
    assert local.get(handle).status == "suspended"
    assert wait_until(lambda: all(process_state(p) in ("T", "gone") for p in frozen))
    resumed = local.resume(handle)
    assert local.get(resumed).status == "running"
    assert wait_until(lambda: all(process_state(p) != "T" for p in frozen))
    local.stop_command(command)


def test_terminate_is_confirmed_by_the_recorded_end(local: Local) -> None:
    handle = local.create("term")
    box = Mailbox()
    graceful = local.spawn(handle, "sleep", ["30"], owner=box)
    forced = local.spawn(handle, "bash", ["-c", "trap '' TERM; echo armed; sleep 30"], owner=box)
    box.expect(is_stdout(forced.ref), 10)
    assert graceful.session_id is not None and forced.session_id is not None
    local.terminate_session(handle, graceful.session_id, timeout=5)
    assert box.expect(is_exit(graceful.ref), 10) == Exit(graceful.ref, 143)
    with pytest.raises(DeadlineExpired) as caught:
        local.terminate_session(handle, forced.session_id, timeout=0.2)
    assert caught.value.detail == reasons.TERMINATION_TIMEOUT
    local.terminate_session(handle, forced.session_id, mode="force")
    assert box.expect(is_exit(forced.ref), 10) == Exit(forced.ref, 137)
    # Ended sessions: success in both modes; an absent one (never there, or of a
    # sandbox that is gone): success gracefully, unconfirmed by force.
    local.terminate_session(handle, graceful.session_id)
    local.terminate_session(handle, graceful.session_id, mode="force")
    for absent in (handle, local.build_handle("nosuchbox")):
        local.terminate_session(absent, "absent")
        with pytest.raises(Unavailable) as unconfirmed:
            local.terminate_session(absent, "absent", mode="force")
        assert unconfirmed.value == Unavailable(reasons.TERMINATION_UNCONFIRMED)


def test_exec_timeout_abandons_and_kills_its_process(local: Local, root: Path) -> None:
    handle = local.create("slow")
    with pytest.raises(Unavailable) as caught:
        local.exec(handle, "bash", ["-c", "touch started; sleep 30"], timeout=1)
    assert caught.value.detail == (reasons.EXEC_TIMEOUT, 1)
    assert local.exec(handle, "ls", ["started"]).exit_code == 0
    survivors = local.exec(handle, "pgrep", ["-f", "sleep 30"])
    assert survivors.exit_code == 1, survivors
    assert local.list_sessions(handle) == []
    assert list((root / "slow" / "state" / "sessions").iterdir()) == []


def test_exec_keeps_stderr_apart_unless_merged(local: Local) -> None:
    handle = local.create("streams")
    args = ["-c", "echo out; echo err >&2; exit 4"]
    assert local.exec(handle, "bash", args) == (b"out\n", 4)
    merged = local.exec(handle, "bash", args, stderr_to_stdout=True)
    assert sorted(merged.output.splitlines()) == [b"err", b"out"] and merged.exit_code == 4
    assert local.exec(handle, "no-such-program-xyz", []).exit_code == 127
    assert (
        local.exec(handle, "pwd", [], dir="/").output.strip()
        == local.host_path(handle, "/").encode()
    )
    with pytest.raises(Invalid):
        local.exec(handle, "true", dir="/no/such/dir")


def test_tty_spawns_get_a_terminal_and_no_stderr(local: Local) -> None:
    handle = local.create("tty")
    box = Mailbox()
    command = local.spawn(
        handle, "bash", ["-c", "[ -t 1 ] && echo tty; echo e >&2"], owner=box, tty=True
    )
    data, terminal = collect(box, command.ref)
    assert terminal == Exit(command.ref, 0)
    assert b"tty" in data and b"e" in data
    assert not [f for f in box.history(command.ref) if isinstance(f, Stderr)]


def test_checkpoints_snapshot_and_restore_the_files(local: Local) -> None:
    handle = local.create("cp")
    local.write_file(handle, "/data/state", b"v1")
    local.exec(handle, "bash", ["-c", "ln -s /etc/hostname /data/link; mkfifo /data/pipe"])
    checkpoint = local.create_checkpoint(handle, comment="before")
    local.write_file(handle, "/data/state", b"v2")
    local.write_file(handle, "/data/new", b"n")
    local.restore_checkpoint(handle, checkpoint)
    restored = local.exec(
        handle, "bash", ["-c", "cat /data/state; readlink /data/link; ls /data"]
    ).output
    assert restored == b"v1/etc/hostname\nlink\nstate\n"
    with pytest.raises(RestoreFailed):
        local.restore_checkpoint(handle, "cp-missing")
    with pytest.raises(Invalid):
        local.restore_checkpoint(handle, "../../etc")


def test_policies_with_entries_that_are_not_domains_are_invalid(local: Local) -> None:
    handle = local.create("net")
    if "network_policy" not in local.capabilities():
        pytest.skip("sandboxes are not isolated here, so network_policy is not advertised")
    for bad in ("http://example.com", "exa mple.com", "10.0.0.1", "", "*", "a..b", "-x.com"):
        with pytest.raises(Invalid):
            local.apply_network_policy(handle, NetworkPolicy(allow=[bad]))
    local.apply_network_policy(handle, NetworkPolicy(allow=["Example.COM.", "*.example.org"]))
    assert local.get(handle).raw["network_policy"] == ["example.com", "*.example.org"]
    assert local.public_url(handle) is None


def test_get_reports_the_mode_limits_and_agent(local: Local, root: Path) -> None:
    handle = local.create("meta", limits={"processes": 512, "memory": None})
    raw = local.get(handle).raw
    meta = json.loads((root / "meta" / "meta.json").read_text())
    assert meta["name"] == "meta" and meta["instance_id"] is None and meta["created_at"]
    assert raw["isolation"] in ("namespaces", "none")
    assert raw["limits"]["processes"] == 512 and raw["limits"]["memory"] is None
    assert raw["agent"] == "running"
    with pytest.raises(Invalid):
        local.create("meta", limits={"processes": 1024})
    assert local.create("meta", limits={"processes": 512, "memory": None}) == handle


@pytest.mark.parametrize("limits", [{"processes": 2}, {"bogus": 1}, {"memory": -5}])
def test_bad_limits_are_invalid_and_create_nothing(local: Local, limits: dict[str, int]) -> None:
    with pytest.raises(Invalid):
        local.create("limited", limits=limits)
    assert local.list_all_names() == frozenset()


def test_unknown_create_options_are_type_errors(local: Local) -> None:
    with pytest.raises(TypeError):
        local.create("opts", template="x")


def test_a_sandbox_whose_agent_cannot_start_is_unavailable_and_leaves_nothing(
    local: Local, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch, "agent_python", lambda: ("/nonexistent/python3", ()))
    with pytest.raises(Unavailable) as caught:
        local.create("doomed")
    assert caught.value.detail[0] == "agent_failed"
    assert "python3" in caught.value.detail[1]
    assert local.list_all_names() == frozenset()
    assert sorted(os.listdir(root)) == []


def test_a_killed_agent_comes_back_for_the_next_command(local: Local, root: Path) -> None:
    handle = local.create("phoenix")
    first = agent_pid(root, handle)
    os.kill(first, 9)
    assert wait_until(lambda: local.get(handle).raw["agent"] == "stopped")
    assert local.exec(handle, "echo", ["back"]).output == b"back\n"
    assert agent_pid(root, handle) != first


@requires_isolation
def test_a_sandbox_that_breaks_its_own_mount_points_still_starts(local: Local, root: Path) -> None:
    handle = local.create("saboteur")
    local.exec(
        handle,
        "bash",
        ["-c", "rm /bin /lib; mkdir /bin; echo x > /lib; rm -rf /run; rmdir /proc; ln -s / /proc"],
    )
    os.kill(agent_pid(root, handle), 9)
    assert wait_until(lambda: local.get(handle).raw["agent"] == "stopped")
    assert local.exec(handle, "echo", ["started"]).output == b"started\n"


def test_exec_of_a_failing_command_says_why_in_stderr(local: Local) -> None:
    """A missing file and a missing binary: the code is the real one and stderr says why."""
    handle = local.create("stderr-why")
    missing_file = local.exec(handle, "cat", ["/no-such-file"])
    assert missing_file.exit_code == 1
    assert b"No such file" in missing_file.stderr
    assert missing_file.output == b""
    missing_binary = local.exec(handle, "bash", ["-c", "no-such-binary-here"])
    assert missing_binary.exit_code == 127
    assert b"not found" in missing_binary.stderr


@pytest.mark.parametrize(
    ("env", "args", "field"),
    [
        ({"A=B": "1"}, [], "env"),
        ({"A": "x\0y"}, [], "env"),
        (None, ["a\0b"], "args"),
    ],
)
def test_what_no_process_can_be_given_is_invalid_and_live_sessions_run_on(
    local: Local, env: dict[str, str] | None, args: list[str], field: str
) -> None:
    """Called directly (the facade refuses these first), the adapter answers ``Invalid``
    from the agent's refusal; the agent, and a session it serves, live on."""
    handle = local.create("box")
    box = Mailbox()
    running = local.spawn(handle, "cat", [], owner=box, stdin=True)
    with pytest.raises(Invalid) as refused:
        local.exec(handle, "echo", args, env=env)
    assert refused.value.detail[0] == field
    with pytest.raises(Invalid):
        local.spawn(handle, "echo", args, env=env)
    local.write_stdin(running, b"still here\n")
    assert box.expect(is_stdout(running.ref), 10).data == b"still here\n"
    local.stop_command(running)
