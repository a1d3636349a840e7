"""The shared HTTP layer: status → taxonomy, Retry-After, bounded bodies, transport errors."""

from __future__ import annotations

import email.utils
import time

import pytest
import requests
import responses

from managoat_sandbox import reasons
from managoat_sandbox._http import BODY_LIMIT, HttpClient, endpoint, error_for, retry_after_from
from managoat_sandbox.errors import Denied, Invalid, NotFound, RateLimited, Unavailable

URL = "https://provider.test/v1/thing"


@pytest.mark.parametrize(
    "status,kind",
    [
        (404, NotFound),
        (401, Denied),
        (403, Denied),
        (429, RateLimited),
        (500, Unavailable),
        (503, Unavailable),
        (400, Invalid),
        (409, Invalid),
        (422, Invalid),
        (302, Invalid),
    ],
)
def test_each_status_maps_to_its_taxonomy_class(status: int, kind: type) -> None:
    error = error_for(status, b'{"error": "x"}', {})
    assert type(error) is kind
    if kind is not RateLimited:
        assert error.detail == ("http", status, {"error": "x"})


def test_a_text_body_stays_text_and_is_bounded() -> None:
    error = error_for(502, b"bad gateway" + b"!" * (2 * BODY_LIMIT), {})
    assert error.detail[2].startswith("bad gateway")
    assert len(error.detail[2]) == BODY_LIMIT


def test_retry_after_prefers_the_body_field_then_the_header() -> None:
    assert (
        retry_after_from({"Retry-After": "7"}, {"retry_after_seconds": 3}, "retry_after_seconds")
        == 3
    )
    assert (
        retry_after_from({"Retry-After": "7"}, {"retry_after_seconds": -1}, "retry_after_seconds")
        == 7
    )
    assert retry_after_from({}, {}, "x") is None
    assert retry_after_from({"Retry-After": "soon"}) is None
    future = email.utils.formatdate(time.time() + 60, usegmt=True)
    assert 55 <= (retry_after_from({"Retry-After": future}) or 0) <= 60
    assert error_for(429, b"{}", {"Retry-After": "4"}) == RateLimited(4.0)


@responses.activate
def test_redirects_are_never_followed_and_bodies_are_bounded() -> None:
    responses.add(responses.GET, URL, status=302, headers={"Location": "https://elsewhere.test"})
    client = HttpClient()
    answer = client.request("GET", URL, timeout=(1, 1))
    assert answer.status == 302 and len(responses.calls) == 1
    responses.replace(responses.GET, URL, body=b"x" * 100)
    with pytest.raises(Unavailable) as caught:
        client.request("GET", URL, timeout=(1, 1), limit=10)
    assert caught.value.detail == (reasons.RESPONSE_TOO_LARGE, 10)


@responses.activate
def test_transport_failures_are_unavailable_and_name_the_endpoint_not_the_url() -> None:
    responses.add(responses.GET, URL, body=requests.ConnectionError("boom at " + URL))
    with pytest.raises(Unavailable) as caught:
        HttpClient().request("GET", URL, timeout=(1, 1))
    assert caught.value.detail == (reasons.TRANSPORT, "ConnectionError", "provider.test:443")
    assert "/v1/thing" not in str(caught.value)
    responses.replace(responses.GET, URL, body=requests.ReadTimeout("slow"))
    with pytest.raises(Unavailable) as caught:
        HttpClient().request("GET", URL, timeout=(1, 1))
    assert caught.value.detail == "timeout"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://user:s3cret@api.test/v1?token=s3cret#frag", "api.test:443"),
        ("http://127.0.0.1:8080/api", "127.0.0.1:8080"),
        ("wss://api.test/exec", "api.test:443"),
        ("ws://api.test/exec", "api.test:80"),
        ("http://[::1]:9000/", "[::1]:9000"),
        ("http://api.test:notaport/", "api.test"),
    ],
)
def test_endpoint_is_host_and_port_only(url: str, expected: str) -> None:
    assert endpoint(url) == expected


def test_release_closes_only_this_threads_session() -> None:
    client = HttpClient()
    first = client.session()
    client.release()
    assert client.session() is not first
    client.release()
    client.release()


@responses.activate
def test_a_request_is_sent_as_given_with_no_session_state_or_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Requests go straight to the transport: our User-Agent unless the call names one,
    params/json/files encoded, no cookie carried over, no proxy from the environment."""
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    responses.add(responses.POST, URL, body=b"{}", headers={"Set-Cookie": "track=1; Path=/"})
    client = HttpClient(user_agent="ours/1")
    client.request("POST", URL, timeout=(1, 1), params={"q": "a b"}, json={"k": [1]})
    client.request(
        "POST", URL, timeout=(1, 1), headers={"user-agent": "theirs/2"}, files={"file": b"xy"}
    )
    first, second = (call.request for call in responses.calls)
    assert first.url == URL + "?q=a+b" and first.body == b'{"k": [1]}'
    assert first.headers["User-Agent"] == "ours/1"
    assert first.headers["Content-Type"] == "application/json"
    assert second.headers["User-Agent"] == "theirs/2"
    assert "Cookie" not in second.headers
    assert second.headers["Content-Type"].startswith("multipart/form-data")
    assert b"xy" in second.body
