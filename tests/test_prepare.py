"""``_prepare.prepared``: the request an adapter hands to its transport is exactly what
``PreparedRequest.prepare`` makes of the same arguments, plain ones prepared without it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import hypothesis.strategies as st
import pytest
import requests
from hypothesis import given

from managoat_sandbox._prepare import _plain_headers, plain, prepared

HEADERS = {"User-Agent": "managoat-test", "X-Access-Token": "secret-token", "Accept": "*/*"}


def _shape(request: requests.PreparedRequest) -> tuple[Any, ...]:
    return request.method, request.url, dict(request.headers), request.body


def _by_requests(method: str, url: str, headers: dict[str, Any], **kwargs: Any) -> tuple[Any, ...]:
    request = requests.PreparedRequest()
    request.prepare(method=method, url=url, headers=headers, **kwargs)
    return _shape(request)


@pytest.fixture
def prepare_refused(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``PreparedRequest.prepare`` raises: a request that needs it fails."""

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("PreparedRequest.prepare was called")

    monkeypatch.setattr(requests.PreparedRequest, "prepare", refuse)
    yield


PLAIN = [
    ("GET", "http://127.0.0.1:8080/v1/sprites", {}),
    ("HEAD", "https://api.example.com/v1/sprites/box", {}),
    ("DELETE", "https://api.example.com/sandboxes/sbx1", {}),
    ("POST", "http://127.0.0.1:49983/process.Process/Start", {"data": b"\x00\x00\x00\x02{}"}),
    ("post", "http://localhost/process/session/s-1/exec", {"json": {"command": "true"}}),
    ("PUT", "http://localhost/a/b?follow=true&x=1", {"data": b""}),
    ("POST", "http://localhost/files", {"json": {"paths": ["/tmp/ü"]}, "data": None}),
]


@pytest.mark.parametrize(("method", "url", "kwargs"), PLAIN)
def test_a_plain_request_is_prepared_as_requests_prepares_it(
    method: str, url: str, kwargs: dict[str, Any]
) -> None:
    expected = _by_requests(method, url, dict(HEADERS), **kwargs)
    assert _shape(prepared(requests, method, url, dict(HEADERS), kwargs)) == expected


@pytest.mark.parametrize(("method", "url", "kwargs"), PLAIN)
@pytest.mark.usefixtures("prepare_refused")
def test_a_plain_request_skips_prepare(method: str, url: str, kwargs: dict[str, Any]) -> None:
    prepared(requests, method, url, dict(HEADERS), kwargs)


NOT_PLAIN = [
    ("GET", "http://localhost/files", {"params": {"path": "/tmp/a b"}}, HEADERS),
    ("GET", "http://localhost/a%2Fb", {}, HEADERS),
    ("GET", "http://localhost/a b", {}, HEADERS),
    ("GET", "http://user:pw@localhost/x", {}, HEADERS),
    ("GET", "http://localhost", {}, HEADERS),
    ("GET", "http://bücher.example/x", {}, HEADERS),
    ("GET", "HTTP://localhost/x", {}, HEADERS),
    ("GET", "http://LOCALHOST/x", {}, HEADERS),
    ("GET", "http://[::1]:49983/x", {}, HEADERS),
    ("GET", "http://localhost:080/x", {}, HEADERS),
    ("GET", "http://localhost/a/../b", {}, HEADERS),
    ("GET", "http://localhost/./x", {}, HEADERS),
    ("GET", "http://localhost/x?", {}, HEADERS),
    ("POST", "http://localhost/form", {"data": {"a": "1"}}, HEADERS),
    ("POST", "http://localhost/x", {"data": "text"}, HEADERS),
    ("GET", "http://localhost/x", {}, {**HEADERS, "X-Bytes": b"raw"}),
]


@pytest.mark.parametrize(("method", "url", "kwargs", "headers"), NOT_PLAIN)
def test_anything_else_is_left_to_requests(
    method: str, url: str, kwargs: dict[str, Any], headers: dict[str, Any]
) -> None:
    expected = _by_requests(method, url, dict(headers), **kwargs)
    assert _shape(prepared(requests, method, url, dict(headers), kwargs)) == expected


@pytest.mark.parametrize(
    ("method", "url", "kwargs", "headers"),
    [*NOT_PLAIN, ("POST", "http://localhost/upload", {"files": {"f": ("a", b"x")}}, HEADERS)],
)
@pytest.mark.usefixtures("prepare_refused")
def test_anything_else_goes_through_prepare(
    method: str, url: str, kwargs: dict[str, Any], headers: dict[str, Any]
) -> None:
    with pytest.raises(AssertionError, match="prepare was called"):
        prepared(requests, method, url, dict(headers), kwargs)


