"""Where the Deep Agents backend runs in these tests: ``local`` and the three emulators.

Each target is one session-scoped place — a ``local`` root, or a running emulator —
whose sandboxes live under the session's temporary directory; an emulator starts
only when a test asks for its target. The library's configuration is reset around
every test (``tests/conftest.py``), so a test points the library at its target
again (:attr:`Target.point`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from managoat_sandbox import config
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.emulators.sprites import SpritesEmulator

from ..canary import CANARY


@dataclass(frozen=True)
class Target:
    """A provider name, and how to point the library's configuration at the place."""

    provider: str
    point: Callable[[], None]


@pytest.fixture(scope="session")
def local_target(tmp_path_factory: pytest.TempPathFactory) -> Target:
    root = str(tmp_path_factory.mktemp("local-root"))
    return Target("local", lambda: config.configure("local", root=root))


@pytest.fixture(scope="session")
def sprites_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    workdir = tmp_path_factory.mktemp("sprites-emulator")
    with SpritesEmulator(credential=CANARY, workdir=workdir) as emulator:
        url = emulator.base_url
        yield Target("sprites", lambda: config.configure("sprites", base_url=url, token=CANARY))


@pytest.fixture(scope="session")
def e2b_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    workdir = tmp_path_factory.mktemp("e2b-emulator")
    with E2BEmulator(credential=CANARY, workdir=workdir) as emulator:
        url = emulator.base_url
        yield Target(
            "e2b",
            lambda: config.configure("e2b", api_key=CANARY, base_url=url, sandbox_url=url),
        )


@pytest.fixture(scope="session")
def daytona_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    workdir = tmp_path_factory.mktemp("daytona-emulator")
    with DaytonaEmulator(credential=CANARY, workdir=workdir) as emulator:
        url = emulator.api_url
        yield Target("daytona", lambda: config.configure("daytona", api_key=CANARY, api_url=url))


@pytest.fixture
def anyio_backend() -> str:
    """The standard suite's async tests (marked ``anyio``) run on asyncio."""
    return "asyncio"
