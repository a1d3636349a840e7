"""Injected faults: what one is, where it applies, and the bounds every field must keep.

Every fault, whether queued from Python (:meth:`Faults.add`) or over HTTP
(``POST /_emulator/faults``, parsed by :func:`fault_from_spec`), is checked
before it is queued: a field out of its bounds is a :class:`FaultError`
naming the field (the HTTP control API answers it as a 400). The bounds keep
a fault from costing the emulator more than a test could want: ``size`` is at
most :data:`MAX_SIZE` bytes, ``seconds`` at most :data:`MAX_SECONDS`,
``times`` at most :data:`MAX_TIMES`, ``status`` a real HTTP status, and at
most :data:`MAX_PENDING` faults wait at once. ``path`` is a pattern of
:mod:`._pattern`, matched in linear time.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Mapping
from typing import Any

import attrs

from ._pattern import PathPattern, PatternError

__all__ = ["GENERIC_KINDS", "Fault", "FaultError", "Faults", "fault_from_spec"]

GENERIC_KINDS = frozenset({"status", "stall", "drop", "oversize", "truncate"})
#: Upper bounds of a fault's fields, and of the number of pending faults.
MAX_TIMES = 1_000_000
MAX_SIZE = 64 * 1024 * 1024
MAX_SECONDS = 600.0
MAX_BODY = 1024 * 1024
MAX_HEADERS = 32
MAX_HEADER_LENGTH = 8192
MAX_PENDING = 10_000
_KIND = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_METHOD = re.compile(r"^[A-Za-z]{1,16}$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$")
_FIELDS = ("method", "path", "times", "status", "headers", "body", "seconds", "size")


class FaultError(ValueError):
    """A fault field outside its bounds; the message names the field."""


@attrs.define
class Fault:
    """One injected fault: ``kind`` applied to matching requests, ``times`` times.

    ``method`` and ``path`` (a pattern of :mod:`._pattern`, searched in the
    path) narrow the match; ``None`` matches everything. The other fields
    parameterise the kind (``status``/``headers``/``body`` for "status",
    ``seconds`` for "stall", ``size`` for "oversize"; provider kinds may use
    any of them).
    """

    kind: str
    method: str | None = None
    path: str | None = None
    times: int = 1
    status: int = 500
    headers: Mapping[str, str] = attrs.field(factory=dict)
    body: Any = None
    seconds: float = 0.0
    size: int = 0
    _pattern: PathPattern | None = attrs.field(init=False, default=None, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        _check(self)
        if self.path is not None:
            try:
                self._pattern = PathPattern.compile(self.path)
            except PatternError as error:
                raise FaultError(f"path: {error}") from None

    def matches(self, kind: str | None, method: str, path: str) -> bool:
        """Whether this fault applies (``kind=None`` matches any generic kind)."""
        if kind is None:
            if self.kind not in GENERIC_KINDS:
                return False
        elif self.kind != kind:
            return False
        if self.method is not None and self.method.upper() != method.upper():
            return False
        return self._pattern is None or self._pattern.search(path)


def _check(fault: Fault) -> None:
    """Raise :class:`FaultError` naming the first field of ``fault`` out of bounds."""
    if not isinstance(fault.kind, str) or not _KIND.match(fault.kind):
        raise FaultError("kind: a lower-case name of at most 64 letters, digits and _")
    if fault.method is not None and (
        not isinstance(fault.method, str) or not _METHOD.match(fault.method)
    ):
        raise FaultError("method: an HTTP method name, or null")
    if fault.path is not None and not isinstance(fault.path, str):
        raise FaultError("path: a pattern string, or null")
    _integer("times", fault.times, 1, MAX_TIMES)
    _integer("status", fault.status, 100, 599)
    _integer("size", fault.size, 0, MAX_SIZE)
    seconds = fault.seconds
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not (math.isfinite(seconds) and 0 <= seconds <= MAX_SECONDS)
    ):
        raise FaultError(f"seconds: a finite number from 0 to {MAX_SECONDS:g}")
    _check_headers(fault.headers)
    _check_body(fault.body)


def _integer(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise FaultError(f"{name}: an integer from {low} to {high}")


def _check_headers(headers: object) -> None:
    if not isinstance(headers, Mapping) or len(headers) > MAX_HEADERS:
        raise FaultError(f"headers: an object of at most {MAX_HEADERS} names to strings")
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.match(name):
            raise FaultError("headers: each name must be an HTTP header name")
        if (
            not isinstance(value, str)
            or len(value) > MAX_HEADER_LENGTH
            or any(c in value for c in "\r\n\0")
        ):
            raise FaultError(
                f"headers: {name} must be a one-line string of at most "
                f"{MAX_HEADER_LENGTH} characters"
            )


def _check_body(body: object) -> None:
    if body is None:
        return
    if isinstance(body, (bytes, str)):
        size = len(body)
    else:
        try:
            size = len(json.dumps(body))
        except (TypeError, ValueError):
            raise FaultError("body: JSON, a string or bytes") from None
    if size > MAX_BODY:
        raise FaultError(f"body: at most {MAX_BODY} bytes")


def fault_from_spec(spec: object) -> Fault:
    """The fault a control-API JSON object describes; :class:`FaultError` if it is
    not an object with a ``kind``, names a field a fault does not have, or has a
    field out of bounds."""
    if not isinstance(spec, dict) or "kind" not in spec:
        raise FaultError("kind: a JSON object with 'kind' is required")
    fields = dict(spec)
    kind = fields.pop("kind")
    for name in fields:
        if name not in _FIELDS:
            raise FaultError(
                f"{str(name)[:64]}: not a fault field (fields: kind, {', '.join(_FIELDS)})"
            )
    if fields.get("headers") is None:
        fields.pop("headers", None)
    return Fault(kind, **fields)


class Faults:
    """The pending faults of one emulator; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[Fault] = []

    def add(self, kind: str, **fields: Any) -> Fault:
        """Queue a fault (see :class:`Fault` for the fields); :class:`FaultError`
        (a ValueError) for a field out of bounds or when :data:`MAX_PENDING`
        faults already wait."""
        return self.queue(Fault(kind, **fields))

    def queue(self, fault: Fault) -> Fault:
        """Queue an already built fault (see :meth:`add`)."""
        with self._lock:
            if len(self._pending) >= MAX_PENDING:
                raise FaultError(f"kind: at most {MAX_PENDING} faults may be pending")
            self._pending.append(fault)
        return fault

    def take(self, kind: str | None, method: str, path: str) -> Fault | None:
        """Consume one use of the first matching fault, or None."""
        with self._lock:
            for fault in self._pending:
                if fault.matches(kind, method, path):
                    fault.times -= 1
                    if fault.times == 0:
                        self._pending.remove(fault)
                    return fault
        return None

    def clear(self) -> None:
        """Drop every pending fault."""
        with self._lock:
            self._pending.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)
