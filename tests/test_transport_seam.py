"""The transport seam: a provider given a transport sends everything through it.

No library is patched here (no ``responses``, no mock of ``requests`` or
websocket-client): each adapter is given an in-memory :class:`Transport` that
answers canned responses, and the operations run unchanged against it. The
answers' statuses are mapped to the taxonomy by the one status policy, for HTTP
and for a refused WebSocket upgrade alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from managoat_sandbox import config
from managoat_sandbox._deadline import Deadline
from managoat_sandbox._http import HttpClient
from managoat_sandbox._status import ErrorPolicy, Response
from managoat_sandbox._transport import (
    RequestsTransport,
    Transport,
    UpgradeRefused,
    canned,
    endpoint,
)
from managoat_sandbox.errors import (
    Denied,
    Invalid,
    NotFound,
    RateLimited,
    SandboxError,
    Unavailable,
)
from managoat_sandbox.providers.daytona.follow import LogSocket
from managoat_sandbox.providers.e2b import E2B
from managoat_sandbox.providers.sprites import Sprites, bounded
from managoat_sandbox.providers.sprites.settings import load as sprites_settings
from managoat_sandbox.providers.sprites.stream import open_socket
from managoat_sandbox.reasons import Reason
from managoat_sandbox.types import Handle

from .e2b import wire as e2b_wire
from .sprites import wire as sprites_wire

Answer = tuple[int, bytes, Mapping[str, str]]


class InMemory:
    """A :class:`Transport` answering canned responses by method and URL (query left
    out), recording every request and handshake; an unrouted request is a transport
    failure, as a refused connection is."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], list[Answer]] = {}
        self.sent: list[requests.PreparedRequest] = []
        self.handshakes: list[tuple[str, dict[str, str]]] = []
        self.upgrade: Exception | Any = None
        self.isolations = 0
        self.releases = 0

    def answer(
        self,
        method: str,
        url: str,
        status: int = 200,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Answer ``method url`` so (the last answer given for it repeats)."""
        self.routes.setdefault((method, url), []).append((status, body, dict(headers or {})))

    def handle_request(
        self, request: requests.PreparedRequest, *, timeout: tuple[float, float]
    ) -> requests.Response:
        self.sent.append(request)
        url = request.url or ""
        answers = self.routes.get((request.method or "", url.split("?", 1)[0]))
        if not answers:
            raise Unavailable(Reason.TRANSPORT, kind="NoRoute", address=endpoint(url))
        status, body, headers = answers.pop(0) if len(answers) > 1 else answers[0]
        return canned(request, status, body, headers)

    def connect(self, url: str, headers: Mapping[str, str], *, timeout: float) -> Any:
        self.handshakes.append((url, dict(headers)))
        if isinstance(self.upgrade, Exception):
            raise self.upgrade
        return self.upgrade

    def isolated(self) -> InMemory:
        self.isolations += 1
        return self

    def release(self) -> None:
        self.releases += 1

    def paths(self) -> list[tuple[str, str]]:
        return [(r.method or "", urlsplit(r.url or "").path) for r in self.sent]


@pytest.fixture
def transport() -> InMemory:
    return InMemory()


def test_the_in_memory_transport_and_the_default_one_are_transports() -> None:
    transports: list[Transport] = [InMemory(), RequestsTransport()]
    assert all(callable(t.handle_request) for t in transports)


# -- E2B: a whole exec through the transport ---------------------------------------------------


def test_an_e2b_exec_runs_entirely_through_the_transport_it_was_given(
    transport: InMemory,
) -> None:
    e2b_wire.configure()
    api, envd = e2b_wire.API, e2b_wire.ENVD
    transport.answer("GET", f"{api}/v2/sandboxes", body=_json([e2b_wire.item()]))
    transport.answer("GET", f"{api}/sandboxes/sbx1", body=_json(e2b_wire.sandbox()))
    transport.answer(
        "POST",
        e2b_wire.START_URL,
        body=e2b_wire.start()
        + e2b_wire.stdout(b"hel")
        + e2b_wire.stdout(b"lo")
        + e2b_wire.end(3)
        + e2b_wire.trailer(),
        headers={"Content-Type": "application/connect+json"},
    )
    e2b = E2B(transport=transport)
    assert e2b.exec(e2b.build_handle("box"), "bash", ["-lc", "echo hello"]) == (b"hello", 3)
    assert transport.paths() == [
        ("GET", "/v2/sandboxes"),
        ("GET", "/sandboxes/sbx1"),
        ("POST", "/process.Process/Start"),
    ]
    start = transport.sent[-1]
    assert start.url == f"{envd}/process.Process/Start"
    assert start.headers["X-Access-Token"] == e2b_wire.TOKEN
    assert start.headers["User-Agent"].startswith("managoat_sandbox/")


def test_a_transport_failure_reaches_the_caller_as_the_transport_raised_it(
    transport: InMemory,
) -> None:
    e2b_wire.configure()
    e2b = E2B(transport=transport)
    with pytest.raises(Unavailable) as raised:
        e2b.exec(e2b.build_handle("box"), "true")
    assert raised.value.detail == ("transport", "NoRoute", "api.test:443")


# -- statuses: mapped once, by the provider's policy --------------------------------------------


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        (404, {}, NotFound(("http", 404, {"error": "gone"}))),
        (401, {}, Denied(("http", 401, {"error": "gone"}))),
        (400, {}, Invalid(("http", 400, {"error": "gone"}))),
        (302, {"Location": "https://elsewhere.test/"}, Invalid(("http", 302, {"error": "gone"}))),
        (429, {"Retry-After": "7"}, RateLimited(7.0)),
        (503, {}, Unavailable(("http", 503, {"error": "gone"}))),
    ],
)
def test_a_sprites_answer_through_the_transport_maps_to_its_taxonomy_error(
    transport: InMemory, status: int, headers: dict[str, str], expected: SandboxError
) -> None:
    config.configure("sprites", base_url=sprites_wire.BASE, token=sprites_wire.TOKEN)
    transport.answer(
        "GET",
        sprites_wire.url("/v1/sprites/box/fs/read"),
        status,
        b'{"error": "gone"}',
        {**headers, "Content-Type": "application/json", "X-Request-Id": "req-1"},
    )
    with pytest.raises(SandboxError) as raised:
        Sprites(transport=transport).read_file(Handle("sprites", "box"), "/app/x")
    assert raised.value == expected
    assert raised.value.status == status and raised.value.request_id == "req-1"
    assert len(transport.sent) == 1


def test_a_credential_echoed_in_a_refusal_is_scrubbed_before_the_policy_sees_it(
    transport: InMemory,
) -> None:
    secret = "s3cret-token-for-the-seam"
    url = "https://provider.test/v1/thing"
    transport.answer("GET", url, 400, f"bad token {secret}".encode())
    with pytest.raises(Invalid) as raised:
        HttpClient(transport=transport).send(
            "GET",
            url,
            policy=ErrorPolicy("test"),
            timeout=(1, 1),
            headers={"Authorization": f"Bearer {secret}"},
        )
    assert secret not in repr(raised.value)


# -- WebSockets: the one opening, its refusals mapped by the same policy ------------------------


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            Response(503, {"retry-after": "2"}, b'{"error": "booting"}'),
            Unavailable(("http", 503, {"error": "booting"})),
        ),
        (Response(401, {}, b"no"), Denied(("http", 401, "no"))),
        (
            Response(429, {}, b'{"retry_after_seconds": 3}'),
            RateLimited(3.0),
        ),
        (Response(302, {"location": "wss://elsewhere.test/"}, b""), Invalid(("http", 302, {}))),
    ],
)
def test_a_refused_sprites_upgrade_maps_like_http(
    transport: InMemory, answer: Response, expected: SandboxError
) -> None:
    config.configure("sprites", base_url=sprites_wire.BASE, token=sprites_wire.TOKEN)
    transport.upgrade = UpgradeRefused(answer)
    with pytest.raises(SandboxError) as raised:
        open_socket(
            sprites_settings(),
            "/v1/sprites/box/exec",
            [("cmd", "true")],
            timeout=1,
            transport=transport,
        )
    assert raised.value == expected
    assert raised.value.status == answer.status
    [(url, headers)] = transport.handshakes
    assert url == "wss://api.sprites.test/v1/sprites/box/exec?cmd=true"
    assert headers["Authorization"] == f"Bearer {sprites_wire.TOKEN}"


def test_a_daytona_follow_opens_through_the_transport_and_maps_a_refusal(
    transport: InMemory,
) -> None:
    url = "wss://toolbox.test/process/session/s/command/c/logs?follow=true"
    transport.upgrade = UpgradeRefused(Response(404, {}, b'{"message": "no such command"}'))
    with pytest.raises(NotFound) as raised:
        LogSocket.open(url, {"Authorization": "Bearer k"}, timeout=1, transport=transport)
    assert raised.value.detail == ("http", 404, {"message": "no such command"})

    class Connected:
        sock = object()

    transport.upgrade = Connected()
    follow = LogSocket.open(url, {}, timeout=1, transport=transport)
    assert follow._ws is transport.upgrade
    assert [u for u, _ in transport.handshakes] == [url, url]


# -- the bounded Sprites exchange: an isolated transport of its own -----------------------------


def test_a_bounded_exchange_goes_through_an_isolated_transport_and_releases_it(
    transport: InMemory,
) -> None:
    url = sprites_wire.url("/v1/sprites/box")
    transport.answer("DELETE", url, 204, b"")
    answer = bounded.exchange(
        "DELETE", url, headers={}, deadline=Deadline(5), limit=100, transport=transport
    )
    assert (answer.status, answer.body) == (204, b"")
    assert (transport.isolations, transport.releases) == (1, 1)
    large = sprites_wire.url("/v1/sprites/large")
    transport.answer("GET", large, 200, b"x" * 101)
    with pytest.raises(bounded.TooLarge):
        bounded.exchange(
            "GET", large, headers={}, deadline=Deadline(5), limit=100, transport=transport
        )
    with pytest.raises(bounded.Failed) as failed:
        bounded.exchange(
            "GET", url, headers={}, deadline=Deadline(5), limit=100, transport=transport
        )
    assert failed.value.cause.detail == ("transport", "NoRoute", "api.sprites.test:443")
    assert transport.releases == 3


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()
