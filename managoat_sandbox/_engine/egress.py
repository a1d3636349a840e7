"""The egress policy, and the proxy requests it is applied to, outside the sandbox.

An isolated sandbox's network namespace holds only loopback: no route leads
out. The one way out is the proxy port inside the sandbox (``127.0.0.1:3128``,
announced to commands in ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY``), whose
connections the agent hands to the keeper — a host process, :mod:`.keeper` —
which speaks HTTP proxy to them (``CONNECT host:port`` for TLS and anything
else, absolute ``http://`` URLs for plain HTTP: :func:`parse_request`) and
decides with the sandbox's current policy, read from ``policy.json``
(:func:`read_policy`) for every new connection and again whenever it changes:

* no policy (``allow`` is null): any host name, but only *public* addresses;
* an allow-list: only the named hosts — ``example.com`` exactly, or
  ``*.example.com`` for its subdomains. A host named in the list may resolve
  to a private address (an internal service you chose); never to a blocked one;
* an empty allow-list: nothing (the agent's proxy port refuses connections).

Blocked always: loopback, link-local (and so the cloud metadata address
169.254.169.254), multicast, unspecified and reserved addresses, and the
other metadata endpoints listed in :data:`METADATA`, and IPv6 addresses that
carry one of those IPv4 addresses (IPv4-mapped, 6to4). *Private* means any
other address that is not globally routable (RFC 1918, unique local,
shared, documentation ranges). The check applies to every address a name
resolves to, after resolution, so DNS cannot smuggle in a blocked address.
``resolve`` pins names to addresses (like curl's ``--resolve``). A connection
already relayed is checked again, by :func:`permits`, when the policy changes.

A program that ignores proxy settings gets no network at all: the safe failure.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
from dataclasses import dataclass, field
from typing import Any

POLICY = "policy.json"
METADATA = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),
        ipaddress.ip_address("100.100.100.200"),
        ipaddress.ip_address("168.63.129.16"),
        ipaddress.ip_address("fd00:ec2::254"),
    }
)
_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)\Z")
#: A label of a host name in a request: looser than an allow-list entry (``_`` is
#: seen in the wild), but ASCII, 1 to 63 characters.
_HOST_LABEL = re.compile(r"[a-z0-9_-]{1,63}\Z")
_METHOD = re.compile(rb"[A-Z]{1,20}\Z")
_PORT = re.compile(r"[0-9]{1,5}\Z")
_VERSIONS = (b"HTTP/1.0", b"HTTP/1.1")
#: Longest request head the proxy reads (answered 431 beyond it).
HEAD_LIMIT = 64 * 1024
_POLICY_LIMIT = 64 * 1024
_DROPPED_HEADERS = (b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive")
_REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def check_domain(entry: str) -> str:
    """``entry`` normalised (lower case, no trailing dot); ValueError unless it is a host
    name or ``*.`` followed by one."""
    if not isinstance(entry, str):
        raise ValueError(f"a domain must be a str, got {type(entry).__name__}")
    name = entry.strip().lower().rstrip(".")
    bare = name[2:] if name.startswith("*.") else name
    labels = bare.split(".")
    if (
        not bare
        or len(bare) > 253
        or not all(_LABEL.match(label) for label in labels)
        or labels[-1].isdigit()
    ):
        raise ValueError(f"{entry!r} is not a domain name (like example.com or *.example.com)")
    return name


@dataclass(frozen=True)
class Policy:
    """``allow``: None for no policy, else the allowed host patterns (empty: deny all)."""

    allow: tuple[str, ...] | None = None
    resolve: dict[str, str] = field(default_factory=dict)

    @property
    def deny_all(self) -> bool:
        return self.allow is not None and not self.allow

    def names(self, host: str) -> bool:
        """Whether the allow-list names ``host`` (False without an allow-list)."""
        if self.allow is None:
            return False
        host = host.lower().rstrip(".")
        return any(
            host == pattern or (pattern.startswith("*.") and host.endswith(pattern[1:]))
            for pattern in self.allow
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "allow": None if self.allow is None else list(self.allow),
            "resolve": dict(self.resolve),
        }

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> Policy:
        allow = record.get("allow")
        resolve = record.get("resolve") or {}
        return cls(
            None if allow is None else tuple(str(a) for a in allow),
            {str(k): str(v) for k, v in resolve.items()},
        )


def classify(address: Address) -> str:
    """``blocked``, ``private`` or ``public``. An IPv6 address that carries an IPv4
    destination (IPv4-mapped ``::ffff:a.b.c.d``, 6to4 ``2002:AABB:CCDD::/48``) is the
    class of that IPv4 address: a 6to4 route to ``169.254.169.254`` is blocked."""
    if isinstance(address, ipaddress.IPv6Address):
        address = address.ipv4_mapped or address.sixtofour or address
    if (
        address in METADATA
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_unspecified
        or address.is_reserved
    ):
        return "blocked"
    return "public" if address.is_global else "private"


class Refusal(Exception):
    """A proxied connection the policy does not allow; ``status`` is the HTTP answer."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def permitted(policy: Policy, host: str, addresses: list[Address]) -> list[Address]:
    """The addresses of ``host`` a connection may go to under ``policy``."""
    named = policy.names(host)
    return [a for a in addresses if classify(a) == "public" or (classify(a) == "private" and named)]


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def plan(policy: Policy, host: str) -> list[Address] | None:
    """The addresses a connection to ``host`` may be tried at without a lookup (``host``
    is an address, or a name ``policy`` pins), or None when the name must be looked up
    (:func:`lookup`); Refusal when ``policy`` refuses ``host`` whatever it resolves to."""
    if policy.deny_all:
        raise Refusal(403, "the sandbox's network policy denies all egress")
    literal = _literal(host)
    if policy.allow is not None and (literal is not None or not policy.names(host)):
        raise Refusal(403, f"{host} is not in the sandbox's network policy")
    if literal is not None:
        return [literal]
    pinned = policy.resolve.get(host.lower().rstrip("."))
    if pinned is None:
        return None
    try:
        return [ipaddress.ip_address(pinned)]
    except ValueError:
        raise Refusal(502, f"{host} is pinned to {pinned!r}, which is not an address") from None


