"""Fixtures for the Daytona adapter's tests: ``responses`` mocks for the wire contract, and
one emulator per test module for the tests through the real protocol."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, cast

import pytest
import responses

from managoat_sandbox import config
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.providers.daytona.stream import FollowPolicy

from ..canary import CANARY
from ..conftest import wait_until
from . import emulated

API = "https://api.test/api"
PROXY = "https://proxy.test/toolbox"
TOOLBOX = f"{PROXY}/sbx-1"
KEY = CANARY

FAST = FollowPolicy(
    min_interval=0.01,
    max_interval=0.02,
    probe_after=0.05,
    max_probe_interval=0.1,
    unreachable_after=0.5,
    read_timeout=5.0,
)


def sandbox(name: str = "box", state: str = "started", **extra: Any) -> dict[str, Any]:
    """A Sandbox answer with the fields the adapter reads."""
    return {
        "id": "sbx-1",
        "name": name,
        "state": state,
        "toolboxProxyUrl": PROXY + "/",
        "labels": {"managoat": "1"},
        **extra,
    }


@pytest.fixture
def mocked() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


@pytest.fixture
def daytona() -> Iterator[Daytona]:
    config.configure("daytona", api_key=KEY, api_url=API)
    baseline = threading.active_count()
    yield Daytona(follow=FAST, start_timeout=2.0, max_pages=5)
    assert wait_until(lambda: threading.active_count() <= baseline, 5), "a reader thread leaked"


@pytest.fixture(scope="module")
def emulator() -> Iterator[DaytonaEmulator]:
    """A Daytona emulator shared by one test module, accepting the emulated API key."""
    with cast(DaytonaEmulator, DaytonaEmulator(credential=emulated.KEY)) as emu:
        yield emu
