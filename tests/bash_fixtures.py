"""The bash commands the conformance suite runs on every provider that runs real commands.

Each provider's conformance class starts from :data:`COMMON` and adds what only
it needs (or leaves out, saying why, what it cannot promise).
"""

from __future__ import annotations

from typing import Any

COMMON: dict[str, tuple[Any, ...]] = {
    "exec_ok": ("bash", ["-lc", "echo hello"], "hello"),
    "exec_fail": ("bash", ["-lc", "echo oops; exit 3"], 3),
    "spawn_ok": ("bash", ["-lc", "echo hello"]),
    "spawn_stay": ("bash", ["-c", "echo ready; exec cat"]),
    "exec_mixed": ("bash", ["-c", "echo out-part; echo err-part >&2"], "out-part", "err-part"),
    "print_file": ("cat", []),
    "make_private": ("chmod", ["000"]),
    # SIGTERM ignored, and so by the sleep it becomes (an ignored signal survives exec).
    "spawn_deaf": ("bash", ["-c", "trap '' TERM; echo deaf; exec sleep 20"]),
    # Its own process group, as `trap 'kill 0' EXIT` does: only the command may end.
    "exec_killed": ("bash", ["-c", "echo up; kill -KILL 0"], 9),
}

#: Shell text: start ``child`` in the background once the main process has exited — it
#: waits for the end of file of a FIFO (made in the working directory, removed by the
#: child) that only the main process holds open for writing — then run ``main``.
_AFTER_MAIN_EXITS = (
    'f=.late-child-$$ && mkfifo "$f" && '
    '{{ ( cat "$f" >/dev/null; rm -f "$f"; {child} ) & exec 3>"$f"; {main}; }}'
)


def after_main_exits(main: str, child: str) -> str:
    """A POSIX shell script that runs ``main`` and, in a background child holding its
    output, ``child`` strictly after the main process has exited (no timing decides it)."""
    return _AFTER_MAIN_EXITS.format(main=main, child=child)


#: A command whose background child writes after the main process has exited.
LATE_CHILD: tuple[Any, ...] = (
    "bash",
    ["-c", after_main_exits("echo early", "echo late")],
    "early",
    "late",
)

#: A command that alternates stdout and stderr, merged in the order written.
ORDERED: tuple[Any, ...] = (
    "bash",
    ["-c", "echo a; echo b >&2; echo c; echo d >&2"],
    "a\nb\nc\nd\n",
)


def bulk(nbytes: int) -> tuple[Any, ...]:
    """The ``spawn_bulk`` fixture: exactly ``nbytes`` bytes of stdout."""
    return ("bash", ["-c", f"head -c {nbytes} /dev/zero | tr '\\0' x"], nbytes)
