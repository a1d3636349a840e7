"""The ``daytona`` adapter: Daytona sandboxes (daytona.io or self-hosted).

See :mod:`.adapter` for the rules it keeps.
"""

from typing import TYPE_CHECKING

from .. import lazily

if TYPE_CHECKING:
    from .adapter import Daytona

__all__ = ["Daytona"]

__getattr__ = lazily(f"{__name__}.adapter", "Daytona")
