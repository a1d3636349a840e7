"""What the soak (bench/soak.py) found in the E2B adapter, pinned through the emulator.

* A session is attachable as soon as ``spawn`` has returned it, even while its
  shim has not yet written the journal's ``.cmd`` (envd reports a process
  started before it has run a line).
* A replay whose stream is cut (no ``end`` event) ends in exactly one
  ``Error(Unavailable("closed_before_exit"))``, never an ``Exit``: the exit
  file alone does not prove the replay delivered the whole journal.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import requests

from managoat_sandbox import reasons
from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.errors import NotFound, Unavailable
from managoat_sandbox.frames import Error, Exit, Frame, Stdout
from managoat_sandbox.providers.e2b import E2B, shim
from managoat_sandbox.providers.e2b.end import E2BCommandEnd
from managoat_sandbox.testing.mailbox import Mailbox, is_terminal
from managoat_sandbox.types import Command, Handle

from .emulated import API_KEY

pytestmark = pytest.mark.timeout(60)

WAIT = 10.0
SCRIPT = ("bash", ["-c", "echo a; echo b; exit 3"])
#: Sourced by every non-interactive bash in the gated sandbox (``BASH_ENV``):
#: a journaling shim (its script starts ``mkdir -p …`` then ``printf %s …``)
#: waits, before its first line, until ``~/release`` exists (at most 10 s).
GATE = """case $BASH_EXECUTION_STRING in
  "mkdir -p "*"printf %s "*)
    for _ in $(seq 1000); do [ -e "$HOME/release" ] && break; sleep 0.01; done ;;
esac
"""


@pytest.fixture
def gated(e2b: E2B, emulator: E2BEmulator) -> Iterator[tuple[Handle, str]]:
    """A sandbox (and its id) whose journaling shims wait for ``~/release``.

    Created over the control API with ``envVars`` (which the adapter never
    sends), then adopted by name.
    """
    name = f"gated-{time.monotonic_ns()}"
    answer = requests.post(
        f"{emulator.base_url}/v2/sandboxes",
        timeout=WAIT,
        headers={"X-API-Key": API_KEY},
        json={
            "templateID": "base",
            "timeout": 600,
            "autoPause": True,
            "metadata": {"fountain_name": name, "fountain": "1"},
            "envVars": {"BASH_ENV": "$HOME/gate.sh"},
        },
    )
    answer.raise_for_status()
    sandbox_id = str(answer.json()["sandboxID"])
    emulator.write_file(sandbox_id, "~/gate.sh", GATE.encode())
    created = e2b.create(name)
    try:
        yield created, sandbox_id
    finally:
        emulator.write_file(sandbox_id, "~/release", b"")
        e2b.destroy(created)


def frames_of(command: Command, box: Mailbox) -> list[Frame]:
    """Wait for the command's terminal frame, check it is the only one; all its frames."""
    terminal = box.expect(is_terminal(command.ref), WAIT)
    box.refute(is_terminal(command.ref), 0.1)
    frames = box.history(command.ref)
    assert [f for f in frames if f.terminal] == [terminal] and frames[-1] is terminal
    return frames


def spawn(e2b: E2B, handle: Handle) -> tuple[Command, Mailbox]:
    """A detachable spawn of :data:`SCRIPT` delivering to a new mailbox."""
    box = Mailbox()
    return e2b.spawn(handle, *SCRIPT, owner=box, detachable=True), box


def attach(e2b: E2B, handle: Handle, session_id: str | None) -> tuple[Command, Mailbox]:
    assert session_id is not None
    box = Mailbox()
    return e2b.attach(handle, session_id, owner=box), box


def stdout_of(frames: list[Frame]) -> bytes:
    return b"".join(f.data for f in frames if isinstance(f, Stdout))


# -- attach right after spawn -----------------------------------------------------


def test_a_session_is_attachable_before_its_shim_has_written_the_journal(
    e2b: E2B, emulator: E2BEmulator, gated: tuple[Handle, str]
) -> None:
    handle, sandbox_id = gated
    spawned, spawned_box = spawn(e2b, handle)
    assert not emulator.exists(sandbox_id, f"~/.fountain/{spawned.session_id}.cmd")
    attached, box = attach(e2b, handle, spawned.session_id)
    emulator.write_file(sandbox_id, "~/release", b"")
    frames = frames_of(attached, box)
    assert stdout_of(frames) == b"a\nb\n"
    assert frames[-1] == Exit(attached.ref, 3)
    assert frames_of(spawned, spawned_box)[-1] == Exit(spawned.ref, 3)


def test_a_live_process_that_is_not_a_journaling_shim_is_no_session(
    e2b: E2B, handle: Handle
) -> None:
    running = e2b.spawn(handle, "bash", ["-c", "exec sleep 30"], owner=Mailbox())
    assert isinstance(running.private, E2BCommandEnd)
    with pytest.raises(NotFound):
        e2b.attach(handle, running.private.tag)
    e2b.command_end(running).stop()


def test_only_the_shim_of_the_tag_is_recognised_as_its_shim() -> None:
    tag, other = shim.new_tag(), shim.new_tag()
    words = ["-c", f"echo > '$HOME'/.fountain/{tag}.cmd"]
    assert shim.is_shim(tag, {"cmd": "bash", "args": ["-c", shim.script(tag, "ls", [])]})
    assert not shim.is_shim(tag, {"cmd": "bash", "args": ["-c", shim.script(other, "ls", [])]})
    assert not shim.is_shim(tag, {"cmd": "bash", "args": ["-c", shim.replayer(tag)]})
    assert not shim.is_shim(tag, {"cmd": "bash", "args": words})
    assert not shim.is_shim(tag, {"cmd": "sh", "args": ["-c", shim.script(tag, "ls", [])]})
    assert not shim.is_shim(tag, None)


# -- a cut replay -----------------------------------------------------------------------


@pytest.mark.parametrize("after", [0, 1])
def test_a_cut_replay_of_a_finished_session_is_one_error_never_an_exit(
    e2b: E2B, handle: Handle, emulator: E2BEmulator, after: int
) -> None:
    spawned, spawned_box = spawn(e2b, handle)
    assert frames_of(spawned, spawned_box)[-1] == Exit(spawned.ref, 3)
    emulator.stream_fault("no_end", rpc="Start", after=after)
    attached, box = attach(e2b, handle, spawned.session_id)
    frames = frames_of(attached, box)
    assert frames[-1] == Error(attached.ref, Unavailable(reasons.CLOSED_BEFORE_EXIT))
    assert stdout_of(frames) == (b"" if after == 0 else b"a\nb\n")


def test_an_uncut_replay_of_a_finished_session_still_ends_with_its_exit(
    e2b: E2B, handle: Handle
) -> None:
    spawned, spawned_box = spawn(e2b, handle)
    assert frames_of(spawned, spawned_box)[-1] == Exit(spawned.ref, 3)
    attached, box = attach(e2b, handle, spawned.session_id)
    frames = frames_of(attached, box)
    assert stdout_of(frames) == b"a\nb\n" and frames[-1] == Exit(attached.ref, 3)
