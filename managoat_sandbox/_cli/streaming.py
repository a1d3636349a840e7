"""``exec``, ``spawn`` and ``attach``: running commands from the terminal.

``exec`` is the library's :func:`managoat_sandbox.exec`, nothing more: the
same deadline and the same clean-up; it prints the collected stdout and
stderr when the command exits. ``spawn`` and ``attach`` stream: they spawn (or attach) with a
private queue as owner and render each frame as it arrives: stdout bytes to
stdout, stderr bytes to stderr (or JSON lines under ``--json``). The
command's ``Exit`` becomes the process's exit status; an ``Error`` frame is
raised as its reason (one line, status 1). Every way out stops the local end
(``stop_command``), which never kills a detachable session.
"""

from __future__ import annotations

import argparse
import queue
import shlex
from collections.abc import Callable

from .. import facade as sandbox
from .. import reasons
from ..contract import Capability
from ..errors import SandboxError, Unavailable
from ..frames import Error, Exit, Stderr, Stdout
from ..types import Command, Handle
from . import exits
from .console import PROG, Console
from .render import frame_document
from .stdin import StdinFailed, StdinForwarder

__all__ = ["exit_status", "follow", "is_exec_timeout", "run_attach", "run_exec", "run_spawn"]

#: Longest single wait for a frame, so Ctrl-C is seen promptly on every
#: platform (a blocking ``Queue.get`` is not interruptible everywhere).
POLL = 0.2


def exit_status(code: int) -> int:
    """The process status for a remote exit code.

    A negative code (killed by signal N, as ``subprocess`` reports it) becomes
    ``128 + N``, as a shell reports it; any other code is propagated as is.
    """
    return 128 - code if code < 0 else code


def run_exec(args: argparse.Namespace, console: Console) -> int:
    """Run a command to exit with :func:`managoat_sandbox.exec`; print its output; exit
    with its status.

    The options are exec's arguments: ``--timeout`` is its one deadline (and
    the adapter's clean-up on expiry is exec's: ``local`` kills the command,
    which leaves no session behind), ``--merge-stderr`` is
    ``stderr_to_stdout``, ``--max-bytes`` is ``max_bytes``. Otherwise the
    result's stdout is printed to stdout and its stderr
    (``ExecResult.stderr``) to stderr, after the exit. On
    expiry the status is :data:`~managoat_sandbox._cli.exits.TIMEOUT` with
    exec's ``DeadlineExpired(("exec_timeout", S))`` on one line; nothing collected
    is printed. ``--timeout 0`` fails at once without starting anything; a
    negative or NaN ``--timeout`` is a usage error (status 2), as the library's
    ``Invalid``.
    """
    handle = sandbox.build_handle(args.provider, args.name)
    cmd, *argv = args.command
    try:
        result = sandbox.exec(
            handle,
            cmd,
            argv,
            env=args.env,
            dir=args.dir,
            timeout=args.timeout,
            stderr_to_stdout=args.merge_stderr,
            max_bytes=args.max_bytes,
        )
    except Unavailable as error:
        if not is_exec_timeout(error):
            raise
        console.failure(error, f" (no exit within {args.timeout:g} s)")
        return exits.TIMEOUT
    if result.output:
        _show(console, Stdout("exec", result.output))
    if result.stderr:
        _show(console, Stderr("exec", result.stderr))
    if console.json_mode:
        console.document(frame_document(Exit("exec", result.exit_code)))
    return exit_status(result.exit_code)


def is_exec_timeout(error: Unavailable) -> bool:
    """Whether ``error`` is exec's expired deadline, ``DeadlineExpired(("exec_timeout", S))``."""
    return reasons.reason_of(error) == reasons.EXEC_TIMEOUT


def run_spawn(args: argparse.Namespace, console: Console) -> int:
    """Start a command and stream it; with ``--detach``, only start it.

    The command is detachable whenever the provider advertises ``attach``,
    so Ctrl-C leaves it running and prints how to re-attach. Its session id
    is ``command.session_id`` where the adapter reports it; otherwise it is
    found by listing the sandbox's sessions before and after the spawn, and
    reported only when exactly one new session appeared.
    """
    handle = sandbox.build_handle(args.provider, args.name)
    detachable: bool = args.detach or sandbox.supports(args.provider, Capability.ATTACH)
    before = _session_ids(handle) if detachable else None
    frames: queue.Queue[object] = queue.Queue()
    cmd, *argv = args.command
    command = sandbox.spawn(
        handle,
        cmd,
        argv,
        owner=frames,
        env=args.env,
        dir=args.dir,
        stdin=args.stdin,
        tty=args.tty,
        detachable=detachable,
    )
    try:
        session_id = command.session_id or _new_session(handle, before)
        _announce(console, handle, session_id, detached=args.detach)
        if args.detach:
            return exits.OK
        on_interrupt = _detached_hint(console, handle, session_id, detachable=detachable)
        return _stream(command, frames, console, stdin=args.stdin, on_interrupt=on_interrupt)
    finally:
        sandbox.stop_command(command)


