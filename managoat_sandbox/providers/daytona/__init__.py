"""The ``daytona`` adapter: Daytona sandboxes (daytona.io or self-hosted).

See :mod:`.adapter` for the rules it keeps.
"""

from .adapter import Daytona

__all__ = ["Daytona"]
