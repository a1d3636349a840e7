"""envd's process table for one sandbox: real processes in the sandbox's box.

Each Start is one journaled session of the box (:meth:`Box.spawn
<managoat_sandbox._engine.box.Box.spawn>`) running ``/bin/sh -c 'exec "$@"'
-- cmd args...`` as envd does, so ``cmd`` is looked up on PATH and the
reported pid — the in-sandbox pid — is that of ``cmd`` itself. Start streams
the spawn's subscription from byte zero; Connect follows the session from the
moment it attaches (envd replays no output). A process's end is the one its
subscription delivers, or the one the engine recorded for it; when the
engine lost the process (its agent died) the end says so, never a guessed
code.

Ended processes leave the selector table for unary calls (SendInput,
CloseStdin, SendSignal answer ``not_found``, as envd deletes them once they
are waited for) and disappear from ``List``; ``Connect`` still finds them and
replays the kept end event (docs/protocols/e2b.md#process-semantics).

Every method that talks to the box (:meth:`ProcessTable.start`,
:meth:`~ProcessTable.follow`, :meth:`~ProcessTable.write`,
:meth:`~ProcessTable.close_stdin`, :meth:`~ProcessTable.signal`,
:meth:`~ProcessTable.resize`, :meth:`~ProcessTable.kill_on_deadline`,
:meth:`~ProcessTable.suspend_all`, :meth:`~ProcessTable.resume_all`)
blocks: run it off the event loop. :meth:`Process.end` reads one small record
and may run on the loop.
"""

from __future__ import annotations

import base64
import binascii
import signal
import threading
from dataclasses import dataclass, field
from typing import Any

from ..._engine import events, records
from ..._engine.box import Box, Refused
from ..._engine.errors import EngineError
from ..._engine.subscription import Subscription
from .layout import SandboxBox

__all__ = ["LOST", "Process", "ProcessTable", "RpcError", "decode_bytes", "end_event"]

SIGNALS: dict[object, int] = {
    "SIGNAL_SIGKILL": signal.SIGKILL,
    "SIGNAL_SIGTERM": signal.SIGTERM,
    9: signal.SIGKILL,
    15: signal.SIGTERM,
}
#: envd's argv around ``cmd args...``.
SHELL_PREFIX = ("/bin/sh", "-c", 'exec "$@"', "--")
DEFAULT_ROWS = 24
DEFAULT_COLS = 80
STDIN_TIMEOUT = 10.0
STDIN_CLOSED = "error writing to stdin: stdin not enabled or closed"
#: The end event of a process whose outcome the engine could not record.
LOST: dict[str, Any] = {"exitCode": -1, "status": "unknown", "error": "process state lost"}


class RpcError(Exception):
    """A Connect error: ``code`` is a Connect code name (``not_found``, ``internal``…)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def end_event(end: events.End) -> dict[str, Any]:
    """envd's ``end`` event for an engine end, zero values omitted."""
    if isinstance(end, events.Lost):
        return dict(LOST)
    if end.signal is not None:
        name = f"signal: {(signal.strsignal(end.signal) or str(end.signal)).lower()}"
        return {"exitCode": -1, "status": name, "error": name}
    event: dict[str, Any] = {"exited": True, "status": f"exit status {end.code}"}
    if end.code:
        event["exitCode"] = end.code
    return event


@dataclass(eq=False)
class Process:
    """One started process and what envd remembers about it.

    ``sid`` names its session in ``box``; ``session`` is its record there
    (None if it could not be read back).
    """

    pid: int
    sid: str
    tag: str | None
    config: dict[str, Any]
    pty: bool
    stdin: bool
    box: Box = field(repr=False)
    session: records.SessionRecord | None = field(default=None, repr=False)
    stdin_closed: bool = False
    #: Set for processes that lived through a pause: tag selectors no longer find them.
    tag_lost: bool = False
    kept_end: dict[str, Any] | None = field(default=None, repr=False)

    def end(self) -> dict[str, Any] | None:
        """The end event once the process has ended (kept from then on), else None."""
        if self.kept_end is None:
            recorded = self._recorded_end()
            if recorded is not None:
                self.kept_end = end_event(recorded)
        return self.kept_end

    def keep_end(self, end: events.End) -> dict[str, Any]:
        """Remember the end a subscription delivered (the first one kept wins); the
        end event."""
        if self.kept_end is None:
            self.kept_end = end_event(end)
        return self.kept_end

    def _recorded_end(self) -> events.End | None:
        if self.session is None:
            return events.Lost("no session record")
        try:
            record = self.session.end()
        except (OSError, EngineError) as error:
            return events.Lost(str(error))
        if record is not None:
            return events.end_from_record(record)
        if not self.box.alive():
            return events.Lost("agent_gone")
        return None

    def listed(self) -> dict[str, Any]:
        """The ``ProcessInfo`` shape of ``List`` (zero values omitted)."""
        item: dict[str, Any] = {"config": _omit_empty(self.config), "pid": self.pid}
        if self.tag:
            item["tag"] = self.tag
        return item


