"""The shell text that makes detachable E2B commands attachable: the journaling shim,
the replayer and the session lister, and where they keep each session's journal.

envd keeps no output: it throws away what nobody is subscribed to, and a
``Connect`` delivers only live data. So a detachable spawn runs its command
under a bash *shim* that tees stdout and stderr into journal files inside the
sandbox and records the real exit code, and ``attach`` runs a *replayer* that
streams those files from byte zero and then follows them. The journal lives in
the user's home (``~/.fountain``), which the scripts (``$HOME``) and envd's
files API (``~/`` paths) agree on; the caller's ``env`` is given to the command
alone (``env --``), so an overridden ``HOME`` cannot move the journal. Layout,
for a session (tag) ``T``:

* ``T.cmd`` — the command line (``cmd`` and its args joined by spaces),
  written by the shim before it runs the command — but after envd has
  reported the shim started, so a session just spawned may not have it yet:
  its live shim, listed by envd under the tag, is recognised by
  :func:`is_shim` instead;
* ``T.out`` / ``T.err`` — every byte the command wrote to stdout / stderr;
* ``T.exit`` — the exit code, created (atomically, by rename) only after both
  journals are complete, so its presence means "finished, journal whole".

The scripts need bash and GNU coreutils (``tail --pid``, ``stat -c``,
``base64 -w0``), which E2B's templates have. Every argument is single-quoted
(``'`` becomes ``'\\''``), so no caller string is ever interpreted by a shell.
"""

from __future__ import annotations

import base64
import re
import secrets
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from ..._own_group import own_group
from ...types import Session

__all__ = [
    "JOURNAL_DIR",
    "TAG_PREFIX",
    "exit_path",
    "cmd_path",
    "is_shim",
    "is_tag",
    "lister",
    "new_tag",
    "parse_exit",
    "parse_listing",
    "quote",
    "replayer",
    "script",
]

#: The journal directory as envd's files API addresses it (under the user's home).
JOURNAL_DIR = "~/.fountain"
_SCRIPT_DIR = '"$HOME"/.fountain'
TAG_PREFIX = "fountain-"
_TAG = re.compile(r"fountain-[A-Za-z0-9_-]{1,240}")
_EXIT = re.compile(rb"\s*(-?\d{1,10})\s*")


def new_tag() -> str:
    """A process tag unique across processes and hosts, sorting by creation time."""
    return f"{TAG_PREFIX}{time.time_ns():x}{secrets.token_hex(4)}"


def is_tag(value: str) -> bool:
    """Whether ``value`` is a tag this adapter could have made."""
    return _TAG.fullmatch(value) is not None


def quote(arg: str) -> str:
    """``arg`` single-quoted for bash."""
    return "'" + arg.replace("'", "'\\''") + "'"


def _base(tag: str) -> str:
    """The session's journal path prefix, as a bash word (``$HOME`` expanded by bash)."""
    return f"{_SCRIPT_DIR}/{quote(tag)}"


def exit_path(tag: str) -> str:
    """The files-API path of the session's exit code (present once it has finished)."""
    return f"{JOURNAL_DIR}/{tag}.exit"


def cmd_path(tag: str) -> str:
    """The files-API path of the session's command line (written first by its shim)."""
    return f"{JOURNAL_DIR}/{tag}.cmd"


_SHIM_HEAD = f"mkdir -p {_SCRIPT_DIR} || exit 125\nprintf %s "


def _shim_tail(tag: str) -> str:
    """The shim's last lines: keep the exit code, then exit with it."""
    b = _base(tag)
    return (
        f'[ -s {b}.rc ] && mv -f {b}.rc {b}.exit\nexit "$(cat {b}.exit 2>/dev/null || echo 255)"\n'
    )


