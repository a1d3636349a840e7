"""envd's process table for one sandbox: real processes run by the shared engine.

Each Start runs ``/bin/sh -c 'exec "$@"' -- cmd args...`` (as envd does, so
``cmd`` is looked up on PATH and the reported pid is that of ``cmd`` itself;
see :mod:`.layout` for the isolated variant) in its own engine session under
the sandbox's ``procs/`` directory. The pid reported to clients is the real
host pid. Ended processes leave the selector
table for unary calls (SendInput, CloseStdin, SendSignal answer ``not_found``,
as envd deletes them once they are waited for) and disappear from ``List``;
``Connect`` still finds them and replays the kept end event (reference §3.4).

Blocking methods (:meth:`ProcessTable.start`, :meth:`ProcessTable.write`,
:meth:`ProcessTable.terminate_all`) are meant to run off the event loop.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import _engine
from .layout import SandboxLayout

__all__ = ["Process", "ProcessTable", "RpcError", "end_event"]

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SIGNALS: dict[object, int] = {
    "SIGNAL_SIGKILL": signal.SIGKILL,
    "SIGNAL_SIGTERM": signal.SIGTERM,
    9: signal.SIGKILL,
    15: signal.SIGTERM,
}


class RpcError(Exception):
    """A Connect error: ``code`` is a Connect code name (``not_found``, ``internal``…)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(eq=False)
class Process:
    """One started process and what envd remembers about it."""

    pid: int
    tag: str | None
    config: dict[str, Any]
    session: Path
    pty: bool
    stdin: bool
    stdin_closed: bool = False
    #: Set for processes that lived through a pause: tag selectors no longer find them.
    tag_lost: bool = False
    kept_end: dict[str, Any] | None = field(default=None, repr=False)

    def end(self) -> dict[str, Any] | None:
        """The end event once the process has ended (kept from then on), else None."""
        if self.kept_end is None:
            try:
                state = _engine.status(self.session)
            except (OSError, _engine.EngineError):
                state = _engine.Lost()
            if not isinstance(state, _engine.Running):
                self.kept_end = end_event(state)
        return self.kept_end

    def listed(self) -> dict[str, Any]:
        """The ``ProcessInfo`` shape of ``List`` (zero values omitted)."""
        item: dict[str, Any] = {"config": _omit_empty(self.config), "pid": self.pid}
        if self.tag:
            item["tag"] = self.tag
        return item


def end_event(state: _engine.Exited | _engine.Lost) -> dict[str, Any]:
    """envd's ``end`` event for an ended engine session, zero values omitted."""
    if isinstance(state, _engine.Lost):
        return {"exitCode": -1, "status": "unknown", "error": "process state lost"}
    if state.signal is not None:
        name = f"signal: {(signal.strsignal(state.signal) or str(state.signal)).lower()}"
        return {"exitCode": -1, "status": name, "error": name}
    event: dict[str, Any] = {"exited": True, "status": f"exit status {state.code}"}
    if state.code:
        event["exitCode"] = state.code
    return event


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


def decode_bytes(value: Any, what: str) -> bytes:
    """A proto-JSON ``bytes`` field (standard base64, padding optional)."""
    if not isinstance(value, str):
        raise RpcError("invalid_argument", f"{what} must be base64 text")
    try:
        return base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise RpcError("invalid_argument", f"{what} is not valid base64") from None


class ProcessTable:
    """The processes of one sandbox; thread-safe."""

    def __init__(self, layout: SandboxLayout) -> None:
        self.layout = layout
        self._lock = threading.Lock()
        self._processes: dict[int, Process] = {}
        self._sessions = 0

    def start(
        self, request: Any, *, user: str, sandbox_env: dict[str, str]
    ) -> Process:
        """Validate a StartRequest and run its process (blocking)."""
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
        stdin = pty or request.get("stdin", True) is not False
        argv, cwd, home = self.layout.command(
            [cmd, *args], cwd_arg or self.layout.home_path(user), user)
        if not cwd.is_dir() or not self.layout.inside(cwd):
            raise RpcError("invalid_argument", f"cwd '{cwd_arg}' does not exist")
        env = {"PATH": DEFAULT_PATH, "HOME": home, "USER": user, "LOGNAME": user,
               **sandbox_env, **envs}
        with self._lock:
            self._sessions += 1
            session = self.layout.procs / str(self._sessions)
        try:
            info = _engine.start(
                session, argv, env=env, cwd=cwd, stdin=stdin, tty=pty, inherit_env=False,
            )
        except (OSError, _engine.EngineError) as error:
            raise RpcError("internal", f"error starting process: {error}") from None
        if info.pid is None:
            raise RpcError("internal", "error starting process: /bin/sh could not be executed")
        stored = {"cmd": cmd, "args": list(args), "envs": envs}
        if cwd_arg:
            stored["cwd"] = cwd_arg
        process = Process(info.pid, tag, stored, session, pty, stdin)
        with self._lock:
            self._processes[process.pid] = process
        return process

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
        """SendInput (blocking): hand ``data`` to the process's stdin or terminal."""
        if not process.stdin or process.stdin_closed:
            raise RpcError("internal", "error writing to stdin: stdin not enabled or closed")
        try:
            _engine.write_stdin(process.session, data, timeout=10)
        except _engine.ProcessExited:
            raise RpcError("not_found", f"process with pid {process.pid} not found") from None
        except _engine.StdinNotOpen:
            raise RpcError(
                "internal", "error writing to stdin: stdin not enabled or closed"
            ) from None
        except _engine.EngineError as error:
            raise RpcError("internal", f"error writing to stdin: {error}") from None

    def close_stdin(self, process: Process) -> None:
        """CloseStdin (blocking): end of input; idempotent; refused for a PTY."""
        if process.pty:
            raise RpcError(
                "unknown", f"error closing stdin: cannot close stdin for PTY process {process.pid}"
            )
        if not process.stdin or process.stdin_closed:
            return
        try:
            _engine.close_stdin(process.session, timeout=10)
        except _engine.EngineError as error:
            raise RpcError("unknown", f"error closing stdin: {error}") from None
        process.stdin_closed = True

    def signal(self, process: Process, name: Any) -> None:
        """SendSignal: SIGTERM or SIGKILL to that single pid (not its group)."""
        sig = SIGNALS.get(name)
        if sig is None:
            raise RpcError("unimplemented", f"invalid signal: {name}")
        if process.end() is not None:
            raise RpcError("not_found", f"process with pid {process.pid} not found")
        try:
            os.kill(process.pid, sig)
        except ProcessLookupError:
            raise RpcError("not_found", f"process with pid {process.pid} not found") from None
        except OSError as error:
            raise RpcError("internal", f"error sending signal: {error}") from None

    def kill_on_deadline(self, process: Process) -> None:
        """Connect-Timeout-Ms expired: envd cancels the process's context (SIGKILL)."""
        if process.end() is None:
            with contextlib.suppress(OSError):
                os.kill(process.pid, signal.SIGKILL)

    def suspend_all(self) -> None:
        """Stop every live process (pause); their tags stop answering tag selectors."""
        for process in self.live():
            process.tag_lost = True
            _engine.suspend(process.session)

    def resume_all(self) -> None:
        """Continue every process stopped by :meth:`suspend_all`."""
        for process in self.live():
            _engine.resume(process.session)

    def terminate_all(self) -> None:
        """Kill every live process's group and wait briefly for each exit (blocking)."""
        for process in self.live():
            with contextlib.suppress(OSError, _engine.EngineError):
                _engine.terminate(process.session, timeout=5, force=True)
