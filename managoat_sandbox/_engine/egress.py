"""The egress policy and the filtering proxy that enforces it, outside the sandbox.

An isolated sandbox's network namespace holds only loopback: no route leads
out. The one way out is the proxy port inside the sandbox (``127.0.0.1:3128``,
announced to commands in ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY``), whose
connections the agent hands to the keeper — a host process — which speaks
HTTP proxy to them (``CONNECT host:port`` for TLS and anything else, absolute
``http://`` URLs for plain HTTP) and decides with the sandbox's current
policy, read from ``policy.json`` for every new connection:

* no policy (``allow`` is null): any host name, but only *public* addresses;
* an allow-list: only the named hosts — ``example.com`` exactly, or
  ``*.example.com`` for its subdomains. A host named in the list may resolve
  to a private address (an internal service you chose); never to a blocked one;
* an empty allow-list: nothing (the agent also stops listening on the port).

Blocked always: loopback, link-local (and so the cloud metadata address
169.254.169.254), multicast, unspecified and reserved addresses, and the
other metadata endpoints listed in :data:`METADATA`, and IPv6 addresses that
carry one of those IPv4 addresses (IPv4-mapped, 6to4). *Private* means any
other address that is not globally routable (RFC 1918, unique local,
shared, documentation ranges). The check applies to every address a name
resolves to, after resolution, so DNS cannot smuggle in a blocked address.
``resolve`` pins names to addresses (like curl's ``--resolve``).

A program that ignores proxy settings gets no network at all: the safe failure.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import socket
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

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
_HEAD_LIMIT = 64 * 1024
_HEAD_TIMEOUT = 30.0
_CONNECT_TIMEOUT = 10.0
_RELAY = 64 * 1024
_DROPPED_HEADERS = (b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive")

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


def decide(policy: Policy, host: str, port: int) -> list[tuple[Address, int]]:
    """Where a connection to ``host:port`` may go, or Refusal saying why not."""
    if policy.deny_all:
        raise Refusal(403, "the sandbox's network policy denies all egress")
    try:
        literal: Address | None = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    if policy.allow is not None and (literal is not None or not policy.names(host)):
        raise Refusal(403, f"{host} is not in the sandbox's network policy")
    if literal is not None:
        addresses = [literal]
    elif host.lower().rstrip(".") in policy.resolve:
        addresses = [ipaddress.ip_address(policy.resolve[host.lower().rstrip(".")])]
    else:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            raise Refusal(502, f"{host} could not be resolved") from None
        addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
    allowed = permitted(policy, host, addresses)
    if not allowed:
        raise Refusal(403, f"{host} resolves only to addresses the sandbox may not reach")
    return [(address, port) for address in allowed]


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
        record = json.loads(os.read(fd, _HEAD_LIMIT))
        return Policy.from_json(record)
    except (OSError, ValueError, TypeError, AttributeError):
        return Policy(allow=())
    finally:
        os.close(fd)


# -- the proxy -----------------------------------------------------------------------------


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > _HEAD_LIMIT:
            raise Refusal(431, "request head too large")
        chunk = sock.recv(8192)
        if not chunk:
            raise Refusal(400, "connection closed before a request")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _target(method: bytes, target: bytes) -> tuple[str, int, bytes | None]:
    """Host, port and (for plain HTTP) the origin-form path of a proxy request."""
    text = target.decode("latin-1")
    if method == b"CONNECT":
        host, sep, port = text.rpartition(":")
        if not sep or not port.isdigit():
            raise Refusal(400, "CONNECT needs host:port")
        return host.strip("[]"), int(port), None
    parts = urlsplit(text)
    if parts.scheme != "http" or not parts.hostname:
        raise Refusal(400, "a proxy request needs an absolute http:// URL (use CONNECT for https)")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return parts.hostname, parts.port or 80, path.encode("latin-1")


def _answer(sock: socket.socket, status: int, reason: str) -> None:
    body = f"managoat-sandbox egress: {reason}\n".encode()
    head = (
        f"HTTP/1.1 {status} {'Forbidden' if status == 403 else 'Refused'}\r\n"
        f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        "X-Managoat-Egress: refused\r\nConnection: close\r\n\r\n"
    ).encode()
    with contextlib.suppress(OSError):
        sock.sendall(head + body)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(_RELAY):
            sink.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def relay(client: socket.socket, upstream: socket.socket) -> None:
    """Copy both directions until both ends closed; closes both sockets."""
    other = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    other.start()
    _pipe(client, upstream)
    other.join()
    client.close()
    upstream.close()


def serve_connection(client: socket.socket, state_fd: int) -> None:
    """Handle one proxy connection from the sandbox (blocking; run on its own thread)."""
    try:
        client.settimeout(_HEAD_TIMEOUT)
        head, rest = _read_head(client)
        lines = head.split(b"\r\n")
        request = lines[0].split(b" ")
        if len(request) != 3:
            raise Refusal(400, "malformed request line")
        method, target, version = request
        host, port, path = _target(method, target)
        destinations = decide(read_policy(state_fd), host, port)
        upstream = _connect(destinations)
        client.settimeout(None)
        if path is None:
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                upstream.sendall(rest)
        else:
            kept = [
                line
                for line in lines[1:]
                if line.split(b":", 1)[0].strip().lower() not in _DROPPED_HEADERS
            ]
            upstream.sendall(
                b"\r\n".join(
                    [b" ".join((method, path, version)), *kept, b"Connection: close", b"", b""]
                )
                + rest
            )
    except Refusal as refusal:
        _answer(client, refusal.status, str(refusal))
        client.close()
        return
    except OSError:
        client.close()
        return
    relay(client, upstream)


def _connect(destinations: list[tuple[Address, int]]) -> socket.socket:
    last: OSError | None = None
    for address, port in destinations:
        try:
            return socket.create_connection((str(address), port), timeout=_CONNECT_TIMEOUT)
        except OSError as exc:
            last = exc
    raise Refusal(502, f"cannot connect: {last.strerror if last else 'no address'}")
