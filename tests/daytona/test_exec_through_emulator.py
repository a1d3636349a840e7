"""exec and spawn through the Daytona emulator: large outputs, and kept exec sessions.

Large outputs: every byte exactly once, up to exec's ``max_bytes``.
``exec`` holds its output in memory (with ``max_bytes=None``, the adapter's default, any
amount): 100 MB of random bytes (after their digest, written to stderr first) come back
whole, checked by size and digest; past ``max_bytes`` it is ``Truncated``.
``spawn`` follows the log as a stream: its frames add up to the exact bytes, in
order. Each runs in a few seconds on 2 cores (measured: about 6 s for the exec), so
both run in the default suite.

A missing ``dir`` is ``Invalid`` for exec and spawn alike, as on local; a spawn's
relative ``dir`` is entered once, from the sandbox's working directory.

Kept exec sessions: what one exec leaves running in its session never reaches the
output of the next exec there. The first exec leaves a writer behind that waits for a
gate file, then writes to the stdout it inherited and marks that it has written. The
second exec (same sandbox, so the same kept session) opens the gate and waits in the
sandbox for the mark, so the late write happens while the second exec runs: the order
is forced, no race is won by timing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest

from managoat_sandbox import reasons
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.errors import Invalid, Truncated
from managoat_sandbox.frames import Exit, Stderr, Stdout
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.providers.daytona.shim import SWEEP_EVERY
from managoat_sandbox.testing.mailbox import Mailbox, is_terminal
from managoat_sandbox.types import Handle

from ..bash_fixtures import after_main_exits
from ..conftest import wait_until
from .emulated import serving

pytestmark = pytest.mark.timeout(120)

MB = 1_000_000
#: Writes ``size`` random bytes to a file, prints its digest on stderr, then the file.
PRODUCER = (
    "head -c {size} /dev/urandom > blob; sha256sum < blob | cut -c1-64 >&2; cat blob; rm -f blob"
)
WAIT_FOR = "i=0; while [ ! -e {path} ]; do i=$((i+1)); [ $i -lt 2000 ] || exit 9; sleep 0.01; done"
#: A daemon started as the docs say (its output redirected), which writes once a later
#: exec lets it: it must not hold its exec open, nor write into the later one.
LEAVER = (
    "( "
    + WAIT_FOR.format(path="gate")
    + "; echo LATE-WRITE-FROM-AN-EARLIER-EXEC; : > written ) >daemon.log 2>&1 &"
)
SECOND = "touch gate; " + WAIT_FOR.format(path="written") + "; echo mine"
#: A background child that keeps the exec's output and writes after the main exits.
HOLDER = after_main_exits("echo early", "echo late; echo late-err >&2")


@pytest.fixture
def daytona(emulator: DaytonaEmulator) -> Iterator[Daytona]:
    with serving(emulator) as adapter:
        yield adapter


@pytest.fixture
def handle(daytona: Daytona, request: pytest.FixtureRequest) -> Handle:
    return daytona.create(f"large-{request.node.name[:40]}")


def test_a_hundred_megabytes_come_back_whole_from_exec(daytona: Daytona, handle: Handle) -> None:
    size = 100 * MB
    result = daytona.exec(
        handle, "bash", ["-c", PRODUCER.format(size=size)], timeout=90, stderr_to_stdout=True
    )
    assert result.exit_code == 0
    digest, blob = result.output[:65], result.output[65:]
    assert len(blob) == size
    assert hashlib.sha256(blob).hexdigest().encode() + b"\n" == digest


def test_an_answer_too_large_for_max_bytes_is_left_for_the_log_and_truncated(
    daytona: Daytona, handle: Handle, emulator: DaytonaEmulator
) -> None:
    """An answer longer than ``ANSWER_FACTOR`` times ``max_bytes`` is abandoned as it
    arrives: the command is followed over its log, where its output stops at
    ``max_bytes`` with ``Truncated`` and its session is deleted."""
    limit = 64 * 1024
    emulator.clear_requests()
    with pytest.raises(Truncated) as caught:
        daytona.exec(handle, "bash", ["-c", f"head -c {4 * MB} /dev/zero"], max_bytes=limit)
    assert caught.value.detail == (reasons.MAX_BYTES, limit)
    paths = [(r.method, r.path) for r in emulator.requests]
    assert any(path.endswith("/logs") for _, path in paths), "the log was not followed"
    assert any(method == "DELETE" and "/process/session/" in path for method, path in paths)
    result = daytona.exec(handle, "bash", ["-c", f"head -c {limit} /dev/zero"], max_bytes=limit)
    assert result.output == bytes(limit)


def test_a_large_spawned_stream_arrives_exactly_once_in_order(
    daytona: Daytona, handle: Handle
) -> None:
    size = 20 * MB
    box = Mailbox()
    command = daytona.spawn(handle, "bash", ["-c", PRODUCER.format(size=size)], owner=box)
    try:
        box.expect(is_terminal(command.ref), 90)
    finally:
        daytona.stop_command(command)
    frames = box.history(command.ref)
    out = b"".join(f.data for f in frames if isinstance(f, Stdout))
    err = b"".join(f.data for f in frames if isinstance(f, Stderr))
    assert frames[-1] == Exit(command.ref, 0)
    assert len(out) == size
    assert hashlib.sha256(out).hexdigest().encode() + b"\n" == err


@pytest.mark.parametrize("merge", [False, True])
def test_a_daemon_with_its_output_redirected_neither_holds_its_exec_nor_writes_into_a_later_one(
    daytona: Daytona, handle: Handle, merge: bool
) -> None:
    first = daytona.exec(handle, "sh", ["-c", LEAVER], timeout=20, stderr_to_stdout=merge)
    assert (first.output, first.exit_code) == (b"", 0)
    second = daytona.exec(handle, "sh", ["-c", SECOND], timeout=30, stderr_to_stdout=merge)
    assert (second.output, second.exit_code) == (b"mine\n", 0)
    log = daytona.exec(handle, "cat", ["daemon.log"], timeout=20)
    assert log.output == b"LATE-WRITE-FROM-AN-EARLIER-EXEC\n"


def test_an_exec_ends_when_a_background_child_closes_its_output(
    daytona: Daytona, handle: Handle
) -> None:
    apart = daytona.exec(handle, "sh", ["-c", HOLDER], timeout=20)
    assert (apart.output, apart.stderr, apart.exit_code) == (b"early\nlate\n", b"late-err\n", 0)
    merged = daytona.exec(handle, "sh", ["-c", HOLDER], timeout=20, stderr_to_stdout=True)
    assert (merged.output, merged.exit_code) == (b"early\nlate\nlate-err\n", 0)
    # The kept session runs the next exec as before.
    assert daytona.exec(handle, "echo", ["next"], timeout=20) == (b"next\n", 0)


@pytest.mark.parametrize("cmd", ["no-such-command-mg", "/no/such/program"])
def test_a_command_not_found_is_127_told_by_the_shell_not_by_setsid(
    daytona: Daytona, handle: Handle, cmd: str
) -> None:
    """The shim starts commands through ``setsid``; one it cannot find is left to the shell
    (as it was before), so the message names the command, not the shim's helper."""
    result = daytona.exec(handle, cmd, ["x"], timeout=20)
    assert result.exit_code == 127
    assert cmd.encode() in result.stderr and b"setsid" not in result.stderr, result.stderr
    box = Mailbox()
    command = daytona.spawn(handle, cmd, ["x"], owner=box)
    end = box.expect(is_terminal(command.ref), 20)
    assert end == Exit(command.ref, 127)
    stderr = b"".join(f.data for f in box.history(command.ref) if isinstance(f, Stderr))
    assert cmd.encode() in stderr and b"setsid" not in stderr, stderr


