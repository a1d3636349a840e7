"""The Sprites emulator (``python -m managoat_sandbox.emulators sprites``).

Modules: :mod:`.emulator` (the server class and its fault API), :mod:`.rest`
(sprites, listing, policy, checkpoints), :mod:`.files` (the filesystem
routes: write, streamed read, list), :mod:`.exec_ws` (exec and
attach over WebSocket, sessions, kill), :mod:`.state` (what is remembered:
each sprite is one process-engine box), :mod:`.aio` (bridging the event loop
to the engine), :mod:`.network` (network policies as egress allow-lists), :mod:`.wire`
(shared shapes), :mod:`.behaviour` (switches between documented variants).
"""

from .. import require_extra

require_extra()

from .emulator import SpritesEmulator  # noqa: E402 - only once the extra is known to be there

__all__ = ["SpritesEmulator"]
