"""The toolbox daemon of one sandbox incarnation: sessions, commands, one-shot execs.

Written from reference §3.2-§3.4. Everything runs as real processes through
the shared engine (:mod:`managoat_sandbox._engine`):

* a **session** is one long-lived shell (an engine session with stdin). Each
  session command is handed to that shell as a wrapper script on its stdin.
  The wrapper makes per-command FIFOs, starts two line readers that append
  every stdout line as ``01 01 01 <line> \\n`` and every stderr line as
  ``02 02 02 <line> \\n`` to the command's ``output.log``, holds the stdin FIFO
  open for an async command (EOF at once for a sync one), **sources** the
  script in the session shell itself, and writes ``exit_code`` only after both
  readers have drained. So a top-level ``exit N`` in the script ends the
  session shell: no exit code is ever recorded (the v0.190 daemon), unless
  :attr:`Daemon.exit_trap` emulates the newer daemon whose EXIT trap records it
  (errata 7). ``(exit N)`` or ``return N`` record ``N`` in both.
* a **one-shot execute** is an engine session running the shell with the
  script on its stdin; stdout and stderr come back merged.

A daemon lives as long as its sandbox runs: :meth:`Daemon.shutdown` (on
stop, archive, delete) kills every session, as the real daemon's restart
does. The filesystem (the sandbox home) is kept.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shlex
import shutil
import threading
import time
import uuid
from pathlib import Path

import attrs

from managoat_sandbox import _engine as engine

from .shapes import DaemonError

__all__ = ["STDERR_MARK", "STDOUT_MARK", "Command", "Daemon", "Session"]

STDOUT_MARK = b"\x01\x01\x01"
STDERR_MARK = b"\x02\x02\x02"
RESERVED_SESSION = "entrypoint"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DELETE_GRACE = 2.0
_INPUT_OPEN_WAIT = 5.0

# The wrapper handed to the session shell for one command (reference §3.4).
# {dir} is the command's directory, {holder} keeps or closes the stdin FIFO,
# {trap} is what the shell does when it exits (always: remove the FIFOs).
_WRAPPER = """{{
__dtn_d={dir}
__dtn_so="$__dtn_d/stdout.pipe"; __dtn_se="$__dtn_d/stderr.pipe"; __dtn_si="$__dtn_d/stdin.pipe"
rm -f "$__dtn_so" "$__dtn_se" "$__dtn_si" && mkfifo "$__dtn_so" "$__dtn_se" "$__dtn_si" || exit 1
trap {trap} EXIT
( while IFS= read -r __dtn_l || [ -n "$__dtn_l" ]; do printf '\\001\\001\\001%s\\n' "$__dtn_l"; \
done < "$__dtn_so" ) >> "$__dtn_d/output.log" & __dtn_r1=$!
( while IFS= read -r __dtn_l || [ -n "$__dtn_l" ]; do printf '\\002\\002\\002%s\\n' "$__dtn_l"; \
done < "$__dtn_se" ) >> "$__dtn_d/output.log" & __dtn_r2=$!
{holder}
__dtn_h=$!
{{ . "$__dtn_d/cmd.sh"; }} < "$__dtn_si" > "$__dtn_so" 2> "$__dtn_se"
__dtn_ec=$?
kill "$__dtn_h" 2>/dev/null; wait "$__dtn_h" 2>/dev/null
wait "$__dtn_r1" "$__dtn_r2"
echo "$__dtn_ec" >> "$__dtn_d/exit_code"
rm -f "$__dtn_so" "$__dtn_se" "$__dtn_si"
}}
"""
_HOLD_STDIN = 'sleep 2147483647 > "$__dtn_si" &'
_CLOSE_STDIN = ': > "$__dtn_si" &'
_TRAP_CLEANUP = 'rm -f "$__dtn_so" "$__dtn_se" "$__dtn_si"'
# Newer daemons (errata 7): the EXIT trap still records the status of a
# script that ended the shell with `exit N`, after the readers drained (the
# shell first lets go of the FIFOs it still holds, or the readers never end).
_TRAP_RECORD = (
    '__dtn_ec=$?; exec >/dev/null 2>&1 </dev/null; kill "$__dtn_h"; '
    'wait "$__dtn_r1" "$__dtn_r2"; '
    '[ -s "$__dtn_d/exit_code" ] || { : > "$__dtn_d/shell_ended"; '
    'echo "$__dtn_ec" >> "$__dtn_d/exit_code"; }; ' + _TRAP_CLEANUP
)


def _shell() -> str:
    return shutil.which("bash") or "/bin/sh"


@attrs.define
class Command:
    """One session command; ``exit_code`` is read lazily from its ``exit_code`` file."""

    id: str
    command: str
    dir: Path
    run_async: bool
    suppress_input_echo: bool
    exit_code: int | None = None

    @property
    def log_path(self) -> Path:
        """The command's journal (``output.log``)."""
        return self.dir / "output.log"

    def read_exit_code(self) -> int | None:
        """The recorded exit code (cached once read), or None while none is recorded."""
        if self.exit_code is None:
            try:
                text = (self.dir / "exit_code").read_text().strip()
            except FileNotFoundError:
                return None
            if text:
                with contextlib.suppress(ValueError):
                    self.exit_code = int(text.splitlines()[0])
        return self.exit_code

    @property
    def ended_shell(self) -> bool:
        """Whether the command ended its session shell (its code came from the EXIT trap)."""
        return (self.dir / "shell_ended").exists()

    def to_json(self) -> dict[str, object]:
        """The daemon's Command model; ``exitCode`` is omitted while running."""
        body: dict[str, object] = {"id": self.id, "command": self.command}
        code = self.read_exit_code()
        if code is not None:
            body["exitCode"] = code
        return body


