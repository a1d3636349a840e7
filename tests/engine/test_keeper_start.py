"""The keeper as a launch starts it (:mod:`managoat_sandbox._engine.keeper_start`): idle
and small until its channel has something, gone with its agent.

Run as the launch runs it — a separate interpreter, ``-I -S``, the engine as a
top-level package — with a child of this test standing in for the agent.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from managoat_sandbox._engine import launch

#: Seconds allowed for each step (a bound for a loaded machine, not an expected time).
STEP = 20.0


class Keeper:
    """A keeper started on ``state`` for a stand-in agent, with ``-X importtime`` so that
    what it loaded can be read from its standard error."""

    def __init__(self, state: Path) -> None:
        self.agent = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
        )
        self.channel, keeper_end = socket.socketpair()
        state_fd = os.open(state, os.O_RDONLY | os.O_DIRECTORY)
        python, _ = launch.agent_python()
        argv = launch._host_command(python, "keeper_start")
        argv[1:1] = ["-X", "importtime"]
        argv += ["--state", str(state_fd), "--egress", str(keeper_end.fileno())]
        argv += ["--agent", str(self.agent.pid)]
        self.process = subprocess.Popen(
            argv, pass_fds=(state_fd, keeper_end.fileno()), stderr=subprocess.PIPE
        )
        os.close(state_fd)
        keeper_end.close()

    def end_agent(self) -> None:
        assert self.agent.stdin is not None
        self.agent.stdin.close()
        self.agent.wait(STEP)

    def loaded(self) -> str:
        """What the keeper imported, once it has exited (its ``-X importtime`` lines)."""
        _, err = self.process.communicate(timeout=STEP)
        return err.decode()

    def close(self) -> None:
        for proc in (self.process, self.agent):
            if proc.poll() is None:
                proc.kill()
                proc.wait(STEP)
        self.channel.close()


@pytest.fixture
def keeper_at(tmp_path: Path) -> Iterator[list[Keeper]]:
    made: list[Keeper] = []
    yield made
    for keeper in made:
        keeper.close()


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no process descriptors here")
def test_an_idle_keeper_exits_with_its_agent_without_loading_the_proxy(
    tmp_path: Path, keeper_at: list[Keeper]
) -> None:
    keeper = Keeper(tmp_path)
    keeper_at.append(keeper)
    keeper.end_agent()
    loaded = keeper.loaded()
    assert keeper.process.returncode == 0
    assert "_engine.keeper_start" in loaded
    assert "_engine.keeper\n" not in loaded and "_engine.egress" not in loaded


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no process descriptors here")
def test_a_keeper_loads_the_proxy_when_its_channel_speaks_and_answers_it(
    tmp_path: Path, keeper_at: list[Keeper]
) -> None:
    keeper = Keeper(tmp_path)
    keeper_at.append(keeper)
    keeper.channel.settimeout(STEP)
    # A policy notice, as the agent sends it: the proxy confirms it once in force.
    keeper.channel.sendall(b"p")
    assert keeper.channel.recv(1) == b"a"
    keeper.end_agent()
    loaded = keeper.loaded()
    assert keeper.process.returncode == 0
    assert "_engine.keeper\n" in loaded
