"""Command-line options of the agent and the keeper: ``--name value`` pairs, nothing more.

(Not argparse: it costs more to import than the whole agent does to start.)
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

EGRESS_PORT = 3128
"""The egress proxy's port on a sandbox's loopback."""

SOCKET = "agent.sock"
"""The agent's control socket, in the state directory."""

#: The keeper's options (:func:`parse` keywords): its state directory, its channel to the
#: agent, the agent's host pid, and the sandbox's process limit.
KEEPER: dict[str, tuple[str, ...]] = {
    "required": ("state", "egress", "agent"),
    "optional": ("processes",),
}

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""``PATH`` of the agent, the keeper and every command."""


def parse(
    argv: Sequence[str], *, required: Sequence[str], optional: Sequence[str] = ()
) -> dict[str, str]:
    """``{"name": value}`` for ``--name value`` pairs; SystemExit naming a bad argument."""
    known = {*required, *optional}
    found: dict[str, str] = {}
    args = list(argv)
    while args:
        flag = args.pop(0)
        name = flag[2:]
        if not flag.startswith("--") or name not in known or not args:
            raise SystemExit(f"bad argument {flag!r} (expected --name value for {sorted(known)})")
        found[name] = args.pop(0)
    missing = [name for name in required if name not in found]
    if missing:
        raise SystemExit(f"missing arguments: {missing}")
    return found
