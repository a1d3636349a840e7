"""Pointing the adapter at a running :class:`E2BEmulator`."""

from __future__ import annotations

from managoat_sandbox import config
from managoat_sandbox.emulators.e2b import E2BEmulator

API_KEY = "e2b_emulated_canary_KEY_77aa"


def point_at(emulator: E2BEmulator, **extra: object) -> None:
    """Config scope ``e2b`` aimed at ``emulator`` (API and envd on its one port)."""
    config.configure("e2b", **{"api_key": API_KEY, "base_url": emulator.base_url,
                               "sandbox_url": emulator.base_url, **extra})
