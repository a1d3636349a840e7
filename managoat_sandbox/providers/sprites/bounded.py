"""One bounded HTTP exchange for the "once" operations.

:func:`exchange` makes exactly one request on a fresh connection (no pool, so
a late answer to an abandoned request can never be read as another request's
answer), follows no redirect, never retries, reads at most ``limit`` bytes and
finishes by a monotonic deadline, whose own error (:meth:`~.._deadline.Deadline.error`)
it raises when that passes first. The request runs in a short-lived worker
thread whose connect and read timeouts are the remaining budget, so the
caller returns at the deadline and the worker ends about then too.

The request goes through a :class:`~..._transport.Transport` (the adapter's, or
the default ``requests`` one): its :meth:`~..._transport.Transport.isolated`
transport, released when the exchange ends, so the connection is the
exchange's own. Only the connection and the deadline are special here: the
body is read by the shared :func:`~..._http.read_bounded`, a transport failure
is the transport's :func:`~..._transport.transport_error` (``Failed.cause``),
and the callers map a status through Sprites' one :data:`.errors.POLICY`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ..._deadline import Deadline
from ..._http import DEFAULT_TRANSPORT, read_bounded, requests_module, transport_error
from ..._prepare import prepared
from ..._transport import Transport, endpoint
from ...errors import DeadlineExpired, Unavailable
from ...reasons import Reason

if TYPE_CHECKING:
    import requests

__all__ = ["Answer", "Cut", "Failed", "TooLarge", "exchange"]


class Failed(Exception):
    """The transport failed (connection refused, reset …); ``cause`` is the transport's
    :func:`~..._transport.transport_error` of it, naming the endpoint and never the URL."""

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
    transport: Transport | None = None,
    **kwargs: Any,
) -> Answer:
    """One request's complete answer, within the finite ``deadline``, through
    ``transport``'s isolated transport (default: the ``requests`` one).

    Raises ``deadline.error()`` when it passes first, ``Failed`` (transport),
    ``Cut`` (a body shorter than declared) or ``TooLarge`` (over ``limit``).
    """
    remaining = deadline.clamp()
    outcome = _Outcome()
    worker = threading.Thread(
        target=_run,
        args=(outcome,),
        kwargs={
            "transport": transport or DEFAULT_TRANSPORT,
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
        raise outcome.error or Failed(
            Unavailable(Reason.TRANSPORT, kind="no_answer", address=endpoint(url))
        )
    return outcome.answer


def _run(
    outcome: _Outcome,
    *,
    transport: Transport,
    method: str,
    url: str,
    headers: dict[str, str],
    deadline: Deadline,
    limit: int,
    extra: dict[str, Any],
) -> None:
    timeout = deadline.remaining() or 0.001
    own = transport.isolated()
    try:
        requests = requests_module()
        try:
            request = prepared(
                requests, method, url, {**requests.utils.default_headers(), **headers}, extra
            )
        except requests.RequestException as error:
            raise transport_error(error, url) from None
        response = own.handle_request(request, timeout=(timeout, timeout))
        outcome.response = response
        try:
            outcome.answer = Answer(response.status_code, read_bounded(response, limit))
        finally:
            response.close()
    except Unavailable as error:
        outcome.error = _failure(error, deadline)
    except Exception as error:
        outcome.error = (
            deadline.error() if deadline.expired() else Failed(transport_error(error, url))
        )
    finally:
        own.release()
        outcome.done.set()


def _failure(error: Unavailable, deadline: Deadline) -> Exception:
    """What a failed exchange raises for the shared layer's ``error``: ``TooLarge`` past
    the limit, ``Cut`` for a body that broke off, the deadline's error for a timeout
    (or any failure once the deadline has passed), else ``Failed``."""
    if error.reason is Reason.RESPONSE_TOO_LARGE:
        return TooLarge()
    if error.reason is Reason.TRANSPORT and error.kind == "ChunkedEncodingError":
        return Cut()
    if isinstance(error, DeadlineExpired) or deadline.expired():
        return deadline.error()
    return Failed(error)
