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
Needs the ``emulators`` extra (aiohttp). The names below are imported on first
use, so that importing this package (as ``python -m`` does before its
``__main__`` runs) works without the extra, and the command line can say what
is missing instead of failing with a traceback. Every emulator requires a
credential (a random one when none is given) and answers only Host names that
are its own; see docs/emulators.md for the security model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._server import Emulator, Fault, Faults, LoggedRequest

__all__ = ["Emulator", "Fault", "Faults", "LoggedRequest"]


def __getattr__(name: str) -> Any:
    """The server's public names, importing it (and aiohttp) on first use."""
    if name in __all__:
        return getattr(importlib.import_module("._server", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
