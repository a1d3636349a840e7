"""The Daytona adapter's settings (declared in :mod:`.declaration`), read from config scope
``daytona`` at call time.

``api_key`` (``$DAYTONA_API_KEY``), ``api_url`` (``$DAYTONA_API_URL``, else
``https://app.daytona.io/api``; a self-hosted Daytona is ``<origin>/api``: a
URL whose path does not end in ``/api`` is ``Invalid`` before any request, as
every call to it would answer 404), ``snapshot`` and ``organization_id``. A
missing key is ``Denied`` naming ``DAYTONA_API_KEY``, raised before any
request (:class:`~..._settings.ProviderSettings`, as for every provider). Every
request carries ``Authorization: Bearer <key>`` and, when configured,
``X-Daytona-Organization-ID``; the key lives only in those headers.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from ..._secrets import safe_url
from ..._settings import ProviderSettings
from ...errors import Invalid
from ...reasons import Reason
from .declaration import DECLARATION

__all__ = ["PROVIDER", "SETTINGS", "api_url", "auth_headers"]

PROVIDER = DECLARATION.name
SETTINGS = ProviderSettings(DECLARATION.name, DECLARATION.label)


def api_url() -> str:
    """The API base, without a trailing slash (``Invalid`` when it does not end in
    ``/api``, saying what to set it to)."""
    url = SETTINGS.url("api_url")
    if not urlsplit(url).path.endswith("/api"):
        shown = safe_url(url)
        raise Invalid(
            Reason.CONFIG,
            scope=SETTINGS.scope,
            key="api_url",
            message=f"daytona api_url {shown} is not the control plane's base, "
            "whose path ends in /api (like https://app.daytona.io/api): set daytona "
            f"api_url or the DAYTONA_API_URL environment variable to {shown}/api",
        )
    return url


def auth_headers(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The headers of every request: auth (``Denied`` before any request when no key is
    configured), the organization when one is, then ``extra``."""
    headers = {"Authorization": f"Bearer {SETTINGS.credential('api_key')}"}
    organization = SETTINGS.optional_text("organization_id")
    if organization:
        headers["X-Daytona-Organization-ID"] = str(organization)
    if extra:
        headers.update(extra)
    return headers
