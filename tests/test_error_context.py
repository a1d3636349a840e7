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


# -- a reason and its fields ------------------------------------------------------------


def test_an_error_built_from_a_reason_keeps_its_fields_and_builds_the_same_detail() -> None:
    error = Invalid(reasons.Reason.PATH, problem="must not be empty", message="path is empty")
    assert error.reason is reasons.Reason.PATH and error.problem == "must not be empty"
    assert error.detail == ("path", "must not be empty") and error.args == (error.detail,)
    assert type(error.detail[0]) is str  # the plain string, not the member
    assert error == Invalid(("path", "must not be empty"))  # the message is not compared
    assert "path is empty" in str(error) and "message='path is empty'" in repr(error)
    http = Unavailable(reasons.Reason.HTTP, status=503, body={"x": 1})
    assert (http.detail, http.status, http.body) == (("http", 503, {"x": 1}), 503, {"x": 1})
    assert NotFound(reasons.Reason.SANDBOX, name="b").detail == ("sandbox", "b")
    assert NotFound(reasons.Reason.SANDBOX, name="b", state="gone").detail == (
        "sandbox",
        "b",
        "gone",
    )
    assert DeadlineExpired(reasons.Reason.TERMINATION_TIMEOUT).detail == "termination_timeout"


def test_a_detail_given_as_it_was_keeps_its_shape_and_tells_its_reason_and_fields() -> None:
    legacy = NotFound(("sandbox", "b"))
    assert (legacy.reason, legacy.name, legacy.detail) == (
        reasons.Reason.SANDBOX,
        "b",
        ("sandbox", "b"),
    )
    assert Invalid("http").detail == "http"  # a bare string stays a bare string
    spelled = Unavailable((reasons.EXEC_TIMEOUT, 1.5))
    assert spelled.detail == ("exec_timeout", 1.5) and type(spelled.detail[0]) is str
    assert spelled.seconds == 1.5
    assert Invalid("no such reason").reason is None
    assert Unavailable("page_cap", limit=3).detail == ("page_cap", 3)  # a string with fields


def test_a_field_a_reason_does_not_carry_or_fields_without_a_reason_are_type_errors() -> None:
    with pytest.raises(TypeError, match="carries no status"):
        Invalid(reasons.Reason.PATH, status=400)
    with pytest.raises(TypeError, match="no reason"):
        Invalid("not a reason", problem="x")


def test_fields_and_message_survive_pickling() -> None:
    error = NotFound(reasons.Reason.SANDBOX, name="b", message="gone for good")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.reason, copy.name, copy.message, copy.detail) == (
        reasons.Reason.SANDBOX,
        "b",
        "gone for good",
        ("sandbox", "b"),
    )
