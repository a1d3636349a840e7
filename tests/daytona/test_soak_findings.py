"""What the soak found, pinned through the Daytona emulator: a command whose exit the
shim recorded while its log could no longer be read whole ends with
``closed_before_exit`` — never an ``Exit`` after lost output.

Each test holds the command at a gate file after its first half of output, waits until
the follower has delivered that half, blinds the follower (faults, and the follow it
has open is cut), opens the gate and waits in the sandbox's files for the shim's exit
code, so the follower meets the recorded code while the second half is still unread:
the order is forced, no race is won by timing.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs
import pytest

from managoat_sandbox import reasons
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.emulators.daytona.daemon import Daemon
from managoat_sandbox.errors import Unavailable
from managoat_sandbox.frames import Error, Exit, Frame, Stdout
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.providers.daytona.end import DaytonaCommandEnd
from managoat_sandbox.testing.mailbox import Mailbox, is_terminal
from managoat_sandbox.types import Command, Handle

from ..conftest import wait_until
from .emulated import EMULATOR_FOLLOW, serving

pytestmark = pytest.mark.timeout(60)

#: The failure budget outlasts every wait below, so a blinded follower keeps retrying.
PATIENT = attrs.evolve(EMULATOR_FOLLOW, unreachable_after=45.0)
FIRST = b"".join(b"line-%d\n" % i for i in range(1, 6))
SECOND = b"".join(b"line-%d\n" % i for i in range(6, 11))
MANY = 1_000_000
#: The gate, relative to the sandbox user's home (the command's working directory).
GATE = "soak-gate"


@pytest.fixture
def daytona(emulator: DaytonaEmulator) -> Iterator[Daytona]:
    with serving(emulator, follow=PATIENT) as adapter:
        yield adapter


@pytest.fixture
def handle(daytona: Daytona, request: pytest.FixtureRequest) -> Handle:
    return daytona.create(f"soak-{request.node.name[:40]}")


@pytest.fixture
def daemon(emulator: DaytonaEmulator, handle: Handle) -> Daemon:
    """The sandbox's toolbox daemon (its files are reached through it)."""
    return emulator.daemon_for(emulator.store.find(handle.name))


def stdout_of(frames: list[Frame]) -> bytes:
    return b"".join(f.data for f in frames if isinstance(f, Stdout))


def spawn_gated(daytona: Daytona, handle: Handle) -> tuple[Command, Mailbox]:
    """Prints FIRST, waits for :data:`GATE` to exist, prints SECOND, exits 42; returns once
    FIRST has been delivered."""
    script = (
        f"for i in 1 2 3 4 5; do echo line-$i; done; "
        f"while [ ! -e '{GATE}' ]; do sleep 0.01; done; "
        f"for i in 6 7 8 9 10; do echo line-$i; done; exit 42"
    )
    box = Mailbox()
    command = daytona.spawn(handle, "bash", ["-c", script], owner=box)
    assert wait_until(lambda: stdout_of(box.history(command.ref)) == FIRST, 10)
    return command, box


def finish_behind_the_follower(daemon: Daemon, command: Command) -> None:
    """Let the command run to its exit and wait until the shim has recorded it."""
    daemon.files.write(GATE, b"")
    code = f"/tmp/managoat/{command.session_id}/code"

    def recorded() -> bool:
        try:
            return daemon.files.read(code).strip() == b"42"
        except FileNotFoundError:
            return False

    assert wait_until(recorded, 15)


def command_path(command: Command, suffix: str) -> str:
    state: DaytonaCommandEnd = command.private
    return f"/session/{state.session_id}/command/{state.command_id}{suffix}"


def terminal_of(daytona: Daytona, command: Command, box: Mailbox) -> list[Frame]:
    """The command's frames, once its one terminal frame has come and stayed the last."""
    box.expect(is_terminal(command.ref), 15)
    box.refute(is_terminal(command.ref), 0.1)
    daytona.stop_command(command)
    frames = box.history(command.ref)
    assert [f for f in frames if f.terminal] == [frames[-1]], "exactly one terminal frame, last"
    return frames


def record_says_running(emulator: DaytonaEmulator, command: Command) -> None:
    """The daemon never records the exit: the command record answers without ``exitCode``."""
    emulator.faults.add(
        "status",
        status=200,
        path=command_path(command, "$"),
        times=MANY,
        body={"id": command.private.command_id, "command": "bash"},
    )


def follows_stay_short(emulator: DaytonaEmulator, size: int) -> None:
    """Every log follow from now on ends after ``size`` journal bytes; the open one now."""
    emulator.close_log_stream_early(after_bytes=size, times=MANY)
    emulator.cut_log_follows()


def test_a_command_lost_by_the_daemon_after_its_exit_is_closed_before_exit_not_exit(
    daytona: Daytona, emulator: DaytonaEmulator, handle: Handle, daemon: Daemon
) -> None:
    """The soak's case: record and log answer 404 once the command has exited, the
    shim's code is 42 and half the output was never read."""
    command, box = spawn_gated(daytona, handle)
    emulator.unavailable(path=command_path(command, "(/logs)?$"), times=MANY)
    emulator.cut_log_follows()
    finish_behind_the_follower(daemon, command)
    command.private.toolbox.delete_session(command.session_id)
    emulator.faults.clear()
    frames = terminal_of(daytona, command, box)
    assert frames[-1] == Error(command.ref, Unavailable(reasons.CLOSED_BEFORE_EXIT))
    assert not any(isinstance(f, Exit) for f in frames)
    assert stdout_of(frames) == FIRST


def test_a_shim_exit_whose_log_reads_stay_stale_is_closed_before_exit_not_exit(
    daytona: Daytona, emulator: DaytonaEmulator, handle: Handle, daemon: Daemon
) -> None:
    """The daemon never records the exit (its record answers "running"), the shim's
    code is 42, and every log read (follow or snapshot) is a stale prefix without the
    end frames."""
    command, box = spawn_gated(daytona, handle)
    record_says_running(emulator, command)
    _, record = daemon.command(command.private.session_id, command.private.command_id)
    emulator.serve_stale_log_prefix(len(record.journal()), times=MANY)
    follows_stay_short(emulator, len(record.journal()))
    finish_behind_the_follower(daemon, command)
    frames = terminal_of(daytona, command, box)
    assert frames[-1] == Error(command.ref, Unavailable(reasons.CLOSED_BEFORE_EXIT))
    assert not any(isinstance(f, Exit) for f in frames)
    assert stdout_of(frames) == FIRST


def test_a_shim_exit_after_the_whole_log_is_the_real_exit(
    daytona: Daytona, emulator: DaytonaEmulator, handle: Handle, daemon: Daemon
) -> None:
    """The same unrecorded exit with a log that reads whole: Exit(42) after all of it."""
    command, box = spawn_gated(daytona, handle)
    record_says_running(emulator, command)
    finish_behind_the_follower(daemon, command)
    frames = terminal_of(daytona, command, box)
    assert stdout_of(frames) == FIRST + SECOND
    assert frames[-1] == Exit(command.ref, 42)