@pytest.mark.parametrize(
    ("headers", "kwargs"),
    [
        ({**HEADERS, "X-Injected": "a\r\nHost: evil"}, {}),
        ({**HEADERS, "X-Lead": " value"}, {}),
        ({**HEADERS, "Bad:Name": "v"}, {}),
        ({**HEADERS, "X-Folded": "a\r\n b"}, {}),
    ],
)
def test_a_header_requests_refuses_is_still_refused(
    headers: dict[str, Any], kwargs: dict[str, Any]
) -> None:
    with pytest.raises(requests.exceptions.InvalidHeader):
        prepared(requests, "GET", "http://localhost/x", headers, kwargs)


def test_json_requests_cannot_encode_is_still_refused() -> None:
    with pytest.raises(requests.exceptions.InvalidJSONError):
        prepared(requests, "POST", "http://localhost/x", dict(HEADERS), {"json": float("nan")})


_TEXT = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=12)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)


_SEGMENT = st.sampled_from(["", ".", "..", ".x", "a", "B-c_d~e", "x.y", "@:!$&'()*+,;="]) | st.text(
    st.characters(min_codepoint=33, max_codepoint=126), max_size=6
)
_URL = st.builds(
    lambda scheme, host, port, segments, query: (
        f"{scheme}://{host}{port}/" + "/".join(segments) + query
    ),
    st.sampled_from(["http", "https", "HTTP"]),
    st.sampled_from(["localhost", "LocalHost", "127.0.0.1", "api.e2b.app", "a..b", "-a", "[::1]"]),
    st.sampled_from(["", ":", ":80", ":080", ":65535", ":65536", ":99999"]),
    st.lists(_SEGMENT, max_size=4),
    st.sampled_from(["", "?", "?a=1&b", "?x/./y", "#frag"]),
)


@given(
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "HEAD", "patch"]),
    url=_URL,
    header_value=_TEXT,
    body=st.none() | st.binary(max_size=16) | _JSON.map(lambda value: {"json": value}),
)
def test_any_request_is_prepared_as_requests_prepares_it(
    method: str, url: str, header_value: str, body: bytes | dict[str, Any] | None
) -> None:
    headers = {**HEADERS, "X-Value": header_value}
    kwargs: dict[str, Any] = body if isinstance(body, dict) else {"data": body}
    try:
        expected: tuple[Any, ...] | type[Exception] = _by_requests(
            method, url, dict(headers), **kwargs
        )
    except requests.RequestException as error:
        expected = type(error)
    try:
        got: tuple[Any, ...] | type[Exception] = _shape(
            prepared(requests, method, url, dict(headers), kwargs)
        )
    except requests.RequestException as error:
        got = type(error)
    assert got == expected


def _plain_by_header(headers: dict[str, Any]) -> bool:
    """What ``_plain_headers`` answers, header by header: text names without a colon or
    whitespace, text values without a line break or leading whitespace."""
    for name, value in headers.items():
        if not isinstance(value, str):
            return False
        if not name or ":" in name or any(c.isspace() for c in name):
            return False
        if "\r" in value or "\n" in value or value[:1].isspace():
            return False
    return True


_HEADER_TEXT = st.text(
    st.sampled_from(
        ["a", "B", "-", ":", " ", "\t", "\n", "\r", "\x0b", "\x1c", "\x85", "\xa0", "é"]
    ),
    max_size=4,
)


@given(headers=st.dictionaries(_HEADER_TEXT, _HEADER_TEXT | st.binary(max_size=2), max_size=5))
def test_all_headers_checked_at_once_answer_as_each_checked_alone(
    headers: dict[str, Any],
) -> None:
    assert _plain_headers(headers) == _plain_by_header(headers)


@pytest.mark.usefixtures("prepare_refused")
def test_empty_and_repeated_header_values_are_plain() -> None:
    prepared(requests, "GET", "http://localhost/x", {"A": "", "B": "", "C": "v", "D": ""}, {})


@pytest.mark.parametrize(("method", "url", "kwargs"), PLAIN)
def test_a_plain_request_goes_on_the_wire_as_requests_prepares_it(
    method: str, url: str, kwargs: dict[str, Any]
) -> None:
    found = plain(requests, method, url, dict(HEADERS), kwargs)
    assert found is not None
    expected = _by_requests(method, url, dict(HEADERS), **kwargs)
    assert (found.method, found.url, found.headers, found.body) == expected
    assert type(found.headers) is dict


@pytest.mark.parametrize(
    "headers",
    [{**HEADERS, "user-agent": "twice"}, {**HEADERS, "content-length": "2"}],
    ids=["a name twice", "content-length given"],
)
def test_headers_prepare_would_merge_are_not_plain(headers: dict[str, str]) -> None:
    assert plain(requests, "POST", "http://localhost/x", headers, {"data": b"{}"}) is None
    assert _shape(prepared(requests, "POST", "http://localhost/x", headers, {"data": b"{}"})) == (
        _by_requests("POST", "http://localhost/x", headers, data=b"{}")
    )
