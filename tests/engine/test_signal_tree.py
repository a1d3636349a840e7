"""A signal to a process's group with ``tree`` also reaches the descendants that left the
group (``setsid``), found before anything is signalled; without it they live on."""

from __future__ import annotations

import shutil
import signal

import pytest

from managoat_sandbox._engine import events
from managoat_sandbox._engine.box import Box

from ..conftest import wait_until

pytestmark = pytest.mark.skipif(shutil.which("setsid") is None, reason="no setsid here")

#: Starts a child in a session (and group) of its own, which prints its pid once there
#: (so a signal sent after the line arrives finds it outside the group), and waits.
ESCAPING = "setsid sh -c 'echo $$; exec sleep 60' & wait"


def _escaping(box: Box, sid: str) -> tuple[int, int]:
    """Spawn :data:`ESCAPING` as session ``sid``: its pid, and the pid of the child that
    left its group."""
    pid, subscription = box.spawn(
        sid, ["sh", "-c", ESCAPING], env={"PATH": "/usr/bin:/bin"}, cwd="/"
    )
    assert subscription is not None and pid is not None
    printed = b""
    try:
        while b"\n" not in printed:
            batch = subscription.read(timeout=10)
            assert batch, "the session ended before printing its child's pid"
            printed += b"".join(e.data for e in batch if isinstance(e, events.Output))
    finally:
        subscription.close()
    return pid, int(printed.split(b"\n")[0])


def _alive(box: Box, pid: int) -> bool:
    """Whether ``pid`` still runs in the sandbox (a zombie counts as gone)."""
    probe = f"kill -0 {pid} 2>/dev/null && ! grep -qs '^State:[[:space:]]*Z' /proc/{pid}/status"
    _, _, subscription = box.run(["sh", "-c", probe], env={"PATH": "/usr/bin:/bin"}, cwd="/")
    try:
        while True:
            for event in subscription.read(timeout=10):
                if isinstance(event, events.Exited):
                    return event.code == 0
    finally:
        subscription.close()


def test_a_tree_signal_reaches_a_descendant_that_left_the_group(box: Box) -> None:
    main, escaped = _escaping(box, "tree")
    assert _alive(box, escaped)
    assert box.signal("tree", signal.SIGKILL, tree=True)
    assert wait_until(lambda: not _alive(box, main), 10)
    assert wait_until(lambda: not _alive(box, escaped), 10), "the escaped child lives on"


def test_a_group_signal_alone_leaves_a_descendant_that_left_the_group(box: Box) -> None:
    main, escaped = _escaping(box, "group")
    assert box.signal("group", signal.SIGKILL)
    assert wait_until(lambda: not _alive(box, main), 10)
    assert _alive(box, escaped), "a group signal reached a process outside the group"
