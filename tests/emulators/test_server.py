"""The emulator base: credentials, request log, generic faults, control API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
from aiohttp import web

from managoat_sandbox.emulators import Emulator


class Echo(Emulator):
    provider = "echo"
    credential_env = "ECHO_EMULATOR_TOKEN"

    def add_routes(self, app: web.Application) -> None:
        async def hello(request: web.Request) -> web.Response:
            return web.json_response({"hello": "world"})

        app.router.add_route("*", "/hello", hello)


AUTH = {"Authorization": "Bearer secret-1"}


@pytest.fixture
def echo() -> Iterator[Echo]:
    with Echo(credential="secret-1") as emulator:
        yield emulator  # type: ignore[misc]


def get(echo: Echo, token: str | None = "secret-1", **kwargs: object) -> requests.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return requests.get(f"{echo.base_url}/hello", headers=headers, timeout=5, **kwargs)


def test_credentials_are_checked_and_redacted_in_the_log(echo: Echo) -> None:
    assert get(echo).json() == {"hello": "world"}
    assert get(echo, token=None).status_code == 401
    assert get(echo, token="wrong").status_code == 401
    assert all(r.headers.get("Authorization") in (None, "<redacted>") for r in echo.requests)
    assert "secret-1" not in repr(echo.requests)
    assert (len(echo.requests), echo.unauthenticated_requests) == (1, 2)


def test_without_a_configured_credential_a_random_one_is_required(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ECHO_EMULATOR_TOKEN", raising=False)
    with Echo() as emulator, Echo() as other:
        assert emulator.credential_generated
        assert emulator.credential != other.credential
        assert get(emulator, token="anything").status_code == 401  # type: ignore[arg-type]
        assert get(emulator, token=None).status_code == 401  # type: ignore[arg-type]
        assert get(emulator, token=emulator.credential).status_code == 200  # type: ignore[arg-type]


def test_the_environment_variable_gives_the_credential(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ECHO_EMULATOR_TOKEN", "from-env")
    with Echo() as emulator:
        assert not emulator.credential_generated
        assert get(emulator, token="from-env").status_code == 200  # type: ignore[arg-type]


def test_status_faults_apply_the_given_number_of_times(echo: Echo) -> None:
    echo.faults.add("status", status=429, headers={"Retry-After": "3"}, times=2, path="/hello")
    first, second, third = get(echo), get(echo), get(echo)
    assert [first.status_code, second.status_code, third.status_code] == [429, 429, 200]
    assert first.headers["Retry-After"] == "3"


def test_drop_oversize_and_truncate_faults(echo: Echo) -> None:
    echo.faults.add("drop")
    with pytest.raises(requests.ConnectionError):
        get(echo)
    echo.faults.add("oversize", size=200_000)
    assert len(get(echo).content) == 200_000
    echo.faults.add("truncate")
    with pytest.raises(requests.RequestException):
        get(echo).content  # noqa: B018
    assert get(echo).status_code == 200


def test_the_control_api_adds_faults_and_shows_the_log(echo: Echo) -> None:
    added = requests.post(
        f"{echo.base_url}/_emulator/faults",
        headers=AUTH,
        json={"kind": "status", "status": 503},
        timeout=5,
    )
    assert added.status_code == 201
    assert get(echo).status_code == 503
    log = requests.get(f"{echo.base_url}/_emulator/requests", headers=AUTH, timeout=5).json()
    assert [entry["path"] for entry in log] == ["/hello"]
