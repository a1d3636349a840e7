"""Settings that leave envd unaddressable fail early and say which setting to set.

Without ``sandbox_url`` envd is ``https://49983-<id>.<domain>``; an API base on an IP
address or ``localhost`` (the emulator, a self-hosted API) implies no such domain, so
``create`` refuses before any request instead of the first ``exec`` failing.
"""

from __future__ import annotations

import pytest

from managoat_sandbox import config
from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.errors import Invalid
from managoat_sandbox.providers.e2b import E2B

from .emulated import API_KEY, point_at


@pytest.fixture(autouse=True)
def no_sandbox_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("E2B_SANDBOX_URL", raising=False)


def _assert_says_what_to_set(error: Invalid) -> None:
    message = str(error)
    assert "sandbox_url" in message and "E2B_SANDBOX_URL" in message
    assert API_KEY not in message and API_KEY not in repr(error)


def test_create_without_sandbox_url_on_a_local_api_is_invalid_before_any_request(
    e2b: E2B, emulator: E2BEmulator
) -> None:
    config.configure("e2b", sandbox_url=None)
    emulator.clear_requests()
    with pytest.raises(Invalid) as caught:
        e2b.create("box")
    _assert_says_what_to_set(caught.value)
    assert emulator.requests == []
    assert e2b.list_all_names() == frozenset()


def test_a_localhost_api_is_refused_the_same_way(e2b: E2B, emulator: E2BEmulator) -> None:
    config.configure("e2b", base_url=f"http://localhost:{emulator.port}", sandbox_url=None)
    with pytest.raises(Invalid) as caught:
        e2b.create("box")
    _assert_says_what_to_set(caught.value)


def test_exec_on_an_adopted_sandbox_without_sandbox_url_is_invalid(
    e2b: E2B, emulator: E2BEmulator
) -> None:
    handle = e2b.create("box")
    try:
        config.configure("e2b", sandbox_url=None)
        with pytest.raises(Invalid) as caught:
            E2B().exec(handle, "true")
        _assert_says_what_to_set(caught.value)
    finally:
        point_at(emulator)
        e2b.destroy(handle)


def test_with_sandbox_url_set_create_and_exec_work(e2b: E2B) -> None:
    handle = e2b.create("box")
    try:
        assert e2b.exec(handle, "echo", ["hi"]) == (b"hi\n", 0)
    finally:
        e2b.destroy(handle)
