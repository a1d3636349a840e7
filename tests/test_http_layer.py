"""The shared HTTP layer's single paths: send/open with a provider's ErrorPolicy, the
pagination walker, the secret sanitiser and the settings reader."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import responses

from managoat_sandbox import config
from managoat_sandbox._http import ErrorPolicy, HttpClient, Response, unexpected
from managoat_sandbox._paging import Page, walk
from managoat_sandbox._secrets import credentials_in, safe_url, scrub, scrub_bytes
from managoat_sandbox._settings import ProviderSettings
from managoat_sandbox.errors import (
    Denied,
    Invalid,
    NotFound,
    ProviderError,
    RateLimited,
    SandboxError,
    Truncated,
    Unavailable,
)
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.providers.e2b import E2B
from managoat_sandbox.providers.sprites import Sprites
from managoat_sandbox.reasons import Reason
from managoat_sandbox.types import Handle

URL = "https://provider.test/v1/thing"
SECRET = "s3cr3t-VALUE-4417"
PLAIN = ErrorPolicy("test")


@pytest.fixture
def mock() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        yield rsps


# -- send / open -----------------------------------------------------------------------


def test_send_returns_a_2xx_answer_and_raises_the_mapped_error_otherwise(
    mock: responses.RequestsMock,
) -> None:
    mock.get(URL, json={"ok": True})
    mock.get(URL, status=404, json={"error": "gone"})
    http = HttpClient()
    assert http.send("GET", URL, policy=PLAIN, timeout=(1, 1)).json() == {"ok": True}
    with pytest.raises(NotFound) as caught:
        http.send("GET", URL, policy=PLAIN, timeout=(1, 1))
    assert caught.value.detail == ("http", 404, {"error": "gone"})


def test_send_accepts_exactly_what_accept_accepts(mock: responses.RequestsMock) -> None:
    mock.get(URL, status=409, json={})
    mock.get(URL, status=201, json={})
    http = HttpClient()
    assert (
        http.send(
            "GET", URL, policy=PLAIN, timeout=(1, 1), accept=lambda status: status == 409
        ).status
        == 409
    )
    with pytest.raises(Invalid):
        http.send("GET", URL, policy=PLAIN, timeout=(1, 1), accept=lambda status: status == 200)


def test_the_policy_retry_after_field_and_refinement_are_applied(
    mock: responses.RequestsMock,
) -> None:
    mock.get(URL, status=429, json={"wait": 4})
    mock.get(URL, status=500, json={"message": "special"})
    http = HttpClient()
    with pytest.raises(RateLimited) as limited:
        http.send("GET", URL, policy=ErrorPolicy("test", retry_after_field="wait"), timeout=(1, 1))
    assert limited.value.retry_after == 4

    def refine(response: Response) -> SandboxError:
        return NotFound(("refined", response.status))

    with pytest.raises(NotFound) as refined:
        http.send("GET", URL, policy=ErrorPolicy("test", refine=refine), timeout=(1, 1))
    assert refined.value.detail == ("refined", 500)


def test_open_yields_an_accepted_stream_and_maps_any_other_status(
    mock: responses.RequestsMock,
) -> None:
    mock.get(URL, body=b"streamed")
    mock.get(URL, status=503, json={"down": True})
    http = HttpClient()
    with http.open("GET", URL, policy=PLAIN, timeout=(1, 1)) as response:
        assert response.content == b"streamed"
    with pytest.raises(Unavailable) as caught, http.open("GET", URL, policy=PLAIN, timeout=(1, 1)):
        pytest.fail("a 503 must not be yielded")
    assert caught.value.detail == ("http", 503, {"down": True})


def test_an_error_body_echoing_the_request_credential_is_scrubbed(
    mock: responses.RequestsMock,
) -> None:
    mock.get(URL, status=401, json={"error": f"bad key {SECRET}"})
    mock.get(URL, status=400, body=f"token Bearer {SECRET} refused")
    http = HttpClient()
    for headers in ({"X-API-Key": SECRET}, {"Authorization": f"Bearer {SECRET}"}):
        with pytest.raises(SandboxError) as caught:
            http.send("GET", URL, policy=PLAIN, timeout=(1, 1), headers=headers)
        assert SECRET not in repr(caught.value) and SECRET not in str(caught.value)
        assert "***" in repr(caught.value)


def test_unexpected_names_the_provider_and_the_answers_type_never_its_content() -> None:
    error = unexpected("sprites", Reason.UNEXPECTED_SPRITE, [SECRET])
    assert error == ProviderError("sprites", ("unexpected_sprite", "list"))
    assert SECRET not in repr(error)


# -- pagination --------------------------------------------------------------------------


def _pages(count: int, *, more_without_cursor_at: int | None = None) -> list[Page[int]]:
    pages = [Page([i], f"c{i + 1}" if i + 1 < count else None) for i in range(count)]
    if more_without_cursor_at is not None:
        pages[more_without_cursor_at] = Page([more_without_cursor_at], None, more=True)
    return pages


def _fetcher(pages: list[Page[int]], asked: list[str | None]) -> object:
    def fetch(cursor: str | None) -> Page[int]:
        asked.append(cursor)
        return pages[0 if cursor is None else int(cursor[1:])]

    return fetch


def test_walk_follows_each_cursor_and_gathers_every_page() -> None:
    asked: list[str | None] = []
    fetch = _fetcher(_pages(3), asked)
    assert walk(fetch, 3) == [0, 1, 2]  # type: ignore[arg-type]
    assert asked == [None, "c1", "c2"]


def test_walk_refuses_a_partial_view_past_the_cap_after_exactly_the_cap() -> None:
    asked: list[str | None] = []
    with pytest.raises(Truncated) as caught:
        walk(_fetcher(_pages(4), asked), 3, cap_reason="page_cap")  # type: ignore[arg-type]
    assert caught.value.detail == ("page_cap", 3)
    assert len(asked) == 3


def test_walk_refuses_more_without_a_cursor_and_a_cap_below_one() -> None:
    asked: list[str | None] = []
    with pytest.raises(Truncated) as caught:
        walk(_fetcher(_pages(3, more_without_cursor_at=1), asked), 5)  # type: ignore[arg-type]
    assert caught.value.detail == ("has_more_without_token", 2)
    with pytest.raises(Truncated) as capped:
        walk(_fetcher(_pages(1), []), 0)  # type: ignore[arg-type]
    assert capped.value.detail == ("max_pages", 0)


# -- the secret sanitiser -------------------------------------------------------------------


def test_scrub_masks_userinfo_query_credentials_auth_values_and_known_secrets() -> None:
    text = (
        f"https://user:{SECRET}@host.test/p?token={SECRET}&page=2 "
        f"Authorization: Bearer {SECRET} and plainly {SECRET}"
    )
    cleaned = scrub(text, [SECRET])
    assert SECRET not in cleaned
    assert "https://***@host.test/p?token=***&page=2" in cleaned
    assert scrub(f"x?api_key={SECRET[::-1]}") == "x?api_key=***"
    assert scrub(f"Basic {SECRET[::-1]}") == "Basic ***"


def test_credentials_in_finds_each_credential_header_and_its_bare_token() -> None:
    found = credentials_in(
        {
            "Authorization": f"Bearer {SECRET}",
            "X-Access-Token": "tok-1234",
            "Accept": "application/json",
        }
    )
    assert set(found) == {f"Bearer {SECRET}", SECRET, "tok-1234"}
    assert scrub_bytes(f"a {SECRET} b".encode(), found) == b"a *** b"


def test_safe_url_keeps_scheme_host_port_and_path_only() -> None:
    assert (
        safe_url(f"https://u:{SECRET}@h.test:8443/api?key={SECRET}#f") == "https://h.test:8443/api"
    )


# -- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "call", "env"),
    [
        (Sprites, lambda a: a.get(Handle("sprites", "box")), "SPRITES_TOKEN"),
        (E2B, lambda a: a.get(a.build_handle("box")), "E2B_API_KEY"),
        (Daytona, lambda a: a.get(a.build_handle("box")), "DAYTONA_API_KEY"),
    ],
)
def test_a_missing_credential_is_denied_alike_by_every_provider_before_any_request(
    mock: responses.RequestsMock,
    monkeypatch: pytest.MonkeyPatch,
    make: type,
    call: object,
    env: str,
) -> None:
    monkeypatch.delenv(env, raising=False)
    adapter = make()
    with pytest.raises(Denied) as caught:
        call(adapter)  # type: ignore[operator]
    assert caught.value.detail[0] == "no_credential"
    message = caught.value.message
    assert isinstance(message, str) and message.startswith("no ")
    assert " credential: configure the " in message
    assert env in message
    assert len(mock.calls) == 0


@pytest.mark.parametrize("value", ["ftp://host.test", "no-scheme", "http://", "http://[x", 42])
def test_a_url_setting_that_cannot_be_used_is_invalid_naming_it(
    value: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(Invalid) as caught:
        config.configure("sprites", base_url=value)
    assert caught.value.detail == ("config", "sprites", "base_url")
    if isinstance(value, str):  # from the environment it is refused when read
        monkeypatch.setenv("SPRITES_BASE_URL", value)
        with pytest.raises(Invalid) as caught:
            ProviderSettings("sprites", "Sprites").url("base_url")
        assert caught.value.detail == ("config", "sprites", "base_url")


@pytest.mark.parametrize(
    "value", [0, -5, "soon", True, float("nan"), float("inf"), 10**400, "1e400"]
)
def test_a_duration_setting_that_is_not_positive_milliseconds_is_invalid(value: object) -> None:
    with pytest.raises(Invalid) as caught:
        config.configure("e2b", timeout_ms=value)
    assert caught.value.detail == ("config", "e2b", "timeout_ms")
    config.configure("e2b", timeout_ms="1500")
    assert ProviderSettings("e2b", "E2B").seconds("timeout_ms") == 1.5
