"""The default transport's ``requests`` adapter (``_requests_adapter.DirectAdapter``):
what it does per request is cheaper, what reaches the wire and what callers get back
is what a stock ``HTTPAdapter`` sends and returns, and whatever patches
``HTTPAdapter.send`` (``responses``) or mounts another adapter still intercepts it."""

from __future__ import annotations

import functools
import http.server
import io
import threading
from collections.abc import Iterator, Mapping
from typing import Any
from unittest import mock

import pytest
import requests
import responses
import urllib3
from requests.adapters import HTTPAdapter

from managoat_sandbox import _requests_adapter
from managoat_sandbox._http import HttpClient, RequestsTransport
from managoat_sandbox._prepare import plain, prepared
from managoat_sandbox._requests_adapter import DirectAdapter, requests_sends
from managoat_sandbox._status import ErrorPolicy
from managoat_sandbox.errors import DeadlineExpired, NotFound, Unavailable

from .conftest import counted_connects

URL = "https://provider.test/v1/thing"
PLAIN = ErrorPolicy("test")


class _Handler(http.server.BaseHTTPRequestHandler):
    """Answers every request with what its path asks for, and records what it got."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str, dict[str, str], bytes]]

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.seen.append((self.command, self.path, dict(self.headers), body))
        if self.path.startswith("/silent"):
            return  # never answers: the client's read timeout ends the wait
        payload = b'{"ok": true}'
        self.send_response(404 if self.path.startswith("/missing") else 200)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        if self.path.startswith("/cookie"):
            self.send_header("Set-Cookie", "track=1; Path=/")
        if self.path.startswith("/chunked"):
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in (b"first,", b"second"):
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _answer  # noqa: N815 - the names http.server dispatches to

    def log_message(self, *_: Any) -> None:
        """Quiet."""


@pytest.fixture
def server() -> Iterator[tuple[str, list[tuple[str, str, dict[str, str], bytes]]]]:
    """A local HTTP/1.1 server (keep-alive) and the requests it received."""
    seen: list[tuple[str, str, dict[str, str], bytes]] = []
    handler = type("Handler", (_Handler,), {"seen": seen})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def _prepared(url: str, headers: Mapping[str, str] | None = None) -> requests.PreparedRequest:
    return prepared(requests, "POST", url, {"X-Test": "1", **(headers or {})}, {"data": b"{}"})


# -- what the transport mounts ----------------------------------------------------------


def test_the_default_transport_sends_through_a_direct_adapter_for_both_schemes() -> None:
    session = RequestsTransport().session()
    assert type(session.get_adapter("http://host.test/x")) is DirectAdapter
    assert type(session.get_adapter("https://host.test/x")) is DirectAdapter


def test_the_direct_adapter_does_not_replace_send() -> None:
    """``send`` is requests' own: whatever patches ``HTTPAdapter.send`` patches it too."""
    assert "send" not in vars(DirectAdapter)
    assert DirectAdapter.send is HTTPAdapter.send


# -- mocking keeps working ------------------------------------------------------------


def test_responses_intercepts_requests_sent_through_the_default_transport() -> None:
    with responses.RequestsMock() as mock_http:
        mock_http.post(URL, json={"mocked": True}, headers={"Set-Cookie": "a=1"})
        mock_http.get(URL, status=404, json={"error": "gone"})
        client = HttpClient()
        answer = client.send("POST", URL, policy=PLAIN, timeout=(1, 1), json={"q": 1})
        with pytest.raises(NotFound):
            client.send("GET", URL, policy=PLAIN, timeout=(1, 1))
        calls = list(mock_http.calls)
    assert answer.json() == {"mocked": True}
    assert [call.request.method for call in calls] == ["POST", "GET"]
    assert calls[0].request.body == b'{"q": 1}'
    assert calls[0].response.cookies.get("a") == "1"  # built by requests: it sets a cookie


def test_responses_streams_a_mocked_body_to_a_streaming_caller() -> None:
    with responses.RequestsMock() as mock_http:
        mock_http.get(URL, body=b"streamed body")
        with HttpClient().open("GET", URL, policy=PLAIN, timeout=(1, 1)) as response:
            assert response.raw.read(8) == b"streamed"
            assert response.raw.read() == b" body"


def test_a_responses_pass_through_reaches_the_server_through_the_adapters_hooks(
    server: tuple[str, list[Any]],
) -> None:
    base, seen = server
    with responses.RequestsMock() as mock_http:
        mock_http.add_passthru(base)
        answer = HttpClient().request("GET", f"{base}/passed", timeout=(5, 5))
    assert answer.status == 200 and answer.json() == {"ok": True}
    assert [(method, path) for method, path, _, _ in seen] == [("GET", "/passed")]


