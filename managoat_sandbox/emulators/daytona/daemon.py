"""The toolbox daemon of one sandbox incarnation: sessions, commands, one-shot execs.

Written from docs/protocols/daytona.md#toolbox. Everything runs inside the sandbox's box
(:mod:`managoat_sandbox._engine.box`), so a command sees only its sandbox:

* a **session** is one long-lived shell, a journaled box session with stdin.
  Each session command is handed to that shell as a wrapper script on its
  stdin. The daemon makes per-command FIFOs; the wrapper starts two line readers that
  append every stdout line as ``01 01 01 <line> \\n`` and every stderr line as
  ``02 02 02 <line> \\n`` to the command's ``output.log`` (each line in one
  write, read in blocks by perl when the host has it), holds the stdin FIFO
  open for an async command (a sync one reads ``/dev/null``), **sources** the
  script in the session shell itself, and writes ``exit_code`` only after both
  readers have drained. So a top-level ``exit N`` in the script ends the
  session shell: no exit code is ever recorded (the v0.190 daemon), unless
  :attr:`Daemon.exit_trap` emulates the newer daemon whose EXIT trap records it
  (docs/protocols/daytona.md#exit-in-a-sourced-script). ``(exit N)`` or
  ``return N`` record ``N`` in both. Once it has
  recorded a code the wrapper prints a line on the shell's own output, which
  the box streams to whoever waits for a sync command (no polling).
* a **one-shot execute** is an ephemeral box process, the shell running the
  script (``bash -c``); stdout and stderr come back merged in arrival order,
  and closing its subscription (on timeout) kills its process group.

The daemon's config dir lives inside the sandbox, at
``/tmp/.daytona-daemon/<run>/sessions/<session>/<command id>/`` (``cmd.sh``,
``output.log``, ``exit_code`` and the FIFOs), because the wrapper that writes
there runs inside the sandbox. The emulator reads logs and exit codes, and
opens the stdin FIFO, only through :class:`~.files.SandboxFiles`: a log or
FIFO that a command replaced by a symlink or something else is refused, never
followed or waited on.

A daemon lives as long as its sandbox runs: :meth:`Daemon.shutdown` (on
stop, archive, delete) ends every process of the sandbox, as the real
daemon's restart does. The sandbox's files are kept.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import re
import select
import shlex
import signal
import threading
import time
import uuid

import attrs

from managoat_sandbox._engine import events, safefs
from managoat_sandbox._engine.box import Box, Refused
from managoat_sandbox._engine.errors import EngineError
from managoat_sandbox._engine.subscription import Subscription

from .files import SandboxFiles
from .shapes import DaemonError

__all__ = ["CONFIG_ROOT", "STDERR_MARK", "STDOUT_MARK", "Command", "Daemon", "OneShot", "Session"]

STDOUT_MARK = b"\x01\x01\x01"
STDERR_MARK = b"\x02\x02\x02"
RESERVED_SESSION = "entrypoint"
#: Where the daemon keeps its per-run files, inside the sandbox.
CONFIG_ROOT = "/tmp/.daytona-daemon"
SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DELETE_GRACE = 2.0
_KILL_WAIT = 5.0
_INPUT_OPEN_WAIT = 5.0
_INPUT_WRITE_WAIT = 10.0
_SHELL_WRITE_WAIT = 10.0
#: A sync exec re-reads ``exit_code`` this often should a script have silenced the
#: shell's own output (which normally announces the end).
_RECHECK = 1.0
_CODE_LIMIT = 4096
_NOT_STARTED = "no IP address found. Is the Sandbox started?"

# The wrapper handed to the session shell per command (docs/protocols/daytona.md#command-wrapper).
# {dir} is the command's directory (as the sandbox sees it), where the daemon has
# made the FIFOs; {holder} keeps an async command's stdin FIFO open (a sync
# command reads {stdin} /dev/null: EOF at once); {trap} is what the shell does
# when it exits (always: remove the FIFOs). The journal is opened once, by the
# wrapper, before the readers start and before the command runs (as the real
# daemon opens it), so a command that replaces its own output.log (with a FIFO,
# say) can never make a reader open that instead and block the wrapper. Once the
# code is recorded the wrapper announces it on the shell's output, then removes
# the FIFOs.
_WRAPPER = """{{
__dtn_d={dir}
__dtn_so="$__dtn_d/stdout.pipe"; __dtn_se="$__dtn_d/stderr.pipe"; __dtn_si="$__dtn_d/stdin.pipe"
trap {trap} EXIT
exec 9>> "$__dtn_d/output.log"
{out_reader} < "$__dtn_so" >&9 & __dtn_r1=$!
{err_reader} < "$__dtn_se" >&9 & __dtn_r2=$!
exec 9>&-
{holder}
{{ . "$__dtn_d/cmd.sh"; }} < {stdin} > "$__dtn_so" 2> "$__dtn_se"
__dtn_ec=$?
[ -z "$__dtn_h" ] || {{ kill "$__dtn_h" 2>/dev/null; wait "$__dtn_h" 2>/dev/null; }}
wait "$__dtn_r1" "$__dtn_r2"
echo "$__dtn_ec" >> "$__dtn_d/exit_code"
echo "$__dtn_d"
rm -f "$__dtn_so" "$__dtn_se" "$__dtn_si"
}}
"""
# The line readers (docs/protocols/daytona.md#command-wrapper): each appends every
# line of its FIFO to the
# journal as ONE write of marker + line + newline (a last line without one gets it
# at EOF), so the two readers' lines never interleave mid-line. perl reads its
# FIFO in blocks; the portable fallback is the shell's `read`, one byte per system
# call (correct, but slow for large outputs).
_PERL_READER = r"""binmode STDIN; binmode STDOUT; my $m = chr(shift) x 3;
while (defined(my $l = <STDIN>)) {
  $l .= "\n" if substr($l, -1) ne "\n"; $l = $m . $l;
  while (length $l) { my $n = syswrite(STDOUT, $l); last unless $n; substr($l, 0, $n) = ""; }
}"""
_SHELL_READER = (
    '( while IFS= read -r __dtn_l || [ -n "$__dtn_l" ]; do '
    "printf '\\00{mark}\\00{mark}\\00{mark}%s\\n' \"$__dtn_l\"; done )"
)
#: A perl the sandbox's commands can run (the host's ``/usr`` is the box's), or None.
PERL = next((path for path in ("/usr/bin/perl", "/bin/perl") if os.access(path, os.X_OK)), None)
# An async command's stdin FIFO is held open by a writer until the command ends. The
# writer holds none of the shell's output: a shell a command ends (`exit`) before the
# writer is killed must still end, and the agent ends a process once its pipes close.
_HOLD_STDIN = 'sleep 2147483647 > "$__dtn_si" 2>/dev/null & __dtn_h=$!'
_NO_STDIN = "__dtn_h="
#: The FIFOs of a command, made by the daemon in the command's directory.
_FIFOS = ("stdout.pipe", "stderr.pipe", "stdin.pipe")
_TRAP_CLEANUP = 'rm -f "$__dtn_so" "$__dtn_se" "$__dtn_si"'
# Newer daemons (docs/protocols/daytona.md#exit-in-a-sourced-script): the EXIT
# trap still records the status of a
# script that ended the shell with `exit N`, after the readers drained (the
# shell first lets go of the FIFOs it still holds, or the readers never end).
_TRAP_RECORD = (
    '__dtn_ec=$?; exec >/dev/null 2>&1 </dev/null; kill "$__dtn_h"; '
    'wait "$__dtn_r1" "$__dtn_r2"; '
    '[ -s "$__dtn_d/exit_code" ] || { : > "$__dtn_d/shell_ended"; '
    'echo "$__dtn_ec" >> "$__dtn_d/exit_code"; }; ' + _TRAP_CLEANUP
)


@attrs.define(eq=False)
class Command:
    """One session command; ``exit_code`` is read lazily from its ``exit_code`` file.

    ``dir`` is a sandbox path; its files are reached through ``files`` only.
    """

    id: str
    command: str
    dir: str
    run_async: bool
    suppress_input_echo: bool
    files: SandboxFiles
    exit_code: int | None = None

    @property
    def log_path(self) -> str:
        """The command's journal (``output.log``), a sandbox path."""
        return f"{self.dir}/output.log"

    def read_exit_code(self) -> int | None:
        """The recorded exit code (cached once read), or None while none is recorded
        (also while ``exit_code`` is anything but a regular file)."""
        if self.exit_code is None:
            try:
                text = self.files.read_own(f"{self.dir}/exit_code", limit=_CODE_LIMIT)
            except (OSError, safefs.PathRefused):
                return None
            lines = text.decode("ascii", "replace").strip().splitlines()
            if lines:
                with contextlib.suppress(ValueError):
                    self.exit_code = int(lines[0])
        return self.exit_code

    @property
    def ended_shell(self) -> bool:
        """Whether the command ended its session shell (its code came from the EXIT trap)."""
        return self.files.exists_own(f"{self.dir}/shell_ended")

    def journal(self) -> bytes:
        """The whole journal; 404 if it is gone, 500 if it is not a regular file."""
        try:
            return self.files.read_own(self.log_path)
        except FileNotFoundError:
            raise DaemonError(404, "log file not found") from None
        except (OSError, safefs.PathRefused) as error:
            raise DaemonError(500, f"failed to read log file: {error}") from None

    def open_journal(self) -> int:
        """A read descriptor of the journal (errors as :meth:`journal`)."""
        try:
            return self.files.open_own(self.log_path)
        except FileNotFoundError:
            raise DaemonError(404, "log file not found") from None
        except (OSError, safefs.PathRefused) as error:
            raise DaemonError(500, f"failed to read log file: {error}") from None

    def to_json(self) -> dict[str, object]:
        """The daemon's Command model; ``exitCode`` is omitted while running."""
        body: dict[str, object] = {"id": self.id, "command": self.command}
        code = self.read_exit_code()
        if code is not None:
            body["exitCode"] = code
        return body


