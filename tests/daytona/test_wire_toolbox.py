"""Wire contract of the Daytona toolbox: sessions, the shim, the log follower (split
markers, per-stream byte de-duplication, the real exit or an error), stdin, attach,
exec, files and session termination."""

from __future__ import annotations

import base64
import json
import re
import shlex
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import responses

from managoat_sandbox.errors import (
    CommandExited,
    Invalid,
    NotFound,
    NotSupported,
    Unavailable,
    WriteFailed,
)
from managoat_sandbox.frames import Error, Exit, Stderr, Stdout
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.providers.daytona.logs import Demux, FramedChannel, RawChannel
from managoat_sandbox.testing.mailbox import Mailbox, is_terminal
from managoat_sandbox.types import Command, Handle

from ..conftest import wait_until
from .conftest import API, TOOLBOX, sandbox

OUT = b"\x01\x01\x01"
ERR = b"\x02\x02\x02"


def framed(data: bytes) -> bytes:
    """One output chunk as the shim frames it (a journal line after its marker)."""
    return b":" + base64.b64encode(data) + b"\n"

Reply = tuple[int, dict[str, str], str]


class FakeCommand:
    """One toolbox command served through ``responses``: a journal and an exit record.

    ``journals`` are served in turn (the last one repeats); ``exit_after`` is how many
    command-record reads answer without ``exitCode`` before ``code`` appears
    (``None``: never). ``record_status`` overrides the record's status.
    """

    def __init__(self, mocked: responses.RequestsMock, *, session: str = r"mg[sx]-[0-9a-f]+",
                 command_id: str = "cmd-1") -> None:
        self.journals: list[bytes] = [b""]
        self.code: int | None = 0
        self.exit_after: int | None = 0
        self.record_status = 200
        self.record_reads = 0
        self.log_reads = 0
        self.inputs: list[str] = []
        self.input_status = 204
        self.executes: list[str] = []
        self.execute_reply: Callable[[str], Reply] = lambda _: (
            200, {}, json.dumps({"exitCode": 0, "result": ""}))
        self.exec_bodies: list[dict[str, Any]] = []
        self.sessions: list[str] = []
        self.deleted: list[str] = []
        self.log_headers: list[dict[str, str]] = []
        prefix = re.escape(TOOLBOX)
        command = prefix + rf"/process/session/({session})/command/{re.escape(command_id)}"
        mocked.get(f"{API}/sandbox/box", json=sandbox())
        mocked.add_callback("POST", TOOLBOX + "/process/session", callback=self._session)
        mocked.add_callback("POST", re.compile(prefix + rf"/process/session/({session})/exec"),
                            callback=lambda r: self._exec(r, command_id))
        mocked.add_callback("GET", re.compile(command + "$"), callback=self._record)
        mocked.add_callback("GET", re.compile(command + "/logs$"), callback=self._logs)
        mocked.add_callback("POST", re.compile(command + "/input$"), callback=self._input)
        mocked.add_callback("POST", TOOLBOX + "/process/execute", callback=self._execute)
        mocked.add_callback("DELETE", re.compile(prefix + rf"/process/session/({session})$"),
                            callback=self._delete)

    def _session(self, request: Any) -> Reply:
        self.sessions.append(json.loads(request.body)["sessionId"])
        return 201, {}, ""

    def _exec(self, request: Any, command_id: str) -> Reply:
        self.exec_bodies.append(json.loads(request.body))
        return 202, {}, json.dumps({"cmdId": command_id, "output": None, "exitCode": None})

    def _record(self, request: Any) -> Reply:
        self.record_reads += 1
        if self.record_status != 200:
            return self.record_status, {}, json.dumps({"message": "not found: session not found"})
        body: dict[str, Any] = {"id": "cmd-1", "command": "x"}
        if self.exit_after is not None and self.record_reads > self.exit_after:
            body["exitCode"] = self.code
        return 200, {}, json.dumps(body)

    def _logs(self, request: Any) -> tuple[int, dict[str, str], bytes]:
        self.log_headers.append(dict(request.headers))
        journal = self.journals[min(self.log_reads, len(self.journals) - 1)]
        self.log_reads += 1
        if self.record_status != 200:
            return 404, {}, b'{"message": "not found"}'
        return 200, {"Content-Type": "text/plain"}, journal

    def _input(self, request: Any) -> Reply:
        self.inputs.append(json.loads(request.body)["data"])
        return self.input_status, {}, "" if self.input_status == 204 else '{"message":"gone"}'

    def _execute(self, request: Any) -> Reply:
        command = json.loads(request.body)["command"]
        self.executes.append(command)
        return self.execute_reply(command)

    def _delete(self, request: Any) -> Reply:
        self.deleted.append(request.url.rsplit("/", 1)[-1])
        return 204, {}, ""


