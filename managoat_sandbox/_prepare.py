"""Requests ready for a transport adapter, without ``PreparedRequest.prepare``'s cost.

``requests`` prepares a request in about 80 µs (a dozen headers): it checks
every header with regular expressions, re-quotes and re-parses the URL, and
merges cookies and URL credentials that never apply here. For what adapters
send — a URL of plain characters built from a validated base URL, headers of
plain text, no body or a body of bytes or JSON — the prepared request is
known without that work, and :func:`prepared` builds it directly (about
12 µs), exactly as ``prepare`` would. Anything else (query parameters, files,
a URL ``requests`` would re-quote, normalise or refuse, or that carries
credentials, a header it would refuse, JSON it cannot encode) goes through
``prepare``, which stays the one judge of what is valid and raises what it
raises.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import requests

__all__ = ["prepared"]

#: A URL ``prepare`` would leave as it is: http(s), a lower-case host name or IPv4
#: address and an optional port, then a path (and query) of characters it never
#: re-quotes; no userinfo, no percent-escapes, no fragment. :func:`_plain_url` adds
#: what a pattern says badly.
_PLAIN_URL = re.compile(
    r"https?://(?:[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?"
    r"(?::(?P<port>[1-9][0-9]{0,4}))?(?P<rest>/[A-Za-z0-9\-._~!$&'()*+,;=:@/?]*)"
)
_BODY_KEYS = frozenset({"data", "json"})


def prepared(
    requests_module: Any,
    method: str,
    url: str,
    headers: Mapping[str, str | bytes],
    kwargs: Mapping[str, Any],
) -> requests.PreparedRequest:
    """``method url`` with ``headers`` and ``kwargs`` (``requests``' keyword arguments),
    prepared as ``PreparedRequest.prepare`` prepares it (see the module docstring)."""
    request: requests.PreparedRequest = requests_module.PreparedRequest()
    body = _plain_body(requests_module.compat.json, kwargs)
    if body is None or not _plain_url(url) or not _plain_headers(headers):
        request.prepare(method=method, url=url, headers=headers, **kwargs)
        return request
    content, content_type = body
    request.method = method.upper()
    request.url = url
    request.headers = requests_module.structures.CaseInsensitiveDict(headers)
    if content_type is not None and "content-type" not in request.headers:
        request.headers["Content-Type"] = content_type
    if content:
        request.body = content
        request.headers["Content-Length"] = str(len(content))
    elif request.method not in ("GET", "HEAD") and "Content-Length" not in request.headers:
        request.headers["Content-Length"] = "0"
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
    colon or whitespace, text values without a line break or leading whitespace."""
    for name, value in headers.items():
        if not isinstance(value, str):
            return False
        if not name or ":" in name or any(c.isspace() for c in name):
            return False
        if "\r" in value or "\n" in value or value[:1].isspace():
            return False
    return True
