"""Pointing the vendor's E2B SDK at an emulator, as docs/protocols/e2b.md#pointing-the-sdk-here
says: the API and envd both at the emulator's base URL, debug off, HTTP/1.1."""

from __future__ import annotations

import pytest

from managoat_sandbox.emulators.e2b import E2BEmulator


def point_sdk(monkeypatch: pytest.MonkeyPatch, emulator: E2BEmulator, key: str) -> None:
    """Set the environment the E2B SDK reads so that it talks to ``emulator`` with ``key``."""
    monkeypatch.setenv("E2B_API_KEY", key)
    monkeypatch.setenv("E2B_API_URL", emulator.base_url)
    monkeypatch.setenv("E2B_SANDBOX_URL", emulator.base_url)
    monkeypatch.setenv("E2B_DEBUG", "false")
    monkeypatch.setenv("E2B_HTTP_VERSION", "1.1")
