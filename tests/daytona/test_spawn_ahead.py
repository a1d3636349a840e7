"""The session made ahead for a sandbox's next spawn (``providers/daytona/ahead.py``).

Through the emulator: a spawn that starts in it keeps its own output, stderr
apart, and its real exit code; the session is never listed nor attachable; a
sandbox destroyed takes it along; and a process that ends deletes it (a child
interpreter spawns, sees the session made ahead, and exits: afterwards only
its spawned session is left). Without a network: a creation that completes
after its holder was closed deletes what it made, closing deletes the ready
session only when asked, and a spawn that finds the session still being made
waits for it (one spawn only: the others make their own).

Waits are on conditions with deadlines (``wait_until``, ``Mailbox.expect``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.errors import NotFound
from managoat_sandbox.frames import Exit, Stderr, Stdout
from managoat_sandbox.providers.daytona import Daytona, ahead
from managoat_sandbox.testing.mailbox import Mailbox, is_terminal
from managoat_sandbox.types import Command, Handle

from ..conftest import wait_until
from .emulated import KEY, serving

pytestmark = pytest.mark.timeout(120)

WAIT = 20.0


@pytest.fixture
def daytona(emulator: DaytonaEmulator) -> Iterator[Daytona]:
    with serving(emulator) as adapter:
        yield adapter


@pytest.fixture
def handle(daytona: Daytona, request: pytest.FixtureRequest) -> Handle:
    return daytona.create(f"ahead-{request.node.name[:40]}")


def idle_sessions(daytona: Daytona, handle: Handle) -> list[str]:
    """The spawn sessions of the sandbox that have run no command, as the daemon lists them."""
    return [
        entry["sessionId"]
        for entry in daytona._toolbox(handle).sessions()
        if entry["sessionId"].startswith("mgs-") and entry["commands"] == []
    ]


def made_ahead(daytona: Daytona, handle: Handle) -> str:
    """The session made ahead for the sandbox's next spawn, once the adapter holds it
    (its creation answered) and the daemon lists it, idle."""
    spares = daytona._spares[handle.name]
    assert wait_until(lambda: spares._ready is not None, WAIT)
    assert idle_sessions(daytona, handle) == [spares._ready]
    return spares._ready


def ran(daytona: Daytona, command: Command, box: Mailbox) -> tuple[bytes, bytes, Any]:
    """The command's stdout, stderr and terminal frame."""
    end = box.expect(is_terminal(command.ref), WAIT)
    daytona.stop_command(command)
    frames = box.history(command.ref)
    stdout = b"".join(f.data for f in frames if isinstance(f, Stdout))
    stderr = b"".join(f.data for f in frames if isinstance(f, Stderr))
    return stdout, stderr, end


def test_a_spawn_in_the_session_made_ahead_keeps_its_output_apart_and_its_real_exit(
    daytona: Daytona, handle: Handle
) -> None:
    box = Mailbox()
    first = daytona.spawn(handle, "sh", ["-c", "echo one; echo oops >&2; exit 3"], owner=box)
    assert ran(daytona, first, box) == (b"one\n", b"oops\n", Exit(first.ref, 3))
    spare = made_ahead(daytona, handle)
    box = Mailbox()
    second = daytona.spawn(handle, "sh", ["-c", "printf 'two\\0'; printf e >&2; exit 5"], owner=box)
    assert second.session_id == spare
    assert ran(daytona, second, box) == (b"two\0", b"e", Exit(second.ref, 5))
    next_one = made_ahead(daytona, handle)
    listed = [session.id for session in daytona.list_sessions(handle)]
    assert sorted(listed) == sorted([first.session_id, spare]), (
        f"the spawns' sessions, and not the one made ahead for the next ({next_one})"
    )
    with pytest.raises(NotFound):
        daytona.attach(handle, next_one)


def test_a_destroyed_sandbox_takes_the_session_made_ahead_along(
    daytona: Daytona, handle: Handle
) -> None:
    box = Mailbox()
    first = daytona.spawn(handle, "true", owner=box)
    assert ran(daytona, first, box) == (b"", b"", Exit(first.ref, 0))
    spare = made_ahead(daytona, handle)
    daytona.destroy(handle)
    assert handle.name not in daytona._spares, "nothing is kept for a destroyed sandbox"
    again = daytona.create(handle.name)
    assert idle_sessions(daytona, again) == []
    box = Mailbox()
    command = daytona.spawn(again, "echo", ["fresh"], owner=box)
    assert command.session_id != spare
    assert ran(daytona, command, box) == (b"fresh\n", b"", Exit(command.ref, 0))