def _omit_empty(config: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if v not in (None, "", [], {})}


def _strings(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise RpcError("invalid_argument", f"{what} must map strings to strings")
    return dict(value)


def environ(envs: dict[str, str]) -> dict[str, str]:
    """``envs`` as the started process sees them. envd writes each as ``key=value``,
    so a name holding ``=`` sets the variable named by what precedes its first
    ``=`` (``{"A=B": "1"}`` is ``A`` = ``B=1``), and an empty name makes an entry no
    lookup finds (left out here). A NUL is left for the agent to refuse
    (:data:`_START_REFUSALS`)."""
    out: dict[str, str] = {}
    for key, value in envs.items():
        name, eq, rest = key.partition("=")
        if name:
            out[name] = rest + eq + value
    return out


#: The agent's refusals of a start that Go's ``exec`` refuses too, before the fork: a
#: NUL in the env or an argument. envd answers either as it answers any failed start
#: it cannot classify, ``invalid_argument``, with Go's message.
_START_REFUSALS = {
    "bad_env": "error starting process: environment variable contains NUL",
    "bad_argv": "error starting process: invalid argument",
}


def pty_size(pty: Any) -> tuple[int, int]:
    """(rows, cols) of a ``PTY`` message (``{"size": {"cols", "rows"}}``), defaults filled."""
    size = pty.get("size") if isinstance(pty, dict) else None
    if not isinstance(size, dict):
        return DEFAULT_ROWS, DEFAULT_COLS
    dims = []
    for key, default in (("rows", DEFAULT_ROWS), ("cols", DEFAULT_COLS)):
        value = size.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 65536:
            raise RpcError("invalid_argument", f"pty.size.{key} must be a uint32 below 65536")
        dims.append(value or default)
    return dims[0], dims[1]


def decode_bytes(value: Any, what: str) -> bytes:
    """A proto-JSON ``bytes`` field (standard base64, padding optional)."""
    if not isinstance(value, str):
        raise RpcError("invalid_argument", f"{what} must be base64 text")
    try:
        return base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise RpcError("invalid_argument", f"{what} is not valid base64") from None


def _not_found(process: Process) -> RpcError:
    return RpcError("not_found", f"process with pid {process.pid} not found")


class ProcessTable:
    """The processes of one sandbox; thread-safe."""

    def __init__(self, sandbox: SandboxBox) -> None:
        self.sandbox = sandbox
        self._lock = threading.Lock()
        self._processes: dict[int, Process] = {}
        self._sessions = 0

    def start(
        self, request: Any, *, user: str, sandbox_env: dict[str, str]
    ) -> tuple[Process, Subscription]:
        """Validate a StartRequest and run its process: the process and its output
        from byte zero (the caller closes the subscription)."""
        if not isinstance(request, dict) or not isinstance(request.get("process"), dict):
            raise RpcError("invalid_argument", "process config is required")
        config = request["process"]
        cmd = config.get("cmd")
        args = config.get("args") or []
        if not isinstance(cmd, str) or not cmd:
            raise RpcError("invalid_argument", "process.cmd is required")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise RpcError("invalid_argument", "process.args must be a list of strings")
        envs = _strings(config.get("envs"), "process.envs")
        cwd_arg = config.get("cwd")
        if cwd_arg is not None and not isinstance(cwd_arg, str):
            raise RpcError("invalid_argument", "process.cwd must be a string")
        tag = request.get("tag")
        if tag is not None and not isinstance(tag, str):
            raise RpcError("invalid_argument", "tag must be a string")
        pty = request.get("pty") is not None
        rows, cols = pty_size(request.get("pty"))
        stdin = pty or request.get("stdin", True) is not False
        sandbox = self.sandbox
        cwd = sandbox.command_path(cwd_arg or sandbox.home_path(user), user)
        env = sandbox.environment(user, {**sandbox_env, **environ(envs)}, tty=pty)
        with self._lock:
            self._sessions += 1
            sid = f"p{self._sessions}"
        box = sandbox.box
        try:
            pid, subscription = box.spawn(
                sid,
                [*SHELL_PREFIX, cmd, *args],
                env=env,
                cwd=cwd,
                stdin=stdin,
                tty=pty,
                rows=rows,
                cols=cols,
            )
        except Refused as refusal:
            if refusal.code == "bad_cwd":
                raise RpcError("invalid_argument", f"cwd '{cwd_arg}' does not exist") from None
            if refusal.code in _START_REFUSALS:
                raise RpcError("invalid_argument", _START_REFUSALS[refusal.code]) from None
            raise RpcError("internal", f"error starting process: {refusal}") from None
        except (OSError, EngineError) as error:
            raise RpcError("internal", f"error starting process: {error}") from None
        if pid is None or subscription is None:
            if subscription is not None:
                subscription.close()
            raise RpcError("internal", "error starting process: /bin/sh could not be executed")
        stored = {"cmd": cmd, "args": list(args), "envs": envs}
        if cwd_arg:
            stored["cwd"] = cwd_arg
        process = Process(pid, sid, tag, stored, pty, stdin, box, box.session(sid))
        with self._lock:
            self._processes[pid] = process
        return process, subscription

    def follow(self, process: Process) -> Subscription | None:
        """The process's output from now on, then its end (Connect); None when only its
        kept end is left to stream.

        That is also the answer when the process ended while this attached: the
        engine follows a session it no longer runs from its journal's byte zero,
        and envd never replays output.
        """
        try:
            subscription = self.sandbox.box.attach(process.sid, from_end=True)
        except (OSError, EngineError) as error:
            raise RpcError("unavailable", f"cannot follow process {process.pid}: {error}") from None
        if subscription is not None and process.end() is not None:
            subscription.close()
            return None
        return subscription

    def select(self, selector: Any, *, ended: bool = False, tags_work: bool = True) -> Process:
        """The process a ProcessSelector names; ``ended`` lets ended processes match.

        ``tags_work=False`` makes every tag selector miss (the injected quirk).
        """
        if not isinstance(selector, dict):
            raise RpcError("invalid_argument", "process selector is required")
        with self._lock:
            candidates = list(self._processes.values())
        candidates = [p for p in candidates if ended or p.end() is None]
        if "pid" in selector:
            pid = selector["pid"]
            for process in candidates:
                if process.pid == pid:
                    return process
            raise RpcError("not_found", f"process with pid {pid} not found")
        if "tag" in selector:
            tag = selector["tag"]
            if tags_work:
                for process in candidates:
                    if process.tag == tag and not process.tag_lost:
                        return process
            raise RpcError("not_found", f"process with tag {tag} not found")
        raise RpcError("unimplemented", "invalid input type: selector has neither pid nor tag")

    def live(self) -> list[Process]:
        """Processes that have not ended, oldest first."""
        with self._lock:
            processes = list(self._processes.values())
        return [p for p in processes if p.end() is None]

    def write(self, process: Process, data: bytes) -> None:
        """SendInput: hand ``data`` to the process's stdin or terminal."""
        if not process.stdin or process.stdin_closed:
            raise RpcError("internal", STDIN_CLOSED)
        try:
            status = self.sandbox.box.write_stdin(process.sid, data, timeout=STDIN_TIMEOUT)
        except (OSError, EngineError) as error:
            raise RpcError("internal", f"error writing to stdin: {error}") from None
        if status in ("exited", "unknown"):
            raise _not_found(process)
        if status != "ok":
            raise RpcError("internal", STDIN_CLOSED)

    def close_stdin(self, process: Process) -> None:
        """CloseStdin: end of input; idempotent; refused for a PTY."""
        if process.pty:
            raise RpcError(
                "unknown", f"error closing stdin: cannot close stdin for PTY process {process.pid}"
            )
        if not process.stdin or process.stdin_closed:
            return
        try:
            status = self.sandbox.box.close_stdin(process.sid)
        except (OSError, EngineError) as error:
            raise RpcError("unknown", f"error closing stdin: {error}") from None
        if status in ("exited", "unknown"):
            raise _not_found(process)
        process.stdin_closed = True

    def signal(self, process: Process, name: Any) -> None:
        """SendSignal: SIGTERM or SIGKILL to that single process (not its group)."""
        sig = SIGNALS.get(name) if isinstance(name, (str, int)) else None
        if sig is None:
            raise RpcError("unimplemented", f"invalid signal: {name}")
        if process.end() is not None:
            raise _not_found(process)
        try:
            sent = self.sandbox.box.signal(process.sid, sig, group=False)
        except (OSError, EngineError) as error:
            raise RpcError("internal", f"error sending signal: {error}") from None
        if not sent:
            raise _not_found(process)

    def resize(self, process: Process, pty: Any) -> None:
        """Update: resize the process's terminal to the ``PTY`` message's size (no
        ``PTY`` message: nothing to change)."""
        if not process.pty:
            raise RpcError("failed_precondition", f"process {process.pid} has no PTY")
        if pty is None:
            return
        rows, cols = pty_size(pty)
        try:
            resized = self.sandbox.box.resize(process.sid, rows, cols)
        except Refused:
            resized = False
        except (OSError, EngineError) as error:
            raise RpcError("internal", f"error resizing the terminal: {error}") from None
        if not resized and process.end() is not None:
            raise _not_found(process)

    def kill_on_deadline(self, process: Process) -> None:
        """Connect-Timeout-Ms expired: envd cancels the process's context (SIGKILL)."""
        if process.end() is None:
            try:
                self.sandbox.box.signal(process.sid, signal.SIGKILL, group=False)
            except (OSError, EngineError):
                return

    def suspend_all(self) -> None:
        """Stop every process of the sandbox (pause); live ones stop answering tag selectors."""
        for process in self.live():
            process.tag_lost = True
        self.sandbox.box.suspend()

    def resume_all(self) -> None:
        """Continue every process stopped by :meth:`suspend_all`."""
        self.sandbox.box.resume()
