"""Wire contract of the Daytona toolbox: the journal decoder, the shims, the log follower
(WebSocket follows finished from snapshots, per-stream byte de-duplication, the real exit
or an error), stdin, attach, exec in kept sessions, files and session termination.

HTTP is served by ``responses``; the WebSocket follows are scripted (:class:`Follows`):
each follow the adapter opens takes the next script, and with none left a follow cannot
be opened, so the log is read from snapshots alone.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import threading
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

import attrs
import pytest
import requests
import responses

from managoat_sandbox import reasons
from managoat_sandbox.errors import (
    CommandExited,
    Invalid,
    NotFound,
    NotSupported,
    Truncated,
    Unavailable,
    WriteFailed,
)
from managoat_sandbox.frames import Error, Exit, Stderr, Stdout
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.providers.daytona.ahead import SpareSessions
from managoat_sandbox.providers.daytona.decoder import STDERR, STDOUT, JournalDecoder
from managoat_sandbox.providers.daytona.follow import LogSocket
from managoat_sandbox.testing.mailbox import Mailbox, is_terminal
from managoat_sandbox.types import Command, Handle

from ..conftest import wait_until
from .conftest import API, FAST, KEY, TOOLBOX, sandbox

OUT = b"\x01\x01\x01"
ERR = b"\x02\x02\x02"
END = OUT + b":\n" + ERR + b":\n"


def framed(data: bytes) -> bytes:
    """One output chunk as the shim frames it (a journal line after its marker)."""
    return b":" + base64.b64encode(data) + b"\n"


def code(value: int) -> bytes:
    """The shim's exit-code frame (after the stdout end frame)."""
    return OUT + b"!%d\n" % value


Reply = tuple[int, dict[str, str], str]


# -- scripted WebSocket follows ---------------------------------------------------


class FakeSocket:
    """One scripted follow: ``items`` are read in turn (bytes, None for a close, or an
    exception to raise); once they run out it stays silent until aborted."""

    def __init__(self, items: list[Any]) -> None:
        self.items = list(items)
        self.aborted = threading.Event()
        self.closed = False
        self.pings = 0

    def read(self, timeout: float) -> bytes | None:
        if self.items:
            item = self.items.pop(0)
            if isinstance(item, BaseException):
                raise item
            return item  # type: ignore[no-any-return]
        if self.aborted.wait(timeout):
            return None
        raise TimeoutError

    def ping(self) -> None:
        self.pings += 1

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted.set()


class Follows:
    """The follows the adapter opens: the URL and headers of each, and their scripts."""

    def __init__(self) -> None:
        self.scripts: list[list[Any] | BaseException] = []
        self.opened: list[tuple[str, dict[str, str]]] = []
        self.sockets: list[FakeSocket] = []

    def open(
        self, url: str, headers: Mapping[str, str], *, timeout: float, transport: object = None
    ) -> FakeSocket:
        self.opened.append((url, dict(headers)))
        if not self.scripts:
            raise Unavailable((reasons.TRANSPORT, "ConnectionRefusedError"))
        script = self.scripts.pop(0)
        if isinstance(script, BaseException):
            raise script
        socket = FakeSocket(script)
        self.sockets.append(socket)
        return socket


@pytest.fixture(autouse=True)
def follows(monkeypatch: pytest.MonkeyPatch) -> Follows:
    scripted = Follows()
    monkeypatch.setattr(LogSocket, "open", scripted.open)
    return scripted


# -- one toolbox command served through responses --------------------------------


class FakeCommand:
    """One toolbox command: snapshots of its journal and its record.

    ``journals`` are served in turn by the log snapshot (the last one repeats);
    ``recorded`` is the ``exitCode`` of the record (``None``: running);
    ``record_status`` overrides the status of the record, and of the log unless
    ``log_status`` does.
    ``sync`` answers a synchronous exec (default: 200 with ``sync_journal``);
    ``exec_refusals`` answers any exec into the sessions it names; ``session_reply``
    answers session creations.
    """

    def __init__(
        self,
        mocked: responses.RequestsMock,
        *,
        session: str = r"mg[sx]-[0-9a-f]+",
        command_id: str = "cmd-1",
    ) -> None:
        self.journals: list[bytes] = [b""]
        self.recorded: int | None = None
        self.record_status = 200
        self.log_status: int | None = None
        self.record_reads = 0
        self.log_reads = 0
        self.inputs: list[str] = []
        self.input_status = 204
        self.executes: list[str] = []
        self.execute_reply: Callable[[str], Reply] = lambda _: (
            200,
            {},
            json.dumps({"exitCode": 0, "result": "running\n"}),
        )
        self.exec_bodies: list[dict[str, Any]] = []
        self.exec_headers: list[dict[str, str]] = []
        self.exec_refusals: dict[str, Reply] = {}
        self.session_reply: Reply = (201, {}, "")
        self.sync_journal = framed(b"") + END + code(0)
        self.sync: Callable[[dict[str, Any]], Reply] = self._sync_answer
        self.session_commands: list[dict[str, Any]] = []
        self.sessions: list[str] = []
        self.deleted: list[str] = []
        self.log_headers: list[dict[str, str]] = []
        self.calls: list[tuple[str, str]] = []
        prefix = re.escape(TOOLBOX)
        session_path = prefix + rf"/process/session/({session})"
        command = session_path + f"/command/{re.escape(command_id)}"
        self.command_id = command_id
        mocked.get(f"{API}/sandbox/box", json=sandbox())
        mocked.add_callback("POST", TOOLBOX + "/process/session", callback=self._session)
        mocked.add_callback("POST", re.compile(session_path + "/exec"), callback=self._exec)
        mocked.add_callback("GET", re.compile(session_path + "$"), callback=self._get_session)
        mocked.add_callback("GET", re.compile(command + "$"), callback=self._record)
        mocked.add_callback("GET", re.compile(command + "/logs$"), callback=self._logs)
        mocked.add_callback("POST", re.compile(command + "/input$"), callback=self._input)
        mocked.add_callback("POST", TOOLBOX + "/process/execute", callback=self._execute)
        mocked.add_callback("DELETE", re.compile(session_path + "$"), callback=self._delete)

    def _note(self, request: Any) -> None:
        self.calls.append((request.method, urlsplit(request.url).path))

    def _session(self, request: Any) -> Reply:
        self._note(request)
        self.sessions.append(json.loads(request.body)["sessionId"])
        return self.session_reply

    def _exec(self, request: Any) -> Reply:
        self._note(request)
        refused = self.exec_refusals.get(urlsplit(request.url).path.split("/")[-2])
        if refused is not None:
            return refused
        body = json.loads(request.body)
        self.exec_bodies.append(body)
        self.exec_headers.append(dict(request.headers))
        if body.get("runAsync"):
            return 202, {}, json.dumps({"cmdId": self.command_id, "output": None, "exitCode": None})
        return self.sync(body)

    def _sync_answer(self, body: dict[str, Any]) -> Reply:
        return (
            200,
            {},
            json.dumps(
                {
                    "cmdId": f"sync-{len(self.exec_bodies)}",
                    "output": self.sync_journal.decode("ascii"),
                    "exitCode": 0,
                }
            ),
        )

    def _get_session(self, request: Any) -> Reply:
        self._note(request)
        return 200, {}, json.dumps({"sessionId": "s", "commands": self.session_commands})

    def _record(self, request: Any) -> Reply:
        self._note(request)
        self.record_reads += 1
        if self.record_status != 200:
            return self.record_status, {}, json.dumps({"message": "not found: command not found"})
        body: dict[str, Any] = {"id": self.command_id, "command": "x"}
        if self.recorded is not None:
            body["exitCode"] = self.recorded
        return 200, {}, json.dumps(body)

    def _logs(self, request: Any) -> tuple[int, dict[str, str], bytes]:
        self._note(request)
        self.log_headers.append(dict(request.headers))
        journal = self.journals[min(self.log_reads, len(self.journals) - 1)]
        self.log_reads += 1
        status = self.record_status if self.log_status is None else self.log_status
        if status != 200:
            return status, {}, b'{"message": "not found"}'
        return 200, {"Content-Type": "text/plain"}, journal

    def _input(self, request: Any) -> Reply:
        self.inputs.append(json.loads(request.body)["data"])
        return self.input_status, {}, "" if self.input_status == 204 else '{"message":"gone"}'

    def _execute(self, request: Any) -> Reply:
        command = json.loads(request.body)["command"]
        self.executes.append(command)
        return self.execute_reply(command)

    def _delete(self, request: Any) -> Reply:
        self._note(request)
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


