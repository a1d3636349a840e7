"""The one secret sanitiser: what goes into an error detail or a log line passes here.

Credentials travel only in request headers and in configuration. Whatever text
or bytes might echo one back (a provider's error body, a URL a user
configured) is cleaned by these functions before it is kept:

* :func:`credential_like` — whether a header or query parameter's *name* says it
  carries a credential (the one rule, also the emulators' request log's);
* :func:`credentials_in` — the credential values a request's headers carry
  (``Authorization`` and its bare token, ``X-API-Key``, ``X-Access-Token``, …,
  any header :func:`credential_like` names);
* :func:`scrub` / :func:`scrub_bytes` — those known values replaced by
  ``***``; :func:`scrub` also masks URL userinfo, the values of query
  parameters named like a credential and an ``Authorization``-style
  ``Bearer``/``Basic`` value;
* :func:`safe_url` — a URL without userinfo, query or fragment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "CREDENTIAL_STEMS",
    "CREDENTIAL_WORDS",
    "MASK",
    "credential_like",
    "credentials_in",
    "safe_url",
    "scrub",
    "scrub_bytes",
]

MASK = "***"

#: A header or query parameter name holding any of these (case-insensitively,
#: anywhere in it) names a credential: ``X-Sprite-Token``, ``X-Auth-Key``,
#: ``Authorization``, ``Set-Cookie``, ``password``, ``signature_expiration``…
CREDENTIAL_STEMS = (
    "token",
    "key",
    "auth",
    "secret",
    "pass",
    "signature",
    "session",
    "cookie",
    "credential",
    "jwt",
    "bearer",
)
#: Short names that name a credential only as a whole word of the name (split
#: at anything but a letter or digit, and where a lowercase letter meets an
#: uppercase one): ``pw`` and ``X-Sig`` are credentials, ``signal`` is not.
CREDENTIAL_WORDS = frozenset({"pw", "pwd", "sig"})
_WORD_BREAK = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|[^A-Za-z0-9]+")
#: Values shorter than this are not scrubbed: they would mask ordinary text.
_SHORTEST = 4

_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s]+@")
_QUERY_SECRET = re.compile(
    r"(?P<name>[?&;](?:[\w.-]*(?:token|key|secret|password|passwd|signature|sig|auth)"
    r"[\w.-]*)=)[^&;#\s\"']*",
    re.IGNORECASE,
)
_AUTH_SCHEME = re.compile(r"\b(?P<scheme>Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]+", re.IGNORECASE)


def credential_like(name: str) -> bool:
    """Whether a header or query parameter called ``name`` carries a credential:
    it holds one of :data:`CREDENTIAL_STEMS`, or one of its words is one of
    :data:`CREDENTIAL_WORDS`."""
    lowered = name.lower()
    if any(stem in lowered for stem in CREDENTIAL_STEMS):
        return True
    return any(word.lower() in CREDENTIAL_WORDS for word in _WORD_BREAK.split(name))


def credentials_in(headers: Mapping[str, str]) -> tuple[str, ...]:
    """The credential values among ``headers``: each credential header's value and,
    for an ``<scheme> <token>`` value, the bare token."""
    found: list[str] = []
    for name, value in headers.items():
        if not credential_like(name) or not isinstance(value, str):
            continue
        found.append(value)
        scheme, _, token = value.partition(" ")
        if scheme and token:
            found.append(token.strip())
    return tuple(value for value in found if len(value) >= _SHORTEST)


def scrub_bytes(data: bytes, secrets: Iterable[str]) -> bytes:
    """``data`` with every occurrence of each of ``secrets`` replaced by ``***``."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        if len(secret) >= _SHORTEST:
            data = data.replace(secret.encode("utf-8"), MASK.encode("ascii"))
    return data


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` fit for an error or a log line: the known ``secrets``, URL userinfo,
    credential-named query values and ``Bearer``/``Basic`` values masked."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        if len(secret) >= _SHORTEST:
            text = text.replace(secret, MASK)
    text = _USERINFO.sub(lambda match: f"{match['scheme']}{MASK}@", text)
    text = _QUERY_SECRET.sub(lambda match: f"{match['name']}{MASK}", text)
    return _AUTH_SCHEME.sub(lambda match: f"{match['scheme']} {MASK}", text)


def safe_url(url: str) -> str:
    """``url`` as scheme, host, port and path only: never its userinfo, query or fragment."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
