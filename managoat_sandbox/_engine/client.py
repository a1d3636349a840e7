"""The requests the library makes of a box's agent (:mod:`.agent`), over :mod:`.transport`.

:class:`AgentClient` is the part of a :class:`.box.Box` that talks to its
agent: starting processes and following them, their stdin, signals and
terminals, and the sandbox's processes as a whole. How the agent is started
when a request finds none is the box's (:meth:`AgentClient.ensure`). Every
request is bounded by a timeout.
"""

from __future__ import annotations

import abc
import contextlib
import os
import secrets
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import records
from .subscription import Subscription
from .transport import START_TIMEOUT, AgentDown, Channel, Pool, Refused

REQUEST_TIMEOUT = 30.0


class AgentClient(abc.ABC):
    """A client of the agent whose control socket and records are in the state directory
    ``state``; thread-safe, with a small pool of connections."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self._pool = Pool(state)

    @abc.abstractmethod
    def ensure(self, *, timeout: float = START_TIMEOUT) -> None:
        """Start the agent unless one serves; EngineError if it cannot be started."""

    # -- connections -------------------------------------------------------------------

    def connect(self) -> socket.socket:
        """A new connection to the agent; AgentDown if none runs."""
        return self._pool.connect()

    def checkin(self, sock: socket.socket) -> None:
        """Give back a connection that is idle (its last exchange complete)."""
        self._pool.checkin(sock)

    def close(self) -> None:
        """Close pooled connections."""
        self._pool.close()

    def channel(self) -> Channel:
        """A connection of its own, for requests that may block (a command's stdin)."""
        return Channel(self._pool)

    def _exchange(
        self, header: dict[str, Any], data: bytes, *, start: bool, timeout: float | None
    ) -> tuple[socket.socket, dict[str, Any]]:
        """Send one request and read its reply (:meth:`.transport.Pool.exchange`), starting
        the agent first if ``start`` and none runs; the connection stays checked out."""
        return self._pool.exchange(
            header, data, start=self.ensure if start else None, timeout=timeout
        )

    def request(
        self,
        header: dict[str, Any],
        data: bytes = b"",
        *,
        start: bool = True,
        timeout: float | None = REQUEST_TIMEOUT,
    ) -> dict[str, Any]:
        """One request and its reply. ``timeout`` None waits as long as the agent takes
        (for stdin back-pressure). AgentDown if the agent is not running and ``start``
        is false; Refused for an error answer."""
        sock, reply = self._exchange(header, data, start=start, timeout=timeout)
        self.checkin(sock)
        return reply

    # -- processes ---------------------------------------------------------------------

    def spawn(
        self,
        sid: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str,
        stdin: bool = False,
        tty: bool = False,
        rows: int = 24,
        cols: int = 80,
        follow: bool = True,
        retain: int | None = None,
        retain_bytes: int | None = None,
    ) -> tuple[int | None, Subscription | None]:
        """Start a journaled session ``sid``; its pid and, with ``follow``, a subscription
        from byte zero. ``cwd`` is an agent path. Refused ``bad_cwd``/``exists``.

        ``retain`` (an int >= 0) becomes the agent's bound on finished sessions kept on
        disk, from this spawn on (:mod:`.retention`); None leaves the bound as it is (an
        agent that was never given one keeps every session). With ``retain``,
        ``retain_bytes`` (an int >= 0, or None: no limit) becomes its bound on the bytes
        those sessions take."""
        header = _spawn_header(
            sid, argv, env, cwd, stdin, tty=tty, journal=True, follow=follow, rows=rows, cols=cols
        )
        if retain is not None:
            header["retain"] = retain
            header["retain_bytes"] = retain_bytes
        sock, reply = self._exchange(header, b"", start=True, timeout=REQUEST_TIMEOUT)
        pid = reply.get("pid")
        if not follow:
            self.checkin(sock)
            return pid, None
        session = records.read_session(self.state / records.SESSIONS / sid)
        return pid, Subscription(sock, session=session, on_finish=self.checkin)

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str,
        timeout: float | None = REQUEST_TIMEOUT,
        merge: bool = False,
        stdin: bool = False,
    ) -> tuple[str, int | None, Subscription]:
        """Start an ephemeral process (nothing on disk, never listed; killed if the
        subscription is closed before its end): its id, pid and subscription. With
        ``merge`` its stdout and stderr are one pipe (``2>&1``), all delivered as stdout
        in the order written; with ``stdin`` it reads what is written to its id."""
        sid = "x" + secrets.token_hex(8)
        header = _spawn_header(sid, argv, env, cwd, stdin, journal=False, follow=True, merge=merge)
        sock, reply = self._exchange(header, b"", start=True, timeout=timeout)
        return sid, reply.get("pid"), Subscription(sock, on_finish=self.checkin)

    def attach(self, sid: str, *, from_end: bool = False) -> Subscription | None:
        """Follow journaled session ``sid`` from byte zero (or from now): live from the
        agent while it runs it, else replayed from disk. None if there is no such session."""
        session = records.read_session(self.state / records.SESSIONS / sid)
        if session is None:
            return None
        try:
            sock, reply = self._exchange(
                {"op": "attach", "id": sid, "from_end": from_end},
                b"",
                start=False,
                timeout=REQUEST_TIMEOUT,
            )
        except AgentDown:
            return self._from_disk(session, from_end=from_end)
        if not reply.get("live"):
            self.checkin(sock)
            return self._from_disk(session, from_end=from_end)
        offset = reply.get("offset")
        return Subscription(
            sock,
            session=session,
            on_finish=self.checkin,
            offset=offset if isinstance(offset, int) else 0,
        )

    @staticmethod
    def _from_disk(session: records.SessionRecord, *, from_end: bool) -> Subscription:
        """A finished (or orphaned) session replayed from its files; ``from_end`` skips the
        output already journaled (only the end is left)."""
        offset = 0
        if from_end:
            try:
                offset = os.lstat(session.journal).st_size
            except OSError:
                offset = 0
        return Subscription(None, session=session, offset=offset)

    def write_stdin(self, sid: str, data: bytes, *, timeout: float | None = REQUEST_TIMEOUT) -> str:
        """Hand ``data`` to a live process's stdin: ``ok``, ``closed`` (input was ended),
        ``exited``, ``not_open`` (started without stdin) or ``unknown`` (no such live
        process). Waits, up to ``timeout``, while the process does not read."""
        try:
            reply = self.request({"op": "stdin", "id": sid}, data, start=False, timeout=timeout)
        except Refused as refusal:
            if refusal.code == "unknown":
                return "unknown"
            raise
        return str(reply.get("status"))

    def close_stdin(self, sid: str) -> str:
        """End a live process's input after what was written: ``ok`` (also when already
        ended), ``exited``, ``not_open`` or ``unknown``."""
        try:
            return str(self.request({"op": "eof", "id": sid}, start=False).get("status"))
        except Refused as refusal:
            if refusal.code == "unknown":
                return "unknown"
            raise

    def signal(self, sid: str, signum: int, *, group: bool = True, tree: bool = False) -> bool:
        """Signal a live process (its whole group by default; with ``tree`` also every
        descendant that left the group); False if nothing was sent."""
        try:
            reply = self.request(
                {"op": "signal", "id": sid, "signal": int(signum), "group": group, "tree": tree},
                start=False,
            )
        except (AgentDown, Refused):
            return False
        return bool(reply.get("sent"))

    def resize(self, sid: str, rows: int, cols: int) -> bool:
        """Resize a live process's terminal; False if it has none."""
        return bool(
            self.request({"op": "resize", "id": sid, "rows": rows, "cols": cols}, start=False).get(
                "ok"
            )
        )

    # -- the sandbox's processes -----------------------------------------------------------

    def suspend(self) -> None:
        """Stop (SIGSTOP) every process of the sandbox; nothing to do without an agent."""
        with contextlib.suppress(AgentDown):
            self.request({"op": "suspend"}, start=False)

    def resume(self) -> None:
        """Continue (SIGCONT) every process of the sandbox."""
        with contextlib.suppress(AgentDown):
            self.request({"op": "resume"}, start=False)

    def kill_all(self) -> None:
        """Kill every process of the sandbox but its agent (files stay)."""
        with contextlib.suppress(AgentDown):
            self.request({"op": "kill_all"}, start=False)


def _spawn_header(
    sid: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str,
    stdin: bool,
    **options: object,
) -> dict[str, object]:
    """The header of a ``spawn`` request: the process and its ``options`` (``journal``,
    ``follow``, and ``tty``/``rows``/``cols`` or ``merge``)."""
    return {
        "op": "spawn",
        "id": sid,
        "argv": list(argv),
        "env": dict(env),
        "cwd": cwd,
        "stdin": stdin,
        **options,
    }