def test_an_exec_in_a_missing_dir_is_invalid_as_on_local(daytona: Daytona, handle: Handle) -> None:
    with pytest.raises(Invalid) as caught:
        daytona.exec(handle, "pwd", [], dir="/no/such/dir")
    assert caught.value.detail == ("dir", "'/no/such/dir' is not a directory in the sandbox")
    # The kept session is fine: a relative dir, after an earlier failed one, still works.
    assert daytona.exec(handle, "sh", ["-c", "mkdir -p sub"]).exit_code == 0
    assert daytona.exec(handle, "sh", ["-c", "basename $PWD"], dir="sub") == (b"sub\n", 0)


def test_a_spawn_in_a_missing_dir_is_invalid_and_leaves_no_session(
    daytona: Daytona, handle: Handle
) -> None:
    with pytest.raises(Invalid) as caught:
        daytona.spawn(handle, "pwd", [], dir="/no/such/dir")
    assert caught.value.reason is reasons.Reason.DIR
    assert caught.value.problem == reasons.no_such_dir("/no/such/dir")
    assert daytona.list_sessions(handle) == []


def test_a_spawn_in_a_relative_dir_runs_there(daytona: Daytona, handle: Handle) -> None:
    home = daytona.exec(handle, "pwd").output.rstrip(b"\n")
    assert daytona.exec(handle, "mkdir", ["-p", "sub"]).exit_code == 0
    box = Mailbox()
    command = daytona.spawn(handle, "pwd", [], owner=box, dir="sub")
    assert box.expect(is_terminal(command.ref), 30) == Exit(command.ref, 0)
    stdout = b"".join(f.data for f in box.history(command.ref) if isinstance(f, Stdout))
    assert stdout == home + b"/sub\n"
    # The session also ran the cd into the dir; it is never taken for the command.
    assert [s.command for s in daytona.list_sessions(handle)] == ["pwd"]
    replay = Mailbox()
    attached = daytona.attach(handle, command.session_id or "", owner=replay)
    assert replay.expect(is_terminal(attached.ref), 30) == Exit(attached.ref, 0)
    replayed = b"".join(f.data for f in replay.history(attached.ref) if isinstance(f, Stdout))
    assert replayed == stdout


