"""Shared fixture: one E2B emulator per test module (a module may define its own)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from managoat_sandbox.emulators.e2b import E2BEmulator

from .emulated import API_KEY


@pytest.fixture(scope="module")
def emulator() -> Iterator[E2BEmulator]:
    with E2BEmulator(credential=API_KEY) as running:
        yield running  # type: ignore[misc]