def test_an_adapter_mounted_on_the_session_serves_its_prefix() -> None:
    """``requests_mock``-style interception: an adapter mounted for a prefix is the one
    the transport hands requests to."""

    class Canned(requests.adapters.BaseAdapter):
        def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
            answer = requests.Response()
            answer.status_code = 418
            answer.raw = urllib3.HTTPResponse(body=io.BytesIO(b"teapot"), preload_content=False)
            answer.request = request
            return answer

        def close(self) -> None:
            """Nothing to release."""

    client = HttpClient()
    client.session().mount("https://provider.test/", Canned())
    answer = client.request("GET", URL, timeout=(1, 1))
    assert (answer.status, answer.body) == (418, b"teapot")


# -- what reaches the wire, and what comes back -------------------------------------------


def test_a_request_reaches_the_server_as_sent_and_the_answer_is_requests_own(
    server: tuple[str, list[Any]],
) -> None:
    base, seen = server
    direct, stock = DirectAdapter(), HTTPAdapter()
    try:
        got = direct.send(_prepared(f"{base}/a?x=1"), stream=True, timeout=(5, 5))
        want = stock.send(_prepared(f"{base}/a?x=1"), stream=True, timeout=(5, 5))
        for answer in (got, want):
            assert answer.raw.read() == b'{"ok": true}'
        assert (got.status_code, got.reason, got.url, got.encoding) == (
            want.status_code,
            want.reason,
            want.url,
            want.encoding,
        )
        assert {k: v for k, v in got.headers.items() if k != "Date"} == {
            k: v for k, v in want.headers.items() if k != "Date"
        }
        assert isinstance(got.headers, requests.structures.CaseInsensitiveDict)
        assert got.connection is direct and not got.cookies
    finally:
        direct.close()
        stock.close()
    (method, path, headers, body), again = seen
    assert again[:2] == (method, path) == ("POST", "/a?x=1")
    assert body == b"{}" and headers["X-Test"] == "1" and headers == again[2]


def test_an_answer_that_sets_a_cookie_has_it_parsed_as_requests_would(
    server: tuple[str, list[Any]],
) -> None:
    base, _ = server
    adapter = DirectAdapter()
    try:
        answer = adapter.send(_prepared(f"{base}/cookie"), stream=False, timeout=(5, 5))
    finally:
        adapter.close()
    assert answer.cookies.get("track") == "1"


def test_a_streamed_chunked_answer_is_read_as_it_comes(server: tuple[str, list[Any]]) -> None:
    base, _ = server
    with HttpClient().open("GET", f"{base}/chunked", policy=PLAIN, timeout=(5, 5)) as answer:
        assert answer.raw.read1(64) == b"first,"
        assert answer.raw.read1(64) == b"second"
        assert answer.raw.read1(64) == b""


def test_statuses_and_read_timeouts_map_as_before(server: tuple[str, list[Any]]) -> None:
    base, _ = server
    client = HttpClient()
    with pytest.raises(NotFound):
        client.send("GET", f"{base}/missing", policy=PLAIN, timeout=(5, 5))
    with pytest.raises(DeadlineExpired) as caught:
        client.request("GET", f"{base}/silent", timeout=(5, 0.2))
    assert caught.value.detail == "timeout"


def test_a_refused_connection_is_a_transport_failure_naming_the_endpoint(
    server: tuple[str, list[Any]],
) -> None:
    base, _ = server
    closed = base.rsplit(":", 1)[0] + ":9"
    with pytest.raises(Unavailable) as caught:
        HttpClient().request("GET", f"{closed}/x", timeout=(2, 2))
    assert caught.value.detail == ("transport", "ConnectionError", "127.0.0.1:9")


def test_requests_to_one_server_share_one_connection(server: tuple[str, list[Any]]) -> None:
    base, seen = server
    client = HttpClient()
    assert client.request("GET", f"{base}/warm", timeout=(5, 5)).status == 200
    with counted_connects() as connects:
        for n in range(3):
            assert client.request("GET", f"{base}/again/{n}", timeout=(5, 5)).status == 200
    assert connects == [] and len(seen) == 4


# -- the remembered routes -------------------------------------------------------------


def test_a_route_is_worked_out_once_per_url_and_the_memory_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    adapter = DirectAdapter()
    keyed: list[str | None] = []
    real = HTTPAdapter.build_connection_pool_key_attributes

    def counting(self: HTTPAdapter, request: requests.PreparedRequest, *args: Any) -> Any:
        keyed.append(request.url)
        return real(self, request, *args)

    monkeypatch.setattr(HTTPAdapter, "build_connection_pool_key_attributes", counting)
    monkeypatch.setattr(_requests_adapter, "REMEMBERED", 2)
    one, two = _prepared("http://one.test/a?b=1"), _prepared("http://two.test/c")
    for _ in range(3):
        pool = adapter.get_connection_with_tls_context(one, True)
        assert adapter.request_url(one, None) == "/a?b=1"
    assert (pool.host, pool.port, pool.scheme) == ("one.test", 80, "http")
    adapter.get_connection_with_tls_context(two, True)
    adapter.get_connection_with_tls_context(_prepared("http://three.test/"), True)
    assert keyed == ["http://one.test/a?b=1", "http://two.test/c", "http://three.test/"]
    assert len(adapter._routes) == 1
    adapter.close()


