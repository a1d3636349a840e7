"""The Sprites emulator over raw WebSocket: exec frames, stdin, tty, sessions, attach, kill.

Byte layouts are those of docs/protocols/sprites.md#exec-over-websocket: a text ``session_info``
first (always with ``tty``), binary ``01``/``02`` output, ``03`` + one exit
byte, a normal close; client ``00`` stdin and ``04`` end of input.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
import requests
import websocket

from managoat_sandbox.emulators.sprites import SpritesEmulator
from tests.conftest import wait_until
from tests.sprites.host import host_pids

pytestmark = pytest.mark.timeout(60)
TOKEN = "sprites-exec-token"
AUTH = [f"Authorization: Bearer {TOKEN}"]
WAIT_GO = "while [ ! -e go ]; do sleep 0.01; done"


@pytest.fixture
def emulator() -> Iterator[SpritesEmulator]:
    with SpritesEmulator(credential=TOKEN) as server:
        response = requests.post(
            f"{server.base_url}/v1/sprites",
            json={"name": "box"},
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=10,
        )
        assert response.status_code == 201
        yield server  # type: ignore[misc]


def http(emulator: SpritesEmulator, method: str, path: str, **kwargs: Any) -> requests.Response:
    return requests.request(
        method,
        emulator.base_url + path,
        timeout=10,
        headers={"Authorization": f"Bearer {TOKEN}"},
        **kwargs,
    )


def connect(
    emulator: SpritesEmulator,
    path: str = "/v1/sprites/box/exec",
    params: list[tuple[str, str]] | None = None,
) -> websocket.WebSocket:
    url = emulator.base_url.replace("http", "ws", 1) + path
    if params:
        url += "?" + urlencode(params)
    return websocket.create_connection(url, header=AUTH, timeout=10)


def bash(script: str, *extra: tuple[str, str]) -> list[tuple[str, str]]:
    return [("cmd", "bash"), ("cmd", "-c"), ("cmd", script), *extra]


def session_info(ws: websocket.WebSocket) -> dict[str, Any]:
    opcode, data = ws.recv_data()
    assert opcode == websocket.ABNF.OPCODE_TEXT
    info: dict[str, Any] = json.loads(data)
    assert info["type"] == "session_info"
    return info


def until_end(ws: websocket.WebSocket) -> list[tuple[int, bytes]]:
    """Every message after session_info up to and including the close frame."""
    frames = []
    while True:
        opcode, data = ws.recv_data(control_frame=True)
        frames.append((opcode, data))
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            return frames


def output(frames: list[tuple[int, bytes]], stream: int) -> bytes:
    return b"".join(d[1:] for op, d in frames if op == 2 and d[:1] == bytes([stream]))


def read_until(ws: websocket.WebSocket, wanted: bytes) -> bytes:
    """Binary payloads (ids stripped) until ``wanted`` has been seen."""
    seen = b""
    while wanted not in seen:
        opcode, data = ws.recv_data()
        assert opcode == 2 and data[:1] in (b"\x01", b"\x02"), data
        seen += data[1:]
    return seen


def sessions(emulator: SpritesEmulator) -> list[dict[str, Any]]:
    answer = http(emulator, "GET", "/v1/sprites/box/exec")
    assert answer.status_code == 200
    listed: list[dict[str, Any]] = answer.json()["sessions"]
    return listed


def kill(emulator: SpritesEmulator, session_id: Any, **kwargs: Any) -> requests.Response:
    return http(emulator, "POST", f"/v1/sprites/box/exec/{session_id}/kill", **kwargs)


def events(response: requests.Response) -> list[dict[str, Any]]:
    return [json.loads(line) for line in response.text.splitlines() if line.strip()]


# -- a new command -----------------------------------------------------------------------------


def test_exec_frames_session_info_output_exit_byte_then_a_normal_close(
    emulator: SpritesEmulator,
) -> None:
    ws = connect(emulator, params=bash("echo hi; echo oops >&2; exit 7", ("stdin", "false")))
    info = session_info(ws)
    assert info == {
        **info,
        "tty": False,
        "is_owner": True,
        "command": "bash -c echo hi; echo oops >&2; exit 7",
    }
    assert isinstance(info["session_id"], int) and isinstance(info["created"], int)
    frames = until_end(ws)
    assert output(frames, 1) == b"hi\n" and output(frames, 2) == b"oops\n"
    assert frames[-2] == (2, b"\x03\x07")
    assert frames[-1] == (8, b"\x03\xe8")
    assert all(op != 2 or d[:1] in (b"\x01", b"\x02") for op, d in frames[:-2])


@pytest.mark.parametrize("code", [0, 1, 42, 130, 255])
def test_exit_codes_round_trip_as_one_byte(emulator: SpritesEmulator, code: int) -> None:
    ws = connect(emulator, params=bash(f"exit {code}"))
    session_info(ws)
    assert until_end(ws)[-2] == (2, bytes([3, code]))


def test_a_missing_program_exits_127_with_a_message_on_stderr(emulator: SpritesEmulator) -> None:
    ws = connect(emulator, params=[("cmd", "no-such-program-here")])
    session_info(ws)
    frames = until_end(ws)
    assert frames[-2] == (2, b"\x03\x7f")
    assert b"no-such-program-here" in output(frames, 2)


def test_upgrade_refusals_come_before_the_upgrade(emulator: SpritesEmulator) -> None:
    with pytest.raises(websocket.WebSocketBadStatusException) as missing_cmd:
        connect(emulator, params=[("stdin", "true")])
    assert missing_cmd.value.status_code == 400
    with pytest.raises(websocket.WebSocketBadStatusException) as unknown:
        connect(emulator, "/v1/sprites/nope/exec", bash("true"))
    assert unknown.value.status_code == 404
    with pytest.raises(websocket.WebSocketBadStatusException) as no_dir:
        connect(emulator, params=bash("true", ("dir", "/missing")))
    assert no_dir.value.status_code == 400


def test_env_and_dir_reach_the_process(emulator: SpritesEmulator) -> None:
    http(
        emulator,
        "PUT",
        "/v1/sprites/box/fs/write",
        data=b"",
        params={"path": "/work/.keep", "workingDir": "/", "mkdirParents": "true"},
    )
    ws = connect(
        emulator, params=bash('echo "$GREETING"; pwd', ("env", "GREETING=a=b"), ("dir", "/work"))
    )
    session_info(ws)
    lines = output(until_end(ws), 1).decode().splitlines()
    assert lines[0] == "a=b"
    sprite = emulator.state.get("box")
    assert sprite is not None
    assert lines[1] == sprite.box.agent_path("/work")  # "/work" itself when isolated


def test_stdin_frames_feed_the_process_and_04_ends_its_input(emulator: SpritesEmulator) -> None:
    ws = connect(emulator, params=[("cmd", "cat"), ("stdin", "true")])
    session_info(ws)
    ws.send_binary(b"\x00ping\n")
    assert read_until(ws, b"ping\n") == b"ping\n"
    ws.send_binary(b"\x00pong")
    ws.send_binary(b"\x04")
    frames = until_end(ws)
    assert output(frames, 1) == b"pong"
    assert frames[-2] == (2, b"\x03\x00")


def test_without_stdin_the_process_reads_end_of_input(emulator: SpritesEmulator) -> None:
    ws = connect(emulator, params=bash(f"{WAIT_GO}; cat", ("stdin", "false")))
    session_info(ws)
    ws.send_binary(b"\x00ignored")
    ws.send_binary(b"\x04")
    (emulator.sprite_root("box") / "go").touch()
    frames = until_end(ws)
    assert output(frames, 1) == b""
    assert frames[-2] == (2, b"\x03\x00")


def test_tty_mode_sends_raw_bytes_and_a_text_exit(emulator: SpritesEmulator) -> None:
    ws = connect(
        emulator,
        params=bash(
            "read line; echo got-$line; exit 3", ("tty", "true"), ("cols", "100"), ("rows", "30")
        ),
    )
    info = session_info(ws)
    assert info == {**info, "tty": True, "cols": 100, "rows": 30}
    ws.send_binary(b"hello\r")
    ws.send(json.dumps({"type": "resize", "cols": 120, "rows": 40}))
    seen = b""
    while True:
        opcode, data = ws.recv_data()
        if opcode == websocket.ABNF.OPCODE_TEXT:
            assert json.loads(data) == {"type": "exit", "exit_code": 3}
            break
        seen += data
    assert b"got-hello" in seen
    assert ws.recv_data(control_frame=True)[0] == websocket.ABNF.OPCODE_CLOSE


def test_a_signal_text_frame_signals_the_process_group(emulator: SpritesEmulator) -> None:
    ws = connect(emulator, params=bash("echo ready; sleep 30"))
    session_info(ws)
    read_until(ws, b"ready")
    ws.send(json.dumps({"type": "signal", "signal": "INT"}))
    assert until_end(ws)[-2] == (2, b"\x03\x82")


def test_large_output_arrives_complete_in_bounded_frames(emulator: SpritesEmulator) -> None:
    ws = connect(emulator, params=bash("head -c 300000 /dev/zero | tr '\\0' x"))
    session_info(ws)
    frames = until_end(ws)
    assert output(frames, 1) == b"x" * 300000
    assert max(len(d) for op, d in frames if op == 2) <= 32 * 1024 + 1


# -- sessions and attach -----------------------------------------------------------------------


def test_running_sessions_are_listed_with_string_ids(emulator: SpritesEmulator) -> None:
    ws = connect(emulator, params=bash(f"echo ready; {WAIT_GO}"))
    info = session_info(ws)
    read_until(ws, b"ready")
    (listed,) = sessions(emulator)
    assert listed["id"] == str(info["session_id"])
    assert listed == {
        **listed,
        "tty": False,
        "is_active": True,
        "workdir": "/",
        "bytes_per_second": 0.0,
    }
    assert listed["command"].startswith("bash -c echo ready")
    assert listed["created"].endswith("Z") and listed["last_activity"].endswith("Z")
    ws.close()
    assert wait_until(lambda: sessions(emulator)[0]["is_active"] is False)
    (emulator.sprite_root("box") / "go").touch()
    assert wait_until(lambda: sessions(emulator) == [])
    emulator.behaviour.list_finished_sessions = True
    assert [s["id"] for s in sessions(emulator)] == [str(info["session_id"])]


def test_attach_replays_from_byte_zero_then_tails_to_every_client(
    emulator: SpritesEmulator,
) -> None:
    owner = connect(emulator, params=bash(f"echo first; echo warn >&2; {WAIT_GO}; echo second"))
    session_id = session_info(owner)["session_id"]
    read_until(owner, b"first")
    attacher = connect(emulator, f"/v1/sprites/box/exec/{session_id}")
    info = session_info(attacher)
    assert info == {**info, "is_owner": False, "tty": False, "session_id": session_id}
    assert read_until(attacher, b"warn") == b"first\nwarn\n"
    (emulator.sprite_root("box") / "go").touch()
    for ws in (owner, attacher):
        frames = until_end(ws)
        assert b"second\n" in output(frames, 1)
        assert frames[-2] == (2, b"\x03\x00")


def test_output_made_while_nobody_listens_is_replayed(emulator: SpritesEmulator) -> None:
    ws = connect(emulator, params=bash(f"{WAIT_GO}; echo late; exit 4"))
    session_id = session_info(ws)["session_id"]
    ws.close()
    (emulator.sprite_root("box") / "go").touch()
    assert wait_until(lambda: sessions(emulator) == [])
    attacher = connect(emulator, f"/v1/sprites/box/exec/{session_id}")
    session_info(attacher)
    frames = until_end(attacher)
    assert output(frames, 1) == b"late\n"
    assert frames[-2] == (2, b"\x03\x04")


def test_legacy_attach_forms_and_unknown_sessions(emulator: SpritesEmulator) -> None:
    ws = connect(emulator, params=bash("echo done"))
    session_id = session_info(ws)["session_id"]
    until_end(ws)
    for params in ([("id", str(session_id))], [("session_id", str(session_id))]):
        again = connect(emulator, params=params)
        assert session_info(again)["is_owner"] is False
        frames = until_end(again)
        assert output(frames, 1) == b"done\n" and frames[-2] == (2, b"\x03\x00")
    with pytest.raises(websocket.WebSocketBadStatusException) as unknown:
        connect(emulator, "/v1/sprites/box/exec/999999")
    assert unknown.value.status_code == 404
    emulator.behaviour.attach_finished_status = 404
    with pytest.raises(websocket.WebSocketBadStatusException) as finished:
        connect(emulator, f"/v1/sprites/box/exec/{session_id}")
    assert finished.value.status_code == 404


def test_a_tty_session_attaches_in_tty_mode(emulator: SpritesEmulator) -> None:
    ws = connect(emulator, params=bash(f"echo tty-out; {WAIT_GO}", ("tty", "true")))
    session_id = session_info(ws)["session_id"]
    ws.close()
    attacher = connect(emulator, f"/v1/sprites/box/exec/{session_id}")
    assert session_info(attacher)["tty"] is True
    seen = b""
    while b"tty-out" not in seen:
        opcode, data = attacher.recv_data()
        assert opcode == websocket.ABNF.OPCODE_BINARY
        seen += data
    (emulator.sprite_root("box") / "go").touch()
    opcode, data = attacher.recv_data()
    while opcode != websocket.ABNF.OPCODE_TEXT:
        opcode, data = attacher.recv_data()
    assert json.loads(data) == {"type": "exit", "exit_code": 0}


def test_a_detached_command_runs_for_max_run_after_disconnect_then_is_killed(
    emulator: SpritesEmulator,
) -> None:
    forever = connect(emulator, params=bash("sleep 30", ("detachable", "true")))
    kept = session_info(forever)["session_id"]
    short = connect(emulator, params=bash("sleep 30", ("max_run_after_disconnect", "200ms")))
    limited = session_info(short)["session_id"]
    forever.close()
    short.close()
    assert wait_until(lambda: [s["id"] for s in sessions(emulator)] == [str(kept)])
    attacher = connect(emulator, f"/v1/sprites/box/exec/{limited}")
    session_info(attacher)
    assert until_end(attacher)[-2] == (2, b"\x03\x89")
    kill(emulator, kept, params={"signal": "SIGKILL"})


# -- kill --------------------------------------------------------------------------------------


def test_graceful_kill_streams_signal_exited_complete(emulator: SpritesEmulator) -> None:
    ws = connect(emulator, params=bash("echo ready; sleep 30"))
    session_id = session_info(ws)["session_id"]
    read_until(ws, b"ready")
    answer = kill(emulator, session_id, params={"signal": "SIGTERM", "timeout": "5000ms"})
    assert answer.status_code == 200
    assert answer.headers["Content-Type"].startswith("application/x-ndjson")
    signal_event, exited, complete = events(answer)
    assert signal_event["type"] == "signal" and signal_event["signal"] == "SIGTERM"
    assert isinstance(signal_event["pid"], int) and signal_event["pid"] > 0
    assert exited["type"] == "exited"
    assert complete == {"type": "complete", "exit_code": 143}
    assert until_end(ws)[-2] == (2, b"\x03\x8f")


def test_a_process_ignoring_sigterm_is_killed_after_the_timeout(
    emulator: SpritesEmulator,
) -> None:
    ws = connect(emulator, params=bash("trap '' TERM; echo ready; while :; do sleep 0.05; done"))
    session_id = session_info(ws)["session_id"]
    read_until(ws, b"ready")
    answer = kill(emulator, session_id, params={"signal": "SIGTERM", "timeout": "200ms"})
    assert [e["type"] for e in events(answer)] == ["signal", "timeout", "killed", "complete"]
    assert events(answer)[1]["message"] == "Timeout after 200ms, sending SIGKILL"
    assert events(answer)[-1]["exit_code"] == 137
    assert until_end(ws)[-2] == (2, b"\x03\x89")


def test_force_kill_and_the_json_body_form(emulator: SpritesEmulator) -> None:
    forced = connect(emulator, params=bash("sleep 30"))
    first = session_info(forced)["session_id"]
    answer = kill(emulator, first, params={"signal": "SIGKILL", "timeout": "0s"})
    signal_event, killed, complete = events(answer)
    assert signal_event["signal"] == "SIGKILL" and signal_event["pid"] > 0
    assert killed["type"] == "killed" and complete["exit_code"] == 137
    graceful = connect(emulator, params=bash("sleep 30"))
    second = session_info(graceful)["session_id"]
    answer = kill(emulator, str(second), json={"signal": "SIGTERM", "timeout": 1})
    assert [e["type"] for e in events(answer)] == ["signal", "exited", "complete"]
    neighbour_untouched = connect(emulator, params=bash("echo alive"))
    session_info(neighbour_untouched)
    assert until_end(neighbour_untouched)[-2] == (2, b"\x03\x00")


def test_kill_of_an_unknown_or_ended_session_is_404_or_410(emulator: SpritesEmulator) -> None:
    assert kill(emulator, 424242).status_code == 404
    ws = connect(emulator, params=bash("true"))
    session_id = session_info(ws)["session_id"]
    until_end(ws)
    assert kill(emulator, session_id).status_code == 404
    emulator.behaviour.kill_gone_status = 410
    assert kill(emulator, session_id).status_code == 410
    for bad in ({"signal": "SIGNOPE"}, {"signal": "999"}, {"timeout": "soon"}):
        assert kill(emulator, session_id, params=bad).status_code == 400


def test_a_malformed_kill_stream_does_nothing(emulator: SpritesEmulator) -> None:
    ws = connect(emulator, params=bash("echo ready; sleep 30"))
    session_id = session_info(ws)["session_id"]
    read_until(ws, b"ready")
    emulator.malformed_ndjson("kill")
    answer = kill(emulator, session_id)
    assert answer.status_code == 200
    assert answer.text == '{"type":"signal","signal":"SIGTERM"\nnot json at all\n'
    assert [s["id"] for s in sessions(emulator)] == [str(session_id)]
    kill(emulator, session_id, params={"signal": "SIGKILL"})


# -- WebSocket faults --------------------------------------------------------------------------


def test_a_fresh_sprite_refuses_its_first_execs_with_503(emulator: SpritesEmulator) -> None:
    emulator.refuse_fresh_execs(2)
    http(emulator, "POST", "/v1/sprites", json={"name": "fresh"})
    for _ in range(2):
        with pytest.raises(websocket.WebSocketBadStatusException) as refused:
            connect(emulator, "/v1/sprites/fresh/exec", bash("true"))
        assert refused.value.status_code == 503
        assert json.loads(refused.value.resp_body)["error"] == "unavailable"
    assert http(emulator, "GET", "/v1/sprites/fresh/exec").status_code == 200
    ws = connect(emulator, "/v1/sprites/fresh/exec", bash("true"))
    session_info(ws)
    assert until_end(ws)[-2] == (2, b"\x03\x00")
    box = connect(emulator, params=bash("true"))
    session_info(box)


def test_an_upgrade_refused_with_429_carries_retry_after(emulator: SpritesEmulator) -> None:
    emulator.refuse_upgrade(
        429,
        body={"error": "rate_limited", "retry_after_seconds": 17},
        headers={"Retry-After": "17"},
    )
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:
        connect(emulator, params=bash("true"))
    assert refused.value.status_code == 429
    assert refused.value.resp_headers["retry-after"] == "17"
    assert json.loads(refused.value.resp_body)["retry_after_seconds"] == 17
    assert sessions(emulator) == []


def test_a_socket_dropped_after_output_sends_no_exit(emulator: SpritesEmulator) -> None:
    emulator.drop_exec(after_frames=1)
    ws = connect(emulator, params=bash(f"echo partial; {WAIT_GO}; echo never"))
    session_id = session_info(ws)["session_id"]
    assert ws.recv_data() == (2, b"\x01partial\n")
    with pytest.raises(websocket.WebSocketConnectionClosedException):
        ws.recv_data(control_frame=True)
    assert [s["id"] for s in sessions(emulator)] == [str(session_id)]
    (emulator.sprite_root("box") / "go").touch()


def test_a_normal_close_without_the_exit_frame(emulator: SpritesEmulator) -> None:
    emulator.drop_exec(after_frames=0, close_frame=True)
    ws = connect(emulator, params=bash("echo out; exit 5"))
    session_info(ws)
    frames = until_end(ws)
    assert frames[-1] == (8, b"\x03\xe8")
    assert not any(op == 2 and d[:1] == b"\x03" for op, d in frames)


def test_no_emulator_thread_outlives_the_commands(emulator: SpritesEmulator) -> None:
    baseline = threading.active_count()
    for _ in range(3):
        ws = connect(emulator, params=[("cmd", "cat"), ("stdin", "true")])
        session_info(ws)
        ws.send_binary(b"\x00data")
        ws.send_binary(b"\x04")
        until_end(ws)
        ws.close()
    assert wait_until(lambda: threading.active_count() <= baseline)


def test_exit_frame_variants_replace_the_exit_message(emulator: SpritesEmulator) -> None:
    for payload in (b"\x03", b"\x03\x2a\x00\x00\x00", '{"type":"exit","code":9}'):
        emulator.exit_frame(payload)
        ws = connect(emulator, params=bash("exit 1"))
        session_info(ws)
        opcode, data = until_end(ws)[-2]
        assert data == (payload.encode() if isinstance(payload, str) else payload)
        assert opcode == (1 if isinstance(payload, str) else 2)


def test_session_ids_can_arrive_as_strings(emulator: SpritesEmulator) -> None:
    emulator.behaviour.string_session_ids = True
    ws = connect(emulator, params=bash("true"))
    session_id = session_info(ws)["session_id"]
    assert isinstance(session_id, str) and session_id.isdigit()
    until_end(ws)


# -- HTTP exec ---------------------------------------------------------------------------------


def test_http_exec_streams_the_same_frames_with_the_body_as_stdin(
    emulator: SpritesEmulator,
) -> None:
    answer = http(
        emulator,
        "POST",
        "/v1/sprites/box/exec",
        params=bash("cat; echo err >&2; exit 6"),
        data=b"from-body",
    )
    assert answer.status_code == 200
    assert answer.content == b"\x01from-body\x02err\n\x03\x06"
    assert http(emulator, "POST", "/v1/sprites/box/exec").status_code == 400


def test_stopping_with_a_socket_open_is_prompt_and_kills_the_command() -> None:
    baseline = threading.active_count()
    server = SpritesEmulator(credential=TOKEN).start()
    http(server, "POST", "/v1/sprites", json={"name": "box"})
    marker = f"stopped-{secrets.token_hex(6)}"
    ws = connect(server, params=bash(f"echo ready; sleep 30; : {marker}"))
    session_info(ws)
    read_until(ws, b"ready")
    assert host_pids(marker)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 5
    assert wait_until(lambda: not host_pids(marker))
    assert wait_until(lambda: threading.active_count() <= baseline)
    assert not server.workdir.exists()
