"""A box: one sandbox's directory and the library's connection to its agent.

::

    <directory>/
      fs/       the sandbox's filesystem: its ``/`` when isolated
      state/    what only the library and the agent reach (:mod:`.records`)

:class:`Box` is thread-safe and cheap to build; it keeps a small pool of
connections to the agent. The agent is started by :meth:`Box.create`, and
again on demand whenever a request finds it gone (its sessions are then
reported lost, never guessed). Every request is bounded by a timeout. The
agent's answers are trusted; nothing a command can write is read without the
care of :mod:`.records` and :mod:`.safefs`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import signal
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import egress, identity, launch, records, safefs, tree, trees, wire
from .agent_process import write_record
from .errors import EngineError
from .options import SOCKET
from .settings import DEFAULT_PATH, EGRESS_PORT, BoxSettings
from .subscription import Subscription

BOX = "box.json"
REQUEST_TIMEOUT = 30.0
START_TIMEOUT = 30.0
PROXY = f"http://127.0.0.1:{EGRESS_PORT}"
_POOL = 8
_RESETS = 6
_RESET_BACKOFF = 0.002
_LOCK_POLL = 0.01
#: How long a stop waits, once the agent is gone, for the processes this process
#: launched for the box (bubblewrap, the keeper) to end and be reaped.
_REAP_WAIT = 2.0


class AgentDown(EngineError):
    """The agent is not running (nothing was sent to it)."""


class Refused(EngineError):
    """The agent refused a request; ``code`` names why (``unknown``, ``bad_cwd``…)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _recv_exact(sock: socket.socket, size: int, deadline: float | None) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the agent did not answer in time")
            sock.settimeout(remaining)
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise EngineError("the agent closed the connection")
        chunks += chunk
    return bytes(chunks)


def read_reply(sock: socket.socket, deadline: float | None) -> dict[str, Any]:
    """Exactly one REPLY frame (nothing after it is read); EngineError/TimeoutError."""
    kind, length = wire.HEADER.unpack(_recv_exact(sock, wire.HEADER.size, deadline))
    if kind != wire.REPLY or length > wire.MAX_FRAME:
        raise EngineError(f"unexpected frame from the agent (kind {kind})")
    header, _ = wire.parse_message(_recv_exact(sock, length, deadline))
    return header


def _reply(
    sock: socket.socket, deadline: float | None, checkin: Callable[[socket.socket], None]
) -> dict[str, Any]:
    """The reply on ``sock``: given back to ``checkin`` on a refusal. TimeoutError,
    OSError (the connection failed) or EngineError (the agent ended it)."""
    reply = read_reply(sock, deadline)
    if "error" in reply:
        checkin(sock)
        raise Refused(str(reply["error"]), str(reply.get("message", "")))
    return reply


class Channel:
    """A connection of its own for one caller's requests (a command's stdin).

    :meth:`close` may be called from any thread and makes a request blocked in
    it (a write to a process that does not read) fail at once.
    """

    def __init__(self, box: Box) -> None:
        self._box = box
        self._sock: socket.socket | None = None
        self._closed = False
        self._lock = threading.Lock()

    def request(
        self, header: dict[str, Any], data: bytes = b"", *, timeout: float | None = None
    ) -> dict[str, Any]:
        """One request and its reply; EngineError once closed."""
        with self._lock:
            if self._closed:
                raise EngineError("the channel is closed")
            sock = self._sock
        if sock is None:
            sock = self._box.connect()
            with self._lock:
                if self.is_closed():
                    sock.close()
                    raise EngineError("the channel is closed")
                self._sock = sock
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            sock.settimeout(timeout)
            sock.sendall(wire.message(wire.REQUEST, header, data))
        except OSError as exc:
            self._drop(sock)
            raise EngineError(f"lost the sandbox's agent: {exc}") from None
        try:
            return _reply(sock, deadline, lambda _: None)
        except (OSError, EngineError) as exc:
            if not isinstance(exc, Refused):
                self._drop(sock)
            raise

    def is_closed(self) -> bool:
        """Whether :meth:`close` was called (a call, read afresh: another thread may close
        the channel while this one connects)."""
        return self._closed

    def _drop(self, sock: socket.socket) -> None:
        with self._lock:
            if self._sock is sock:
                self._sock = None
        sock.close()

    def close(self) -> None:
        """Close the connection, interrupting a request in flight; idempotent."""
        with self._lock:
            self._closed = True
            sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def _close_all(sockets: list[socket.socket]) -> None:
    while sockets:
        sockets.pop().close()