#: A process that spawns, waits until the next spawn's session has been made, prints its
#: id and exits (argv: api_url, sandbox name; the key comes from the environment).
CHILD = """
import sys, threading
from managoat_sandbox import config
from managoat_sandbox.providers.daytona import Daytona
config.configure("daytona", api_url=sys.argv[1])
adapter = Daytona()
handle = adapter.build_handle(sys.argv[2])
command = adapter.spawn(handle, "echo", ["from the child"])
while not command.frames.get(timeout=20).terminal:
    pass
adapter.stop_command(command)
toolbox = adapter._toolbox(handle)
for _ in range(2000):
    idle = [s["sessionId"] for s in toolbox.sessions() if s["commands"] == []]
    if idle:
        print(command.session_id, idle[0])
        break
    threading.Event().wait(0.01)
"""


def test_the_session_made_ahead_is_deleted_when_the_process_ends(
    emulator: DaytonaEmulator, daytona: Daytona, handle: Handle
) -> None:
    child = subprocess.run(
        [sys.executable, "-c", CHILD, emulator.api_url, handle.name],
        env={**os.environ, "DAYTONA_API_KEY": KEY},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    spawned, spare = child.stdout.split()
    sessions = {entry["sessionId"] for entry in daytona._toolbox(handle).sessions()}
    assert sessions == {spawned}, f"the session made ahead ({spare}) outlived its process"


# -- without a network ------------------------------------------------------------------


class Toolbox:
    """What a holder calls: session creation (held until ``go`` is set) and deletion."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.made: list[str] = []
        self.deleted: list[str] = []
        self.api = self
        self.http = self

    def create_session(self, session_id: str) -> None:
        assert self.go.wait(WAIT)
        self.made.append(session_id)

    def delete_session(self, session_id: str) -> None:
        self.deleted.append(session_id)

    def release(self) -> None:
        """No connections to close."""


def holder() -> tuple[ahead.SpareSessions, Toolbox]:
    toolbox = Toolbox()
    return ahead.SpareSessions(toolbox, prefix="mgs-"), toolbox  # type: ignore[arg-type]


def test_a_session_made_after_its_holder_closed_is_deleted() -> None:
    spares, toolbox = holder()
    spares.refill()
    spares.close(delete=False)
    toolbox.go.set()
    spares.join(WAIT)
    assert toolbox.made and toolbox.deleted == toolbox.made
    assert spares.take() is None


@pytest.mark.parametrize("delete", [True, False])
def test_closing_deletes_the_ready_session_only_when_asked(delete: bool) -> None:
    spares, toolbox = holder()
    toolbox.go.set()
    spares.refill()
    spares.join(WAIT)
    (made,) = toolbox.made
    spares.close(delete=delete)
    assert toolbox.deleted == ([made] if delete else [])
    assert spares.take() is None
    spares.refill()
    spares.join(WAIT)
    assert toolbox.made == [made], "a closed holder makes no more"


def test_a_session_made_ahead_is_taken_once_and_kept_for_exit_only_until_then() -> None:
    spares, toolbox = holder()
    assert spares not in ahead._open, "nothing to delete at exit yet"
    toolbox.go.set()
    spares.refill()
    spares.join(WAIT)
    (made,) = toolbox.made
    assert spares in ahead._open, "exit deletes the session held"
    assert (spares.take(), spares.take()) == (made, None)
    assert spares not in ahead._open, "the session taken is the spawn's"
    spares.close(delete=True)
    assert toolbox.deleted == []


def test_a_taker_waits_for_the_session_in_flight_and_only_one_does() -> None:
    spares, toolbox = holder()
    spares.refill()
    taken: list[str | None] = []
    waiter = threading.Thread(target=lambda: taken.append(spares.take()))
    waiter.start()
    assert wait_until(lambda: spares._awaited, WAIT)
    assert spares.take() is None, "a second taker makes its own session"
    toolbox.go.set()
    waiter.join(WAIT)
    assert taken == toolbox.made and len(taken) == 1
    spares.close(delete=True)
    assert toolbox.deleted == []