def run_attach(args: argparse.Namespace, console: Console) -> int:
    """Replay a session from byte zero, tail it, and exit with its real status."""
    handle = sandbox.build_handle(args.provider, args.name)
    frames: queue.Queue[object] = queue.Queue()
    command = sandbox.attach(handle, args.session_id, owner=frames, stdin=args.stdin)
    try:
        on_interrupt = _detached_hint(console, handle, args.session_id, detachable=True)
        return _stream(command, frames, console, stdin=args.stdin, on_interrupt=on_interrupt)
    finally:
        sandbox.stop_command(command)


def follow(frames: queue.Queue[object], console: Console) -> int:
    """Render frames up to the terminal one and return the exit status.

    An ``Error`` frame or a stdin failure is raised as a ``SandboxError``.
    """
    while True:
        item = _next(frames)
        if isinstance(item, StdinFailed):
            raise item.error
        if isinstance(item, Error):
            raise item.reason
        if isinstance(item, Exit):
            if console.json_mode:
                console.document(frame_document(item))
            return exit_status(item.code)
        if isinstance(item, (Stdout, Stderr)):
            _show(console, item)


def _next(frames: queue.Queue[object]) -> object:
    while True:
        try:
            return frames.get(timeout=POLL)
        except queue.Empty:
            continue


def _show(console: Console, frame: Stdout | Stderr) -> None:
    if console.json_mode:
        console.document(frame_document(frame))
    elif isinstance(frame, Stdout):
        console.out(frame.data)
    else:
        console.err(frame.data)


def _stream(
    command: Command,
    frames: queue.Queue[object],
    console: Console,
    *,
    stdin: bool,
    on_interrupt: Callable[[], None],
) -> int:
    """:func:`follow`, forwarding stdin if asked; Ctrl-C detaches (status 130)."""
    forwarder = None
    if stdin:
        forwarder = StdinForwarder(command, console.stdin_reader(), frames.put)
        forwarder.start()
    try:
        return follow(frames, console)
    except KeyboardInterrupt:
        sandbox.stop_command(command)
        on_interrupt()
        return exits.INTERRUPTED
    finally:
        if forwarder is not None:
            forwarder.stop()


# -- sessions -----------------------------------------------------------------


def _session_ids(handle: Handle) -> frozenset[str] | None:
    """The ids of the sandbox's sessions, or ``None`` if they cannot be listed."""
    try:
        return frozenset(session.id for session in sandbox.list_sessions(handle))
    except SandboxError:
        return None


def _new_session(handle: Handle, before: frozenset[str] | None) -> str | None:
    """The one session id that appeared since ``before``; ``None`` rather than a guess."""
    if before is None:
        return None
    after = _session_ids(handle)
    new = [] if after is None else list(after - before)
    return new[0] if len(new) == 1 else None


def _command_line(handle: Handle, *words: str) -> str:
    return shlex.join([PROG, "-p", handle.provider, *words, handle.name])


def _announce(console: Console, handle: Handle, session_id: str | None, *, detached: bool) -> None:
    """Say which session was started: stdout when detached or ``--json``, else stderr."""
    if console.json_mode:
        console.document(
            {
                "type": "session",
                "provider": handle.provider,
                "name": handle.name,
                "session_id": session_id,
            }
        )
    elif session_id is None:
        if detached:
            console.note(
                "the provider did not list the new session; find it with: "
                + _command_line(handle, "sessions")
            )
    elif detached:
        console.line(session_id)
    else:
        console.note(f"session {session_id}")


def _detached_hint(
    console: Console, handle: Handle, session_id: str | None, *, detachable: bool
) -> Callable[[], None]:
    """What to print after Ctrl-C: how to re-attach and how to end the session."""

    def hint() -> None:
        if not detachable:
            console.note("interrupted")
        elif session_id is None:
            console.note(
                "detached; the session keeps running. Find it with: "
                + _command_line(handle, "sessions")
            )
        else:
            console.note(f"detached; session {session_id} keeps running")
            for label, verb in (("re-attach:", "attach"), ("end it:   ", "terminate")):
                command = _command_line(handle, verb) + " " + shlex.quote(session_id)
                console.note(f"{label} {command}")

    return hint