def lookup(host: str, port: int) -> list[Address]:
    """The addresses ``host`` resolves to (blocking); Refusal(502) if it does not resolve.

    The name is passed to the resolver as ASCII bytes: what :func:`check_host`
    accepted, never re-encoded on the way.
    """
    try:
        infos = socket.getaddrinfo(host.encode("ascii"), port, type=socket.SOCK_STREAM)
        return [ipaddress.ip_address(info[4][0]) for info in infos]
    except (OSError, UnicodeError, ValueError):
        raise Refusal(502, f"{host} could not be resolved") from None


def choose(
    policy: Policy, host: str, port: int, addresses: list[Address]
) -> list[tuple[Address, int]]:
    """Where a connection to ``host:port``, which resolves to ``addresses``, may be
    tried, in order; Refusal(403) when ``policy`` permits none of them."""
    allowed = permitted(policy, host, addresses)
    if not allowed:
        raise Refusal(403, f"{host} resolves only to addresses the sandbox may not reach")
    return [(address, port) for address in dict.fromkeys(allowed)]


def decide(policy: Policy, host: str, port: int) -> list[tuple[Address, int]]:
    """Where a connection to ``host:port`` may go, or Refusal saying why not (blocking:
    it may look the name up)."""
    addresses = plan(policy, host)
    if addresses is None:
        addresses = lookup(host, port)
    return choose(policy, host, port, addresses)


def permits(policy: Policy, host: str, address: Address) -> bool:
    """Whether a connection relayed to ``host`` at ``address`` may go on under ``policy``:
    false for every connection once all egress is denied, for a host the allow-list
    no longer names, and for an address the policy would not connect to now."""
    try:
        plan(policy, host)
    except Refusal:
        return False
    return bool(permitted(policy, host, [address]))


def read_policy(state_fd: int) -> Policy:
    """The sandbox's current policy (no policy if none was written; deny all if unreadable)."""
    try:
        fd = os.open(
            POLICY, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=state_fd
        )
    except FileNotFoundError:
        return Policy()
    except OSError:
        return Policy(allow=())
    try:
        record = json.loads(os.read(fd, _POLICY_LIMIT))
        return Policy.from_json(record)
    except (OSError, ValueError, TypeError, AttributeError):
        return Policy(allow=())
    finally:
        os.close(fd)


