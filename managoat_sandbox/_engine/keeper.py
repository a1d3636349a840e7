"""The keeper: the host-side process of an isolated sandbox.

Started by :func:`.launch.launch`, it runs bubblewrap (which runs the agent
inside the namespaces), records the agent's host pid and start time in
``agent.json`` (so a ``destroy`` can kill it even if it no longer answers),
tells the launcher the agent is ready, and then serves the sandbox's egress:
every connection a command makes to the proxy port arrives here as a passed
descriptor and is handled by :func:`.egress.serve_connection` on its own
thread. The keeper exits when bubblewrap does, removing the sandbox's ``pids`` cgroup
(:mod:`.cgroup`) if it had one.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from . import cgroup
from .agent_process import write_record
from .options import parse
from .tree import start_time

_INFO_LIMIT = 64 * 1024


def _read_info(fd: int) -> dict[str, object]:
    data = b""
    while len(data) < _INFO_LIMIT:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        with contextlib.suppress(ValueError):
            info = json.loads(data)
            if isinstance(info, dict):
                return info
    return {}


def _serve_egress(channel: socket.socket, state_fd: int) -> None:
    # Imported once the sandbox is ready: the proxy's imports need not delay its start.
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
            threading.Thread(target=serve_connection, args=(client, state_fd),
                             name="egress", daemon=True).start()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the keeper process."""
    options = parse(sys.argv[1:] if argv is None else argv,
                    required=("state", "listen", "ready", "config", "command"),
                    optional=("cgroup",))
    state, listen, ready = (int(options[name]) for name in ("state", "listen", "ready"))
    group = Path(options["cgroup"]) if "cgroup" in options else None
    command: list[str] = json.loads(options["command"])
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    agent_ready_r, agent_ready_w = os.pipe()
    info_r, info_w = os.pipe()
    command = [command[0], "--info-fd", str(info_w), *command[1:],
               "--state", str(state), "--listen", str(listen),
               "--ready", str(agent_ready_w), "--egress", str(theirs.fileno()),
               "--config", options["config"]]
    passed = (state, listen, agent_ready_w, theirs.fileno(), info_w)
    proc = subprocess.Popen(command, pass_fds=passed, stdin=subprocess.DEVNULL)
    for fd in (listen, agent_ready_w, info_w):
        os.close(fd)
    theirs.close()
    info = _read_info(info_r)
    os.close(info_r)
    pid = info.get("child-pid")
    answer = os.read(agent_ready_r, 1)
    os.close(agent_ready_r)
    if answer != b"R" or not isinstance(pid, int):
        proc.wait()
        if group is not None:
            cgroup.leave_and_remove(group)
        return 1
    write_record(state, "agent.json", {"pid": pid, "start": start_time(pid)})
    os.write(ready, b"R")
    os.close(ready)

    def finish() -> None:
        proc.wait()
        if group is not None:
            cgroup.leave_and_remove(group)
        os._exit(0)

    threading.Thread(target=finish, name="bwrap", daemon=True).start()
    _serve_egress(ours, state)
    finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
