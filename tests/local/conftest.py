"""Local-adapter fixtures: every test gets its own sandbox root, destroyed afterwards.

``requires_isolation`` marks tests that attack the isolation: they are skipped,
never run, where the host cannot isolate (an attack that escapes really happens).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from managoat_sandbox import config
from managoat_sandbox._engine import isolation
from managoat_sandbox.providers.local import Local
from managoat_sandbox.types import Handle

requires_isolation = pytest.mark.skipif(
    not isolation.support().available,
    reason=f"local isolation is unavailable here: {isolation.support().reason}",
)


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "root"
    config.configure("local", root=str(path))
    yield path


@pytest.fixture
def local(root: Path) -> Iterator[Local]:
    adapter = Local()
    yield adapter
    config.configure("local", root=str(root))
    for name in adapter.list_all_names():
        adapter.destroy(adapter.build_handle(name))


def agent_pid(root: Path, handle: Handle) -> int:
    """The host pid of a sandbox's agent (recorded in its state directory)."""
    record = json.loads((root / handle.name / "state" / "agent.json").read_text())
    pid = record["pid"]
    assert isinstance(pid, int)
    return pid


def namespace_members(pid: int) -> list[int]:
    """Host pids of every process in the PID namespace of process ``pid``.

    Reads ``/proc/<n>/ns/pid`` of this user's processes; nothing is walked but ``/proc``.
    """
    target = os.readlink(f"/proc/{pid}/ns/pid")
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") == target:
                    members.append(int(entry))
            except OSError:
                continue
    return members


def process_state(pid: int) -> str:
    """The one-letter state of host process ``pid`` (``T`` when stopped), or ``gone``."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


@pytest.fixture(params=[pytest.param("isolated", marks=requires_isolation), "unisolated"])
def either_mode(request: pytest.FixtureRequest, local: Local) -> Handle:
    """A sandbox named ``box``, created isolated, then (second run) unisolated: for
    promises the library keeps whatever the isolation (its own file access, say)."""
    if request.param == "unisolated":
        config.configure("local", isolation="off")
    handle = local.create("box")
    assert local.get(handle).raw["isolation"] == (
        "namespaces" if request.param == "isolated" else "none"
    )
    return handle