def output_of(events: list[tuple[int, bytes]], kind: int) -> bytes:
    return b"".join(data for which, data in events if which == kind)


# -- the journal decoder ----------------------------------------------------------


def test_the_journal_splits_its_channels_by_marker() -> None:
    read = JournalDecoder(framed=False).read()
    events = read.feed(OUT + b"one\n" + ERR + b"err\n" + OUT + b"two\n")
    assert (output_of(events, STDOUT), output_of(events, STDERR)) == (b"one\ntwo\n", b"err\n")


def test_bytes_before_any_marker_belong_to_stdout() -> None:
    events = JournalDecoder(framed=False).read().feed(b"plain combined text\n")
    assert events == [(STDOUT, b"plain combined text\n")]


def test_a_lone_marker_byte_followed_by_data_is_content() -> None:
    events = JournalDecoder(framed=False).read().feed(OUT + b"\x01x\n")
    assert events == [(STDOUT, b"\x01x\n")]


def test_a_partial_marker_is_held_back_until_the_next_bytes_show_what_it_is() -> None:
    decoder = JournalDecoder(framed=False)
    read = decoder.read()
    assert read.feed(OUT + b"out" + b"\x02\x02") == [(STDOUT, b"out")]
    assert read.feed(b"\x02err") == [(STDERR, b"err")]
    last = decoder.read()
    assert last.feed(OUT + b"out\x02\x02\x02err\x01\x01") == []
    assert last.finish() == [(STDERR, b"\x01\x01")]


def test_a_journal_of_nothing_is_nothing() -> None:
    assert JournalDecoder(framed=True).read().feed(b"") == []


def test_framed_channels_decode_complete_frames_only_and_each_byte_once() -> None:
    decoder = JournalDecoder(framed=True)
    stream = OUT + framed(b"no newline") + ERR + framed(b"\x00\r\n") + OUT + framed(b"more")
    assert decoder.read().feed(stream[:10]) == []
    assert decoder.read().feed(stream[:25]) == [(STDOUT, b"no newline")]
    assert decoder.read().feed(stream[:6]) == []
    assert decoder.read().feed(stream) == [(STDERR, b"\x00\r\n"), (STDOUT, b"more")]
    assert decoder.read().feed(stream) == []
    assert not decoder.complete


def test_the_end_frames_and_the_code_complete_a_framed_journal() -> None:
    decoder = JournalDecoder(framed=True)
    read = decoder.read()
    assert read.feed(OUT + b"!3\n") == [(STDOUT, b"!3\n")], "a code before the end is text"
    read.feed(OUT + b":\n" + code(7))
    assert decoder.code == 7 and not decoder.complete
    read.feed(ERR + b":\n")
    assert decoder.complete and decoder.code == 7


def test_lines_the_shim_did_not_frame_pass_through_as_text() -> None:
    read = JournalDecoder(framed=True).read()
    events = read.feed(ERR + b"mkfifo: cannot create\n" + ERR + b":%%\n")
    assert output_of(events, STDERR) == b"mkfifo: cannot create\n:%%\n"


def test_a_raw_channel_yields_only_what_a_read_adds() -> None:
    decoder = JournalDecoder(framed=False)
    assert decoder.read().feed(OUT + b"abc") == [(STDOUT, b"abc")]
    assert decoder.read().feed(OUT + b"ab") == []
    assert decoder.read().feed(OUT + b"abcd") == [(STDOUT, b"d")]
    assert decoder.consumed == 4


def test_channels_read_apart_are_deduplicated_alike() -> None:
    decoder = JournalDecoder(framed=True)
    assert decoder.split_read(framed(b"out"), b"") == [(STDOUT, b"out")]
    assert decoder.split_read(framed(b"out") + framed(b"!"), framed(b"\xff e")) == [
        (STDOUT, b"!"),
        (STDERR, b"\xff e"),
    ]


# -- spawn ----------------------------------------------------------------------------


