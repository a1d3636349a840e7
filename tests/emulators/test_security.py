"""An emulator as a network service: who may drive it, what it keeps, what it costs.

Through the base (:class:`tests.emulators.test_server.Echo`): the control API
wants the credential, fault specs are checked at the door and matched in
linear time, the request log is bounded and keeps no body or credential by
default, an unauthenticated request is answered before its body is read, and
a request whose Host does not name the emulator is refused.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from managoat_sandbox.emulators._access import HostCheck
from managoat_sandbox.emulators._faults import MAX_SIZE, Faults
from managoat_sandbox.emulators._pattern import PathPattern, PatternError
from managoat_sandbox.emulators._requestlog import MAX_BODY, LoggedRequest, RequestLog

from .test_server import Echo

pytestmark = pytest.mark.timeout(60)

SECRET = "secret-2"
AUTH = {"Authorization": f"Bearer {SECRET}"}


@pytest.fixture
def echo() -> Iterator[Echo]:
    with Echo(credential=SECRET) as emulator:
        yield emulator  # type: ignore[misc]


def hello(echo: Echo, **kwargs: object) -> requests.Response:
    return requests.get(f"{echo.base_url}/hello", headers=AUTH, timeout=5, **kwargs)  # type: ignore[arg-type]


def control(
    echo: Echo, method: str, path: str, headers: dict[str, str] | None = None, **kwargs: object
) -> requests.Response:
    return requests.request(
        method,
        f"{echo.base_url}/_emulator/{path}",
        headers=AUTH if headers is None else headers,
        timeout=5,
        **kwargs,
    )  # type: ignore[arg-type]


def raw_exchange(echo: Echo, head: bytes) -> bytes:
    """Send ``head`` on a fresh connection; the first line of the answer."""
    with socket.create_connection((echo.host, echo.port), timeout=10) as sock:
        sock.sendall(head)
        answer = b""
        while b"\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    return answer.split(b"\r\n", 1)[0]


# -- 1. the control API wants the credential ----------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "faults"), ("DELETE", "faults"), ("GET", "requests"), ("DELETE", "requests")],
)
def test_every_control_route_wants_the_credential(echo: Echo, method: str, path: str) -> None:
    body = {"kind": "status", "status": 503}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"X-Api-Key": SECRET}):
        answer = control(echo, method, path, headers=headers, json=body)
        assert answer.status_code == 401, headers
    assert hello(echo).status_code == 200, "no fault was added without the credential"
    assert control(echo, method, path, json=body).status_code in (200, 201)


# -- 2. fault specs are checked at the door, matched in linear time, and can be cleared --


def test_an_invalid_path_pattern_is_refused_and_the_emulator_keeps_serving(echo: Echo) -> None:
    answer = control(echo, "POST", "faults", json={"kind": "status", "path": "(unclosed"})
    assert answer.status_code == 400
    assert answer.json()["error"].startswith("path:")
    assert hello(echo).status_code == 200


def test_a_catastrophic_pattern_is_matched_without_backtracking(echo: Echo) -> None:
    assert (
        control(
            echo, "POST", "faults", json={"kind": "status", "status": 503, "path": "(.|.)*Z"}
        ).status_code
        == 201
    )
    long_path = "/hello/" + "a" * 4000
    assert requests.get(f"{echo.base_url}{long_path}", headers=AUTH, timeout=30).status_code == 404
    assert requests.get(f"{echo.base_url}/helloZ", headers=AUTH, timeout=5).status_code == 503


def test_delete_clears_every_pending_fault(echo: Echo) -> None:
    control(echo, "POST", "faults", json={"kind": "status", "status": 503, "times": 5})
    cleared = control(echo, "DELETE", "faults")
    assert cleared.status_code == 200 and cleared.json()["cleared"] == 1
    assert hello(echo).status_code == 200


ACCEPTED = [
    r"/exec/[^/]+/kill$",
    r"/exec(/[^/]+)?$",
    r"^/v1/sprites$",
    r"/process\.Process/(Start|Connect)$",
    r"^/api/sandbox(/[^/]+(/(start|stop))?)?$",
    r"/command/[^/]+(/logs)?$",
    r"^/api/sandbox/m-[0-9]+$",
    "/process.Process/Start",
    r"(?:a|b)+?c*\d\W[^]x-]",
    "",
    "a|",
    "(a*)*b",
    r"[]a]",
    r"[a-]",
    r"\S\s\D\w",
    "a{2,3}b",
    r"(x+x+)+y",
]


@pytest.mark.parametrize("pattern", ACCEPTED)
@settings(max_examples=60, deadline=None)
@given(text=st.text(alphabet="/abcxZ.-]0129 _S", max_size=24))
def test_patterns_match_as_re_search_does(pattern: str, text: str) -> None:
    assert PathPattern.compile(pattern).search(text) == bool(re.search(pattern, text))


@pytest.mark.parametrize(
    "pattern", ["(", ")", "*a", r"\1", "(?=a)", "[a", "a**", "[z-a]", "x" * 300]
)
def test_patterns_outside_the_language_are_refused(pattern: str) -> None:
    with pytest.raises(PatternError):
        PathPattern.compile(pattern)


# -- 3. every knob is capped -------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"kind": "oversize", "size": 3_000_000_000}, "size"),
        ({"kind": "oversize", "size": -1}, "size"),
        ({"kind": "stall", "seconds": -0.5}, "seconds"),
        ({"kind": "stall", "seconds": 600.5}, "seconds"),
        ({"kind": "stall", "seconds": 86400}, "seconds"),
        ({"kind": "status", "times": 0}, "times"),
        ({"kind": "status", "times": 10**12}, "times"),
        ({"kind": "status", "times": True}, "times"),
        ({"kind": "status", "status": 1000}, "status"),
        ({"kind": "status", "status": "500"}, "status"),
        ({"kind": "status", "headers": {"X": 1}}, "headers"),
        ({"kind": "status", "headers": {"X": "a\r\nb"}}, "headers"),
        ({"kind": "status", "method": "GET /x"}, "method"),
        ({"kind": "status", "body": "x" * (2 * 1024 * 1024)}, "body"),
        ({"kind": "Bad Kind!"}, "kind"),
        ({"kind": "status", "colour": "red"}, "colour"),
        ({"status": 503}, "kind"),
    ],
)
def test_out_of_bounds_fault_fields_are_400_naming_the_field(
    echo: Echo, spec: dict[str, object], field: str
) -> None:
    answer = control(
        echo,
        "POST",
        "faults",
        data=json.dumps(spec),
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert answer.status_code in (400, 413), answer.text
    if answer.status_code == 400:
        assert answer.json()["error"].startswith(f"{field}:"), answer.json()
    assert hello(echo).status_code == 200


def test_a_control_body_that_is_not_json_or_too_large_is_refused(echo: Echo) -> None:
    assert control(echo, "POST", "faults", data=b"{nope").status_code == 400
    for number in (b"NaN", b"Infinity", b"1e999"):
        spec = b'{"kind": "stall", "seconds": ' + number + b"}"
        assert control(echo, "POST", "faults", data=spec).status_code == 400, number
    assert control(echo, "POST", "faults", data=b" " * (2 * 1024 * 1024)).status_code == 413


def test_the_python_api_applies_the_same_bounds() -> None:
    faults = Faults()
    with pytest.raises(ValueError, match=r"^size:"):
        faults.add("oversize", size=MAX_SIZE + 1)
    with pytest.raises(ValueError, match=r"^path:"):
        faults.add("status", path="(")
    assert len(faults) == 0


def test_an_oversize_answer_has_the_size_asked_for(echo: Echo) -> None:
    control(echo, "POST", "faults", json={"kind": "oversize", "size": 300_000})
    assert len(hello(echo).content) == 300_000


# -- 4. the request log: bounded, no bodies or credentials by default ----------------------


def test_bodies_and_credential_parameters_are_not_logged_by_default(echo: Echo) -> None:
    requests.post(
        f"{echo.base_url}/hello?signature=sig-1&token=tok-1&page=2",
        headers=AUTH,
        data=b"file contents with a secret",
        timeout=5,
    )
    [entry] = echo.requests
    assert entry.body == b""
    assert dict(entry.query) == {"signature": "<redacted>", "token": "<redacted>", "page": "2"}
    assert entry.headers["Authorization"] == "<redacted>"
    assert "sig-1" not in repr(entry) and SECRET not in repr(entry)


def test_bodies_are_kept_when_asked_and_cut_to_the_cap() -> None:
    with Echo(credential=SECRET, log_bodies=True) as emulator:
        requests.post(f"{emulator.base_url}/hello", headers=AUTH, data=b"small", timeout=5)
        requests.post(
            f"{emulator.base_url}/hello", headers=AUTH, data=b"x" * (MAX_BODY + 10), timeout=5
        )
        requests.post(
            f"{emulator.base_url}/hello",
            headers={"Authorization": "Bearer no"},
            data=b"unauthenticated",
            timeout=5,
        )
        small, large = emulator.requests
        assert emulator.unauthenticated_requests == 1, "an unauthenticated request is not logged"
    assert (small.body, small.truncated) == (b"small", False)
    assert (len(large.body), large.truncated) == (MAX_BODY, True)


def test_the_log_drops_its_oldest_entries_past_its_bounds() -> None:
    def entry(index: int, body: bytes = b"") -> LoggedRequest:
        return LoggedRequest("GET", f"/{index}", (), {}, body)

    counted = RequestLog(max_entries=3, max_body_bytes=100)
    for index in range(5):
        counted.append(entry(index))
    assert [e.path for e in counted.snapshot()] == ["/2", "/3", "/4"]
    sized = RequestLog(max_entries=100, max_body_bytes=100)
    for index in range(5):
        sized.append(entry(index, b"x" * 40))
    assert [e.path for e in sized.snapshot()] == ["/3", "/4"]


def test_an_unauthenticated_request_is_answered_before_its_body_is_read(echo: Echo) -> None:
    head = (
        f"POST /hello HTTP/1.1\r\nHost: {echo.host}:{echo.port}\r\n"
        "Authorization: Bearer wrong\r\nContent-Length: 33554432\r\n\r\n"
    ).encode()
    # No body follows: were the body read first, no answer would ever come.
    assert raw_exchange(echo, head).startswith(b"HTTP/1.1 401")
    assert (echo.requests, echo.unauthenticated_requests) == ([], 1)


# -- 6. the Host must name the emulator ---------------------------------------------------------


def test_a_host_that_does_not_name_the_emulator_is_refused(echo: Echo) -> None:
    url = f"{echo.base_url}/hello"
    for host in (f"evil.example:{echo.port}", f"127.0.0.1:{echo.port + 1}", "127.0.0.1"):
        answer = requests.get(url, headers={**AUTH, "Host": host}, timeout=5)
        assert answer.status_code == 421, host
    assert echo.requests == [], "a misdirected request is not even logged"
    for host in (f"localhost:{echo.port}", f"127.0.0.1:{echo.port}"):
        assert requests.get(url, headers={**AUTH, "Host": host}, timeout=5).status_code == 200
    head = b"GET /hello HTTP/1.0\r\nAuthorization: Bearer " + SECRET.encode() + b"\r\n\r\n"
    assert raw_exchange(echo, head).startswith(b"HTTP/1.0 421")


def test_host_rules_for_each_kind_of_bound_address() -> None:
    loopback = HostCheck("127.0.0.1", lambda: 80)
    assert loopback.allows("127.0.0.1:80") and loopback.allows("LOCALHOST:80")
    assert not loopback.allows("127.0.0.1:81") and not loopback.allows("rebound.example:80")
    assert not loopback.allows(None) and not loopback.allows("")
    public = HostCheck("192.0.2.7", lambda: 80)
    assert public.allows("192.0.2.7:80") and not public.allows("localhost:80")
    everywhere = HostCheck("0.0.0.0", lambda: 80)
    assert everywhere.allows("192.0.2.7:80") and everywhere.allows("[::1]:80")
    assert not everywhere.allows("rebound.example:80")
    six = HostCheck("::1", lambda: 80)
    assert six.allows("[::1]:80") and six.allows("localhost:80") and not six.allows("[::2]:80")
    extra = HostCheck("127.0.0.1", lambda: 80, lambda host: host.endswith(".sandbox.test"))
    assert extra.allows("49983-abc.sandbox.test") and not extra.allows("sandbox.test:80")


# -- 6. the command line: a credential always, never needed in argv ----------------------------


def _serve(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "managoat_sandbox.emulators", "sprites", "--port", "0", *args],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def _sprites(base: str, token: str) -> int:
    return requests.get(
        f"{base}/v1/sprites", headers={"Authorization": f"Bearer {token}"}, timeout=10
    ).status_code


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SPRITES_TOKEN"}
    return {**env, "PYTHONUNBUFFERED": "1"}


def test_the_shell_entry_point_makes_and_prints_a_credential_when_given_none() -> None:
    process = _serve([], _environment())
    try:
        assert process.stdout is not None
        base = process.stdout.readline().strip()
        line = process.stdout.readline().strip()
        assert line.startswith("credential: ")
        token = line[len("credential: ") :]
        assert len(token) >= 24
        assert _sprites(base, token) == 200
        assert _sprites(base, "anything") == 401
    finally:
        process.terminate()
        assert process.wait(20) == 0


def test_the_shell_entry_point_reads_the_credential_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "credential"
    secret.write_text("from-a-file\n")
    process = _serve(["--credential-file", str(secret)], _environment())
    try:
        assert process.stdout is not None
        base = process.stdout.readline().strip()
        assert _sprites(base, "from-a-file") == 200
        assert _sprites(base, "anything") == 401
    finally:
        process.terminate()
        assert process.wait(20) == 0
        assert process.stdout is not None
        assert "from-a-file" not in process.stdout.read(), "a given credential is not printed"


def test_an_unreadable_credential_file_is_an_error(tmp_path: Path) -> None:
    process = _serve(["--credential-file", str(tmp_path / "missing")], _environment())
    assert process.wait(20) == 1