def test_the_remembered_route_leads_to_the_pool_requests_would_use() -> None:
    """Keyed once, the pool is still the pool manager's: the one requests' own hook
    finds for the URL, replaced once the manager has discarded it."""
    adapter = DirectAdapter()
    for url in ("https://one.test/a", "http://two.test:8080/b", "http://two.test:8080/c"):
        request = _prepared(url)
        ours = adapter.get_connection_with_tls_context(request, True)
        assert ours is HTTPAdapter.get_connection_with_tls_context(adapter, request, True)
        assert adapter.get_connection_with_tls_context(request, True) is ours
    adapter.poolmanager.clear()
    again = adapter.get_connection_with_tls_context(_prepared("https://one.test/a"), True)
    assert again is not ours and again.pool is not None
    adapter.init_poolmanager(10, 10)  # a new manager: routes made for the old one are redone
    request = _prepared("https://one.test/a")
    fresh = adapter.get_connection_with_tls_context(request, True)
    assert fresh is HTTPAdapter.get_connection_with_tls_context(adapter, request, True)
    assert fresh is not again
    adapter.close()


@pytest.mark.parametrize(
    ("verify", "proxies", "cert"),
    [
        (False, None, None),
        ("/etc/ssl/certs", None, None),
        (True, {"https": "http://proxy.test:3128"}, None),
        (True, None, "/tmp/client.pem"),
    ],
)
def test_any_other_tls_or_proxy_setting_is_left_to_requests(
    verify: bool | str, proxies: dict[str, str] | None, cert: str | None
) -> None:
    adapter = DirectAdapter()
    request = _prepared("https://host.test/x")
    with mock.patch.object(
        HTTPAdapter, "get_connection_with_tls_context", return_value="requests' own"
    ) as own:
        assert (
            adapter.get_connection_with_tls_context(request, verify, proxies=proxies, cert=cert)
            == "requests' own"
        )
    own.assert_called_once()
    assert adapter._routes == {}
    if proxies:
        with mock.patch.object(HTTPAdapter, "request_url", return_value="full") as own_url:
            assert adapter.request_url(request, proxies) == "full"
        own_url.assert_called_once()
    adapter.close()


# -- the direct path (HttpClient(direct=True), E2B's) -----------------------------------


def test_requests_own_send_is_told_from_any_replacement() -> None:
    assert requests_sends()
    with responses.RequestsMock():
        assert not requests_sends()
    assert requests_sends()
    real = HTTPAdapter.send

    @functools.wraps(real)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return real(*args, **kwargs)

    with mock.patch.object(HTTPAdapter, "send", wrapped):
        assert not requests_sends()
    with mock.patch.object(HTTPAdapter, "send", autospec=True, side_effect=real):
        assert not requests_sends()
    assert requests_sends()


def _sent_through(client: HttpClient, url: str) -> tuple[int, bytes]:
    with client.open(
        "POST", url, policy=PLAIN, timeout=(5, 5), headers={"X-Test": "1"}, data=b"{}"
    ) as answer:
        return answer.status_code, answer.raw.read()


def test_a_direct_request_reaches_the_wire_as_a_prepared_one_and_skips_send(
    server: tuple[str, list[Any]],
) -> None:
    base, seen = server
    with mock.patch.object(
        HTTPAdapter, "send", autospec=True, side_effect=HTTPAdapter.send
    ) as send:
        assert _sent_through(HttpClient(), f"{base}/prepared") == (200, b'{"ok": true}')
    assert send.call_count == 1  # the spy replaced requests' own send: no direct path
    direct = HttpClient(direct=True)
    urlopen = urllib3.connectionpool.HTTPConnectionPool.urlopen
    with mock.patch.object(
        urllib3.connectionpool.HTTPConnectionPool, "urlopen", autospec=True, side_effect=urlopen
    ) as opened:
        assert _sent_through(direct, f"{base}/direct") == (200, b'{"ok": true}')
    assert type(opened.call_args.kwargs["headers"]) is dict
    (_, _, prepared_headers, prepared_body), (_, path, direct_headers, direct_body) = seen
    assert path == "/direct" and direct_body == prepared_body == b"{}"
    assert direct_headers == prepared_headers


