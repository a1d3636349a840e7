"""The emulator fixtures' parts: starting one emulator, and what a test is handed.

An emulator is started with a credential made for it (never one read from the
environment, which may hold a real provider's key) on a free loopback port.
The emulator packages (and aiohttp under them) are imported only when a fixture
asks for an emulator, never when this module is.
"""

from __future__ import annotations

import contextlib
import importlib
import secrets
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Generic, TypeVar

import attrs
import pytest

from .. import config

if TYPE_CHECKING:
    from ..emulators import Emulator

__all__ = ["EMULATED", "EmulatorFixture", "pointed_at", "serving"]

E = TypeVar("E", bound="Emulator")


@attrs.frozen
class EmulatorFixture(Generic[E]):
    """What an emulator fixture (``e2b_emulator``…) hands a test.

    ``provider`` is the adapter's name (``"e2b"``); ``url`` the address the vendor's
    SDK is given (Daytona's ``api_url``, ending in ``/api``; the others' base URL);
    ``base_url`` the emulator's ``http://127.0.0.1:<port>``; ``credential`` the only
    API key or token it accepts; ``settings`` the config scope ``provider`` as the
    fixture sets it for the test; ``env`` the environment variables that point the
    vendor SDK, and this library in a child process, at the emulator; ``emulator``
    the running emulator (request log, faults, the provider's own helpers).
    """

    provider: str
    url: str
    base_url: str
    credential: str
    settings: Mapping[str, str]
    env: Mapping[str, str]
    emulator: E


#: Where each emulator class lives: (module, class name).
_CLASSES = {
    "e2b": ("managoat_sandbox.emulators.e2b", "E2BEmulator"),
    "daytona": ("managoat_sandbox.emulators.daytona", "DaytonaEmulator"),
    "sprites": ("managoat_sandbox.emulators.sprites", "SpritesEmulator"),
}
#: The providers with an emulator: the adapter's name, which is also the config scope.
EMULATED = tuple(_CLASSES)


def _emulator_class(provider: str) -> type[Emulator]:
    """The emulator class for ``provider``, imported now; ``pytest.fail`` with the one
    line naming the ``emulators`` extra when it is not installed."""
    from ..emulators import MissingExtraError, require_extra  # noqa: PLC0415 - only when used

    try:
        require_extra()
    except MissingExtraError as error:
        missing: str | None = str(error)
    else:
        missing = None
    if missing is not None:  # failed out here, so that no chained traceback is shown
        pytest.fail(missing, pytrace=False)
    module, name = _CLASSES[provider]
    emulator_class: type[Emulator] = getattr(importlib.import_module(module), name)
    return emulator_class


@contextlib.contextmanager
def serving(provider: str) -> Iterator[Emulator]:
    """A started emulator of ``provider`` (one of :data:`EMULATED`) with a fresh random
    credential, stopped — its processes ended, its workdir removed — when the block ends."""
    emulator = _emulator_class(provider)(credential=f"emu_{secrets.token_hex(16)}")
    emulator.start()
    try:
        yield emulator
    finally:
        emulator.stop()


def _wiring(provider: str, emulator: Emulator) -> tuple[str, dict[str, str], dict[str, str]]:
    """``(url, settings, env)`` for ``provider``'s emulator (see :class:`EmulatorFixture`).

    The variables are each vendor SDK's (docs/protocols/e2b.md#pointing-the-sdk-here;
    the Daytona SDK reads ``DAYTONA_API_KEY`` and ``DAYTONA_API_URL``; sprites-py reads
    none, taking the token and ``base_url`` as arguments) and this library's
    (``config.ENV_VARS``).
    """
    base, key = emulator.base_url, emulator.credential
    if provider == "e2b":
        settings = {"api_key": key, "base_url": base, "sandbox_url": base}
        vendor = {
            "E2B_API_URL": base,
            "E2B_DEBUG": "false",
            "E2B_HTTP_VERSION": "1.1",
        }
        url = base
    elif provider == "daytona":
        url = f"{base}/api"
        settings = {"api_key": key, "api_url": url}
        vendor = {}
    else:
        settings = {"token": key, "base_url": base}
        vendor = {}
        url = base
    ours = {config.ENV_VARS[(provider, name)]: value for name, value in settings.items()}
    return url, settings, {**ours, **vendor}


@contextlib.contextmanager
def pointed_at(provider: str, emulator: E) -> Iterator[EmulatorFixture[E]]:
    """The library configured (``config.override``) for ``emulator`` during the block,
    its pending faults dropped on entry and exit and its request log cleared on entry;
    what was configured before is restored afterwards."""
    url, settings, env = _wiring(provider, emulator)
    emulator.faults.clear()
    emulator.clear_requests()
    try:
        with config.override(provider, **settings):
            yield EmulatorFixture(
                provider=provider,
                url=url,
                base_url=emulator.base_url,
                credential=emulator.credential,
                settings=settings,
                env=env,
                emulator=emulator,
            )
    finally:
        emulator.faults.clear()
