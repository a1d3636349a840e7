"""Who may talk to an emulator: its credential, and the Host names it answers to.

An emulator always has a credential. It is the one it was given, else the
provider's environment variable (``SPRITES_TOKEN``, ``E2B_API_KEY``,
``DAYTONA_API_KEY``), else a random one made at construction
(:func:`resolve_credential`). Credentials are compared in constant time.

It answers only requests whose ``Host`` header names the address it serves
(:class:`HostCheck`): ``host:port`` of the bound address, ``localhost:port``
when that address is a loopback one, any IP literal with the right port when
it is bound to every address (a DNS-rebinding page cannot send an IP literal
as its Host), plus any extra names the emulator serves (E2B's sandbox hosts
``<port>-<sandbox id>.<domain>``). Anything else is refused before it is
read, so a web page whose name an attacker re-points at 127.0.0.1 cannot
drive the emulator from a browser.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
from collections.abc import Callable

__all__ = ["HostCheck", "credential_matches", "read_credential_file", "resolve_credential"]

_WILDCARDS = frozenset({"0.0.0.0", "::", ""})


def resolve_credential(given: str | None, env_name: str) -> tuple[str, bool]:
    """The credential to require and whether it was generated here (neither ``given``
    nor the environment variable ``env_name`` held one)."""
    chosen = given or os.environ.get(env_name) or None
    if chosen is not None:
        return chosen, False
    return "emu_" + secrets.token_urlsafe(24), True


def read_credential_file(path: str) -> str:
    """The credential in the file at ``path`` (its first line, stripped);
    ValueError if it holds none, OSError if it cannot be read."""
    with open(path, encoding="utf-8") as file:
        line = file.readline(4096).strip()
    if not line:
        raise ValueError(f"{path} holds no credential")
    return line


def credential_matches(given: str | None, expected: str) -> bool:
    """Whether ``given`` is ``expected``, compared in constant time."""
    if not given:
        return False
    return hmac.compare_digest(
        given.encode("utf-8", "surrogateescape"), expected.encode("utf-8", "surrogateescape")
    )


def _split_host(value: str) -> tuple[str, str]:
    """``(host, port)`` of a Host header value (``port`` is "" when absent)."""
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value, ""
        rest = value[end + 1 :]
        return value[1:end], rest[1:] if rest.startswith(":") else ""
    host, _, port = value.rpartition(":")
    if not host:
        return value, ""
    return host, port


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


class HostCheck:
    """Decides whether a request's Host header names this emulator.

    ``bound`` is the address the emulator was asked to serve and ``port``
    gives its port once known; ``extra`` (given the host name, lower case,
    without port) admits further names the emulator legitimately serves.
    """

    def __init__(
        self, bound: str, port: Callable[[], int], extra: Callable[[str], bool] | None = None
    ) -> None:
        self._bound = bound.strip("[]").lower()
        self._port = port
        self._extra = extra
        address = _ip(self._bound)
        self._wildcard = self._bound in _WILDCARDS
        self._loopback = self._bound == "localhost" or (address is not None and address.is_loopback)

    def allows(self, header: str | None) -> bool:
        """Whether a request with this Host header may be served."""
        if not header:
            return False
        host, port = _split_host(header.strip().lower())
        if self._extra is not None and self._extra(host):
            return True
        if port != str(self._port()):
            return False
        if host == self._bound or (self._loopback and host == "localhost"):
            return True
        address = _ip(host)
        if address is None:
            return False
        return self._wildcard or address == _ip(self._bound)
