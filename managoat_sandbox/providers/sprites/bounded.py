"""One bounded HTTP exchange for the "once" operations.

:func:`exchange` makes exactly one request on a fresh connection (no pool, so
a late answer to an abandoned request can never be read as another request's
answer), follows no redirect, never retries, reads at most ``limit`` bytes and
finishes by a monotonic deadline, whose own error (:meth:`~.._deadline.Deadline.error`)
it raises when that passes first. The request runs in a short-lived worker
thread whose connect and read timeouts are the remaining budget, so the
caller returns at the deadline and the worker ends about then too.

Only the connection and the deadline are special here: a transport failure is
described by the shared :func:`~.._http.transport_error` (``Failed.cause``),
and the callers map a status through Sprites' one :data:`.errors.POLICY`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ..._deadline import Deadline
from ..._http import endpoint, requests_module, transport_error
from ...errors import Unavailable

if TYPE_CHECKING:
    import requests

__all__ = ["Answer", "Cut", "Failed", "TooLarge", "exchange"]

_CHUNK = 4096


class Failed(Exception):
    """The transport failed (connection refused, reset …); ``cause`` is the shared
    :func:`~.._http.transport_error` of it, naming the endpoint and never the URL."""

    def __init__(self, cause: Unavailable) -> None:
        super().__init__(cause)
        self.cause = cause


class Cut(Exception):
    """The body ended before its declared length: an answer that cannot count."""


class TooLarge(Exception):
    """The body was longer than the limit."""


@attrs.frozen
class Answer:
    """A complete answer: status and body (headers are not needed by the callers)."""

    status: int
    body: bytes = attrs.field(repr=False)


@attrs.define
class _Outcome:
    answer: Answer | None = None
    error: Exception | None = None
    response: requests.Response | None = None
    done: threading.Event = attrs.field(factory=threading.Event)


def exchange(
    method: str,
    url: str,
    *,
    headers: Mapping[str, str],
    deadline: Deadline,
    limit: int,
    **kwargs: Any,
) -> Answer:
    """One request's complete answer, within the finite ``deadline``.

    Raises ``deadline.error()`` when it passes first, ``Failed`` (transport),
    ``Cut`` (a body shorter than declared) or ``TooLarge`` (over ``limit``).
    """
    remaining = deadline.clamp()
    outcome = _Outcome()
    worker = threading.Thread(
        target=_run,
        args=(outcome,),
        kwargs={
            "method": method,
            "url": url,
            "headers": dict(headers),
            "deadline": deadline,
            "limit": limit,
            "extra": kwargs,
        },
        name="sprites-bounded-request",
        daemon=True,
    )
    worker.start()
    if not outcome.done.wait(remaining):
        if outcome.response is not None:
            with contextlib.suppress(Exception):
                outcome.response.close()
        raise deadline.error()
    if outcome.answer is None:
        raise outcome.error or Failed(Unavailable(("transport", "no_answer", endpoint(url))))
    return outcome.answer


def _run(
    outcome: _Outcome,
    *,
    method: str,
    url: str,
    headers: dict[str, str],
    deadline: Deadline,
    limit: int,
    extra: dict[str, Any],
) -> None:
    timeout = deadline.remaining() or 0.001
    requests = requests_module()
    session = requests.Session()
    session.trust_env = False
    try:
        response = session.request(
            method,
            url,
            headers=headers,
            timeout=(timeout, timeout),
            stream=True,
            allow_redirects=False,
            **extra,
        )
        outcome.response = response
        try:
            outcome.answer = Answer(response.status_code, _read(response, limit))
        finally:
            response.close()
    except TooLarge as error:
        outcome.error = error
    except requests.exceptions.ChunkedEncodingError:
        outcome.error = Cut()
    except Exception as error:
        expired = isinstance(error, requests.Timeout) or deadline.expired()
        outcome.error = deadline.error() if expired else Failed(transport_error(error, url))
    finally:
        session.close()
        outcome.done.set()


def _read(response: requests.Response, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_content(_CHUNK):
        size += len(chunk)
        if size > limit:
            raise TooLarge()
        chunks.append(chunk)
    return b"".join(chunks)
