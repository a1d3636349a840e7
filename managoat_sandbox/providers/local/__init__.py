"""The ``local`` adapter: real processes on this machine, no account, no network.

See :mod:`.adapter` for what it promises and what isolation it does (not) give.
"""

from .adapter import Local

__all__ = ["Local"]
