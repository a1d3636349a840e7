"""Helpers for the wire-contract tests: a mocked Sprites API with ``responses``."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import responses

from ..canary import CANARY

BASE = "https://api.sprites.test"
TOKEN = CANARY


def url(path: str) -> str:
    return BASE + path


def calls(mock: responses.RequestsMock) -> list[tuple[str, str]]:
    """(method, path) of every request made, in order."""
    return [
        (call.request.method or "", urlsplit(call.request.url or "").path) for call in mock.calls
    ]


def query(mock: responses.RequestsMock, index: int = 0) -> list[tuple[str, str]]:
    """The query string of request ``index`` as ordered pairs."""
    return parse_qsl(urlsplit(mock.calls[index].request.url or "").query)


def body(mock: responses.RequestsMock, index: int = 0) -> Any:
    """The JSON body of request ``index``."""
    raw = mock.calls[index].request.body
    return json.loads(raw) if raw else None


def ndjson(*events: Any) -> str:
    """Events as NDJSON (strings are sent verbatim)."""
    return "".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in events)
