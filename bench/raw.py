"""Minimal raw-protocol clients, one per provider, written from docs/protocols/README.md.

Each is what a careful user would write with nothing but ``requests`` or
``websocket-client`` and the protocol notes at hand (``docs/protocols/``):
no retries, no taxonomy, no threads, one pooled connection. Each creates its
own sandbox once, outside any timing (our adapter caches what it can, too),
and runs one command at a time, reading to the command's exit. They are the
floor our adapters are measured against.

* Sprites (docs/protocols/sprites.md#binary-frame-layout): one exec WebSocket
  per command, argv in the query,
  binary frames ``0x01`` stdout, ``0x02`` stderr, ``0x03`` exit code.
* E2B (docs/protocols/e2b.md#envd-start-stream): envd's ``process.Process/Start`` as a Connect
  server stream over HTTP/1.1: one flag-0 envelope (5-byte header, JSON)
  as the request, envelopes read back until the end-of-stream envelope;
  stdout arrives base64 in ``data`` events, the code in the ``end`` event.
* Daytona (docs/protocols/daytona.md#sessions): one toolbox session kept for the client's
  life (its toolbox URL taken once from the sandbox). An exec is one
  synchronous session exec (``runAsync: false``) whose answer carries the
  journal (``X-Daytona-Split-Output: true``: the 3-byte channel markers kept,
  so stdout is told from stderr) and the exit code. A streamed command is
  run asynchronously in the session and its log followed over the
  WebSocket (``…/logs?follow=true``), frames read to the daemon's Close
  (about a second after the exit: a bare command has no end mark of its
  own), then the exit code read from the command record. The raw client runs
  the command bare, with no shim; ``/process/execute`` (what the SDK's
  ``process.exec`` uses) merges stderr into stdout, so it is the SDK row's.
"""

from __future__ import annotations

import base64
import json
import secrets
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import requests
import websocket
from measure import WAIT

CREDENTIAL = "bench-key"
_STDOUT_MARKER = b"\x01\x01\x01"
_SPLIT = {"X-Daytona-Split-Output": "true"}


@dataclass(frozen=True)
class RawRun:
    """What a raw client saw of one command."""

    first_stdout: float  # seconds from the first request to the first stdout byte (inf: none)
    total: float  # seconds from the first request to the exit code
    stdout_bytes: int
    code: int


class RawSprites:
    """One command per exec WebSocket, read to the exit frame."""

    def __init__(self, base_url: str, sprite: str) -> None:
        self.base_url = base_url
        self.sprite = sprite

    def close(self) -> None:
        """Nothing to release: each command has its own connection."""

    def run(self, argv: Sequence[str], *, first_only: bool = False) -> RawRun:
        params = [*(("cmd", arg) for arg in argv), ("path", argv[0]), ("stdin", "false")]
        url = (
            self.base_url.replace("http", "ws", 1)
            + f"/v1/sprites/{self.sprite}/exec?"
            + urlencode(params, quote_via=quote)
        )
        began = time.perf_counter()
        first = float("inf")
        received = 0
        ws = websocket.create_connection(
            url,
            header=[f"Authorization: Bearer {CREDENTIAL}"],
            timeout=WAIT,
            suppress_origin=True,
            skip_utf8_validation=True,
        )
        try:
            while True:
                opcode, data = ws.recv_data()
                if opcode == websocket.ABNF.OPCODE_CLOSE:
                    raise RuntimeError("closed before the exit frame")
                if opcode != websocket.ABNF.OPCODE_BINARY or not data:
                    continue
                if data[0] == 0x01:
                    first = min(first, time.perf_counter() - began)
                    received += len(data) - 1
                    if first_only:
                        return RawRun(first, first, received, 0)
                elif data[0] == 0x03:
                    code = data[1] if len(data) > 1 else 0
                    return RawRun(first, time.perf_counter() - began, received, code)
        finally:
            ws.close()


def envelope(message: dict[str, Any]) -> bytes:
    payload = json.dumps(message, separators=(",", ":")).encode()
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


