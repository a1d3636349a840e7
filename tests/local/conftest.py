"""Local-adapter fixtures: every test gets its own sandbox root."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from managoat_sandbox import config
from managoat_sandbox.providers.local import Local


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "root"
    config.configure("local", root=str(path))
    yield path


@pytest.fixture
def local(root: Path) -> Iterator[Local]:
    adapter = Local()
    yield adapter
    for name in adapter.list_all_names():
        adapter.destroy(adapter.build_handle(name))
