"""Pointing the adapter at a running :class:`E2BEmulator`."""

from __future__ import annotations

import threading

from managoat_sandbox import config
from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.providers.e2b.adapter import READER_IDLE_NAME

from ..canary import CANARY

API_KEY = CANARY


def point_at(emulator: E2BEmulator, **extra: object) -> None:
    """Config scope ``e2b`` aimed at ``emulator`` (API and envd on its one port)."""
    config.configure(
        "e2b",
        **{
            "api_key": API_KEY,
            "base_url": emulator.base_url,
            "sandbox_url": emulator.base_url,
            **extra,
        },
    )


def adapter_threads() -> list[str]:
    """Names of the E2B adapter's threads alive now: readers (reading, or waiting for
    their next command) and TTL heartbeats."""
    prefixes = ("e2b-e2b-", READER_IDLE_NAME, "e2b-heartbeat-")
    return [t.name for t in threading.enumerate() if t.name.startswith(prefixes)]
