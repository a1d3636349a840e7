"""The ``local`` adapter: each sandbox a directory, each command a real process.

Every command runs as a real process in its own process group under a small
supervisor (:mod:`managoat_sandbox._engine`) that journals stdout and stderr in
the order it reads them (writes to both streams within the same instant cannot be
ordered across two pipes) and records the exit code atomically. A reader thread tails that
journal into frames, so the exit code is always the recorded one; a supervisor
that died without recording one ends the stream with
``Error(…, Unavailable("closed_before_exit"))``.

Sessions outlive the Python process that started them: any later process can
``list_sessions`` and ``attach`` (replay from byte zero, live tail, real exit).
Every ``spawn`` is such a detachable session; ``exec`` runs a private session
that is removed once collected (and killed if its deadline expires).

Isolation — read this before you rely on it. A local sandbox is **not** a
security boundary. Its commands run as the calling user with the host's
kernel, network and filesystem: ``HOME`` and the working directory point into
the sandbox's ``fs/`` directory and the environment is minimal (the host's
environment, and any secret in it, is not passed on), but absolute paths reach
the whole host, there is no network isolation (so ``network_policy`` is not
advertised and ``apply_network_policy`` raises ``NotSupported``), and there
are no resource limits. It is meant for development, CI and examples.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ... import _args
from ... import _engine as engine
from ..._deadline import Deadline, collect_exec
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
from ...types import Command, ExecResult, Handle, Info, NetworkPolicy, Session
from . import layout
from .commands import LocalCommand, follow_into

__all__ = ["Local"]

_KILL_WAIT = 5.0


def _new_id(prefix: str) -> str:
    """A unique id that sorts by creation time."""
    return f"{prefix}{time.time_ns():x}-{secrets.token_hex(3)}"


def _sessions(path: Path, kind: str = layout.SESSIONS) -> Iterator[Path]:
    base = path / kind
    if base.is_dir():
        for entry in base.iterdir():
            if (entry / "spec.json").is_file():
                yield entry


class Local(StreamingAdapter):
    """Real processes on this machine; see the module docstring for isolation."""

    provider = "local"
    command_type = LocalCommand

    _CAPABILITIES = frozenset(
        {
            Capability.SUSPEND,
            Capability.ATTACH,
            Capability.TTY,
            Capability.TERMINATE_SESSION,
            Capability.FORCE_TERMINATE_SESSION,
            Capability.CREATE_NEW,
            Capability.CHECKPOINT,
        }
    )

    def capabilities(self) -> frozenset[str]:
        return self._CAPABILITIES

    # -- lifecycle --------------------------------------------------------------

    def build_handle(self, name: str) -> Handle:
        return Handle(self.provider, layout.check_name(name))

    def create(self, name: str, **opts: Any) -> Handle:
        """Create the sandbox directory, adopting an existing one of that name."""
        if opts:
            raise TypeError(f"unknown create options: {sorted(opts)}")
        path = layout.sandbox_dir(name)
        try:
            path.mkdir()
        except FileExistsError:
            pass
        except OSError as error:
            raise Unavailable(("create_failed", error.strerror)) from None
        if path.is_symlink() or not path.is_dir():
            raise Invalid(f"{path} exists and is not a sandbox directory")
        layout.write_meta(path, name, None, replace=False)
        return self.build_handle(name)

    def create_new(self, name: str, *, timeout: float = 120.0, **opts: Any) -> Handle:
        """Create a sandbox that must not exist yet (``AlreadyExists``); atomic."""
        if opts:
            raise TypeError(f"unknown create_new options: {sorted(opts)}")
        _args.bounded_timeout(timeout, 120.0, "create_timeout")
        path = layout.sandbox_dir(name)
        try:
            path.mkdir()
        except FileExistsError:
            raise AlreadyExists(("sandbox", name)) from None
        except OSError as error:
            raise Unavailable(("create_failed", error.strerror)) from None
        instance_id = f"local-{uuid.uuid4().hex}"
        layout.write_meta(path, name, instance_id, replace=True)
        return Handle(self.provider, name, instance_id=instance_id)

    def get(self, handle: Handle) -> Info:
        path = layout.existing(handle.name)
        suspended = (path / layout.SUSPENDED).exists()
        return Info(status="suspended" if suspended else "running", raw=layout.read_meta(path))

    def destroy(self, handle: Handle) -> None:
        """Kill every process of the sandbox, then remove it; already gone is fine."""
        try:
            path = layout.existing(handle.name)
        except NotFound:
            return
        for kind in (layout.SESSIONS, layout.EXECS):
            for session_dir in _sessions(path, kind):
                engine.terminate(session_dir, timeout=_KILL_WAIT, force=True)
        trash = path.parent / f".trash-{secrets.token_hex(8)}"
        try:
            os.rename(path, trash)
        except FileNotFoundError:
            return
        shutil.rmtree(trash, ignore_errors=True)

    def list_all_names(self) -> frozenset[str]:
        root = layout.root()
        return frozenset(
            entry.name
            for entry in root.iterdir()
            if not entry.name.startswith(".")
            and not entry.is_symlink()
            and (entry / layout.META).is_file()
        )

    def suspend(self, handle: Handle) -> None:
        """Stop (SIGSTOP) every running process group of the sandbox."""
        path = layout.existing(handle.name)
        (path / layout.SUSPENDED).touch()
        self._signal_all(path, engine.suspend)

    def resume(self, handle: Handle) -> Handle:
        """Continue (SIGCONT) every stopped process group of the sandbox."""
        path = layout.existing(handle.name)
        self._wake(path)
        return handle

    def _wake(self, path: Path) -> None:
        marker = path / layout.SUSPENDED
        if marker.exists():
            self._signal_all(path, engine.resume)
            marker.unlink(missing_ok=True)

    @staticmethod
    def _signal_all(path: Path, action: Any) -> None:
        for kind in (layout.SESSIONS, layout.EXECS):
            for session_dir in _sessions(path, kind):
                try:
                    action(session_dir)
                except engine.EngineError as error:
                    raise Unavailable(("signal_failed", str(error))) from None

    # -- files ------------------------------------------------------------------

    def write_file(self, handle: Handle, path: str, data: Any, *, mode: int | None = None) -> None:
        """Write into the sandbox's ``fs/`` (absolute paths are rooted there)."""
        payload = _args.flatten_bytes(data)
        fs = layout.existing(handle.name) / layout.FS
        target = layout.inside(fs, path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.parent.resolve().is_relative_to(fs.resolve()):
                raise Invalid(("path", f"{path!r} escapes the sandbox through a symlink"))
            tmp = target.parent / f".{target.name}.{secrets.token_hex(4)}.tmp"
            tmp.write_bytes(payload)
            if mode is not None:
                os.chmod(tmp, mode)
            os.replace(tmp, target)
        except OSError as error:
            raise Invalid(("write_failed", path, error.strerror)) from None

    def host_path(self, handle: Handle, path: str) -> str:
        """The real path on this machine of a sandbox path."""
        return str(layout.inside(layout.sandbox_dir(handle.name) / layout.FS, path))

    # -- commands -------------------------------------------------------------------

    def _start(
        self,
        path: Path,
        kind: str,
        cmd: str,
        args: Sequence[str],
        *,
        owner: Owner | None,
        env: dict[str, str] | None,
        dir: str | None,
        stdin: bool,
        tty: bool,
    ) -> Command:
        fs = path / layout.FS
        cwd = fs if dir is None else layout.inside(fs, dir)
        if not cwd.is_dir():
            raise Invalid(("dir", f"{dir!r} is not a directory in the sandbox"))
        self._wake(path)
        child_env = {"HOME": str(fs), "SANDBOX_NAME": path.name, **(env or {})}
        stream = Stream(new_ref("local"), owner, label="local", stdin=stdin)
        session_dir = path / kind / _new_id("s")
        try:
            engine.start(session_dir, [cmd, *args], env=child_env, cwd=cwd, stdin=stdin,
                         tty=tty, inherit_env=False)
        except (OSError, engine.EngineError) as error:
            raise Unavailable(("spawn_failed", type(error).__name__)) from None
        follow_into(stream, session_dir)
        return Command(self.provider, stream.ref, frames=stream.frames,
                       private=LocalCommand(stream, session_dir), session_id=session_dir.name)

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
    ) -> ExecResult:
        """Run a private session to exit; an abandoned one (deadline) is killed."""
        argv = _args.str_args(args)
        deadline = Deadline(_args.optional_seconds(timeout))
        deadline.check()
        path = layout.existing(handle.name)

        def start(owner: Any) -> Command:
            return self._start(path, layout.EXECS, cmd, argv, owner=owner, env=env, dir=dir,
                               stdin=False, tty=False)

        def stop(command: Command) -> None:
            state: LocalCommand = command.private
            state.stop()
            engine.terminate(state.session_dir, timeout=_KILL_WAIT, force=True)
            shutil.rmtree(state.session_dir, ignore_errors=True)

        return collect_exec(start, stop, deadline=deadline, stderr_to_stdout=stderr_to_stdout)

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
        """Start a detachable session (every local spawn is one)."""
        argv = _args.str_args(args)
        path = layout.existing(handle.name)
        return self._start(path, layout.SESSIONS, cmd, argv, owner=owner, env=env, dir=dir,
                           stdin=stdin, tty=tty)

    # -- sessions -----------------------------------------------------------------------

    def list_sessions(self, handle: Handle) -> list[Session]:
        path = layout.existing(handle.name)
        found = []
        for session_dir in _sessions(path):
            try:
                spec = engine.read_spec(session_dir)
                activity = engine.last_activity(session_dir)
            except (OSError, engine.EngineError):
                continue
            found.append(
                Session(
                    id=session_dir.name,
                    command=" ".join(spec.argv),
                    created_at=spec.created_at,
                    last_activity_at=activity,
                    tty=spec.tty,
                )
            )
        return sorted(found, key=lambda s: s.id)

    def _session_dir(self, handle: Handle, session_id: str) -> Path | None:
        try:
            path = layout.existing(handle.name)
        except NotFound:
            return None
        session_dir = path / layout.SESSIONS / session_id
        return session_dir if (session_dir / "spec.json").is_file() else None

    def attach(
        self, handle: Handle, session_id: str, *, owner: Owner | None = None, stdin: bool = False
    ) -> Command:
        """Replay the session's journal from byte zero, then tail it to its real exit."""
        session_id = _args.session_id(session_id)
        session_dir = self._session_dir(handle, session_id)
        if session_dir is None:
            raise NotFound(("session", session_id))
        live = isinstance(engine.status(session_dir), engine.Running)
        stream = Stream(new_ref("local"), owner, label="local", stdin=stdin)
        follow_into(stream, session_dir)
        return Command(self.provider, stream.ref, frames=stream.frames,
                       private=LocalCommand(stream, session_dir, live=live),
                       session_id=session_id)

    def terminate_session(
        self, handle: Handle, session_id: str, *, timeout: float = 10.0, mode: str = "graceful"
    ) -> None:
        """TERM (graceful) or KILL (force) the session's process group, confirmed by
        the supervisor's exit record. A missing session is confirmed absence in
        graceful mode and ``Unavailable("termination_unconfirmed")`` in force mode."""
        session_id, timeout_ms, mode = _args.termination_request(session_id, timeout, mode)
        session_dir = self._session_dir(handle, session_id)
        if session_dir is None:
            if mode == "force":
                raise Unavailable("termination_unconfirmed")
            return
        try:
            code = engine.terminate(session_dir, timeout=timeout_ms / 1000, force=mode == "force")
        except engine.EngineError:
            raise Unavailable("termination_transport_failed") from None
        if code is None:
            raise Unavailable("termination_unconfirmed")

    # -- policy and URLs ----------------------------------------------------------------

    def apply_network_policy(self, handle: Handle, policy: NetworkPolicy) -> None:
        """Not supported: the local adapter cannot enforce egress rules (see module docs)."""
        raise NotSupported("network_policy")

    def public_url(self, handle: Handle) -> str | None:
        """``None``: local sandboxes have no public URL."""
        layout.existing(handle.name)
        return None

    # -- checkpoints ----------------------------------------------------------------------

    def create_checkpoint(self, handle: Handle, *, comment: str | None = None) -> str:
        """Snapshot the sandbox's ``fs/`` (a copy; symlinks kept as links)."""
        path = layout.existing(handle.name)
        checkpoint_id = _new_id("cp-")
        staging = path / layout.CHECKPOINTS / f".{checkpoint_id}"
        try:
            shutil.copytree(path / layout.FS, staging / layout.FS, symlinks=True)
            (staging / "comment").write_text(comment or "")
            os.rename(staging, path / layout.CHECKPOINTS / checkpoint_id)
        except OSError as error:
            shutil.rmtree(staging, ignore_errors=True)
            raise Unavailable(("checkpoint_failed", error.strerror)) from None
        return checkpoint_id

    def restore_checkpoint(self, handle: Handle, checkpoint_id: str) -> None:
        """Put a snapshot back in place of ``fs/``; any failure is ``RestoreFailed``."""
        if not isinstance(checkpoint_id, str) or _args.SESSION_ID.fullmatch(checkpoint_id) is None:
            raise Invalid(("checkpoint_id", "must be 1-256 characters of [A-Za-z0-9_-]"))
        path = layout.existing(handle.name)
        source = path / layout.CHECKPOINTS / checkpoint_id / layout.FS
        if not source.is_dir():
            raise RestoreFailed(("no_such_checkpoint", checkpoint_id))
        fs = path / layout.FS
        incoming = path / f".restore-{secrets.token_hex(4)}"
        outgoing = path / f".replaced-{secrets.token_hex(4)}"
        try:
            shutil.copytree(source, incoming, symlinks=True)
            os.rename(fs, outgoing)
            os.rename(incoming, fs)
        except OSError as error:
            if outgoing.exists() and not fs.exists():
                os.rename(outgoing, fs)
            shutil.rmtree(incoming, ignore_errors=True)
            raise RestoreFailed(("restore_failed", error.strerror)) from None
        shutil.rmtree(outgoing, ignore_errors=True)
