"""The plugin's fixtures (see the package docstring for their contracts)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from .. import config
from .._temporary import temporary
from ..facade import supports
from ..types import Handle
from ._choices import MARKER, chosen, emulated_provider, required_capabilities, sandbox_prefix
from ._emulated import EmulatorFixture, pointed_at, serving

if TYPE_CHECKING:
    from ..emulators.daytona import DaytonaEmulator
    from ..emulators.e2b import E2BEmulator
    from ..emulators.sprites import SpritesEmulator
    from ..testing.fake import Fake

__all__ = [
    "daytona_emulator",
    "e2b_emulator",
    "managoat_sandbox_daytona_server",
    "managoat_sandbox_e2b_server",
    "managoat_sandbox_fake",
    "managoat_sandbox_sprites_server",
    "sandbox",
    "sandbox_provider",
    "sprites_emulator",
]


@pytest.fixture(scope="session", name="_managoat_sandbox_fake")
def managoat_sandbox_fake() -> Fake:
    """The session's one ``Fake``, made when a test first runs on ``fake``."""
    from ..testing.fake import Fake  # noqa: PLC0415 - only when used

    return Fake()


@pytest.fixture(scope="session", name="_managoat_sandbox_e2b_server")
def managoat_sandbox_e2b_server() -> Iterator[Any]:
    """The session's E2B emulator, started on first use, stopped at session end."""
    with serving("e2b") as emulator:
        yield emulator


@pytest.fixture(scope="session", name="_managoat_sandbox_daytona_server")
def managoat_sandbox_daytona_server() -> Iterator[Any]:
    """The session's Daytona emulator, started on first use, stopped at session end."""
    with serving("daytona") as emulator:
        yield emulator


@pytest.fixture(scope="session", name="_managoat_sandbox_sprites_server")
def managoat_sandbox_sprites_server() -> Iterator[Any]:
    """The session's Sprites emulator, started on first use, stopped at session end."""
    with serving("sprites") as emulator:
        yield emulator


@pytest.fixture
def e2b_emulator(
    _managoat_sandbox_e2b_server: E2BEmulator,
) -> Iterator[EmulatorFixture[E2BEmulator]]:
    """The session's E2B emulator, with config scope ``e2b`` pointed at it for this test."""
    with pointed_at("e2b", _managoat_sandbox_e2b_server) as running:
        yield running


@pytest.fixture
def daytona_emulator(
    _managoat_sandbox_daytona_server: DaytonaEmulator,
) -> Iterator[EmulatorFixture[DaytonaEmulator]]:
    """The session's Daytona emulator, with config scope ``daytona`` pointed at it for this
    test."""
    with pointed_at("daytona", _managoat_sandbox_daytona_server) as running:
        yield running


@pytest.fixture
def sprites_emulator(
    _managoat_sandbox_sprites_server: SpritesEmulator,
) -> Iterator[EmulatorFixture[SpritesEmulator]]:
    """The session's Sprites emulator, with config scope ``sprites`` pointed at it for this
    test."""
    with pointed_at("sprites", _managoat_sandbox_sprites_server) as running:
        yield running


def _explicit_adapters() -> dict[str, Any]:
    """The explicit adapter map configured now (``config.configure(adapters=...)``)."""
    return dict(config.snapshot().get(None, {}).get("adapters") or {})


@pytest.fixture
def sandbox_provider(request: pytest.FixtureRequest) -> Iterator[str]:
    """The provider name the library uses for this test, set up for the test's duration.

    The test is parametrized with the chosen providers (``--sandbox-provider``); for
    ``fake`` the session's ``Fake`` is put in the adapter map, for ``<name>-emulator``
    the library is pointed at the session's emulator (the name is then the adapter's,
    ``e2b``…); what was configured before is restored afterwards. A capability named
    by ``sandbox_requires`` that the provider does not advertise skips the test. Not
    parametrized (another fixture asked for it by name), it is the first chosen provider.
    """
    choice: str = getattr(request, "param", None) or chosen(request.config)[0]
    with contextlib.ExitStack() as stack:
        emulated = emulated_provider(choice)
        if emulated is not None:
            request.getfixturevalue(f"{emulated}_emulator")
        elif choice == "fake":
            fake = request.getfixturevalue("_managoat_sandbox_fake")
            stack.enter_context(config.override(adapters={**_explicit_adapters(), "fake": fake}))
        provider = emulated or choice
        for capability in required_capabilities(request.node.iter_markers(MARKER)):
            if not supports(provider, capability):
                pytest.skip(f"{choice!r} does not advertise the capability {capability!r}")
        yield provider


@pytest.fixture
def sandbox(sandbox_provider: str, request: pytest.FixtureRequest) -> Iterator[Handle]:
    """A fresh sandbox at ``sandbox_provider``, named after the test plus random hex
    (``managoat_sandbox.temporary``: never an existing sandbox adopted), destroyed after
    the test — passed, failed or interrupted."""
    name = getattr(request.node, "originalname", None) or request.node.name
    with temporary(sandbox_provider, prefix=sandbox_prefix(name)) as handle:
        yield handle
