"""The E2B control plane (REST): the calls the adapter makes, one method each.

Every request carries ``X-API-Key`` and a JSON body where it has one (compact,
so the bytes on the wire are predictable). A non-2xx answer is raised as its
taxonomy error by the shared :meth:`~.._http.HttpClient.send` with E2B's
:data:`.errors.POLICY`, except where a method documents a status as success;
an answer of the wrong shape is :func:`~.._http.unexpected`. Sandboxes are
found by the metadata the adapter stamps on them at creation:
``fountain_name=<name>`` and ``fountain=1``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

import attrs

from ..._http import HttpClient, Response, is_success, unexpected
from ..._paging import Page, walk
from ...reasons import Reason
from .errors import POLICY, PROVIDER
from .settings import Settings

__all__ = [
    "INITIAL_TTL",
    "MAX_PAGES",
    "NAME_KEY",
    "ControlPlane",
    "SandboxAccess",
    "sandbox_id_of",
]

#: Seconds of TTL granted at create, on every connect and by every heartbeat.
INITIAL_TTL = 1800
#: Pages ``list_all_names`` follows before refusing with ``Truncated``.
MAX_PAGES = 40
PAGE_LIMIT = 100
NAME_KEY = "fountain_name"
MARK_KEY = "fountain"
STATES = "running,paused"
_SANDBOX_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


@attrs.frozen
class SandboxAccess:
    """How to reach one sandbox's envd: its id, access token and domain.

    ``token`` (the sandbox's ``envdAccessToken``) is a secret and is never
    shown in ``repr``.
    """

    sandbox_id: str
    token: str | None = attrs.field(repr=False)
    domain: str | None


def sandbox_id_of(item: Any) -> str:
    """The sandbox id of a listing item or a ``Sandbox`` answer (``sandboxID``, or
    ``sandboxId``); anything unusable as a URL segment is a ``ProviderError``."""
    value = item.get("sandboxID", item.get("sandboxId")) if isinstance(item, Mapping) else None
    if not isinstance(value, str) or _SANDBOX_ID.fullmatch(value) is None:
        raise unexpected(PROVIDER, Reason.BAD_SANDBOX_ID, value)
    return value


def _access_of(answer: Any) -> SandboxAccess:
    token = answer.get("envdAccessToken") if isinstance(answer, Mapping) else None
    domain = answer.get("domain") if isinstance(answer, Mapping) else None
    return SandboxAccess(
        sandbox_id_of(answer),
        token if isinstance(token, str) and token else None,
        domain if isinstance(domain, str) and domain else None,
    )


def metadata_query(pairs: Mapping[str, str]) -> str:
    """The ``metadata`` query value: each key and value quoted, then url-encoded, as
    the server unescapes it once more than the HTTP layer does
    (docs/protocols/e2b.md#metadata-escaping)."""
    return urlencode({quote(k, safe=""): quote(v, safe="") for k, v in pairs.items()})


class ControlPlane:
    """The REST calls, over one adapter's pooled :class:`HttpClient`."""

    def __init__(self, http: HttpClient) -> None:
        self._http = http

    def _send(
        self,
        s: Settings,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Sequence[tuple[str, str]] | None = None,
        also: Sequence[int] = (),
    ) -> Response:
        """One request; a non-2xx answer (other than the statuses in ``also``) raises
        its taxonomy error."""
        headers = {"X-API-Key": s.api_key, "Accept": "application/json"}
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body, separators=(",", ":")).encode("utf-8")
        return self._http.send(
            method,
            s.base_url + path,
            policy=POLICY,
            timeout=s.http_timeout,
            headers=headers,
            params=list(params or ()),
            data=data,
            accept=lambda status: is_success(status) or status in also,
        )

    # -- lookup -------------------------------------------------------------

    def _listing(self, s: Settings, params: list[tuple[str, str]]) -> Page[Any]:
        """One page of ``GET /v2/sandboxes``; its cursor is the ``X-Next-Token`` header."""
        response = self._send(s, "GET", "/v2/sandboxes", params=params)
        items = response.json()
        if not isinstance(items, list):
            raise unexpected(PROVIDER, Reason.NOT_A_LISTING, items)
        token = response.headers.get("X-Next-Token") or response.headers.get("x-next-token")
        return Page(items, token or None)

    def find(self, s: Settings, name: str) -> list[Mapping[str, Any]]:
        """The sandboxes stamped with ``name``, running or paused, newest first."""
        params = [("state", STATES), ("metadata", metadata_query({NAME_KEY: name}))]
        return [
            item
            for item in self._listing(s, params).items
            if isinstance(item, Mapping)
            and isinstance(item.get("metadata"), Mapping)
            and item["metadata"].get(NAME_KEY) == name
        ]

    def list_names(self, s: Settings, max_pages: int = MAX_PAGES) -> frozenset[str]:
        """Every stamped name, following ``X-Next-Token``; ``Truncated`` past ``max_pages``."""
        params = [
            ("state", STATES),
            ("metadata", metadata_query({MARK_KEY: "1"})),
            ("limit", str(PAGE_LIMIT)),
        ]

        def page(token: str | None) -> Page[Any]:
            return self._listing(s, params + ([("nextToken", token)] if token else []))

        names: set[str] = set()
        for item in walk(page, max_pages):
            metadata = item.get("metadata") if isinstance(item, Mapping) else None
            name = metadata.get(NAME_KEY) if isinstance(metadata, Mapping) else None
            if isinstance(name, str):
                names.add(name)
        return frozenset(names)

    def detail(self, s: Settings, sandbox_id: str) -> SandboxAccess:
        """``GET /sandboxes/{id}``: the access token and domain of a sandbox."""
        response = self._send(s, "GET", f"/sandboxes/{sandbox_id}")
        return _access_of(response.json())

    # -- lifecycle ----------------------------------------------------------

    def create(self, s: Settings, name: str) -> SandboxAccess:
        """``POST /v2/sandboxes``: a new sandbox stamped with ``name``, auto-pausing."""
        body = {
            "templateID": s.template,
            "timeout": INITIAL_TTL,
            "autoPause": True,
            "metadata": {NAME_KEY: name, MARK_KEY: "1"},
        }
        response = self._send(s, "POST", "/v2/sandboxes", body=body)
        return _access_of(response.json())

    def kill(self, s: Settings, sandbox_id: str) -> None:
        """``DELETE /sandboxes/{id}``; already gone (404) is fine."""
        self._send(s, "DELETE", f"/sandboxes/{sandbox_id}", also=(404,))

    def pause(self, s: Settings, sandbox_id: str) -> None:
        """``POST /sandboxes/{id}/pause``; already paused (409) is fine."""
        self._send(s, "POST", f"/sandboxes/{sandbox_id}/pause", body={}, also=(409,))

    def connect(self, s: Settings, sandbox_id: str) -> SandboxAccess:
        """``POST /v2/sandboxes/{id}/connect``: resume if paused (201) or keep (200)."""
        response = self._send(
            s, "POST", f"/v2/sandboxes/{sandbox_id}/connect", body={"timeout": INITIAL_TTL}
        )
        return _access_of(response.json())

    def set_timeout(self, s: Settings, sandbox_id: str, seconds: int = INITIAL_TTL) -> None:
        """``POST /sandboxes/{id}/timeout``: the TTL becomes now + ``seconds``."""
        self._send(s, "POST", f"/sandboxes/{sandbox_id}/timeout", body={"timeout": seconds})

    def put_network(self, s: Settings, sandbox_id: str, allow: Sequence[str]) -> None:
        """``PUT /sandboxes/{id}/network``: deny all egress except ``allow``."""
        body = {"allowOut": list(allow), "denyOut": ["0.0.0.0/0"]}
        self._send(s, "PUT", f"/sandboxes/{sandbox_id}/network", body=body)
