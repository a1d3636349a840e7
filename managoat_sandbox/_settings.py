"""The one way the library reads and validates its settings.

:func:`read` is the effective value of a setting (:func:`config.get
<managoat_sandbox.config.get>`) checked by the setting's rule
(:mod:`managoat_sandbox._setting_rules`) — the same rule ``configure`` applied,
now also to what came from an environment variable. Each hosted adapter reads
its config scope at call time through a :class:`ProviderSettings`, so every
provider reports the same problems the same way:

* a missing credential is ``Denied(("no_credential", scope, key))``, raised
  before any request, its message naming the setting and its environment
  variable, never a value;
* a setting its rule refuses (a base URL that is not ``http(s)://host…``, a
  duration that is not a positive number of milliseconds, ...), or a required
  one that is unset, is ``Invalid(("config", scope, key))``.
"""

from __future__ import annotations

from typing import Any

import attrs

from . import config
from ._setting_rules import check
from .errors import Denied, Invalid
from .reasons import Reason

__all__ = ["ProviderSettings", "read"]


#: The types of value whose check :func:`read` remembers: immutable, so the same value
#: read again is normalised to the same result.
_SETTLED_TYPES = frozenset({str, int, float, bool})

#: (scope, key) → the last value :func:`read` found for it and what its rule made of it.
_last_checked: dict[tuple[str | None, str], tuple[Any, Any]] = {}


def read(scope: str | None, key: str) -> Any:
    """Setting ``key`` of ``scope`` now, normalised by its rule (``None`` when unset);
    a value the rule refuses is ``Invalid(("config", scope, key))``.

    The value is read at every call; a value of an immutable type equal (and of the
    same type) to the one read last time for the setting is not checked again: its
    rule, a pure function, would normalise it the same way. A refused value is
    checked (and refused) every time.
    """
    value = config.get(scope, key)
    kind = type(value)
    if kind not in _SETTLED_TYPES:
        return check(scope, key, value)
    last = _last_checked.get((scope, key))
    if last is not None and type(last[0]) is kind and last[0] == value:
        return last[1]
    normalised = check(scope, key, value)
    _last_checked[(scope, key)] = (value, normalised)
    return normalised


@attrs.frozen
class ProviderSettings:
    """Reads of config scope ``scope``; ``label`` names the provider in messages."""

    scope: str
    label: str

    def _invalid(self, key: str) -> Invalid:
        return Invalid(
            Reason.CONFIG, scope=self.scope, key=key, message=f"{self.scope}.{key} is not set"
        )

    def value(self, key: str) -> Any:
        """Setting ``key``, normalised by its rule (``Invalid`` when it is unset)."""
        value = read(self.scope, key)
        if value is None:
            raise self._invalid(key)
        return value

    def optional(self, key: str) -> Any:
        """Setting ``key``, normalised by its rule, or ``None`` when it is unset."""
        return read(self.scope, key)

    def credential(self, key: str) -> str:
        """The credential ``key``; ``Denied(("no_credential", scope, key))``, its message
        naming the setting and its environment variable (never a value), when it is
        missing or empty."""
        value = read(self.scope, key)
        if isinstance(value, str) and value:
            return value
        env = config.ENV_VARS.get((self.scope, key))
        where = f" or set the {env} environment variable" if env else ""
        setting = f"the '{self.scope}' setting '{key}'"
        raise Denied(
            Reason.NO_CREDENTIAL,
            scope=self.scope,
            key=key,
            message=f"no {self.label} credential: configure {setting}{where}",
        )

    def text(self, key: str) -> str:
        """Setting ``key`` as text (``Invalid`` when it is unset)."""
        return str(self.value(key))

    def optional_text(self, key: str) -> str | None:
        """Setting ``key`` as text, or ``None`` when it is unset or empty."""
        value = read(self.scope, key)
        return str(value) if value not in (None, "") else None

    def flag(self, key: str, default: bool) -> bool:
        """Setting ``key``, or ``default`` when it is unset."""
        value = read(self.scope, key)
        return default if value is None else bool(value)

    def url(self, key: str) -> str:
        """Setting ``key`` as an ``http(s)`` URL naming a host, without a trailing slash."""
        return str(self.value(key))

    def optional_url(self, key: str) -> str | None:
        """Like :meth:`url`, but ``None`` when the setting is unset or empty."""
        return self.optional_text(key)

    def seconds(self, key: str) -> float:
        """Setting ``key``, a positive number of milliseconds (a number or its decimal
        text), in seconds."""
        return float(self.value(key))
