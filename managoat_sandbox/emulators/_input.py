"""What an emulator takes from the network: the checks every route shares.

Bad input is the client's mistake: it gets a 4xx in the provider's error shape
(each emulator's :meth:`~._server.Emulator.bad_request`), never a 500. The
families refused here, once for all three emulators:

* **NULs, and header values that are not UTF-8** (:func:`request_problem`,
  which the base's middleware runs before any route): no path, name or value
  any provider takes may hold a NUL, and the HTTP parser has already refused
  the other control characters in headers;
* **JSON the services' decoders would refuse** (:func:`load_json`, which every
  route that parses JSON uses): nesting deeper than :data:`MAX_JSON_DEPTH`,
  integers outside the signed 64-bit range, numbers that are not finite
  (``NaN``, ``Infinity``, ``1e400``), and strings holding a lone surrogate
  (``"\\ud800"``, which no UTF-8 text can carry);
* **integers written as text** (:func:`parse_int`): ASCII digits only, at most
  :data:`MAX_DIGITS` of them, within the bounds the caller gives.

Every refusal is a :class:`BadInput`, a ``ValueError``, so a route that
already catches ``ValueError`` to answer in its own words keeps doing so; the
base's middleware answers one that escapes a route with ``bad_request``. A
refusal's message never repeats the input, which may hold a secret.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from aiohttp import web

__all__ = [
    "MAX_DIGITS",
    "MAX_JSON_DEPTH",
    "BadInput",
    "load_json",
    "parse_int",
    "request_problem",
]

#: The deepest nesting of arrays and objects a JSON body may have.
MAX_JSON_DEPTH = 64
#: The most digits an integer written as text may have (a signed 64-bit
#: integer has 19 decimal digits, 22 octal ones).
MAX_DIGITS = 22
_INT64 = range(-(2**63), 2**63)
_SURROGATE = re.compile("[\ud800-\udfff]")
_DIGITS = {10: re.compile(r"-?[0-9]+"), 8: re.compile(r"[0-7]+")}


class BadInput(ValueError):
    """Input no route of any emulator takes; the message says why without quoting it."""


def request_problem(request: web.Request) -> str | None:
    """Why no route may serve this request line and these headers, or None when one may:
    a NUL in the path or the query, or a header value that is not UTF-8 text."""
    if "\x00" in request.path:
        return "the path holds a NUL character"
    if any("\x00" in name or "\x00" in value for name, value in request.query.items()):
        return "a query parameter holds a NUL character"
    for name, value in request.headers.items():
        # aiohttp hands bytes that are not UTF-8 over as lone surrogates.
        if _SURROGATE.search(value):
            return f"the value of header {_printable(name)} is not UTF-8 text"
    return None


def load_json(raw: bytes | str) -> Any:
    """``raw`` parsed as JSON; :class:`BadInput` if it is not JSON, or is JSON that
    this module refuses (see the module docstring)."""
    try:
        value = json.loads(
            raw, parse_int=_json_int, parse_float=_json_float, parse_constant=_json_constant
        )
    except BadInput:
        raise
    except RecursionError:
        raise _too_deep() from None
    except ValueError:
        raise BadInput("the body is not valid JSON") from None
    _check_tree(value)
    return value


def parse_int(text: str, what: str, *, low: int, high: int, base: int = 10) -> int:
    """``text`` as an integer from ``low`` to ``high`` written in ``base`` (10, or 8
    without a sign); :class:`BadInput` naming ``what`` otherwise: anything but
    ASCII digits (no spaces, underscores or other scripts' digits) or more than
    :data:`MAX_DIGITS` of them."""
    if len(text) <= MAX_DIGITS + 1 and _DIGITS[base].fullmatch(text):
        value = int(text, base)
        if low <= value <= high:
            return value
    shown = (f"{low:o}", f"{high:o}") if base == 8 else (str(low), str(high))
    kind = "an octal" if base == 8 else "an"
    raise BadInput(f"{what} must be {kind} integer from {shown[0]} to {shown[1]}")


def _json_int(text: str) -> int:
    value = int(text) if len(text) <= MAX_DIGITS else None
    if value is None or value not in _INT64:
        raise BadInput("a JSON integer is outside the signed 64-bit range")
    return value


def _json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadInput("a JSON number is too large")
    return value


def _json_constant(text: str) -> float:
    raise BadInput("NaN and Infinity are not JSON numbers")


def _too_deep() -> BadInput:
    return BadInput(f"the JSON is nested deeper than {MAX_JSON_DEPTH} levels")


def _check_tree(value: Any) -> None:
    """Refuse a parsed value nested too deeply or holding a lone surrogate (iteratively:
    the check itself never recurses)."""
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        node, depth = pending.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                raise BadInput("a JSON string holds a lone surrogate")
            continue
        if not isinstance(node, (dict, list)):
            continue
        if depth >= MAX_JSON_DEPTH:
            raise _too_deep()
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        pending.extend((child, depth + 1) for child in children)


def _printable(name: str) -> str:
    """A header name as it may be shown (names are tokens; anything else is masked)."""
    return name if name.isascii() and name.isprintable() else "?"