@attrs.define(eq=False)
class Session:
    """One session: its shell (box session ``shell``) and its commands (kept in creation
    order, listed in none)."""

    id: str
    shell: str
    dir: str
    box: Box
    commands: dict[str, Command] = attrs.field(factory=dict)
    #: Set once the session is deleted or its daemon shut down; followers stop.
    deleted: threading.Event = attrs.field(factory=threading.Event)
    #: Subscriptions waiting on the shell (sync execs); closed when the session ends.
    followers: set[Subscription] = attrs.field(factory=set)

    def shell_alive(self) -> bool:
        """Whether the session shell still runs."""
        return self.box.running(self.shell)

    def to_json(self) -> dict[str, object]:
        """The daemon's Session model (``commands`` is a list, never null), its commands
        in no fixed order: the daemon keeps them in a hash map, so a client may not
        take the last listed for the newest."""
        commands = [c.to_json() for c in self.commands.values()]
        random.shuffle(commands)
        return {"sessionId": self.id, "commands": commands}


class OneShot:
    """A running one-shot execute: collect its merged output and exit, or kill it."""

    def __init__(self, daemon: Daemon, subscription: Subscription) -> None:
        self._daemon = daemon
        self._subscription = subscription

    def collect(self, timeout: float | None) -> tuple[int | None, str]:
        """Wait for the end: (exit code or None if it was lost, merged output).

        Past ``timeout`` seconds the process group is killed and 408 raised.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        parts: list[bytes] = []
        end: events.Exited | events.Lost | None = None
        try:
            while end is None:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError
                batch = self._subscription.read(timeout=remaining)
                if not batch:
                    break
                for event in batch:
                    if isinstance(event, events.Output):
                        parts.append(event.data)
                    else:
                        end = event
        except TimeoutError:
            raise DaemonError(408, "command execution timeout") from None
        finally:
            self.close()
        code = end.code if isinstance(end, events.Exited) else None
        return code, b"".join(parts).decode("utf-8", "replace")

    def close(self) -> None:
        """Stop following; a process still running is killed with its group. Idempotent."""
        self._subscription.close()
        self._daemon.forget(self)


class Daemon:
    """The toolbox daemon of one sandbox run, inside ``box``. Blocking; thread-safe.

    ``run`` names this run's config dir; ``env`` is the base environment of
    every command (built from scratch, see :meth:`Box.environment`); ``perl``
    is the perl the line readers run with (None: the shell's slow ``read``).
    """

    def __init__(
        self,
        box: Box,
        *,
        run: str,
        env: dict[str, str],
        exit_trap: bool = False,
        perl: str | None = PERL,
    ) -> None:
        self.box = box
        self.files = SandboxFiles(box)
        self.home = box.settings.home
        self.config_dir = f"{CONFIG_ROOT}/{run}"
        self.env = env
        #: Emulate the newer daemon whose EXIT trap records an ``exit N``
        #: (docs/protocols/daytona.md#exit-in-a-sourced-script).
        self.exit_trap = exit_trap
        #: The line readers' program: ``perl`` at that path, else the shell's ``read``.
        self.readers = tuple(
            _SHELL_READER.format(mark=mark)
            if perl is None
            else f"{shlex.quote(perl)} -e {shlex.quote(_PERL_READER)} {mark}"
            for mark in (1, 2)
        )
        self._sessions: dict[str, Session] = {}
        self._execs: set[OneShot] = set()
        self._lock = threading.Lock()
        self._closed = False

    # -- paths ---------------------------------------------------------------------

    def resolve(self, path: str) -> str:
        """A sandbox path: absolute as given, relative to the sandbox home."""
        return self.files.absolute(path)

    # -- sessions ----------------------------------------------------------------------

    def create_session(self, session_id: str) -> Session:
        """Start a session shell; 409 if the id exists, 400 for the reserved id."""
        if session_id == RESERVED_SESSION:
            raise DaemonError(400, f"session ID {RESERVED_SESSION!r} is reserved")
        key = uuid.uuid4().hex
        session = Session(
            session_id, f"session-{key}", f"{self.config_dir}/sessions/{key}", self.box
        )
        with self._lock:
            if self._closed:
                raise DaemonError(400, _NOT_STARTED)
            if session_id in self._sessions:
                raise DaemonError(409, "session already exists")
            self._sessions[session_id] = session
        try:
            self.files.make_dirs(session.dir)
            self.box.spawn(
                session.shell,
                [SHELL],
                env=self.env,
                cwd=self.box.agent_path(self.home),
                stdin=True,
                follow=False,
            )
        except (EngineError, OSError, safefs.PathRefused) as error:
            with self._lock:
                self._sessions.pop(session_id, None)
            raise DaemonError(500, f"failed to start session shell: {error}") from error
        return session

    def session(self, session_id: str) -> Session:
        """The session, or 404 ``not found: session not found``."""
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise DaemonError(404, "session not found")
        return session

    def sessions(self) -> list[Session]:
        """Every session (the reserved one excluded), in creation order."""
        with self._lock:
            return list(self._sessions.values())

    def command(self, session_id: str, command_id: str) -> tuple[Session, Command]:
        """A session's command, or 404."""
        session = self.session(session_id)
        command = session.commands.get(command_id)
        if command is None:
            raise DaemonError(404, "command not found")
        return session, command

    def execute(
        self, session_id: str, script: str, *, run_async: bool, suppress_input_echo: bool
    ) -> Command:
        """Hand ``script`` to the session shell; the command's record.

        A sync command (not ``run_async``) is waited for: 400 "session shell
        ended without a command result" if the shell ends (or the session is
        deleted) before a code is recorded, or if the code came from the EXIT
        trap. Unknown session → the daemon's wrapped 500. A session whose shell
        has ended → 410 with :attr:`exit_trap` (newer daemon), else the v0.190
        daemon's 400 for a failed write to the shell.
        """
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise DaemonError(500, "failed to execute command: not found: session not found")
        command_id = str(uuid.uuid4())
        command = Command(
            command_id,
            script,
            f"{session.dir}/{command_id}",
            run_async,
            suppress_input_echo,
            self.files,
        )
        try:
            self.files.make_dirs(command.dir)
            self.files.write(command.log_path, b"")
            self.files.write(f"{command.dir}/cmd.sh", script.encode())
            self.files.make_fifos(command.dir, _FIFOS)
        except (OSError, safefs.PathRefused) as error:
            raise DaemonError(500, f"failed to create command directory: {error}") from None
        follower = None if run_async else self._follow(session)
        session.commands[command.id] = command
        wrapper = _WRAPPER.format(
            dir=shlex.quote(self.box.agent_path(command.dir)),
            out_reader=self.readers[0],
            err_reader=self.readers[1],
            holder=_HOLD_STDIN if run_async else _NO_STDIN,
            stdin='"$__dtn_si"' if run_async else "/dev/null",
            trap=shlex.quote(_TRAP_RECORD if self.exit_trap else _TRAP_CLEANUP),
        )
        try:
            status = self.box.write_stdin(
                session.shell, wrapper.encode(), timeout=_SHELL_WRITE_WAIT
            )
        except (EngineError, TimeoutError):
            status = "unknown"
        if status != "ok":
            session.commands.pop(command.id, None)
            if follower is not None:
                self._unfollow(session, follower)
            if self.exit_trap:
                raise DaemonError(410, "session shell has exited")
            raise DaemonError(400, "failed to write command: write |1: broken pipe")
        if follower is not None:
            self._await(session, command, follower)
            if command.read_exit_code() is None or command.ended_shell:
                raise DaemonError(400, "session shell ended without a command result")
        return command

    def _follow(self, session: Session) -> Subscription | None:
        """A subscription to the shell's own output from now (None if it is unknown)."""
        try:
            follower = self.box.attach(session.shell, from_end=True)
        except (EngineError, OSError):
            return None
        if follower is not None:
            with self._lock:
                session.followers.add(follower)
        return follower

    def _unfollow(self, session: Session, follower: Subscription) -> None:
        follower.close()
        with self._lock:
            session.followers.discard(follower)

    def _await(self, session: Session, command: Command, follower: Subscription) -> None:
        """Block until ``command`` has a code, its shell ends or the session goes."""
        try:
            while command.read_exit_code() is None:
                try:
                    batch = follower.read(timeout=_RECHECK)
                except TimeoutError:
                    continue
                if not batch or any(not isinstance(e, events.Output) for e in batch):
                    return
        finally:
            self._unfollow(session, follower)

    def send_input(self, session_id: str, command_id: str, data: str) -> None:
        """Write ``data`` (newline-terminated) to a running command's stdin FIFO.

        410 once the command has an exit code (or, with :attr:`exit_trap`, once
        the session shell is gone); 500 when the FIFO cannot be opened (no
        reader within a few seconds, or not a FIFO) or stays full.
        """
        session = self.session(session_id)
        if self.exit_trap and not session.shell_alive():
            raise DaemonError(410, "session process has exited")
        _, command = self.command(session_id, command_id)
        code = command.read_exit_code()
        if code is not None:
            raise DaemonError(410, f"command has already completed with exit code {code}")
        if not data.endswith("\n"):
            data += "\n"
        fd = self._open_input(command)
        try:
            # The echo is journaled before the command can read (and answer) the
            # input, so the log shows input and response in that order.
            if not command.suppress_input_echo:
                command.files.append_own(command.log_path, STDOUT_MARK + data.encode())
            _write_all(fd, data.encode(), _INPUT_WRITE_WAIT)
        except (OSError, safefs.PathRefused) as error:
            raise DaemonError(500, f"failed to write to input pipe: {error}") from None
        finally:
            os.close(fd)

    @staticmethod
    def _open_input(command: Command) -> int:
        # The daemon's blocking open waits for the command to open its end; here
        # the wait is bounded and also covers the wrapper not having made the FIFO yet.
        deadline = time.monotonic() + _INPUT_OPEN_WAIT
        while True:
            try:
                return command.files.open_fifo(f"{command.dir}/stdin.pipe")
            except safefs.PathRefused as refused:
                raise DaemonError(500, f"failed to open input pipe: {refused}") from None
            except OSError as error:
                retry = error.errno in (errno.ENOENT, errno.ENXIO)
                if (
                    not retry
                    or command.read_exit_code() is not None
                    or (time.monotonic() >= deadline)
                ):
                    raise DaemonError(500, f"failed to open input pipe: {error.strerror}") from None
            time.sleep(0.01)

    def delete_session(self, session_id: str) -> None:
        """Kill the session shell's process group (TERM, grace, KILL), and every
        descendant of the shell that left the group; remove its files."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is None:
            raise DaemonError(404, "session not found")
        self._release(session)
        with contextlib.suppress(EngineError, OSError):
            follower = self.box.attach(session.shell, from_end=True)
            if follower is not None:
                try:
                    for signum, wait in (
                        (signal.SIGTERM, _DELETE_GRACE),
                        (signal.SIGKILL, _KILL_WAIT),
                    ):
                        if (
                            not self.box.signal(session.shell, signum, tree=True)
                            or follower.wait_end(wait) is not None
                        ):
                            break
                finally:
                    follower.close()
        with contextlib.suppress(OSError, safefs.PathRefused):
            self.files.remove(session.dir)

    def _release(self, session: Session) -> None:
        """Mark ``session`` gone and wake everything waiting on it."""
        session.deleted.set()
        with self._lock:
            followers = list(session.followers)
            session.followers.clear()
        for follower in followers:
            follower.close()

    # -- one-shot execute ------------------------------------------------------------

    def start_execute(self, script: str, *, cwd: str | None, envs: dict[str, str]) -> OneShot:
        """Start ``script`` in a fresh shell; the running exec.

        400 for an invalid env name; OSError for a start that fails (ENOENT: a cwd
        that is not a directory in the sandbox; EINVAL: a NUL in the script or an env
        value); 500 if the box cannot run it.
        """
        for name in envs:
            if not _ENV_NAME.match(name):
                raise DaemonError(400, f"invalid environment variable name: {name}")
        workdir = self.resolve(cwd) if cwd else self.home
        with self._lock:
            if self._closed:
                raise DaemonError(400, _NOT_STARTED)
        try:
            _, _, subscription = self.box.run(
                [SHELL, "-c", script], env={**self.env, **envs}, cwd=self.box.agent_path(workdir)
            )
        except Refused as refusal:
            if refusal.code == "bad_cwd":
                raise OSError(errno.ENOENT, f"chdir {workdir}: no such file or directory") from None
            if refusal.code in ("bad_argv", "bad_env"):
                # Go's exec refuses a NUL before it starts anything: a failed start.
                raise OSError(errno.EINVAL, f"fork/exec {SHELL}: invalid argument") from None
            raise DaemonError(500, f"failed to execute command: {refusal}") from None
        except (EngineError, TimeoutError) as error:
            raise DaemonError(500, f"failed to execute command: {error}") from None
        shot = OneShot(self, subscription)
        with self._lock:
            self._execs.add(shot)
        return shot

    def forget(self, shot: OneShot) -> None:
        """Drop a finished one-shot exec from the live set."""
        with self._lock:
            self._execs.discard(shot)

    # -- the whole daemon --------------------------------------------------------------

    def shutdown(self) -> None:
        """End every process of the sandbox (it stopped); later calls answer 400.

        The box's agent is stopped too (a later start runs a new one); the
        sandbox's files stay, but this run's config dir is removed.
        """
        with self._lock:
            self._closed = True
            sessions = list(self._sessions.values())
            self._sessions.clear()
            execs = list(self._execs)
        for session in sessions:
            self._release(session)
        for shot in execs:
            shot.close()
        self.box.stop()
        self.box.close()
        with contextlib.suppress(OSError, safefs.PathRefused):
            self.files.remove(self.config_dir)


def _write_all(fd: int, data: bytes, wait: float) -> None:
    """Write all of ``data`` to the non-blocking ``fd``, waiting at most ``wait`` s in
    total for room; OSError (ETIMEDOUT) past it."""
    deadline = time.monotonic() + wait
    view = memoryview(data)
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while view:
        try:
            view = view[os.write(fd, view) :]
            continue
        except BlockingIOError:
            pass
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise OSError(errno.ETIMEDOUT, "the input pipe stays full")
        poller.poll(remaining * 1000)