# -- requests ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """A proxy request: where it goes, and the head to send there (None for ``CONNECT``,
    which is answered ``200`` and then relays bytes as they are)."""

    host: str
    port: int
    upstream_head: bytes | None


def check_host(text: str) -> str:
    """The host of a request, normalised (lower case, no trailing dot, an IPv6 address
    without brackets); Refusal(400) unless it is an IP address or an ASCII host name of
    at most 253 characters whose labels are 1 to 63 letters, digits, ``-`` or ``_``.

    Names that are not ASCII are refused, not encoded: a client sends the
    ``xn--`` form of an international name, which must be valid Punycode.
    """
    if text.startswith("[") or ":" in text:
        inner = text[1:-1] if text.startswith("[") and text.endswith("]") else text
        try:
            return str(ipaddress.IPv6Address(inner))
        except ValueError:
            raise Refusal(400, f"{text!r} is not a host") from None
    name = text.lower()
    name = name[:-1] if name.endswith(".") else name
    if (
        not name
        or len(name) > 253
        or not name.isascii()
        or not all(_HOST_LABEL.match(label) and _idna(label) for label in name.split("."))
    ):
        raise Refusal(400, f"{text!r} is not a host")
    return name


def _idna(label: str) -> bool:
    """Whether an ASCII ``label`` is well formed as IDNA: an ``xn--`` label must hold
    a non-empty Punycode encoding."""
    if not label.startswith("xn--"):
        return True
    try:
        return bool(label[4:].encode("ascii").decode("punycode"))
    except UnicodeError:
        return False


def check_port(text: str) -> int:
    """A port given in a request (1-65535, decimal digits only); Refusal(400) if not."""
    if not _PORT.match(text) or not 0 < int(text) < 65536:
        raise Refusal(400, f"{text!r} is not a port")
    return int(text)


def parse_request(head: bytes) -> Request:
    """The request whose head (up to the blank line, excluded) is ``head``.

    Refusal(400) for anything that is not a well-formed ``CONNECT host:port`` or
    absolute ``http://`` request of HTTP/1.0 or 1.1: a bad request line, port or
    host, a second port, a URL of another scheme.
    """
    lines = head.split(b"\r\n")
    request = lines[0].split(b" ")
    if len(request) != 3 or not _METHOD.match(request[0]) or request[2] not in _VERSIONS:
        raise Refusal(400, "malformed request line")
    method, target, version = request
    text = target.decode("latin-1")
    if method == b"CONNECT":
        host, sep, port = text.rpartition(":")
        if not sep:
            raise Refusal(400, "CONNECT needs host:port")
        return Request(check_host(host), check_port(port), None)
    if text[:7].lower() != "http://":
        raise Refusal(400, "a proxy request needs an absolute http:// URL (use CONNECT for https)")
    rest = text[7:]
    ends = [i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0]
    authority, path = rest[: min(ends, default=len(rest))], rest[min(ends, default=len(rest)) :]
    authority = authority.rpartition("@")[2]
    if authority.startswith("["):
        host, bracket, after = authority.partition("]")
        host += bracket
        if after and not after.startswith(":"):
            raise Refusal(400, f"{authority!r} is not host:port")
        port = after[1:]
    else:
        host, _, port = authority.partition(":")
    path = path.partition("#")[0]
    path = "/" + path if not path.startswith("/") else path
    kept = [
        line for line in lines[1:] if line.split(b":", 1)[0].strip().lower() not in _DROPPED_HEADERS
    ]
    upstream = b"\r\n".join(
        [b" ".join((method, path.encode("latin-1"), version)), *kept, b"Connection: close"]
    )
    return Request(check_host(host), check_port(port) if port else 80, upstream + b"\r\n\r\n")


def answer(status: int, reason: str) -> bytes:
    """The proxy's own answer ``status`` (a refusal), saying ``reason``, closing."""
    body = f"managoat-sandbox egress: {reason}\n".encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Refused')}\r\n"
        f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        "X-Managoat-Egress: refused\r\nConnection: close\r\n\r\n"
    ).encode()
    return head + body