def test_a_direct_request_is_still_seen_by_responses_and_by_a_mounted_adapter() -> None:
    with responses.RequestsMock() as mock_http:
        mock_http.post(URL, body=b"mocked")
        assert _sent_through(HttpClient(direct=True), URL) == (200, b"mocked")
        assert mock_http.calls[0].request.headers["x-test"] == "1"  # a CaseInsensitiveDict

    class Teapot(requests.adapters.BaseAdapter):
        def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
            answer = requests.Response()
            answer.status_code = 418
            answer.raw = urllib3.HTTPResponse(body=io.BytesIO(b"tea"), preload_content=False)
            return answer

        def close(self) -> None:
            """Nothing to release."""

    client = HttpClient(direct=True)
    client.session().mount("https://provider.test/", Teapot())
    answer = client.request("POST", URL, timeout=(1, 1), data=b"{}")
    assert (answer.status, answer.body) == (418, b"tea")


def test_a_request_that_is_not_plain_goes_through_prepare_and_send(
    server: tuple[str, list[Any]],
) -> None:
    base, seen = server
    client = HttpClient(direct=True)
    real = DirectAdapter.send_plain
    with mock.patch.object(DirectAdapter, "send_plain", autospec=True, side_effect=real) as direct:
        client.request("GET", f"{base}/plain", timeout=(5, 5))
        # query parameters, and a header named twice: both prepare's to work out
        client.request("GET", f"{base}/q", timeout=(5, 5), params={"a": "b c"})
        client.request("GET", f"{base}/twice", timeout=(5, 5), headers={"user-agent": "other/1"})
    assert direct.call_count == 1
    assert [path for _, path, _, _ in seen] == ["/plain", "/q?a=b+c", "/twice"]
    assert {k.lower(): v for k, v in seen[2][2].items()}["user-agent"] == "other/1"


def test_direct_failures_are_the_taxonomy_errors_of_prepared_ones(
    server: tuple[str, list[Any]],
) -> None:
    base, _ = server
    closed = base.rsplit(":", 1)[0] + ":9"
    for client in (HttpClient(), HttpClient(direct=True)):
        with pytest.raises(Unavailable) as refused:
            client.request("GET", f"{closed}/x", timeout=(2, 2))
        assert refused.value.detail == ("transport", "ConnectionError", "127.0.0.1:9")
        with pytest.raises(DeadlineExpired) as slow:
            client.request("GET", f"{base}/silent", timeout=(5, 0.2))
        assert slow.value.detail == "timeout"


@pytest.mark.parametrize(
    "failure",
    [
        urllib3.exceptions.ProtocolError("reset"),
        ConnectionResetError("reset"),
        urllib3.exceptions.MaxRetryError(
            None, "/", urllib3.exceptions.NewConnectionError(None, "no")
        ),  # type: ignore[arg-type]
        urllib3.exceptions.MaxRetryError(None, "/", urllib3.exceptions.ConnectTimeoutError("slow")),  # type: ignore[arg-type]
        urllib3.exceptions.MaxRetryError(None, "/", urllib3.exceptions.ResponseError("too many")),  # type: ignore[arg-type]
        urllib3.exceptions.MaxRetryError(None, "/", urllib3.exceptions.ProxyError("p", OSError())),  # type: ignore[arg-type]
        urllib3.exceptions.MaxRetryError(None, "/", urllib3.exceptions.SSLError("tls")),  # type: ignore[arg-type]
        urllib3.exceptions.MaxRetryError(None, "/", urllib3.exceptions.ProtocolError("x")),  # type: ignore[arg-type]
        urllib3.exceptions.ClosedPoolError(None, "closed"),  # type: ignore[arg-type]
        urllib3.exceptions.ProxyError("proxy", OSError()),
        urllib3.exceptions.SSLError("tls"),
        urllib3.exceptions.ReadTimeoutError(None, "/", "slow"),  # type: ignore[arg-type]
        urllib3.exceptions.InvalidHeader("bad"),
        urllib3.exceptions.DecodeError("other"),
    ],
    ids=lambda failure: type(failure).__name__,
)
def test_a_direct_failure_is_raised_as_requests_own_send_raises_it(failure: Exception) -> None:
    """Each failure urllib3's ``urlopen`` may raise comes out of the direct path as the
    exception requests' ``send`` makes of it (same class, so the same taxonomy error)."""
    adapter = DirectAdapter()
    with mock.patch.object(
        urllib3.connectionpool.HTTPConnectionPool, "urlopen", side_effect=failure
    ):
        with pytest.raises(Exception) as by_requests:
            adapter.send(_prepared("http://host.test/x"), stream=True, timeout=(1, 1))
        found = plain(requests, "POST", "http://host.test/x", {"X-Test": "1"}, {"data": b"{}"})
        assert found is not None
        with pytest.raises(Exception) as direct:
            adapter.send_plain(found, (1, 1))
    assert type(direct.value) is type(by_requests.value)
    adapter.close()
