"""The pytest plugin: sandboxes, providers and emulators as fixtures (docs/testing.md).

Registered through the ``pytest11`` entry point, it is inert until used: loading
it registers the option ``--sandbox-provider`` (and the ini option
``sandbox_providers``) and the marker ``sandbox_requires``, and does nothing else —
it configures nothing, starts nothing, and imports no adapter or emulator. A
fixture does that work when a test asks for it.

* ``--sandbox-provider NAME`` (repeatable): the providers a test that uses
  ``sandbox`` or ``sandbox_provider`` runs on, once each, the name in its id
  (``test_x[local]``). ``local`` by default; ``fake``; ``e2b-emulator``,
  ``daytona-emulator``, ``sprites-emulator``; or any provider name the registry
  resolves (``e2b``…, configured from the environment as ever). An unknown name
  is a usage error naming the choices.
* ``sandbox_provider``: the provider name the library uses for the test (see
  :func:`~._fixtures.sandbox_provider`).
* ``sandbox``: a ``Handle`` to a fresh sandbox made for the test, destroyed after
  it, also when it fails or is interrupted.
* ``e2b_emulator``, ``daytona_emulator``, ``sprites_emulator``: an
  :class:`EmulatorFixture` for an emulator started once per session (on first
  use, on a free loopback port, with a random credential) and stopped at its
  end; the library is configured for it during each test that asks for it.
* ``@pytest.mark.sandbox_requires("attach", ...)``: skip the test on a provider
  that does not advertise one of these capabilities; an unknown capability fails
  collection.

Configuration is process-global, so tests using these fixtures must run one at
a time within a process (as with ``config.override``).
"""

from __future__ import annotations

import pytest

from ._choices import CHOICES, DEFAULT, INI, MARKER, OPTION, check_marker, chosen
from ._emulated import EmulatorFixture
from ._fixtures import (
    daytona_emulator,
    e2b_emulator,
    managoat_sandbox_daytona_server,
    managoat_sandbox_e2b_server,
    managoat_sandbox_fake,
    managoat_sandbox_sprites_server,
    sandbox,
    sandbox_provider,
    sprites_emulator,
)

__all__ = [
    "EmulatorFixture",
    "daytona_emulator",
    "e2b_emulator",
    "managoat_sandbox_daytona_server",
    "managoat_sandbox_e2b_server",
    "managoat_sandbox_fake",
    "managoat_sandbox_sprites_server",
    "pytest_addoption",
    "pytest_configure",
    "pytest_generate_tests",
    "sandbox",
    "sandbox_provider",
    "sprites_emulator",
]

_CHOSEN = pytest.StashKey[list[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--sandbox-provider`` and the ini option ``sandbox_providers``."""
    group = parser.getgroup("managoat_sandbox", "sandboxes (managoat_sandbox)")
    choices = ", ".join(CHOICES)
    group.addoption(
        OPTION,
        action="append",
        dest="sandbox_providers",
        metavar="NAME",
        help=f"run sandbox tests on NAME (repeatable; default {DEFAULT}): {choices}, "
        "or a provider name configured from the environment",
    )
    parser.addini(
        INI,
        type="args",
        default=[],
        help=f"providers sandbox tests run on when {OPTION} is not given",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker; check the providers chosen (a ``UsageError`` names the
    choices when one is unknown)."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*capabilities): skip the test on a provider that does not "
        "advertise every one of these capabilities",
    )
    config.stash[_CHOSEN] = chosen(config)


def _pinned(metafunc: pytest.Metafunc) -> bool:
    """Whether the test parametrizes ``sandbox_provider`` itself."""
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(names, str):
            names = names.split(",")
        if "sandbox_provider" in (name.strip() for name in names):
            return True
    return False


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each test that uses ``sandbox_provider`` (``sandbox`` does) once per chosen
    provider, unless it parametrizes ``sandbox_provider`` itself; check its
    ``sandbox_requires`` markers."""
    uses_provider = "sandbox_provider" in metafunc.fixturenames
    check_marker(metafunc.definition, uses_provider)
    if uses_provider and not _pinned(metafunc):
        providers = metafunc.config.stash[_CHOSEN]
        metafunc.parametrize("sandbox_provider", providers, indirect=True, ids=providers)
