"""What an E2B ``Handle.private`` holds: the endpoint the handle was made against and
the sandbox id it resolved to.

The endpoint (``base_url``, without credentials) makes a handle used after
``config.override`` changed ``base_url`` fail with
``Invalid(("handle", "endpoint_changed"))`` instead of reaching another control
plane (see :mod:`managoat_sandbox.providers._endpoint`). The sandbox id is
information only: every operation finds the sandbox by name. Neither is a secret.
"""

from __future__ import annotations

import attrs

from .._endpoint import Endpoint

__all__ = ["Carried"]


@attrs.frozen
class Carried:
    """``endpoint``: where the handle was made; ``sandbox_id``: the sandbox ``create``
    or ``resume`` resolved the name to (``None`` for a handle from ``build_handle``)."""

    endpoint: Endpoint
    sandbox_id: str | None = None

    @classmethod
    def of(cls, base_url: str, sandbox_id: str | None = None) -> Carried:
        """The value for a handle made against ``base_url`` (credentials left out)."""
        return cls(Endpoint.of(base_url), sandbox_id)
