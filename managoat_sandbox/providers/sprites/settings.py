"""The Sprites adapter's settings, read from config scope ``sprites`` at call time.

Keys (declared in :mod:`.declaration`; docs/protocols/sprites.md#configuration):
``token`` (``$SPRITES_TOKEN``), ``base_url`` (``$SPRITES_BASE_URL``, else
``https://api.sprites.dev``), ``timeout_ms``, ``policy_timeout_ms``,
``public_urls``, ``checkpoint_creation_enabled``. A
missing token is ``Denied`` naming the setting and its environment variable,
raised before any request. The token never appears in a ``repr``.
"""

from __future__ import annotations

import re
from urllib.parse import quote

import attrs

from ..._settings import ProviderSettings
from ...errors import Invalid
from ...reasons import Reason
from .declaration import DECLARATION

__all__ = [
    "SCOPE",
    "USER_AGENT",
    "Settings",
    "check_name",
    "checkpoints_enabled",
    "load",
    "segment",
]

SCOPE = DECLARATION.name
#: What every request and WebSocket handshake of the adapter names itself.
USER_AGENT = "managoat_sandbox-sprites"
SETTINGS = ProviderSettings(DECLARATION.name, DECLARATION.label)

#: Sprite names appear in the public hostname ``<name>-<org>.sprites.app``, so
#: they must be DNS-label safe: lowercase letters, digits and inner hyphens.
_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


def check_name(name: object) -> str:
    """A sprite name: 1-63 of ``[a-z0-9-]``, starting and ending alphanumeric; else ``Invalid``."""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise Invalid(
            Reason.SPRITE_NAME, problem="must be 1-63 lowercase letters, digits or inner hyphens"
        )
    return name


def segment(value: str) -> str:
    """``value`` percent-encoded as one URL path segment (RFC 3986 unreserved kept)."""
    return quote(value, safe="")


def checkpoints_enabled() -> bool:
    """Config ``checkpoint_creation_enabled`` (default off); read without touching the token."""
    return SETTINGS.flag("checkpoint_creation_enabled", False)


@attrs.frozen
class Settings:
    """One call's view of the configuration; ``token`` is kept out of ``repr``."""

    token: str = attrs.field(repr=False)
    base_url: str
    timeout: float
    policy_timeout: float
    public_urls: bool

    @property
    def headers(self) -> dict[str, str]:
        """The headers of every request and handshake: the credential and
        :data:`USER_AGENT` (also on the bounded ones and the WebSockets, which do
        not go through the pooled client)."""
        return {"Authorization": f"Bearer {self.token}", "User-Agent": USER_AGENT}

    def url(self, path: str) -> str:
        """The HTTP URL of an API path such as ``/v1/sprites``."""
        return self.base_url + path

    def ws_url(self, path: str) -> str:
        """The WebSocket URL of an API path (``http`` → ``ws``, ``https`` → ``wss``)."""
        return "ws" + self.url(path)[len("http") :]


def load() -> Settings:
    """The current settings; ``Denied`` when no token is configured, before any request
    (:class:`~..._settings.ProviderSettings` reports every provider's settings alike)."""
    return Settings(
        token=SETTINGS.credential("token"),
        base_url=SETTINGS.url("base_url"),
        timeout=SETTINGS.seconds("timeout_ms"),
        policy_timeout=SETTINGS.seconds("policy_timeout_ms"),
        public_urls=SETTINGS.flag("public_urls", True),
    )