def test_what_an_exec_does_stays_out_of_the_kept_session(daytona: Daytona, handle: Handle) -> None:
    """The exec script runs in the session shell itself; its command runs in a child
    shell, so a dir, an env or an ``exit`` never reaches the next exec there."""
    home = daytona.exec(handle, "pwd").output
    assert daytona.exec(handle, "mkdir", ["-p", "sub"]).exit_code == 0
    assert daytona.exec(handle, "pwd", dir="sub").output == home.rstrip(b"\n") + b"/sub\n"
    script = "echo ${X-unset}; exit 7"
    assert daytona.exec(handle, "sh", ["-c", script], env={"X": "1"}) == (b"1\n", 7)
    assert daytona.exec(handle, "sh", ["-c", "pwd; echo ${X-unset}"]) == (home + b"unset\n", 0)
    assert len(daytona._pools[handle.name]._idle) == 1, "all in one kept session"


def test_capture_files_with_output_go_at_once_and_empty_ones_at_the_sweep(
    daytona: Daytona, handle: Handle
) -> None:
    daytona.exec(handle, "true")
    (session,) = daytona._pools[handle.name]._idle
    state = f"/tmp/managoat/{session.id}"

    def captures() -> list[str]:
        found = daytona.list_files(handle, state)
        return sorted(entry.name for entry in found if entry.name[:2] in ("o.", "e."))

    assert len(captures()) == 2, "an exec without output leaves its two empty files"
    assert daytona.exec(handle, "echo", ["x"]) == (b"x\n", 0)
    assert wait_until(lambda: len(captures()) == 2), "the files with output are removed"
    for _ in range(SWEEP_EVERY - session.sent):
        assert daytona.exec(handle, "true").exit_code == 0
    assert session.sent % SWEEP_EVERY == 0
    assert wait_until(lambda: captures() == []), "the sweep removed every capture file"
