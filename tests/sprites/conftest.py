"""Sprites test fixtures: one emulator per module, the adapter pointed at it per test."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import responses

from managoat_sandbox import config
from managoat_sandbox.emulators.sprites import SpritesEmulator
from managoat_sandbox.providers.sprites import Sprites

from ..canary import CANARY
from ..conftest import wait_until
from . import wire

TOKEN = CANARY


@pytest.fixture(scope="module")
def emulator() -> Iterator[SpritesEmulator]:
    """A Sprites emulator shared by one test module (faults and log cleared per test)."""
    server = SpritesEmulator(credential=TOKEN)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def emu(emulator: SpritesEmulator) -> Iterator[SpritesEmulator]:
    """The module's emulator with no pending fault and an empty request log."""
    emulator.faults.clear()
    emulator.clear_requests()
    yield emulator
    emulator.faults.clear()


@pytest.fixture
def sprites(emu: SpritesEmulator) -> Sprites:
    """An adapter configured for the emulator, with a fast keepalive."""
    config.configure("sprites", base_url=emu.base_url, token=TOKEN)
    return Sprites(keepalive=0.5)


@pytest.fixture
def no_leaked_threads() -> Iterator[None]:
    """Fail the test if threads it started outlive it (bounded wait)."""
    baseline = {thread.ident for thread in threading.enumerate()}
    yield

    def extra() -> list[str]:
        return [t.name for t in threading.enumerate() if t.ident not in baseline and t.is_alive()]

    assert wait_until(lambda: not extra(), timeout=10), f"threads leaked: {extra()}"


@pytest.fixture
def api() -> Iterator[responses.RequestsMock]:
    """A strict mock of the Sprites API at ``wire.BASE``; unregistered requests fail."""
    config.configure("sprites", base_url=wire.BASE, token=wire.TOKEN)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


@pytest.fixture
def adapter() -> Sprites:
    """A default adapter (for the mocked API)."""
    return Sprites()
