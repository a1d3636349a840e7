"""A handshake between a test and a command it runs in an emulated sandbox, never a sleep.

A command that must not take its next step before the test has seen the last
one waits on a *gate*: a FIFO it makes in its sandbox's home and holds open for
reading and writing (so neither side's open ever blocks). Between two steps it
reads one line from the FIFO, for at most :data:`WAIT` seconds. The test writes
that line (:meth:`Gate.release`) once it has seen what the earlier step
produced: a frame, a log line, a stream event. No wait is unbounded: the
command's read has its timeout, the release its deadline.

The FIFO is in the sandbox's own files, which the emulator keeps in its
temporary workdir; the test reaches it through the sandbox's box on this host.
"""

from __future__ import annotations

import errno
import os
import shlex
from pathlib import Path

import attrs

from managoat_sandbox._engine.box import Box
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.emulators.e2b import E2BEmulator

from .conftest import wait_until

__all__ = ["WAIT", "Gate", "daytona_gate", "e2b_gate", "gate_in"]

#: Seconds a gated command waits for one release before it goes on anyway (and the
#: test, having missed its handshake, fails on what it then sees).
WAIT = 10
#: Seconds :meth:`Gate.release` waits for the command to hold its gate open.
RELEASE_DEADLINE = 10.0


@attrs.frozen
class Gate:
    """One FIFO: ``inside`` is its path for the sandbox's commands, ``host`` on this host."""

    inside: str
    host: Path

    def script(self, *steps: str) -> str:
        """A bash script that makes the gate, then runs ``steps`` (shell text) in order,
        waiting for one :meth:`release` between each two."""
        path = shlex.quote(self.inside)
        wait = f"; read -t {WAIT} _ <&3; "
        return f"mkfifo {path} && {{ {wait.join(steps)}; }} 3<>{path}"

    def release(self) -> None:
        """Let the command take its next step: one line into the gate, once the command
        holds it open (AssertionError if it does not within the deadline)."""
        assert wait_until(self._write, RELEASE_DEADLINE), f"no command holds {self.host} open"

    def _write(self) -> bool:
        try:
            fd = os.open(self.host, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except FileNotFoundError:
            return False  # not made yet
        except OSError as error:
            if error.errno == errno.ENXIO:
                return False  # made, not yet held open
            raise
        try:
            os.write(fd, b"\n")
        finally:
            os.close(fd)
        return True


def gate_in(box: Box, name: str = "gate") -> Gate:
    """The gate ``name`` in the home of ``box``'s user."""
    path = f"{box.settings.home.rstrip('/')}/{name}"
    return Gate(box.agent_path(path), box.fs / path.lstrip("/"))


def e2b_gate(emulator: E2BEmulator, sandbox_id: str, name: str = "gate") -> Gate:
    """The gate ``name`` in the home of an E2B sandbox's user."""
    return gate_in(emulator.world.table(sandbox_id).sandbox.box, name)


def daytona_gate(emulator: DaytonaEmulator, id_or_name: str, name: str = "gate") -> Gate:
    """The gate ``name`` in the home of a (started) Daytona sandbox's user; its box is
    made first if no request has needed it yet."""
    sandbox = emulator.store.find(id_or_name)
    emulator.daemon_for(sandbox)
    return gate_in(Box.open(emulator.sandbox_dir(sandbox.id)), name)
