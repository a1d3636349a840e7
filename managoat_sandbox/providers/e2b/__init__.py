"""The ``e2b`` adapter: E2B sandboxes over plain HTTP (no E2B SDK, no gRPC).

See :mod:`.adapter` for what each operation does and what is not supported.
"""

from .adapter import E2B

__all__ = ["E2B"]
