"""Wire contract of the Sprites REST calls: paths, query strings, bodies, error mapping."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import responses

import managoat_sandbox as sandbox
from managoat_sandbox import config
from managoat_sandbox.contract import Capability
from managoat_sandbox.errors import (
    Denied,
    Invalid,
    NotFound,
    NotSupported,
    ProviderError,
    RateLimited,
    RestoreFailed,
    Truncated,
    Unavailable,
)
from managoat_sandbox.providers.sprites import Sprites
from managoat_sandbox.types import Handle, NetworkPolicy, Session

from .wire import BASE, TOKEN, body, calls, ndjson, query, url

BOX = Handle("sprites", "box")

#: Every operation that talks to the provider, as (label, call).
OPERATIONS: list[tuple[str, Callable[[Sprites], Any]]] = [
    ("create", lambda a: a.create("box")),
    ("create_new", lambda a: a.create_new("box")),
    ("get", lambda a: a.get(BOX)),
    ("destroy", lambda a: a.destroy(BOX)),
    ("destroy_once", lambda a: a.destroy_once(BOX)),
    ("list_all_names", lambda a: a.list_all_names()),
    ("suspend", lambda a: a.suspend(BOX)),
    ("resume", lambda a: a.resume(BOX)),
    ("write_file", lambda a: a.write_file(BOX, "/f", b"x")),
    ("read_file", lambda a: a.read_file(BOX, "/f")),
    ("list_files", lambda a: a.list_files(BOX, "/")),
    ("exec", lambda a: a.exec(BOX, "true")),
    ("spawn", lambda a: a.spawn(BOX, "true")),
    ("list_sessions", lambda a: a.list_sessions(BOX)),
    ("attach", lambda a: a.attach(BOX, "12")),
    ("terminate_session", lambda a: a.terminate_session(BOX, "12")),
    ("apply_network_policy", lambda a: a.apply_network_policy(BOX, NetworkPolicy([]))),
    ("public_url", lambda a: a.public_url(BOX)),
]


# -- settings and names -----------------------------------------------------------


@pytest.mark.parametrize(("label", "operation"), OPERATIONS, ids=[o[0] for o in OPERATIONS])
def test_a_missing_token_is_denied_naming_the_setting_before_any_request(
    label: str, operation: Callable[[Sprites], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPRITES_TOKEN", raising=False)
    config.configure("sprites", base_url=BASE)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        with pytest.raises(Denied) as raised:
            operation(Sprites())
        assert not mock.calls
    message = str(raised.value)
    assert "token" in message and "SPRITES_TOKEN" in message


def test_the_token_comes_from_the_environment_at_call_time(
    api: responses.RequestsMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    config.configure("sprites", token=None)
    monkeypatch.setenv("SPRITES_TOKEN", "from-env")
    api.get(url("/v1/sprites/box"), json={"status": "running"})
    Sprites().get(BOX)
    assert api.calls[0].request.headers["Authorization"] == "Bearer from-env"


def test_base_url_is_read_at_call_time_and_trailing_slash_dropped(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.get("https://other.test/v1/sprites/box", json={"status": "running"})
    config.configure("sprites", base_url="https://other.test/")
    assert adapter.get(BOX).status == "running"


BAD_NAMES = ["", "UPPER", "-lead", "trail-", "under_score", "a b", "a/b", "a.b", "x" * 64, "é"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_invalid_sprite_names_are_invalid_before_any_request(
    api: responses.RequestsMock, adapter: Sprites, name: str
) -> None:
    handle = Handle("sprites", name)
    for call in (
        lambda: adapter.build_handle(name),
        lambda: adapter.create(name),
        lambda: adapter.create_new(name),
        lambda: adapter.get(handle),
        lambda: adapter.destroy(handle),
        lambda: adapter.exec(handle, "true"),
    ):
        with pytest.raises(Invalid):
            call()
    assert not api.calls


@pytest.mark.parametrize("name", ["a", "box-1", "fountain-abc12345-deadbeef", "x" * 63])
def test_dns_label_names_are_accepted(adapter: Sprites, name: str) -> None:
    assert adapter.build_handle(name) == Handle("sprites", name)


# -- capabilities -----------------------------------------------------------------

ALWAYS = {
    "isolation",
    "suspend",
    "network_policy",
    "attach",
    "tty",
    "public_url",
    "terminate_session",
    "force_terminate_session",
    "create_new",
    "destroy_once",
    "read_file",
    "list_files",
    "transfer",
}


def test_capabilities_without_checkpointing(adapter: Sprites) -> None:
    assert adapter.capabilities() == frozenset(ALWAYS)


def test_capabilities_with_checkpointing_enabled(adapter: Sprites) -> None:
    config.configure("sprites", checkpoint_creation_enabled=True)
    assert adapter.capabilities() == frozenset(
        ALWAYS | {Capability.CHECKPOINT, Capability.CREATE_CHECKPOINT_ONCE}
    )


def test_public_urls_setting_does_not_change_the_capabilities(adapter: Sprites) -> None:
    config.configure("sprites", public_urls=False)
    assert adapter.capabilities() == frozenset(ALWAYS)


# -- create -----------------------------------------------------------------------


def test_create_posts_the_name_then_makes_the_url_public(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(url("/v1/sprites"), json={"id": "id-1", "name": "box"}, status=201)
    api.put(url("/v1/sprites/box"), json={"name": "box"})
    handle = adapter.create("box")
    assert handle == Handle("sprites", "box") and handle.instance_id == "id-1"
    assert calls(api) == [("POST", "/v1/sprites"), ("PUT", "/v1/sprites/box")]
    assert body(api, 0) == {"name": "box"}
    assert body(api, 1) == {"url_settings": {"auth": "public"}}
    assert api.calls[0].request.headers["Authorization"] == f"Bearer {TOKEN}"


def test_create_without_public_urls_makes_one_request(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    config.configure("sprites", public_urls=False)
    api.post(url("/v1/sprites"), json={"id": "id-1", "name": "box"}, status=201)
    adapter.create("box")
    assert calls(api) == [("POST", "/v1/sprites")]


def test_a_failed_url_change_is_logged_and_the_create_succeeds(
    api: responses.RequestsMock, adapter: Sprites, caplog: pytest.LogCaptureFixture
) -> None:
    api.post(url("/v1/sprites"), json={"id": "id-1", "name": "box"}, status=201)
    api.put(url("/v1/sprites/box"), json={"error": "down"}, status=503)
    with caplog.at_level(logging.WARNING, logger="managoat_sandbox"):
        assert adapter.create("box").name == "box"
    assert any("public" in record.getMessage() for record in caplog.records)


def test_create_adopts_on_409_with_no_further_request(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(url("/v1/sprites"), json={"error": "already_exists"}, status=409)
    assert adapter.create("box") == Handle("sprites", "box")
    assert calls(api) == [("POST", "/v1/sprites")]


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, Invalid),
        (401, Denied),
        (403, Denied),
        (500, Unavailable),
        (503, Unavailable),
        (302, Invalid),
        (422, Invalid),
    ],
)
def test_create_maps_other_statuses_and_only_409_adopts(
    api: responses.RequestsMock, adapter: Sprites, status: int, error: type[Exception]
) -> None:
    api.post(
        url("/v1/sprites"),
        json={"error": "nope"},
        status=status,
        headers={"Location": "https://elsewhere.test/"},
    )
    with pytest.raises(error):
        adapter.create("box")
    assert calls(api) == [("POST", "/v1/sprites")]


def test_create_refuses_unknown_options(adapter: Sprites) -> None:
    with pytest.raises(TypeError):
        adapter.create("box", region="ord")


# -- 429 --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "headers", "expected"),
    [
        ({"error": "sprite_creation_rate_limited", "retry_after_seconds": 17}, {}, 17.0),
        ({"error": "slow down"}, {"Retry-After": "9"}, 9.0),
        ({"retry_after_seconds": 17}, {"Retry-After": "9"}, 17.0),
        ({"error": "slow down"}, {}, None),
        ({"retry_after_seconds": "soon"}, {}, None),
    ],
    ids=["body", "header", "body-first", "neither", "garbage"],
)
def test_rate_limits_read_the_body_then_the_header(
    api: responses.RequestsMock,
    adapter: Sprites,
    payload: Any,
    headers: dict[str, str],
    expected: float | None,
) -> None:
    api.get(url("/v1/sprites/box"), json=payload, status=429, headers=headers)
    with pytest.raises(RateLimited) as raised:
        adapter.get(BOX)
    assert raised.value.retry_after == expected


# -- get, destroy, suspend, resume ------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("running", "running"),
        ("warm", "suspended"),
        ("cold", "suspended"),
        ("migrating", "unknown"),
        (None, "unknown"),
        (7, "unknown"),
    ],
)
def test_get_maps_the_status_and_keeps_the_raw_answer(
    api: responses.RequestsMock, adapter: Sprites, status: Any, expected: str
) -> None:
    raw = {"name": "box", "status": status, "url": "https://box.sprites.app"}
    api.get(url("/v1/sprites/box"), json=raw)
    info = adapter.get(BOX)
    assert (info.status, info.raw) == (expected, raw)


@pytest.mark.parametrize(
    ("status", "error"), [(404, NotFound), (503, Unavailable), (401, Denied), (500, Unavailable)]
)
def test_get_errors(
    api: responses.RequestsMock, adapter: Sprites, status: int, error: type[Exception]
) -> None:
    api.get(url("/v1/sprites/box"), json={"error": "x"}, status=status)
    with pytest.raises(error):
        adapter.get(BOX)


def test_get_of_a_non_object_is_a_provider_error(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.get(url("/v1/sprites/box"), json=["not", "an", "object"])
    with pytest.raises(ProviderError):
        adapter.get(BOX)


def test_names_are_percent_encoded_path_segments(api: responses.RequestsMock) -> None:
    api.get(url("/v1/sprites/box/exec"), json={"sessions": []})
    Sprites().list_sessions(BOX)
    assert api.calls[0].request.path_url == "/v1/sprites/box/exec"


@pytest.mark.parametrize("status", [200, 202, 204, 404])
def test_destroy_tolerates_absence(
    api: responses.RequestsMock, adapter: Sprites, status: int
) -> None:
    api.delete(url("/v1/sprites/box"), status=status)
    adapter.destroy(BOX)
    assert calls(api) == [("DELETE", "/v1/sprites/box")]


def test_destroy_maps_a_5xx(api: responses.RequestsMock, adapter: Sprites) -> None:
    api.delete(url("/v1/sprites/box"), json={"error": "down"}, status=503)
    with pytest.raises(Unavailable) as raised:
        adapter.destroy(BOX)
    assert raised.value.detail == ("http", 503, {"error": "down"})


def test_suspend_is_a_no_op(api: responses.RequestsMock, adapter: Sprites) -> None:
    adapter.suspend(BOX)
    assert not api.calls


def test_resume_probes_with_get(api: responses.RequestsMock, adapter: Sprites) -> None:
    api.get(url("/v1/sprites/box"), json={"status": "cold"})
    assert adapter.resume(BOX) == BOX
    assert calls(api) == [("GET", "/v1/sprites/box")]


def test_resume_passes_not_found_through(api: responses.RequestsMock, adapter: Sprites) -> None:
    api.get(url("/v1/sprites/box"), json={"error": "not_found"}, status=404)
    with pytest.raises(NotFound):
        adapter.resume(BOX)


# -- listing ----------------------------------------------------------------------


def _page(names: list[str], token: str | None, more: bool) -> dict[str, Any]:
    return {
        "sprites": [{"name": n} for n in names],
        "has_more": more,
        "next_continuation_token": token,
    }


def _pages(api: responses.RequestsMock, pages: dict[str | None, dict[str, Any]]) -> None:
    """Answer each page by the continuation token actually sent."""

    def answer(request: Any) -> tuple[int, dict[str, str], str]:
        sent = parse_qs(urlsplit(request.url).query).get("continuation_token", [None])[0]
        return 200, {}, json.dumps(pages[sent])

    api.add_callback(responses.GET, url("/v1/sprites"), callback=answer)


def test_list_all_names_follows_tokens_across_pages(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    _pages(
        api,
        {
            None: _page(["a", "b"], "t1", True),
            "t1": _page(["c"], "t2", True),
            "t2": _page(["d"], None, False),
        },
    )
    assert adapter.list_all_names() == frozenset({"a", "b", "c", "d"})
    assert [query(api, i) for i in range(3)] == [
        [("max_results", "50")],
        [("max_results", "50"), ("continuation_token", "t1")],
        [("max_results", "50"), ("continuation_token", "t2")],
    ]


def test_list_all_names_refuses_past_the_page_cap(api: responses.RequestsMock) -> None:
    pages = {
        None: _page(["a"], "t1", True),
        "t1": _page(["b"], "t2", True),
        "t2": _page(["c"], "t3", True),
    }
    _pages(api, pages)
    with pytest.raises(Truncated):
        Sprites(page_cap=3).list_all_names()
    assert len(api.calls) == 3


def test_list_all_names_has_more_without_a_token_is_truncated_not_partial(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    _pages(api, {None: _page(["a"], None, True)})
    with pytest.raises(Truncated):
        adapter.list_all_names()
    assert len(api.calls) == 1


@pytest.mark.parametrize("page", [[], {"sprites": "x"}, {"sprites": [{"id": 1}]}, {}])
def test_a_malformed_page_is_a_provider_error(
    api: responses.RequestsMock, adapter: Sprites, page: Any
) -> None:
    api.get(url("/v1/sprites"), json=page)
    with pytest.raises(ProviderError):
        adapter.list_all_names()


def test_list_all_names_maps_errors(api: responses.RequestsMock, adapter: Sprites) -> None:
    api.get(url("/v1/sprites"), json={"error": "down"}, status=503)
    with pytest.raises(Unavailable):
        adapter.list_all_names()


# -- files ------------------------------------------------------------------------


def test_write_file_puts_raw_bytes_with_mode_and_parents(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.put(url("/v1/sprites/box/fs/write"), json={})
    adapter.write_file(BOX, "/app/dir/f.txt", b"hello", mode=0o600)
    assert calls(api) == [("PUT", "/v1/sprites/box/fs/write")]
    assert query(api) == [
        ("path", "/app/dir/f.txt"),
        ("workingDir", "/"),
        ("mode", "0600"),
        ("mkdirParents", "true"),
    ]
    request = api.calls[0].request
    assert request.body == b"hello"
    assert request.headers["Content-Type"] == "application/octet-stream"


def test_write_file_default_mode_is_0644(api: responses.RequestsMock, adapter: Sprites) -> None:
    api.put(url("/v1/sprites/box/fs/write"), status=201)
    adapter.write_file(BOX, "f.txt", b"x")
    assert ("mode", "0644") in query(api)


@pytest.mark.parametrize(
    ("path", "mode", "error"),
    [
        ("", None, Invalid),
        ("a\x00b", None, Invalid),
        (3, None, TypeError),
        ("/f", "644", TypeError),
        ("/f", True, TypeError),
        ("/f", 0o10000, Invalid),
    ],
)
def test_write_file_bad_arguments(
    api: responses.RequestsMock, adapter: Sprites, path: Any, mode: Any, error: type[Exception]
) -> None:
    """Refused by the facade's one check, before the adapter sends anything."""
    with pytest.raises(error):
        sandbox.write_file(BOX, path, b"x", mode=mode)
    assert not api.calls


