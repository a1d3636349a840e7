"""Daytona's control plane (``{api_url}/sandbox…``) and the HTTP plumbing the toolbox shares.

Settings are read from config scope ``daytona`` at call time: ``api_key``
(``$DAYTONA_API_KEY``), ``api_url`` (``$DAYTONA_API_URL``, else
``https://app.daytona.io/api``; a self-hosted Daytona is ``<origin>/api``: a
URL whose path does not end in ``/api`` is ``Invalid`` before any request, as
every call to it would answer 404), ``snapshot`` and ``organization_id``. A
missing key is ``Denied`` naming ``DAYTONA_API_KEY``, raised before any
request (:class:`~..._settings.ProviderSettings`, as for every provider). Every
request carries ``Authorization: Bearer <key>`` and, when configured,
``X-Daytona-Organization-ID``; the key lives only in those headers.

Requests go through the shared :meth:`~.._http.HttpClient.send` /
:meth:`~.._http.HttpClient.open` with Daytona's :data:`POLICY` (its status
refinements are :func:`.errors.error_from`); an answer of the wrong shape is
:func:`~.._http.unexpected`; the listing is walked by :func:`~.._paging.walk`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import attrs

from ..._http import BODY_LIMIT, ErrorPolicy, HttpClient, Response, unexpected
from ..._paging import Page, walk
from ..._secrets import safe_url
from ..._settings import ProviderSettings
from ...errors import Invalid
from .errors import error_from

if TYPE_CHECKING:
    import requests

__all__ = ["LABELS", "Api", "Timeouts", "toolbox_base"]

PROVIDER = "daytona"
SETTINGS = ProviderSettings(PROVIDER, "Daytona")
#: How :meth:`~.._http.HttpClient.send` maps a Daytona answer (API or toolbox) it refuses.
POLICY = ErrorPolicy(PROVIDER, refine=error_from)
#: Labels put on every sandbox this library creates; the listing filters on them.
LABELS: Mapping[str, str] = {"managoat": "1"}


@attrs.frozen
class Timeouts:
    """Connect and read timeouts in seconds.

    ``api`` covers create and start, which the server holds open for up to
    30 s while the sandbox boots.
    """

    connect: float = 10.0
    api: float = 65.0
    toolbox: float = 30.0


def _segment(value: str) -> str:
    return quote(value, safe="")


def toolbox_base(proxy_url: str, sandbox_id: str) -> str:
    """``{toolboxProxyUrl}/{sandboxId}`` — the id, never the name, as the proxy routes by id."""
    return proxy_url.rstrip("/") + "/" + _segment(sandbox_id)


class Api:
    """The control-plane calls; every non-2xx is a taxonomy error (``errors.error_from``)."""

    def __init__(self, http: HttpClient, timeouts: Timeouts) -> None:
        self.http = http
        self.timeouts = timeouts

    # -- plumbing shared with the toolbox -----------------------------------

    @staticmethod
    def base_url() -> str:
        """The API base, without a trailing slash (``Invalid`` when it does not end in
        ``/api``, saying what to set it to)."""
        url = SETTINGS.url("api_url")
        if not urlsplit(url).path.endswith("/api"):
            shown = safe_url(url)
            raise Invalid(
                f"daytona api_url {shown} is not the control plane's base, "
                "whose path ends in /api (like https://app.daytona.io/api): set daytona "
                f"api_url or the DAYTONA_API_URL environment variable to {shown}/api"
            )
        return url

    @staticmethod
    def headers(extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """Auth headers (``Denied`` before any request when no key is configured)."""
        headers = {"Authorization": f"Bearer {SETTINGS.credential('api_key')}"}
        organization = SETTINGS.optional_text("organization_id")
        if organization:
            headers["X-Daytona-Organization-ID"] = str(organization)
        if extra:
            headers.update(extra)
        return headers

    def call(
        self,
        method: str,
        url: str,
        *,
        read_timeout: float,
        headers: Mapping[str, str] | None = None,
        limit: int = BODY_LIMIT,
        **kwargs: Any,
    ) -> Response:
        """One authenticated request; a non-2xx answer is raised as its taxonomy error."""
        return self.http.send(
            method,
            url,
            policy=POLICY,
            headers=self.headers(headers),
            timeout=(self.timeouts.connect, read_timeout),
            limit=limit,
            **kwargs,
        )

    @contextmanager
    def stream(
        self,
        method: str,
        url: str,
        *,
        read_timeout: float,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> Iterator[requests.Response]:
        """One authenticated request whose 2xx body the caller reads (closed on exit);
        a non-2xx answer is raised as its taxonomy error."""
        with self.http.open(
            method,
            url,
            policy=POLICY,
            headers=self.headers(headers),
            timeout=(self.timeouts.connect, read_timeout),
            **kwargs,
        ) as response:
            yield response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.call(
            method, self.base_url() + path, read_timeout=self.timeouts.api, **kwargs
        )
        if not response.body.strip():
            return {}
        return response.json()

    # -- sandboxes ----------------------------------------------------------

    def create(self, name: str) -> Mapping[str, Any]:
        """``POST /sandbox``: the sandbox, never auto-stopped, archived after 7 days stopped."""
        body: dict[str, Any] = {
            "name": name,
            "labels": dict(LABELS),
            "autoStopInterval": 0,
            "autoArchiveInterval": 10080,
        }
        snapshot = SETTINGS.optional_text("snapshot")
        if snapshot:
            body["snapshot"] = snapshot
        return _sandbox(self._json("POST", "/sandbox", json=body))

    def get(self, name: str) -> Mapping[str, Any]:
        """``GET /sandbox/{idOrName}``; 404 is ``NotFound``."""
        return _sandbox(self._json("GET", f"/sandbox/{_segment(name)}"))

    def delete(self, name: str) -> None:
        """``DELETE /sandbox/{idOrName}`` (any 2xx)."""
        self._json("DELETE", f"/sandbox/{_segment(name)}")

    def start(self, name: str) -> Mapping[str, Any]:
        """``POST /sandbox/{idOrName}/start``."""
        return _sandbox(self._json("POST", f"/sandbox/{_segment(name)}/start", json={}))

    def stop(self, name: str) -> None:
        """``POST /sandbox/{idOrName}/stop``."""
        self._json("POST", f"/sandbox/{_segment(name)}/stop", json={})

    def network_settings(self, name: str, body: Mapping[str, Any]) -> None:
        """``POST /sandbox/{idOrName}/network-settings``."""
        self._json("POST", f"/sandbox/{_segment(name)}/network-settings", json=dict(body))

    def list_items(self, page_size: int, max_pages: int) -> list[Any]:
        """Every item of ``GET /sandbox`` carrying :data:`LABELS`, walked page by page
        (sorted by the immutable creation time, oldest first); ``Truncated`` past
        ``max_pages`` pages."""
        return walk(lambda cursor: self._list_page(cursor, page_size), max_pages)

    def _list_page(self, cursor: str | None, limit: int) -> Page[Any]:
        """One page: a bare JSON array (the last), or ``{"items", "nextCursor"}``."""
        params: dict[str, str | int] = {
            "labels": json.dumps(dict(LABELS), separators=(",", ":")),
            "limit": limit,
            "sort": "createdAt",
            "order": "asc",
        }
        if cursor:
            params["cursor"] = cursor
        page = self._json("GET", "/sandbox", params=params)
        items: Any
        following: Any
        if isinstance(page, list):
            items, following = page, None
        elif isinstance(page, Mapping):
            items = page.get("items")
            following = page.get("nextCursor", page.get("cursor"))
        else:
            raise unexpected(PROVIDER, "not_a_listing", page)
        if not isinstance(items, list) or not (following is None or isinstance(following, str)):
            raise unexpected(PROVIDER, "not_a_listing", page)
        return Page(items, following or None)

    def toolbox_proxy_url(self, sandbox_id: str) -> str:
        """``GET /sandbox/{id}/toolbox-proxy-url``: ``{"url": …}`` or a bare JSON string."""
        answer = self._json("GET", f"/sandbox/{_segment(sandbox_id)}/toolbox-proxy-url")
        url = answer.get("url") if isinstance(answer, Mapping) else answer
        if not isinstance(url, str) or not url:
            raise unexpected(PROVIDER, "no_toolbox_proxy_url", answer)
        return url

    def toolbox_of(self, sandbox: Mapping[str, Any]) -> str:
        """The toolbox base URL of a sandbox answer."""
        sandbox_id = sandbox.get("id")
        if not isinstance(sandbox_id, str) or not sandbox_id:
            raise unexpected(PROVIDER, "no_sandbox_id", sandbox)
        proxy = sandbox.get("toolboxProxyUrl")
        if not isinstance(proxy, str) or not proxy:
            proxy = self.toolbox_proxy_url(sandbox_id)
        return toolbox_base(proxy, sandbox_id)


def _sandbox(answer: Any) -> Mapping[str, Any]:
    if not isinstance(answer, Mapping):
        raise unexpected(PROVIDER, "not_a_sandbox", answer)
    return answer