@attrs.define
class Session:
    """One session: its shell (an engine session) and its commands in creation order."""

    id: str
    dir: Path
    commands: dict[str, Command] = attrs.field(factory=dict)
    #: Set once the session is deleted or its daemon shut down; followers stop.
    deleted: threading.Event = attrs.field(factory=threading.Event)

    @property
    def shell_dir(self) -> Path:
        """The engine session directory of the session's shell."""
        return self.dir / "shell"

    def shell_alive(self) -> bool:
        """Whether the session shell still runs."""
        try:
            return isinstance(engine.status(self.shell_dir), engine.Running)
        except FileNotFoundError:
            return False

    def to_json(self) -> dict[str, object]:
        """The daemon's Session model (``commands`` is a list, never null)."""
        return {"sessionId": self.id, "commands": [c.to_json() for c in self.commands.values()]}


class Daemon:
    """The toolbox daemon of one sandbox run. Blocking methods; thread-safe."""

    def __init__(self, *, home: Path, config_dir: Path, env: dict[str, str],
                 exit_trap: bool = False) -> None:
        self.home = home
        self.config_dir = config_dir
        self.env = env
        #: Emulate the newer daemon whose EXIT trap records an ``exit N`` (errata 7).
        self.exit_trap = exit_trap
        self._sessions: dict[str, Session] = {}
        self._execs: set[Path] = set()
        self._lock = threading.Lock()
        self._closed = False
        config_dir.mkdir(parents=True, exist_ok=True)

    # -- paths ---------------------------------------------------------------------

    def resolve(self, path: str) -> Path:
        """A sandbox path: absolute as given, relative to the sandbox home."""
        return Path(path) if os.path.isabs(path) else self.home / path

    # -- sessions ----------------------------------------------------------------------

    def create_session(self, session_id: str) -> Session:
        """Start a session shell; 409 if the id exists, 400 for the reserved id."""
        if session_id == RESERVED_SESSION:
            raise DaemonError(400, f"session ID {RESERVED_SESSION!r} is reserved")
        directory = self.config_dir / "sessions" / uuid.uuid4().hex
        session = Session(session_id, directory)
        with self._lock:
            if self._closed:
                raise DaemonError(400, "no IP address found. Is the Sandbox started?")
            if session_id in self._sessions:
                raise DaemonError(409, "session already exists")
            self._sessions[session_id] = session
        try:
            engine.start(session.shell_dir, [_shell()], env=self.env, cwd=self.home,
                         stdin=True, inherit_env=False)
        except (engine.EngineError, OSError) as error:
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

    def execute(self, session_id: str, script: str, *, run_async: bool,
                suppress_input_echo: bool) -> Command:
        """Hand ``script`` to the session shell; the command's record.

        Unknown session → the daemon's wrapped 500. A session whose shell has
        ended → 410 with :attr:`exit_trap` (newer daemon), else the v0.190
        daemon's 400 for a failed write to the shell.
        """
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise DaemonError(500, "failed to execute command: not found: session not found")
        command_id = str(uuid.uuid4())
        command = Command(command_id, script, session.dir / "commands" / command_id,
                          run_async, suppress_input_echo)
        command.dir.mkdir(parents=True)
        command.log_path.touch()
        (command.dir / "cmd.sh").write_text(script)
        session.commands[command.id] = command
        wrapper = _WRAPPER.format(
            dir=shlex.quote(str(command.dir)),
            holder=_HOLD_STDIN if run_async else _CLOSE_STDIN,
            trap=shlex.quote(_TRAP_RECORD if self.exit_trap else _TRAP_CLEANUP),
        )
        try:
            engine.write_stdin(session.shell_dir, wrapper.encode(), timeout=10)
        except (engine.ProcessExited, engine.StdinNotOpen):
            session.commands.pop(command.id, None)
            if self.exit_trap:
                raise DaemonError(410, "session shell has exited") from None
            raise DaemonError(400, "failed to write command: write |1: broken pipe") from None
        return command

    def send_input(self, session_id: str, command_id: str, data: str) -> None:
        """Write ``data`` (newline-terminated) to a running command's stdin FIFO.

        410 once the command has an exit code (or, with :attr:`exit_trap`, once
        the session shell is gone); 500 when the FIFO cannot be opened.
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
                with open(command.log_path, "ab") as log:
                    log.write(STDOUT_MARK + data.encode())
            os.set_blocking(fd, True)
            view = memoryview(data.encode())
            while view:
                view = view[os.write(fd, view):]
        except OSError as error:
            raise DaemonError(500, f"failed to write to input pipe: {error.strerror}") from None
        finally:
            os.close(fd)

    @staticmethod
    def _open_input(command: Command) -> int:
        # The daemon's blocking open waits for the command to open its end; here
        # the wait is bounded and also covers the wrapper not having made the FIFO yet.
        deadline = time.monotonic() + _INPUT_OPEN_WAIT
        while True:
            try:
                return os.open(command.dir / "stdin.pipe",
                               os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError as error:
                retry = error.errno in (errno.ENOENT, errno.ENXIO)
                if not retry or command.read_exit_code() is not None or (
                        time.monotonic() >= deadline):
                    raise DaemonError(
                        500, f"failed to open input pipe: {error.strerror}") from None
            time.sleep(0.01)

    def delete_session(self, session_id: str) -> None:
        """Kill the session shell's process group (TERM, grace, KILL); remove its files."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is None:
            raise DaemonError(404, "session not found")
        self._kill(session, grace=_DELETE_GRACE)

    @staticmethod
    def _kill(session: Session, *, grace: float) -> None:
        session.deleted.set()
        with contextlib.suppress(FileNotFoundError, engine.EngineError):
            if grace <= 0 or engine.terminate(session.shell_dir, timeout=grace) is None:
                engine.terminate(session.shell_dir, timeout=5, force=True)
        shutil.rmtree(session.dir, ignore_errors=True)

    # -- one-shot execute ------------------------------------------------------------

    def start_execute(self, script: str, *, cwd: str | None, envs: dict[str, str]) -> Path:
        """Start ``script`` on a fresh shell's stdin; the engine directory to watch.

        400 for an invalid env name; OSError (ENOENT/ENOTDIR) for a bad cwd.
        """
        for name in envs:
            if not _ENV_NAME.match(name):
                raise DaemonError(400, f"invalid environment variable name: {name}")
        workdir = self.resolve(cwd) if cwd else self.home
        if not workdir.is_dir():
            raise OSError(errno.ENOENT, f"chdir {workdir}: no such file or directory")
        directory = self.config_dir / "exec" / uuid.uuid4().hex
        with self._lock:
            if self._closed:
                raise DaemonError(400, "no IP address found. Is the Sandbox started?")
            self._execs.add(directory)
        engine.start(directory, [_shell()], env={**self.env, **envs}, cwd=workdir,
                     stdin=True, inherit_env=False)
        with engine.StdinWriter(directory, timeout=10) as writer:
            writer.write(script.encode())
            writer.close_stdin()
        return directory

    def finish_execute(self, directory: Path, *, kill: bool) -> tuple[int | None, str]:
        """Collect a one-shot exec (killing its group first if ``kill``) and forget it."""
        if kill:
            with contextlib.suppress(FileNotFoundError, engine.EngineError):
                engine.terminate(directory, timeout=5, force=True)
        outputs, end = engine.read_all(directory)
        text = b"".join(o.data for o in outputs).decode("utf-8", "replace")
        with self._lock:
            self._execs.discard(directory)
        shutil.rmtree(directory, ignore_errors=True)
        return (end.code if isinstance(end, engine.Exited) else None), text

    # -- the whole daemon --------------------------------------------------------------

    def shutdown(self) -> None:
        """Kill every session and exec (the sandbox stopped); later calls answer 400."""
        with self._lock:
            self._closed = True
            sessions = list(self._sessions.values())
            self._sessions.clear()
            execs = list(self._execs)
            self._execs.clear()
        for session in sessions:
            self._kill(session, grace=0)
        for directory in execs:
            with contextlib.suppress(FileNotFoundError, engine.EngineError):
                engine.terminate(directory, timeout=5, force=True)
        shutil.rmtree(self.config_dir, ignore_errors=True)
