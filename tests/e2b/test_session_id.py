"""``Command.session_id`` through the E2B emulator: a detachable spawn carries its
journal tag, which the listing names and ``attach`` takes and carries back."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.providers.e2b import E2B
from managoat_sandbox.testing.mailbox import Mailbox, is_exit, is_stdout
from managoat_sandbox.types import Handle

from ..conftest import wait_until
from .emulated import adapter_threads, point_at

pytestmark = pytest.mark.timeout(60)

WAIT = 10.0


@pytest.fixture
def e2b(emulator: E2BEmulator) -> Iterator[E2B]:
    point_at(emulator)
    yield E2B()
    assert wait_until(lambda: not adapter_threads(), timeout=WAIT), adapter_threads()


@pytest.fixture
def handle(e2b: E2B) -> Iterator[Handle]:
    created = e2b.create(f"session-id-{time.monotonic_ns()}")
    yield created
    e2b.destroy(created)


def test_a_detachable_spawn_carries_the_id_that_lists_and_attaches(
    e2b: E2B, handle: Handle
) -> None:
    spawned_box = Mailbox()
    spawned = e2b.spawn(
        handle,
        "bash",
        ["-c", "echo ready; exec cat"],
        owner=spawned_box,
        stdin=True,
        detachable=True,
    )
    try:
        assert spawned.session_id is not None
        # The journal shim records the command before running it: once it spoke,
        # the session is listed.
        spawned_box.expect(is_stdout(spawned.ref), WAIT)
        assert spawned.session_id in [s.id for s in e2b.list_sessions(handle)]
        attached_box = Mailbox()
        attached = e2b.attach(handle, spawned.session_id, owner=attached_box)
        try:
            assert attached.session_id == spawned.session_id
            attached_box.expect(is_stdout(attached.ref), WAIT)
            e2b.close_stdin(spawned)
            spawned_box.expect(is_exit(spawned.ref, 0), WAIT)
            attached_box.expect(is_exit(attached.ref, 0), WAIT)
        finally:
            e2b.stop_command(attached)
    finally:
        e2b.stop_command(spawned)
