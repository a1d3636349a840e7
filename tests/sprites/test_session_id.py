"""``Command.session_id`` through the Sprites emulator: an attach carries the id it
attached to, which the listing names, and so does a detachable spawn."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from managoat_sandbox.providers.sprites import Sprites
from managoat_sandbox.testing.mailbox import Mailbox, is_exit, is_stdout
from managoat_sandbox.types import Handle

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("no_leaked_threads")]

_names = itertools.count(1)
WAIT = 10.0


@pytest.fixture
def box(sprites: Sprites) -> Iterator[Handle]:
    handle = sprites.create(f"session-id-{next(_names)}")
    yield handle
    sprites.destroy(handle)


def test_attach_carries_the_listed_session_id(sprites: Sprites, box: Handle) -> None:
    spawned_box = Mailbox()
    spawned = sprites.spawn(
        box, "bash", ["-c", "echo ready; exec cat"], owner=spawned_box, stdin=True, detachable=True
    )
    try:
        # The id comes in the session_info frame, which a detachable spawn reads first.
        assert isinstance(spawned.session_id, str)
        spawned_box.expect(is_stdout(spawned.ref), WAIT)
        [session] = sprites.list_sessions(box)
        assert session.id == spawned.session_id
        attached_box = Mailbox()
        attached = sprites.attach(box, session.id, owner=attached_box)
        try:
            assert attached.session_id == session.id
            assert attached.session_id in [s.id for s in sprites.list_sessions(box)]
            again = sprites.attach(box, attached.session_id)
            sprites.stop_command(again)
            assert again.session_id == attached.session_id
            attached_box.expect(is_stdout(attached.ref), WAIT)
            sprites.close_stdin(spawned)
            spawned_box.expect(is_exit(spawned.ref, 0), WAIT)
            attached_box.expect(is_exit(attached.ref, 0), WAIT)
        finally:
            sprites.stop_command(attached)
    finally:
        sprites.stop_command(spawned)
