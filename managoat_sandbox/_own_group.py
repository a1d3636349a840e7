"""Shell text that starts a caller's command in a process group of its own.

A provider that runs the caller's command under shell helpers of its own
(Daytona's session shell and encoders, E2B's journaling ``tee``s) would
otherwise give the command the helpers' process group: a command signalling
its own group (``kill 0``, a script's ``trap 'kill 0' EXIT``) would kill
them and lose its output and exit code. Local, Sprites and envd run each
command in a group of its own; ``setsid`` does the same where the sandbox
has it (util-linux and busybox do).
"""

from __future__ import annotations

__all__ = ["own_group"]


def own_group(cmd: str, name: str) -> str:
    """Shell text setting the variable ``name`` to ``setsid`` where the sandbox has it
    and finds the (already quoted) command ``cmd``, else to nothing: ``exec ${name} cmd
    …`` (or ``$name cmd …``) then starts the command in a process group of its own. A
    command the shell cannot find is left to the shell, whose "not found" (127) then
    names no setsid. Not for a command starting with ``-``, which setsid would read as
    its own option."""
    return (
        f"{{ command -v setsid >/dev/null 2>&1 && command -v {cmd} >/dev/null 2>&1 "
        f"&& {name}=setsid || {name}=; }}"
    )