def test_write_file_failure_is_mapped(api: responses.RequestsMock, adapter: Sprites) -> None:
    api.put(url("/v1/sprites/box/fs/write"), json={"error": "disk full"}, status=500)
    with pytest.raises(Unavailable):
        adapter.write_file(BOX, "/f", b"x")


# -- sessions ---------------------------------------------------------------------


def test_list_sessions_stringifies_ids_and_keeps_inactive_sessions(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.get(
        url("/v1/sprites/box/exec"),
        json={
            "sessions": [
                {
                    "id": 1847,
                    "command": "bash -lc x",
                    "created": "2026-01-02T03:04:05Z",
                    "last_activity": "2026-01-02T03:04:06.123456789Z",
                    "is_active": False,
                    "tty": True,
                },
                {"id": "19", "is_active": True},
                {"command": "no id"},
                "garbage",
            ]
        },
    )
    sessions = adapter.list_sessions(BOX)
    assert [s.id for s in sessions] == ["1847", "19"]
    first = sessions[0]
    assert first.command == "bash -lc x" and first.tty is True
    assert first.created_at is not None and first.created_at.isoformat() == (
        "2026-01-02T03:04:05+00:00"
    )
    assert first.last_activity_at is not None and first.last_activity_at.microsecond == 123456
    assert sessions[1] == Session(id="19")


@pytest.mark.parametrize("payload", [{}, {"sessions": None}, {"sessions": "x"}, []])
def test_list_sessions_without_a_list_is_empty(
    api: responses.RequestsMock, adapter: Sprites, payload: Any
) -> None:
    api.get(url("/v1/sprites/box/exec"), json=payload)
    assert adapter.list_sessions(BOX) == []


def test_list_sessions_maps_errors(api: responses.RequestsMock, adapter: Sprites) -> None:
    api.get(url("/v1/sprites/box/exec"), json={"error": "down"}, status=503)
    with pytest.raises(Unavailable) as raised:
        adapter.list_sessions(BOX)
    assert raised.value.detail == ("http", 503, {"error": "down"})


# -- network policy ---------------------------------------------------------------


def test_an_empty_allowlist_is_one_explicit_deny_all_rule(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(url("/v1/sprites/box/policy/network"), status=204)
    adapter.apply_network_policy(BOX, NetworkPolicy.deny_all())
    assert calls(api) == [("POST", "/v1/sprites/box/policy/network")]
    assert body(api) == {"rules": [{"domain": "*", "action": "deny"}]}


def test_an_allowlist_is_sent_as_ordered_allow_rules(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(url("/v1/sprites/box/policy/network"), json={"rules": []}, status=200)
    adapter.apply_network_policy(BOX, NetworkPolicy(["b.example.com", "*.a.example.com"]))
    assert body(api) == {
        "rules": [
            {"domain": "b.example.com", "action": "allow"},
            {"domain": "*.a.example.com", "action": "allow"},
        ]
    }


def test_the_policy_post_uses_its_own_longer_timeout(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    config.configure("sprites", timeout_ms=1000, policy_timeout_ms=90000)
    api.post(url("/v1/sprites/box/policy/network"), status=204)
    adapter.apply_network_policy(BOX, NetworkPolicy([]))
    assert getattr(api.calls[0].request, "req_kwargs", {})["timeout"] == (90.0, 90.0)


@pytest.mark.parametrize("host", ["", "a b", "tab\there"])
def test_unusable_hosts_are_invalid(
    api: responses.RequestsMock, adapter: Sprites, host: str
) -> None:
    with pytest.raises(Invalid):
        adapter.apply_network_policy(BOX, NetworkPolicy([host]))
    assert not api.calls


def test_policy_errors_are_mapped(api: responses.RequestsMock, adapter: Sprites) -> None:
    api.post(url("/v1/sprites/box/policy/network"), json={"error": "invalid_policy"}, status=400)
    with pytest.raises(Invalid):
        adapter.apply_network_policy(BOX, NetworkPolicy(["x.test"]))


# -- public URL -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"url": "https://box-org.sprites.app"}, "https://box-org.sprites.app"),
        ({}, None),
        ({"url": ""}, None),
        ({"url": None}, None),
        ({"url": "ftp://x"}, None),
    ],
)
def test_public_url(
    api: responses.RequestsMock, adapter: Sprites, payload: Any, expected: str | None
) -> None:
    api.get(url("/v1/sprites/box"), json=payload)
    assert adapter.public_url(BOX) == expected


def test_public_url_maps_errors(api: responses.RequestsMock, adapter: Sprites) -> None:
    api.get(url("/v1/sprites/box"), json={"error": "down"}, status=503)
    with pytest.raises(Unavailable):
        adapter.public_url(BOX)


# -- checkpoints ------------------------------------------------------------------


@pytest.mark.parametrize(
    "operation",
    [
        lambda a: a.create_checkpoint(BOX),
        lambda a: a.restore_checkpoint(BOX, "v1"),
        lambda a: a.create_checkpoint_once(BOX, operation_id="op-1"),
    ],
    ids=["create", "restore", "create_once"],
)
def test_disabled_checkpoints_are_not_supported_without_credential_or_request(
    monkeypatch: pytest.MonkeyPatch, operation: Callable[[Sprites], Any]
) -> None:
    monkeypatch.delenv("SPRITES_TOKEN", raising=False)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        with pytest.raises(NotSupported):
            operation(Sprites())
        assert not mock.calls


def _checkpointing(api: responses.RequestsMock) -> None:
    config.configure("sprites", checkpoint_creation_enabled=True)


LISTING = [
    {"id": "Current", "comment": "nightly", "create_time": "2026-01-03T00:00:00Z"},
    {"id": "v3", "comment": "other", "create_time": "2026-01-02T12:00:00Z"},
    {"id": "v2", "comment": "nightly", "create_time": "2026-01-02T00:00:00Z"},
    {"id": "v1", "comment": "nightly", "create_time": "2026-01-01T00:00:00Z"},
]
DONE = ndjson(
    {"type": "info", "data": "Creating checkpoint..."},
    {"type": "complete", "data": "Checkpoint v2 created"},
)


def test_create_checkpoint_resolves_the_newest_matching_id_from_the_listing(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    _checkpointing(api)
    api.post(url("/v1/sprites/box/checkpoint"), body=DONE)
    api.get(url("/v1/sprites/box/checkpoints"), json=LISTING)
    assert adapter.create_checkpoint(BOX, comment="nightly") == "v2"
    assert calls(api) == [
        ("POST", "/v1/sprites/box/checkpoint"),
        ("GET", "/v1/sprites/box/checkpoints"),
    ]
    assert body(api) == {"comment": "nightly"}


def test_create_checkpoint_without_comment_sends_an_empty_object(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    _checkpointing(api)
    api.post(url("/v1/sprites/box/checkpoint"), body=DONE)
    api.get(url("/v1/sprites/box/checkpoints"), json=[{"id": "v9", "create_time": "t"}])
    assert adapter.create_checkpoint(BOX) == "v9"
    assert body(api) == {}


@pytest.mark.parametrize(
    ("stream", "listing", "error"),
    [
        (
            ndjson({"type": "error", "error": "Checkpoint failed: disk full"}),
            LISTING,
            ProviderError,
        ),
        (ndjson({"type": "info", "data": "x"}), LISTING, Unavailable),
        (DONE, [{"id": "Current", "comment": "nightly"}], ProviderError),
        (DONE, [{"id": "v1", "comment": "other"}], ProviderError),
        ("not json\n", LISTING, ProviderError),
    ],
    ids=["error-event", "no-complete", "only-current", "no-match", "malformed"],
)
def test_create_checkpoint_never_returns_an_unrelated_id(
    api: responses.RequestsMock,
    adapter: Sprites,
    stream: str,
    listing: Any,
    error: type[Exception],
) -> None:
    _checkpointing(api)
    api.post(url("/v1/sprites/box/checkpoint"), body=stream)
    api.get(url("/v1/sprites/box/checkpoints"), json=listing)
    with pytest.raises(error):
        adapter.create_checkpoint(BOX, comment="nightly")


def test_restore_posts_to_the_checkpoint_and_accepts_a_complete_stream(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    _checkpointing(api)
    api.post(
        re.compile(re.escape(BASE) + r"/v1/sprites/box/checkpoints/.*/restore"),
        body=ndjson({"type": "info", "data": "Restoring"}, {"type": "complete"}),
    )
    adapter.restore_checkpoint(BOX, "v/1")
    assert api.calls[0].request.path_url == "/v1/sprites/box/checkpoints/v%2F1/restore"


@pytest.mark.parametrize(
    ("stream", "error", "detail"),
    [
        (
            ndjson({"type": "info"}, {"type": "error", "error": "no such checkpoint"}),
            RestoreFailed,
            ("restore_failed", "no such checkpoint"),
        ),
        (
            ndjson({"type": "info", "error": "restore aborted"}, {"type": "complete"}),
            RestoreFailed,
            ("restore_failed", "restore aborted"),
        ),
        (ndjson({"type": "info", "data": "x"}), Unavailable, "restore_unconfirmed"),
    ],
)
def test_restore_failure_inside_a_200_stream_is_never_success(
    api: responses.RequestsMock,
    adapter: Sprites,
    stream: str,
    error: type[Exception],
    detail: object,
) -> None:
    _checkpointing(api)
    api.post(url("/v1/sprites/box/checkpoints/v1/restore"), body=stream)
    with pytest.raises(error) as raised:
        adapter.restore_checkpoint(BOX, "v1")
    assert raised.value.detail == detail  # type: ignore[attr-defined]


def test_restore_status_errors_are_mapped(api: responses.RequestsMock, adapter: Sprites) -> None:
    _checkpointing(api)
    api.post(url("/v1/sprites/box/checkpoints/v1/restore"), json={"error": "x"}, status=404)
    with pytest.raises(NotFound):
        adapter.restore_checkpoint(BOX, "v1")


def test_transport_failures_are_unavailable(adapter: Sprites) -> None:
    config.configure("sprites", base_url="http://127.0.0.1:9", token="t", timeout_ms=2000)
    with pytest.raises(Unavailable):
        adapter.get(BOX)
