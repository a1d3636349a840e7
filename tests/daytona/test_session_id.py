"""``Command.session_id`` through the Daytona emulator: a spawn carries its toolbox
session id, which the listing names and ``attach`` takes and carries back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from managoat_sandbox import config
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.testing.mailbox import Mailbox, is_exit, is_stdout
from managoat_sandbox.types import Handle

from ..conftest import wait_until
from .emulated import KEY, emulated_adapter, reader_threads

pytestmark = pytest.mark.timeout(60)

WAIT = 10.0


@pytest.fixture
def daytona(emulator: DaytonaEmulator) -> Iterator[Daytona]:
    config.configure("daytona", api_key=KEY, api_url=emulator.api_url)
    adapter = emulated_adapter()
    yield adapter
    assert wait_until(lambda: not reader_threads(), 5), f"leaked: {reader_threads()}"
    for name in adapter.list_all_names():
        adapter.destroy(adapter.build_handle(name))


@pytest.fixture
def handle(daytona: Daytona) -> Handle:
    return daytona.create("session-id")


def test_a_spawn_carries_the_id_that_lists_and_attaches(daytona: Daytona, handle: Handle) -> None:
    spawned_box = Mailbox()
    spawned = daytona.spawn(
        handle, "bash", ["-c", "echo ready; exec cat"], owner=spawned_box, stdin=True
    )
    try:
        assert spawned.session_id is not None
        assert spawned.session_id in [s.id for s in daytona.list_sessions(handle)]
        attached_box = Mailbox()
        attached = daytona.attach(handle, spawned.session_id, owner=attached_box)
        try:
            assert attached.session_id == spawned.session_id
            attached_box.expect(is_stdout(attached.ref), WAIT)
            spawned_box.expect(is_stdout(spawned.ref), WAIT)
            daytona.close_stdin(spawned)
            spawned_box.expect(is_exit(spawned.ref, 0), WAIT)
            attached_box.expect(is_exit(attached.ref, 0), WAIT)
        finally:
            daytona.stop_command(attached)
    finally:
        daytona.stop_command(spawned)