class RawE2B:
    """envd ``Start`` streams on one ``requests.Session``."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.http = requests.Session()
        created = self.http.post(
            f"{base_url}/v2/sandboxes",
            json={"templateID": "base"},
            headers={"X-API-Key": CREDENTIAL},
            timeout=WAIT,
        )
        created.raise_for_status()
        answer = created.json()
        self.sandbox_id: str = answer["sandboxID"]
        self.headers = {
            "E2b-Sandbox-Id": self.sandbox_id,
            "E2b-Sandbox-Port": "49983",
            "X-Access-Token": answer["envdAccessToken"],
            "Content-Type": "application/connect+json",
        }

    def close(self) -> None:
        self.http.delete(
            f"{self.base_url}/sandboxes/{self.sandbox_id}",
            headers={"X-API-Key": CREDENTIAL},
            timeout=WAIT,
        )
        self.http.close()

    def run(self, argv: Sequence[str], *, first_only: bool = False) -> RawRun:
        body = envelope({"process": {"cmd": argv[0], "args": list(argv[1:])}, "stdin": False})
        began = time.perf_counter()
        first = float("inf")
        received = 0
        code: int | None = None
        buffer = bytearray()
        with self.http.post(
            f"{self.base_url}/process.Process/Start",
            data=body,
            headers=self.headers,
            stream=True,
            timeout=WAIT,
        ) as response:
            response.raise_for_status()
            for chunk in response.iter_content(chunk_size=None):
                buffer += chunk
                while len(buffer) >= 5:
                    size = int.from_bytes(buffer[1:5], "big")
                    if len(buffer) < 5 + size:
                        break
                    flags, message = buffer[0], json.loads(buffer[5 : 5 + size])
                    del buffer[: 5 + size]
                    if flags & 0x02:
                        if "error" in message or code is None:
                            raise RuntimeError(f"stream ended: {message!r}")
                        return RawRun(first, time.perf_counter() - began, received, code)
                    event = message.get("event", {})
                    if "data" in event and "stdout" in event["data"]:
                        first = min(first, time.perf_counter() - began)
                        received += len(base64.b64decode(event["data"]["stdout"]))
                        if first_only:
                            return RawRun(first, first, received, 0)
                    elif "end" in event:
                        code = int(event["end"].get("exitCode", 0))
        raise RuntimeError("body ended without an end-of-stream envelope")


class RawDaytona:
    """A kept toolbox session: sync session execs, async commands followed by WebSocket."""

    def __init__(self, api_url: str, name: str) -> None:
        self.api_url = api_url
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {CREDENTIAL}"
        created = self.http.post(f"{api_url}/sandbox", json={"name": name}, timeout=WAIT)
        created.raise_for_status()
        answer = created.json()
        self.sandbox_id: str = answer["id"]
        self.toolbox = f"{answer['toolboxProxyUrl'].rstrip('/')}/{self.sandbox_id}"
        self.session = f"/process/session/raw-{secrets.token_hex(8)}"
        self._call("POST", "/process/session", json={"sessionId": self.session.rsplit("/", 1)[1]})

    def close(self) -> None:
        self.http.delete(f"{self.api_url}/sandbox/{self.sandbox_id}", timeout=WAIT)
        self.http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        response = self.http.request(method, self.toolbox + path, timeout=WAIT, **kwargs)
        response.raise_for_status()
        return response

    def exec(self, argv: Sequence[str]) -> RawRun:
        """One synchronous session exec: the answer holds the journal and the exit code."""
        began = time.perf_counter()
        answer = self._call(
            "POST",
            self.session + "/exec",
            headers=_SPLIT,
            json={"command": shlex.join(argv), "runAsync": False},
        ).json()
        journal = answer["output"].encode()
        total = time.perf_counter() - began
        return RawRun(total, total, _stdout_size(journal, b""), int(answer["exitCode"]))

    def run(self, argv: Sequence[str], *, first_only: bool = False) -> RawRun:
        """Run asynchronously, follow the log over the WebSocket to its Close, read the code."""
        began = time.perf_counter()
        command = self._call(
            "POST",
            self.session + "/exec",
            json={"command": shlex.join(argv), "runAsync": True, "suppressInputEcho": True},
        ).json()["cmdId"]
        path = f"{self.session}/command/{command}"
        url = self.toolbox.replace("http", "ws", 1) + path + "/logs?follow=true"
        ws = websocket.create_connection(
            url,
            header=[f"Authorization: Bearer {CREDENTIAL}", "X-Daytona-Split-Output: true"],
            timeout=WAIT,
            suppress_origin=True,
            skip_utf8_validation=True,
        )
        first = float("inf")
        received = 0
        tail = b""
        try:
            while True:
                opcode, data = ws.recv_data()
                if opcode == websocket.ABNF.OPCODE_CLOSE:
                    break
                if opcode != websocket.ABNF.OPCODE_BINARY or not data:
                    continue
                received += _stdout_size(data, tail)
                tail = (tail + data)[-2:]
                if received and first == float("inf"):
                    first = time.perf_counter() - began
                    if first_only:
                        return RawRun(first, first, received, 0)
        finally:
            ws.close()
        code = self._call("GET", path).json()["exitCode"]
        return RawRun(first, time.perf_counter() - began, received, int(code))


def _stdout_size(data: bytes, tail: bytes) -> int:
    """Output bytes in journal bytes ``data``, which follow the 2 bytes ``tail``: all but
    the stdout markers ending in ``data`` (the commands measured write no stderr)."""
    return len(data) - 3 * (tail + data).count(_STDOUT_MARKER)
