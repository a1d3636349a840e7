"""The ``local`` adapter: sandboxes on this machine, isolated by the kernel.

Each sandbox is a *box* (:mod:`managoat_sandbox._engine.box`): its own
directory, and one long-lived agent that runs its commands. When the host
allows it (``local.isolation``, :mod:`.mode`) the agent lives in the
sandbox's own user, mount, PID, network, IPC and UTS namespaces under
bubblewrap, so a command sees its sandbox's files as ``/``, the host's
toolchain read-only, only its sandbox's processes and no network but the
egress proxy — never the caller's home, environment or memory, other
sandboxes, or the session records the library reads. Resource limits apply
to every process (:mod:`managoat_sandbox._engine.limits`).

Sessions outlive the Python process that started them: any process can
``list_sessions`` and ``attach`` (replay from byte zero, live tail, the real
exit code). Every ``spawn`` is such a detachable session, kept after it ends
within ``local.retained_sessions`` and ``local.retained_bytes``
(:func:`.settings.retained_bytes`); ``exec`` is a private process that leaves nothing on disk
and is killed if its deadline expires or its output passes ``max_bytes``.
Output is back-pressured all the way to the command: a caller that does not
read its frames holds up the command's reader, then the agent, which stops
reading the command's pipes so that the command blocks on write
(:mod:`managoat_sandbox._engine.agent`); unread output never piles up in the
caller's memory. A spawn's journal keeps everything on the sandbox's disk
(within its ``file_size`` limit), where a detached session goes on writing it.
An agent that dies ends its commands with ``Error(…,
Unavailable("closed_before_exit"))``; the next operation starts a new one.

Files are written and read back (``write_file``, ``read_file``,
``list_files``) from the host, in the sandbox's own filesystem, without ever
following a link out of it or opening a FIFO (:mod:`.files`).
"""

from __future__ import annotations

import os
import secrets
import signal
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ... import _args, reasons
from ..._collect import collect_frames
from ..._deadline import Deadline
from ..._engine import egress, events, isolation, safefs, trees
from ..._engine.box import AgentDown, Box, Refused
from ..._engine.errors import EngineError
from ..._engine.limits import Limits
from ..._engine.records import SessionRecord
from ..._engine.settings import BoxSettings, hostname_for
from ..._engine.subscription import Subscription
from ..._streaming import Stream, StreamingAdapter, new_ref
from ...contract import Capability, Owner
from ...errors import (
    AlreadyExists,
    Invalid,
    NotFound,
    NotSupported,
    RestoreFailed,
    Unavailable,
)
from ...frames import Error, Exit, Frame, Stderr, Stdout
from ...reasons import Reason
from ...transfers import TarTransfers
from ...types import Command, ExecResult, FileInfo, Handle, Info, NetworkPolicy, Session
from . import checkpoints, files, layout, mode, settings
from .end import LocalCommandEnd, end_error, follow_into

__all__ = ["Local"]

_STOP_WAIT = 10.0
_CREATE_OPTIONS = frozenset({"limits"})


def _known_end(record: SessionRecord, served: bool | None) -> tuple[bool | None, int | None]:
    """``(ended, exit_code)`` of a listed session (see ``Local.list_sessions``):
    ``served`` says whether an agent served the sandbox throughout the listing (None: one
    started meanwhile). An exit record that cannot be read leaves both unknown."""
    try:
        recorded = record.end()
    except (OSError, EngineError):
        return None, None
    if recorded is None:
        return (None if served is None else not served), None
    end = events.end_from_record(recorded)
    return True, end.code if isinstance(end, events.Exited) else None


def _new_id(prefix: str) -> str:
    """A unique id that sorts by creation time."""
    return f"{prefix}{time.time_ns():x}-{secrets.token_hex(3)}"