@pytest.fixture
def fake(mocked: responses.RequestsMock) -> FakeCommand:
    return FakeCommand(mocked)


def handle_of(daytona: Daytona) -> Handle:
    return daytona.build_handle("box")


def run(daytona: Daytona, **opts: Any) -> tuple[Command, Mailbox]:
    box = Mailbox()
    command = daytona.spawn(handle_of(daytona), "bash", ["-lc", "it's fine"], owner=box, **opts)
    return command, box


def finish(daytona: Daytona, command: Command, box: Mailbox) -> list[Any]:
    """The command's frames up to its terminal one (which must be the last)."""
    box.expect(is_terminal(command.ref), 5)
    box.refute(is_terminal(command.ref), 0.05)
    daytona.stop_command(command)
    frames = box.history(command.ref)
    assert [f for f in frames if f.terminal] == [frames[-1]]
    return frames


def stdout_of(frames: list[Any]) -> bytes:
    return b"".join(f.data for f in frames if isinstance(f, Stdout))


def stderr_of(frames: list[Any]) -> bytes:
    return b"".join(f.data for f in frames if isinstance(f, Stderr))


# -- the demultiplexer ------------------------------------------------------------


def test_demux_splits_channels_by_marker() -> None:
    assert Demux.split(OUT + b"one\n" + ERR + b"err\n" + OUT + b"two\n") == (
        b"one\ntwo\n", b"err\n")


def test_demux_gives_bytes_before_any_marker_to_stdout() -> None:
    assert Demux.split(b"plain combined text\n") == (b"plain combined text\n", b"")


def test_demux_keeps_a_lone_marker_byte_followed_by_data_as_content() -> None:
    assert Demux.split(OUT + b"\x01x\n") == (b"\x01x\n", b"")


def test_demux_holds_back_a_partial_marker_until_it_is_completed() -> None:
    first = Demux.split(OUT + b"out" + b"\x02\x02")
    second = Demux.split(OUT + b"out" + ERR + b"err")
    assert first == (b"out", b"")
    assert second == (b"out", b"err")
    assert Demux.split(OUT + b"out\x02\x02", final=True) == (b"out\x02\x02", b"")


def test_demux_of_nothing_is_nothing() -> None:
    assert Demux.split(b"") == (b"", b"")


def test_framed_channels_decode_complete_frames_only_and_exactly_once() -> None:
    channel = FramedChannel()
    stream = framed(b"no newline") + framed(b"\x00\r\n")
    assert channel.feed(stream[:5], final=False) == b""
    assert channel.feed(stream[:20], final=False) == b"no newline"
    assert channel.feed(stream[:3], final=False) == b""
    assert channel.feed(stream, final=False) == b"\x00\r\n"
    assert channel.feed(stream, final=True) == b""
    assert not channel.ended
    assert channel.feed(stream + b":\n", final=False) == b""
    assert channel.ended


