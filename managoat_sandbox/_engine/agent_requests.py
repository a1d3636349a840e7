"""The requests the agent (:mod:`.agent`) serves: each operation of :mod:`.wire` checked
and put in force.

A handler takes the connection, the request's header and its data, and
returns the reply — or None when the reply comes later or was already queued
— or raises :class:`.agent_connection.Refused` for an error answer. A field
of the wrong type is refused (``bad_request``), never the end of the agent.
"""

from __future__ import annotations

import os
import re
import signal

from .agent_bridge import Bridge
from .agent_connection import Connection, Refused
from .agent_process import set_window
from .agent_processes import Processes
from .process_tree import descendants, send, signal_sandbox

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Handler = Callable[[Connection, dict[str, Any], bytes], dict[str, Any] | None]

SESSION_ID = re.compile(r"[A-Za-z0-9_.-]{1,128}\Z")


class Requests:
    """Serves requests on ``processes``, the sandbox's (``namespace``: the agent is its
    namespaces' process 1) and, when egress is bridged, ``bridge``; ``shutdown`` asks
    the agent to end."""

    def __init__(
        self,
        processes: Processes,
        bridge: Bridge | None,
        *,
        namespace: bool,
        shutdown: Callable[[], None],
    ) -> None:
        self.processes = processes
        self.bridge = bridge
        self.namespace = namespace
        self._shutdown_agent = shutdown
        self._handlers: dict[str, Handler] = {
            "hello": self._hello,
            "spawn": self._spawn,
            "attach": self._attach,
            "stdin": self._stdin,
            "eof": self._eof,
            "signal": self._signal,
            "resize": self._resize,
            "suspend": self._suspend,
            "resume": self._resume,
            "kill_all": self._kill_all,
            "egress": self._egress,
            "shutdown": self._shutdown,
        }

    def handle(
        self, conn: Connection, header: dict[str, Any], data: bytes
    ) -> dict[str, Any] | None:
        """Answer one request; None when the answer comes later (or was already queued)."""
        op = header.get("op")
        handler = self._handlers.get(op) if isinstance(op, str) else None
        if handler is None:
            raise Refused("bad_request", f"unknown operation {op!r}")
        return handler(conn, header, data)

    def _hello(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any]:
        return {"pid": os.getpid(), "namespace": self.namespace}

    # -- processes -------------------------------------------------------------------

    def _spawn(self, conn: Connection, req: dict[str, Any], data: bytes) -> None:
        """Start a process: ``id``, ``argv``, ``env``, ``cwd``; optional ``tty``, ``stdin``,
        ``journal`` (a detachable session), ``follow``, ``rows``/``cols``, ``retain`` (with
        ``retain_bytes``: :mod:`.retention`), and ``merge`` (stdout and stderr one pipe,
        read as ``OUT`` in the order written; ignored with ``tty``, whose terminal is
        already one stream)."""
        sid, argv, env, cwd = _command(req)
        tty = bool(req.get("tty"))
        stdin = bool(req.get("stdin"))
        journaled = bool(req.get("journal"))
        merge = bool(req.get("merge"))
        rows = int(req.get("rows") or 24)
        cols = int(req.get("cols") or 80)
        if sid in self.processes.by_sid:
            raise Refused("exists", f"process {sid!r} exists")
        if journaled and "retain" in req:
            try:
                self.processes.retention.set_bound(req["retain"], req.get("retain_bytes"))
            except ValueError as exc:
                raise Refused("bad_request", str(exc)) from None
        if not os.path.isdir(cwd):
            raise Refused("bad_cwd", f"{cwd!r} is not a directory")
        self.processes.start(
            conn,
            sid,
            argv,
            env,
            cwd,
            tty=tty,
            stdin=stdin,
            journaled=journaled,
            merge=merge,
            rows=rows,
            cols=cols,
            follow=bool(req.get("follow")) or not journaled,
        )

    def _attach(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any] | None:
        sid = req.get("id")
        process = self.processes.by_sid.get(sid) if isinstance(sid, str) else None
        if process is None or not process.journaled:
            return {"live": False}
        offset = process.size if req.get("from_end") else 0
        conn.send_reply({"live": True, "offset": offset})
        conn.subscribe(process, offset)
        return None

    def _stdin(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any] | None:
        reply = self.processes.stdin.offer(conn, self.processes.live(req), data)
        return reply or None

    def _eof(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any]:
        return self.processes.stdin.end_of_input(self.processes.live(req))

    def _signal(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any]:
        """Signal a live process: its group (``group``, the default), and with ``tree``
        also every descendant it has now, found before anything is signalled (one that
        left the group with ``setsid``: a shell's command, say); else its pid alone."""
        process = self.processes.live(req)
        sig = _field(req, "signal", int)
        if req.get("group", True):
            tree = descendants(process.pid) if req.get("tree") and process.pid else []
            sent = process.signal_group(sig)
            return {"sent": send(tree, sig) > 0 or sent}
        if process.pid is None or process.status is not None:
            return {"sent": False}
        try:
            os.kill(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            return {"sent": False}
        return {"sent": True}

    def _resize(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any]:
        process = self.processes.live(req)
        if process.master is None:
            return {"ok": False}
        set_window(process.master, _field(req, "rows", int), _field(req, "cols", int))
        return {"ok": True}

    # -- the sandbox -----------------------------------------------------------------

    def _suspend(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any]:
        signal_sandbox(signal.SIGSTOP, namespace=self.namespace)
        return {"ok": True}

    def _resume(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any]:
        signal_sandbox(signal.SIGCONT, namespace=self.namespace)
        return {"ok": True}

    def _kill_all(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any]:
        signal_sandbox(signal.SIGKILL, namespace=self.namespace)
        return {"ok": True}

    def _egress(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any] | None:
        """Put a policy change in force: open the proxy port or close it (``open``), then
        have the keeper cut every connection the policy now in force does not permit.

        The reply waits for the keeper's confirmation (the caller's request deadline
        bounds that wait), so once it is ``ok`` no connection the policy forbids is
        left. ``egress_failed`` when the port cannot be opened, or when the change
        opens it and the keeper is gone; a change that closes the port succeeds
        without the keeper (with it gone, no connection is left to cut). The
        caller sends nothing more on ``conn`` before the reply. Not ``ok`` for an
        agent without egress.
        """
        open_ = bool(req.get("open"))
        if self.bridge is None:
            return {"ok": False}
        self.bridge.set_open(open_)
        return self.bridge.confirm(conn, open_)

    def _shutdown(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any]:
        self._shutdown_agent()
        return {"ok": True}


def _command(req: dict[str, Any]) -> tuple[str, list[str], dict[str, str], str]:
    """A spawn request's ``id``, ``argv``, ``env`` and ``cwd``, checked; Refused
    (``bad_request``, ``bad_env`` or ``bad_argv``) naming the first field that is not
    usable."""
    sid = _field(req, "id", str)
    if SESSION_ID.match(sid) is None:
        raise Refused("bad_request", "bad process id")
    argv = _field(req, "argv", list)
    env = _field(req, "env", dict)
    cwd = _field(req, "cwd", str)
    if not argv or not all(isinstance(a, str) for a in argv):
        raise Refused("bad_request", "argv must be a non-empty list of strings")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise Refused("bad_request", "env must map strings to strings")
    if any(not k or "=" in k or "\0" in k or "\0" in v for k, v in env.items()):
        raise Refused(
            "bad_env", "an env name must be non-empty without '=' or NUL, a value without NUL"
        )
    if any("\0" in arg for arg in argv):
        raise Refused("bad_argv", "no argument may contain NUL")
    return sid, argv, env, cwd


def _field(record: dict[str, Any], key: str, kind: type) -> Any:
    value = record.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise Refused("bad_request", f"bad {key!r}")
    return value