def script(tag: str, cmd: str, args: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """The bash script a detachable spawn runs (``bash -c <script>``, no ``envs``).

    The command gets ``env`` (through ``env --``) and inherits the shim's
    stdin (envd's pipe), so stdin addressed to the shim's pid reaches it. Its
    stdout and stderr reach envd unchanged and are appended to the journals;
    the shim exits with the command's code.

    The command runs in a process group of its own (``setsid``, where the
    sandbox has it), as envd runs a process: a signal it sends its own group
    (``kill 0``) reaches it and its children, never the ``tee`` processes
    that journal and forward its output, so its output and its exit code (128
    + N for a signal) are kept. The shell's own report of a command a signal
    killed (``Killed``) goes to ``/dev/null``, not into the command's stderr.
    """
    words = (cmd, *args)
    if env:
        words = ("env", "--", *(f"{k}={v}" for k, v in env.items()), *words)
    argv = " ".join(quote(a) for a in words)
    # setsid would read a command starting with "-" as its own option.
    own = "" if words[0].startswith("-") else f"{own_group(quote(cmd), 'o')}; $o "
    line = " ".join((cmd, *args))
    b = _base(tag)
    return (
        f"{_SHIM_HEAD}{quote(line)} > {b}.cmd\n"
        f"{{ {{ exec 4>&2 2>/dev/null; {own}{argv} 2>&4 4>&-; echo $? > {b}.rc; }} "
        f"2>&1 1>&3 3>&- | tee -a {b}.err >&2 3>&-; }} 3>&1 | tee -a {b}.out\n"
        f"{_shim_tail(tag)}"
    )


def is_shim(tag: str, config: object) -> bool:
    """Whether ``config`` (a ``ProcessConfig`` from envd's ``List``) is the shim of ``tag``.

    It is when it runs ``bash -c`` with a script that begins as every shim
    does and ends with the lines only the shim of ``tag`` has (the caller's
    words all come between the two).
    """
    if not isinstance(config, Mapping) or config.get("cmd") != "bash":
        return False
    args = config.get("args")
    if not (
        isinstance(args, list) and len(args) == 2 and args[0] == "-c" and isinstance(args[1], str)
    ):
        return False
    script = args[1]
    return (
        script.startswith(_SHIM_HEAD)
        and script.endswith(_shim_tail(tag))
        and f" > {_base(tag)}.cmd\n" in script
    )


def replayer(tag: str) -> str:
    """The bash script an attach runs: the journals from byte zero, then followed.

    It makes the journal directory and files if they are not there yet (a
    shim that envd has started may not have reached its first line).

    The stdout journal goes to stdout and the stderr journal to stderr. A
    sentinel ends once the exit file appears (or the replayer itself is
    killed); each ``tail`` then reads what is left and ends, and the replayer
    exits with the journaled code.
    """
    b = _base(tag)
    return (
        f"mkdir -p {_SCRIPT_DIR} && touch {b}.out {b}.err || exit 125\n"
        f"( while kill -0 $$ 2>/dev/null && [ ! -e {b}.exit ]; do sleep 0.1; done ) & s=$!\n"
        f"tail -c +1 -s 0.1 --pid=$s -f {b}.out & o=$!\n"
        f"tail -c +1 -s 0.1 --pid=$s -f {b}.err >&2 & e=$!\n"
        "wait $o $e\n"
        f'exit "$(cat {b}.exit 2>/dev/null || echo 255)"\n'
    )


def lister() -> str:
    """The bash script that lists journaled sessions, one line each:
    ``<tag> <created epoch> <last activity epoch or -> <base64 command line>``."""
    return (
        f"cd {_SCRIPT_DIR} 2>/dev/null || exit 0\n"
        f"for f in {TAG_PREFIX}*.cmd; do\n"
        '  [ -e "$f" ] || continue\n'
        "  t=${f%.cmd}\n"
        '  a=$(stat -c %Y "$t.out" "$t.err" 2>/dev/null | sort -n | tail -n 1)\n'
        '  printf "%s %s %s " "$t" "$(stat -c %Y "$f")" "${a:--}"\n'
        '  base64 -w0 < "$f"; echo\n'
        "done\n"
    )


def _epoch(text: str) -> datetime | None:
    return datetime.fromtimestamp(int(text), tz=timezone.utc) if text.isdigit() else None


def parse_listing(output: bytes) -> list[Session]:
    """Sessions from :func:`lister`'s output, oldest first; malformed lines are skipped."""
    sessions = []
    for raw in output.decode("utf-8", errors="replace").splitlines():
        parts = raw.split(" ")
        if len(parts) != 4 or not is_tag(parts[0]):
            continue
        try:
            command = base64.b64decode(parts[3], validate=True).decode("utf-8", "replace")
        except ValueError:
            command = None
        sessions.append(
            Session(
                id=parts[0],
                command=command or None,
                created_at=_epoch(parts[1]),
                last_activity_at=_epoch(parts[2]),
            )
        )
    return sorted(sessions, key=lambda s: s.id)


def parse_exit(data: bytes | None) -> int | None:
    """The code in an exit file, or ``None`` if there is none or it is not an integer."""
    if data is None:
        return None
    match = _EXIT.fullmatch(data)
    return int(match.group(1)) if match else None
