"""What each setting may hold: the one place that decides it.

:data:`RULES` gives every setting the library reads its rule. :func:`check`
applies it twice: :func:`managoat_sandbox.config.configure` (and ``override``)
before storing a value, so a setting that cannot be used is refused where it
is set; and the readers (:func:`managoat_sandbox._settings.read`) at call
time, because an environment variable, or a mapping changed after it was
configured, reaches them unchecked. Either way a refusal is
``Invalid(("config", scope, key))`` whose ``message`` names the setting and says
what it must be; it shows the value (bounded, so no nesting can exhaust the
stack) only for settings that cannot hold a credential. ``None`` is never
checked: it means "unset". A setting without a rule (another package's scope)
is stored as given.

Each rule returns the value normalised for its reader (milliseconds become
seconds, a URL loses its trailing ``/``, host names are lowercased), and is a pure
function of the value: a reader may keep what it made of a value it reads again
(:func:`managoat_sandbox._settings.read` does, for immutable values).
"""

from __future__ import annotations

import ipaddress
import math
import os
from collections.abc import Callable, Mapping
from typing import Any, NoReturn
from urllib.parse import urlsplit

from ._args import MAX_SECONDS, shown, utf8
from ._declared import LazyTable, Setting, declarations
from .contract import Adapter
from .errors import Invalid
from .reasons import Reason

__all__ = [
    "DELAY_MS",
    "ISOLATION_MODES",
    "LIBRARY",
    "MAX_COUNT",
    "POSITIVE_MS",
    "RULES",
    "argument",
    "boolean",
    "byte_count",
    "check",
    "choice",
    "count",
    "credential",
    "delay_seconds",
    "host_path",
    "host_pins",
    "http_url",
    "milliseconds",
    "plain_text",
]

#: The values of ``local.isolation``.
ISOLATION_MODES = ("auto", "require", "off")

#: The largest count a setting takes (``retry.attempts``, ``local.retained_sessions``).
MAX_COUNT = 2**31 - 1

#: The largest byte count a setting takes (``local.retained_bytes``).
MAX_BYTES = 2**63 - 1


class _Unusable(Exception):
    """A value its rule refuses; ``args[0]`` says what the value must be."""


class _WrongType(_Unusable):
    """A value of a type its rule never takes."""


def _refuse(expectation: str) -> NoReturn:
    raise _Unusable(expectation)


def _str(value: object, expectation: str) -> str:
    if not isinstance(value, str):
        raise _WrongType(expectation)
    return value


