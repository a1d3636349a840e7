"""The keeper: the host-side process of an isolated sandbox.

Started by :func:`.launch.launch` once the agent serves, it hosts the
sandbox's egress proxy: every connection a command makes to the proxy port
arrives here as a descriptor the agent passes over a socket pair, and is
handled by :func:`.egress.serve_connection` on its own thread. The keeper
exits when the agent does, removing the sandbox's ``pids`` cgroup
(:mod:`.cgroup`) if it had one.
"""

from __future__ import annotations

import os
import select
import socket
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from . import cgroup
from .options import parse

_POLL = 1.0


def _serve_egress(channel: socket.socket, state_fd: int) -> None:
    # Imported once the keeper runs: the proxy's imports need not delay anything.
    from .egress import serve_connection  # noqa: PLC0415

    while True:
        try:
            _, fds, _, _ = socket.recv_fds(channel, 16, 8)
        except OSError:
            return
        if not fds:
            return
        for fd in fds:
            client = socket.socket(fileno=fd)
            threading.Thread(
                target=serve_connection, args=(client, state_fd), name="egress", daemon=True
            ).start()


def _wait_for_exit(pid: int) -> None:
    """Return once process ``pid`` (not a child of ours) has exited."""
    try:
        handle = os.pidfd_open(pid)
    except OSError:
        handle = -1
    if handle >= 0:
        select.select([handle], [], [])
        os.close(handle)
        return
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            pass
        time.sleep(_POLL)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the keeper process."""
    options = parse(
        sys.argv[1:] if argv is None else argv,
        required=("state", "egress", "agent"),
        optional=("cgroup",),
    )
    state, agent = int(options["state"]), int(options["agent"])
    group = Path(options["cgroup"]) if "cgroup" in options else None
    channel = socket.socket(fileno=int(options["egress"]))

    def finish() -> None:
        _wait_for_exit(agent)
        if group is not None:
            cgroup.remove_when_empty(group)
        os._exit(0)

    threading.Thread(target=finish, name="agent", daemon=True).start()
    _serve_egress(channel, state)
    finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
