"""Daytona's control plane (``{api_url}/sandbox…``) and the HTTP plumbing the toolbox shares.

Settings are read at call time through :mod:`.settings`.

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
from urllib.parse import quote

import attrs

from ..._http import BODY_LIMIT, ErrorPolicy, HttpClient, Response, unexpected
from ..._paging import Page, walk
from ...reasons import Reason
from .errors import error_from
from .settings import PROVIDER, SETTINGS, api_url, auth_headers

if TYPE_CHECKING:
    import requests

__all__ = ["LABELS", "Api", "Timeouts", "toolbox_base"]

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
            headers=auth_headers(headers),
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
            headers=auth_headers(headers),
            timeout=(self.timeouts.connect, read_timeout),
            **kwargs,
        ) as response:
            yield response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.call(method, api_url() + path, read_timeout=self.timeouts.api, **kwargs)
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
            raise unexpected(PROVIDER, Reason.NOT_A_LISTING, page)
        if not isinstance(items, list) or not (following is None or isinstance(following, str)):
            raise unexpected(PROVIDER, Reason.NOT_A_LISTING, page)
        return Page(items, following or None)

    def toolbox_proxy_url(self, sandbox_id: str) -> str:
        """``GET /sandbox/{id}/toolbox-proxy-url``: ``{"url": …}`` or a bare JSON string."""
        answer = self._json("GET", f"/sandbox/{_segment(sandbox_id)}/toolbox-proxy-url")
        url = answer.get("url") if isinstance(answer, Mapping) else answer
        if not isinstance(url, str) or not url:
            raise unexpected(PROVIDER, Reason.NO_TOOLBOX_PROXY_URL, answer)
        return url

    def toolbox_of(self, sandbox: Mapping[str, Any]) -> str:
        """The toolbox base URL of a sandbox answer."""
        sandbox_id = sandbox.get("id")
        if not isinstance(sandbox_id, str) or not sandbox_id:
            raise unexpected(PROVIDER, Reason.NO_SANDBOX_ID, sandbox)
        proxy = sandbox.get("toolboxProxyUrl")
        if not isinstance(proxy, str) or not proxy:
            proxy = self.toolbox_proxy_url(sandbox_id)
        return toolbox_base(proxy, sandbox_id)


def _sandbox(answer: Any) -> Mapping[str, Any]:
    if not isinstance(answer, Mapping):
        raise unexpected(PROVIDER, Reason.NOT_A_SANDBOX, answer)
    return answer