def test_a_foreign_session_is_followed_as_raw_bytes() -> None:
    channel = RawChannel()
    assert channel.feed(b"abc", final=False) == b"abc"
    assert channel.feed(b"ab", final=False) == b""
    assert channel.feed(b"abcd", final=False) == b"d"


# -- spawn ----------------------------------------------------------------------------


def test_spawn_opens_a_session_and_runs_the_shim_asynchronously(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.journals = [OUT + framed(b"hi\n")]
    command, box = run(daytona)
    finish(daytona, command, box)
    (session,) = fake.sessions
    assert session.startswith("mgs-")
    (body,) = fake.exec_bodies
    assert body["runAsync"] is True and body["suppressInputEcho"] is True
    script = body["command"]
    head, tail = script.split("; ", 1)
    assert head.startswith(": managoat-argv=")
    program, flag, inner = shlex.split(tail)
    assert (program, flag) == ("/bin/sh", "-c")
    assert "( exec bash -lc 'it'\"'\"'s fine' ) </dev/null" in inner
    assert "base64 -d" not in script, "no stdin relay without stdin"
    assert all(h.get("X-Daytona-Split-Output") == "true" for h in fake.log_headers)


def test_the_shim_ends_its_own_shell_never_the_session_shell(
    daytona: Daytona, fake: FakeCommand
) -> None:
    command, box = run(daytona, stdin=True)
    finish(daytona, command, box)
    script = fake.exec_bodies[0]["command"]
    head, inner = script.split("; /bin/sh -c ", 1)
    assert head.startswith(": managoat-argv=")
    assert inner.startswith("'") and inner.endswith("'"), "the whole shim is one sh -c argument"
    assert "mkfifo" in inner and "base64 -d" in inner


def test_output_is_split_by_stream_and_ends_in_the_recorded_exit(
    daytona: Daytona, fake: FakeCommand
) -> None:
    one, err, two, bang = (OUT + framed(b"one\n"), ERR + framed(b"err"), OUT + framed(b"two"),
                           OUT + framed(b"!"))
    fake.journals = [one, one + err + two, one + err + two + bang]
    fake.code, fake.exit_after = 7, 2
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert stdout_of(frames) == b"one\ntwo!"
    assert stderr_of(frames) == b"err"
    assert frames[-1] == Exit(command.ref, 7)


def test_a_replayed_shorter_prefix_delivers_no_byte_twice(
    daytona: Daytona, fake: FakeCommand
) -> None:
    full = (OUT + framed(b"abc") + ERR + framed(b"e1\n") + OUT + framed(b"\x00def\n")
            + ERR + framed(b"e2"))
    fake.journals = [full[:9], full[:22], full[:5], full[:30], full[:12], full]
    fake.exit_after = 6
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert stdout_of(frames) == b"abc\x00def\n"
    assert stderr_of(frames) == b"e1\ne2"
    assert frames[-1] == Exit(command.ref, 0)


END = OUT + b":\n" + ERR + b":\n"


def test_a_stale_read_after_the_exit_is_read_again_until_both_end_frames(
    daytona: Daytona, fake: FakeCommand
) -> None:
    full = OUT + framed(b"first\n") + ERR + framed(b"oops\n") + OUT + framed(b"last") + END
    fake.journals = [full[:14], full[:14], full]
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert stdout_of(frames) == b"first\nlast"
    assert stderr_of(frames) == b"oops\n"
    assert fake.log_reads == 3


def test_a_complete_log_is_read_once_after_the_exit(daytona: Daytona, fake: FakeCommand) -> None:
    fake.journals = [OUT + framed(b"all") + END]
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert stdout_of(frames) == b"all"
    assert fake.log_reads == 1


def test_lines_the_shim_did_not_frame_pass_through_as_text(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.journals = [ERR + b"mkfifo: cannot create fifo\n" + OUT + framed(b"ok")]
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert (stdout_of(frames), stderr_of(frames)) == (b"ok", b"mkfifo: cannot create fifo\n")


def test_the_json_log_shape_is_accepted(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get(f"{API}/sandbox/box", json=sandbox())
    mocked.post(TOOLBOX + "/process/session", status=201)
    mocked.post(re.compile(re.escape(TOOLBOX) + r"/process/session/mgs-\w+/exec"),
                status=202, json={"commandId": "cmd-9"})
    base = re.escape(TOOLBOX) + r"/process/session/mgs-\w+/command/cmd-9"
    mocked.get(re.compile(base + "$"), json={"id": "cmd-9", "exitCode": 9})
    mocked.get(re.compile(base + "/logs$"), json={
        "stdout": framed(b"out").decode(), "stderr": framed(b"\xff err").decode()})
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert (stdout_of(frames), stderr_of(frames)) == (b"out", b"\xff err")
    assert frames[-1] == Exit(command.ref, 9)


def test_a_vanished_session_without_an_exit_is_closed_before_exit_never_exit_zero(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.journals = [OUT + framed(b"partial")]
    fake.exit_after = None
    command, box = run(daytona)
    box.expect(lambda f: isinstance(f, Stdout), 5)
    fake.record_status = 404
    frames = finish(daytona, command, box)
    assert frames[-1] == Error(command.ref, Unavailable("closed_before_exit"))
    assert not any(isinstance(f, Exit) for f in frames)
    assert any("/code" in c for c in fake.executes), "the shim's own record was consulted"


def test_an_exit_the_daemon_never_recorded_is_recovered_from_the_sentinel(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.journals = [OUT + framed(b"done\n") + END]
    fake.exit_after = None
    fake.execute_reply = lambda cmd: (200, {}, json.dumps(
        {"exitCode": 0, "result": "23\n" if "/code" in cmd else ""}))
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert stdout_of(frames) == b"done\n"
    assert frames[-1] == Exit(command.ref, 23)


def test_a_shim_that_died_without_a_code_is_closed_before_exit_after_its_output(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.journals = [OUT + framed(b"last words\n")]
    fake.exit_after = None
    fake.execute_reply = lambda cmd: (200, {}, json.dumps(
        {"exitCode": 0, "result": "gone\n" if "kill -0" in cmd else ""}))
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert stdout_of(frames) == b"last words\n"
    assert frames[-1] == Error(command.ref, Unavailable("closed_before_exit"))


@pytest.mark.parametrize("junk", ["running", "", "not-an-exit-code"])
def test_a_probe_without_a_code_keeps_the_command_running(
    daytona: Daytona, fake: FakeCommand, junk: str
) -> None:
    fake.exit_after = None
    fake.execute_reply = lambda _: (200, {}, json.dumps({"exitCode": 0, "result": junk}))
    command, box = run(daytona)
    assert wait_until(lambda: len(fake.executes) >= 2, 5)
    box.refute(is_terminal(command.ref), 0.05)
    daytona.stop_command(command)


def test_an_unreachable_toolbox_ends_the_stream_with_its_error_after_the_budget(
    mocked: responses.RequestsMock, daytona: Daytona, fake: FakeCommand
) -> None:
    fake.exit_after = None
    command, box = run(daytona)
    fake.record_status = 503
    frames = finish(daytona, command, box)
    assert isinstance(frames[-1], Error)
    assert isinstance(frames[-1].reason, Unavailable)


def test_stop_command_silences_the_follower_and_is_idempotent(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.exit_after = None
    command, box = run(daytona)
    assert wait_until(lambda: fake.log_reads >= 1, 5)
    daytona.stop_command(command)
    daytona.stop_command(command)
    box.clear()
    reads = fake.log_reads
    box.refute(lambda f: True, 0.1)
    assert fake.log_reads <= reads + 1


def test_spawn_with_a_tty_is_not_supported(daytona: Daytona) -> None:
    with pytest.raises(NotSupported):
        daytona.spawn(handle_of(daytona), "bash", tty=True)


def test_a_failed_exec_deletes_the_session_and_starts_no_follower(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get(f"{API}/sandbox/box", json=sandbox())
    mocked.post(TOOLBOX + "/process/session", status=201)
    mocked.post(re.compile(re.escape(TOOLBOX) + r"/process/session/mgs-\w+/exec"), status=418,
                body="teapot")
    deleted = mocked.delete(re.compile(re.escape(TOOLBOX) + r"/process/session/mgs-\w+$"),
                            status=204)
    before = threading.active_count()
    with pytest.raises(Invalid) as caught:
        daytona.spawn(handle_of(daytona), "true", owner=Mailbox())
    assert caught.value.detail == ("http", 418, "teapot")
    assert deleted.call_count == 1
    assert threading.active_count() == before


# -- stdin ------------------------------------------------------------------------------


def test_stdin_goes_through_the_input_endpoint_as_exact_base64_lines(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.exit_after = None
    command, _ = run(daytona, stdin=True)
    daytona.write_stdin(command, [b"no newline\x00", "é"])
    (data,) = fake.inputs
    assert data.endswith("\n")
    assert base64.b64decode(data.strip()) == b"no newline\x00" + "é".encode()
    daytona.stop_command(command)


def test_stdin_after_the_command_completed_is_command_exited(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.exit_after = None
    fake.input_status = 410
    command, _ = run(daytona, stdin=True)
    with pytest.raises(CommandExited):
        daytona.write_stdin(command, "late")
    daytona.stop_command(command)


def test_any_other_stdin_failure_is_write_failed(daytona: Daytona, fake: FakeCommand) -> None:
    fake.exit_after = None
    fake.input_status = 500
    command, _ = run(daytona, stdin=True)
    with pytest.raises(WriteFailed):
        daytona.write_stdin(command, "x")
    daytona.stop_command(command)


def test_stdin_was_not_opened(daytona: Daytona, fake: FakeCommand) -> None:
    fake.exit_after = None
    command, _ = run(daytona)
    with pytest.raises(Invalid) as caught:
        daytona.write_stdin(command, "x")
    assert caught.value.detail == "stdin_not_open"
    daytona.stop_command(command)
    with pytest.raises(CommandExited):
        daytona.write_stdin(command, "x")


def test_close_stdin_ends_the_relay_in_band(daytona: Daytona, fake: FakeCommand) -> None:
    fake.exit_after = None
    command, _ = run(daytona, stdin=True)
    daytona.write_stdin(command, "x")
    daytona.close_stdin(command)
    daytona.close_stdin(command)
    assert fake.inputs[-1] == "\n" and len(fake.inputs) == 2
    assert not fake.executes
    daytona.stop_command(command)
    with pytest.raises(CommandExited):
        daytona.close_stdin(command)


def test_close_stdin_kills_the_relay_when_the_line_cannot_be_sent_and_never_raises(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.exit_after = None
    fake.input_status = 500
    fake.execute_reply = lambda _: (503, {}, "down")
    command, _ = run(daytona, stdin=True)
    daytona.close_stdin(command)
    kills = [c for c in fake.executes if c.startswith("kill")]
    assert kills and "/relay" in kills[0]
    daytona.stop_command(command)


# -- exec ---------------------------------------------------------------------------------


def test_exec_collects_stdout_with_the_real_code_and_deletes_its_session(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.journals = [OUT + framed(b"out\n") + ERR + framed(b"err\n")]
    fake.code = 3
    result = daytona.exec(handle_of(daytona), "bash", ["-lc", "x"], env={"A": "1"}, dir="/w")
    assert result == (b"out\n", 3)
    (session,) = fake.sessions
    assert session.startswith("mgx-") and fake.deleted == [session]
    script = fake.exec_bodies[0]["command"]
    assert "cd /w" in script and "export A=1" in script


def test_exec_merges_stderr_only_when_asked(daytona: Daytona, fake: FakeCommand) -> None:
    fake.journals = [OUT + framed(b"out\n") + ERR + framed(b"err\n")]
    result = daytona.exec(handle_of(daytona), "x", stderr_to_stdout=True)
    assert result.output == b"out\nerr\n"


def test_exec_with_no_time_left_dispatches_nothing(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    with pytest.raises(Unavailable) as caught:
        daytona.exec(handle_of(daytona), "x", timeout=0)
    assert caught.value.detail == ("exec_timeout", 0)
    assert len(mocked.calls) == 0


def test_exec_of_a_command_closed_before_exit_raises(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.record_status = 404
    with pytest.raises(Unavailable) as caught:
        daytona.exec(handle_of(daytona), "x")
    assert caught.value.detail == "closed_before_exit"


def test_an_invalid_env_name_is_invalid_before_any_toolbox_call(
    daytona: Daytona, fake: FakeCommand
) -> None:
    with pytest.raises(Invalid):
        daytona.exec(handle_of(daytona), "x", env={"A-B": "1"})
    assert not fake.sessions


# -- sessions and attach -------------------------------------------------------------------


def _sessions(mocked: responses.RequestsMock, answer: object) -> None:
    mocked.get(TOOLBOX + "/process/session", json=answer)


def test_list_sessions_lists_spawned_sessions_with_their_command_line(
    mocked: responses.RequestsMock, daytona: Daytona, fake: FakeCommand
) -> None:
    command, box = run(daytona)
    finish(daytona, command, box)
    script = fake.exec_bodies[0]["command"]
    _sessions(mocked, [
        {"sessionId": "mgs-1", "commands": [{"id": "c", "command": script}]},
        {"sessionId": "mgs-2", "commands": []},
        {"sessionId": "mgx-3", "commands": []},
        {"sessionId": "user-made", "commands": []},
    ])
    sessions = daytona.list_sessions(handle_of(daytona))
    assert [(s.id, s.command) for s in sessions] == [
        ("mgs-1", "bash -lc it's fine"), ("mgs-2", None)]


def test_a_parked_sandbox_has_no_sessions_and_nothing_to_attach(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get(f"{API}/sandbox/box", json=sandbox(state="stopped"))
    assert daytona.list_sessions(handle_of(daytona)) == []
    with pytest.raises(NotFound):
        daytona.attach(handle_of(daytona), "mgs-1")
    assert [c.request.method for c in mocked.calls] == ["GET", "GET"]


def test_attach_replays_from_byte_zero_then_the_real_exit_and_is_not_connected(
    mocked: responses.RequestsMock, daytona: Daytona, fake: FakeCommand
) -> None:
    fake.journals = [OUT + framed(b"one\n") + ERR + framed(b"e\n") + OUT + framed(b"two\n")]
    fake.code = 3
    mocked.get(TOOLBOX + "/process/session/mgs-42",
               json={"sessionId": "mgs-42", "commands": [{"id": "old"}, {"id": "cmd-1"}]})
    box = Mailbox()
    command = daytona.attach(handle_of(daytona), "mgs-42", owner=box, stdin=True)
    frames = finish(daytona, command, box)
    assert (stdout_of(frames), stderr_of(frames)) == (b"one\ntwo\n", b"e\n")
    assert frames[-1] == Exit(command.ref, 3)
    with pytest.raises(CommandExited):
        daytona.write_stdin(command, "late")


def test_attach_to_a_live_command_is_connected(
    mocked: responses.RequestsMock, daytona: Daytona, fake: FakeCommand
) -> None:
    fake.exit_after = None
    mocked.get(TOOLBOX + "/process/session/mgs-42",
               json={"sessionId": "mgs-42", "commands": [{"cmdId": "cmd-1"}]})
    command = daytona.attach(handle_of(daytona), "mgs-42", owner=Mailbox(), stdin=True)
    daytona.write_stdin(command, "more")
    assert len(fake.inputs) == 1
    daytona.stop_command(command)


@pytest.mark.parametrize(
    ("status", "answer"),
    [(404, {"message": "not found: session not found"}),
     (500, {"statusCode": 500,
            "message": "failed to execute command: not found: session not found"}),
     (200, {"sessionId": "mgs-42", "commands": []})],
)
def test_attach_to_an_unknown_or_empty_session_is_not_found(
    mocked: responses.RequestsMock, daytona: Daytona, status: int, answer: object
) -> None:
    mocked.get(f"{API}/sandbox/box", json=sandbox())
    mocked.get(TOOLBOX + "/process/session/mgs-42", status=status, json=answer)
    with pytest.raises(NotFound):
        daytona.attach(handle_of(daytona), "mgs-42")


# -- files and termination ---------------------------------------------------------------


def test_write_file_bulk_uploads_the_flattened_bytes_then_sets_the_mode(
    mocked: responses.RequestsMock, daytona: Daytona, fake: FakeCommand
) -> None:
    mocked.post(TOOLBOX + "/files/bulk-upload", json={"files": [{"path": "/w/f", "bytes": 5}]})
    daytona.write_file(handle_of(daytona), "/work/dir/file.txt", ["ab", b"c", [b"de"]], mode=0o600)
    upload = next(c for c in mocked.calls if c.request.url.endswith("/files/bulk-upload"))
    body = upload.request.body
    assert isinstance(body, bytes)
    assert b'name="files[0].path"' in body and b"/work/dir/file.txt" in body
    assert b'name="files[0].file"; filename="file.txt"' in body and b"abcde" in body
    assert body.index(b"files[0].path") < body.index(b"files[0].file")
    assert fake.executes == ["chmod 600 /work/dir/file.txt"]


def test_write_file_failure_keeps_a_non_json_body(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get(f"{API}/sandbox/box", json=sandbox())
    mocked.post(TOOLBOX + "/files/bulk-upload", status=418, body="upload")
    with pytest.raises(Invalid) as caught:
        daytona.write_file(handle_of(daytona), "/f", b"x")
    assert caught.value.detail == ("http", 418, "upload")


def test_terminate_session_deletes_it_and_a_missing_one_is_absence(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get(f"{API}/sandbox/box", json=sandbox())
    mocked.delete(TOOLBOX + "/process/session/mgs-1", status=204)
    mocked.delete(TOOLBOX + "/process/session/mgs-2", status=404, json={"message": "nope"})
    daytona.terminate_session(handle_of(daytona), "mgs-1", timeout=1)
    daytona.terminate_session(handle_of(daytona), "mgs-2", timeout=1)
    with pytest.raises(NotSupported):
        daytona.terminate_session(handle_of(daytona), "mgs-1", mode="force")


def test_terminate_session_failures_carry_no_provider_prose(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get(f"{API}/sandbox/box", json=sandbox())
    mocked.delete(TOOLBOX + "/process/session/mgs-1", status=503, json={"message": "prose"})
    with pytest.raises(Unavailable) as caught:
        daytona.terminate_session(handle_of(daytona), "mgs-1", timeout=1)
    assert caught.value.detail == ("http", 503, {})


def test_session_ids_in_urls_and_queries_are_exact(
    mocked: responses.RequestsMock, daytona: Daytona, fake: FakeCommand
) -> None:
    command, box = run(daytona)
    finish(daytona, command, box)
    (session,) = fake.sessions
    paths = {urlsplit(c.request.url).path for c in mocked.calls}
    assert f"/toolbox/sbx-1/process/session/{session}/command/cmd-1/logs" in paths
    assert all(not parse_qs(urlsplit(c.request.url).query)
               for c in mocked.calls if "/toolbox/" in c.request.url)