def _exec_frames(subscription: Subscription, deadline: Deadline) -> Iterator[Frame]:
    """An exec's events, as frames (``ref`` ``None``), up to its end: each batch is read
    within what is left of ``deadline``, consulted before every read (even with events
    already waiting), whose error ends the frames when it expires. A ``Lost`` end is an
    ``Error`` with :func:`.end_error`'s reason."""
    while True:
        try:
            batch = subscription.read(timeout=deadline.clamp())
        except TimeoutError:
            raise deadline.error() from None
        for event in batch:
            if isinstance(event, events.Output):
                yield (Stderr if event.stream == 2 else Stdout)(None, event.data)
            elif isinstance(event, events.Exited):
                yield Exit(None, event.code)
            else:
                yield Error(None, end_error(event))


def _engine_error(error: EngineError) -> Unavailable:
    if isinstance(error, AgentDown):
        return Unavailable(Reason.AGENT_NOT_RUNNING)
    return Unavailable(Reason.AGENT_FAILED, problem=str(error))


class Local(TarTransfers, StreamingAdapter):
    """Sandboxes on this machine; see the module docstring for what isolates them."""

    provider = "local"
    command_type = LocalCommandEnd

    _BASE = frozenset(
        {
            Capability.SUSPEND,
            Capability.ATTACH,
            Capability.TRANSFER,  # one tar stream through a command
            Capability.TTY,
            Capability.TERMINATE_SESSION,
            Capability.FORCE_TERMINATE_SESSION,
            Capability.CREATE_NEW,
            Capability.CHECKPOINT,
            Capability.READ_FILE,
            Capability.LIST_FILES,
        }
    )

    def __init__(self) -> None:
        self._boxes: dict[Path, Box] = {}
        self._lock = threading.Lock()

    def capabilities(self) -> frozenset[str]:
        """``isolation`` and ``network_policy`` only where new sandboxes are isolated
        (commands kept from the host, egress enforceable)."""
        if mode.isolated_by_default():
            return self._BASE | {Capability.ISOLATION, Capability.NETWORK_POLICY}
        return self._BASE

    # -- boxes ----------------------------------------------------------------------

    def _box(self, name: str, base: Path | None = None) -> Box:
        """The box of sandbox ``name`` under ``base`` (None: the configured root), cached
        per directory while its record exists, or NotFound."""
        path = layout.sandbox_dir(name, base)
        with self._lock:
            box = self._boxes.get(path)
        if box is not None and os.path.isfile(path / layout.META):
            return box
        path = layout.existing(name, base)
        if box is None:
            try:
                box = Box.open(path)
            except (OSError, EngineError):
                raise NotFound(Reason.SANDBOX, name=name) from None
            with self._lock:
                box = self._boxes.setdefault(path, box)
        return box

    def _handle_box(self, handle: Handle) -> Box:
        """The box of the sandbox ``handle`` was made for: under the root it carries, else
        (``private`` None) under the configured root; or NotFound."""
        return self._box(handle.name, _base(handle))

    def _forget(self, path: Path) -> None:
        with self._lock:
            box = self._boxes.pop(path, None)
        if box is not None:
            box.close()

    # -- lifecycle ---------------------------------------------------------------------

    def build_handle(self, name: str) -> Handle:
        """A handle of sandbox ``name`` under the root configured now, which it carries
        (``private``): it keeps reaching that sandbox after ``local.root`` changes."""
        return self._located(layout.check_name(name), layout.configured_root())

    def _located(self, name: str, base: Path, instance_id: str | None = None) -> Handle:
        """A handle of sandbox ``name`` that carries its root ``base``."""
        return Handle(self.provider, name, instance_id=instance_id, private=layout.Located(base))

    @staticmethod
    def _settings(name: str, opts: Mapping[str, Any]) -> BoxSettings:
        unknown = sorted(set(opts) - _CREATE_OPTIONS)
        if unknown:
            raise TypeError(f"unknown create options: {unknown}")
        try:
            limits = Limits.from_mapping(opts.get("limits"))
        except ValueError as error:
            raise Invalid(Reason.LIMITS, problem=str(error)) from None
        return BoxSettings(
            isolated=mode.new_sandbox_isolated(), hostname=hostname_for(name), limits=limits
        )

    def _make(
        self, base: Path, name: str, instance_id: str | None, settings: BoxSettings
    ) -> Path | None:
        """Build the sandbox aside in root ``base`` and move it into place; None if a
        sandbox of that name exists, ``Invalid`` if something else holds the name."""
        target = base / name
        staging = layout.staging_dir(base)
        try:
            Box.layout(staging, settings)
            layout.write_meta(staging, layout.new_meta(name, instance_id))
            os.rename(staging, target)
        except OSError as error:
            trees.remove_tree(staging)
            if layout.read_meta(target) is not None:
                return None
            if os.path.lexists(target):
                raise Invalid(
                    Reason.NAME,
                    problem="exists and is not a sandbox",
                    message=f"{target} exists and is not a sandbox",
                ) from None
            raise Unavailable(Reason.CREATE_FAILED, problem=error.strerror) from None
        return target

    def _start(self, name: str, path: Path, pins: dict[str, str]) -> None:
        """Start a new sandbox's agent; on failure nothing of the sandbox is left."""
        try:
            box = self._box(name, path.parent)
            if box.settings.isolated:
                box.set_policy(egress.Policy(resolve=pins))
            box.ensure()
        except (OSError, EngineError) as error:
            self._forget(path)
            trees.discard(path)
            raise Unavailable(Reason.AGENT_FAILED, problem=str(error)) from None

    def create(self, name: str, **opts: Any) -> Handle:
        """Create the sandbox, adopting an existing one of that name.

        ``limits`` (a mapping of ``processes``, ``memory``, ``open_files``,
        ``file_size`` to an int or None) applies to a new sandbox; adopting one
        with other limits is ``Invalid``.
        """
        name = layout.check_name(name)
        settings = self._settings(name, opts)
        pins = _pins()
        base = layout.root()
        for _ in range(3):
            try:
                box = self._box(name, base)
            except NotFound:
                path = self._make(base, name, None, settings)
                if path is None:
                    continue
                self._start(name, path, pins)
                return self._located(name, base)
            mode.check_adoptable(box.settings.isolated)
            if "limits" in opts and box.settings.limits != settings.limits:
                raise Invalid(
                    Reason.LIMITS,
                    problem="the sandbox exists with other limits; destroy it first to change them",
                )
            return self._located(name, base)
        raise Unavailable(Reason.CREATE_FAILED, problem="the name kept changing hands")

    def create_new(self, name: str, *, timeout: float = 120.0, **opts: Any) -> Handle:
        """Create a sandbox that must not exist yet (``AlreadyExists``); atomic."""
        name = layout.check_name(name)
        settings = self._settings(name, opts)
        pins = _pins()
        instance_id = f"local-{uuid.uuid4().hex}"
        base = layout.root()
        path = self._make(base, name, instance_id, settings)
        if path is None:
            raise AlreadyExists(Reason.SANDBOX, name=name)
        self._start(name, path, pins)
        return self._located(name, base, instance_id)

    def get(self, handle: Handle) -> Info:
        """Status, and in ``raw``: the record, ``isolation`` (``"namespaces"`` or
        ``"none"``), the limits, whether the agent runs, and the egress policy."""
        path = layout.existing(handle.name, _base(handle))
        box = self._handle_box(handle)
        meta = layout.read_meta(path) or {}
        policy = box.policy()
        raw = {
            **meta,
            "isolation": "namespaces" if box.settings.isolated else "none",
            "isolation_note": _isolation_note(box),
            "host_uid": box.settings.host_uid,
            "limits": box.settings.limits.to_json(),
            "agent": "running" if box.alive() else "stopped",
            "network_policy": None if policy.allow is None else list(policy.allow),
        }
        suspended = (path / layout.SUSPENDED).exists()
        return Info(status="suspended" if suspended else "running", raw=raw)

    def destroy(self, handle: Handle) -> None:
        """Kill every process of the sandbox (its agent first), then remove it; gone is fine."""
        try:
            box = self._handle_box(handle)
        except NotFound:
            return
        self._forget(box.directory)
        if not box.delete(timeout=_STOP_WAIT):
            raise Unavailable(Reason.DESTROY_UNCONFIRMED)

    def list_all_names(self) -> frozenset[str]:
        base = layout.root()
        return frozenset(
            entry.name
            for entry in base.iterdir()
            if not entry.name.startswith(".") and layout.read_meta(entry) is not None
        )

    def suspend(self, handle: Handle) -> None:
        """Freeze (SIGSTOP) every process of the sandbox."""
        box = self._handle_box(handle)
        (box.directory / layout.SUSPENDED).touch()
        try:
            box.suspend()
        except EngineError as error:
            raise _engine_error(error) from None

    def resume(self, handle: Handle) -> Handle:
        """Continue (SIGCONT) every process of the sandbox."""
        self._wake(self._handle_box(handle))
        return handle

    def _runnable(self, handle: Handle) -> Box:
        """The sandbox's box, awake, for running a command; ``Unavailable`` under
        ``local.isolation="require"`` if it would run unisolated."""
        box = self._handle_box(handle)
        mode.check_adoptable(box.settings.isolated)
        self._wake(box)
        return box

    def _wake(self, box: Box) -> None:
        marker = box.directory / layout.SUSPENDED
        if marker.exists():
            try:
                box.resume()
            except EngineError as error:
                raise _engine_error(error) from None
            marker.unlink(missing_ok=True)

    # -- files ---------------------------------------------------------------------------

    def _sandbox_path(self, box: Box, path: object) -> str:
        if not isinstance(path, str) or not path or "\x00" in path:
            raise Invalid(Reason.PATH, problem="must be a non-empty str without NUL")
        return path if path.startswith("/") else f"{box.settings.home}/{path}"

    def write_file(self, handle: Handle, path: str, data: Any, *, mode: int | None = None) -> None:
        """Write a file as a command would see it: absolute paths are the sandbox's own
        (``/etc/app.env`` is what a command reads at ``/etc/app.env``), relative ones are
        relative to the home. Symlinks resolve inside the sandbox; read-only system
        paths are ``Invalid``."""
        payload = data
        box = self._handle_box(handle)
        target = self._sandbox_path(box, path)
        try:
            with box.root() as root_fd:
                safefs.write_file(root_fd, target, payload, mode=mode, masked=box.masked())
        except PermissionError as error:
            raise files.error_for(error, target, Reason.WRITE_FAILED) from None
        except safefs.PathRefused as refused:
            raise Invalid(Reason.PATH, problem=str(refused)) from None
        except OSError as error:
            raise Invalid(Reason.WRITE_FAILED, path=path, problem=error.strerror) from None

    def read_file(self, handle: Handle, path: str, *, max_bytes: int | None = None) -> bytes:
        """The bytes a command reads at ``path`` in the sandbox's own files (symlinks
        resolve inside the sandbox, never out of it); a FIFO, device or other non-file
        and the host's read-only system paths are ``Invalid`` (:mod:`.files`). Works on a
        suspended sandbox too."""
        box = self._handle_box(handle)
        return files.read(box, self._sandbox_path(box, path), max_bytes)

    def list_files(self, handle: Handle, path: str) -> list[FileInfo]:
        """The entries of the directory a command sees at ``path`` (a symlinked directory
        resolves inside the sandbox), each as it is itself: a symlink entry is
        ``"symlink"``, never followed (:mod:`.files`)."""
        box = self._handle_box(handle)
        return files.listing(box, self._sandbox_path(box, path))

    def host_path(self, handle: Handle, path: str) -> str:
        """The path a command inside sees: the sandbox path itself when isolated, its
        location under the sandbox's ``fs/`` otherwise."""
        box = self._handle_box(handle)
        return box.agent_path(self._sandbox_path(box, path))

    # -- commands --------------------------------------------------------------------------

    def _cwd(self, box: Box, dir: str | None) -> str:
        return box.agent_path(box.settings.home if dir is None else self._sandbox_path(box, dir))

    def exec(
        self,
        handle: Handle,
        cmd: str,
        args: Sequence[str] = (),
        *,
        env: dict[str, str] | None = None,
        dir: str | None = None,
        timeout: float | None = None,
        stderr_to_stdout: bool = False,
        max_bytes: int | None = None,
    ) -> ExecResult:
        """Run a private process to its end; one deadline, and the process is killed
        when it expires or its output passes ``max_bytes``. Nothing is written to disk.
        The end comes once the process has exited and its stdout and stderr reached end
        of file (every writer closed, background children included), as with
        ``subprocess``; the exit code is the main process's. With ``stderr_to_stdout``
        the command gets one pipe for both (``2>&1``): ``output`` is in the order it
        wrote. The agent reads the process's pipes only as fast as this collects (it
        blocks on write meanwhile), so what waits is in the sandbox."""
        argv = tuple(args)
        deadline = Deadline(timeout)
        deadline.check()
        box = self._runnable(handle)
        cwd = self._cwd(box, dir)
        try:
            _, _, subscription = box.run(
                [cmd, *argv],
                env=box.environment(env),
                cwd=cwd,
                timeout=deadline.remaining(),
                merge=stderr_to_stdout,
            )
        except TimeoutError:
            raise deadline.error() from None
        except Refused as refusal:
            raise _refusal(refusal, dir) from None
        except EngineError as error:
            raise _engine_error(error) from None
        try:
            return collect_frames(
                _exec_frames(subscription, deadline),
                deadline=deadline,
                stderr_to_stdout=stderr_to_stdout,
                max_bytes=max_bytes,
            )
        finally:
            # Before its end, closing kills the process (see Box.run).
            subscription.close()

    def spawn(
        self,
        handle: Handle,
        cmd: str,
        args: Sequence[str] = (),
        *,
        owner: Owner | None = None,
        env: dict[str, str] | None = None,
        dir: str | None = None,
        stdin: bool = False,
        tty: bool = False,
        detachable: bool = False,
    ) -> Command:
        """Start a detachable session (every local spawn is one). Finished sessions beyond
        ``local.retained_sessions``, or beyond ``local.retained_bytes`` together, are
        removed, oldest end first (:func:`.settings.retained_bytes`)."""
        argv = tuple(args)
        retain = settings.retained_sessions()
        retain_bytes = settings.retained_bytes()
        box = self._runnable(handle)
        cwd = self._cwd(box, dir)
        stream = Stream(new_ref("local"), owner, label="local", stdin=stdin)
        session_id = _new_id("s")
        try:
            _, subscription = box.spawn(
                session_id,
                [cmd, *argv],
                env=box.environment(env, tty=tty),
                cwd=cwd,
                stdin=stdin,
                tty=tty,
                retain=retain,
                retain_bytes=retain_bytes,
            )
        except Refused as refusal:
            raise _refusal(refusal, dir) from None
        except (EngineError, TimeoutError) as error:
            raise _engine_error(EngineError(str(error))) from None
        assert subscription is not None
        return self._followed(LocalCommandEnd(stream, box, session_id), subscription)

    def transfer_command(
        self, handle: Handle, args: Sequence[str], *, owner: Owner, stdin: bool
    ) -> Command:
        """A transfer's ``sh`` as an ephemeral process, like ``exec``'s: nothing of it is
        journaled nor listed (a download's whole stream would otherwise be kept on disk
        as a finished session), and it is killed if stopped before its end."""
        box = self._runnable(handle)
        stream = Stream(new_ref("local"), owner, label="local", stdin=stdin)
        try:
            sid, _, subscription = box.run(
                ["sh", *args], env=box.environment(None), cwd=self._cwd(box, None), stdin=stdin
            )
        except Refused as refusal:
            raise _refusal(refusal, None) from None
        except (EngineError, TimeoutError) as error:
            raise _engine_error(EngineError(str(error))) from None
        return self._followed(LocalCommandEnd(stream, box, sid), subscription)

    def _followed(self, end: LocalCommandEnd, subscription: Subscription) -> Command:
        """The command whose end is ``end``, its reader started on ``subscription``."""
        follow_into(end.stream, subscription, end)
        return Command(
            self.provider,
            end.stream.ref,
            frames=end.stream.frames,
            private=end,
            session_id=end.session_id,
        )

    # -- sessions --------------------------------------------------------------------------

    def list_sessions(self, handle: Handle) -> list[Session]:
        """Every spawn's session kept on disk, running or finished, by id.

        A session with an exit record has ``ended`` True and the code its ``Exit``
        carries (None for an end that was lost). One without is running while the
        sandbox's agent serves (``ended`` False, also after ``stop_command``: a local
        spawn goes on until it ends or ``terminate_session``); with no agent it has
        ended and its end is lost (``ended`` True, no code). Where an agent started
        while listing, a session without an exit record is ``ended`` None."""
        box = self._handle_box(handle)
        served: bool | None = box.alive()
        found = box.sessions()
        if not served and box.alive():
            served = None
        sessions = []
        for record in found:
            ended, exit_code = _known_end(record, served)
            sessions.append(
                Session(
                    id=record.id,
                    command=" ".join(record.argv),
                    created_at=record.created_at,
                    last_activity_at=record.last_activity(),
                    tty=record.tty,
                    ended=ended,
                    exit_code=exit_code,
                )
            )
        return sessions

    def _existing_box(self, handle: Handle) -> Box | None:
        try:
            return self._handle_box(handle)
        except NotFound:
            return None

    def attach(
        self, handle: Handle, session_id: str, *, owner: Owner | None = None, stdin: bool = False
    ) -> Command:
        """Replay the session from byte zero, then tail it to its real exit."""
        box = self._existing_box(handle)
        record = box.session(session_id) if box is not None else None
        if box is None or record is None:
            raise NotFound(Reason.SESSION, name=session_id)
        live = record.end() is None and box.alive()
        stream = Stream(new_ref("local"), owner, label="local", stdin=stdin)
        try:
            subscription = box.attach(session_id)
        except (EngineError, TimeoutError) as error:
            raise _engine_error(EngineError(str(error))) from None
        if subscription is None:
            raise NotFound(Reason.SESSION, name=session_id)
        return self._followed(LocalCommandEnd(stream, box, session_id, live=live), subscription)

    def terminate_session(
        self, handle: Handle, session_id: str, *, timeout: float = 10.0, mode: str = "graceful"
    ) -> None:
        """TERM (graceful) or KILL (force) the session's process group, confirmed by its
        recorded end; a session that has already ended is success in both modes. An
        absent session (the sandbox has no record of it, or there is no such sandbox) is
        success in graceful mode and ``Unavailable("termination_unconfirmed")`` in force
        mode; no recorded end within ``timeout`` is ``DeadlineExpired("termination_timeout")``."""
        timeout_ms = _args.termination_ms(timeout)
        box = self._existing_box(handle)
        record = box.session(session_id) if box is not None else None
        if box is None or record is None:
            if mode == "force":
                raise Unavailable(Reason.TERMINATION_UNCONFIRMED)
            return
        deadline = Deadline(timeout_ms / 1000, reason=Reason.TERMINATION_TIMEOUT)
        try:
            follower = box.attach(session_id, from_end=True)
            if follower is None:
                raise Unavailable(Reason.TERMINATION_UNCONFIRMED)
            if mode == "force":
                box.signal(session_id, signal.SIGKILL)
            elif box.signal(session_id, signal.SIGTERM):
                box.signal(session_id, signal.SIGCONT)
            try:
                end = follower.wait_end(deadline.remaining() or 0.0)
            finally:
                follower.close()
        except (EngineError, OSError):
            raise Unavailable(Reason.TERMINATION_TRANSPORT_FAILED) from None
        if end is None and deadline.expired():
            raise deadline.error()
        if not isinstance(end, events.Exited):
            raise Unavailable(Reason.TERMINATION_UNCONFIRMED)

    # -- policy and URLs ----------------------------------------------------------------

    def apply_network_policy(self, handle: Handle, policy: NetworkPolicy) -> None:
        """Put ``policy`` in force at once, across suspend/resume and agent restarts: once
        this returns, every new connection is decided by it and every relayed connection
        it does not permit has been cut (``allow=[]`` cuts them all and closes the proxy
        port). ``Invalid`` for an entry that is not a domain; ``NotSupported`` for an
        unisolated sandbox; ``Unavailable(("policy_failed", reason))`` when the running
        sandbox could not put it in force (it is recorded all the same, and is in force
        from the agent's next start)."""
        if not isinstance(policy, NetworkPolicy):
            raise TypeError(f"expected a NetworkPolicy, got {type(policy).__name__}")
        box = self._handle_box(handle)
        if not box.settings.isolated:
            raise NotSupported(Reason.NETWORK_POLICY, problem="the sandbox is not isolated")
        try:
            allow = tuple(egress.check_domain(entry) for entry in policy.allow)
        except ValueError as error:
            raise Invalid(Reason.POLICY, problem=str(error)) from None
        try:
            box.set_policy(egress.Policy(allow=allow, resolve=_pins()))
        except (OSError, EngineError) as error:
            raise Unavailable(Reason.POLICY_FAILED, problem=str(error)) from None

    def public_url(self, handle: Handle) -> str | None:
        """``None``: local sandboxes have no public URL."""
        layout.existing(handle.name, _base(handle))
        return None

    # -- checkpoints ----------------------------------------------------------------------

    def create_checkpoint(self, handle: Handle, *, comment: str | None = None) -> str:
        """Snapshot the sandbox's files (regular files, directories and symlinks)."""
        box = self._handle_box(handle)
        checkpoint_id = _new_id("cp-")
        try:
            checkpoints.create(box, checkpoint_id, comment or "")
        except OSError as error:
            raise Unavailable(Reason.CHECKPOINT_FAILED, problem=error.strerror) from None
        return checkpoint_id

    def restore_checkpoint(self, handle: Handle, checkpoint_id: str) -> None:
        """Put a snapshot back in place of the sandbox's files; like restoring a VM, this
        ends the sandbox's running commands. Any failure is ``RestoreFailed``."""
        if not isinstance(checkpoint_id, str) or _args.SESSION_ID.fullmatch(checkpoint_id) is None:
            raise Invalid(Reason.CHECKPOINT_ID, problem="must be 1-256 characters of [A-Za-z0-9_-]")
        box = self._handle_box(handle)
        if not checkpoints.exists(box, checkpoint_id):
            raise RestoreFailed(Reason.NO_SUCH_CHECKPOINT, name=checkpoint_id)
        if not box.stop(timeout=_STOP_WAIT):
            raise RestoreFailed(
                Reason.RESTORE_FAILED, problem="the sandbox's processes could not be ended"
            )
        try:
            checkpoints.restore(box, checkpoint_id)
        except OSError as error:
            raise RestoreFailed(Reason.RESTORE_FAILED, problem=error.strerror) from None


