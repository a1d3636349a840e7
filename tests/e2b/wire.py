"""Helpers for the E2B wire tests: config, canned answers and Connect stream bodies."""

from __future__ import annotations

import base64
import os
import re
from typing import Any

import responses

from managoat_sandbox import config
from managoat_sandbox.providers.e2b.connect import encode

API = "https://api.test"
API_KEY = "e2b_canary_KEY_5f1d"
TOKEN = "envd_canary_TOKEN_9c2e"
ENVD = "https://49983-sbx1.test"
START_URL = f"{ENVD}/process.Process/Start"
LISTING = re.compile(re.escape(f"{API}/v2/sandboxes") + r"(\?.*)?$")


def configure(**extra: Any) -> None:
    """Point the adapter at the fake API with the canary key."""
    config.configure("e2b", **{"api_key": API_KEY, "base_url": API, **extra})


def item(sandbox_id: str = "sbx1", name: str = "box", state: str = "running") -> dict[str, Any]:
    """A v2 listing item stamped with ``name``."""
    return {
        "sandboxID": sandbox_id,
        "templateID": "base",
        "clientID": "6532622b",
        "state": state,
        "metadata": {"fountain_name": name, "fountain": "1"},
    }


def sandbox(sandbox_id: str = "sbx1", token: str = TOKEN) -> dict[str, Any]:
    """A ``Sandbox`` / ``SandboxDetail`` answer."""
    return {
        "sandboxID": sandbox_id,
        "templateID": "base",
        "clientID": "6532622b",
        "envdVersion": "0.6.13",
        "envdAccessToken": token,
        "domain": "test",
    }


def found(rsps: responses.RequestsMock, *items: dict[str, Any], **kw: Any) -> None:
    """The next listing answers ``items``."""
    rsps.add(responses.GET, LISTING, json=list(items), **kw)


def running(rsps: responses.RequestsMock, sandbox_id: str = "sbx1") -> None:
    """Lookup finds a running sandbox; its detail carries the access token."""
    found(rsps, item(sandbox_id))
    rsps.add(responses.GET, f"{API}/sandboxes/{sandbox_id}", json=sandbox(sandbox_id))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def start(pid: int = 42) -> bytes:
    return encode({"event": {"start": {"pid": pid}}})


def stdout(data: bytes) -> bytes:
    return encode({"event": {"data": {"stdout": b64(data)}}})


def stderr(data: bytes) -> bytes:
    return encode({"event": {"data": {"stderr": b64(data)}}})


def end(code: int = 0) -> bytes:
    body: dict[str, Any] = {"exited": True, "status": f"exit status {code}"}
    if code:
        body["exitCode"] = code
    return encode({"event": {"end": body}})


def trailer(error: Any = None) -> bytes:
    return encode({} if error is None else {"error": error}, end_stream=True)


def stream(rsps: responses.RequestsMock, *parts: bytes, url: str = START_URL) -> None:
    """The next Start answers these envelopes as one connect+json body."""
    rsps.add(
        responses.POST,
        url,
        body=b"".join(parts),
        status=200,
        content_type="application/connect+json",
    )


class Pipe:
    """A stream body the test writes while the adapter reads it (EOF on close)."""

    def __init__(self) -> None:
        read, self._write = os.pipe()
        # responses streams an io.BufferedReader body as it is; closed in close().
        self.reader = open(read, "rb")  # noqa: SIM115
        self.closed = False

    def send(self, *parts: bytes) -> None:
        os.write(self._write, b"".join(parts))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self._write)

    def dispose(self) -> None:
        self.close()
        self.reader.close()