def test_spawn_runs_the_shim_in_its_own_session_and_follows_its_log(
    daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    follows.scripts = [[OUT + framed(b"hi\n") + END + code(0)]]
    command, box = run(daytona)
    finish(daytona, command, box)
    session = fake.sessions[0]  # the next spawn's, made ahead, may follow
    assert session.startswith("mgs-") and command.session_id == session
    (body,) = fake.exec_bodies
    assert body["runAsync"] is True and body["suppressInputEcho"] is True
    script = body["command"]
    head, tail = script.split("; ", 1)
    assert head.startswith(": managoat-argv=")
    program, flag, inner = shlex.split(tail)
    assert (program, flag) == ("/bin/sh", "-c")
    assert (
        "( { command -v setsid >/dev/null 2>&1 && command -v bash >/dev/null 2>&1 "
        "&& __mg_own=setsid || __mg_own=; } && "
        "exec ${__mg_own} bash -lc 'it'\"'\"'s fine' ) </dev/null"
    ) in inner
    assert "base64 -d" not in script, "no stdin relay without stdin"
    ((url, headers),) = follows.opened
    assert url == (
        f"{TOOLBOX.replace('https', 'wss')}/process/session/{session}/command/cmd-1"
        "/logs?follow=true"
    )
    assert headers["X-Daytona-Split-Output"] == "true"
    assert headers["Authorization"] == f"Bearer {KEY}"


def _lookups(mocked: responses.RequestsMock) -> int:
    """How many times the sandbox was looked up on the control plane."""
    return sum(c.request.url == f"{API}/sandbox/box" for c in mocked.calls)


def _spare(fake: FakeCommand, made: int) -> str:
    """The session made ahead once ``made`` sessions were made by the spawns so far."""
    assert wait_until(lambda: len(fake.sessions) > made, 5), "no session was made ahead"
    return fake.sessions[made]


def test_a_warm_spawn_starts_its_command_in_the_session_made_ahead_for_it(
    mocked: responses.RequestsMock, daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    follows.scripts = [
        [END + code(0)],
        [OUT + framed(b"two\n") + ERR + framed(b"e") + END + code(3)],
    ]
    first, box = run(daytona)
    finish(daytona, first, box)
    spare = _spare(fake, 1)
    calls, lookups = len(fake.calls), _lookups(mocked)
    second, box = run(daytona)
    frames = finish(daytona, second, box)
    assert second.session_id == spare != first.session_id
    assert (stdout_of(frames), stderr_of(frames)) == (b"two\n", b"e")
    assert frames[-1] == Exit(second.ref, 3)
    assert fake.calls[calls] == ("POST", f"/toolbox/sbx-1/process/session/{spare}/exec"), (
        "the command's start is the spawn's first request"
    )
    assert _lookups(mocked) == lookups, "no sandbox lookup for a warm spawn"
    assert [b["runAsync"] for b in fake.exec_bodies] == [True, True], "each command ran once"


@pytest.mark.parametrize(
    ("refusal", "deleted"),
    [
        (
            (500, {}, '{"message": "failed to execute command: not found: session not found"}'),
            False,
        ),
        ((410, {}, '{"message": "gone: session process has exited"}'), True),
    ],
)
def test_a_session_made_ahead_that_the_daemon_refuses_is_replaced_and_the_command_runs_once(
    daytona: Daytona, fake: FakeCommand, follows: Follows, refusal: Reply, deleted: bool
) -> None:
    follows.scripts = [[END + code(0)], [OUT + framed(b"ran\n") + END + code(0)]]
    first, box = run(daytona)
    finish(daytona, first, box)
    spare = _spare(fake, 1)
    fake.exec_refusals[spare] = refusal
    second, box = run(daytona)
    frames = finish(daytona, second, box)
    assert second.session_id == fake.sessions[2] != spare, "a new session, made for it"
    assert stdout_of(frames) == b"ran\n" and frames[-1] == Exit(second.ref, 0)
    assert len(fake.exec_bodies) == 2, "the refused request ran nothing; the command ran once"
    assert fake.deleted == ([spare] if deleted else []), "a shell that ended is cleaned up"


def test_a_spawn_whose_kept_toolbox_says_the_sandbox_is_not_started_looks_it_up_afresh(
    mocked: responses.RequestsMock, daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    follows.scripts = [[END + code(0)], [END + code(0)]]
    first, box = run(daytona)
    finish(daytona, first, box)
    spare = _spare(fake, 1)
    fake.exec_refusals[spare] = (
        400,
        {},
        '{"message": "bad request: no IP address found. Is the Sandbox started?"}',
    )
    lookups = _lookups(mocked)
    second, box = run(daytona)
    assert finish(daytona, second, box)[-1] == Exit(second.ref, 0)
    assert _lookups(mocked) == lookups + 1, "looked up (and woken) afresh"
    assert second.session_id == fake.sessions[2] != spare
    assert fake.deleted == [], "a sandbox that is not running has no session to delete"


def test_a_spawn_into_a_sandbox_gone_under_its_kept_session_is_not_found(
    mocked: responses.RequestsMock, daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    follows.scripts = [[END + code(0)]]
    first, box = run(daytona)
    finish(daytona, first, box)
    spare = _spare(fake, 1)
    gone = (404, {}, json.dumps({"statusCode": 404, "message": "not found: sandbox not found"}))
    fake.exec_refusals[spare] = gone
    fake.session_reply = gone
    mocked.replace(
        responses.GET,
        f"{API}/sandbox/box",
        status=404,
        json={"message": "Sandbox with ID or name box not found"},
    )
    with pytest.raises(NotFound):
        run(daytona)
    assert len(fake.exec_bodies) == 1, "nothing was started"
    assert fake.deleted == []


def test_the_next_session_is_made_while_a_silent_command_still_runs(
    daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    follows.scripts = [[]]  # the follow opens and stays silent
    command, box = run(daytona)
    spare = _spare(fake, 1)
    assert spare != command.session_id
    box.refute(is_terminal(command.ref), 0.05)
    daytona.stop_command(command)


def test_a_failure_to_make_the_next_session_leaves_the_spawn_alone(
    daytona: Daytona, fake: FakeCommand, follows: Follows, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: object) -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(SpareSessions, "refill", refuse)
    follows.scripts = [[OUT + framed(b"fine\n") + END + code(0)]]
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert stdout_of(frames) == b"fine\n" and frames[-1] == Exit(command.ref, 0)


def test_without_spawn_ahead_each_spawn_makes_its_session_before_its_command(
    daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    adapter = Daytona(follow=FAST, start_timeout=2.0, spawn_ahead=False)
    follows.scripts = [[END + code(0)], [END + code(0)]]
    spawned = []
    for _ in range(2):
        command, box = run(adapter)
        finish(adapter, command, box)
        spawned.append(command.session_id)
    assert fake.sessions == spawned
    starts = [n for n, call in enumerate(fake.calls) if call[1].endswith("/exec")]
    assert [fake.calls[n - 1] for n in starts] == [("POST", "/toolbox/sbx-1/process/session")] * 2


def test_the_shim_ends_its_own_shell_never_the_session_shell(
    daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    follows.scripts = [[END + code(0)]]
    command, box = run(daytona, stdin=True)
    finish(daytona, command, box)
    script = fake.exec_bodies[0]["command"]
    head, inner = script.split("; /bin/sh -c ", 1)
    assert head.startswith(": managoat-argv=")
    assert inner.startswith("'") and inner.endswith("'"), "the whole shim is one sh -c argument"
    assert "mkfifo" in inner and "base64 -d" in inner


def test_a_followed_log_is_split_by_stream_and_ends_in_the_journals_exit_code(
    daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    journal = (
        OUT
        + framed(b"one\n")
        + ERR
        + framed(b"err")
        + OUT
        + framed(b"two")
        + OUT
        + b":\n"
        + ERR
        + b":\n"
        + code(7)
    )
    follows.scripts = [[journal[:9], journal[9:40], journal[40:], b""]]
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert stdout_of(frames) == b"one\ntwo"
    assert stderr_of(frames) == b"err"
    assert frames[-1] == Exit(command.ref, 7)
    assert fake.log_reads == 0 and fake.record_reads == 0, "the follow alone carried it all"
    assert follows.sockets[0].closed, "the follower closed the follow itself"


def test_a_follow_that_ends_early_is_finished_from_a_snapshot_each_byte_once(
    daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    full = OUT + framed(b"abc") + ERR + framed(b"e1\n") + OUT + framed(b"\x00def\n") + END + code(3)
    follows.scripts = [[full[:30], None]]
    fake.journals = [full]
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert stdout_of(frames) == b"abc\x00def\n"
    assert stderr_of(frames) == b"e1\n"
    assert frames[-1] == Exit(command.ref, 3)
    assert fake.log_reads == 1


def test_replays_and_stale_snapshots_of_shorter_prefixes_deliver_no_byte_twice(
    daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    full = (
        OUT
        + framed(b"abc")
        + ERR
        + framed(b"e1\n")
        + OUT
        + framed(b"\x00def\n")
        + ERR
        + framed(b"e2")
        + END
        + code(0)
    )
    follows.scripts = [[full[:22], None], [full[:12], None], [full[:40], None], [full[:5], None]]
    fake.journals = [full[:9], full[:30], full[:12], full]
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert stdout_of(frames) == b"abc\x00def\n"
    assert stderr_of(frames) == b"e1\ne2"
    assert frames[-1] == Exit(command.ref, 0)


def test_without_a_follow_the_log_is_read_from_snapshots_until_it_is_complete(
    daytona: Daytona, fake: FakeCommand
) -> None:
    full = OUT + framed(b"first\n") + ERR + framed(b"oops\n") + OUT + framed(b"last") + END
    fake.journals = [full[:14], full[:14], full, full + code(5)]
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert stdout_of(frames) == b"first\nlast"
    assert stderr_of(frames) == b"oops\n"
    assert frames[-1] == Exit(command.ref, 5)
    assert fake.log_reads == 4
    assert all(h.get("X-Daytona-Split-Output") == "true" for h in fake.log_headers)


def test_the_json_log_shape_is_accepted(mocked: responses.RequestsMock, daytona: Daytona) -> None:
    mocked.get(f"{API}/sandbox/box", json=sandbox())
    mocked.post(TOOLBOX + "/process/session", status=201)
    mocked.post(
        re.compile(re.escape(TOOLBOX) + r"/process/session/mgs-\w+/exec"),
        status=202,
        json={"commandId": "cmd-9"},
    )
    base = re.escape(TOOLBOX) + r"/process/session/mgs-\w+/command/cmd-9"
    mocked.get(
        re.compile(base + "/logs$"),
        json={
            "stdout": (framed(b"out") + b":\n!9\n").decode(),
            "stderr": (framed(b"\xff err") + b":\n").decode(),
        },
    )
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert (stdout_of(frames), stderr_of(frames)) == (b"out", b"\xff err")
    assert frames[-1] == Exit(command.ref, 9)


def test_a_vanished_session_without_an_exit_is_closed_before_exit_never_exit_zero(
    daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    follows.scripts = [[OUT + framed(b"partial"), None]]
    fake.journals = [OUT + framed(b"partial")]
    fake.record_status = 404
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert stdout_of(frames) == b"partial"
    assert frames[-1] == Error(command.ref, Unavailable(reasons.CLOSED_BEFORE_EXIT))


def test_a_vanished_session_whose_journal_is_complete_ends_in_its_real_exit(
    daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    journal = OUT + framed(b"done\n") + END + code(23)
    follows.scripts = [[journal[:12]]]
    fake.journals = [journal]
    fake.record_status, fake.log_status = 404, 200
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert stdout_of(frames) == b"done\n"
    assert frames[-1] == Exit(command.ref, 23)


def test_a_shim_that_died_without_a_code_is_closed_before_exit_after_its_output(
    daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    follows.scripts = [[OUT + framed(b"last words\n")]]
    fake.journals = [OUT + framed(b"last words\n")]
    fake.execute_reply = lambda cmd: (
        200,
        {},
        json.dumps({"exitCode": 0, "result": "gone\n" if "kill -0" in cmd else ""}),
    )
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert stdout_of(frames) == b"last words\n"
    assert frames[-1] == Error(command.ref, Unavailable(reasons.CLOSED_BEFORE_EXIT))


def test_an_exit_recorded_over_an_incomplete_log_is_closed_before_exit(
    daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    follows.scripts = [[OUT + framed(b"half")]]
    fake.journals = [OUT + framed(b"half")]
    fake.recorded = 0
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert stdout_of(frames) == b"half"
    assert frames[-1] == Error(command.ref, Unavailable(reasons.CLOSED_BEFORE_EXIT))
    assert not fake.executes, "the daemon's record was enough"


@pytest.mark.parametrize("junk", ["running", "", "not-an-exit-code"])
def test_a_quiet_command_without_a_code_keeps_running(
    daytona: Daytona, fake: FakeCommand, follows: Follows, junk: str
) -> None:
    follows.scripts = [[OUT + framed(b"waiting")]]
    fake.execute_reply = lambda _: (200, {}, json.dumps({"exitCode": 0, "result": junk}))
    command, box = run(daytona)
    assert wait_until(lambda: len(fake.executes) >= 2, 5)
    box.refute(is_terminal(command.ref), 0.05)
    assert len(follows.opened) == 1, "the open follow was kept"
    daytona.stop_command(command)


def test_a_silent_follow_is_pinged_then_given_up_for_snapshots(
    daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    policy = attrs.evolve(FAST, read_timeout=0.05, probe_after=5.0, max_probe_interval=5.0)
    adapter = Daytona(follow=policy, start_timeout=2.0)
    follows.scripts = [[OUT + framed(b"x")]]
    fake.journals = [OUT + framed(b"x") + END + code(0)]
    command, box = run(adapter)
    frames = finish(adapter, command, box)
    assert frames[-1] == Exit(command.ref, 0) and stdout_of(frames) == b"x"
    assert follows.sockets[0].pings >= 1


def test_an_unreachable_toolbox_ends_the_stream_with_its_error_after_the_budget(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.record_status = 503
    command, box = run(daytona)
    frames = finish(daytona, command, box)
    assert isinstance(frames[-1], Error)
    assert frames[-1].reason.detail[:2] == ("http", 503)


def test_stop_command_aborts_the_follow_and_silences_the_follower(
    daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    follows.scripts = [[OUT + framed(b"tick")]]
    command, box = run(daytona)
    box.expect(lambda f: isinstance(f, Stdout), 5)
    daytona.stop_command(command)
    daytona.stop_command(command)
    assert follows.sockets[0].aborted.is_set()
    box.clear()
    box.refute(lambda f: True, 0.1)


def test_a_spawn_with_a_dir_enters_it_in_its_session_before_the_command(
    daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    follows.scripts = [[OUT + framed(b"hi\n") + END + code(0)]]
    command, box = run(daytona, dir="/w d")
    finish(daytona, command, box)
    enter, start = fake.exec_bodies
    assert enter == {"command": "cd '/w d' >/dev/null 2>&1", "runAsync": False}
    assert start["runAsync"] is True
    assert "cd " not in start["command"], "the command must not enter a relative dir twice"
    assert fake.deleted == []


def test_a_spawn_whose_dir_cannot_be_entered_is_invalid_and_deletes_its_session(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.sync = lambda body: (200, {}, json.dumps({"cmdId": "c", "output": "", "exitCode": 1}))
    with pytest.raises(Invalid) as caught:
        run(daytona, dir="missing")
    assert caught.value.reason is reasons.Reason.DIR
    assert caught.value.problem == reasons.no_such_dir("missing")
    assert len(fake.exec_bodies) == 1, "the command was never started"
    assert fake.deleted == fake.sessions


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"args": ["a\0b"]}, "args"),
        ({"env": {"A": "x\0y"}}, "env"),
        ({"dir": "/w\0"}, "dir"),
    ],
)
def test_a_nul_no_process_can_take_is_invalid_before_anything_is_sent(
    mocked: responses.RequestsMock, daytona: Daytona, options: dict[str, Any], field: str
) -> None:
    """The shell would drop the NUL and run something else; nothing is sent."""
    args = options.pop("args", [])
    for call in (daytona.exec, daytona.spawn):
        with pytest.raises(Invalid) as refused:
            call(handle_of(daytona), "echo", args, **options)
        assert refused.value.detail[0] == field
    assert len(mocked.calls) == 0


def test_spawn_with_a_tty_is_not_supported(daytona: Daytona) -> None:
    with pytest.raises(NotSupported):
        daytona.spawn(handle_of(daytona), "bash", tty=True)


def test_a_failed_exec_deletes_the_session_and_starts_no_follower(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get(f"{API}/sandbox/box", json=sandbox())
    mocked.post(TOOLBOX + "/process/session", status=201)
    mocked.post(
        re.compile(re.escape(TOOLBOX) + r"/process/session/mgs-\w+/exec"), status=418, body="teapot"
    )
    deleted = mocked.delete(
        re.compile(re.escape(TOOLBOX) + r"/process/session/mgs-\w+$"), status=204
    )
    before = threading.active_count()
    with pytest.raises(Invalid) as caught:
        daytona.spawn(handle_of(daytona), "true", owner=Mailbox())
    assert caught.value.detail == ("http", 418, "teapot")
    assert deleted.call_count == 1
    assert threading.active_count() == before


# -- stdin ------------------------------------------------------------------------------


@pytest.fixture
def quiet(follows: Follows) -> None:
    """The command's follow opens and stays silent."""
    follows.scripts = [[]]


@pytest.mark.usefixtures("quiet")
def test_stdin_goes_through_the_input_endpoint_as_exact_base64_lines(
    daytona: Daytona, fake: FakeCommand
) -> None:
    command, _ = run(daytona, stdin=True)
    daytona.write_stdin(command, b"no newline\x00" + "é".encode())
    (data,) = fake.inputs
    assert data.endswith("\n")
    assert base64.b64decode(data.strip()) == b"no newline\x00" + "é".encode()
    daytona.stop_command(command)


@pytest.mark.usefixtures("quiet")
def test_stdin_after_the_command_completed_is_command_exited(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.input_status = 410
    command, _ = run(daytona, stdin=True)
    with pytest.raises(CommandExited) as caught:
        daytona.write_stdin(command, b"late")
    assert caught.value.detail == reasons.EXITED
    daytona.stop_command(command)


@pytest.mark.usefixtures("quiet")
def test_any_other_stdin_failure_is_write_failed(daytona: Daytona, fake: FakeCommand) -> None:
    fake.input_status = 500
    command, _ = run(daytona, stdin=True)
    with pytest.raises(WriteFailed) as caught:
        daytona.write_stdin(command, b"x")
    assert caught.value.detail == (reasons.REFUSED, "Unavailable")
    daytona.stop_command(command)


@pytest.mark.usefixtures("quiet")
def test_stdin_was_not_opened(daytona: Daytona, fake: FakeCommand) -> None:
    command, _ = run(daytona)
    with pytest.raises(Invalid) as caught:
        daytona.write_stdin(command, b"x")
    assert caught.value.detail == reasons.STDIN_NOT_OPEN
    daytona.stop_command(command)
    with pytest.raises(CommandExited):
        daytona.write_stdin(command, b"x")


@pytest.mark.usefixtures("quiet")
def test_close_stdin_ends_the_relay_in_band(daytona: Daytona, fake: FakeCommand) -> None:
    command, _ = run(daytona, stdin=True)
    daytona.write_stdin(command, b"x")
    daytona.close_stdin(command)
    daytona.close_stdin(command)
    assert fake.inputs[-1] == "\n" and len(fake.inputs) == 2
    assert not [c for c in fake.executes if "relay" in c]
    daytona.stop_command(command)
    with pytest.raises(CommandExited):
        daytona.close_stdin(command)


@pytest.mark.usefixtures("quiet")
def test_close_stdin_kills_the_relay_when_the_line_cannot_be_sent_and_never_raises(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.input_status = 500
    fake.execute_reply = lambda _: (503, {}, "down")
    command, _ = run(daytona, stdin=True)
    daytona.close_stdin(command)
    kills = [c for c in fake.executes if c.startswith("kill")]
    assert kills and "/relay" in kills[0]
    daytona.stop_command(command)


# -- exec ---------------------------------------------------------------------------------


def exec_journal(stdout: bytes, stderr: bytes, exit_code: int) -> bytes:
    """What the exec shim journals: each stream whole, the end frames, the code."""
    out = framed(stdout) if stdout else b""
    err = framed(stderr) if stderr else b""
    return OUT + out + OUT + b":\n" + ERR + err + ERR + b":\n" + code(exit_code)


def test_exec_is_one_synchronous_exec_in_a_session_kept_for_the_next(
    mocked: responses.RequestsMock, daytona: Daytona, fake: FakeCommand
) -> None:
    fake.sync_journal = exec_journal(b"out\n", b"err\n", 3)
    result = daytona.exec(handle_of(daytona), "bash", ["-lc", "x"], env={"A": "1"}, dir="/w")
    assert result == (b"out\n", 3)
    again = daytona.exec(handle_of(daytona), "bash", ["-lc", "y"])
    assert again == (b"out\n", 3)
    (session,) = fake.sessions
    assert session.startswith("mgx-") and not fake.deleted
    exec_path = f"/toolbox/sbx-1/process/session/{session}/exec"
    assert [(c.request.method, urlsplit(c.request.url).path) for c in mocked.calls] == [
        ("GET", "/api/sandbox/box"),
        ("POST", "/toolbox/sbx-1/process/session"),
        ("POST", exec_path),
        ("POST", exec_path),
    ], "a warm exec is one request"
    first = fake.exec_bodies[0]
    assert first["runAsync"] is False
    # The exec's subshell enters the dir itself, so that a missing one is told apart.
    assert "cd /w 2>/dev/null || " in first["command"]
    assert (
        "exec 3>&-; export A=1 && { command -v setsid >/dev/null 2>&1 && "
        "command -v bash >/dev/null 2>&1 && __mg_own=setsid || __mg_own=; } && "
        "exec ${__mg_own} bash -lc x ) 3>&1 "
    ) in first["command"]
    assert '>"$__mg_d/po" 2>"$__mg_d/pe"' in first["command"]
    assert all(h.get("X-Daytona-Split-Output") == "true" for h in fake.exec_headers)


def test_exec_merges_stderr_in_the_order_written_only_when_asked(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.sync_journal = exec_journal(b"out\nerr\nmore\n", b"", 0)
    result = daytona.exec(handle_of(daytona), "x", stderr_to_stdout=True)
    assert result.output == b"out\nerr\nmore\n"
    assert '>"$__mg_d/po" 2>&1' in fake.exec_bodies[0]["command"]
    fake.sync_journal = exec_journal(b"out\n", b"err\n", 0)
    assert daytona.exec(handle_of(daytona), "x").output == b"out\n"
    assert '>"$__mg_d/po" 2>"$__mg_d/pe"' in fake.exec_bodies[1]["command"]


def test_exec_output_is_byte_exact(daytona: Daytona, fake: FakeCommand) -> None:
    payload = bytes(range(256)) + b"\x01\x01\x01no newline"
    fake.sync_journal = exec_journal(payload, b"", 0)
    assert daytona.exec(handle_of(daytona), "x").output == payload


def test_exec_with_no_time_left_dispatches_nothing(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    with pytest.raises(Unavailable) as caught:
        daytona.exec(handle_of(daytona), "x", timeout=0)
    assert caught.value.detail == (reasons.EXEC_TIMEOUT, 0)
    assert len(mocked.calls) == 0


def test_an_answer_without_the_whole_log_is_closed_before_exit(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.sync_journal = OUT + framed(b"half")
    with pytest.raises(Unavailable) as caught:
        daytona.exec(handle_of(daytona), "x")
    assert caught.value.detail == reasons.CLOSED_BEFORE_EXIT
    assert fake.deleted == fake.sessions, "the session is not kept"


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (500, "failed to execute command: not found: session not found"),
        (410, "gone: session shell has exited"),
        (400, "bad request: failed to write command: write |1: broken pipe"),
    ],
)
def test_a_session_that_refuses_the_exec_is_replaced_and_the_exec_runs_once(
    daytona: Daytona, fake: FakeCommand, status: int, message: str
) -> None:
    daytona.exec(handle_of(daytona), "warm")
    answers = iter([(status, {}, json.dumps({"statusCode": status, "message": message}))])
    fake.sync = lambda body: next(answers, None) or FakeCommand._sync_answer(fake, body)
    assert daytona.exec(handle_of(daytona), "x") == (b"", 0)
    first, second = fake.sessions
    assert len(fake.exec_bodies) == 3 and second != first
    assert second in fake.exec_bodies[2]["command"]
    assert daytona.exec(handle_of(daytona), "y") == (b"", 0)
    assert second in fake.exec_bodies[3]["command"], "the new session is kept"


def test_a_kept_toolbox_that_says_the_sandbox_is_not_started_is_looked_up_afresh(
    mocked: responses.RequestsMock, daytona: Daytona, fake: FakeCommand
) -> None:
    daytona.exec(handle_of(daytona), "warm")
    refusals = iter(
        [
            (
                400,
                {},
                json.dumps(
                    {
                        "statusCode": 400,
                        "message": "bad request: no IP address found. Is the Sandbox started?",
                    }
                ),
            )
        ]
    )
    fake.sync = lambda body: next(refusals, None) or FakeCommand._sync_answer(fake, body)
    assert daytona.exec(handle_of(daytona), "x") == (b"", 0)
    lookups = [c for c in mocked.calls if c.request.url == f"{API}/sandbox/box"]
    assert len(lookups) == 2, "looked up again before the exec ran"
    assert len(fake.sessions) == 2 and len(fake.exec_bodies) == 3


def test_a_sandbox_gone_under_its_kept_sessions_is_not_found(
    mocked: responses.RequestsMock, daytona: Daytona, fake: FakeCommand
) -> None:
    daytona.exec(handle_of(daytona), "warm")
    mocked.replace(
        responses.GET,
        f"{API}/sandbox/box",
        status=404,
        json={"message": "Sandbox with ID or name box not found"},
    )
    gone = (404, {}, json.dumps({"statusCode": 404, "message": "not found: sandbox not found"}))
    fake.sync = lambda body: gone
    with pytest.raises(NotFound):
        daytona.exec(handle_of(daytona), "x")
    assert len(fake.exec_bodies) == 3, "each refused before anything ran"


def test_a_session_shell_that_died_under_the_command_is_closed_before_exit(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.sync = lambda body: (
        400,
        {},
        json.dumps(
            {
                "statusCode": 400,
                "message": "bad request: session shell ended without a command result",
            }
        ),
    )
    with pytest.raises(Unavailable) as caught:
        daytona.exec(handle_of(daytona), "x")
    assert caught.value.detail == reasons.CLOSED_BEFORE_EXIT
    assert len(fake.exec_bodies) == 1, "a command that ran is never run again"
    assert fake.deleted == fake.sessions


def test_an_exec_the_toolbox_failed_is_raised_once_and_its_session_dropped(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.sync = lambda body: (503, {}, "down")
    with pytest.raises(Unavailable) as caught:
        daytona.exec(handle_of(daytona), "x")
    assert caught.value.detail == ("http", 503, "down")
    assert len(fake.exec_bodies) == 1
    assert fake.deleted == fake.sessions


def test_an_answer_that_does_not_come_in_time_is_followed_to_the_real_exit(
    daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    daytona.exec(handle_of(daytona), "warm")

    def silent(body: dict[str, Any]) -> Reply:
        fake.session_commands = [{"id": "sync-1", "exitCode": 0}, {"id": "cmd-1"}]
        raise requests.ReadTimeout("no answer")

    fake.sync = silent
    follows.scripts = [[exec_journal(b"slow\n", b"warn\n", 4)]]
    assert daytona.exec(handle_of(daytona), "x", stderr_to_stdout=False) == (b"slow\n", 4)
    (session,) = fake.sessions
    assert f"/process/session/{session}/command/cmd-1/logs" in follows.opened[0][0]
    assert not fake.deleted, "the session, idle again, is kept"


def test_exec_output_past_max_bytes_in_an_answer_is_truncated(
    daytona: Daytona, fake: FakeCommand
) -> None:
    fake.sync_journal = exec_journal(b"x" * 10, b"y" * 10, 0)
    with pytest.raises(Truncated) as caught:
        daytona.exec(handle_of(daytona), "x", max_bytes=19)
    assert caught.value.detail == (reasons.MAX_BYTES, 19)
    result = daytona.exec(handle_of(daytona), "x", max_bytes=20)
    assert (result.output, result.stderr) == (b"x" * 10, b"y" * 10)


def test_an_answer_too_large_for_max_bytes_is_left_for_the_log_and_cut_there(
    daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    limit = 64 * 1024
    flood = exec_journal(b"x" * (2 * 1024 * 1024), b"", 0)
    fake.sync_journal = flood
    fake.session_commands = [{"id": "cmd-1"}]
    follows.scripts = [[flood]]
    with pytest.raises(Truncated) as caught:
        daytona.exec(handle_of(daytona), "x", max_bytes=limit)
    assert caught.value.detail == (reasons.MAX_BYTES, limit)
    (session,) = fake.sessions
    assert f"/process/session/{session}/command/cmd-1/logs" in follows.opened[0][0]
    assert fake.deleted == fake.sessions, "the session (and what ran there) was not deleted"


def test_an_exec_past_its_deadline_is_abandoned_and_its_session_deleted(
    daytona: Daytona, fake: FakeCommand
) -> None:
    def late(body: dict[str, Any]) -> Reply:
        threading.Event().wait(0.3)
        raise requests.ReadTimeout("no answer")

    fake.sync = late
    with pytest.raises(Unavailable) as caught:
        daytona.exec(handle_of(daytona), "x", timeout=0.1)
    assert caught.value.detail == (reasons.EXEC_TIMEOUT, 0.1)
    assert fake.deleted == fake.sessions


def test_an_invalid_env_name_is_invalid_before_any_toolbox_call(
    daytona: Daytona, fake: FakeCommand
) -> None:
    with pytest.raises(Invalid):
        daytona.exec(handle_of(daytona), "x", env={"A-B": "1"})
    assert not fake.calls


def test_concurrent_execs_get_sessions_of_their_own_and_a_few_are_kept(
    daytona: Daytona, fake: FakeCommand
) -> None:
    adapter = Daytona(follow=FAST, start_timeout=2.0, exec_sessions=2)
    inside = threading.Barrier(4, timeout=5)

    def together(body: dict[str, Any]) -> Reply:
        inside.wait()
        return FakeCommand._sync_answer(fake, body)

    fake.sync = together
    threads = [
        threading.Thread(target=adapter.exec, args=(handle_of(adapter), "x")) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(set(fake.sessions)) == 4
    assert len(fake.deleted) == 2, "two kept, the rest deleted"


def test_a_suspended_sandbox_gets_fresh_exec_sessions(
    mocked: responses.RequestsMock, daytona: Daytona, fake: FakeCommand
) -> None:
    daytona.exec(handle_of(daytona), "x")
    mocked.post(f"{API}/sandbox/box/stop", json=sandbox(state="stopped"))
    daytona.suspend(handle_of(daytona))
    daytona.exec(handle_of(daytona), "y")
    assert len(fake.sessions) == 2


# -- sessions and attach -------------------------------------------------------------------


def _sessions(mocked: responses.RequestsMock, answer: object) -> None:
    mocked.get(TOOLBOX + "/process/session", json=answer)


def test_list_sessions_lists_spawned_sessions_with_their_command_line(
    mocked: responses.RequestsMock, daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    follows.scripts = [[END + code(0)]]
    command, box = run(daytona)
    finish(daytona, command, box)
    script = fake.exec_bodies[0]["command"]
    _sessions(
        mocked,
        [
            {"sessionId": "mgs-1", "commands": [{"id": "c", "command": script}]},
            {"sessionId": "mgs-2", "commands": [{"id": "c", "command": "cd /w"}]},
            {"sessionId": "mgs-3", "commands": []},
            {"sessionId": "mgs-4"},
            {"sessionId": "mgx-5", "commands": []},
            {"sessionId": "user-made", "commands": []},
        ],
    )
    sessions = daytona.list_sessions(handle_of(daytona))
    assert [(s.id, s.command) for s in sessions] == [
        ("mgs-1", "bash -lc it's fine"),
        ("mgs-2", "cd /w"),
        ("mgs-4", None),
    ], "a session that ran no command (one made ahead for a spawn) is not listed"


def test_a_spawns_script_is_its_command_wherever_the_daemon_lists_it(
    mocked: responses.RequestsMock, daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    """A spawn with a dir ran the cd into it first in its session, whose commands the
    daemon lists in no fixed order: the script, not the cd, is the session's command."""
    follows.scripts = [
        [OUT + framed(b"spawned\n") + END + code(4)],
        [OUT + framed(b"spawned\n") + END + code(4)],
    ]
    command, box = run(daytona, dir="/w")
    finish(daytona, command, box)
    enter, start = fake.exec_bodies
    listed = [
        {"id": "cmd-1", "command": start["command"]},
        {"id": "cd", "command": enter["command"], "exitCode": 0},
    ]
    _sessions(mocked, [{"sessionId": "mgs-1", "commands": listed}])
    assert [s.command for s in daytona.list_sessions(handle_of(daytona))] == ["bash -lc it's fine"]
    fake.session_commands = listed
    fake.recorded = 4
    replay = Mailbox()
    attached = daytona.attach(handle_of(daytona), "mgs-1", owner=replay)
    frames = finish(daytona, attached, replay)
    assert (stdout_of(frames), frames[-1]) == (b"spawned\n", Exit(attached.ref, 4))


def test_a_parked_sandbox_has_no_sessions_and_nothing_to_attach(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get(f"{API}/sandbox/box", json=sandbox(state="stopped"))
    assert daytona.list_sessions(handle_of(daytona)) == []
    with pytest.raises(NotFound):
        daytona.attach(handle_of(daytona), "mgs-1")
    assert [c.request.method for c in mocked.calls] == ["GET", "GET"]


def test_attach_replays_from_byte_zero_then_the_real_exit_and_is_not_connected(
    mocked: responses.RequestsMock, daytona: Daytona, fake: FakeCommand, follows: Follows
) -> None:
    journal = OUT + framed(b"one\n") + ERR + framed(b"e\n") + OUT + framed(b"two\n")
    follows.scripts = [[journal + END + code(3)]]
    fake.recorded = 3
    fake.session_commands = [{"id": "old"}, {"id": "cmd-1"}]
    box = Mailbox()
    command = daytona.attach(handle_of(daytona), "mgs-42", owner=box, stdin=True)
    frames = finish(daytona, command, box)
    assert (stdout_of(frames), stderr_of(frames)) == (b"one\ntwo\n", b"e\n")
    assert frames[-1] == Exit(command.ref, 3)
    with pytest.raises(CommandExited):
        daytona.write_stdin(command, b"late")


def test_attach_to_a_foreign_session_ends_in_the_daemons_record(
    mocked: responses.RequestsMock, daytona: Daytona, follows: Follows
) -> None:
    fake = FakeCommand(mocked, session="theirs")
    follows.scripts = [[OUT + b"plain\n" + ERR + b"oops\n" + OUT + b"!\x01", None]]
    fake.journals = [OUT + b"plain\n" + ERR + b"oops\n" + OUT + b"!\x01"]
    fake.recorded = 6
    fake.session_commands = [{"id": "cmd-1", "exitCode": 6}]
    box = Mailbox()
    command = daytona.attach(handle_of(daytona), "theirs", owner=box)
    frames = finish(daytona, command, box)
    assert (stdout_of(frames), stderr_of(frames)) == (b"plain\n!\x01", b"oops\n")
    assert frames[-1] == Exit(command.ref, 6)


@pytest.mark.usefixtures("quiet")
def test_attach_to_a_live_command_is_connected(daytona: Daytona, fake: FakeCommand) -> None:
    fake.session_commands = [{"cmdId": "cmd-1"}]
    command = daytona.attach(handle_of(daytona), "mgs-42", owner=Mailbox(), stdin=True)
    daytona.write_stdin(command, b"more")
    assert len(fake.inputs) == 1
    daytona.stop_command(command)


@pytest.mark.parametrize(
    ("status", "answer"),
    [
        (404, {"message": "not found: session not found"}),
        (
            500,
            {
                "statusCode": 500,
                "message": "failed to execute command: not found: session not found",
            },
        ),
        (200, {"sessionId": "mgs-42", "commands": []}),
    ],
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
    daytona.write_file(handle_of(daytona), "/work/dir/file.txt", b"abcde", mode=0o600)
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


def test_terminate_session_deletes_it_and_an_absent_one_is_success(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get(f"{API}/sandbox/box", json=sandbox())
    mocked.delete(TOOLBOX + "/process/session/mgs-1", status=204)
    daytona.terminate_session(handle_of(daytona), "mgs-1", timeout=1)
    # A 404 is an absent session (never there, or deleted before): success in graceful
    # mode (the only one Daytona offers), with no further request.
    mocked.delete(TOOLBOX + "/process/session/mgs-2", status=404, json={"message": "nope"})
    daytona.terminate_session(handle_of(daytona), "mgs-2", timeout=1)
    assert [c.request.method for c in mocked.calls if "/toolbox/" in c.request.url] == [
        "DELETE",
        "DELETE",
    ]
    with pytest.raises(NotSupported):
        daytona.terminate_session(handle_of(daytona), "mgs-1", mode="force")


def test_terminate_session_of_a_deleted_sandbox_is_success(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get(f"{API}/sandbox/box", status=404, json={"message": "gone"})
    daytona.terminate_session(handle_of(daytona), "mgs-1", timeout=1)


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
    fake.journals = [END + code(0)]
    command, box = run(daytona)
    finish(daytona, command, box)
    session = command.session_id
    paths = {urlsplit(c.request.url).path for c in mocked.calls}
    assert f"/toolbox/sbx-1/process/session/{session}/command/cmd-1/logs" in paths
    assert all(
        not parse_qs(urlsplit(c.request.url).query)
        for c in mocked.calls
        if "/toolbox/" in c.request.url
    )
