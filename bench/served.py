"""An emulator served from a child process, so that its CPU and memory are not ours.

``python -m managoat_sandbox.emulators <provider> --port 0`` prints its base
URL once it accepts connections; its request log is read over HTTP
(``/_emulator/requests``, which wants the emulator's credential as a Bearer
header). Every wait is bounded by :data:`measure.WAIT`.
"""

from __future__ import annotations

import contextlib
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import requests
from measure import WAIT, scratch
from raw import CREDENTIAL

#: Pause before reading the request log, so that requests a call left in flight are counted.
SETTLE = 0.2


@dataclass(frozen=True)
class Served:
    """A running emulator: where it is, and its request log."""

    provider: str
    base_url: str

    def requests_made(self, fn: Callable[[], object]) -> int:
        """How many HTTP requests (WebSocket upgrades included) one call of ``fn`` made."""
        control = {"Authorization": f"Bearer {CREDENTIAL}"}
        requests.delete(
            f"{self.base_url}/_emulator/requests", headers=control, timeout=WAIT
        ).raise_for_status()
        fn()
        time.sleep(SETTLE)
        answer = requests.get(f"{self.base_url}/_emulator/requests", headers=control, timeout=WAIT)
        answer.raise_for_status()
        return len(answer.json())


@contextlib.contextmanager
def emulator_process(
    provider: str, *, entry: Sequence[str] = ("-m", "managoat_sandbox.emulators")
) -> Iterator[Served]:
    """Serve ``provider``'s emulator from a child process until the block ends; ``entry``
    is what the interpreter runs (given the provider, ``--port``, ``--token`` and
    ``--workdir``: a scratch directory on the disk users' sandboxes live on,
    :func:`measure.scratch`)."""
    with scratch() as workdir:
        yield from _served(provider, entry, workdir)


def _served(provider: str, entry: Sequence[str], workdir: Path) -> Iterator[Served]:
    """The emulator's child process, its sandboxes in ``workdir``, until the caller is done."""
    child = subprocess.Popen(
        [
            sys.executable,
            *entry,
            provider,
            "--port",
            "0",
            "--token",
            CREDENTIAL,
            "--workdir",
            str(workdir),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        readable, _, _ = select.select([child.stdout], [], [], WAIT)
        line = child.stdout.readline() if readable else ""
        if not line.startswith("http://"):
            raise RuntimeError(f"{provider} emulator did not start")
        yield Served(provider, line.strip())
    finally:
        child.terminate()
        try:
            child.wait(WAIT)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(WAIT)
