"""The argument parser: every subcommand, its options, its help and its handler.

Each subcommand's parser sets ``handler`` (a function ``(args, console) ->
exit status``). The global options ``--provider/-p`` and ``--json`` are
accepted before or after the subcommand. One function sets up each command, or
each group of closely related commands (``_lifecycle``, ``_running``,
``_sessions``); :func:`build_parser` calls them in the order ``--help`` lists
the commands.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import Any

from .._args import TERMINATION_TIMEOUT_RANGE, TIMEOUT_RANGE, optional_seconds
from .._collect import EXEC_MAX_BYTES
from .._version import __version__
from ..errors import Invalid
from . import files, sandboxes, sessions, streaming, transfer
from .console import PROG, Console

__all__ = ["DEFAULT_PROVIDER", "PROVIDER_ENV", "Handler", "build_parser", "default_provider"]

Handler = Callable[[argparse.Namespace, Console], int]

PROVIDER_ENV = "MANAGOAT_SANDBOX_PROVIDER"
DEFAULT_PROVIDER = "local"

DESCRIPTION = """\
Drive sandboxes from the shell through any registered managoat_sandbox
provider: create them, run and stream commands, re-attach to sessions,
write and read their files."""

EPILOG = f"""\
examples (on local, whose sandboxes outlive each command):
  {PROG} create box
  {PROG} exec box -- sh -c 'echo hello; exit 3'; echo "status $?"
  {PROG} spawn --stdin box -- cat -n
  {PROG} list --json
  {PROG} destroy box

The provider is --provider, else ${PROVIDER_ENV}, else "{DEFAULT_PROVIDER}".
--provider and --json may also follow the subcommand.

exit status:
  0    success
  N    exec, spawn, attach: the remote command's own status (killed by
       signal N: 128+N)
  1    a library error, one line on stderr:
       "{PROG}: error: <ErrorClass>: <detail>"
  2    bad arguments, or an unknown provider
  124  exec --timeout expired (one line on stderr, as for 1)
  130  interrupted by Ctrl-C (a detachable session keeps running)
  141  stdout was closed early (broken pipe)

--json prints one JSON document per command on stdout. spawn and attach
print one object per line per frame: {{"type": "stdout"|"stderr",
"data_b64": <base64 of the exact bytes>, "text": <present when valid
UTF-8>}}, then {{"type": "exit", "code": N}}; exec prints the same, with its
collected output as one stdout object. A failure also prints
{{"type": "error", "error": <ErrorClass>, "detail": ...}} on stdout."""


def default_provider() -> str:
    """``$MANAGOAT_SANDBOX_PROVIDER``, read now, else ``"local"``."""
    return os.environ.get(PROVIDER_ENV) or DEFAULT_PROVIDER


# -- argument types -----------------------------------------------------------


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None


def _seconds(text: str) -> float | None:
    """``exec --timeout``: the library's rule for exec's timeout
    (:func:`~managoat_sandbox._args.optional_seconds`); ``inf`` is no limit (``None``)."""
    try:
        return optional_seconds(_number(text))
    except Invalid:
        low, high = TIMEOUT_RANGE
        raise argparse.ArgumentTypeError(
            f"seconds must be from {low:g} to {high:.0f}, or inf for no limit, got {text!r}"
        ) from None


def _termination_seconds(text: str) -> float:
    """``terminate --timeout``: seconds within the range the library accepts."""
    value = _number(text)
    low, high = TERMINATION_TIMEOUT_RANGE
    if not low <= value <= high:  # NaN included
        raise argparse.ArgumentTypeError(f"seconds must be from {low:g} to {high:g}, got {text!r}")
    return value


def _mode(text: str) -> int:
    try:
        value = int(text, 8)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an octal mode: {text!r}") from None
    if not 0 <= value <= 0o7777:
        raise argparse.ArgumentTypeError(f"mode out of range: {text!r}")
    return value


def _byte_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of bytes: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"bytes must be >= 0, got {text!r}")
    return value


def _domain(text: str) -> str:
    if not text or any(char.isspace() for char in text):
        raise argparse.ArgumentTypeError(f"not a domain: {text!r}")
    return text


class _EnvAction(argparse.Action):
    """``--env K=V``, repeatable, collected into one dict (later keys win)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        key, sep, value = str(values).partition("=")
        if not sep or not key:
            raise argparse.ArgumentError(self, f"expected K=V, got {values!r}")
        env = dict(getattr(namespace, self.dest) or {})
        env[key] = value
        setattr(namespace, self.dest, env)


