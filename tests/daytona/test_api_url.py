"""A Daytona ``api_url`` without its ``/api`` path is refused with what to set it to,
before any request, instead of every call answering ``NotFound``."""

from __future__ import annotations

import pytest
import requests

from managoat_sandbox import config
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.errors import Invalid

from . import emulated


@pytest.mark.parametrize("suffix", ["", "/", "/v1"])
def test_an_api_url_without_api_is_invalid_and_says_what_to_set(
    emulator: DaytonaEmulator, suffix: str
) -> None:
    configured = emulator.base_url + suffix
    config.configure("daytona", api_key=emulated.KEY, api_url=configured)
    adapter = emulated.emulated_adapter()
    emulator.clear_requests()
    with pytest.raises(Invalid) as caught:
        adapter.create("box")
    assert emulator.requests == []
    message = str(caught.value)
    assert "DAYTONA_API_URL" in message and "api_url" in message
    assert f"{configured.rstrip('/')}/api" in message
    config.configure("daytona", api_url=emulator.api_url)
    assert adapter.list_all_names() == frozenset()


def test_the_emulator_answers_404_to_a_create_without_api(emulator: DaytonaEmulator) -> None:
    """Why the check exists: the base-URL mistake reaches no route at all."""
    answer = requests.post(
        f"{emulator.base_url}/sandbox",
        json={"name": "box"},
        headers={"Authorization": f"Bearer {emulated.KEY}"},
        timeout=5,
    )
    assert answer.status_code == 404


def test_an_api_url_ending_in_api_with_a_trailing_slash_is_accepted(
    emulator: DaytonaEmulator,
) -> None:
    config.configure("daytona", api_key=emulated.KEY, api_url=emulator.api_url + "/")
    adapter = emulated.emulated_adapter()
    handle = adapter.create("box")
    try:
        assert adapter.list_all_names() == frozenset({"box"})
    finally:
        adapter.destroy(handle)
