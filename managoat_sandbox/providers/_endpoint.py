"""The endpoint a hosted adapter's handle was made against, carried in ``Handle.private``.

A hosted sandbox (Sprites, E2B, Daytona) is found by name at the control plane
the configuration names *when an operation runs*. A handle made under
``config.override(scope, base_url=A)`` and used after the block would otherwise
go to another endpoint — where the name is absent (``destroy`` then reports
success while the sandbox runs on at ``A``) or names another sandbox. So
``create``, ``create_new``, ``resume`` and ``build_handle`` return handles that
carry the endpoint (scheme, host, port and path: never a credential, userinfo or
query), and every operation on a handle whose endpoint is not the configured one
is ``Invalid(("handle", "endpoint_changed"))`` before any request.

It fails rather than follow the handle: the credential configured now is the one
for the endpoint configured now, and a handle carries none. A handle rebuilt from
a name alone (``private`` None) uses whatever is configured. The credential is
not part of what a handle carries: the same endpoint with another credential
reaches the sandbox of that name in the account the credential opens.

``Handle.private`` is the :class:`Endpoint` itself (Sprites, Daytona), or a value
of the adapter's own whose ``endpoint`` attribute is one (E2B, which keeps the
sandbox id beside it).
"""

from __future__ import annotations

import attrs

from .._secrets import safe_url
from ..errors import Invalid
from ..reasons import Reason
from ..types import Handle

__all__ = ["Endpoint", "carried_by", "carrying", "check"]


@attrs.frozen
class Endpoint:
    """What a hosted adapter's ``Handle.private`` holds: the control plane's URL, as
    :func:`~managoat_sandbox._secrets.safe_url` shows it (no userinfo, query or fragment)."""

    url: str

    @classmethod
    def of(cls, base_url: str) -> Endpoint:
        """The endpoint of ``base_url``, its credentials left out."""
        return cls(safe_url(base_url))


def carried_by(handle: Handle) -> Endpoint | None:
    """The endpoint ``handle`` carries: its ``private`` when that is an :class:`Endpoint`,
    else the ``endpoint`` attribute of its ``private`` when that is one, else ``None``."""
    private = handle.private
    if isinstance(private, Endpoint):
        return private
    inner = getattr(private, "endpoint", None)
    return inner if isinstance(inner, Endpoint) else None


def carrying(handle: Handle, base_url: str) -> Handle:
    """``handle`` carrying ``base_url`` (the endpoint the adapter just used for it)."""
    return attrs.evolve(handle, private=Endpoint.of(base_url))


def check(handle: Handle, base_url: str) -> None:
    """Return when ``handle`` carries no endpoint or ``base_url`` (the one configured
    now); else ``Invalid(("handle", "endpoint_changed"))``, whose message names both
    endpoints (without credentials) and what to do."""
    carried = carried_by(handle)
    if carried is None or carried.url == base_url:
        return
    now = safe_url(base_url)
    if carried.url != now:
        raise Invalid(
            Reason.HANDLE,
            problem="endpoint_changed",
            message=(
                f"the {handle.provider} handle of {handle.name!r} was made against "
                f"{carried.url}, but the configuration now names {now}: restore the "
                "configuration the handle was made under, or rebuild the handle "
                "(build_handle) to use the endpoint configured now"
            ),
        )
