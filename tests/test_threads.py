"""No thread outlives its command: many spawn/stop cycles return to the baseline."""

from __future__ import annotations

import threading

import managoat_sandbox as sandbox
from managoat_sandbox import config
from managoat_sandbox.testing import Fake

from .conftest import wait_until


def test_many_spawn_stop_cycles_leave_no_thread_behind() -> None:
    fake = Fake()
    config.configure(adapters={"fake": fake})
    handle = sandbox.create("fake", "threads")
    baseline = threading.active_count()
    for n in range(200):
        command = sandbox.spawn(handle, "emit", ["out:x", "exit:0"])
        if n % 2:
            sandbox.stop_command(command)
        else:
            list(sandbox.iter_frames(command, timeout=2))
        [session] = [s for s in sandbox.list_sessions(handle)][-1:]
        attached = sandbox.attach(handle, session.id)
        sandbox.stop_command(attached)
        sandbox.stop_command(command)
    stay = [sandbox.spawn(handle, "emit", ["stay"], stdin=True) for _ in range(20)]
    for command in stay:
        sandbox.stop_command(command)
    fake.reset()
    assert wait_until(lambda: threading.active_count() <= baseline, timeout=10), (
        f"{threading.active_count() - baseline} threads leaked: "
        f"{[t.name for t in threading.enumerate()]}"
    )