def _base(handle: Handle) -> Path | None:
    """The root ``handle`` carries (:class:`.layout.Located`), or None: the configured one."""
    located = handle.private
    return located.root if isinstance(located, layout.Located) else None


def _isolation_note(box: Box) -> str:
    """What isolates the sandbox, or why nothing does, in words (for ``get``)."""
    support = isolation.support()
    if not box.settings.isolated:
        why = support.reason or "created under local.isolation='off'"
        return f"unisolated (commands run as the caller, with its files and network): {why}"
    filtered = (
        "a system call filter"
        if support.filter is not None
        else f"no system call filter ({support.filter_reason})"
    )
    user = (
        "the caller's uid"
        if box.settings.host_uid is None
        else f"host uid {box.settings.host_uid}, its own"
    )
    return f"namespaces, {filtered}; its user is {user}"


def _pins() -> dict[str, str]:
    """``local.egress_hosts``: names the egress proxy resolves to a fixed address, by the
    setting's rule (names lowercased, ``Invalid(("config", "local", "egress_hosts"))``)."""
    pins = settings.egress_hosts()
    return pins


def _refusal(refusal: Refused, dir: str | None) -> Exception:
    if refusal.code == "bad_cwd":
        return Invalid(Reason.DIR, problem=reasons.no_such_dir(str(dir)))
    if refusal.code == "bad_env":
        return Invalid(Reason.ENV, problem=str(refusal))
    if refusal.code == "bad_argv":
        return Invalid(Reason.ARGS, problem=str(refusal))
    return Unavailable(Reason.AGENT_REFUSED, code=refusal.code)
