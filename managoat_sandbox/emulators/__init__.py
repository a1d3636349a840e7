"""Local, protocol-faithful emulators of the hosted providers (Sprites, E2B, Daytona).

Each emulator serves one provider's wire protocol on 127.0.0.1, runs the
requested commands as real processes through the shared process engine, keeps
a request log, and takes injected faults. They are written from the protocol
notes (docs/protocols/README.md), never from our adapters (they must not import them), so that an
adapter's misunderstanding shows up as a failing test instead of being
mirrored. From Python, each is a context manager::

    with SpritesEmulator() as emulator:
        config.configure("sprites", base_url=emulator.base_url, token=emulator.credential)

From a shell: ``python -m managoat_sandbox.emulators sprites --port 8080``.
Needs the ``emulators`` extra (aiohttp, google-re2). The names below are
imported on first use, so that importing this package (as ``python -m`` does
before its ``__main__`` runs) works without the extra, and the command line can
say what is missing instead of failing with a traceback. Without the extra,
importing an emulator (``managoat_sandbox.emulators.daytona``…) or one of the
names below raises :class:`MissingExtraError`, a ``ModuleNotFoundError`` whose
one-line message is :data:`MISSING_EXTRA`. Every emulator requires a
credential (a random one when none is given) and answers only Host names that
are its own; see docs/emulators.md for the security model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._server import Emulator, Fault, Faults, LoggedRequest

__all__ = [
    "MISSING_EXTRA",
    "Emulator",
    "Fault",
    "Faults",
    "LoggedRequest",
    "MissingExtraError",
    "require_extra",
]

#: What to do when the ``emulators`` extra is not installed: one line, naming it.
MISSING_EXTRA = (
    "the emulators need the 'emulators' extra: pip install 'managoat_sandbox[emulators]'"
)
#: The top-level modules the ``emulators`` extra installs (aiohttp, google-re2).
_EXTRA_MODULES = ("aiohttp", "re2")
_SERVER_NAMES = ("Emulator", "Fault", "Faults", "LoggedRequest")


class MissingExtraError(ModuleNotFoundError):
    """A module of the ``emulators`` extra cannot be imported.

    Its message is :data:`MISSING_EXTRA`; ``name`` is the missing module's and
    the original ``ModuleNotFoundError`` is its ``__cause__``.
    """


def require_extra() -> None:
    """Import the ``emulators`` extra's modules; :class:`MissingExtraError` if one of
    them is not installed. Every emulator package calls this before importing
    anything of its own. A module missing *inside* one of them (a broken install)
    is not the extra's absence: its own ``ModuleNotFoundError`` propagates."""
    for module in _EXTRA_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name is None or error.name.partition(".")[0] != module:
                raise
            raise MissingExtraError(MISSING_EXTRA, name=error.name) from error


def __getattr__(name: str) -> Any:
    """The server's public names, importing it (and the extra) on first use."""
    if name in _SERVER_NAMES:
        require_extra()
        return getattr(importlib.import_module("._server", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
