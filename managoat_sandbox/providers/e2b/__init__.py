"""The ``e2b`` adapter: E2B sandboxes over plain HTTP (no E2B SDK, no gRPC).

See :mod:`.adapter` for what each operation does and what is not supported.
"""

from typing import TYPE_CHECKING

from .. import lazily

if TYPE_CHECKING:
    from .adapter import E2B

__all__ = ["E2B"]

__getattr__ = lazily(f"{__name__}.adapter", "E2B")
