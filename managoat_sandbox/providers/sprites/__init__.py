"""The ``sprites`` adapter: Sprites (sprites.dev, Fly.io) over REST and WebSocket.

See :mod:`.adapter` for what it promises and :mod:`.settings` for its configuration.
"""

from typing import TYPE_CHECKING

from .. import lazily

if TYPE_CHECKING:
    from .adapter import Sprites

__all__ = ["Sprites"]

__getattr__ = lazily(f"{__name__}.adapter", "Sprites")
