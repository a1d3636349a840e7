"""Wire contract with E2B's control plane: exact paths, queries, headers and bodies."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import responses

from managoat_sandbox import config
from managoat_sandbox.errors import (
    Denied,
    Invalid,
    NotFound,
    ProviderError,
    RateLimited,
    Truncated,
    Unavailable,
)
from managoat_sandbox.providers.e2b import E2B
from managoat_sandbox.types import Handle, NetworkPolicy

from .wire import API, API_KEY, LISTING, configure, found, item, sandbox

FIND_BOX = f"{API}/v2/sandboxes?state=running%2Cpaused&metadata=fountain_name%3Dbox"


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    configure()
    with responses.RequestsMock(assert_all_requests_are_fired=True) as mock:
        yield mock


@pytest.fixture
def e2b() -> E2B:
    return E2B()


def box(e2b: E2B) -> Handle:
    return e2b.build_handle("box")


def body_of(call: responses.Call) -> bytes:
    body = call.request.body
    return body.encode() if isinstance(body, str) else bytes(body or b"")


def test_every_control_plane_call_carries_the_api_key(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    found(rsps)
    rsps.add(responses.POST, f"{API}/v2/sandboxes", json=sandbox("sbxnew"), status=201)
    e2b.create("box")
    for call in rsps.calls:
        assert call.request.headers["X-API-Key"] == API_KEY


def test_create_looks_the_name_up_then_posts_the_stamped_sandbox(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    found(rsps)
    rsps.add(responses.POST, f"{API}/v2/sandboxes", json=sandbox("sbxnew"), status=201)
    handle = e2b.create("box")
    assert handle == Handle("e2b", "box") and handle.private.sandbox_id == "sbxnew"
    lookup, create = rsps.calls
    assert lookup.request.url == FIND_BOX
    assert create.request.headers["Content-Type"] == "application/json"
    assert body_of(create) == (
        b'{"templateID":"base","timeout":1800,"autoPause":true,'
        b'"metadata":{"fountain_name":"box","fountain":"1"}}'
    )


def test_create_sends_the_configured_template(rsps: responses.RequestsMock, e2b: E2B) -> None:
    config.configure("e2b", template="fountain")
    found(rsps)
    rsps.add(responses.POST, f"{API}/v2/sandboxes", json=sandbox("sbxnew"), status=201)
    e2b.create("box")
    assert json.loads(body_of(rsps.calls[1]))["templateID"] == "fountain"


def test_create_adopts_an_existing_name_without_posting(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    found(rsps, item("sbxold", state="paused"))
    handle = e2b.create("box")
    assert handle.private.sandbox_id == "sbxold"
    assert len(rsps.calls) == 1


def test_the_sandboxId_spelling_is_accepted(rsps: responses.RequestsMock, e2b: E2B) -> None:
    legacy = item()
    legacy["sandboxId"] = legacy.pop("sandboxID")
    found(rsps, legacy)
    assert e2b.create("box").private.sandbox_id == "sbx1"


def test_names_needing_escapes_are_quoted_once_more_than_http_does(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    found(rsps)
    with pytest.raises(NotFound):
        e2b.get(e2b.build_handle("a&b=c d"))
    assert rsps.calls[0].request.url.endswith("metadata=fountain_name%3Da%252526b%25253Dc%252520d")


@pytest.mark.parametrize(
    ("state", "status"),
    [
        ("running", "running"),
        ("paused", "suspended"),
        ("starting", "unknown"),
    ],
)
def test_get_maps_the_state(
    rsps: responses.RequestsMock, e2b: E2B, state: str, status: str
) -> None:
    found(rsps, item(state=state))
    info = e2b.get(box(e2b))
    assert info.status == status
    assert info.raw["sandboxID"] == "sbx1"


def test_get_of_an_unclaimed_name_is_not_found(rsps: responses.RequestsMock, e2b: E2B) -> None:
    found(rsps)
    with pytest.raises(NotFound):
        e2b.get(box(e2b))


def test_lookup_ignores_items_stamped_with_another_name(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    found(rsps, item(name="other"))
    with pytest.raises(NotFound):
        e2b.get(box(e2b))


def test_destroy_of_an_unclaimed_name_sends_no_delete(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    found(rsps)
    e2b.destroy(box(e2b))
    assert len(rsps.calls) == 1


@pytest.mark.parametrize("status", [204, 404])
def test_destroy_deletes_and_tolerates_404(
    rsps: responses.RequestsMock, e2b: E2B, status: int
) -> None:
    found(rsps, item())
    rsps.add(responses.DELETE, f"{API}/sandboxes/sbx1", status=status)
    e2b.destroy(box(e2b))
    assert rsps.calls[1].request.method == "DELETE"


def test_destroy_deletes_every_sandbox_stamped_with_the_name(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    found(rsps, item("sbx2"), item("sbx1"))
    rsps.add(responses.DELETE, f"{API}/sandboxes/sbx2", status=204)
    rsps.add(responses.DELETE, f"{API}/sandboxes/sbx1", status=204)
    e2b.destroy(box(e2b))


@pytest.mark.parametrize(("status", "body"), [(204, ""), (409, "already paused")])
def test_suspend_pauses_a_running_sandbox_409_included(
    rsps: responses.RequestsMock, e2b: E2B, status: int, body: str
) -> None:
    found(rsps, item())
    rsps.add(responses.POST, f"{API}/sandboxes/sbx1/pause", status=status, body=body)
    e2b.suspend(box(e2b))
    assert body_of(rsps.calls[1]) == b"{}"


def test_suspend_of_a_paused_sandbox_calls_nothing(rsps: responses.RequestsMock, e2b: E2B) -> None:
    found(rsps, item(state="paused"))
    e2b.suspend(box(e2b))
    assert len(rsps.calls) == 1


def test_suspend_of_an_unclaimed_name_is_not_found(rsps: responses.RequestsMock, e2b: E2B) -> None:
    found(rsps)
    with pytest.raises(NotFound):
        e2b.suspend(box(e2b))


@pytest.mark.parametrize(("state", "status"), [("paused", 201), ("running", 200)])
def test_resume_connects_and_returns_a_handle_with_the_id(
    rsps: responses.RequestsMock, e2b: E2B, state: str, status: int
) -> None:
    found(rsps, item(state=state))
    rsps.add(responses.POST, f"{API}/v2/sandboxes/sbx1/connect", json=sandbox(), status=status)
    handle = e2b.resume(box(e2b))
    assert handle.private.sandbox_id == "sbx1" and handle.name == "box"
    assert body_of(rsps.calls[1]) == b'{"timeout":1800}'


def test_resume_refused_by_connect_is_the_mapped_error(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    found(rsps, item(state="paused"))
    rsps.add(
        responses.POST, f"{API}/v2/sandboxes/sbx1/connect", status=418, json={"error": "teapot"}
    )
    with pytest.raises(Invalid) as caught:
        e2b.resume(box(e2b))
    assert caught.value.detail == ("http", 418, {"error": "teapot"})


def test_list_all_names_follows_the_next_token(rsps: responses.RequestsMock, e2b: E2B) -> None:
    found(
        rsps,
        item("a", "one"),
        {"sandboxID": "x", "metadata": {}},
        headers={"X-Next-Token": "page-2"},
    )
    found(rsps, item("b", "two"), item("c", "one"))
    assert e2b.list_all_names() == frozenset({"one", "two"})
    first, second = rsps.calls
    assert first.request.url == (
        f"{API}/v2/sandboxes?state=running%2Cpaused&metadata=fountain%3D1&limit=100"
    )
    assert second.request.url == (
        f"{API}/v2/sandboxes?state=running%2Cpaused&metadata=fountain%3D1&limit=100"
        "&nextToken=page-2"
    )


def test_an_empty_next_token_ends_the_listing(rsps: responses.RequestsMock, e2b: E2B) -> None:
    found(rsps, item("a", "one"), headers={"X-Next-Token": ""})
    assert e2b.list_all_names() == frozenset({"one"})


def test_an_endless_listing_is_truncated_after_40_pages(e2b: E2B) -> None:
    configure()
    with responses.RequestsMock() as rsps:
        rsps.add(responses.GET, LISTING, json=[item()], headers={"X-Next-Token": "more"})
        with pytest.raises(Truncated):
            e2b.list_all_names()
        assert len(rsps.calls) == 40


def test_an_error_on_a_later_page_aborts_the_listing(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    found(rsps, item(), headers={"X-Next-Token": "p2"})
    rsps.add(responses.GET, LISTING, status=503, json={"code": 503, "message": "down"})
    with pytest.raises(Unavailable):
        e2b.list_all_names()


def test_a_listing_that_is_not_a_list_is_a_provider_error(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    rsps.add(responses.GET, LISTING, json={"sandboxes": []})
    with pytest.raises(ProviderError) as caught:
        e2b.get(box(e2b))
    assert caught.value.provider == "e2b"
    assert caught.value.detail == ("not_a_listing", "dict")


@pytest.mark.parametrize("operation", ["get", "destroy", "suspend", "list_all_names", "create"])
def test_a_teapot_lookup_is_invalid_for_every_operation(
    rsps: responses.RequestsMock, e2b: E2B, operation: str
) -> None:
    rsps.add(responses.GET, LISTING, status=418, json={"error": "teapot"})
    call = {
        "get": lambda: e2b.get(box(e2b)),
        "destroy": lambda: e2b.destroy(box(e2b)),
        "suspend": lambda: e2b.suspend(box(e2b)),
        "list_all_names": e2b.list_all_names,
        "create": lambda: e2b.create("box"),
    }[operation]
    with pytest.raises(Invalid) as caught:
        call()
    assert caught.value.detail == ("http", 418, {"error": "teapot"})


def test_a_teapot_create_is_invalid(rsps: responses.RequestsMock, e2b: E2B) -> None:
    found(rsps)
    rsps.add(responses.POST, f"{API}/v2/sandboxes", status=418, json={"error": "teapot"})
    with pytest.raises(Invalid):
        e2b.create("box")


def test_429_takes_retry_after_from_the_header(rsps: responses.RequestsMock, e2b: E2B) -> None:
    rsps.add(
        responses.GET,
        LISTING,
        status=429,
        headers={"Retry-After": "7"},
        json={"code": 429, "message": "Rate limit exceeded"},
    )
    with pytest.raises(RateLimited) as caught:
        e2b.get(box(e2b))
    assert caught.value.retry_after == 7.0


def test_429_prefers_the_retryAfterSeconds_body_field(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    rsps.add(
        responses.GET,
        LISTING,
        status=429,
        headers={"Retry-After": "7"},
        json={"retryAfterSeconds": 17},
    )
    with pytest.raises(RateLimited) as caught:
        e2b.get(box(e2b))
    assert caught.value.retry_after == 17.0


def test_429_without_advice_has_no_retry_after(rsps: responses.RequestsMock, e2b: E2B) -> None:
    rsps.add(responses.GET, LISTING, status=429, json={"retryAfterSeconds": "17"})
    with pytest.raises(RateLimited) as caught:
        e2b.get(box(e2b))
    assert caught.value.retry_after is None


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, Denied),
        (403, Denied),
        (500, Unavailable),
        (599, Unavailable),
        (422, Invalid),
    ],
)
def test_statuses_map_onto_the_taxonomy(
    rsps: responses.RequestsMock, e2b: E2B, status: int, error: type[Exception]
) -> None:
    rsps.add(responses.GET, LISTING, status=status, body="plain text")
    with pytest.raises(error):
        e2b.get(box(e2b))


def test_a_refused_connection_is_unavailable(e2b: E2B) -> None:
    configure(base_url="http://127.0.0.1:9")
    with pytest.raises(Unavailable):
        e2b.get(box(e2b))


def test_a_missing_api_key_is_denied_before_any_request(
    e2b: E2B,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("E2B_API_KEY")
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        for operation in (
            lambda: e2b.create("box"),
            lambda: e2b.get(box(e2b)),
            e2b.list_all_names,
            lambda: e2b.exec(box(e2b), "true"),
        ):
            with pytest.raises(Denied, match="E2B_API_KEY"):
                operation()
        assert len(rsps.calls) == 0


@pytest.mark.parametrize(
    ("allow", "body"),
    [
        ([], b'{"allowOut":[],"denyOut":["0.0.0.0/0"]}'),
        (["hex.pm", "github.com"], b'{"allowOut":["hex.pm","github.com"],"denyOut":["0.0.0.0/0"]}'),
    ],
)
def test_network_policy_denies_everything_but_the_allowlist(
    rsps: responses.RequestsMock, e2b: E2B, allow: list[str], body: bytes
) -> None:
    found(rsps, item())
    rsps.add(responses.PUT, f"{API}/sandboxes/sbx1/network", status=204)
    e2b.apply_network_policy(box(e2b), NetworkPolicy(allow=allow))
    assert body_of(rsps.calls[1]) == body


def test_network_policy_is_applied_again_after_a_resume(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    found(rsps, item())
    rsps.add(responses.PUT, f"{API}/sandboxes/sbx1/network", status=204)
    e2b.apply_network_policy(box(e2b), NetworkPolicy(allow=["example.com"]))
    found(rsps, item(state="paused"))
    rsps.add(responses.POST, f"{API}/v2/sandboxes/sbx1/connect", json=sandbox(), status=201)
    e2b.resume(box(e2b))
    again = rsps.calls[-1]
    assert (again.request.method, again.request.url) == ("PUT", f"{API}/sandboxes/sbx1/network")
    assert body_of(again) == b'{"allowOut":["example.com"],"denyOut":["0.0.0.0/0"]}'


def test_network_policy_on_a_paused_sandbox_resumes_it_first(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    found(rsps, item(state="paused"))
    rsps.add(responses.POST, f"{API}/v2/sandboxes/sbx1/connect", json=sandbox(), status=201)
    rsps.add(responses.PUT, f"{API}/sandboxes/sbx1/network", status=204)
    e2b.apply_network_policy(box(e2b), NetworkPolicy.deny_all())
    assert [c.request.method for c in rsps.calls] == ["GET", "POST", "PUT"]