# -- the parser ---------------------------------------------------------------


def _globals(parser: argparse.ArgumentParser, *, provider: str | None) -> None:
    """``--provider`` and ``--json``; in subcommands (``provider=None``) they
    default to "not given", so a value before the subcommand survives."""
    suppress = provider is None
    parser.add_argument(
        "-p",
        "--provider",
        metavar="NAME",
        default=argparse.SUPPRESS if suppress else provider,
        help=f"the provider to use (default: ${PROVIDER_ENV}, else {DEFAULT_PROVIDER})",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="machine-readable output: JSON documents on stdout",
    )


def build_parser(provider: str) -> argparse.ArgumentParser:
    """The whole parser; ``provider`` is the default for ``--provider``."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _globals(parser, provider=provider)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    _globals(common, provider=None)
    sub = parser.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)

    def add(
        name: str, handler: Handler, summary: str, *examples: str, usage: str | None = None
    ) -> argparse.ArgumentParser:
        epilog = "examples:\n" + "\n".join(f"  {_example(example)}" for example in examples)
        child = sub.add_parser(
            name,
            parents=[common],
            help=summary,
            description=summary,
            epilog=epilog,
            usage=usage,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        child.set_defaults(handler=handler)
        return child

    _lifecycle(add)
    _running(add)
    _sessions(add)
    _policy(add)
    _url(add)
    _write(add)
    _read(add)
    _ls(add)
    _cp(add)
    _checkpoint(add)
    _restore(add)
    return parser


Add = Callable[..., argparse.ArgumentParser]


def _example(text: str) -> str:
    """One help example: ``PROG <text>``, or ``text`` with ``{prog}`` filled in when the
    example is a shell line of its own (say, one keeping a printed session id).

    Every example runs as printed, in order, on ``local`` after ``create box``
    (``tests/test_cli_local.py`` runs them all).
    """
    return text.format(prog=PROG) if "{prog}" in text else f"{PROG} {text}"


def _lifecycle(add: Add) -> None:
    create = add(
        "create",
        sandboxes.run_create,
        "Create a sandbox (an existing name is adopted) and print its name.",
        "create box",
        "create --new job-42",
    )
    create.add_argument("name", metavar="NAME", help=NAME_HELP)
    create.add_argument(
        "--new",
        action="store_true",
        help="never adopt: fail with AlreadyExists if the name is taken; print the instance id",
    )
    add(
        "get",
        sandboxes.run_get,
        "Print a sandbox's status (running, suspended, unknown) "
        "and, for local sandboxes, their isolation (namespaces or none).",
        "get box",
    ).add_argument("name", metavar="NAME", help=NAME_HELP)
    add(
        "list",
        sandboxes.run_list,
        "Print every sandbox name at the provider.",
        "list",
        "list --json",
    )
    add(
        "destroy", sandboxes.run_destroy, "Destroy a sandbox (already gone is fine).", "destroy box"
    ).add_argument("name", metavar="NAME", help=NAME_HELP)
    add("suspend", sandboxes.run_suspend, "Park a sandbox.", "suspend box").add_argument(
        "name", metavar="NAME", help=NAME_HELP
    )
    add("resume", sandboxes.run_resume, "Wake a parked sandbox.", "resume box").add_argument(
        "name", metavar="NAME", help=NAME_HELP
    )


def _command_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help=NAME_HELP)
    parser.add_argument(
        "--env",
        action=_EnvAction,
        metavar="K=V",
        default=None,
        help="set an environment variable (repeatable)",
    )
    parser.add_argument("--dir", metavar="D", default=None, help="working directory")
    parser.add_argument(
        "command",
        nargs="+",
        metavar="CMD [ARGS ...]",
        help="the command and its arguments, after --",
    )


NAME_HELP = "the sandbox's name"

#: argparse cannot show ``--`` (nor a two-part metavar) in a generated usage line.
COMMAND_USAGE = "%(prog)s [options] NAME -- CMD [ARGS ...]"


def _running(add: Add) -> None:
    run = add(
        "exec",
        streaming.run_exec,
        "Run a command to exit (the library's exec); print its output; exit with its status.",
        "exec box -- uname -a",
        "exec box --timeout 30 --env MODE=ci --dir /tmp -- sh -c 'echo $MODE in $PWD'",
        "exec --json box -- cat /etc/hostname",
        usage=COMMAND_USAGE,
    )
    _command_options(run)
    run.add_argument(
        "--timeout",
        type=_seconds,
        metavar="S",
        default=None,
        help="one deadline in seconds that output never extends (0 fails at once, "
        "inf is no limit, a negative or NaN value is a usage error); on expiry "
        "exit 124 with exec_timeout, after the provider's exec clean-up "
        "(local kills the command)",
    )
    run.add_argument(
        "--merge-stderr",
        action="store_true",
        help="collect the command's stderr into stdout, in arrival order "
        "(otherwise stderr is printed to stderr after the exit; spawn "
        "streams both, live)",
    )
    run.add_argument(
        "--max-bytes",
        type=_byte_count,
        metavar="N",
        default=EXEC_MAX_BYTES,
        help="fail with Truncated, printing nothing, once the output (stdout and "
        f"stderr together) passes N bytes; the command is stopped (default {EXEC_MAX_BYTES}: "
        "64 MiB; spawn streams any amount)",
    )
    spawn = add(
        "spawn",
        streaming.run_spawn,
        "Start a command and stream its output live; Ctrl-C detaches.",
        "spawn box -- sh -c 'for i in 1 2 3; do echo $i; sleep 1; done'",
        "spawn --stdin box -- python3 -i",
        "spawn --detach box -- sleep 600   # prints the session id",
        usage=COMMAND_USAGE,
    )
    _command_options(spawn)
    spawn.add_argument("--tty", action="store_true", help="run in a terminal (provider: tty)")
    mode = spawn.add_mutually_exclusive_group()
    mode.add_argument("--stdin", action="store_true", help="forward this terminal's stdin")
    mode.add_argument(
        "--detach", action="store_true", help="start it, print the session id and return"
    )


def _sessions(add: Add) -> None:
    attach = add(
        "attach",
        streaming.run_attach,
        "Re-attach to a session: replay its output from the start, then tail it.",
        "sid=$({prog} spawn --detach box -- sh -c 'echo hi; sleep 2')",
        '{prog} attach box "$sid"',
        '{prog} attach --stdin box "$sid"',
    )
    attach.add_argument("name", metavar="NAME", help=NAME_HELP)
    attach.add_argument("session_id", metavar="SESSION_ID", help="as `sessions NAME` lists it")
    attach.add_argument("--stdin", action="store_true", help="forward this terminal's stdin")
    add(
        "sessions",
        sessions.run_sessions,
        "List a sandbox's sessions: ID, STATE (running, exited N, ended, or - where the "
        "provider does not say), CREATED and COMMAND, tab-separated.",
        "sessions box",
    ).add_argument("name", metavar="NAME", help=NAME_HELP)
    terminate = add(
        "terminate",
        sessions.run_terminate,
        "End a session, with the provider's confirmation.",
        "sid=$({prog} spawn --detach box -- sleep 600)",
        '{prog} terminate box "$sid"',
        '{prog} terminate --force --timeout 5 box "$sid"',
    )
    terminate.add_argument("name", metavar="NAME", help=NAME_HELP)
    terminate.add_argument("session_id", metavar="SESSION_ID", help="as `sessions NAME` lists it")
    low, high = TERMINATION_TIMEOUT_RANGE
    terminate.add_argument(
        "--timeout",
        type=_termination_seconds,
        metavar="S",
        default=10.0,
        help=f"seconds to wait for confirmation, {low:g}-{high:g} (default: 10)",
    )
    terminate.add_argument("--force", action="store_true", help="kill rather than ask")


def _policy(add: Add) -> None:
    policy = add(
        "policy",
        sandboxes.run_policy,
        "Replace the egress allowlist. Denying everything needs --deny-all.",
        "policy box --allow pypi.org --allow files.pythonhosted.org",
        "policy box --deny-all",
    )
    policy.add_argument("name", metavar="NAME", help=NAME_HELP)
    choice = policy.add_mutually_exclusive_group(required=True)
    choice.add_argument(
        "--allow",
        action="append",
        type=_domain,
        metavar="DOMAIN",
        help="a domain the sandbox may reach (repeat for more); all else is denied",
    )
    choice.add_argument("--deny-all", action="store_true", help="deny all egress")


def _url(add: Add) -> None:
    add(
        "url", sandboxes.run_url, "Print a sandbox's public URL (a note if it has none).", "url box"
    ).add_argument("name", metavar="NAME", help=NAME_HELP)


def _write(add: Add) -> None:
    write = add(
        "write",
        sandboxes.run_write,
        "Write stdin to a file in the sandbox, creating parent directories.",
        "echo A=1 | {prog} write box /app/.env --mode 600",
    )
    write.add_argument("name", metavar="NAME", help=NAME_HELP)
    write.add_argument("path", metavar="PATH")
    write.add_argument(
        "--mode",
        type=_mode,
        default=None,
        metavar="MODE",
        help="octal file mode, e.g. 600 or 0o600",
    )


def _read(add: Add) -> None:
    read = add(
        "read",
        files.run_read,
        "Write a file of the sandbox to stdout, byte for byte (or to -o FILE).",
        "echo hello | {prog} write box /tmp/greeting.txt",
        "read box /tmp/greeting.txt",
        "read box /tmp/greeting.txt -o greeting.txt --max-bytes 1048576",
    )
    read.add_argument("name", metavar="NAME", help=NAME_HELP)
    read.add_argument("path", metavar="PATH", help="the file's absolute path in the sandbox")
    read.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default=None,
        help="write the bytes to FILE (created or replaced) instead of stdout",
    )
    read.add_argument(
        "--max-bytes",
        type=_byte_count,
        metavar="N",
        default=None,
        help="fail with Truncated, writing nothing, if the file holds more than N bytes",
    )


def _ls(add: Add) -> None:
    ls = add(
        "ls",
        files.run_ls,
        "List a directory of the sandbox: one TYPE MODE SIZE MODIFIED NAME line\n"
        "per entry, tab-separated, by name (a symlink is shown, not followed).",
        "ls box /home/user",
        "ls --json box /tmp",
    )
    ls.add_argument("name", metavar="NAME", help=NAME_HELP)
    ls.add_argument("path", metavar="PATH", help="the directory's absolute path in the sandbox")


def _cp(add: Add) -> None:
    cp = add(
        "cp",
        transfer.run_cp,
        "Copy a file or a whole tree between this machine and a sandbox, like docker cp:\n"
        "BOX:PATH on one side, a local path on the other; the destination becomes the\n"
        "copy (modes and symlinks kept). A progress line on a terminal; totals under --json.",
        "mkdir -p project/src && echo 'print(1)' > project/src/main.py && "
        "{prog} cp project box:/tmp/project",
        "cp box:/tmp/project ./project-copy",
        "cp --json box:/tmp/project/src/main.py ./main.py",
    )
    cp.add_argument("source", metavar="SOURCE", help="a local path, or BOX:PATH")
    cp.add_argument("destination", metavar="DEST", help="a local path, or BOX:PATH")
    cp.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="S",
        help="give up after S seconds (default: no limit)",
    )


def _checkpoint(add: Add) -> None:
    checkpoint = add(
        "checkpoint",
        sandboxes.run_checkpoint,
        "Snapshot a sandbox and print the checkpoint id.",
        "checkpoint box --comment 'before upgrade'",
    )
    checkpoint.add_argument("name", metavar="NAME", help=NAME_HELP)
    checkpoint.add_argument("--comment", metavar="C", default=None)


def _restore(add: Add) -> None:
    restore = add(
        "restore",
        sandboxes.run_restore,
        "Restore a sandbox to a checkpoint.",
        "ckpt=$({prog} checkpoint box)",
        '{prog} restore box "$ckpt"',
    )
    restore.add_argument("name", metavar="NAME", help=NAME_HELP)
    restore.add_argument("checkpoint_id", metavar="CHECKPOINT_ID")
