"""The emulators as network services facing hostile clients (issue 23).

Four promises, each kept by the shared base (:mod:`managoat_sandbox.emulators._server`)
for all three emulators:

1. **No credential is logged in clear**: values of header and query parameter
   names that look like credentials, and every occurrence of a live credential
   (the emulator's own, the tokens it issued) anywhere in a logged request.
2. **Unauthenticated requests are counted, not logged**, so whoever reaches the
   port cannot push real entries out of the log.
3. **Bad input is a 4xx in the provider's error shape**, never a 500: huge
   integers, bytes that are not UTF-8, NULs, deeply nested JSON.
4. **Idle connections are closed** after the idle timeout, and a request being
   answered (a stream, a WebSocket) is never cut by it.

Every request goes to loopback; every emulator keeps its files in the test's
temporary directory. Nothing sleeps to win a race: the idle tests wait for the
server's close with a bounded socket timeout, and a stream's silence is proven
by a second, silent connection being closed meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import websocket
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from managoat_sandbox.emulators import Emulator
from managoat_sandbox.emulators._input import (
    MAX_JSON_DEPTH,
    BadInput,
    load_json,
    parse_int,
)
from managoat_sandbox.emulators._requestlog import REDACTED, credential_like
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.emulators.sprites import SpritesEmulator

pytestmark = pytest.mark.timeout(60)

SECRET = "emu-cred-7f3a9c"
AUTH = {"Authorization": f"Bearer {SECRET}"}
#: How long a test waits for the server to close a connection (the idle timeout is 0.3 s).
CLOSE_WAIT = 15.0
IDLE = 0.3


class Service(Emulator):
    """A minimal emulator: ``/hello``, ``/upload`` (reads its body), ``/stream`` (a chunked
    answer) and ``/ws`` (a WebSocket); the last two say ``start``, stay silent until the
    test sets :attr:`release`, then say ``end``."""

    provider = "service"
    credential_env = "NET_SERVICE_EMULATOR_TOKEN"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.release = threading.Event()

    def add_routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/hello", self._hello)
        app.router.add_post("/upload", self._upload)
        app.router.add_get("/stream", self._stream)
        app.router.add_get("/ws", self._ws)

    async def _hello(self, request: web.Request) -> web.Response:
        return web.json_response({"hello": "world"})

    async def _upload(self, request: web.Request) -> web.Response:
        return web.json_response({"size": len(await request.read())})

    async def _released(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.release.wait, 30.0)

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(b"start\n")
        await self._released()
        await response.write(b"end\n")
        await response.write_eof()
        return response

    async def _ws(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_str("start")
        await self._released()
        await ws.send_str("end")
        await ws.close()
        return ws


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    emulator = Service(credential=SECRET, workdir=tmp_path, idle_timeout=IDLE)
    with emulator:
        try:
            yield emulator
        finally:
            emulator.release.set()


def exchange(emulator: Emulator, request: bytes, body: bytes = b"") -> tuple[int, bytes]:
    """Send ``request`` (from :func:`head`) with ``body`` on a fresh connection; the
    answer's status and body."""
    line, _, headers = request.partition(b"\r\n")
    sent = (
        line
        + b" HTTP/1.1\r\n"
        + f"Host: {emulator.host}:{emulator.port}\r\nConnection: close\r\n".encode()
        + f"Content-Length: {len(body)}\r\n".encode()
        + headers
        + b"\r\n"
        + body
    )
    answer = b""
    with socket.create_connection((emulator.host, emulator.port), timeout=30) as sock:
        sock.sendall(sent)
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes ``sock`` within :data:`CLOSE_WAIT` (reading and
    discarding what it sends first)."""
    sock.settimeout(CLOSE_WAIT)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


# -- 1. no credential is logged in clear -----------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "Authorization",
        "Proxy-Authorization",
        "X-Api-Key",
        "X-Access-Token",
        "X-Token",
        "X-Sprite-Token",
        "X-Auth-Key",
        "X-Api-Token",
        "Cookie",
        "Set-Cookie",
        "pw",
        "PWD",
        "sig",
        "X-Sig",
        "jwt",
        "signature",
        "signature_expiration",
        "password",
        "accessToken",
        "client_secret",
        "session_id",
        "X-Credential",
    ],
)
def test_names_that_look_like_credentials_are_redacted(name: str) -> None:
    assert credential_like(name)


@pytest.mark.parametrize(
    "name",
    ["signal", "design", "page", "path", "cmd", "Content-Type", "User-Agent", "E2b-Sandbox-Id"],
)
def test_other_names_are_kept(name: str) -> None:
    assert not credential_like(name)


def test_credentials_are_redacted_wherever_a_request_carries_them(service: Service) -> None:
    named = {f"X-{kind}": f"header-secret-{kind}" for kind in ("Token", "Sprite-Token")}
    named |= {"X-Auth-Key": "header-secret-auth", "X-Api-Token": "header-secret-api"}
    params = {"pw": "param-secret-pw", "sig": "param-secret-sig", "jwt": "param-secret-jwt"}
    requests.get(
        f"{service.base_url}/hello/{SECRET}",
        params={**params, "note": f"a{SECRET}b", SECRET: "1", "signal": "SIGTERM"},
        headers={**AUTH, **named, "X-Note": f"carried {SECRET} inside"},
        timeout=5,
    )
    [entry] = service.requests
    shown = (
        repr(service.requests)
        + requests.get(f"{service.base_url}/_emulator/requests", headers=AUTH, timeout=5).text
    )
    for secret in [SECRET, *named.values(), *params.values()]:
        assert secret not in shown
    query = dict(entry.query)
    assert entry.path == f"/hello/{REDACTED}"
    assert query["note"] == f"a{REDACTED}b" and query[REDACTED] == "1"
    assert query["signal"] == "SIGTERM", "a name that merely starts like one is kept"
    assert entry.headers["X-Note"] == f"carried {REDACTED} inside"
    assert all(entry.headers[name] == REDACTED for name in named)


def test_a_token_the_emulator_issued_is_redacted_too(tmp_path: Path) -> None:
    with E2BEmulator(credential=SECRET, workdir=tmp_path) as emulator:
        created = requests.post(
            f"{emulator.base_url}/v2/sandboxes",
            json={"templateID": "base"},
            headers={"X-API-Key": SECRET},
            timeout=30,
        ).json()
        token = created["envdAccessToken"]
        answer = requests.get(
            f"{emulator.base_url}/health",
            params={"echo": token},
            headers={
                "E2b-Sandbox-Id": created["sandboxID"],
                "E2b-Sandbox-Port": "49983",
                "X-Access-Token": token,
                "X-Debug": f"token={token}",
            },
            timeout=5,
        )
        assert answer.status_code == 204
        [health] = [entry for entry in emulator.requests if entry.path == "/health"]
        assert token not in repr(emulator.requests)
        assert health.headers["X-Debug"] == f"token={REDACTED}"


# -- 2. unauthenticated requests are counted, not logged ----------------------------------------


def test_unauthenticated_requests_are_counted_and_never_logged(service: Service) -> None:
    assert requests.get(f"{service.base_url}/hello", headers=AUTH, timeout=5).status_code == 200
    with requests.Session() as session:
        for attempt in range(50):
            headers = {} if attempt % 2 else {"Authorization": f"Bearer wrong-{attempt}"}
            path = "/_emulator/requests" if attempt % 5 == 0 else "/hello"
            answer = session.get(f"{service.base_url}{path}", headers=headers, timeout=5)
            assert answer.status_code == 401
    assert [entry.path for entry in service.requests] == ["/hello"]
    assert service.unauthenticated_requests == 50
    counted = requests.get(
        f"{service.base_url}/_emulator/requests/unauthenticated", headers=AUTH, timeout=5
    )
    assert counted.json() == {"unauthenticated": 50}
    logged = requests.get(f"{service.base_url}/_emulator/requests", headers=AUTH, timeout=5)
    assert [entry["path"] for entry in logged.json()] == ["/hello"]
    requests.delete(f"{service.base_url}/_emulator/requests", headers=AUTH, timeout=5)
    assert (service.requests, service.unauthenticated_requests) == ([], 0)


def test_envd_requests_without_their_sandbox_token_are_counted_not_logged(
    tmp_path: Path,
) -> None:
    with E2BEmulator(credential=SECRET, workdir=tmp_path) as emulator:
        created = requests.post(
            f"{emulator.base_url}/v2/sandboxes",
            json={"templateID": "base"},
            headers={"X-API-Key": SECRET},
            timeout=30,
        ).json()
        envd = {"E2b-Sandbox-Id": created["sandboxID"], "E2b-Sandbox-Port": "49983"}
        emulator.clear_requests()
        url = f"{emulator.base_url}/process.Process/List"
        for token in ("wrong", SECRET):
            headers = {**envd, "X-Access-Token": token, "Content-Type": "application/json"}
            assert requests.post(url, headers=headers, json={}, timeout=5).status_code == 401
        unknown = {"E2b-Sandbox-Id": "inope", "E2b-Sandbox-Port": "49983"}
        assert (
            requests.get(f"{emulator.base_url}/health", headers=unknown, timeout=5).status_code
            == 502
        )
        assert requests.get(f"{emulator.base_url}/health", headers=envd, timeout=5).ok
        assert emulator.requests == [] and emulator.unauthenticated_requests == 4
        good = {**envd, "X-Access-Token": created["envdAccessToken"]}
        assert requests.post(url, headers=good, json={}, timeout=5).status_code == 200
        gone = {**unknown, "X-Access-Token": created["envdAccessToken"]}
        assert (
            requests.get(f"{emulator.base_url}/health", headers=gone, timeout=5).status_code == 502
        )
        logged = [(entry.path, entry.headers["E2b-Sandbox-Id"]) for entry in emulator.requests]
        assert logged == [("/process.Process/List", created["sandboxID"]), ("/health", "inope")]


# -- 3. bad input is a 4xx in the provider's error shape --------------------------------------

DEEP = b"[" * 100_000 + b"]" * 100_000
HUGE = "7" * 22


@pytest.fixture(scope="module")
def sprites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpritesEmulator]:
    with SpritesEmulator(credential=SECRET, workdir=tmp_path_factory.mktemp("sprites")) as emu:
        created = requests.post(
            f"{emu.base_url}/v1/sprites", json={"name": "box"}, headers=AUTH, timeout=30
        )
        assert created.status_code == 201
        yield emu  # type: ignore[misc]


@pytest.fixture(scope="module")
def e2b(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[E2BEmulator, str]]:
    with E2BEmulator(credential=SECRET, workdir=tmp_path_factory.mktemp("e2b")) as emu:
        created = requests.post(
            f"{emu.base_url}/v2/sandboxes",
            json={"templateID": "base"},
            headers={"X-API-Key": SECRET},
            timeout=30,
        ).json()
        yield emu, created["sandboxID"]  # type: ignore[misc]


@pytest.fixture(scope="module")
def daytona(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaytonaEmulator, str]]:
    with DaytonaEmulator(credential=SECRET, workdir=tmp_path_factory.mktemp("daytona")) as emu:
        created = requests.post(
            f"{emu.base_url}/api/sandbox", json={"name": "box"}, headers=AUTH, timeout=30
        ).json()
        yield emu, created["id"]  # type: ignore[misc]


def assert_sprites_error(status: int, body: bytes) -> None:
    assert 400 <= status < 500, body
    assert set(json.loads(body)) >= {"error", "message"}


def assert_e2b_error(status: int, body: bytes) -> None:
    """The API's and envd's ``{"code", "message"}`` (``code`` a Connect code on an RPC)."""
    assert 400 <= status < 500, body
    answer = json.loads(body)
    assert set(answer) == {"code", "message"} and answer["code"] in (status, "invalid_argument")


def assert_nest_error(status: int, body: bytes) -> None:
    assert 400 <= status < 500, body
    answer = json.loads(body)
    assert set(answer) == {"path", "timestamp", "statusCode", "error", "message"}
    assert answer["statusCode"] == status


def assert_daemon_error(status: int, body: bytes) -> None:
    assert 400 <= status < 500, body
    answer = json.loads(body)
    assert set(answer) == {"statusCode", "message", "code", "timestamp", "path", "method"}


def head(line: str | bytes, **headers: str | bytes) -> bytes:
    """A request line and headers (``X_Note`` is sent as ``X-Note``), each ending CRLF."""
    lines = [line.encode() if isinstance(line, str) else line]
    for name, value in headers.items():
        raw = value.encode() if isinstance(value, str) else value
        lines.append(name.replace("_", "-").encode() + b": " + raw)
    return b"\r\n".join(lines) + b"\r\n"


#: (case, request line, extra headers, body); ``{id}`` is the sandbox's id.
SPRITES_CASES: list[tuple[str, str, dict[str, bytes], bytes]] = [
    (
        "mode out of range",
        f"PUT /v1/sprites/box/fs/write?path=f&workingDir=/tmp&mode={HUGE}",
        {},
        b"x",
    ),
    ("NUL in the path", "GET /v1/sprites/b%00x", {}, b""),
    ("NUL in a query", "GET /v1/sprites/box/fs/read?path=/tmp/a%00b&workingDir=/", {}, b""),
    ("deep JSON", "POST /v1/sprites", {}, DEEP),
    ("lone surrogate", "POST /v1/sprites", {}, b'{"name": "\\ud800"}'),
    ("integer past 64 bits", "PUT /v1/sprites/box", {}, b'{"labels": 1' + b"0" * 30 + b"}"),
    ("5000-digit session id", f"POST /v1/sprites/box/exec/{'9' * 5000}/kill", {}, b""),
    ("another script's digit", "GET /v1/sprites/box/exec/%C2%B2", {}, b""),
    ("header not UTF-8", "GET /v1/sprites", {"X_Note": b"\xff\xfe"}, b""),
]


@pytest.mark.parametrize(("case", "line", "headers", "body"), SPRITES_CASES)
def test_bad_input_to_sprites_is_a_sprites_4xx(
    sprites: SpritesEmulator, case: str, line: str, headers: dict[str, bytes], body: bytes
) -> None:
    request = head(line, Authorization=f"Bearer {SECRET}", **headers)
    assert_sprites_error(*exchange(sprites, request, body))


_ENVD = {"E2b_Sandbox_Id": b"{id}", "E2b_Sandbox_Port": b"49983"}
_KEY = {"X_API_Key": SECRET.encode(), "Content_Type": b"application/json"}
E2B_CASES: list[tuple[str, str, dict[str, bytes], bytes]] = [
    ("access token not UTF-8", "GET /files?path=/a", {**_ENVD, "X_Access_Token": b"\xff"}, b""),
    (
        "RPC access token not UTF-8",
        "POST /process.Process/List",
        {**_ENVD, "X_Access_Token": b"\xff", "Content_Type": b"application/json"},
        b"{}",
    ),
    (
        "5000-digit signature_expiration",
        f"GET /files?path=/a&signature=v1_x&signature_expiration={'9' * 5000}",
        _ENVD,
        b"",
    ),
    ("API key not UTF-8", "GET /v2/sandboxes", {"X_API_Key": b"\xff"}, b""),
    ("deep JSON", "POST /v2/sandboxes", _KEY, DEEP),
    ("number not finite", "POST /v2/sandboxes", _KEY, b'{"templateID": "b", "timeout": 1e400}'),
    ("timeout too long", "POST /sandboxes/{id}/timeout", _KEY, b'{"timeout": 9000000000000}'),
    ("NUL in the path", "GET /sandboxes/i%00x", _KEY, b""),
]


@pytest.mark.parametrize(("case", "line", "headers", "body"), E2B_CASES)
def test_bad_input_to_e2b_is_an_e2b_4xx(
    e2b: tuple[E2BEmulator, str], case: str, line: str, headers: dict[str, bytes], body: bytes
) -> None:
    emulator, sandbox_id = e2b
    filled = {name: value.replace(b"{id}", sandbox_id.encode()) for name, value in headers.items()}
    request = head(line.replace("{id}", sandbox_id), **filled)
    assert_e2b_error(*exchange(emulator, request, body))


def test_a_nul_in_an_envd_path_is_an_invalid_argument(e2b: tuple[E2BEmulator, str]) -> None:
    emulator, sandbox_id = e2b
    request = head(
        "POST /filesystem.Filesystem/Stat",
        E2b_Sandbox_Id=sandbox_id,
        E2b_Sandbox_Port="49983",
        X_Access_Token=emulator.record(sandbox_id).access_token,
        Content_Type="application/json",
    )
    status, body = exchange(emulator, request, b'{"path": "/tmp/a\\u0000b"}')
    assert status == 400 and json.loads(body)["code"] == "invalid_argument"


_JSON = {"Content_Type": b"application/json"}
DAYTONA_CASES: list[tuple[str, str, dict[str, bytes], bytes]] = [
    ("deep JSON", "POST /api/sandbox", _JSON, DEEP),
    ("NUL in the path", "GET /api/sandbox/a%00b", {}, b""),
    ("huge interval", f"POST /api/sandbox/{{id}}/autostop/{HUGE}", {}, b""),
    ("deep labels", "PUT /api/sandbox/{id}/labels", _JSON, DEEP),
    ("NUL in an env value", "POST /api/sandbox", _JSON, b'{"env": {"A": "a\\u0000b"}}'),
    ("header not UTF-8", "GET /api/sandbox", {"X_Note": b"\xff"}, b""),
    ("NUL in a toolbox path", "GET /toolbox/{id}%00/files", {}, b""),
]


@pytest.mark.parametrize(("case", "line", "headers", "body"), DAYTONA_CASES)
def test_bad_input_to_daytona_is_a_daytona_4xx(
    daytona: tuple[DaytonaEmulator, str],
    case: str,
    line: str,
    headers: dict[str, bytes],
    body: bytes,
) -> None:
    emulator, sandbox_id = daytona
    request = head(line.replace("{id}", sandbox_id), Authorization=f"Bearer {SECRET}", **headers)
    status, answer = exchange(emulator, request, body)
    (assert_daemon_error if "/toolbox/" in line else assert_nest_error)(status, answer)


def test_bad_input_to_the_control_api_is_a_400(service: Service) -> None:
    request = head("POST /_emulator/faults", Authorization=f"Bearer {SECRET}")
    for body in (DEEP, b'{"kind": "stall", "seconds": 1' + b"0" * 30 + b"}"):
        status, answer = exchange(service, request, body)
        assert status == 400 and "error" in json.loads(answer)


@pytest.mark.parametrize(
    "text",
    [
        "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1),
        "[" * 100_000 + "]" * 100_000,
        "1" + "0" * 19,
        "-9223372036854775809",
        "9" * 5000,
        "1e400",
        "NaN",
        "-Infinity",
        '"\\ud800"',
        '{"\\udc80": 1}',
        "{nope",
        "\udcff",
    ],
)
def test_json_no_route_takes_is_bad_input(text: str) -> None:
    with pytest.raises(BadInput):
        load_json(text)


def test_json_within_the_bounds_is_parsed() -> None:
    deepest = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert load_json(deepest) is not None
    assert load_json(b'{"n": -9223372036854775808, "f": 1.5, "s": "a\\u0000\\ud83d\\ude00"}') == {
        "n": -(2**63),
        "f": 1.5,
        "s": "a\x00\U0001f600",
    }


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(), st.binary()))
def test_any_input_parses_or_is_bad_input(raw: str | bytes) -> None:
    with contextlib.suppress(BadInput):
        load_json(raw)


@pytest.mark.parametrize(
    ("text", "base"),
    [
        ("9" * 5000, 10),
        ("\u00b2", 10),
        ("\u0663", 10),
        (" 1", 10),
        ("1_0", 10),
        ("8", 8),
        ("-1", 8),
        ("", 10),
    ],
)
def test_integers_in_text_are_ascii_digits_within_bounds(text: str, base: int) -> None:
    with pytest.raises(BadInput):
        parse_int(text, "n", low=0, high=2**40, base=base)


# -- 4. idle connections are closed; a request being answered is not -----------------------


def test_a_silent_connection_is_closed_after_the_idle_timeout(service: Service) -> None:
    with socket.create_connection((service.host, service.port), timeout=CLOSE_WAIT) as sock:
        assert closed_by_server(sock)


def test_a_connection_idle_after_its_answer_is_closed(service: Service) -> None:
    head = (
        f"GET /hello HTTP/1.1\r\nHost: {service.host}:{service.port}\r\n"
        f"Authorization: Bearer {SECRET}\r\n\r\n"
    ).encode()
    with socket.create_connection((service.host, service.port), timeout=CLOSE_WAIT) as sock:
        sock.sendall(head)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        assert closed_by_server(sock)


def test_a_request_head_sent_in_part_is_closed(service: Service) -> None:
    with socket.create_connection((service.host, service.port), timeout=CLOSE_WAIT) as sock:
        sock.sendall(b"GET /hello HTTP/1.1\r\nHost: ")
        assert closed_by_server(sock)


def test_a_request_whose_body_stops_arriving_is_closed(service: Service) -> None:
    head = (
        f"POST /upload HTTP/1.1\r\nHost: {service.host}:{service.port}\r\n"
        f"Authorization: Bearer {SECRET}\r\nContent-Length: 100\r\n\r\n"
    ).encode()
    with socket.create_connection((service.host, service.port), timeout=CLOSE_WAIT) as sock:
        sock.sendall(head + b"only ten b")
        assert closed_by_server(sock)


def _outlast_the_idle_timeout(service: Service) -> None:
    """Return once a connection opened now has been closed as idle: whatever was silent
    since before this call has been silent for longer than the idle timeout."""
    with socket.create_connection((service.host, service.port), timeout=CLOSE_WAIT) as probe:
        assert closed_by_server(probe)


def test_a_silent_streaming_answer_is_not_cut(service: Service) -> None:
    with requests.get(
        f"{service.base_url}/stream", headers=AUTH, stream=True, timeout=CLOSE_WAIT
    ) as answer:
        lines = answer.iter_lines()
        assert next(lines) == b"start"
        _outlast_the_idle_timeout(service)
        service.release.set()
        assert list(lines) == [b"end"]


def test_a_silent_websocket_is_not_cut(service: Service) -> None:
    ws = websocket.create_connection(
        f"ws://{service.host}:{service.port}/ws",
        header=[f"Authorization: Bearer {SECRET}"],
        timeout=CLOSE_WAIT,
    )
    try:
        assert ws.recv() == "start"
        _outlast_the_idle_timeout(service)
        service.release.set()
        assert ws.recv() == "end"
    finally:
        ws.close()


@pytest.mark.parametrize("seconds", [0, -1, float("nan"), float("inf"), 86_401, True])
def test_an_idle_timeout_out_of_bounds_is_refused(seconds: float, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="idle_timeout"):
        Service(credential=SECRET, workdir=tmp_path, idle_timeout=seconds)


def _entry_point(tmp_path: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "managoat_sandbox.emulators",
        "sprites",
        "--port",
        "0",
        "--workdir",
        str(tmp_path),
        *args,
    ]


def test_the_shell_entry_point_takes_an_idle_timeout(tmp_path: Path) -> None:
    env = {**os.environ, "SPRITES_TOKEN": SECRET, "PYTHONUNBUFFERED": "1"}
    refused = subprocess.run(
        _entry_point(tmp_path, "--idle-timeout", "0"),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 1
    assert refused.stderr.startswith("cannot serve: idle_timeout:"), refused.stderr
    process = subprocess.Popen(
        _entry_point(tmp_path, "--idle-timeout", str(IDLE)),
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        address = process.stdout.readline().strip().removeprefix("http://")
        host, _, port = address.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=CLOSE_WAIT) as sock:
            assert closed_by_server(sock)
    finally:
        process.terminate()
        assert process.wait(20) == 0
