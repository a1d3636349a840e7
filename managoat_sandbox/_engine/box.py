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

This module holds the directory and the agent's lifetime; the requests a box
makes of its agent are :class:`.client.AgentClient`'s, which :class:`Box`
extends, over the connections of :mod:`.transport`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import signal
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from . import egress, identity, launch, process_tree, records, safefs, trees
from .agent_process import write_record
from .client import REQUEST_TIMEOUT, AgentClient
from .errors import EngineError
from .settings import DEFAULT_PATH, EGRESS_PORT, BoxSettings
from .transport import START_TIMEOUT, AgentDown, Channel, Refused

__all__ = [
    "BOX",
    "PROXY",
    "REQUEST_TIMEOUT",
    "START_TIMEOUT",
    "AgentDown",
    "Box",
    "Channel",
    "Refused",
]

BOX = "box.json"
PROXY = f"http://127.0.0.1:{EGRESS_PORT}"
_LOCK_POLL = 0.01
#: How long a stop waits, once the agent is gone, for the processes this process
#: launched for the box (bubblewrap, the keeper) to end and be reaped.
_REAP_WAIT = 2.0


class Box(AgentClient):
    """One sandbox's directory and its agent."""

    def __init__(self, directory: Path, settings: BoxSettings) -> None:
        super().__init__(directory / "state")
        self.directory = directory
        self.fs = directory / "fs"
        self.settings = settings
        self._masked: tuple[str, ...] | None = None

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
        _lay_out(directory, settings)
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
        with _launch_lock(self.state, deadline):
            if self._answers():
                return
            if not self._wait_gone(deadline):
                raise EngineError("the sandbox's agent no longer answers but has not ended")
            policy = self.policy()
            launch.launch(
                self.directory, self.settings, deadline=deadline, egress_open=not policy.deny_all
            )

    def _answers(self) -> bool:
        """Whether an agent accepts connections (only a live agent holds its socket)."""
        try:
            self.connect().close()
        except AgentDown:
            return False
        return True

    def running(self, sid: str) -> bool:
        """Whether journaled session ``sid`` is still running (no end recorded, agent up)."""
        session = self.session(sid)
        return session is not None and session.end() is None and self.alive()

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
            _kill_agent(self.state, isolated=self.settings.isolated)
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
        """Whether the agent is gone by ``deadline``: woken by the agent's exit itself
        (its process descriptor), polling the lock only where there is none."""
        found = _agent_handle(self.state)
        handle = None if found is None else found[0]
        try:
            while self.alive():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                if handle is None:
                    time.sleep(_LOCK_POLL)
                elif select.select([handle], [], [], remaining)[0]:
                    os.close(handle)
                    handle = None
        finally:
            if handle is not None:
                os.close(handle)
        return True


def _lay_out(directory: Path, settings: BoxSettings) -> None:
    """Make a box's directories and records in ``directory`` (see :meth:`Box.layout`)."""
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


@contextlib.contextmanager
def _launch_lock(state: Path, deadline: float) -> Iterator[None]:
    """Hold the box's launch lock (``state/launch.lock``: one starter at a time, across
    processes); EngineError if another holds it past ``deadline``."""
    lock = os.open(
        state / launch.LAUNCH_LOCK,
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
        yield
    finally:
        os.close(lock)


def _agent_handle(state: Path) -> tuple[int, int] | None:
    """A process descriptor of the agent that ``state/agent.json`` records, and its pid,
    if that pid still runs it (same start time: a reused pid is never hit); else None."""
    try:
        record = records.read_record(state / "agent.json")
    except (OSError, EngineError):
        return None
    if record is None:
        return None
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 1 or not hasattr(os, "pidfd_open"):
        return None
    try:
        handle = os.pidfd_open(pid)
    except OSError:
        return None
    if process_tree.start_time(pid) != record.get("start"):
        os.close(handle)
        return None
    return handle, pid


def _kill_agent(state: Path, *, isolated: bool) -> None:
    """SIGKILL the agent that ``state/agent.json`` records (:func:`_agent_handle`) — and,
    not ``isolated``, every descendant of it first (an isolated sandbox's processes end
    with its process 1)."""
    found = _agent_handle(state)
    if found is None:
        return
    handle, pid = found
    try:
        if not isolated:
            for child in process_tree.descendants(pid):
                with contextlib.suppress(OSError):
                    os.kill(child, signal.SIGKILL)
        signal.pidfd_send_signal(handle, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(handle)
