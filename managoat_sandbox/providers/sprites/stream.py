"""The Sprites exec WebSocket (``/v1/sprites/<name>/exec``): opening it, and its frames.

Wire facts (docs/protocols/sprites.md#binary-frame-layout): every binary
message is one stream-id byte plus a
payload — ``0x00`` stdin and ``0x04`` stdin EOF from the client; ``0x01``
stdout, ``0x02`` stderr and ``0x03`` exit from the server. The exit payload is
**one byte**, the code 0-255; trailing bytes are ignored and an empty payload
reads as 0. Text messages are JSON: ``session_info`` (whose ``tty`` says how
to decode binary frames, on new and attached connections alike) and, in TTY
mode, ``{"type": "exit", "exit_code": N}``. In TTY mode binary frames are raw
terminal bytes (all stdout) and stdin is raw keystrokes with no EOF frame.

The command's end that reads and writes these frames is :mod:`.end`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlencode

from ..._http import open_websocket
from ..._transport import Transport
from ...errors import ProviderError
from ...reasons import Reason
from .errors import POLICY, PROVIDER
from .settings import Settings

__all__ = [
    "EXIT",
    "STDERR",
    "STDIN",
    "STDIN_EOF",
    "STDOUT",
    "decode_exit",
    "is_session_info",
    "open_socket",
    "text_exit_code",
]

STDIN = b"\x00"
STDOUT = 0x01
STDERR = 0x02
EXIT = 0x03
STDIN_EOF = b"\x04"


def open_socket(
    settings: Settings,
    path: str,
    params: Sequence[tuple[str, str]],
    *,
    timeout: float,
    transport: Transport | None = None,
) -> Any:
    """Open the WebSocket at ``path`` with ``params`` through ``transport`` (default: the
    websocket-client one), by the shared :func:`~..._http.open_websocket`: a refused
    upgrade is mapped like HTTP, by Sprites' :data:`.errors.POLICY`.

    Like every HTTP call of the package it follows no redirect (a 3xx is
    ``Invalid``, and the credential is never replayed to another location)
    and ignores proxy environment variables. Returns a connected
    ``websocket.WebSocket`` (typed ``Any``: websocket-client ships no
    annotations for these methods).
    """
    url = settings.ws_url(path)
    if params:
        url += "?" + urlencode(list(params), quote_via=quote)
    return open_websocket(
        url, settings.headers, policy=POLICY, timeout=timeout, transport=transport
    )


def decode_exit(payload: bytes) -> int:
    """The exit code of an ``0x03`` frame's payload: its first byte, or 0 when empty."""
    return payload[0] if payload else 0


def is_session_info(data: bytes | str) -> bool:
    """Whether a text message is a ``session_info``."""
    try:
        message = json.loads(data)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("type") == "session_info"


def text_exit_code(message: dict[str, Any]) -> int:
    """The code of a text ``exit`` message: ``exit_code``, else ``code``, else 0."""
    for key in ("exit_code", "code"):
        if key in message:
            value = message[key]
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 255:
                raise ProviderError(PROVIDER, Reason.MALFORMED_EXIT, name=key)
            return value
    return 0
