"""The bounded "once" operations on the wire: docs/protocols/sprites.md#bounded-once-operations."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
import responses

import managoat_sandbox as sandbox
from managoat_sandbox import config, reasons
from managoat_sandbox.errors import (
    AlreadyExists,
    Denied,
    Invalid,
    NotSupported,
    RateLimited,
    SandboxError,
    Unavailable,
)
from managoat_sandbox.providers._endpoint import Endpoint
from managoat_sandbox.providers.sprites import Sprites
from managoat_sandbox.types import Handle

from .wire import BASE, body, calls, ndjson, query, url

BOX = Handle("sprites", "box")
PROSE = "the provider's secret-ish prose 4f1a"
PROSE_BODY = {"error": "x", "message": PROSE}


def _no_prose(error: SandboxError) -> None:
    for text in (str(error), repr(error), repr(error.detail)):
        assert PROSE not in text


# -- create_new (docs/protocols/sprites.md#create_new) --------------------------------------------


def test_create_new_is_one_post_with_the_full_body(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(url("/v1/sprites"), json={"id": "uuid-1", "name": "box"}, status=201)
    handle = adapter.create_new("box")
    assert handle == BOX and handle.instance_id == "uuid-1"
    assert handle.private == Endpoint(BASE)
    assert calls(api) == [("POST", "/v1/sprites")]
    assert body(api) == {
        "name": "box",
        "wait_for_capacity": False,
        "url_settings": {"auth": "public"},
    }


def test_create_new_follows_public_urls_and_wait_for_capacity(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    config.configure("sprites", public_urls=False)
    api.post(url("/v1/sprites"), json={"id": "uuid-1", "name": "box"}, status=200)
    adapter.create_new("box", wait_for_capacity=True, timeout=5)
    assert body(api) == {
        "name": "box",
        "wait_for_capacity": True,
        "url_settings": {"auth": "sprite"},
    }
    assert len(api.calls) == 1


def test_create_new_409_is_already_exists_with_no_adoption(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(url("/v1/sprites"), json=PROSE_BODY, status=409)
    with pytest.raises(AlreadyExists) as raised:
        adapter.create_new("box")
    _no_prose(raised.value)
    assert calls(api) == [("POST", "/v1/sprites")]


UNCONFIRMED_BODIES = [
    {"id": "uuid-1"},
    {"id": "uuid-1", "name": "other"},
    {"name": "box"},
    {"name": "box", "id": ""},
    {"name": "box", "id": 12},
    {"name": "box", "id": "x" * 257},
    "not json",
    ["name", "box"],
    {"name": "box", "id": "uuid-1", "pad": "x" * 70_000},
]


@pytest.mark.parametrize(
    "answer",
    UNCONFIRMED_BODIES,
    ids=[
        "no-name",
        "wrong-name",
        "no-id",
        "empty-id",
        "int-id",
        "long-id",
        "not-json",
        "not-object",
        "oversize",
    ],
)
def test_create_new_success_status_with_a_malformed_body_is_unconfirmed(
    api: responses.RequestsMock, adapter: Sprites, answer: Any
) -> None:
    api.post(
        url("/v1/sprites"),
        status=201,
        body=answer if isinstance(answer, str) else json.dumps(answer),
    )
    with pytest.raises(Unavailable) as raised:
        adapter.create_new("box")
    assert raised.value.detail == "create_unconfirmed"
    assert len(api.calls) == 1


def test_create_new_accepts_a_256_character_id(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(url("/v1/sprites"), json={"name": "box", "id": "i" * 256}, status=201)
    assert adapter.create_new("box").instance_id == "i" * 256


SANITISED = [
    (302, Invalid(("http", 302, {}))),
    (400, Invalid(("http", 400, {}))),
    (401, Denied(("http", 401, {}))),
    (429, RateLimited(None)),
    (503, Unavailable(("http", 503, {}))),
]


@pytest.mark.parametrize(("status", "expected"), SANITISED)
def test_create_new_other_statuses_are_sanitised_never_replayed_or_redirected(
    api: responses.RequestsMock, adapter: Sprites, status: int, expected: SandboxError
) -> None:
    api.post(
        url("/v1/sprites"),
        json={**PROSE_BODY, "retry_after_seconds": 3},
        status=status,
        headers={"Location": url("/v1/elsewhere"), "Retry-After": "3"},
    )
    with pytest.raises(SandboxError) as raised:
        adapter.create_new("box")
    assert raised.value == expected
    _no_prose(raised.value)
    assert calls(api) == [("POST", "/v1/sprites")]


def test_create_new_transport_failure(api: responses.RequestsMock, adapter: Sprites) -> None:
    api.post(url("/v1/sprites"), body=requests.ConnectionError("reset by " + PROSE))
    with pytest.raises(Unavailable) as raised:
        adapter.create_new("box")
    assert raised.value.detail == "create_transport_failed"
    assert "api.sprites.test:443" in str(raised.value.__cause__)
    _no_prose(raised.value)


def test_create_new_truncated_answer_is_unconfirmed(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(url("/v1/sprites"), body=requests.exceptions.ChunkedEncodingError("IncompleteRead"))
    with pytest.raises(Unavailable) as raised:
        adapter.create_new("box")
    assert raised.value.detail == "create_unconfirmed"


@pytest.mark.parametrize("timeout", [0, -1, 120.001, "1000", None, True, float("nan")])
def test_create_new_bad_timeout_is_invalid_through_the_facade_before_credentials(
    monkeypatch: pytest.MonkeyPatch, timeout: Any
) -> None:
    monkeypatch.delenv("SPRITES_TOKEN", raising=False)
    with pytest.raises(Invalid) as raised:
        sandbox.create_new("sprites", "box", timeout=timeout)
    assert raised.value.detail == "create_timeout"


@pytest.mark.parametrize("value", ["true", 1, None, {}])
def test_create_new_badly_typed_option_is_invalid_before_credentials(
    monkeypatch: pytest.MonkeyPatch, value: Any
) -> None:
    monkeypatch.delenv("SPRITES_TOKEN", raising=False)
    with pytest.raises(Invalid) as raised:
        Sprites().create_new("box", wait_for_capacity=value)
    assert raised.value.detail == "create_options"


@pytest.mark.parametrize("option", ["config", "retry"])
def test_create_new_unknown_option_is_a_type_error(adapter: Sprites, option: str) -> None:
    with pytest.raises(TypeError):
        adapter.create_new("box", **{option: True})


# -- destroy_once (docs/protocols/sprites.md#destroy_once) ----------------------------------------


@pytest.mark.parametrize("status", [200, 202, 204])
def test_destroy_once_confirms_with_exactly_one_get(
    api: responses.RequestsMock, adapter: Sprites, status: int
) -> None:
    api.delete(url("/v1/sprites/box"), status=status)
    api.get(url("/v1/sprites/box"), json={"error": "not_found"}, status=404)
    adapter.destroy_once(BOX)
    assert calls(api) == [("DELETE", "/v1/sprites/box"), ("GET", "/v1/sprites/box")]


def test_destroy_once_404_is_done_without_a_get(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.delete(url("/v1/sprites/box"), status=404)
    adapter.destroy_once(BOX, timeout=1)
    assert calls(api) == [("DELETE", "/v1/sprites/box")]


@pytest.mark.parametrize(("deleted", "probed"), [(202, 200), (204, 200), (200, 503), (200, 302)])
def test_destroy_once_without_a_404_probe_is_unconfirmed(
    api: responses.RequestsMock, adapter: Sprites, deleted: int, probed: int
) -> None:
    api.delete(url("/v1/sprites/box"), status=deleted)
    api.get(
        url("/v1/sprites/box"), json=PROSE_BODY, status=probed, headers={"Location": url("/v1/x")}
    )
    with pytest.raises(Unavailable) as raised:
        adapter.destroy_once(BOX)
    assert raised.value.detail == "delete_unconfirmed"
    assert calls(api) == [("DELETE", "/v1/sprites/box"), ("GET", "/v1/sprites/box")]


@pytest.mark.parametrize("status", [302, 401, 429, 503, 201])
def test_destroy_once_other_delete_statuses_are_unconfirmed_with_no_get(
    api: responses.RequestsMock, adapter: Sprites, status: int
) -> None:
    api.delete(
        url("/v1/sprites/box"),
        json=PROSE_BODY,
        status=status,
        headers={"Location": url("/v1/x"), "Retry-After": "1"},
    )
    with pytest.raises(Unavailable) as raised:
        adapter.destroy_once(BOX)
    assert raised.value.detail == "delete_unconfirmed"
    assert calls(api) == [("DELETE", "/v1/sprites/box")]


def test_destroy_once_oversize_answer_is_unconfirmed(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.delete(url("/v1/sprites/box"), body="x" * 70_000, status=200)
    with pytest.raises(Unavailable) as raised:
        adapter.destroy_once(BOX)
    assert raised.value.detail == "delete_unconfirmed"
    assert len(api.calls) == 1


def test_destroy_once_transport_failure(api: responses.RequestsMock, adapter: Sprites) -> None:
    api.delete(url("/v1/sprites/box"), body=requests.ConnectionError("boom"))
    with pytest.raises(Unavailable) as raised:
        adapter.destroy_once(BOX)
    assert raised.value.detail == "delete_transport_failed"
    assert "api.sprites.test:443" in str(raised.value.__cause__)


@pytest.mark.parametrize("timeout", [None, "100", 0, -1, 120.001, False])
def test_destroy_once_bad_timeout_is_invalid_through_the_facade_before_provider_access(
    monkeypatch: pytest.MonkeyPatch, timeout: Any
) -> None:
    monkeypatch.delenv("SPRITES_TOKEN", raising=False)
    with pytest.raises(Invalid) as raised:
        sandbox.destroy_once(BOX, timeout=timeout)
    assert raised.value.detail == "delete_timeout"


def test_destroy_once_unknown_option_is_a_type_error(adapter: Sprites) -> None:
    with pytest.raises(TypeError):
        adapter.destroy_once(BOX, retry=True)  # type: ignore[call-arg]


# -- terminate_session (docs/protocols/sprites.md#terminate_session) ------------------------------

SIGNAL_TERM = {"type": "signal", "message": "Signaling SIGTERM", "signal": "SIGTERM", "pid": 19}
SIGNAL_KILL = {"type": "signal", "message": "Signaling SIGKILL", "signal": "SIGKILL", "pid": 19}
EXITED = {"type": "exited", "message": "Process exited"}
KILLED = {"type": "killed", "message": "Process killed"}
TIMEOUT = {"type": "timeout", "message": "Timeout after 10s, sending SIGKILL"}


def complete(code: Any) -> dict[str, Any]:
    return {"type": "complete", "exit_code": code}


KILL_PATH = "/v1/sprites/box/exec/19/kill"

GRACEFUL_OK = [
    ndjson(SIGNAL_TERM, EXITED, complete(143)),
    ndjson(SIGNAL_TERM, TIMEOUT, KILLED, complete(137)),
    ndjson(EXITED, complete(0)),
    ndjson(SIGNAL_TERM, EXITED, complete(255)) + "\n\n",
]


@pytest.mark.parametrize("stream", GRACEFUL_OK)
def test_graceful_termination_confirmed(
    api: responses.RequestsMock, adapter: Sprites, stream: str
) -> None:
    api.post(url(KILL_PATH), body=stream, content_type="application/x-ndjson")
    adapter.terminate_session(BOX, "19", timeout=2.5)
    assert calls(api) == [("POST", KILL_PATH)]
    assert query(api) == [("signal", "SIGTERM"), ("timeout", "2500ms")]


def test_timeout_is_sent_in_whole_milliseconds_rounded_up(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(url(KILL_PATH), body=ndjson(SIGNAL_TERM, EXITED, complete(0)))
    adapter.terminate_session(BOX, "19", timeout=0.0011)
    assert query(api) == [("signal", "SIGTERM"), ("timeout", "2ms")]


def test_force_termination_needs_the_sigkill_signal_event(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(url(KILL_PATH), body=ndjson(SIGNAL_KILL, KILLED, complete(137)))
    adapter.terminate_session(BOX, "19", mode="force")
    assert query(api) == [("signal", "SIGKILL"), ("timeout", "10000ms")]


UNCONFIRMED_STREAMS = {
    "empty": "",
    "signal-alone": ndjson(SIGNAL_TERM),
    "complete-alone": ndjson(complete(0)),
    "no-complete": ndjson(SIGNAL_TERM, EXITED),
    "malformed": ndjson(SIGNAL_TERM, '{"type":"exited"', complete(0)),
    "non-object": ndjson(SIGNAL_TERM, EXITED, "[1]", complete(0)),
    "code-missing": ndjson(SIGNAL_TERM, EXITED, {"type": "complete"}),
    "error-first": ndjson(
        SIGNAL_TERM, {"type": "error", "message": "may survive"}, EXITED, complete(0)
    ),
    "unknown-event": ndjson(SIGNAL_TERM, {"type": "mystery"}, EXITED, complete(0)),
    "after-complete": ndjson(SIGNAL_TERM, EXITED, complete(0), EXITED),
    "code--1": ndjson(SIGNAL_TERM, EXITED, complete(-1)),
    "code-256": ndjson(SIGNAL_TERM, EXITED, complete(256)),
    "code-1.5": ndjson(SIGNAL_TERM, EXITED, complete(1.5)),
    "code-str": ndjson(SIGNAL_TERM, EXITED, complete("137")),
    "code-bool": ndjson(SIGNAL_TERM, EXITED, complete(True)),
    "oversize": ndjson(*([SIGNAL_TERM] * 300), EXITED, complete(0)),
}


@pytest.mark.parametrize("mode", ["graceful", "force"])
@pytest.mark.parametrize(
    "stream", list(UNCONFIRMED_STREAMS.values()), ids=list(UNCONFIRMED_STREAMS)
)
def test_anything_else_with_200_is_unconfirmed(
    api: responses.RequestsMock, adapter: Sprites, stream: str, mode: str
) -> None:
    kill_stream = stream.replace('"SIGTERM"', '"SIGKILL"') if mode == "force" else stream
    api.post(url(KILL_PATH), body=kill_stream)
    with pytest.raises(Unavailable) as raised:
        adapter.terminate_session(BOX, "19", mode=mode)
    assert raised.value.detail == reasons.TERMINATION_UNCONFIRMED
    assert len(api.calls) == 1


def test_oversize_case_is_really_over_16_kib() -> None:
    assert len(UNCONFIRMED_STREAMS["oversize"]) > 16 * 1024


@pytest.mark.parametrize(
    "signal_event",
    [
        {"type": "signal", "signal": None, "pid": 19},
        SIGNAL_TERM,
        {"type": "signal", "signal": "SIGKILL"},
        {"type": "signal", "signal": "SIGKILL", "pid": 0},
        {"type": "signal", "signal": "SIGKILL", "pid": "19"},
    ],
)
def test_force_without_a_sigkill_pid_event_is_unconfirmed(
    api: responses.RequestsMock, adapter: Sprites, signal_event: dict[str, Any]
) -> None:
    api.post(url(KILL_PATH), body=ndjson(signal_event, KILLED, complete(137)))
    with pytest.raises(Unavailable) as raised:
        adapter.terminate_session(BOX, "19", mode="force")
    assert raised.value.detail == reasons.TERMINATION_UNCONFIRMED


# One answer for "already gone" (docs/protocols/contract.md#terminate_session): a 410
# (already exited) is success in both modes; a 404 is success gracefully (no confirming
# request); by force, success only for a session the sprite still lists (it has ended),
# else an absent session (never there, or ended and forgotten): unconfirmed.


def test_a_graceful_404_is_success_without_a_confirming_request(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(url(KILL_PATH), json={"error": "not_found"}, status=404)
    adapter.terminate_session(BOX, "19")
    assert calls(api) == [("POST", KILL_PATH)]


def test_a_force_404_for_a_session_the_sprite_lists_is_an_ended_session(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(url(KILL_PATH), json={"error": "not_found"}, status=404)
    api.get(url("/v1/sprites/box/exec"), json={"sessions": [{"id": 7}, {"id": 19}]})
    adapter.terminate_session(BOX, "19", mode="force")
    assert calls(api) == [("POST", KILL_PATH), ("GET", "/v1/sprites/box/exec")]


@pytest.mark.parametrize(
    ("status", "listing"), [(200, {"sessions": [{"id": 7}]}), (404, {"error": "not_found"})]
)
def test_a_force_404_for_a_session_the_sprite_does_not_list_is_unconfirmed(
    api: responses.RequestsMock, adapter: Sprites, status: int, listing: dict[str, Any]
) -> None:
    api.post(url(KILL_PATH), json={"error": "not_found"}, status=404)
    api.get(url("/v1/sprites/box/exec"), json=listing, status=status)
    with pytest.raises(Unavailable) as raised:
        adapter.terminate_session(BOX, "19", mode="force")
    assert raised.value == Unavailable(reasons.TERMINATION_UNCONFIRMED)


@pytest.mark.parametrize("mode", ["graceful", "force"])
def test_a_410_is_an_ended_session(
    api: responses.RequestsMock, adapter: Sprites, mode: str
) -> None:
    api.post(url(KILL_PATH), json={"error": "gone"}, status=410)
    adapter.terminate_session(BOX, "19", mode=mode)
    assert calls(api) == [("POST", KILL_PATH)]


@pytest.mark.parametrize(("status", "expected"), SANITISED)
def test_termination_other_statuses_are_sanitised(
    api: responses.RequestsMock, adapter: Sprites, status: int, expected: SandboxError
) -> None:
    api.post(
        url(KILL_PATH),
        json={**PROSE_BODY, "retry_after_seconds": 4},
        status=status,
        headers={"Location": url("/v1/elsewhere"), "Retry-After": "4"},
    )
    with pytest.raises(SandboxError) as raised:
        adapter.terminate_session(BOX, "19")
    assert raised.value == expected
    _no_prose(raised.value)
    assert calls(api) == [("POST", KILL_PATH)]


def test_termination_non_200_success_is_unconfirmed(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(url(KILL_PATH), body=ndjson(SIGNAL_TERM, EXITED, complete(0)), status=202)
    with pytest.raises(Unavailable) as raised:
        adapter.terminate_session(BOX, "19")
    assert raised.value.detail == reasons.TERMINATION_UNCONFIRMED


def test_termination_transport_failure_leaks_nothing(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(url(KILL_PATH), body=requests.ConnectionError(PROSE))
    with pytest.raises(Unavailable) as raised:
        adapter.terminate_session(BOX, "19")
    assert raised.value.detail == reasons.TERMINATION_TRANSPORT_FAILED
    assert "api.sprites.test:443" in str(raised.value.__cause__)
    _no_prose(raised.value)


@pytest.mark.parametrize(
    ("session", "timeout", "mode"),
    [
        ("", 1, "graceful"),
        ("../other", 1, "graceful"),
        ("a/b", 1, "graceful"),
        ("a?x=1", 1, "graceful"),
        ("x" * 257, 1, "graceful"),
        (None, 1, "graceful"),
        ("19", 0, "graceful"),
        ("19", 30.001, "graceful"),
        ("19", True, "graceful"),
        ("19", "1", "graceful"),
        ("19", 1, "unknown"),
        ("19", 1, None),
    ],
)
def test_invalid_termination_requests_are_refused_by_the_facade_before_credentials(
    monkeypatch: pytest.MonkeyPatch, session: Any, timeout: Any, mode: Any
) -> None:
    monkeypatch.delenv("SPRITES_TOKEN", raising=False)
    with pytest.raises(Invalid) as raised:
        sandbox.terminate_session(BOX, session, timeout=timeout, mode=mode)
    assert raised.value.detail == reasons.TERMINATION_REQUEST


# -- create_checkpoint_once (docs/protocols/sprites.md#create_checkpoint_once) --------------------

COMMENT = "sandbox-operation:op-1"
INFO = {"type": "info", "data": "Creating checkpoint..."}
DONE = {"type": "complete", "data": "Checkpoint v8 created"}
GOOD_LISTING = [
    {"id": "Current", "comment": None},
    {"id": "v8", "comment": COMMENT, "create_time": "t8"},
    {"id": "v7", "comment": "sandbox-operation:op-0"},
    {"id": "v6"},
]


@pytest.fixture
def enabled() -> None:
    config.configure("sprites", checkpoint_creation_enabled=True)


@pytest.mark.usefixtures("enabled")
def test_create_checkpoint_once_posts_the_comment_then_reads_one_listing(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(url("/v1/sprites/box/checkpoint"), body=ndjson(INFO, INFO, DONE))
    api.get(url("/v1/sprites/box/checkpoints"), json=GOOD_LISTING)
    assert adapter.create_checkpoint_once(BOX, operation_id="op-1") == "v8"
    assert calls(api) == [
        ("POST", "/v1/sprites/box/checkpoint"),
        ("GET", "/v1/sprites/box/checkpoints"),
    ]
    assert body(api) == {"comment": COMMENT}


@pytest.mark.usefixtures("enabled")
def test_create_checkpoint_once_accepts_a_complete_without_info(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(url("/v1/sprites/box/checkpoint"), body=ndjson(DONE))
    api.get(url("/v1/sprites/box/checkpoints"), json=GOOD_LISTING)
    assert adapter.create_checkpoint_once(BOX, operation_id="op-1", timeout=3) == "v8"


@pytest.mark.usefixtures("enabled")
@pytest.mark.parametrize("status", [201, 202, 204, 302, 400, 401, 404, 429, 500, 503])
def test_create_checkpoint_once_post_status_other_than_200_is_unconfirmed_with_no_get(
    api: responses.RequestsMock, adapter: Sprites, status: int
) -> None:
    api.post(
        url("/v1/sprites/box/checkpoint"),
        body=ndjson(INFO, DONE),
        status=status,
        headers={"Location": url("/v1/x")},
    )
    with pytest.raises(Unavailable) as raised:
        adapter.create_checkpoint_once(BOX, operation_id="op-1")
    assert raised.value.detail == "checkpoint_unconfirmed"
    assert calls(api) == [("POST", "/v1/sprites/box/checkpoint")]


BAD_STREAMS = {
    "empty": "",
    "array": "[]\n",
    "empty-object": "{}\n",
    "not-json": "Checkpoint v8 created\n",
    "info-only": ndjson(INFO),
    "error-event": ndjson(INFO, {"type": "error", "error": "disk full"}, DONE),
    "error-null": ndjson({**INFO, "error": None}, DONE),
    "error-on-complete": ndjson(INFO, {**DONE, "error": None}),
    "data-not-string": ndjson({"type": "info", "data": 4}, DONE),
    "complete-data-missing": ndjson(INFO, {"type": "complete"}),
    "two-completes": ndjson(INFO, DONE, DONE),
    "after-complete": ndjson(INFO, DONE, INFO),
    "unknown-event": ndjson({"type": "progress", "data": "50%"}, DONE),
}


@pytest.mark.usefixtures("enabled")
@pytest.mark.parametrize("stream", list(BAD_STREAMS.values()), ids=list(BAD_STREAMS))
def test_create_checkpoint_once_malformed_stream_is_unconfirmed_with_no_get(
    api: responses.RequestsMock, adapter: Sprites, stream: str
) -> None:
    api.post(url("/v1/sprites/box/checkpoint"), body=stream)
    with pytest.raises(Unavailable) as raised:
        adapter.create_checkpoint_once(BOX, operation_id="op-1")
    assert raised.value.detail == "checkpoint_unconfirmed"
    assert len(api.calls) == 1


BAD_LISTINGS: dict[str, Any] = {
    "none-matching": [{"id": "v7", "comment": "sandbox-operation:op-0"}],
    "two-matching": [{"id": "v8", "comment": COMMENT}, {"id": "v9", "comment": COMMENT}],
    "current-matching": [{"id": "Current", "comment": COMMENT}],
    "empty-id": [{"id": "", "comment": COMMENT}],
    "long-id": [{"id": "x" * 257, "comment": COMMENT}],
    "null-id": [{"id": None}, {"id": "v8", "comment": COMMENT}],
    "non-string-comment": [{"id": "v1", "comment": 5}, {"id": "v8", "comment": COMMENT}],
    "non-object": ["v1", {"id": "v8", "comment": COMMENT}],
    "object": {"id": "v8", "comment": COMMENT},
    "not-json": "nope",
}


@pytest.mark.usefixtures("enabled")
@pytest.mark.parametrize("listing", list(BAD_LISTINGS.values()), ids=list(BAD_LISTINGS))
def test_create_checkpoint_once_ambiguous_or_malformed_listing_is_unconfirmed(
    api: responses.RequestsMock, adapter: Sprites, listing: Any
) -> None:
    api.post(url("/v1/sprites/box/checkpoint"), body=ndjson(INFO, DONE))
    api.get(
        url("/v1/sprites/box/checkpoints"),
        body=listing if isinstance(listing, str) else json.dumps(listing),
    )
    with pytest.raises(Unavailable) as raised:
        adapter.create_checkpoint_once(BOX, operation_id="op-1")
    assert raised.value.detail == "checkpoint_unconfirmed"
    assert len(api.calls) == 2


@pytest.mark.usefixtures("enabled")
@pytest.mark.parametrize("status", [202, 302, 404, 429, 503])
def test_create_checkpoint_once_listing_status_other_than_200_is_unconfirmed(
    api: responses.RequestsMock, adapter: Sprites, status: int
) -> None:
    api.post(url("/v1/sprites/box/checkpoint"), body=ndjson(INFO, DONE))
    api.get(url("/v1/sprites/box/checkpoints"), json=GOOD_LISTING, status=status)
    with pytest.raises(Unavailable) as raised:
        adapter.create_checkpoint_once(BOX, operation_id="op-1")
    assert raised.value.detail == "checkpoint_unconfirmed"


@pytest.mark.usefixtures("enabled")
def test_create_checkpoint_once_shares_one_64_kib_budget(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    padding = [{"type": "info", "data": "x" * 1000}] * 40
    stream = ndjson(*padding, DONE)
    api.post(url("/v1/sprites/box/checkpoint"), body=stream)
    listing = [*GOOD_LISTING, *({"id": f"p{n}", "comment": "y" * 200} for n in range(180))]
    api.get(url("/v1/sprites/box/checkpoints"), json=listing)
    each = (len(stream), len(json.dumps(listing)))
    assert max(each) < 64 * 1024 < sum(each), "each answer fits alone, both do not"
    with pytest.raises(Unavailable) as raised:
        adapter.create_checkpoint_once(BOX, operation_id="op-1")
    assert raised.value.detail == "checkpoint_unconfirmed"


@pytest.mark.usefixtures("enabled")
def test_create_checkpoint_once_truncated_stream_is_unconfirmed(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(
        url("/v1/sprites/box/checkpoint"),
        body=requests.exceptions.ChunkedEncodingError("IncompleteRead"),
    )
    with pytest.raises(Unavailable) as raised:
        adapter.create_checkpoint_once(BOX, operation_id="op-1")
    assert raised.value.detail == "checkpoint_unconfirmed"


@pytest.mark.usefixtures("enabled")
def test_create_checkpoint_once_transport_failure(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(url("/v1/sprites/box/checkpoint"), body=requests.ConnectionError("x"))
    with pytest.raises(Unavailable) as raised:
        adapter.create_checkpoint_once(BOX, operation_id="op-1")
    assert raised.value.detail == "checkpoint_transport_failed"
    assert "api.sprites.test:443" in str(raised.value.__cause__)


@pytest.mark.usefixtures("enabled")
@pytest.mark.parametrize("operation_id", [None, "", "contains space", "a\n", "x" * 129, 12])
def test_create_checkpoint_once_bad_operation_id(
    monkeypatch: pytest.MonkeyPatch, operation_id: Any
) -> None:
    monkeypatch.delenv("SPRITES_TOKEN", raising=False)
    with pytest.raises(Invalid) as raised:
        Sprites().create_checkpoint_once(BOX, operation_id=operation_id)
    assert raised.value.detail == "checkpoint_operation_id"


@pytest.mark.usefixtures("enabled")
@pytest.mark.parametrize("timeout", [0, -1, 120.001, "5", None])
def test_create_checkpoint_once_bad_timeout_through_the_facade(
    monkeypatch: pytest.MonkeyPatch, timeout: Any
) -> None:
    monkeypatch.delenv("SPRITES_TOKEN", raising=False)
    with pytest.raises(Invalid) as raised:
        sandbox.create_checkpoint_once(BOX, operation_id="op-1", timeout=timeout)
    assert raised.value.detail == "checkpoint_timeout"


@pytest.mark.usefixtures("enabled")
def test_create_checkpoint_once_unknown_option_is_a_type_error(adapter: Sprites) -> None:
    with pytest.raises(TypeError):
        adapter.create_checkpoint_once(BOX, operation_id="op-1", comment="x")  # type: ignore[call-arg]


def test_create_checkpoint_once_disabled_is_not_supported_before_validation(
    adapter: Sprites,
) -> None:
    with pytest.raises(NotSupported):
        adapter.create_checkpoint_once(BOX, operation_id="bad id")
