"""A connection failure names where it failed: the endpoint (``host:port``) of every hosted
adapter's HTTP and WebSocket calls, and never the credential.

Each adapter is pointed at a closed port (bound, then closed, so nothing listens there)
with a recognisable fake credential; the error must be ``Unavailable`` (transient), its
detail must still start with ``"transport"``, its text must name ``127.0.0.1:<port>``,
and neither its text nor its ``repr`` may contain the credential or the URL's path.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any, cast

import pytest

from managoat_sandbox import config, reasons
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.errors import SandboxError, Unavailable
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.providers.daytona.api import Timeouts
from managoat_sandbox.providers.e2b import E2B
from managoat_sandbox.providers.sprites import Sprites
from managoat_sandbox.types import Handle

#: A credential no real provider would issue, easy to spot in any text.
FAKE = "fake-CREDENTIAL-endpoint-check-3b9d"


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _assert_names_endpoint(
    error: SandboxError, port: int, *, first: str = reasons.TRANSPORT
) -> None:
    """``first`` is the detail's first element; a bounded operation's documented bare
    ``<operation>_transport_failed`` names the endpoint in its cause instead."""
    assert isinstance(error, Unavailable) and error.transient
    if first != "transport":
        assert error.detail == first
        assert isinstance(error.__cause__, Unavailable)
        error = error.__cause__
    assert isinstance(error.detail, tuple) and error.detail[0] == reasons.TRANSPORT
    where = f"127.0.0.1:{port}"
    assert where in str(error), str(error)
    for text in (str(error), repr(error)):
        assert FAKE not in text
        assert "/v1" not in text and "/api" not in text and "?" not in text


# -- Sprites: REST and the exec WebSocket ----------------------------------------------


@pytest.fixture
def sprites(closed_port: int) -> Sprites:
    config.configure(
        "sprites", base_url=f"http://127.0.0.1:{closed_port}", token=FAKE, timeout_ms=5000
    )
    return Sprites()


def test_sprites_rest_call_names_the_endpoint(sprites: Sprites, closed_port: int) -> None:
    with pytest.raises(Unavailable) as caught:
        sprites.create("box")
    _assert_names_endpoint(caught.value, closed_port)


def test_sprites_bounded_create_names_the_endpoint(sprites: Sprites, closed_port: int) -> None:
    with pytest.raises(Unavailable) as caught:
        sprites.create_new("box", timeout=5.0)
    _assert_names_endpoint(caught.value, closed_port, first="create_transport_failed")


def test_sprites_exec_websocket_names_the_endpoint(sprites: Sprites, closed_port: int) -> None:
    with pytest.raises(Unavailable) as caught:
        sprites.exec(sprites.build_handle("box"), "true", env={"SECRET": FAKE})
    _assert_names_endpoint(caught.value, closed_port)


# -- E2B: the control API, and envd behind a working control API -----------------------


def test_e2b_control_api_names_the_endpoint(closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}"
    config.configure("e2b", api_key=FAKE, base_url=url, sandbox_url=url, timeout_ms=5000)
    with pytest.raises(Unavailable) as caught:
        E2B().create("box")
    _assert_names_endpoint(caught.value, closed_port)


def test_e2b_envd_names_the_endpoint(closed_port: int) -> None:
    with E2BEmulator(credential=FAKE) as emulator:
        config.configure(
            "e2b",
            api_key=FAKE,
            base_url=emulator.base_url,
            sandbox_url=f"http://127.0.0.1:{closed_port}",
            timeout_ms=5000,
        )
        adapter = E2B()
        handle = adapter.create("box")
        try:
            with pytest.raises(Unavailable) as caught:
                adapter.exec(handle, "true")
        finally:
            adapter.destroy(handle)
    _assert_names_endpoint(caught.value, closed_port)


# -- Daytona: the control API, and the toolbox behind a working control API ------------


def _daytona() -> Daytona:
    return Daytona(timeouts=Timeouts(connect=5.0, api=5.0, toolbox=5.0), start_timeout=5.0)


def test_daytona_api_names_the_endpoint(closed_port: int) -> None:
    config.configure("daytona", api_key=FAKE, api_url=f"http://127.0.0.1:{closed_port}/api")
    with pytest.raises(Unavailable) as caught:
        _daytona().create("box")
    _assert_names_endpoint(caught.value, closed_port)


class _ClosedToolbox(DaytonaEmulator):
    """An emulator whose sandboxes name a toolbox proxy nothing listens on."""

    closed = ""

    @property
    def toolbox_url(self) -> str:
        return self.closed


@pytest.fixture
def closed_toolbox(closed_port: int) -> Iterator[DaytonaEmulator]:
    with cast(Any, _ClosedToolbox(credential=FAKE)) as emulator:
        emulator.closed = f"http://127.0.0.1:{closed_port}/toolbox"
        yield emulator


def test_daytona_toolbox_names_the_endpoint(
    closed_toolbox: DaytonaEmulator, closed_port: int
) -> None:
    config.configure("daytona", api_key=FAKE, api_url=closed_toolbox.api_url)
    adapter = _daytona()
    handle: Handle = adapter.create("box")
    try:
        with pytest.raises(Unavailable) as caught:
            adapter.exec(handle, "true")
    finally:
        adapter.destroy(handle)
    _assert_names_endpoint(caught.value, closed_port)


def test_daytona_termination_names_the_endpoint(
    closed_toolbox: DaytonaEmulator, closed_port: int
) -> None:
    config.configure("daytona", api_key=FAKE, api_url=closed_toolbox.api_url)
    adapter = _daytona()
    handle: Handle = adapter.create("box")
    try:
        with pytest.raises(Unavailable) as caught:
            adapter.terminate_session(handle, "session-1")
    finally:
        adapter.destroy(handle)
    _assert_names_endpoint(caught.value, closed_port, first=reasons.TERMINATION_TRANSPORT_FAILED)
