"""WebSocket framing facts, scripted server (docs/protocols/sprites.md#exec-over-websocket).

The emulator runs real processes, so these edge cases — exit payloads, an
exit frame followed by an abort, text exit messages, unknown stream ids, a
silent server — are played from scripts instead.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator, Sequence

import pytest

from managoat_sandbox import config, reasons
from managoat_sandbox.errors import CommandExited, Unavailable
from managoat_sandbox.frames import Error, Exit, Frame, Stderr, Stdout
from managoat_sandbox.providers.sprites import Sprites
from managoat_sandbox.types import Command, Handle

from ..conftest import wait_until
from .scripted import ABORT, CLOSE, ScriptedServer, Step, binary, silent, text

BOX = Handle("sprites", "box")
INFO = text(
    json.dumps(
        {
            "type": "session_info",
            "session_id": 1847,
            "command": "x",
            "created": 1767225600,
            "is_owner": True,
            "tty": False,
        }
    )
)
TTY_INFO = text(json.dumps({"type": "session_info", "session_id": "7", "tty": True}))


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer().running() as running:
        yield running


@pytest.fixture(scope="module")
def quiet_server() -> Iterator[ScriptedServer]:
    """A server that does not answer pings."""
    with ScriptedServer(autoping=False).running() as running:
        yield running


def _frames(
    server: ScriptedServer,
    script: Sequence[Step],
    *,
    keepalive: float = 5.0,
    stdin: bool = False,
    attach: bool = False,
) -> tuple[Command, list[Frame]]:
    server.scripts["box"] = script
    config.configure("sprites", base_url=server.base_url, token="t")
    adapter = Sprites(keepalive=keepalive)
    if attach:
        command = adapter.attach(BOX, "7", stdin=stdin)
    else:
        command = adapter.spawn(BOX, "x", stdin=stdin)
    assert command.frames is not None
    frames = []
    while True:
        frame = command.frames.get(timeout=10)
        frames.append(frame)
        if frame.terminal:
            break
    with pytest.raises(queue.Empty):
        command.frames.get(timeout=0.05)
    adapter.stop_command(command)
    return command, frames


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        (b"\x03", 0),
        (b"\x03\x00", 0),
        (b"\x03\x01", 1),
        (b"\x03\x2a\x00\x00\x00", 42),
        (b"\x03\x7f", 127),
        (b"\x03\x80", 128),
        (b"\x03\x82", 130),
        (b"\x03\xff", 255),
    ],
)
@pytest.mark.usefixtures("no_leaked_threads")
def test_the_exit_code_is_one_byte(server: ScriptedServer, payload: bytes, code: int) -> None:
    command, frames = _frames(server, [INFO, binary(payload)])
    assert frames == [Exit(command.ref, code)]


@pytest.mark.usefixtures("no_leaked_threads")
def test_output_then_exit_then_abort_is_a_clean_exit(server: ScriptedServer) -> None:
    command, frames = _frames(
        server, [INFO, binary(b"\x01out"), binary(b"\x02err"), binary(b"\x03\x07"), ABORT]
    )
    ref = command.ref
    assert frames == [Stdout(ref, b"out"), Stderr(ref, b"err"), Exit(ref, 7)]


@pytest.mark.usefixtures("no_leaked_threads")
def test_the_exit_is_reported_without_waiting_for_the_close(server: ScriptedServer) -> None:
    command, frames = _frames(server, [INFO, binary(b"\x03\x05"), silent(20)])
    assert frames == [Exit(command.ref, 5)]


@pytest.mark.parametrize("ending", [CLOSE, ABORT], ids=["close-1000", "tcp-abort"])
@pytest.mark.usefixtures("no_leaked_threads")
def test_a_close_without_exit_is_closed_before_exit_never_exit_0(
    server: ScriptedServer, ending: Step
) -> None:
    command, frames = _frames(server, [INFO, binary(b"\x01partial"), ending])
    assert frames == [
        Stdout(command.ref, b"partial"),
        Error(command.ref, Unavailable(reasons.CLOSED_BEFORE_EXIT)),
    ]


@pytest.mark.usefixtures("no_leaked_threads")
def test_unknown_ids_empty_messages_and_notices_are_ignored(server: ScriptedServer) -> None:
    command, frames = _frames(
        server,
        [
            INFO,
            binary(b""),
            binary(b"\x09junk"),
            text("not json"),
            text("[1]"),
            text(json.dumps({"type": "port_opened", "port": 8080, "pid": 3})),
            binary(b"\x01ok"),
            binary(b"\x03\x00"),
        ],
    )
    assert frames == [Stdout(command.ref, b"ok"), Exit(command.ref, 0)]


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ({"type": "exit", "exit_code": 9}, 9),
        ({"type": "exit", "code": 4}, 4),
        ({"type": "exit"}, 0),
    ],
)
@pytest.mark.usefixtures("no_leaked_threads")
def test_a_text_exit_message_is_honoured(
    server: ScriptedServer, message: dict[str, object], code: int
) -> None:
    command, frames = _frames(server, [INFO, text(json.dumps(message))])
    assert frames == [Exit(command.ref, code)]


@pytest.mark.usefixtures("no_leaked_threads")
def test_a_malformed_text_exit_is_an_error_not_an_exit(server: ScriptedServer) -> None:
    _, frames = _frames(server, [INFO, text(json.dumps({"type": "exit", "exit_code": "1"}))])
    assert len(frames) == 1 and isinstance(frames[0], Error)


@pytest.mark.usefixtures("no_leaked_threads")
def test_session_info_tty_switches_to_raw_decoding_on_attach(server: ScriptedServer) -> None:
    script = [TTY_INFO, binary(b"\x01raw\r\n"), text(json.dumps({"type": "exit", "exit_code": 2}))]
    command, frames = _frames(server, script, attach=True)
    assert frames == [Stdout(command.ref, b"\x01raw\r\n"), Exit(command.ref, 2)]


@pytest.mark.usefixtures("no_leaked_threads")
def test_stdin_frames_are_prefixed_and_eof_is_0x04(server: ScriptedServer) -> None:
    server.scripts["box"] = [INFO, silent(20)]
    server.received.clear()
    config.configure("sprites", base_url=server.base_url, token="t")
    adapter = Sprites()
    command = adapter.spawn(BOX, "cat", stdin=True)
    adapter.write_stdin(command, b"ping")
    adapter.close_stdin(command)
    assert wait_until(lambda: len(server.received) >= 2, timeout=5)
    assert server.received[:2] == [b"\x00ping", b"\x04"]
    adapter.stop_command(command)
    with pytest.raises(CommandExited):
        adapter.write_stdin(command, b"late")


@pytest.mark.usefixtures("no_leaked_threads")
def test_a_healthy_quiet_command_survives_keepalive(server: ScriptedServer) -> None:
    command, frames = _frames(server, [INFO, silent(1.0), binary(b"\x03\x00")], keepalive=0.2)
    assert frames == [Exit(command.ref, 0)]


@pytest.mark.timeout(20)
@pytest.mark.usefixtures("no_leaked_threads")
def test_a_silent_server_that_answers_no_ping_is_declared_dead(
    quiet_server: ScriptedServer,
) -> None:
    command, frames = _frames(quiet_server, [INFO, silent(25)], keepalive=0.2)
    assert frames == [Error(command.ref, Unavailable("timeout"))]


@pytest.mark.usefixtures("no_leaked_threads")
def test_a_reader_held_up_by_a_full_queue_is_not_a_silent_server(server: ScriptedServer) -> None:
    """Time the reader spends waiting for room in its owner's queue is not silence: a
    caller that reads late still gets every frame and the exit, not a dead connection."""
    server.scripts["box"] = [
        INFO,
        binary(b"\x01a"),
        silent(0.05),
        binary(b"\x01b"),
        silent(2.0),
        binary(b"\x03\x00"),
    ]
    config.configure("sprites", base_url=server.base_url, token="t")
    adapter = Sprites(keepalive=0.2)
    frames: queue.Queue[Frame] = queue.Queue(maxsize=1)
    command = adapter.spawn(BOX, "x", owner=frames)
    try:
        assert wait_until(frames.full, timeout=5)
        # Held up for longer than the three keepalive intervals that declare a silence.
        threading.Event().wait(4 * 0.2)
        got = [frames.get(timeout=10) for _ in range(3)]
    finally:
        adapter.stop_command(command)
    assert got == [Stdout(command.ref, b"a"), Stdout(command.ref, b"b"), Exit(command.ref, 0)]