def _number(value: object, expectation: str) -> float:
    """``value`` (an int or float, not a bool) as a float; too large for one is refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _WrongType(expectation)
    try:
        return float(value)
    except OverflowError:
        _refuse(expectation)


def _header_safe(value: str) -> bool:
    """Printable ASCII: what an HTTP header or a URL carries as it is."""
    return value.isascii() and value.isprintable()


# -- the kinds of setting ---------------------------------------------------------------


def credential(value: object) -> str:
    """A credential or a header value: printable ASCII, as an HTTP header carries it."""
    expectation = "a str of printable ASCII (empty: not configured)"
    text = _str(value, expectation)
    if text and not _header_safe(text):
        _refuse(expectation)
    return text


def http_url(*, optional: bool) -> Callable[[object], str]:
    expectation = "an http:// or https:// URL naming a host, in printable ASCII"
    if optional:
        expectation += " (empty: not set)"

    def convert(value: object) -> str:
        text = _str(value, expectation)
        if optional and not text:
            return text
        if not _header_safe(text) or " " in text:
            _refuse(expectation)
        try:
            parts = urlsplit(text)
            port_ok = parts.port is None or parts.port > 0
        except ValueError:
            _refuse(expectation)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname or not port_ok:
            _refuse(expectation)
        return text.rstrip("/")

    return convert


def _seconds(value: object, *, positive: bool, expectation: str) -> float:
    """``value`` as seconds within ``0..MAX_SECONDS`` (above 0 when ``positive``)."""
    number = _number(value, expectation)
    low_ok = number > 0 if positive else number >= 0
    if not (low_ok and number <= MAX_SECONDS):
        _refuse(expectation)
    return number


def delay_seconds(value: object) -> float:
    """A retry delay given in seconds: an int or float from 0 to ``MAX_SECONDS``."""
    expectation = f"a number of seconds from 0 to {MAX_SECONDS:.0f}"
    return _seconds(value, positive=False, expectation=expectation)


def milliseconds(*, positive: bool) -> Callable[[object], float]:
    low = "above 0" if positive else "from 0"
    expectation = f"a number of milliseconds {low} up to {MAX_SECONDS * 1000:.0f} (or its text)"

    def convert(value: object) -> float:
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                _refuse(expectation)
        number = _number(value, expectation) / 1000
        return _seconds(number, positive=positive, expectation=expectation)

    return convert


def boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise _WrongType("True or False")
    return value


def plain_text(*, optional: bool) -> Callable[[object], str]:
    expectation = "a str of printable characters (no lone surrogates)"
    expectation += " (empty: not set)" if optional else ", not empty"

    def convert(value: object) -> str:
        text = _str(value, expectation)
        if not (text or optional) or not text.isprintable() or not utf8(text):
            _refuse(expectation)
        return text

    return convert


def choice(options: tuple[str, ...]) -> Callable[[object], str]:
    expectation = f"one of {list(options)}"

    def convert(value: object) -> str:
        text = _str(value, expectation)
        if text not in options:
            _refuse(expectation)
        return text

    return convert


def count(low: int) -> Callable[[object], int]:
    """The rule of a count: an int (not a bool) from ``low`` to :data:`MAX_COUNT`."""
    expectation = f"an int from {low} to {MAX_COUNT}"

    def convert(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _WrongType(expectation)
        if not low <= value <= MAX_COUNT:
            _refuse(expectation)
        return value

    return convert


def byte_count(value: object) -> int:
    """The rule of a byte count: an int (not a bool) from 0 to :data:`MAX_BYTES`."""
    expectation = f"an int from 0 to {MAX_BYTES} (bytes)"
    if isinstance(value, bool) or not isinstance(value, int):
        raise _WrongType(expectation)
    if not 0 <= value <= MAX_BYTES:
        _refuse(expectation)
    return value


def _budget(value: object) -> float:
    expectation = "a finite number >= 0 (retries per provider)"
    number = _number(value, expectation)
    if not (math.isfinite(number) and number >= 0):
        _refuse(expectation)
    return number


def host_path(value: object) -> str:
    expectation = "a path (str or os.PathLike of str) without NUL or lone surrogates"
    if not isinstance(value, (str, os.PathLike)):
        raise _WrongType(expectation)
    text = _str(os.fspath(value), expectation)
    if "\x00" in text or not utf8(text):
        _refuse(expectation)
    return text


def host_pins(value: object) -> dict[str, str]:
    expectation = "a mapping of host names (printable ASCII) to IP addresses (str)"
    if not isinstance(value, Mapping):
        raise _WrongType(expectation)
    pins: dict[str, str] = {}
    for host, address in value.items():
        name = _str(host, expectation).lower().rstrip(".")
        if not name or not _header_safe(name) or " " in name:
            _refuse(expectation)
        try:
            ipaddress.ip_address(_str(address, expectation))
        except ValueError:
            _refuse(expectation)
        pins[name] = address
    return pins


def _adapter_map(value: object) -> Mapping[str, Any]:
    expectation = "a mapping of provider name (str) to an Adapter instance or subclass"
    if not isinstance(value, Mapping):
        raise _WrongType(expectation)
    for name, source in value.items():
        usable = isinstance(source, Adapter) or (
            isinstance(source, type) and issubclass(source, Adapter)
        )
        if not isinstance(name, str) or not usable:
            raise _WrongType(expectation)
    return value


#: The rule of a duration in milliseconds above 0 (normalised to seconds).
POSITIVE_MS = milliseconds(positive=True)
#: The rule of a delay in milliseconds from 0 (normalised to seconds).
DELAY_MS = milliseconds(positive=False)

#: The library's own settings (scope ``None`` is the top level); each provider's are
#: declared beside it (:mod:`managoat_sandbox._declared`).
LIBRARY: dict[tuple[str | None, str], Setting] = {
    (None, "adapters"): Setting(_adapter_map),
    ("fake", "world"): Setting(plain_text(optional=False)),
    ("retry", "attempts"): Setting(count(1), default=3),
    ("retry", "base_ms"): Setting(DELAY_MS, default=250),
    ("retry", "max_ms"): Setting(DELAY_MS, default=2000),
    ("retry", "max_retry_after_ms"): Setting(DELAY_MS, default=30000),
    ("retry", "budget"): Setting(_budget, default=100),
}


def _every_setting() -> dict[tuple[str | None, str], Setting]:
    declared: dict[tuple[str | None, str], Setting] = {
        (declaration.name, key): setting
        for declaration in declarations().values()
        for key, setting in declaration.settings.items()
    }
    return {**LIBRARY, **declared}


#: (scope, key) → every setting the library reads: :data:`LIBRARY` and each provider's
#: declared ones (built on first use).
RULES: Mapping[tuple[str | None, str], Setting] = LazyTable(_every_setting)


def check(scope: str | None, key: str, value: Any) -> Any:
    """``value`` of setting ``key`` in ``scope``, normalised by its rule; ``None`` (unset)
    and settings without a rule pass as they are. A refused value is
    ``Invalid(("config", scope, key))`` with a ``message`` naming the setting."""
    rule = RULES.get((scope, key))
    if rule is None or value is None:
        return value
    try:
        return rule.convert(value)
    except _Unusable as refused:
        name = key if scope is None else f"{scope}.{key}"
        message = f"{name} must be {refused.args[0]}"
        if rule.shown:
            message += f", got {shown(value)}"
        raise Invalid(Reason.CONFIG, scope=scope, key=key, message=message) from None


def argument(convert: Callable[[object], Any], name: Reason, value: object) -> Any:
    """``value`` of argument ``name`` by a setting's rule ``convert`` (for an argument
    that stands in for a setting): a wrong type is ``TypeError``, an unusable value
    ``Invalid((name, "must be ..."))``."""
    try:
        return convert(value)
    except _WrongType as refused:
        raise TypeError(f"{name} must be {refused.args[0]}, got {type(value).__name__}") from None
    except _Unusable as refused:
        raise Invalid(name, problem=f"must be {refused.args[0]}") from None
