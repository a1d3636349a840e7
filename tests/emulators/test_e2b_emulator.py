"""The E2B emulator driven with raw HTTP: every route, the Connect framing, every fault.

The envelope codec below is written here, independently of the emulator's,
so the bytes on the wire are checked against docs/protocols/e2b.md#connect-envelopes, not
against the emulator's own idea of them.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import re
import secrets
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import requests

from managoat_sandbox._engine import isolation, safefs
from managoat_sandbox.emulators.e2b import E2BEmulator

from ..conftest import wait_until
from ..handshake import e2b_gate

pytestmark = pytest.mark.timeout(60)

KEY = "e2b_test_key"
ENVD_PORT = "49983"

#: Tests that probe the sandbox's walls: skipped, never run, where the host cannot isolate.
requires_isolation = pytest.mark.skipif(
    not isolation.support().available,
    reason=f"sandbox isolation is unavailable here: {isolation.support().reason}",
)


# -- an independent Connect codec ------------------------------------------------------------


def envelope(message: Any, flags: int = 0) -> bytes:
    payload = json.dumps(message).encode()
    return struct.pack(">BI", flags, len(payload)) + payload


class Decoder:
    """Buffers chunks and yields complete (flags, message) envelopes."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, chunk: bytes) -> list[tuple[int, Any]]:
        self.buffer += chunk
        out = []
        while len(self.buffer) >= 5:
            flags, length = struct.unpack(">BI", self.buffer[:5])
            if len(self.buffer) < 5 + length:
                break
            out.append((flags, json.loads(self.buffer[5 : 5 + length])))
            self.buffer = self.buffer[5 + length :]
        return out


def events_of(frames: list[tuple[int, Any]]) -> list[tuple[str, Any]]:
    """(kind, body) for data envelopes; ("trailer", json) for the end-of-stream one."""
    out: list[tuple[str, Any]] = []
    for flags, message in frames:
        if flags == 2:
            out.append(("trailer", message))
        else:
            ((kind, body),) = message["event"].items()
            out.append((kind, body))
    return out


def stdout_of(events: list[tuple[str, Any]], key: str = "stdout") -> bytes:
    return b"".join(
        base64.b64decode(body[key]) for kind, body in events if kind == "data" and key in body
    )


# -- a tiny raw client -----------------------------------------------------------------------


class Raw:
    """Raw HTTP against one emulator."""

    def __init__(self, emulator: E2BEmulator) -> None:
        self.emulator = emulator
        self.url = emulator.base_url
        self.session = requests.Session()

    def api(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        headers = {"X-API-Key": KEY, **kwargs.pop("headers", {})}
        return self.session.request(method, self.url + path, headers=headers, timeout=10, **kwargs)

    def create(self, **body: Any) -> dict[str, Any]:
        answer = self.api("POST", "/v2/sandboxes", json={"templateID": "base", **body})
        assert answer.status_code == 201, answer.text
        created: dict[str, Any] = answer.json()
        return created

    def envd_headers(
        self, sandbox: dict[str, Any], content_type: str = "application/json", **extra: str
    ) -> dict[str, str]:
        return {
            "E2b-Sandbox-Id": sandbox["sandboxID"],
            "E2b-Sandbox-Port": ENVD_PORT,
            "X-Access-Token": sandbox["envdAccessToken"],
            "Content-Type": content_type,
            **extra,
        }

    def unary(
        self, sandbox: dict[str, Any], method: str, body: Any, **headers: str
    ) -> requests.Response:
        return self.session.post(
            f"{self.url}/process.Process/{method}",
            json=body,
            headers=self.envd_headers(sandbox, **headers),
            timeout=10,
        )

    def open_stream(
        self, sandbox: dict[str, Any], method: str, message: Any, **headers: str
    ) -> requests.Response:
        return self.session.post(
            f"{self.url}/process.Process/{method}",
            data=envelope(message),
            stream=True,
            headers=self.envd_headers(sandbox, "application/connect+json", **headers),
            timeout=10,
        )

    def stream(
        self, sandbox: dict[str, Any], method: str, message: Any, **headers: str
    ) -> list[tuple[str, Any]]:
        with self.open_stream(sandbox, method, message, **headers) as response:
            assert response.status_code == 200
            assert response.headers["Content-Type"] == "application/connect+json"
            decoder = Decoder()
            frames = []
            for chunk in response.iter_content(None):
                frames += decoder.feed(chunk)
            assert decoder.buffer == b""
        return events_of(frames)

    def start(self, sandbox: dict[str, Any], script: str, **fields: Any) -> list[tuple[str, Any]]:
        return self.stream(
            sandbox, "Start", {"process": {"cmd": "bash", "args": ["-c", script]}, **fields}
        )


class Live:
    """An open stream read event by event."""

    def __init__(self, response: requests.Response) -> None:
        self.response = response
        self.chunks = response.iter_content(None)
        self.decoder = Decoder()
        self.pending: list[tuple[str, Any]] = []

    def next(self) -> tuple[str, Any]:
        while not self.pending:
            self.pending = events_of(self.decoder.feed(next(self.chunks)))
        return self.pending.pop(0)

    def until(self, kind: str) -> list[tuple[str, Any]]:
        seen = []
        while True:
            event = self.next()
            seen.append(event)
            if event[0] in (kind, "trailer"):
                return seen

    def until_stdout(self, text: bytes) -> list[tuple[str, Any]]:
        seen: list[tuple[str, Any]] = []
        while text not in stdout_of(seen):
            seen.append(self.next())
            assert seen[-1][0] != "trailer", seen
        return seen


@pytest.fixture
def emulator() -> Iterator[E2BEmulator]:
    with E2BEmulator(credential=KEY, seed=7) as running:
        yield running  # type: ignore[misc]


@pytest.fixture
def raw(emulator: E2BEmulator) -> Iterator[Raw]:
    client = Raw(emulator)
    yield client
    client.session.close()


def host_pid(emulator: E2BEmulator, sandbox_id: str, pid: int) -> int:
    """The host pid of the sandbox's process ``pid`` (itself when commands are not isolated).

    Looks for the process whose innermost ``NSpid`` is ``pid`` in the PID namespace of
    the sandbox's agent (whose host pid the engine records in ``state/agent.json``).
    """
    box = emulator.world.table(sandbox_id).sandbox.box
    if not box.settings.isolated:
        return pid
    agent = json.loads((box.state / "agent.json").read_text())["pid"]
    namespace = os.readlink(f"/proc/{agent}/ns/pid")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/ns/pid") != namespace:
                continue
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:") and int(line.split()[-1]) == pid:
                return int(entry)
    raise AssertionError(f"no process {pid} in sandbox {sandbox_id}")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


# -- control plane ----------------------------------------------------------------------------


def test_create_v2_answers_201_with_the_fields_the_sdk_needs(raw: Raw) -> None:
    created = raw.create(metadata={"fountain_name": "a"})
    assert re.fullmatch(r"i[a-z0-9]{20}", created["sandboxID"])
    assert created["clientID"] == "6532622b"
    assert created["templateID"] == "base"
    major, minor, patch = (int(x) for x in created["envdVersion"].split("."))
    assert (major, minor, patch) >= (0, 5, 2)
    assert isinstance(created["envdAccessToken"], str) and len(created["envdAccessToken"]) > 16
    detail = raw.api("GET", f"/sandboxes/{created['sandboxID']}").json()
    assert detail["envdAccessToken"] == created["envdAccessToken"]
    assert detail["lifecycle"] == {"autoResume": False, "onTimeout": "kill"}
    assert detail["state"] == "running" and detail["metadata"] == {"fountain_name": "a"}


def test_v2_defaults_the_ttl_to_300_s_and_the_deprecated_v1_route_to_15_s(raw: Raw) -> None:
    def ttl(sandbox_id: str) -> float:
        detail = raw.api("GET", f"/sandboxes/{sandbox_id}").json()
        start, end = (
            time.mktime(time.strptime(detail[k][:19], "%Y-%m-%dT%H:%M:%S"))
            for k in ("startedAt", "endAt")
        )
        return end - start

    assert ttl(raw.create()["sandboxID"]) == 300
    v1 = raw.api("POST", "/sandboxes", json={"templateID": "base"})
    assert v1.status_code == 201
    assert ttl(v1.json()["sandboxID"]) == 15


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"templateID": "base", "timeout": 0},
        {"templateID": "base", "autoPauseMemory": False},
        {"templateID": "base", "network": {"allowOut": ["example.com"]}},
        {"templateID": "base", "network": {"denyOut": ["example.com"]}},
        {"templateID": "base", "network": {"allowPublicTraffic": "no"}},
    ],
)
def test_create_refuses_bad_bodies_with_400_and_the_error_shape(raw: Raw, body: Any) -> None:
    answer = raw.api("POST", "/v2/sandboxes", json=body)
    assert answer.status_code == 400
    assert answer.json()["code"] == 400 and answer.json()["message"]


