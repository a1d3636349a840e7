"""The keeper as a launch starts it: idle and small until its sandbox first needs it.

Most sandboxes live and die without a command ever reaching the egress
proxy, yet each has a keeper (see :mod:`.keeper`). So the process starts
with nothing but what it needs to wait — this module imports ``os``,
``select`` and ``sys`` — and waits for whichever comes first:

* the channel from the agent has something to say (a connection a command
  made to the proxy port, or a policy notice): the proxy is loaded
  (:func:`.keeper.serve`) and takes it from there, nothing lost, since what
  the agent sent waits in the channel;
* the agent has exited: the keeper exits without having loaded the proxy.

Where the kernel has no process descriptors (``pidfd_open``), the proxy is
loaded at once, as it always was.
"""

from __future__ import annotations

import os
import select
import sys

from .options import KEEPER, parse

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the keeper process a launch starts."""
    options = parse(sys.argv[1:] if argv is None else argv, **KEEPER)
    if _agent_exited_first(int(options["agent"]), int(options["egress"])):
        os._exit(0)
    from .keeper import serve  # noqa: PLC0415 - loaded only once there is work for it

    return serve(options)


def _agent_exited_first(agent: int, channel: int) -> bool:
    """Wait until process ``agent`` exits or ``channel`` is readable; True if the agent
    exited with nothing sent on the channel. False at once without ``pidfd_open``."""
    try:
        handle = os.pidfd_open(agent)
    except (AttributeError, OSError):
        return False
    try:
        while True:
            try:
                readable, _, _ = select.select([channel, handle], [], [])
            except InterruptedError:
                continue
            return channel not in readable
    finally:
        os.close(handle)


if __name__ == "__main__":
    sys.exit(main())
