"""State files are read so that nothing planted in them can mislead or hang the reader."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from managoat_sandbox._engine import records
from managoat_sandbox._engine.errors import EngineError


def test_records_refuse_links_fifos_and_oversized_files(tmp_path: Path) -> None:
    target = tmp_path / "target.json"
    target.write_text(json.dumps({"code": 0}))
    (tmp_path / "link.json").symlink_to(target)
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "big.json").write_text(json.dumps({"x": "y" * 100}))
    done = threading.Event()
    accepted: list[str] = []

    def read_all() -> None:
        for name, limit in (("link.json", 1 << 20), ("fifo.json", 1 << 20), ("big.json", 50)):
            try:
                records.read_record(tmp_path / name, limit=limit)
                accepted.append(name)
            except EngineError:
                pass
        done.set()

    threading.Thread(target=read_all, daemon=True).start()
    assert done.wait(10)
    assert accepted == []
    assert records.read_record(target) == {"code": 0}
    assert records.read_record(tmp_path / "absent.json") is None
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(EngineError):
        records.read_record(tmp_path / "list.json")


def test_an_unlocked_or_missing_lock_means_no_agent(tmp_path: Path) -> None:
    assert records.agent_alive(tmp_path) is False
    (tmp_path / records.LOCK).write_text("")
    assert records.agent_alive(tmp_path) is False
