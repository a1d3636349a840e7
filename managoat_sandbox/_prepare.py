"""Requests ready for a transport adapter, without ``PreparedRequest.prepare``'s cost.

``requests`` prepares a request in about 80 µs (a dozen headers): it checks
every header with regular expressions, re-quotes and re-parses the URL, and
merges cookies and URL credentials that never apply here. For what adapters
send — a URL of plain characters built from a validated base URL, headers of
plain text, no body or a body of bytes or JSON — the request is known without
that work: :func:`plain` says what goes on the wire (a :class:`Plain`, which
the default transport may send as it is) and :func:`prepared` builds the
``PreparedRequest`` of it directly (about 12 µs), exactly as ``prepare``
would. Anything else (query parameters, files, a URL ``requests`` would
re-quote, normalise or refuse, or that carries credentials, a header it would
refuse, JSON it cannot encode, a header named twice) goes through ``prepare``,
which stays the one judge of what is valid and raises what it raises.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    import requests

__all__ = ["Plain", "plain", "prepared"]

#: A URL ``prepare`` would leave as it is: http(s), a lower-case host name or IPv4
#: address and an optional port, then a path (and query) of characters it never
#: re-quotes; no userinfo, no percent-escapes, no fragment. :func:`_plain_url` adds
#: what a pattern says badly.
_PLAIN_URL = re.compile(
    r"https?://(?:[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?"
    r"(?::(?P<port>[1-9][0-9]{0,4}))?(?P<rest>/[A-Za-z0-9\-._~!$&'()*+,;=:@/?]*)"
)
_BODY_KEYS = frozenset({"data", "json"})
#: Header names ``prepare`` takes as they are, joined by ``:``: each one not empty, with
#: no whitespace (a pattern's ``\s`` is exactly what ``str.isspace`` calls whitespace)
#: and no colon (so that the joined text has one colon fewer than it has names).
_PLAIN_NAMES = re.compile(r"[^:\s]+(?::[^:\s]+)*")
#: Header values ``prepare`` takes as they are, joined by a line feed: each one with no
#: line break (so the joined text has one line feed fewer than it has values) and no
#: leading whitespace (``[^\S\n]``: whitespace other than the separator, which follows
#: an empty value).
_PLAIN_VALUES = re.compile(r"(?![^\S\n])[^\r\n]*(?:\n(?![^\S\n])[^\r\n]*)*")


@attrs.frozen
class Plain:
    """A plain request as it goes on the wire: ``method`` (upper case), ``url``, every
    header it carries (``Content-Type`` and ``Content-Length`` included, no two names
    that differ only in case) and its ``body`` (``None``: none)."""

    method: str
    url: str
    headers: dict[str, str] = attrs.field(repr=False)  # carries credentials
    body: bytes | None = attrs.field(repr=False)


def plain(
    requests_module: Any,
    method: str,
    url: str,
    headers: Mapping[str, str | bytes],
    kwargs: Mapping[str, Any],
) -> Plain | None:
    """``method url`` with ``headers`` and ``kwargs`` (``requests``' keyword arguments) as
    ``PreparedRequest.prepare`` would send it, when the request is plain (see the module
    docstring) and its headers name no ``Content-Length`` and no header twice (in any
    case); ``None`` otherwise."""
    body = _plain_body(requests_module.compat.json, kwargs)
    if body is None or not _plain_url(url) or not _plain_headers(headers):
        return None
    names = set(map(str.lower, headers))
    if len(names) != len(headers) or "content-length" in names:
        return None
    content, content_type = body
    sent: dict[str, str] = dict(headers)  # type: ignore[arg-type]
    if content_type is not None and "content-type" not in names:
        sent["Content-Type"] = content_type
    upper = method.upper()
    if content:
        sent["Content-Length"] = str(len(content))
    elif upper not in ("GET", "HEAD"):
        sent["Content-Length"] = "0"
    return Plain(upper, url, sent, content or None)


def prepared(
    requests_module: Any,
    method: str,
    url: str,
    headers: Mapping[str, str | bytes],
    kwargs: Mapping[str, Any],
    *,
    found: Plain | None = None,
) -> requests.PreparedRequest:
    """``method url`` with ``headers`` and ``kwargs`` (``requests``' keyword arguments),
    prepared as ``PreparedRequest.prepare`` prepares it (see the module docstring);
    ``found`` is :func:`plain`'s answer for the same arguments, when the caller has it."""
    request: requests.PreparedRequest = requests_module.PreparedRequest()
    if found is None:
        found = plain(requests_module, method, url, headers, kwargs)
    if found is None:
        request.prepare(method=method, url=url, headers=headers, **kwargs)
        return request
    request.method = found.method
    request.url = found.url
    request.headers = requests_module.structures.CaseInsensitiveDict(found.headers)
    request.body = found.body
    return request


def _plain_body(encoder: Any, kwargs: Mapping[str, Any]) -> tuple[bytes | None, str | None] | None:
    """The body and the content type ``prepare`` would give ``kwargs`` (JSON through
    ``encoder``, the module ``requests`` encodes it with); ``None`` when they are not
    plain (see the module docstring)."""
    if not _BODY_KEYS.issuperset(kwargs):
        return None
    data = kwargs.get("data")
    if data:
        return (data, None) if isinstance(data, bytes) else None
    if data is not None and not isinstance(data, bytes):
        return None
    value = kwargs.get("json")
    if value is None:
        return None, None
    try:
        text = encoder.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return None
    return text.encode("utf-8"), "application/json"


def _plain_url(url: str) -> bool:
    """Whether ``prepare`` would send ``url`` as it is: it matches :data:`_PLAIN_URL`,
    its port is one (at most 65535), its path has no dot segment (which ``prepare``
    removes) and it does not end in an empty query (which ``prepare`` drops)."""
    found = _PLAIN_URL.fullmatch(url)
    if found is None:
        return False
    port, rest = found.group("port"), found.group("rest")
    path = rest.split("?", 1)[0]
    return (port is None or int(port) <= 65535) and "/." not in path and not rest.endswith("?")


def _plain_headers(headers: Mapping[str, str | bytes]) -> bool:
    """Whether ``prepare`` would take every header as it is: text names without a
    colon or whitespace, text values without a line break or leading whitespace.

    All names are checked at once, joined by ``:`` (:data:`_PLAIN_NAMES`), and all
    values joined by a line feed (:data:`_PLAIN_VALUES`); a separator inside a name
    or a value shows as one separator too many.
    """
    if not headers:
        return True
    try:
        names, values = ":".join(headers), "\n".join(headers.values())  # type: ignore[arg-type]
    except TypeError:  # a value (or a name) that is not text
        return False
    count = len(headers) - 1
    return (
        names.count(":") == count
        and values.count("\n") == count
        and _PLAIN_NAMES.fullmatch(names) is not None
        and _PLAIN_VALUES.fullmatch(values) is not None
    )
