"""The one way a provider reads and validates its settings.

Each hosted adapter reads its config scope at call time through a
:class:`ProviderSettings`, so every provider reports the same problems the
same way:

* a missing credential is ``Denied``, raised before any request, naming the
  setting and its environment variable, never a value;
* a base URL that is not ``http(s)://host…`` is ``Invalid(("config", scope, key))``;
* a duration that is not a positive number of milliseconds is
  ``Invalid(("config", scope, key))``.
"""

from __future__ import annotations

import math
from urllib.parse import urlsplit

import attrs

from . import config
from .errors import Denied, Invalid

__all__ = ["ProviderSettings"]


@attrs.frozen
class ProviderSettings:
    """Reads of config scope ``scope``; ``label`` names the provider in messages."""

    scope: str
    label: str

    def _invalid(self, key: str) -> Invalid:
        return Invalid(("config", self.scope, key))

    def credential(self, key: str) -> str:
        """The credential ``key``; ``Denied`` naming the setting and its environment
        variable (never a value) when it is missing or empty."""
        value = config.get(self.scope, key)
        if isinstance(value, str) and value:
            return value
        env = config.ENV_VARS.get((self.scope, key))
        where = f" or set the {env} environment variable" if env else ""
        raise Denied(
            f"no {self.label} credential: configure the '{self.scope}' setting '{key}'{where}"
        )

    def text(self, key: str) -> str:
        """Setting ``key`` as text (``Invalid`` when it is unset)."""
        value = config.get(self.scope, key)
        if value is None:
            raise self._invalid(key)
        return str(value)

    def optional_text(self, key: str) -> str | None:
        """Setting ``key`` as text, or ``None`` when it is unset or empty."""
        value = config.get(self.scope, key)
        return str(value) if value not in (None, "") else None

    def flag(self, key: str, default: bool) -> bool:
        """Setting ``key`` when it is a bool, else ``default``."""
        value = config.get(self.scope, key)
        return value if isinstance(value, bool) else default

    def url(self, key: str) -> str:
        """Setting ``key`` as an ``http(s)`` URL naming a host, without a trailing slash."""
        value = config.get(self.scope, key)
        if not isinstance(value, str):
            raise self._invalid(key)
        parts = urlsplit(value)
        if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
            raise self._invalid(key)
        return value.rstrip("/")

    def optional_url(self, key: str) -> str | None:
        """Like :meth:`url`, but ``None`` when the setting is unset or empty."""
        if config.get(self.scope, key) in (None, ""):
            return None
        return self.url(key)

    def seconds(self, key: str) -> float:
        """Setting ``key``, a positive number of milliseconds (a number or its decimal
        text), in seconds."""
        value = config.get(self.scope, key)
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise self._invalid(key) from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._invalid(key)
        if math.isnan(value) or math.isinf(value) or value <= 0:
            raise self._invalid(key)
        return float(value) / 1000
