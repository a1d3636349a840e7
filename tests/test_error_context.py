"""Typed error context: the HTTP answer's status, body and request id on the error,
DeadlineExpired for every expiry, and reasons read without indexing details."""

from __future__ import annotations

import pickle

import pytest

from managoat_sandbox import reasons
from managoat_sandbox._deadline import Deadline
from managoat_sandbox._http import error_for
from managoat_sandbox.errors import (
    DeadlineExpired,
    Invalid,
    NotFound,
    RateLimited,
    SandboxError,
    Unavailable,
)


def test_an_http_error_carries_status_body_and_request_id_shown_in_repr() -> None:
    error = error_for(
        404, b'{"message": "gone"}', {"Content-Type": "application/json", "x-request-id": "req-42"}
    )
    assert isinstance(error, NotFound)
    assert (error.status, error.body, error.request_id) == (404, {"message": "gone"}, "req-42")
    assert "status=404" in repr(error) and "request_id='req-42'" in repr(error)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.status, copy.request_id) == (404, "req-42")


def test_a_rate_limit_keeps_its_status_though_its_detail_is_the_advice() -> None:
    error = error_for(429, b"", {"Retry-After": "3"})
    assert isinstance(error, RateLimited)
    assert (error.retry_after, error.status, error.body) == (3.0, 429, None)


@pytest.mark.parametrize("value", ["x" * 200, "bad\nid"])
def test_an_unusable_request_id_is_dropped(value: str) -> None:
    assert error_for(500, b"", {"X-Request-Id": value}).request_id is None


def test_errors_not_made_from_an_answer_have_no_http_context() -> None:
    error = Unavailable(reasons.CLOSED_BEFORE_EXIT)
    assert (error.status, error.body, error.request_id) == (None, None, None)
    assert repr(error) == "Unavailable('closed_before_exit')"


def test_every_deadline_expiry_is_one_class_and_still_an_unavailable() -> None:
    expired = Deadline(0).error()
    assert isinstance(expired, DeadlineExpired) and isinstance(expired, Unavailable)
    assert expired == Unavailable((reasons.EXEC_TIMEOUT, 0))
    assert hash(expired) == hash(Unavailable((reasons.EXEC_TIMEOUT, 0)))
    assert expired.taxonomy() is Unavailable
    assert Unavailable("x").taxonomy() is Unavailable
    assert expired != Invalid((reasons.EXEC_TIMEOUT, 0))


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (Unavailable((reasons.TRANSPORT, "ConnectionError", "h:1")), reasons.TRANSPORT),
        (Unavailable(reasons.TIMEOUT), reasons.TIMEOUT),
        (RateLimited(2.0), None),
        (Invalid(None), None),
    ],
)
def test_reason_of_reads_the_reason_without_indexing(
    error: SandboxError, reason: str | None
) -> None:
    assert reasons.reason_of(error) == reason
