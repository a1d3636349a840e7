"""The Sprites REST API as the adapter uses it: one method per call, errors mapped once.

Every call goes through the adapter's one pooled :class:`~.._http.HttpClient`
with explicit connect/read timeouts (``timeout_ms``; the policy POST uses
``policy_timeout_ms``, because a cold sprite answers it only once booted),
never follows a redirect, and reads at most 64 KiB of body (``limit`` says
otherwise; :meth:`SpritesApi.stream` leaves the reading to the caller). A
non-2xx answer becomes a taxonomy error through the shared
:meth:`~.._http.HttpClient.send` with Sprites' :data:`.errors.POLICY`; an
answer of the wrong shape is :func:`~.._http.unexpected`; the listing is walked
by :func:`~.._paging.walk`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..._http import HttpClient, Response, is_success, unexpected
from ..._paging import Page, walk
from ...reasons import Reason
from .errors import POLICY, PROVIDER, file_error
from .settings import Settings, segment

if TYPE_CHECKING:
    import requests

__all__ = ["PAGE_SIZE", "SpritesApi", "sprite_path"]

log = logging.getLogger("managoat_sandbox.providers.sprites")

#: Entries asked for per listing page (the documented maximum).
PAGE_SIZE = 50


def _any_status(status: int) -> bool:
    """Every status is an answer the caller looks at itself."""
    return True


def sprite_path(name: str, *rest: str) -> str:
    """``/v1/sprites/<name>[/<rest>...]`` with every segment percent-encoded."""
    return "/".join(["/v1/sprites", *(segment(part) for part in (name, *rest))])


class SpritesApi:
    """REST calls against one settings snapshot; thread-safe (state lives in ``http``)."""

    def __init__(self, http: HttpClient, settings: Settings) -> None:
        self._http = http
        self.settings = settings

    # -- plumbing -------------------------------------------------------

    def call(
        self,
        method: str,
        path: str,
        *,
        timeout: float | None = None,
        extra_headers: Mapping[str, str] | None = None,
        accept: Callable[[int], bool] = _any_status,
        **kwargs: Any,
    ) -> Response:
        """One request; the answer whatever its status unless ``accept`` refuses it, then
        its taxonomy error (transport failures raise)."""
        seconds = self.settings.timeout if timeout is None else timeout
        headers = {**self.settings.headers, **(extra_headers or {})}
        return self._http.send(
            method,
            self.settings.url(path),
            policy=POLICY,
            timeout=(seconds, seconds),
            headers=headers,
            accept=accept,
            **kwargs,
        )

    @contextmanager
    def stream(
        self,
        method: str,
        path: str,
        *,
        extra_headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> Iterator[requests.Response]:
        """One request whose answer, whatever its status, the caller reads as it arrives
        (closed on exit); each read waits at most ``timeout_ms``."""
        seconds = self.settings.timeout
        headers = {**self.settings.headers, **(extra_headers or {})}
        with self._http.stream(
            method,
            self.settings.url(path),
            timeout=(seconds, seconds),
            headers=headers,
            **kwargs,
        ) as response:
            yield response

    def ok(self, method: str, path: str, **kwargs: Any) -> Response:
        """One request that must answer 2xx; anything else raises its taxonomy error."""
        return self.call(method, path, accept=is_success, **kwargs)

    # -- sprites --------------------------------------------------------

    def create(self, body: Mapping[str, Any]) -> Response:
        """``POST /v1/sprites``; the caller decides what 409 means."""
        return self.call("POST", "/v1/sprites", json=dict(body))

    def make_public(self, name: str) -> None:
        """``PUT /v1/sprites/<name>`` with ``url_settings.auth = "public"``."""
        self.ok("PUT", sprite_path(name), json={"url_settings": {"auth": "public"}})

    def get(self, name: str) -> Any:
        """``GET /v1/sprites/<name>``: the sprite object (404 → ``NotFound``)."""
        body = self.ok("GET", sprite_path(name)).json()
        if not isinstance(body, dict):
            raise unexpected(PROVIDER, Reason.UNEXPECTED_SPRITE, body)
        return body

    def delete(self, name: str) -> Response:
        """``DELETE /v1/sprites/<name>``; the caller decides what 404 means."""
        return self.call("DELETE", sprite_path(name))

    def list_names(self, page_cap: int) -> frozenset[str]:
        """Every sprite name, walking ``continuation_token`` pages.

        Complete when a page says ``has_more: false``. More than ``page_cap``
        pages, or ``has_more: true`` without a token to continue with, is
        ``Truncated``: the whole view cannot be shown, and a part is never
        passed off as the whole.
        """
        return frozenset(walk(self._listing_page, page_cap, cap_reason=Reason.PAGE_CAP))

    def _listing_page(self, token: str | None) -> Page[str]:
        params: dict[str, Any] = {"max_results": PAGE_SIZE}
        if token is not None:
            params["continuation_token"] = token
        page = self.ok("GET", "/v1/sprites", params=params).json()
        names = _page_names(page)
        following = page.get("next_continuation_token")
        return Page(
            names,
            following if isinstance(following, str) else None,
            more=page.get("has_more") is True,
        )

    # -- sessions, policy, files ----------------------------------------

    def sessions(self, name: str) -> list[Any]:
        """``GET /v1/sprites/<name>/exec``: the raw session entries (missing → ``[]``)."""
        body = self.ok("GET", sprite_path(name, "exec")).json()
        found = body.get("sessions") if isinstance(body, dict) else None
        return found if isinstance(found, list) else []

    def set_policy(self, name: str, rules: list[dict[str, str]]) -> None:
        """``POST /v1/sprites/<name>/policy/network`` with ``policy_timeout_ms``; any 2xx."""
        self.ok(
            "POST",
            sprite_path(name, "policy", "network"),
            json={"rules": rules},
            timeout=self.settings.policy_timeout,
        )

    def write_file(self, name: str, path: str, data: bytes, mode: int) -> None:
        """``PUT /v1/sprites/<name>/fs/write`` (parents created, ``workingDir=/``); a
        non-2xx answer raises :func:`.errors.file_error`'s error for ``path``."""
        params = {"path": path, "workingDir": "/", "mode": f"{mode:04o}", "mkdirParents": "true"}
        response = self.call(
            "PUT",
            sprite_path(name, "fs", "write"),
            params=params,
            data=data,
            extra_headers={"Content-Type": "application/octet-stream"},
        )
        if not response.ok:
            raise file_error(response, path)

    # -- checkpoints ----------------------------------------------------

    def checkpoint(self, name: str, comment: str) -> bytes:
        """``POST /v1/sprites/<name>/checkpoint``: the NDJSON progress stream."""
        body: dict[str, str] = {"comment": comment} if comment else {}
        return self.ok("POST", sprite_path(name, "checkpoint"), json=body).body

    def checkpoints(self, name: str) -> list[Any]:
        """``GET /v1/sprites/<name>/checkpoints``: the raw listing (a JSON array)."""
        body = self.ok("GET", sprite_path(name, "checkpoints")).json()
        if not isinstance(body, list):
            raise unexpected(PROVIDER, Reason.UNEXPECTED_CHECKPOINTS, body)
        return body

    def restore(self, name: str, checkpoint_id: str) -> bytes:
        """``POST /v1/sprites/<name>/checkpoints/<id>/restore``: the NDJSON stream."""
        return self.ok("POST", sprite_path(name, "checkpoints", checkpoint_id, "restore")).body


def _page_names(page: Any) -> list[str]:
    """The names of one listing page; a page of another shape is a ``ProviderError``."""
    entries = page.get("sprites") if isinstance(page, dict) else None
    if not isinstance(entries, list):
        raise unexpected(PROVIDER, Reason.MALFORMED_LISTING, page)
    names = []
    for entry in entries:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str):
            raise unexpected(PROVIDER, Reason.MALFORMED_LISTING, entry)
        names.append(name)
    return names
