"""The ``local`` adapter: real processes on this machine, no account, no network.

See :mod:`.adapter` for what it promises and what isolation it does (not) give.
"""

from typing import TYPE_CHECKING

from .. import lazily

if TYPE_CHECKING:
    from .adapter import Local

__all__ = ["Local"]

__getattr__ = lazily(f"{__name__}.adapter", "Local")
