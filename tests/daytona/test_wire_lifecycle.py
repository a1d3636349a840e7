"""Wire contract of the Daytona control plane: paths, bodies, headers, queries, the
adopt probe, the state mapping, the cursor walk, transient conflicts and 429 advice."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest
import responses

from managoat_sandbox import Capability, NetworkPolicy, config
from managoat_sandbox.errors import (
    Denied,
    Invalid,
    NotFound,
    NotSupported,
    RateLimited,
    Truncated,
    Unavailable,
)
from managoat_sandbox.providers.daytona import Daytona

from .conftest import API, KEY, PROXY, sandbox

SANDBOX = f"{API}/sandbox"


def body_of(call: responses.Call) -> object:
    return json.loads(call.request.body or b"{}")


def test_a_missing_api_key_is_denied_naming_the_variable_before_any_request(
    mocked: responses.RequestsMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DAYTONA_API_KEY", raising=False)
    config.configure("daytona", api_url=API)
    adapter = Daytona()
    handle = adapter.build_handle("box")
    for call in (
        lambda: adapter.create("box"),
        lambda: adapter.get(handle),
        adapter.list_all_names,
        lambda: adapter.spawn(handle, "true"),
    ):
        with pytest.raises(Denied, match="DAYTONA_API_KEY"):
            call()
    assert len(mocked.calls) == 0


def test_requests_carry_the_bearer_key_and_the_organization_only_when_configured(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get(f"{SANDBOX}/box", json=sandbox())
    daytona.get(daytona.build_handle("box"))
    config.configure("daytona", organization_id="org-7")
    daytona.get(daytona.build_handle("box"))
    first, second = (call.request.headers for call in mocked.calls)
    assert first["Authorization"] == f"Bearer {KEY}"
    assert "X-Daytona-Organization-ID" not in first
    assert second["X-Daytona-Organization-ID"] == "org-7"


def test_the_api_url_is_read_at_call_time_for_self_hosted_daytona(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get("http://localhost:3000/api/sandbox/box", json=sandbox())
    config.configure("daytona", api_url="http://localhost:3000/api/")
    assert daytona.get(daytona.build_handle("box")).status == "running"


def test_create_posts_the_name_labels_and_no_auto_stop_without_a_snapshot(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.post(SANDBOX, json=sandbox(state="creating"))
    handle = daytona.create("box")
    assert (handle.provider, handle.name) == ("daytona", "box")
    assert body_of(mocked.calls[0]) == {
        "name": "box",
        "labels": {"managoat": "1"},
        "autoStopInterval": 0,
        "autoArchiveInterval": 10080,
    }


def test_create_sends_the_configured_snapshot(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.post(SANDBOX, json=sandbox())
    config.configure("daytona", snapshot="python-3.12")
    daytona.create("box")
    assert body_of(mocked.calls[0])["snapshot"] == "python-3.12"  # type: ignore[index]


@pytest.mark.parametrize("status", [400, 409])
def test_create_adopts_an_existing_name_confirmed_by_the_probe(
    mocked: responses.RequestsMock, daytona: Daytona, status: int
) -> None:
    mocked.post(SANDBOX, status=status, json={"statusCode": status, "message": "exists"})
    mocked.get(f"{SANDBOX}/box", json=sandbox())
    assert daytona.create("box").name == "box"
    assert [c.request.method for c in mocked.calls] == ["POST", "GET"]


def test_create_raises_the_create_error_when_the_probe_misses(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.post(SANDBOX, status=400, json={"message": "Snapshot x not found"})
    mocked.get(f"{SANDBOX}/box", status=404, json={"message": "not found"})
    with pytest.raises(Invalid) as caught:
        daytona.create("box")
    assert caught.value.detail == ("http", 400, {"message": "Snapshot x not found"})


def test_create_does_not_probe_after_a_server_error(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.post(SANDBOX, status=503, body="upstream down")
    with pytest.raises(Unavailable) as caught:
        daytona.create("box")
    assert caught.value.detail == ("http", 503, "upstream down")
    assert len(mocked.calls) == 1


@pytest.mark.parametrize(
    ("state", "status"),
    [
        ("started", "running"),
        ("starting", "running"),
        ("resuming", "running"),
        ("stopped", "suspended"),
        ("stopping", "suspended"),
        ("archived", "suspended"),
        ("archiving", "suspended"),
        ("paused", "suspended"),
        ("pausing", "suspended"),
        ("creating", "unknown"),
        ("error", "unknown"),
        ("destroying", "unknown"),
        ("migrating", "unknown"),
    ],
)
def test_get_maps_provider_states_and_keeps_the_raw_answer(
    mocked: responses.RequestsMock, daytona: Daytona, state: str, status: str
) -> None:
    mocked.get(f"{SANDBOX}/box", json=sandbox(state=state))
    info = daytona.get(daytona.build_handle("box"))
    assert info.status == status
    assert info.raw["state"] == state


def test_get_of_a_missing_sandbox_is_not_found_and_a_blip_is_not(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get(f"{SANDBOX}/gone", status=404, json={"message": "Sandbox gone not found"})
    mocked.get(f"{SANDBOX}/flaky", status=502, body="<html>bad gateway</html>")
    with pytest.raises(NotFound):
        daytona.get(daytona.build_handle("gone"))
    with pytest.raises(Unavailable):
        daytona.get(daytona.build_handle("flaky"))


def test_destroy_deletes_and_tolerates_a_missing_sandbox(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.delete(f"{SANDBOX}/box", json=sandbox(state="destroying"))
    mocked.delete(f"{SANDBOX}/gone", status=404, json={"message": "not found"})
    daytona.destroy(daytona.build_handle("box"))
    daytona.destroy(daytona.build_handle("gone"))
    assert [c.request.method for c in mocked.calls] == ["DELETE", "DELETE"]


def test_destroy_during_a_transition_is_transient(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.delete(f"{SANDBOX}/box", status=409, json={"message": "state change in progress"})
    with pytest.raises(Unavailable):
        daytona.destroy(daytona.build_handle("box"))


def _listing(mocked: responses.RequestsMock, pages: list[object]) -> None:
    for page in pages:
        mocked.get(SANDBOX, json=page)


def test_list_all_names_walks_the_cursor_sorted_by_creation_time(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    _listing(
        mocked,
        [
            {
                "items": [{"name": "a"}, {"name": "DESTROYED_x_171"}, {"id": "no-name"}],
                "nextCursor": "c2",
            },
            {
                "items": [{"name": "b"}, {"name": "c", "desiredState": "destroyed"}],
                "nextCursor": None,
            },
        ],
    )
    assert daytona.list_all_names() == frozenset({"a", "b"})
    queries = [parse_qs(urlsplit(c.request.url).query) for c in mocked.calls]
    for query in queries:
        assert query["sort"] == ["createdAt"]
        assert query["order"] == ["asc"]
        assert query["limit"] == ["100"]
        assert json.loads(query["labels"][0]) == {"managoat": "1"}
    assert "cursor" not in queries[0]
    assert queries[1]["cursor"] == ["c2"]


def test_list_all_names_accepts_a_bare_array_as_the_final_page(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    _listing(mocked, [{"items": [{"name": "a"}], "cursor": "next"}, [{"name": "b"}]])
    assert daytona.list_all_names() == frozenset({"a", "b"})


def test_list_all_names_refuses_a_partial_view_past_the_page_cap(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get(SANDBOX, json={"items": [{"name": "a"}], "nextCursor": "again"})
    with pytest.raises(Truncated):
        daytona.list_all_names()
    assert len(mocked.calls) == daytona.max_pages


def test_a_failed_page_fails_the_listing(mocked: responses.RequestsMock, daytona: Daytona) -> None:
    _listing(mocked, [{"items": [{"name": "a"}], "nextCursor": "c2"}])
    mocked.get(SANDBOX, status=418, body="teapot")
    with pytest.raises(Invalid):
        daytona.list_all_names()


def test_suspend_stops_a_running_sandbox_and_leaves_a_parked_one(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get(f"{SANDBOX}/up", json=sandbox("up"))
    mocked.post(f"{SANDBOX}/up/stop", json=sandbox("up", state="stopping"))
    mocked.get(f"{SANDBOX}/down", json=sandbox("down", state="stopped"))
    daytona.suspend(daytona.build_handle("up"))
    daytona.suspend(daytona.build_handle("down"))
    assert [(c.request.method, urlsplit(c.request.url).path) for c in mocked.calls] == [
        ("GET", "/api/sandbox/up"),
        ("POST", "/api/sandbox/up/stop"),
        ("GET", "/api/sandbox/down"),
    ]


def test_resume_starts_a_stopped_sandbox_and_waits_until_started(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get(f"{SANDBOX}/box", json=sandbox(state="stopped"))
    mocked.post(f"{SANDBOX}/box/start", json=sandbox(state="restoring"))
    mocked.get(f"{SANDBOX}/box", json=sandbox(state="started"))
    handle = daytona.resume(daytona.build_handle("box"))
    assert handle.name == "box"
    assert [c.request.method for c in mocked.calls] == ["GET", "POST", "GET"]


def test_resume_during_a_transition_is_transient(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get(f"{SANDBOX}/box", json=sandbox(state="stopping"))
    mocked.post(
        f"{SANDBOX}/box/start", status=409, json={"message": "Sandbox state change in progress"}
    )
    with pytest.raises(Unavailable) as caught:
        daytona.resume(daytona.build_handle("box"))
    assert caught.value.detail[:2] == ("http", 409)
    assert caught.value.transient


def test_a_rate_limit_honours_the_largest_throttler_header(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.post(
        SANDBOX,
        status=429,
        json={"message": "ThrottlerException"},
        headers={
            "Retry-After-sandbox-create": "7",
            "Retry-After-authenticated": "3",
            "X-RateLimit-Remaining-sandbox-create": "0",
        },
    )
    with pytest.raises(RateLimited) as caught:
        daytona.create("box")
    assert caught.value.retry_after == 7.0


@pytest.mark.parametrize(
    ("headers", "body", "expected"),
    [
        ({"Retry-After": "2"}, {}, 2.0),
        ({"Retry-After": "2", "Retry-After-authenticated": "5"}, {}, 5.0),
        ({}, {"retryAfter": 4}, 4.0),
        ({}, {"retryAfter": -1}, None),
        ({}, {"retryAfter": "23"}, None),
        ({"Retry-After-authenticated": "soon"}, {}, None),
    ],
)
def test_rate_limit_advice_from_headers_then_body(
    mocked: responses.RequestsMock,
    daytona: Daytona,
    headers: dict[str, str],
    body: dict[str, object],
    expected: float | None,
) -> None:
    mocked.get(f"{SANDBOX}/box", status=429, json=body, headers=headers)
    with pytest.raises(RateLimited) as caught:
        daytona.get(daytona.build_handle("box"))
    assert caught.value.retry_after == expected


def test_an_empty_allowlist_blocks_all_egress(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.post(f"{SANDBOX}/box/network-settings", json=sandbox())
    daytona.apply_network_policy(daytona.build_handle("box"), NetworkPolicy(allow=[]))
    assert body_of(mocked.calls[0]) == {"networkBlockAll": True, "domainAllowList": ""}


def test_an_allowlist_blocks_everything_but_its_domains(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.post(f"{SANDBOX}/box/network-settings", json=sandbox())
    daytona.apply_network_policy(
        daytona.build_handle("box"), NetworkPolicy(allow=["hex.pm", "github.com"])
    )
    assert body_of(mocked.calls[0]) == {
        "networkBlockAll": True,
        "domainAllowList": "hex.pm,github.com",
    }


@pytest.mark.parametrize("entry", ["10.0.0.0/8", "1.2.3.4", "a,b", "two words", ""])
def test_allowlist_entries_that_are_not_domains_are_invalid_before_any_request(
    mocked: responses.RequestsMock, daytona: Daytona, entry: str
) -> None:
    with pytest.raises(Invalid):
        daytona.apply_network_policy(daytona.build_handle("box"), NetworkPolicy(allow=[entry]))
    assert len(mocked.calls) == 0


def test_capabilities_public_url_and_checkpoints(daytona: Daytona) -> None:
    handle = daytona.build_handle("box")
    assert daytona.capabilities() == frozenset(
        {
            Capability.ISOLATION,
            Capability.SUSPEND,
            Capability.NETWORK_POLICY,
            Capability.ATTACH,
            Capability.TERMINATE_SESSION,
            Capability.READ_FILE,
            Capability.LIST_FILES,
            Capability.TRANSFER,
        }
    )
    assert daytona.public_url(handle) is None
    with pytest.raises(NotSupported):
        daytona.create_checkpoint(handle)
    with pytest.raises(NotSupported):
        daytona.restore_checkpoint(handle, "cp-1")
    with pytest.raises(NotSupported):
        daytona.create_new("box")


def test_the_toolbox_is_addressed_by_sandbox_id_under_the_proxy_url(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get(f"{SANDBOX}/box", json=sandbox())
    mocked.get(f"{PROXY}/sbx-1/process/session", json=[])
    assert daytona.list_sessions(daytona.build_handle("box")) == []
    assert mocked.calls[1].request.url == f"{PROXY}/sbx-1/process/session"


@pytest.mark.parametrize("answer", [{"url": "https://proxy-map.test/"}, "https://proxy-map.test/"])
def test_a_missing_proxy_url_falls_back_to_the_toolbox_proxy_url_call(
    mocked: responses.RequestsMock, daytona: Daytona, answer: object
) -> None:
    mocked.get(f"{SANDBOX}/box", json=sandbox(toolboxProxyUrl=""))
    mocked.get(f"{SANDBOX}/sbx-1/toolbox-proxy-url", json=answer)
    mocked.get("https://proxy-map.test/sbx-1/process/session", json={"sessions": []})
    assert daytona.list_sessions(daytona.build_handle("box")) == []


def test_a_failing_proxy_url_call_keeps_its_error(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.get(f"{SANDBOX}/box", json=sandbox(toolboxProxyUrl=None))
    mocked.get(f"{SANDBOX}/sbx-1/toolbox-proxy-url", status=503, json={"message": "down"})
    with pytest.raises(Unavailable):
        daytona.list_sessions(daytona.build_handle("box"))