def test_a_sandbox_closed_to_public_traffic_gets_a_traffic_access_token(
    raw: Raw, emulator: E2BEmulator
) -> None:
    closed = raw.create(network={"allowPublicTraffic": False})
    other = raw.create(network={"allowPublicTraffic": False})
    token = closed["trafficAccessToken"]
    assert isinstance(token, str) and len(token) >= 16
    assert token not in (closed["envdAccessToken"], other["trafficAccessToken"])
    reconnected = raw.api("POST", f"/v2/sandboxes/{closed['sandboxID']}/connect", json={})
    assert reconnected.json()["trafficAccessToken"] == token
    assert token not in repr(emulator.record(closed["sandboxID"]))
    assert raw.create()["trafficAccessToken"] is None
    assert raw.create(network={"allowPublicTraffic": True})["trafficAccessToken"] is None
    # Opening the sandbox to the public withdraws the token from the answers.
    assert (
        raw.api(
            "PUT", f"/sandboxes/{closed['sandboxID']}/network", json={"allowPublicTraffic": True}
        ).status_code
        == 204
    )
    reopened = raw.api("POST", f"/v2/sandboxes/{closed['sandboxID']}/connect", json={})
    assert reopened.json()["trafficAccessToken"] is None


def test_invalid_json_is_400(raw: Raw) -> None:
    answer = raw.api(
        "POST", "/v2/sandboxes", data=b"{nope", headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 400


def test_the_api_key_is_required_checked_and_redacted(raw: Raw, emulator: E2BEmulator) -> None:
    missing = requests.get(f"{raw.url}/v2/sandboxes", timeout=5)
    wrong = requests.get(f"{raw.url}/v2/sandboxes", headers={"X-API-Key": "nope"}, timeout=5)
    bearer = requests.get(
        f"{raw.url}/v2/sandboxes", headers={"Authorization": f"Bearer {KEY}"}, timeout=5
    )
    assert (missing.status_code, wrong.status_code, bearer.status_code) == (401, 401, 200)
    assert missing.json() == {"code": 401, "message": "Invalid API key"}
    assert KEY not in repr(emulator.requests)


def test_unknown_sandboxes_are_404_everywhere(raw: Raw) -> None:
    for method, path in [
        ("GET", "/sandboxes/inope"),
        ("DELETE", "/sandboxes/inope"),
        ("POST", "/sandboxes/inope/pause"),
        ("POST", "/v2/sandboxes/inope/connect"),
    ]:
        answer = raw.api(method, path, json={})
        assert answer.status_code == 404, (method, path)
        assert answer.json()["code"] == 404


def test_delete_kills_the_processes_and_the_sandbox_is_gone(raw: Raw, tmp_path: Path) -> None:
    sandbox = raw.create()
    # A link to a host directory of our own: deleting the sandbox must not follow it.
    canary = tmp_path / "canary"
    canary.write_bytes(b"alive")
    locked = raw.start(
        sandbox,
        "mkdir -p locked/inner && touch locked/inner/f && "
        f"ln -s {tmp_path} locked/link && chmod 0 locked/inner locked",
    )
    assert locked[-2] == ("end", {"exited": True, "status": "exit status 0"})
    directory = raw.emulator.workdir / "sandboxes" / sandbox["sandboxID"]
    assert directory.is_dir()
    with raw.open_stream(sandbox, "Start", {"process": {"cmd": "sleep", "args": ["30"]}}) as r:
        live = Live(r)
        kind, body = live.next()
        assert kind == "start"
        pid = host_pid(raw.emulator, sandbox["sandboxID"], body["pid"])
        assert alive(pid)
        assert raw.api("DELETE", f"/sandboxes/{sandbox['sandboxID']}").status_code == 204
        assert live.until("trailer")[-1] == (
            "trailer",
            {
                "error": {
                    "code": "unavailable",
                    "message": f"the connection to sandbox {sandbox['sandboxID']} ended before the "
                    "stream completed",
                }
            },
        )
    assert wait_until(lambda: not alive(pid))
    assert not directory.exists()
    assert canary.read_bytes() == b"alive"
    assert raw.api("GET", f"/sandboxes/{sandbox['sandboxID']}").status_code == 404
    assert raw.api("DELETE", f"/sandboxes/{sandbox['sandboxID']}").status_code == 404
    assert raw.unary(sandbox, "List", {}).status_code == 502


def test_v2_listing_filters_by_metadata_and_state(raw: Raw) -> None:
    a = raw.create(metadata={"fountain_name": "a", "fountain": "1"})
    b = raw.create(metadata={"fountain_name": "b b", "fountain": "1"})
    raw.create()
    assert raw.api("POST", f"/sandboxes/{b['sandboxID']}/pause").status_code == 204

    def ids(params: dict[str, str]) -> set[str]:
        answer = raw.api("GET", "/v2/sandboxes", params=params)
        assert answer.status_code == 200
        return {item["sandboxID"] for item in answer.json()}

    assert ids({"metadata": "fountain_name=a"}) == {a["sandboxID"]}
    assert ids({"metadata": "fountain_name=b%20b"}) == {b["sandboxID"]}
    assert ids({"metadata": "fountain=1", "state": "running"}) == {a["sandboxID"]}
    assert ids({"metadata": "fountain=1", "state": "running,paused"}) == {
        a["sandboxID"],
        b["sandboxID"],
    }
    assert len(ids({})) == 3
    answer = raw.api("GET", "/v2/sandboxes", params={"state": "running"})
    assert answer.headers["X-Total-Running"] == "2"
    assert (
        "X-Total-Running" not in raw.api("GET", "/v2/sandboxes", params={"state": "paused"}).headers
    )
    assert raw.api("GET", "/v2/sandboxes", params={"state": "dead"}).status_code == 400


def test_v2_listing_started_after_includes_its_boundary_at_the_reported_precision(raw: Raw) -> None:
    created = [raw.create()["sandboxID"] for _ in range(5)]
    listed = {
        item["sandboxID"]: item["startedAt"] for item in raw.api("GET", "/v2/sandboxes").json()
    }

    def ids(started_after: str) -> set[str]:
        answer = raw.api("GET", "/v2/sandboxes", params={"startedAfter": started_after})
        assert answer.status_code == 200
        return {item["sandboxID"] for item in answer.json()}

    for sandbox_id in created:
        started = datetime.fromisoformat(listed[sandbox_id].replace("Z", "+00:00"))
        assert sandbox_id in ids(listed[sandbox_id])
        assert sandbox_id in ids(started.astimezone(timezone(timedelta(hours=2))).isoformat())
        assert sandbox_id not in ids((started + timedelta(microseconds=1)).isoformat())
    assert raw.api("GET", "/v2/sandboxes", params={"startedAfter": "soon"}).status_code == 400


def test_v2_listing_pages_with_limit_and_x_next_token(raw: Raw) -> None:
    created = {raw.create()["sandboxID"] for _ in range(3)}
    seen: list[str] = []
    token = None
    for _ in range(5):
        params = {"limit": "1", **({"nextToken": token} if token else {})}
        answer = raw.api("GET", "/v2/sandboxes", params=params)
        seen += [item["sandboxID"] for item in answer.json()]
        token = answer.headers.get("X-Next-Token")
        if not token:
            break
    assert sorted(seen) == sorted(created) and len(seen) == 3
    everything = raw.api("GET", "/v2/sandboxes", params={"limit": "500"}).json()
    assert [item["sandboxID"] for item in everything] == seen
    assert "X-Next-Token" not in raw.api("GET", "/v2/sandboxes").headers


def test_a_malformed_or_mismatched_next_token_is_400(raw: Raw) -> None:
    raw.create()
    raw.create()
    bad = raw.api("GET", "/v2/sandboxes", params={"nextToken": "!!!"})
    assert bad.status_code == 400 and bad.json()["message"] == "Invalid next token"
    token = raw.api("GET", "/v2/sandboxes", params={"limit": "1"}).headers["X-Next-Token"]
    mismatched = raw.api("GET", "/v2/sandboxes", params={"nextToken": token, "order": "asc"})
    assert mismatched.status_code == 400


def test_the_v1_listing_shows_running_sandboxes_only(raw: Raw) -> None:
    running, paused = raw.create(), raw.create()
    raw.api("POST", f"/sandboxes/{paused['sandboxID']}/pause")
    listed = raw.api("GET", "/sandboxes").json()
    assert [item["sandboxID"] for item in listed] == [running["sandboxID"]]


def test_timeout_overwrites_the_ttl_and_is_404_when_paused(raw: Raw, emulator: E2BEmulator) -> None:
    sandbox = raw.create()
    sandbox_id = sandbox["sandboxID"]
    assert (
        raw.api("POST", f"/sandboxes/{sandbox_id}/timeout", json={"timeout": 10}).status_code == 204
    )
    record = emulator.record(sandbox_id)
    assert 9 <= record.end_at - emulator.world.clock.now() <= 10
    raw.api("POST", f"/sandboxes/{sandbox_id}/pause")
    assert (
        raw.api("POST", f"/sandboxes/{sandbox_id}/timeout", json={"timeout": 10}).status_code == 404
    )


def test_pause_is_409_twice_and_connect_resumes_with_201_then_200(raw: Raw) -> None:
    sandbox_id = raw.create()["sandboxID"]
    assert raw.api("POST", f"/sandboxes/{sandbox_id}/pause", json={}).status_code == 204
    assert raw.api("POST", f"/sandboxes/{sandbox_id}/pause").status_code == 409
    resumed = raw.api("POST", f"/v2/sandboxes/{sandbox_id}/connect", json={})
    assert resumed.status_code == 201 and resumed.json()["envdAccessToken"]
    again = raw.api("POST", f"/v2/sandboxes/{sandbox_id}/connect", json={"timeout": 60})
    assert again.status_code == 200
    assert raw.api("POST", f"/sandboxes/{sandbox_id}/connect", json={}).status_code == 400
    assert (
        raw.api("POST", f"/sandboxes/{sandbox_id}/connect", json={"timeout": 60}).status_code == 200
    )
    assert raw.api("POST", f"/sandboxes/{sandbox_id}/resume").status_code == 409


def test_connect_extends_but_never_shortens_a_running_ttl(raw: Raw, emulator: E2BEmulator) -> None:
    sandbox_id = raw.create(timeout=1000)["sandboxID"]
    raw.api("POST", f"/v2/sandboxes/{sandbox_id}/connect", json={"timeout": 10})
    assert emulator.record(sandbox_id).end_at - emulator.world.clock.now() > 900
    raw.api("POST", f"/v2/sandboxes/{sandbox_id}/connect", json={"timeout": 3000})
    assert emulator.record(sandbox_id).end_at - emulator.world.clock.now() > 2900


def test_network_put_replaces_the_rules_and_validates_them(raw: Raw) -> None:
    sandbox_id = raw.create()["sandboxID"]
    rules = {"allowOut": ["hex.pm", "github.com"], "denyOut": ["0.0.0.0/0"]}
    assert raw.api("PUT", f"/sandboxes/{sandbox_id}/network", json=rules).status_code == 204
    assert raw.api("GET", f"/sandboxes/{sandbox_id}").json()["network"] == rules
    assert (
        raw.api(
            "PUT", f"/sandboxes/{sandbox_id}/network", json={"denyOut": ["0.0.0.0/0"]}
        ).status_code
        == 204
    )
    assert raw.api("GET", f"/sandboxes/{sandbox_id}").json()["network"] == {
        "denyOut": ["0.0.0.0/0"]
    }
    assert (
        raw.api(
            "PUT", f"/sandboxes/{sandbox_id}/network", json={"allowOut": ["hex.pm"]}
        ).status_code
        == 400
    )
    assert raw.api("PUT", "/sandboxes/inope/network", json=rules).status_code == 404


@pytest.mark.parametrize(
    ("rules", "allow"),
    [
        ({}, None),
        ({"denyOut": ["10.0.0.0/8"]}, None),
        ({"denyOut": ["0.0.0.0/0"]}, ()),
        (
            {"allowOut": ["Hex.pm", "*.github.com", "1.1.1.1"], "denyOut": ["0.0.0.0/0"]},
            ("hex.pm", "*.github.com"),
        ),
    ],
)
def test_network_rules_become_the_boxs_egress_policy(
    raw: Raw, emulator: E2BEmulator, rules: dict[str, Any], allow: tuple[str, ...] | None
) -> None:
    sandbox_id = raw.create(network={"allowOut": ["example.com"], "denyOut": ["0.0.0.0/0"]})[
        "sandboxID"
    ]
    box = emulator.world.table(sandbox_id).sandbox.box
    assert box.policy().allow == ("example.com",)
    assert raw.api("PUT", f"/sandboxes/{sandbox_id}/network", json=rules).status_code == 204
    assert box.policy().allow == allow


def test_an_expired_ttl_kills_or_pauses_per_auto_pause(raw: Raw, emulator: E2BEmulator) -> None:
    killed, paused = raw.create(), raw.create(autoPause=True)
    emulator.expire(killed["sandboxID"])
    emulator.expire(paused["sandboxID"])
    assert raw.api("GET", f"/sandboxes/{killed['sandboxID']}").status_code == 404
    assert raw.api("GET", f"/sandboxes/{paused['sandboxID']}").json()["state"] == "paused"


def test_the_clock_expires_ttls_on_the_next_request(raw: Raw, emulator: E2BEmulator) -> None:
    short = raw.create(timeout=5)
    long = raw.create(timeout=500)
    emulator.advance(10)
    listed = {item["sandboxID"] for item in raw.api("GET", "/v2/sandboxes").json()}
    assert listed == {long["sandboxID"]}
    assert short["sandboxID"] not in listed


# -- envd: routing and authorisation -----------------------------------------------------------


def test_envd_requires_the_access_token_except_on_health(raw: Raw) -> None:
    sandbox = raw.create()
    headers = raw.envd_headers(sandbox)
    del headers["X-Access-Token"]
    url = f"{raw.url}/process.Process/List"
    assert requests.post(url, json={}, headers=headers, timeout=5).status_code == 401
    wrong = requests.post(url, json={}, headers={**headers, "X-Access-Token": "x"}, timeout=5)
    assert wrong.status_code == 401 and wrong.json()["code"] == 401
    assert requests.get(f"{raw.url}/health", headers=headers, timeout=5).status_code == 204
    assert raw.unary(sandbox, "List", {}).json() == {}


def test_the_proxy_answers_502_for_unknown_or_paused_sandboxes(raw: Raw) -> None:
    sandbox = raw.create()
    unknown = raw.unary({**sandbox, "sandboxID": "inope"}, "List", {})
    assert unknown.status_code == 502
    assert unknown.json() == {
        "sandboxId": "inope",
        "message": "The sandbox was not found",
        "code": 502,
    }
    raw.api("POST", f"/sandboxes/{sandbox['sandboxID']}/pause")
    assert raw.unary(sandbox, "List", {}).status_code == 502
    other_port = raw.unary(sandbox, "List", {}, **{"E2b-Sandbox-Port": "8080"})
    assert other_port.status_code == 502


def test_a_paused_sandbox_with_auto_resume_is_resumed_by_envd_traffic(raw: Raw) -> None:
    sandbox = raw.create(autoResume={"enabled": True})
    raw.api("POST", f"/sandboxes/{sandbox['sandboxID']}/pause")
    assert raw.unary(sandbox, "List", {}).status_code == 200
    assert raw.api("GET", f"/sandboxes/{sandbox['sandboxID']}").json()["state"] == "running"


def test_exactly_one_routing_header_is_refused(raw: Raw) -> None:
    sandbox = raw.create()
    headers = raw.envd_headers(sandbox)
    del headers["E2b-Sandbox-Port"]
    answer = requests.post(f"{raw.url}/process.Process/List", json={}, headers=headers, timeout=5)
    assert answer.status_code == 400


def test_the_host_name_form_also_routes_to_envd() -> None:
    with E2BEmulator(credential=KEY, domain="e2b.local") as emulator:
        raw = Raw(emulator)
        sandbox = raw.create()
        headers = raw.envd_headers(sandbox)
        del headers["E2b-Sandbox-Id"], headers["E2b-Sandbox-Port"]
        headers["Host"] = f"49983-{sandbox['sandboxID']}.e2b.local"
        answer = requests.post(
            f"{raw.url}/process.Process/List", json={}, headers=headers, timeout=5
        )
        assert answer.status_code == 200 and answer.json() == {}
        headers["Host"] = f"49983-{sandbox['sandboxID']}.elsewhere.example"
        refused = requests.post(
            f"{raw.url}/process.Process/List", json={}, headers=headers, timeout=5
        )
        assert refused.status_code == 421, "only the configured domain's hosts are served"
        raw.session.close()


def test_content_types_are_enforced(raw: Raw) -> None:
    sandbox = raw.create()
    stream = requests.post(
        f"{raw.url}/process.Process/Start",
        timeout=5,
        data=envelope({"process": {"cmd": "true"}}),
        headers=raw.envd_headers(sandbox, "application/json"),
    )
    assert stream.status_code == 415
    unary = requests.post(
        f"{raw.url}/process.Process/List",
        data=b"{}",
        timeout=5,
        headers=raw.envd_headers(sandbox, "application/connect+json"),
    )
    assert unary.status_code == 415


# -- envd: process streams ------------------------------------------------------------------------


def test_start_streams_start_data_end_and_a_clean_trailer_byte_for_byte(raw: Raw) -> None:
    sandbox = raw.create()
    with raw.open_stream(
        sandbox, "Start", {"process": {"cmd": "bash", "args": ["-c", "printf hello"]}}
    ) as r:
        body = b"".join(r.iter_content(None))
    flags, length = struct.unpack(">BI", body[:5])
    first = json.loads(body[5 : 5 + length])
    assert flags == 0 and list(first["event"]) == ["start"]
    assert body.endswith(b"\x02\x00\x00\x00\x02{}")
    events = events_of(Decoder().feed(body))
    assert stdout_of(events) == b"hello"
    assert events[-2] == ("end", {"exited": True, "status": "exit status 0"})


def test_exit_codes_and_stderr_follow_proto_json(raw: Raw) -> None:
    events = raw.start(raw.create(), "echo oops >&2; exit 3")
    assert stdout_of(events, "stderr") == b"oops\n"
    assert events[-2] == ("end", {"exitCode": 3, "exited": True, "status": "exit status 3"})
    assert events[-1] == ("trailer", {})


def test_output_is_sent_in_chunks_of_at_most_32_kib(raw: Raw) -> None:
    events = raw.start(raw.create(), "head -c 200000 /dev/zero")
    sizes = [len(base64.b64decode(body["stdout"])) for kind, body in events if kind == "data"]
    assert sum(sizes) == 200000 and max(sizes) <= 32 * 1024


def test_commands_run_in_the_users_home_with_the_sandbox_and_request_env(
    raw: Raw, emulator: E2BEmulator
) -> None:
    sandbox = raw.create(envVars={"GLOBAL": "g"})
    events = raw.stream(
        sandbox,
        "Start",
        {
            "process": {
                "cmd": "sh",
                "args": ["-c", 'echo "$PWD|$HOME|$USER|$GLOBAL|$LOCAL"'],
                "envs": {"LOCAL": "l"},
            }
        },
    )
    home = emulator.command_path(sandbox["sandboxID"], "/home/user")
    assert stdout_of(events) == f"{home}|{home}|user|g|l\n".encode()


def test_start_errors_arrive_in_the_trailer_with_http_200(raw: Raw) -> None:
    sandbox = raw.create()
    bad_cwd = raw.stream(sandbox, "Start", {"process": {"cmd": "true", "cwd": "/nope"}})
    assert bad_cwd == [
        (
            "trailer",
            {"error": {"code": "invalid_argument", "message": "cwd '/nope' does not exist"}},
        )
    ]
    basic = "Basic " + base64.b64encode(b"mallory:").decode()
    bad_user = raw.stream(sandbox, "Start", {"process": {"cmd": "true"}}, Authorization=basic)
    assert bad_user[0][1]["error"]["code"] == "unauthenticated"
    unknown = raw.stream(sandbox, "Start", {"process": {"cmd": "no-such-program-x"}})
    assert unknown[-2][1]["exitCode"] == 127


def test_stdin_is_an_open_pipe_unless_start_says_false(raw: Raw) -> None:
    sandbox = raw.create()
    closed = raw.stream(sandbox, "Start", {"process": {"cmd": "cat"}, "stdin": False})
    assert closed[-2] == ("end", {"exited": True, "status": "exit status 0"})
    with raw.open_stream(sandbox, "Start", {"process": {"cmd": "cat"}, "tag": "t-1"}) as r:
        live = Live(r)
        pid = live.next()[1]["pid"]
        data = base64.b64encode(b"ping\n").decode()
        by_pid = raw.unary(
            sandbox, "SendInput", {"process": {"pid": pid}, "input": {"stdin": data}}
        )
        assert by_pid.status_code == 200 and by_pid.json() == {}
        assert b"ping\n" in stdout_of(live.until_stdout(b"ping\n"))
        raw.unary(
            sandbox,
            "SendInput",
            {"process": {"tag": "t-1"}, "input": {"stdin": base64.b64encode(b"pong\n").decode()}},
        )
        live.until_stdout(b"pong\n")
        assert raw.unary(sandbox, "CloseStdin", {"process": {"pid": pid}}).status_code == 200
        rest = live.until("trailer")
    assert rest[-2:] == [("end", {"exited": True, "status": "exit status 0"}), ("trailer", {})]


def test_unknown_selectors_and_writes_after_close_use_connect_error_codes(raw: Raw) -> None:
    sandbox = raw.create()
    missing = raw.unary(
        sandbox, "SendInput", {"process": {"pid": 999999}, "input": {"stdin": "eA=="}}
    )
    assert missing.status_code == 404
    assert missing.json() == {"code": "not_found", "message": "process with pid 999999 not found"}
    tag = raw.unary(sandbox, "CloseStdin", {"process": {"tag": "nobody"}})
    assert tag.status_code == 404 and tag.json()["message"] == "process with tag nobody not found"
    with raw.open_stream(sandbox, "Start", {"process": {"cmd": "sleep", "args": ["10"]}}) as r:
        pid = Live(r).next()[1]["pid"]
        raw.unary(sandbox, "CloseStdin", {"process": {"pid": pid}})
        late = raw.unary(
            sandbox, "SendInput", {"process": {"pid": pid}, "input": {"stdin": "eA=="}}
        )
        assert late.status_code == 500
        assert late.json() == {
            "code": "internal",
            "message": "error writing to stdin: stdin not enabled or closed",
        }
        raw.unary(sandbox, "SendSignal", {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})


def test_an_ended_process_leaves_the_selector_table_for_unary_calls(raw: Raw) -> None:
    sandbox = raw.create()
    pid = raw.start(sandbox, "true")[0][1]["pid"]
    answer = raw.unary(sandbox, "SendInput", {"process": {"pid": pid}, "input": {"stdin": "eA=="}})
    assert answer.status_code == 404 and answer.json()["code"] == "not_found"


def test_send_signal_reaches_that_pid_and_ends_with_the_signal(raw: Raw) -> None:
    sandbox = raw.create()
    for name, status in [
        ("SIGNAL_SIGKILL", "signal: killed"),
        ("SIGNAL_SIGTERM", "signal: terminated"),
    ]:
        with raw.open_stream(sandbox, "Start", {"process": {"cmd": "sleep", "args": ["30"]}}) as r:
            live = Live(r)
            pid = live.next()[1]["pid"]
            answer = raw.unary(sandbox, "SendSignal", {"process": {"pid": pid}, "signal": name})
            assert answer.status_code == 200
            events = live.until("trailer")
        assert events[-2] == ("end", {"exitCode": -1, "status": status, "error": status})
    bad = raw.unary(sandbox, "SendSignal", {"process": {"pid": 1}, "signal": "SIGNAL_SIGHUP"})
    assert bad.status_code in (404, 501)


def test_list_shows_live_processes_with_their_tag_and_omits_empty_fields(raw: Raw) -> None:
    sandbox = raw.create()
    raw.start(sandbox, "true")
    with raw.open_stream(
        sandbox, "Start", {"process": {"cmd": "sleep", "args": ["30"]}, "tag": "fountain-1"}
    ) as r:
        pid = Live(r).next()[1]["pid"]
        listed = raw.unary(sandbox, "List", {}).json()
        assert listed == {
            "processes": [
                {"config": {"cmd": "sleep", "args": ["30"]}, "pid": pid, "tag": "fountain-1"}
            ]
        }
        raw.unary(sandbox, "SendSignal", {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
    assert wait_until(lambda: raw.unary(sandbox, "List", {}).json() == {})


def test_connect_streams_only_what_comes_after_it_attached(raw: Raw, emulator: E2BEmulator) -> None:
    sandbox = raw.create()
    script = "echo before; read a; echo during > marker; echo during; read b; echo after; read c"
    with raw.open_stream(
        sandbox, "Start", {"process": {"cmd": "bash", "args": ["-c", script]}, "tag": "t-2"}
    ) as r:
        live = Live(r)
        pid = live.next()[1]["pid"]
        live.until_stdout(b"before\n")
    raw.unary(sandbox, "SendInput", {"process": {"pid": pid}, "input": {"stdin": "MQo="}})
    assert wait_until(lambda: emulator.exists(sandbox["sandboxID"], "marker"))
    with raw.open_stream(sandbox, "Connect", {"process": {"pid": pid}}) as r:
        live = Live(r)
        assert live.next() == ("start", {"pid": pid})
        raw.unary(sandbox, "SendInput", {"process": {"tag": "t-2"}, "input": {"stdin": "Mgo="}})
        seen = live.until_stdout(b"after\n")
        raw.unary(sandbox, "CloseStdin", {"process": {"pid": pid}})
        seen += live.until("trailer")
    assert stdout_of(seen) == b"after\n"
    assert seen[-2][0] == "end"


def test_connect_to_an_ended_process_replays_its_kept_end(raw: Raw) -> None:
    sandbox = raw.create()
    pid = raw.start(sandbox, "echo gone; exit 5")[0][1]["pid"]
    events = raw.stream(sandbox, "Connect", {"process": {"pid": pid}})
    assert events == [
        ("start", {"pid": pid}),
        ("end", {"exitCode": 5, "exited": True, "status": "exit status 5"}),
        ("trailer", {}),
    ]
    missing = raw.stream(sandbox, "Connect", {"process": {"pid": 999999}})
    assert missing == [
        (
            "trailer",
            {"error": {"code": "not_found", "message": "process with pid 999999 not found"}},
        )
    ]


def test_pause_stops_processes_resume_continues_them_and_tags_stop_resolving(raw: Raw) -> None:
    sandbox = raw.create()
    sandbox_id = sandbox["sandboxID"]
    with raw.open_stream(sandbox, "Start", {"process": {"cmd": "cat"}, "tag": "fountain-9"}) as r:
        live = Live(r)
        pid = live.next()[1]["pid"]
        on_host = host_pid(raw.emulator, sandbox_id, pid)
        raw.api("POST", f"/sandboxes/{sandbox_id}/pause")
        assert live.until("trailer")[-1][1]["error"]["code"] == "unavailable"
    assert wait_until(lambda: stopped(on_host))
    assert raw.api("POST", f"/v2/sandboxes/{sandbox_id}/connect", json={}).status_code == 201
    assert wait_until(lambda: not stopped(on_host))
    by_tag = raw.unary(
        sandbox, "SendInput", {"process": {"tag": "fountain-9"}, "input": {"stdin": "eA=="}}
    )
    assert by_tag.status_code == 404 and by_tag.json()["code"] == "not_found"
    listed = raw.unary(sandbox, "List", {}).json()["processes"]
    assert [(p["pid"], p["tag"]) for p in listed] == [(pid, "fountain-9")]
    with raw.open_stream(sandbox, "Connect", {"process": {"pid": pid}}) as r:
        live = Live(r)
        live.next()
        raw.unary(
            sandbox,
            "SendInput",
            {"process": {"pid": pid}, "input": {"stdin": base64.b64encode(b"hi\n").decode()}},
        )
        live.until_stdout(b"hi\n")
        assert raw.unary(sandbox, "CloseStdin", {"process": {"pid": pid}}).status_code == 200
        assert live.until("trailer")[-2][1]["status"] == "exit status 0"


def test_connect_timeout_ms_on_start_ends_the_stream_deadline_exceeded_and_kills(raw: Raw) -> None:
    sandbox = raw.create()
    events = raw.stream(
        sandbox,
        "Start",
        {"process": {"cmd": "sleep", "args": ["30"]}},
        **{"Connect-Timeout-Ms": "300"},
    )
    assert [kind for kind, _ in events] == ["start", "trailer"]
    assert events[-1][1]["error"]["code"] == "deadline_exceeded"
    # The process was killed, not left running: following it ends with its SIGKILL.
    followed = raw.stream(sandbox, "Connect", {"process": {"pid": events[0][1]["pid"]}})
    assert followed[-2] == (
        "end",
        {"exitCode": -1, "status": "signal: killed", "error": "signal: killed"},
    )


def test_keepalives_are_sent_after_the_ping_interval_without_data(
    raw: Raw, emulator: E2BEmulator
) -> None:
    emulator.keepalive_scale = 0.01
    events = raw.start(raw.create(), "sleep 0.2; echo done")
    assert ("keepalive", {}) not in events  # no header: envd's 90 s default
    sandbox = raw.create()
    gate = e2b_gate(emulator, sandbox["sandboxID"])
    start = {"process": {"cmd": "bash", "args": ["-c", gate.script(":", "echo x")]}}
    with raw.open_stream(sandbox, "Start", start, **{"Keepalive-Ping-Interval": "5"}) as r:
        live = Live(r)
        # The output is written only once a keepalive has come.
        events = live.until("keepalive")
        assert events[-1] == ("keepalive", {}), events
        gate.release()
        events += live.until("trailer")
    kinds = [kind for kind, _ in events]
    assert "keepalive" in kinds and kinds.index("keepalive") < kinds.index("data")


def test_update_resizes_a_pty_and_is_refused_without_one(raw: Raw) -> None:
    sandbox = raw.create()
    start = {
        "process": {"cmd": "bash", "args": ["-c", "read line; stty size"]},
        "pty": {"size": {"cols": 80, "rows": 24}},
    }
    with raw.open_stream(sandbox, "Start", start) as r:
        live = Live(r)
        pid = live.next()[1]["pid"]
        resized = raw.unary(
            sandbox, "Update", {"process": {"pid": pid}, "pty": {"size": {"cols": 100, "rows": 30}}}
        )
        assert resized.status_code == 200 and resized.json() == {}
        raw.unary(
            sandbox,
            "SendInput",
            {"process": {"pid": pid}, "input": {"pty": base64.b64encode(b"\n").decode()}},
        )
        events = live.until("trailer")
    assert b"30 100" in stdout_of(events, "pty")
    with raw.open_stream(sandbox, "Start", {"process": {"cmd": "sleep", "args": ["30"]}}) as r:
        pid = Live(r).next()[1]["pid"]
        plain = raw.unary(
            sandbox, "Update", {"process": {"pid": pid}, "pty": {"size": {"cols": 1, "rows": 1}}}
        )
        assert plain.status_code == 400 and plain.json()["code"] == "failed_precondition"
        raw.unary(sandbox, "SendSignal", {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})


def test_root_gets_its_own_home_and_identity_variables(raw: Raw, emulator: E2BEmulator) -> None:
    sandbox = raw.create()
    basic = "Basic " + base64.b64encode(b"root:").decode()
    events = raw.stream(
        sandbox,
        "Start",
        {"process": {"cmd": "sh", "args": ["-c", 'echo "$PWD|$HOME|$USER|$LOGNAME"']}},
        Authorization=basic,
    )
    home = emulator.command_path(sandbox["sandboxID"], "/root")
    assert stdout_of(events) == f"{home}|{home}|root|root\n".encode()


def test_a_pty_process_streams_pty_data_and_takes_pty_input(raw: Raw) -> None:
    sandbox = raw.create()
    # The second read keeps the process alive while CloseStdin is refused.
    script = "read line; echo got-$line; read more; echo more-$more"
    start = {
        "process": {"cmd": "bash", "args": ["-c", script]},
        "pty": {"size": {"cols": 80, "rows": 24}},
    }
    with raw.open_stream(sandbox, "Start", start) as r:
        live = Live(r)
        pid = live.next()[1]["pid"]
        for line in (b"x\n", None, b"y\n"):
            if line is None:
                closing = raw.unary(sandbox, "CloseStdin", {"process": {"pid": pid}})
                assert closing.status_code == 500 and closing.json()["code"] == "unknown"
                continue
            typed = base64.b64encode(line).decode()
            assert (
                raw.unary(
                    sandbox, "SendInput", {"process": {"pid": pid}, "input": {"pty": typed}}
                ).status_code
                == 200
            )
        events = live.until("trailer")
    assert b"got-x" in stdout_of(events, "pty")
    assert b"more-y" in stdout_of(events, "pty")
    assert not any(kind == "data" and "stdout" in body for kind, body in events)


@requires_isolation
def test_a_file_at_an_absolute_path_is_the_sandboxs_own_not_the_hosts(
    raw: Raw, tmp_path: Path
) -> None:
    sandbox = raw.create()
    # A directory no host has (a fresh random name under /opt), and a host file of our own.
    top = f"/opt/e2b-{tmp_path.name}-{secrets.token_hex(8)}"
    assert not os.path.exists(top)
    ours = tmp_path / "host.txt"
    ours.write_bytes(b"host")
    headers = raw.envd_headers(sandbox, "application/octet-stream")
    for path in (f"{top}/x", str(ours)):
        written = requests.post(
            file_url(raw, path=path), data=b"from-files", headers=headers, timeout=5
        )
        assert written.status_code == 200 and written.json()[0]["path"] == path
    events = raw.start(
        sandbox,
        f"cat {top}/x {ours}; echo; pwd; echo $HOME; "
        f"echo from-command > {top}/y; echo changed > {ours}",
    )
    assert stdout_of(events) == b"from-filesfrom-files\n/home/user\n/home/user\n"
    get = {k: v for k, v in headers.items() if k != "Content-Type"}
    for path, content in ((f"{top}/y", b"from-command\n"), (str(ours), b"changed\n")):
        back = requests.get(file_url(raw, path=path), headers=get, timeout=5)
        assert back.status_code == 200 and back.content == content
    assert not os.path.exists(top)
    assert ours.read_bytes() == b"host"


@requires_isolation
def test_a_command_sees_only_its_sandboxs_homes_and_processes(raw: Raw) -> None:
    sandbox = raw.create()
    script = (
        "ls /home; echo pid $$; "
        "for p in /proc/[0-9]*; do echo \"${p#/proc/}: $(tr '\\0' ' ' < $p/cmdline)\"; done"
    )
    lines = stdout_of(raw.start(sandbox, script)).decode().splitlines()
    assert lines[0] == "user" and lines[1].startswith("pid ")
    processes = dict(line.split(": ", 1) for line in lines[2:])
    assert lines[1][4:] in processes  # the shell's own, in-sandbox pid
    assert not any("pytest" in command for command in processes.values()), processes
    assert len(processes) < 10, processes


def test_the_http_control_api_drives_the_ttl_clock(raw: Raw) -> None:
    key = {"X-API-Key": KEY}
    doomed, later = raw.create(timeout=5), raw.create(timeout=500)
    assert (
        requests.post(f"{raw.url}/_emulator/e2b/clock", json={"advance": 10}, timeout=5).status_code
        == 401
    ), "the control API wants the API key"
    assert (
        requests.post(
            f"{raw.url}/_emulator/e2b/clock", json={"advance": 10}, headers=key, timeout=5
        ).status_code
        == 204
    )
    assert raw.api("GET", f"/sandboxes/{doomed['sandboxID']}").status_code == 404
    assert (
        requests.post(
            f"{raw.url}/_emulator/e2b/expire/{later['sandboxID']}", headers=key, timeout=5
        ).status_code
        == 204
    )
    assert raw.api("GET", f"/sandboxes/{later['sandboxID']}").status_code == 404
    assert (
        requests.post(f"{raw.url}/_emulator/e2b/expire/inope", headers=key, timeout=5).status_code
        == 404
    )
    added = requests.post(
        f"{raw.url}/_emulator/faults",
        timeout=5,
        headers=key,
        json={"kind": "stream_no_start", "path": "/process\\.Process/Start$"},
    )
    assert added.status_code == 201
    assert raw.start(raw.create(), "true") == [("trailer", {})]


@pytest.mark.parametrize("advance", ["NaN", "Infinity", "-1", "1e300", '"10"', "true"])
def test_the_clock_refuses_values_it_cannot_keep(raw: Raw, advance: str) -> None:
    answer = requests.post(
        f"{raw.url}/_emulator/e2b/clock",
        data=f'{{"advance": {advance}}}',
        headers={"X-API-Key": KEY, "Content-Type": "application/json"},
        timeout=5,
    )
    assert answer.status_code == 400, answer.text
    created = raw.api("POST", "/v2/sandboxes", json={"templateID": "base"})
    assert created.status_code == 201, "a refused value leaves the clock as it was"


# -- envd: files -------------------------------------------------------------------------------


def file_url(raw: Raw, **query: str) -> str:
    return f"{raw.url}/files?" + "&".join(
        f"{k}={requests.utils.quote(v, safe='')}" for k, v in query.items()
    )


def test_files_multipart_upload_creates_parents_and_reads_back(
    raw: Raw, emulator: E2BEmulator
) -> None:
    sandbox = raw.create()
    headers = raw.envd_headers(sandbox)
    del headers["Content-Type"]
    answer = requests.post(
        file_url(raw, path="/work/dir/file.txt", username="user"),
        files={"file": ("file.txt", b"\x00bytes\r\n")},
        headers=headers,
        timeout=5,
    )
    assert answer.status_code == 200
    assert answer.json() == [{"path": "/work/dir/file.txt", "name": "file.txt", "type": "file"}]
    assert emulator.read_file(sandbox["sandboxID"], "/work/dir/file.txt") == b"\x00bytes\r\n"
    back = requests.get(file_url(raw, path="/work/dir/file.txt"), headers=headers, timeout=5)
    assert back.status_code == 200 and back.content == b"\x00bytes\r\n"
    events = raw.start(
        sandbox, "cat " + emulator.command_path(sandbox["sandboxID"], "/work/dir/file.txt")
    )
    assert stdout_of(events) == b"\x00bytes\r\n"


def test_files_octet_stream_gzip_relative_paths_and_errors(raw: Raw) -> None:
    sandbox = raw.create()
    headers = raw.envd_headers(sandbox, "application/octet-stream")
    plain = requests.post(file_url(raw, path="notes.txt"), data=b"hi", headers=headers, timeout=5)
    assert plain.json()[0]["path"] == "/home/user/notes.txt"
    zipped = requests.post(
        file_url(raw, path="~/z.txt"),
        data=gzip.compress(b"zz"),
        headers={**headers, "Content-Encoding": "gzip"},
        timeout=5,
    )
    assert zipped.status_code == 200
    get = {k: v for k, v in headers.items() if k != "Content-Type"}
    assert (
        requests.get(file_url(raw, path="/home/user/z.txt"), headers=get, timeout=5).content
        == b"zz"
    )
    missing = requests.get(file_url(raw, path="/nope"), headers=get, timeout=5)
    assert missing.status_code == 404 and missing.json()["code"] == 404
    directory = requests.post(
        file_url(raw, path="/home/user"), data=b"x", headers=headers, timeout=5
    )
    assert directory.status_code == 400
    stranger = requests.get(
        file_url(raw, path="notes.txt", username="mallory"), headers=get, timeout=5
    )
    assert stranger.status_code == 401
    escape = requests.post(
        file_url(raw, path="/../../../etc/e2b-escape"), data=b"x", headers=headers, timeout=5
    )
    assert escape.status_code == 200 and not os.path.exists("/etc/e2b-escape")


def test_files_metadata_headers_become_xattrs_and_the_entries_metadata(
    raw: Raw, emulator: E2BEmulator
) -> None:
    sandbox = raw.create()
    headers = raw.envd_headers(
        sandbox,
        "application/octet-stream",
        **{"X-Metadata-Owner": "Alice B", "x-metadata-run-ID": "7"},
    )
    answer = requests.post(file_url(raw, path="/work/m.txt"), data=b"m", headers=headers, timeout=5)
    assert answer.status_code == 200
    assert answer.json() == [
        {
            "path": "/work/m.txt",
            "name": "m.txt",
            "type": "file",
            "metadata": {"owner": "Alice B", "run-id": "7"},
        }
    ]
    with emulator.world.table(sandbox["sandboxID"]).sandbox.root() as root_fd:
        fd = safefs.open_file(root_fd, "/work/m.txt")
        try:
            kept = {name: os.getxattr(fd, name) for name in os.listxattr(fd)}
        finally:
            os.close(fd)
    assert kept == {"user.e2b.owner": b"Alice B", "user.e2b.run-id": b"7"}
    for bad in ({"X-Metadata-": "v"}, {"X-Metadata-k": "tab\there"}):
        refused = requests.post(
            file_url(raw, path="/work/n.txt"), data=b"n", headers={**headers, **bad}, timeout=5
        )
        assert refused.status_code == 400 and refused.json()["code"] == 400
        assert not emulator.exists(sandbox["sandboxID"], "/work/n.txt")


def test_files_accept_a_signed_url_instead_of_the_token(raw: Raw) -> None:
    sandbox = raw.create()
    token = sandbox["envdAccessToken"]
    routing = {"E2b-Sandbox-Id": sandbox["sandboxID"], "E2b-Sandbox-Port": ENVD_PORT}

    def sign(path: str, operation: str, user: str = "") -> str:
        digest = hashlib.sha256(f"{path}:{operation}:{user}:{token}".encode()).digest()
        return "v1_" + base64.b64encode(digest).decode().rstrip("=")

    upload = requests.post(
        file_url(raw, path="/s.txt", signature=sign("/s.txt", "write")),
        data=b"signed",
        timeout=5,
        headers={**routing, "Content-Type": "application/octet-stream"},
    )
    assert upload.status_code == 200
    read = requests.get(
        file_url(raw, path="/s.txt", signature=sign("/s.txt", "read")), headers=routing, timeout=5
    )
    assert read.content == b"signed"
    forged = requests.get(
        file_url(raw, path="/s.txt", signature=sign("/s.txt", "write")), headers=routing, timeout=5
    )
    assert forged.status_code == 401


# -- faults ---------------------------------------------------------------------------------------


def test_a_stream_can_close_before_start(raw: Raw, emulator: E2BEmulator) -> None:
    emulator.stream_fault("no_start")
    assert raw.start(raw.create(), "echo hi") == [("trailer", {})]
    assert raw.start(raw.create(), "echo hi")[0][0] == "start"


def test_a_stream_can_close_without_end_after_n_data_events(
    raw: Raw, emulator: E2BEmulator
) -> None:
    emulator.stream_fault("no_end", rpc="Start", after=1)
    sandbox = raw.create()
    gate = e2b_gate(emulator, sandbox["sandboxID"])
    # "more" is written only once the stream has ended: never in the first data event.
    events = raw.start(sandbox, gate.script("echo partial", "echo more; exit 4"))
    gate.release()
    assert [kind for kind, _ in events] == ["start", "data", "trailer"]
    assert stdout_of(events) == b"partial\n" and events[-1] == ("trailer", {})


def test_an_error_trailer_can_replace_the_end_event(raw: Raw, emulator: E2BEmulator) -> None:
    emulator.stream_fault("error_end", after=10**6)
    events = raw.start(raw.create(), "echo out; exit 2")
    assert stdout_of(events) == b"out\n"
    assert events[-1] == (
        "trailer",
        {"error": {"code": "unavailable", "message": "stream unavailable"}},
    )
    assert "end" not in [kind for kind, _ in events]
    emulator.stream_fault("error_end", body="stream unavailable")
    early = raw.start(raw.create(), "echo never-seen; sleep 0.2")
    assert [kind for kind, _ in early] == ["start", "trailer"]
    assert early[-1] == ("trailer", {"error": "stream unavailable"})


def test_split_envelopes_span_several_http_chunks(raw: Raw, emulator: E2BEmulator) -> None:
    emulator.stream_fault("split", after=3)
    sandbox = raw.create()
    with raw.open_stream(
        sandbox, "Start", {"process": {"cmd": "bash", "args": ["-c", "echo hi"]}}
    ) as r:
        chunks = list(r.raw.read_chunked(decode_content=False))
    assert chunks and max(len(c) for c in chunks) <= 3
    events = events_of(Decoder().feed(b"".join(chunks)))
    assert stdout_of(events) == b"hi\n" and events[-1] == ("trailer", {})


def test_merged_envelopes_arrive_in_one_http_chunk(raw: Raw, emulator: E2BEmulator) -> None:
    emulator.stream_fault("merge")
    with raw.open_stream(
        raw.create(), "Start", {"process": {"cmd": "bash", "args": ["-c", "echo a; exit 1"]}}
    ) as r:
        chunks = list(r.raw.read_chunked(decode_content=False))
    assert len(chunks) == 1
    frames = Decoder().feed(chunks[0])
    assert [kind for kind, _ in events_of(frames)] == ["start", "data", "end", "trailer"]


def test_a_hung_stream_stays_open_with_nothing_on_it(raw: Raw, emulator: E2BEmulator) -> None:
    emulator.stream_fault("hang", after=1)
    sandbox = raw.create()
    response = raw.session.post(
        f"{raw.url}/process.Process/Start",
        stream=True,
        timeout=(5, 0.5),
        data=envelope({"process": {"cmd": "echo", "args": ["hi"]}}),
        headers=raw.envd_headers(sandbox, "application/connect+json"),
    )
    with response:
        assert response.status_code == 200
        live = Live(response)
        assert live.next()[0] == "start"
        with pytest.raises(requests.ConnectionError):
            live.next()


def test_a_reset_cuts_the_connection_mid_envelope(raw: Raw, emulator: E2BEmulator) -> None:
    emulator.stream_fault("reset", after=1)
    with raw.open_stream(raw.create(), "Start", {"process": {"cmd": "echo", "args": ["hi"]}}) as r:
        decoder = Decoder()
        frames = []
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            for chunk in r.iter_content(None):
                frames += decoder.feed(chunk)
    assert [kind for kind, _ in events_of(frames)] == ["start"]
    assert decoder.buffer  # half an envelope


@pytest.mark.parametrize(
    ("flavour", "check"),
    [
        ("compressed", lambda body: body[0] == 1),
        ("json", lambda body: body[0] == 0 and body[5:] == b'{"event": {"data": '),
    ],
)
def test_garbage_envelopes_follow_start(
    raw: Raw, emulator: E2BEmulator, flavour: str, check: Any
) -> None:
    emulator.stream_fault("garbage", body=flavour)
    with raw.open_stream(raw.create(), "Start", {"process": {"cmd": "true"}}) as r:
        body = b"".join(r.iter_content(None))
    first_length = struct.unpack(">I", body[1:5])[0]
    second = body[5 + first_length :]
    length = struct.unpack(">I", second[1:5])[0]
    assert check(second[: 5 + length])


def test_rate_limits_carry_retry_after_and_optionally_the_body_field(
    raw: Raw, emulator: E2BEmulator
) -> None:
    emulator.rate_limit(path=r"^/v2/sandboxes$", method="POST")
    limited = raw.api("POST", "/v2/sandboxes", json={"templateID": "base"})
    assert limited.status_code == 429 and limited.headers["Retry-After"] == "7"
    assert limited.json() == {"code": 429, "message": "Rate limit exceeded"}
    emulator.rate_limit(retry_after=3, retry_after_seconds=17)
    vector = raw.api("GET", "/v2/sandboxes")
    assert vector.json()["retryAfterSeconds"] == 17 and vector.headers["Retry-After"] == "3"
    assert raw.api("GET", "/v2/sandboxes").status_code == 200


def test_server_errors_on_demand(raw: Raw, emulator: E2BEmulator) -> None:
    emulator.server_error(503, times=2)
    assert [raw.api("GET", "/v2/sandboxes").status_code for _ in range(3)] == [503, 503, 200]
    emulator.server_error(502, path=r"^/process\.Process/")
    assert raw.unary(raw.create(), "List", {}).status_code == 502


def test_listing_faults_force_pages_endless_tokens_empty_tokens_and_non_arrays(
    raw: Raw, emulator: E2BEmulator
) -> None:
    for _ in range(3):
        raw.create()
    emulator.page_size(1, times=1)
    first = raw.api("GET", "/v2/sandboxes")
    assert len(first.json()) == 1 and first.headers["X-Next-Token"]
    emulator.endless_listing(times=50)
    tokens = set()
    token = None
    for _ in range(50):
        answer = raw.api("GET", "/v2/sandboxes", params={"nextToken": token} if token else {})
        token = answer.headers["X-Next-Token"]
        tokens.add(token)
    assert len(tokens) == 50
    assert "X-Next-Token" not in raw.api("GET", "/v2/sandboxes").headers
    emulator.faults.add("list_empty_token", path=r"^/v2/sandboxes$")
    emulator.page_size(1, times=1)
    assert raw.api("GET", "/v2/sandboxes").headers["X-Next-Token"] == ""
    emulator.faults.add("list_not_array", path=r"^/v2/sandboxes$")
    assert isinstance(raw.api("GET", "/v2/sandboxes").json(), dict)


def test_tag_selectors_can_be_broken_on_demand_while_pids_work(
    raw: Raw, emulator: E2BEmulator
) -> None:
    sandbox = raw.create()
    with raw.open_stream(sandbox, "Start", {"process": {"cmd": "cat"}, "tag": "fountain-3"}) as r:
        pid = Live(r).next()[1]["pid"]
        emulator.break_tag_selectors(times=1)
        assert (
            raw.unary(sandbox, "CloseStdin", {"process": {"tag": "fountain-3"}}).status_code == 404
        )
        assert raw.unary(sandbox, "CloseStdin", {"process": {"pid": pid}}).status_code == 200


def test_generic_faults_apply_to_envd_routes_too(raw: Raw, emulator: E2BEmulator) -> None:
    sandbox = raw.create()
    emulator.faults.add("drop", path=r"^/process\.Process/Start$")
    with pytest.raises(requests.ConnectionError):
        raw.start(sandbox, "true")
    assert raw.start(sandbox, "true")[-1] == ("trailer", {})


# -- threads and the shell entry point -----------------------------------------------------------


def test_no_thread_outlives_the_emulator_or_its_streams() -> None:
    baseline = threading.active_count()
    with E2BEmulator(credential=KEY) as emulator:
        client = Raw(emulator)
        sandbox = client.create()
        client.start(sandbox, "echo x")
        with client.open_stream(sandbox, "Start", {"process": {"cmd": "sleep", "args": ["30"]}}):
            pass
        client.session.close()
    assert wait_until(lambda: threading.active_count() <= baseline, timeout=10)


def test_the_shell_entry_point_serves_until_terminated(tmp_path: Any) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "managoat_sandbox.emulators",
            "e2b",
            "--port",
            "0",
            "--api-key",
            KEY,
            "--workdir",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", base_url)
        created = requests.post(
            f"{base_url}/v2/sandboxes",
            json={"templateID": "base"},
            headers={"X-API-Key": KEY},
            timeout=10,
        )
        assert created.status_code == 201
        listed = requests.get(
            f"{base_url}/v2/sandboxes", headers={"X-API-Key": "wrong"}, timeout=10
        )
        assert listed.status_code == 401
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        if process.stdout is not None:
            process.stdout.close()