class Box:
    """One sandbox's directory and its agent."""

    def __init__(self, directory: Path, settings: BoxSettings) -> None:
        self.directory = directory
        self.fs = directory / "fs"
        self.state = directory / "state"
        self.settings = settings
        self._pool: list[socket.socket] = []
        self._lock = threading.Lock()
        # Idle connections are closed with the box, or at exit while it lives on.
        weakref.finalize(self, _close_all, self._pool)
        self._masked: tuple[str, ...] | None = None
        sock_path = self.state / SOCKET
        self._address = str(sock_path) if len(os.fsencode(sock_path)) < launch.SUN_PATH else None

    # -- creation ---------------------------------------------------------------------

    @classmethod
    def create(
        cls, directory: Path, settings: BoxSettings, *, timeout: float = START_TIMEOUT
    ) -> Box:
        """Lay out ``directory`` (:meth:`layout`) and start the agent."""
        box = cls.layout(directory, settings)
        box.ensure(timeout=timeout)
        return box

    @classmethod
    def layout(cls, directory: Path, settings: BoxSettings) -> Box:
        """Make the box's directories and records in ``directory`` (which must exist and
        hold no box); the agent is not started."""
        fs = directory / "fs"
        fs.mkdir(mode=0o755)
        state = directory / "state"
        state.mkdir(mode=0o700)
        (state / records.SESSIONS).mkdir(mode=0o700)
        launch.write_generated_etc(state, settings)
        home = fs / settings.home.lstrip("/")
        home.mkdir(parents=True, mode=0o755)
        tmp = fs / "tmp"
        tmp.mkdir(mode=0o755)
        tmp.chmod(0o1777)
        if settings.host_uid is not None:
            # The sandbox's user owns its files and its agent's records; nobody else
            # may enter them (its commands see fs/ as their / from the inside).
            fs.chmod(0o700)
            between = [path for path in home.parents if fs in path.parents]
            for path in (fs, tmp, home, *between, state, state / records.SESSIONS):
                os.chown(path, settings.host_uid, settings.host_uid, follow_symlinks=False)
        state_fd = os.open(state, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            write_record(state_fd, BOX, settings.to_json())
        finally:
            os.close(state_fd)
        return cls(directory, settings)

    @classmethod
    def open(cls, directory: Path) -> Box:
        """The box in ``directory``; FileNotFoundError if there is none."""
        record = records.read_record(directory / "state" / BOX)
        if record is None:
            raise FileNotFoundError(errno.ENOENT, "not a box", str(directory))
        return cls(directory, BoxSettings.from_json(record))

    # -- paths and environment ------------------------------------------------------------

    def agent_path(self, path: str) -> str:
        """Where sandbox path ``path`` is for the agent and commands: itself when
        isolated, under ``fs/`` otherwise. Relative paths are relative to the home."""
        absolute = path if path.startswith("/") else f"{self.settings.home}/{path}"
        normal = os.path.normpath("/" + absolute.lstrip("/"))
        if self.settings.isolated:
            return normal
        return str(self.fs / normal.lstrip("/")) if normal != "/" else str(self.fs)

    def masked(self) -> tuple[str, ...]:
        """Sandbox paths that are read-only system mounts when isolated (none otherwise)."""
        if self._masked is None:
            found: tuple[str, ...] = ()
            if self.settings.isolated:
                _, python_paths = launch.agent_python()
                found = tuple(
                    m.dest for m in launch.mounts(self.settings, self.state, python_paths)
                )
            self._masked = found
        return self._masked

    @property
    def owner(self) -> tuple[int, int]:
        """The host uid and gid the sandbox's user is, which own the files it makes: its
        own uid for a root caller's box (``settings.host_uid``), else the caller's."""
        if self.settings.host_uid is not None:
            return self.settings.host_uid, self.settings.host_uid
        return os.geteuid(), os.getegid()

    @contextlib.contextmanager
    def root(self) -> Iterator[int]:
        """A descriptor of the sandbox's ``/`` (its ``fs/``) for :mod:`.safefs`, closed after.

        Within the block this thread's file operations have the sandbox user's rights
        (:func:`.identity.acting_as`): what its commands cannot read or write, the
        caller cannot through the box either, root or not.
        """
        root_fd = safefs.open_root(self.fs)
        try:
            with identity.acting_as(self.settings.host_uid):
                yield root_fd
        finally:
            os.close(root_fd)

    def environment(
        self, extra: Mapping[str, str] | None = None, *, tty: bool = False
    ) -> dict[str, str]:
        """A command's environment, built from scratch: the base plus ``extra``."""
        settings = self.settings
        env = {
            "PATH": DEFAULT_PATH,
            "HOME": self.agent_path(settings.home),
            "USER": settings.user,
            "LOGNAME": settings.user,
            "LANG": "C.UTF-8",
            "SHELL": "/bin/bash",
        }
        if tty:
            env["TERM"] = "xterm-256color"
        if settings.isolated and settings.egress:
            for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
                env[name] = env[name.lower()] = PROXY
            env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1,::1"
        env.update(extra or {})
        return env

    # -- the agent's lifetime ----------------------------------------------------------------

    def alive(self) -> bool:
        """Whether an agent serves this box now."""
        return records.agent_alive(self.state)

    def ensure(self, *, timeout: float = START_TIMEOUT) -> None:
        """Start the agent unless one serves (one starter at a time, across processes).

        An agent that holds its lock but no longer answers is dying: it is
        waited for (within ``timeout``) before a new one starts. A box whose user
        would be host root is refused (:func:`.launch.check_identity`), also while
        an agent an earlier version started still serves it.
        """
        launch.check_identity(self.settings)
        deadline = time.monotonic() + timeout
        if self._answers():
            return
        lock = os.open(
            self.state / launch.LAUNCH_LOCK,
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
        )
        try:
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise EngineError(
                            "another process is starting this sandbox's agent"
                            " and did not finish in time"
                        ) from None
                    time.sleep(_LOCK_POLL)
            if self._answers():
                return
            if not self._wait_gone(deadline):
                raise EngineError("the sandbox's agent no longer answers but has not ended")
            policy = self.policy()
            launch.launch(
                self.directory, self.settings, deadline=deadline, egress_open=not policy.deny_all
            )
        finally:
            os.close(lock)

    def _answers(self) -> bool:
        """Whether an agent accepts connections (only a live agent holds its socket)."""
        try:
            self.connect().close()
        except AgentDown:
            return False
        return True

    def connect(self) -> socket.socket:
        """A new connection to the agent; AgentDown if none runs."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if self._address is not None:
                sock.connect(self._address)
            else:
                state_fd = os.open(self.state, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    sock.connect(f"/proc/self/fd/{state_fd}/{SOCKET}")
                finally:
                    os.close(state_fd)
        except OSError as exc:
            sock.close()
            if exc.errno in (errno.ENOENT, errno.ECONNREFUSED):
                raise AgentDown("the sandbox's agent is not running") from None
            raise EngineError(f"cannot reach the sandbox's agent: {exc.strerror}") from None
        return sock

    def _checkout(self, *, start: bool, deadline: float) -> socket.socket:
        """A connection: a pooled one, else a new one (starting the agent if ``start``)."""
        with self._lock:
            if self._pool:
                return self._pool.pop()
        try:
            return self.connect()
        except AgentDown:
            if not start:
                raise
        self.ensure(timeout=max(deadline - time.monotonic(), 0.1))
        return self.connect()

    def checkin(self, sock: socket.socket) -> None:
        """Give back a connection that is idle (its last exchange complete)."""
        sock.settimeout(None)
        with self._lock:
            if len(self._pool) < _POOL:
                self._pool.append(sock)
                return
        sock.close()

    def close(self) -> None:
        """Close pooled connections."""
        with self._lock:
            pool = self._pool[:]
            self._pool.clear()
        _close_all(pool)

    def _exchange(
        self, header: dict[str, Any], data: bytes, *, start: bool, timeout: float | None
    ) -> tuple[socket.socket, dict[str, Any]]:
        """Send one request and read its reply; the connection stays checked out.

        A connection that breaks (EPIPE) or is reset (ECONNRESET) was closed by
        its agent with the request unread — never acted upon — so the request
        is sent again on a fresh connection, after a short pause (the pool,
        whose connections all went to the same agent, is dropped). An agent
        that is dying still has its socket open for a moment; once it is
        gone, the connection is refused and a new agent starts. Any other
        failure, end of file included, is an error: the agent may have acted
        on the request.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        message = wire.message(wire.REQUEST, header, data)
        for attempt in range(_RESETS):
            if attempt:
                time.sleep(_RESET_BACKOFF * 2 ** (attempt - 1))
            sock = self._checkout(
                start=start, deadline=time.monotonic() + (timeout or START_TIMEOUT)
            )
            try:
                sock.settimeout(
                    None if deadline is None else max(deadline - time.monotonic(), 0.001)
                )
                sock.sendall(message)
                return sock, _reply(sock, deadline, self.checkin)
            except Refused:
                raise
            except TimeoutError:
                sock.close()
                raise
            except (BrokenPipeError, ConnectionResetError) as exc:
                sock.close()
                if attempt == _RESETS - 1:
                    raise EngineError(f"lost the sandbox's agent: {exc}") from None
                # Every pooled connection went to the agent that just went away.
                self.close()
            except (OSError, EngineError) as exc:
                sock.close()
                raise EngineError(f"lost the sandbox's agent: {exc}") from None
        raise AssertionError("unreachable")

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
        header = {
            "op": "spawn",
            "id": sid,
            "argv": list(argv),
            "env": dict(env),
            "cwd": cwd,
            "stdin": stdin,
            "tty": tty,
            "journal": True,
            "follow": follow,
            "rows": rows,
            "cols": cols,
        }
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
        header = {
            "op": "spawn",
            "id": sid,
            "argv": list(argv),
            "env": dict(env),
            "cwd": cwd,
            "stdin": stdin,
            "journal": False,
            "follow": True,
            "merge": merge,
        }
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

    def channel(self) -> Channel:
        """A connection of its own, for requests that may block (a command's stdin)."""
        return Channel(self)

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

    def running(self, sid: str) -> bool:
        """Whether journaled session ``sid`` is still running (no end recorded, agent up)."""
        session = self.session(sid)
        return session is not None and session.end() is None and self.alive()

    def signal(self, sid: str, signum: int, *, group: bool = True) -> bool:
        """Signal a live process (its whole group by default); False if nothing was sent."""
        try:
            reply = self.request(
                {"op": "signal", "id": sid, "signal": int(signum), "group": group}, start=False
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

    # -- sessions on disk ----------------------------------------------------------------

    def sessions(self) -> list[records.SessionRecord]:
        """Every journaled session, by id."""
        return records.list_sessions(self.state)

    def session(self, sid: str) -> records.SessionRecord | None:
        """One journaled session, or None."""
        return records.read_session(self.state / records.SESSIONS / sid)

    # -- egress --------------------------------------------------------------------------

    def policy(self) -> egress.Policy:
        """The egress policy in force (no policy until one is set)."""
        state_fd = os.open(self.state, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            return egress.read_policy(state_fd)
        finally:
            os.close(state_fd)

    def set_policy(self, policy: egress.Policy) -> None:
        """Put ``policy`` in force at once: new connections follow it, and the keeper
        cuts the relayed ones it no longer permits (all of them under deny-all, when
        the agent also stops accepting on the proxy port, which it keeps bound).
        Survives agent restarts (it is on disk). ``Refused`` (``egress_failed``) when
        the agent could not put it in force; nothing to do without an agent."""
        state_fd = os.open(self.state, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            write_record(state_fd, egress.POLICY, policy.to_json())
        finally:
            os.close(state_fd)
        with contextlib.suppress(AgentDown):
            self.request({"op": "egress", "open": not policy.deny_all}, start=False)

    # -- the end -----------------------------------------------------------------------------

    def stop(self, *, timeout: float = 10.0) -> bool:
        """End the agent and every process of the sandbox; True once confirmed.

        Asks the agent to shut down; if it does not answer, kills it by its
        recorded host pid (checked against its start time, so a reused pid is
        never hit). Once the agent is gone, what this process launched for the
        box is reaped (:func:`.launch.reap`). Files stay.
        """
        deadline = time.monotonic() + timeout
        self.close()
        with contextlib.suppress(EngineError, OSError):
            self.request(
                {"op": "shutdown"},
                start=False,
                timeout=min(2.0, max(deadline - time.monotonic(), 0.1)),
            )
        # The shutdown's connection went back to the pool; its agent is ending.
        self.close()
        gone = self._wait_gone(min(deadline, time.monotonic() + 2.0))
        if not gone:
            self._kill_agent()
            gone = self._wait_gone(deadline)
        if gone:
            launch.reap(self.directory, min(deadline, time.monotonic() + _REAP_WAIT))
        return gone

    def delete(self, *, timeout: float = 10.0) -> bool:
        """:meth:`stop`, then remove the box's directory (at once from its name, then
        whatever permissions its sandbox left); False, and nothing removed, if the
        agent's end could not be confirmed."""
        if not self.stop(timeout=timeout):
            return False
        trees.discard(self.directory)
        return True

    def _wait_gone(self, deadline: float) -> bool:
        while self.alive():
            if time.monotonic() >= deadline:
                return False
            time.sleep(_LOCK_POLL)
        return True

    def _kill_agent(self) -> None:
        try:
            record = records.read_record(self.state / "agent.json")
        except (OSError, EngineError):
            return
        if record is None:
            return
        pid = record.get("pid")
        if not isinstance(pid, int) or pid <= 1 or not hasattr(os, "pidfd_open"):
            return
        try:
            handle = os.pidfd_open(pid)
        except OSError:
            return
        try:
            if tree.start_time(pid) != record.get("start"):
                return
            if not self.settings.isolated:
                for child in tree.descendants(pid):
                    with contextlib.suppress(OSError):
                        os.kill(child, signal.SIGKILL)
            signal.pidfd_send_signal(handle, signal.SIGKILL)
        except OSError:
            pass
        finally:
            os.close(handle)
