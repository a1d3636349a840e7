"""What the engine's tests share: a box with a running agent, stopped afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from managoat_sandbox._engine import isolation
from managoat_sandbox._engine.box import Box
from managoat_sandbox._engine.settings import BoxSettings


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Box]:
    """A box under the test's own directory, isolated where this machine allows it."""
    directory = tmp_path / "box"
    directory.mkdir()
    made = Box.create(directory, BoxSettings(isolated=isolation.support().available))
    yield made
    made.stop()
