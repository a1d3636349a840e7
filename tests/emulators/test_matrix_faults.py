"""The emulator faults added for the fault matrix (tests/faults), checked on the wire.

Each is driven with a raw client written here — a socket speaking HTTP/1.1 by
hand, or plain websocket-client — so what is checked is what reaches the
wire: a *reset* ends the client's reads with ``ECONNRESET`` (a TCP RST), a
*cut* ends them with end-of-file before the body's declared end (a chunked
body without its terminating chunk, or fewer bytes than ``Content-Length``).
"""

from __future__ import annotations

import base64
import json
import socket
import struct
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
import websocket

from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.emulators.sprites import SpritesEmulator

from ..conftest import wait_until
from ..handshake import e2b_gate

pytestmark = pytest.mark.timeout(60)

KEY = "matrix-faults-key"
BEARER = {"Authorization": f"Bearer {KEY}"}


# -- a raw HTTP/1.1 exchange ----------------------------------------------------------------


def exchange(
    port: int,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes = b"",
    on_read: Callable[[bytes], None] | None = None,
) -> tuple[bytes, str]:
    """Send one request on a fresh connection and read until the server ends it.

    Returns everything read and how the connection ended: ``"eof"`` (an
    orderly close) or ``"reset"`` (``ECONNRESET``). ``on_read`` is given
    everything read so far after each read.
    """
    lines = [
        f"{method} {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Connection: close",
        f"Content-Length: {len(body)}",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                return received, "reset"
            if not chunk:
                return received, "eof"
            received += chunk
            if on_read is not None:
                on_read(received)


def split_response(raw: bytes) -> tuple[str, dict[str, str], bytes]:
    """(status line, headers with lower-case names, body bytes as sent)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status, *fields = head.decode("latin-1").split("\r\n")
    headers = {}
    for field in fields:
        name, _, value = field.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


def dechunk(body: bytes) -> tuple[bytes, bool]:
    """The data of a chunked body and whether its terminating chunk arrived."""
    data = b""
    while body:
        size_line, sep, rest = body.partition(b"\r\n")
        if not sep:
            return data, False
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return data, True
        data += rest[:size]
        if len(rest) < size + 2:
            return data, False
        body = rest[size + 2 :]
    return data, False


# -- Sprites ----------------------------------------------------------------------------------


@pytest.fixture
def sprites() -> Iterator[SpritesEmulator]:
    with SpritesEmulator(credential=KEY) as server:
        created = requests.post(
            f"{server.base_url}/v1/sprites", json={"name": "box"}, headers=BEARER, timeout=10
        )
        assert created.status_code == 201
        yield server  # type: ignore[misc]


def _sprites_exec(server: SpritesEmulator, script: str) -> websocket.WebSocket:
    url = (
        server.base_url.replace("http", "ws", 1)
        + "/v1/sprites/box/exec?cmd=bash&cmd=-c&cmd="
        + requests.utils.quote(script)
    )
    return websocket.create_connection(url, header=[f"Authorization: Bearer {KEY}"], timeout=10)


def test_sprites_drop_exec_reset_ends_the_socket_with_a_tcp_reset(
    sprites: SpritesEmulator,
) -> None:
    sprites.drop_exec(after_frames=1, reset=True)
    ws = _sprites_exec(sprites, "echo partial; sleep 5; echo never")
    messages: list[tuple[int, bytes]] = []
    try:
        with pytest.raises(ConnectionResetError):
            while True:
                opcode, data = ws.recv_data(control_frame=True)
                messages.append((opcode, data))
                assert opcode != websocket.ABNF.OPCODE_CLOSE, "a close frame, not a reset"
    finally:
        ws.shutdown()
    assert all(data[:1] != b"\x03" for opcode, data in messages if opcode == 2), "no exit frame"


def test_sprites_truncate_ndjson_cuts_the_kill_stream_inside_a_line(
    sprites: SpritesEmulator,
) -> None:
    ws = _sprites_exec(sprites, "echo ready; sleep 30")
    try:
        session_id = json.loads(ws.recv())["session_id"]
        sprites.truncate_ndjson("kill")
        raw, ended = exchange(
            sprites.port, "POST", f"/v1/sprites/box/exec/{session_id}/kill", BEARER
        )
        status, headers, body = split_response(raw)
        assert ended == "eof" and status.endswith("200 OK")
        assert headers["content-type"].startswith("application/x-ndjson")
        data, terminated = dechunk(body)
        assert not terminated, "the chunked body must not end properly"
        first, torn = data.split(b"\n")
        assert json.loads(first)["type"] == "signal"
        assert torn == b'{"type":"exited","mess'
        listed = requests.get(
            f"{sprites.base_url}/v1/sprites/box/exec", headers=BEARER, timeout=10
        ).json()["sessions"]
        assert [str(s["id"]) for s in listed] == [str(session_id)], "nothing was killed"
    finally:
        ws.shutdown()


# -- E2B --------------------------------------------------------------------------------------


def _envelope(message: Any) -> bytes:
    payload = json.dumps(message).encode()
    return struct.pack(">BI", 0, len(payload)) + payload


def _envelopes(data: bytes) -> tuple[list[Any], bytes]:
    """Whole envelopes' messages, and the bytes of an unfinished one."""
    messages = []
    while len(data) >= 5:
        _, length = struct.unpack(">BI", data[:5])
        if len(data) < 5 + length:
            break
        messages.append(json.loads(data[5 : 5 + length]))
        data = data[5 + length :]
    return messages, data


def test_e2b_stream_rst_resets_the_connection_between_envelopes() -> None:
    with E2BEmulator(credential=KEY) as server:
        assert isinstance(server, E2BEmulator)
        created = requests.post(
            f"{server.base_url}/v2/sandboxes",
            json={"templateID": "base"},
            headers={"X-API-Key": KEY},
            timeout=10,
        ).json()
        server.stream_fault("rst", after=2)
        headers = {
            "E2b-Sandbox-Id": created["sandboxID"],
            "E2b-Sandbox-Port": "49983",
            "X-Access-Token": created["envdAccessToken"],
            "Content-Type": "application/connect+json",
        }
        gate = e2b_gate(server, created["sandboxID"])
        start = {"process": {"cmd": "bash", "args": ["-c", gate.script("echo one", "echo two")]}}
        released: list[bool] = []

        def release_once_one_arrived(received: bytes) -> None:
            # "two" is written only once the data event of "one" has arrived.
            if not released and base64.b64encode(b"one\n") in received:
                gate.release()
                released.append(True)

        raw, ended = exchange(
            server.port,
            "POST",
            "/process.Process/Start",
            headers,
            _envelope(start),
            on_read=release_once_one_arrived,
        )
    assert ended == "reset" and released
    if raw:
        data, terminated = dechunk(split_response(raw)[2])
        messages, rest = _envelopes(data)
        assert not terminated and rest == b"", "reset between envelopes, never inside one"
        assert len(messages) <= 2
        assert [next(iter(m["event"])) for m in messages] == ["start", "data"][: len(messages)]
        if len(messages) == 2:
            assert base64.b64decode(messages[1]["event"]["data"]["stdout"]) == b"one\n"


# -- Daytona ----------------------------------------------------------------------------------


@pytest.fixture
def daytona() -> Iterator[tuple[DaytonaEmulator, dict[str, Any]]]:
    with DaytonaEmulator(credential=KEY) as server:
        sandbox = requests.post(
            f"{server.api_url}/sandbox", json={"name": "box"}, headers=BEARER, timeout=10
        ).json()
        yield server, sandbox  # type: ignore[misc]


def _daytona_command(server: DaytonaEmulator, sandbox: dict[str, Any], script: str) -> str:
    """Run ``script`` in session s1 to its exit; the path of its log."""
    base = f"{server.toolbox_url}/{sandbox['id']}/process/session"
    assert (
        requests.post(base, json={"sessionId": "s1"}, headers=BEARER, timeout=10).status_code == 201
    )
    command_id = requests.post(
        f"{base}/s1/exec", json={"command": script, "runAsync": True}, headers=BEARER, timeout=10
    ).json()["cmdId"]

    def exited() -> bool:
        record = requests.get(f"{base}/s1/command/{command_id}", headers=BEARER, timeout=10)
        return "exitCode" in record.json()

    assert wait_until(exited, 10)
    return f"/toolbox/{sandbox['id']}/process/session/s1/command/{command_id}/logs"


@pytest.mark.parametrize("reset", [False, True], ids=["close", "reset"])
def test_daytona_cut_log_reads_stop_short_of_the_content_length(
    daytona: tuple[DaytonaEmulator, dict[str, Any]],
    reset: bool,
) -> None:
    server, sandbox = daytona
    logs = _daytona_command(server, sandbox, "echo 0123456789abcdef")
    headers = {**BEARER, "X-Daytona-Split-Output": "true"}
    whole, ended = exchange(server.port, "GET", logs, headers)
    assert ended == "eof"
    journal = split_response(whole)[2]
    server.cut_log_reads(after_bytes=8, reset=reset)
    raw, ended = exchange(server.port, "GET", logs, headers)
    assert ended == ("reset" if reset else "eof")
    if raw:
        status, fields, body = split_response(raw)
        assert status.endswith("200 OK")
        assert int(fields["content-length"]) > len(body)
        assert journal.startswith(body) and len(body) <= 8
    if not reset:
        assert raw and split_response(raw)[2] == journal[:8]
    again, _ = exchange(server.port, "GET", logs, headers)
    assert split_response(again)[2] == journal, "one read was cut, the next is whole"


def test_daytona_endless_listing_always_names_a_fresh_cursor(
    daytona: tuple[DaytonaEmulator, dict[str, Any]],
) -> None:
    server, _ = daytona
    server.endless_listing(times=3)
    cursors = []
    cursor = None
    for _ in range(3):
        params = {"limit": 1, **({"cursor": cursor} if cursor else {})}
        page = requests.get(
            f"{server.api_url}/sandbox", params=params, headers=BEARER, timeout=10
        ).json()
        assert [item["name"] for item in page["items"]] == ["box"]
        cursor = page["nextCursor"]
        cursors.append(cursor)
    assert len(set(cursors)) == 3 and all(cursors)
    last = requests.get(
        f"{server.api_url}/sandbox", params={"limit": 1}, headers=BEARER, timeout=10
    ).json()
    assert last["nextCursor"] is None, "the fault is spent after `times` pages"
