"""The ``sprites`` adapter: Sprites (sprites.dev, Fly.io) over REST and WebSocket.

See :mod:`.adapter` for what it promises and :mod:`.settings` for its configuration.
"""

from .adapter import Sprites

__all__ = ["Sprites"]
