"""The facade: module functions that resolve the adapter and delegate.

Each function resolves its adapter through the registry once per call, before
anything else and outside any retry loop. Handles and commands it returns are
tagged with the registry name they were resolved under, so they dispatch back
to the adapter that made them. The idempotent operations retry transient
taxonomy errors (:func:`managoat_sandbox.retry.idempotent`), drawing on one
retry budget per provider shared by every thread; every other
operation runs exactly once. Arguments are checked here, once, before the
adapter is called (:func:`managoat_sandbox._args.normalised`, one check per
parameter name): wrong types are ``TypeError``, unusable values ``Invalid``,
and adapters receive clean values (positional parameters of the contract
passed by position, keyword-only ones by keyword).
"""

from __future__ import annotations

import builtins
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs

from . import _args
from ._collect import EXEC_MAX_BYTES
from ._deadline import Deadline
from .contract import KNOWN_CAPABILITIES, Adapter, Capability, Owner
from .errors import NotSupported, SandboxError
from .reasons import Reason
from .registry import adapter_for, adapters
from .retry import budget_for, idempotent
from .types import (
    Command,
    ExecResult,
    FileInfo,
    Handle,
    Info,
    NetworkPolicy,
    Session,
    TransferProgress,
)

__all__ = [
    "adapter_for",
    "adapters",
    "apply_network_policy",
    "attach",
    "build_handle",
    "capabilities",
    "close_stdin",
    "create",
    "create_checkpoint",
    "create_checkpoint_once",
    "create_new",
    "destroy",
    "destroy_once",
    "download",
    "exec",
    "get",
    "host_path",
    "list_all_names",
    "list_files",
    "list_sessions",
    "public_url",
    "read_file",
    "restore_checkpoint",
    "resume",
    "spawn",
    "stop_command",
    "supports",
    "suspend",
    "terminate_session",
    "upload",
    "write_file",
    "write_stdin",
]

log = logging.getLogger("managoat_sandbox")

_Op = TypeVar("_Op", bound=Callable[..., Any])


# -- resolution and tagging ---------------------------------------------------


def _for_handle(handle: object) -> Adapter:
    if not isinstance(handle, Handle):
        raise TypeError(f"expected a Handle, got {type(handle).__name__}")
    return adapter_for(handle.provider)


def _for_command(command: object) -> Adapter:
    if not isinstance(command, Command):
        raise TypeError(f"expected a Command, got {type(command).__name__}")
    return adapter_for(command.provider)


def _tag_handle(handle: Handle, provider: str) -> Handle:
    return handle if handle.provider == provider else attrs.evolve(handle, provider=provider)


def _tag_command(command: Command, provider: str) -> Command:
    return command if command.provider == provider else attrs.evolve(command, provider=provider)


def _retried(provider: str, operation: _Op) -> _Op:
    """``operation`` retried as idempotent, its retries drawn from ``provider``'s budget."""
    return idempotent(budget=budget_for(provider))(operation)


def _implements(adapter: Adapter, operation: str) -> bool:
    return getattr(type(adapter), operation) is not getattr(Adapter, operation)


# -- creation side ------------------------------------------------------------


def build_handle(provider: str, name: str) -> Handle:
    """A handle for ``name`` at ``provider``; pure, no I/O."""
    adapter = adapter_for(provider)
    return _tag_handle(adapter.build_handle(_args.normalised(name=name)["name"]), provider)


def create(provider: str, name: str, **opts: Any) -> Handle:
    """Create ``name``, adopting an existing sandbox of that name (retried)."""
    adapter = adapter_for(provider)
    clean = _args.normalised(name=name)
    return _tag_handle(_retried(provider, adapter.create)(clean["name"], **opts), provider)


def create_new(provider: str, name: str, *, timeout: float = 120.0, **opts: Any) -> Handle:
    """One creation attempt that never adopts (``AlreadyExists``); never retried.

    ``NotSupported`` when the adapter lacks it — never a fallback to ``create``.
    """
    adapter = adapter_for(provider)
    if not _implements(adapter, "create_new"):
        raise NotSupported(Reason.CREATE_NEW)
    clean = _args.normalised(name=name)
    seconds = _args.bounded_timeout(timeout, _args.BOUNDED_LIMIT, Reason.CREATE_TIMEOUT)
    return _tag_handle(adapter.create_new(clean["name"], timeout=seconds, **opts), provider)


def list_all_names(provider: str) -> frozenset[str]:
    """Every sandbox name at ``provider``, or ``Truncated`` (retried)."""
    adapter = adapter_for(provider)
    return frozenset(_retried(provider, adapter.list_all_names)())


def capabilities(provider: str) -> frozenset[str]:
    """The capabilities of the adapter serving ``provider``."""
    return frozenset(adapter_for(provider).capabilities())


def supports(target: str | Handle | Command, capability: str) -> bool:
    """Whether the adapter behind ``target`` advertises ``capability``.

    ``target`` is a provider name, a ``Handle`` or a ``Command``; an unknown
    capability name is ``Invalid(("capability", ...))`` (not a str: ``TypeError``).
    """
    if isinstance(target, (Handle, Command)):
        adapter = adapter_for(target.provider)
    else:
        adapter = adapter_for(target)
    return _args.one_of(capability, KNOWN_CAPABILITIES, Reason.CAPABILITY) in adapter.capabilities()


# -- handle side --------------------------------------------------------------


def get(handle: Handle) -> Info:
    """The sandbox's status; ``NotFound`` only when definitively gone (retried)."""
    adapter = _for_handle(handle)
    return _retried(handle.provider, adapter.get)(handle)


def destroy(handle: Handle) -> None:
    """Destroy the sandbox; an already-gone sandbox is fine (retried)."""
    adapter = _for_handle(handle)
    _retried(handle.provider, adapter.destroy)(handle)


def destroy_once(handle: Handle, *, timeout: float = 120.0) -> None:
    """One bounded deletion attempt needing confirmed absence; never retried."""
    adapter = _for_handle(handle)
    if not _implements(adapter, "destroy_once"):
        raise NotSupported(Reason.DESTROY_ONCE)
    seconds = _args.bounded_timeout(timeout, _args.BOUNDED_LIMIT, Reason.DELETE_TIMEOUT)
    adapter.destroy_once(handle, timeout=seconds)


def suspend(handle: Handle) -> None:
    """Park the sandbox (retried)."""
    adapter = _for_handle(handle)
    _retried(handle.provider, adapter.suspend)(handle)


def resume(handle: Handle) -> Handle:
    """Wake the sandbox and return a usable handle (retried)."""
    adapter = _for_handle(handle)
    return _tag_handle(_retried(handle.provider, adapter.resume)(handle), handle.provider)


def write_file(handle: Handle, path: str, data: Any, *, mode: int | None = None) -> None:
    """Write ``data`` at ``path``, creating parent directories (retried).

    ``path`` is the sandbox's own absolute path of a file, what a command in
    the sandbox opens at that path; the same rule holds on every provider and
    is checked here, before the adapter is called:

    * absolute: a relative path is ``Invalid`` (providers would resolve it
      against different directories);
    * a file: a trailing ``/`` (``"/app/"``, ``"/"``) is ``Invalid``;
    * no ``.`` or ``..`` component, no NUL, not empty, at most 4096 bytes as
      UTF-8 (lone surrogates refused) — each ``Invalid``.

    Every such refusal is ``Invalid(("path", <what is wrong>))``; a path that
    is not a str is ``TypeError``. ``mode`` is ``None`` (the provider's
    default) or a permission ``0 <= mode <= 0o7777`` (else
    ``Invalid(("mode", ...))``; not an int is ``TypeError``), applied to the
    written file. ``data`` is flattened to bytes once, before the first
    attempt.
    """
    adapter = _for_handle(handle)
    clean = _args.normalised(path=path, data=data, mode=mode)
    _retried(handle.provider, adapter.write_file)(
        handle, clean.pop("path"), clean.pop("data"), **clean
    )


def read_file(handle: Handle, path: str, *, max_bytes: int | None = None) -> bytes:
    """The bytes of the file at ``path`` (retried; capability ``read_file``).

    ``path`` follows :func:`write_file`'s rule. ``NotFound`` when nothing is
    there, ``Invalid`` for a directory, ``Truncated(("max_bytes", n))`` when
    the file holds more than ``max_bytes`` bytes (``None``: no limit; a
    negative value is ``Invalid``). ``NotSupported`` without the capability.
    """
    adapter = _for_handle(handle)
    clean = _args.normalised(path=path, max_bytes=max_bytes)
    if Capability.READ_FILE not in adapter.capabilities():
        raise NotSupported(Reason.READ_FILE)
    return _retried(handle.provider, adapter.read_file)(handle, clean.pop("path"), **clean)


def list_files(handle: Handle, path: str) -> builtins.list[FileInfo]:
    """The entries of the directory at ``path`` (retried; capability ``list_files``).

    ``path`` is absolute (``/`` and a trailing ``/`` are fine, no ``.`` or
    ``..`` component). ``NotFound`` when nothing is there, ``Invalid`` for a
    path that is not a directory; ``NotSupported`` without the capability.
    """
    adapter = _for_handle(handle)
    path = _args.dir_path(path)
    if Capability.LIST_FILES not in adapter.capabilities():
        raise NotSupported(Reason.LIST_FILES)
    return builtins.list(_retried(handle.provider, adapter.list_files)(handle, path))


def exec(
    handle: Handle,
    cmd: str,
    args: Sequence[str] = (),
    *,
    env: dict[str, str] | None = None,
    dir: str | None = None,
    timeout: float | None = None,
    stderr_to_stdout: bool = False,
    max_bytes: int | None = EXEC_MAX_BYTES,
) -> ExecResult:
    """Run a command to exit and collect its output; a nonzero exit is data.

    ``output, code = exec(...)`` unpacks stdout and the real exit code; the
    result's ``stderr`` holds the command's stderr. With
    ``stderr_to_stdout=True`` both streams go to ``output`` — in the order the
    command wrote them where it gets one pipe for both (local, the emulators'
    engine, Daytona), by arrival where the provider delivers them apart (E2B,
    Sprites) — and ``stderr`` is empty.

    ``max_bytes`` bounds the output exec holds, stdout and stderr together
    (default :data:`~managoat_sandbox.streaming.EXEC_MAX_BYTES`, 64 MiB;
    ``None``: no limit; negative: ``Invalid``). A command that writes more
    ends the exec with ``Truncated(("max_bytes", n))`` as soon as the limit is
    passed, and is stopped; use ``spawn`` to stream more than you want to hold.

    ``timeout`` is one monotonic deadline in seconds that output never
    extends; expiry is ``DeadlineExpired(("exec_timeout", timeout))`` (an
    ``Unavailable`` and a ``TimeoutError``; the remote process may go on).
    ``timeout=0`` raises that at once, dispatching nothing; ``None`` or ``inf``
    is no limit; a negative or NaN timeout, or one beyond
    ``threading.TIMEOUT_MAX``, is ``Invalid(("timeout", ...))`` naming the
    allowed range. Arguments are checked before anything is dispatched: a NUL
    in ``cmd``, ``args``, ``dir`` or ``env``, or ``=`` in an env name, is
    ``Invalid``. Runs once, never retried.
    """
    adapter = _for_handle(handle)
    clean = _args.normalised(
        cmd=cmd,
        args=args,
        env=env,
        dir=dir,
        timeout=timeout,
        stderr_to_stdout=stderr_to_stdout,
        max_bytes=max_bytes,
    )
    Deadline(timeout).check()
    return adapter.exec(handle, clean.pop("cmd"), clean.pop("args"), **clean)


def spawn(
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
    """Start a streaming command; frames go to ``owner`` (a callable or a queue).

    With ``owner=None`` a ``queue.Queue`` is made and exposed as
    ``command.frames``; it holds at most 8 MiB of output that has not been
    read, after which the command's reader waits (and ``stop_command`` still
    returns at once): unread output waits in the sandbox, not in this
    process. A queue you pass keeps the bound you gave it; a callback holds up
    the reader for as long as it runs. ``tty=True`` needs the ``tty``
    capability and ``detachable=True`` the ``attach`` capability (else
    ``NotSupported``).
    """
    adapter = _for_handle(handle)
    clean = _args.normalised(
        cmd=cmd,
        args=args,
        owner=owner,
        env=env,
        dir=dir,
        stdin=stdin,
        tty=tty,
        detachable=detachable,
    )
    caps = adapter.capabilities()
    if clean["tty"] and Capability.TTY not in caps:
        raise NotSupported(Reason.TTY)
    if clean["detachable"] and Capability.ATTACH not in caps:
        raise NotSupported(Reason.ATTACH)
    return _tag_command(
        adapter.spawn(handle, clean.pop("cmd"), clean.pop("args"), **clean), handle.provider
    )


def write_stdin(command: Command, data: Any) -> None:
    """Write to the command's stdin. Total: ``CommandExited`` or ``WriteFailed``."""
    adapter = _for_command(command)
    adapter.write_stdin(command, _args.normalised(data=data)["data"])


def close_stdin(command: Command) -> None:
    """Send EOF to the command's stdin."""
    adapter = _for_command(command)
    adapter.close_stdin(command)


def stop_command(command: Command) -> None:
    """Tear down this process's end of the command. Idempotent; never a taxonomy error."""
    adapter = _for_command(command)
    try:
        adapter.stop_command(command)
    except SandboxError as error:
        log.warning("stop_command on %s raised %s; ignored", command.provider, type(error).__name__)


def list_sessions(handle: Handle) -> list[Session]:
    """The sandbox's detachable sessions (retried)."""
    adapter = _for_handle(handle)
    return builtins.list(_retried(handle.provider, adapter.list_sessions)(handle))


def attach(
    handle: Handle, session_id: str, *, owner: Owner | None = None, stdin: bool = False
) -> Command:
    """Rejoin a session: its output from byte zero, then the live tail. Never retried."""
    adapter = _for_handle(handle)
    clean = _args.normalised(session_id=session_id, owner=owner, stdin=stdin)
    return _tag_command(adapter.attach(handle, clean.pop("session_id"), **clean), handle.provider)


def terminate_session(
    handle: Handle, session_id: str, *, timeout: float = 10.0, mode: str = "graceful"
) -> None:
    """Terminate a remote session with provider confirmation; never retried.

    Order: resolve the adapter; validate (``Invalid("termination_request")``);
    ``NotSupported`` without ``terminate_session``; ``NotSupported`` for
    ``mode="force"`` without ``force_terminate_session`` — the adapter is not
    called in either case; otherwise delegate.

    One answer for "already gone", on every adapter and in both modes: a
    session that existed and has ended (on its own, or terminated before) is
    success — terminating it again is a no-op; a session that never existed
    is ``NotFound`` (so is one the provider has forgotten, where it forgets
    ended sessions).
    """
    adapter = _for_handle(handle)
    session_id, _, mode = _args.termination_request(session_id, timeout, mode)
    caps = adapter.capabilities()
    if Capability.TERMINATE_SESSION not in caps or not _implements(adapter, "terminate_session"):
        raise NotSupported(Reason.TERMINATE_SESSION)
    if mode == "force" and Capability.FORCE_TERMINATE_SESSION not in caps:
        raise NotSupported(Reason.FORCE_TERMINATE_SESSION)
    adapter.terminate_session(handle, session_id, timeout=timeout, mode=mode)


def apply_network_policy(handle: Handle, policy: NetworkPolicy) -> None:
    """Apply the egress allowlist; ``allow=[]`` denies all egress (retried)."""
    adapter = _for_handle(handle)
    if not isinstance(policy, NetworkPolicy):
        raise TypeError(f"policy must be a NetworkPolicy, got {type(policy).__name__}")
    _retried(handle.provider, adapter.apply_network_policy)(handle, policy)


def public_url(handle: Handle) -> str | None:
    """The sandbox's openable URL, or ``None`` where the platform has none (retried)."""
    adapter = _for_handle(handle)
    return _retried(handle.provider, adapter.public_url)(handle)


def create_checkpoint(handle: Handle, *, comment: str | None = None) -> str:
    """Snapshot the sandbox; ``NotSupported`` unless ``checkpoint`` is advertised."""
    adapter = _for_handle(handle)
    return adapter.create_checkpoint(handle, **_args.normalised(comment=comment))


def create_checkpoint_once(handle: Handle, *, operation_id: str, timeout: float = 120.0) -> str:
    """Exactly one checkpoint correlated to ``operation_id``, bounded; never retried."""
    adapter = _for_handle(handle)
    if not _implements(adapter, "create_checkpoint_once"):
        raise NotSupported(Reason.CREATE_CHECKPOINT_ONCE)
    seconds = _args.bounded_timeout(timeout, _args.BOUNDED_LIMIT, Reason.CHECKPOINT_TIMEOUT)
    return adapter.create_checkpoint_once(handle, operation_id=operation_id, timeout=seconds)


def restore_checkpoint(handle: Handle, checkpoint_id: str) -> None:
    """Restore a checkpoint; a reported failure is ``RestoreFailed``."""
    adapter = _for_handle(handle)
    if not isinstance(checkpoint_id, str):
        raise TypeError(f"checkpoint_id must be a str, got {type(checkpoint_id).__name__}")
    adapter.restore_checkpoint(handle, checkpoint_id)


# -- whole trees ------------------------------------------------------------------


def upload(
    handle: Handle,
    local_path: str | os.PathLike[str],
    remote_path: str,
    *,
    progress: Callable[[TransferProgress], object] | None = None,
    timeout: float | None = None,
) -> TransferProgress:
    """Copy the local file, symbolic link or directory tree at ``local_path`` to the
    absolute ``remote_path``, which becomes the copy (a directory there is merged
    into, files replaced): byte-exact, with permission bits and modification
    times, links kept as links, streamed (memory bounded whatever the size).

    ``progress`` is called with a :class:`TransferProgress` after each file and
    every MiB, totals known. ``timeout`` bounds the whole copy
    (``DeadlineExpired("transfer_timeout")``). Needs the ``transfer`` capability
    (else ``NotSupported``); never retried. A local path that cannot be read is
    the ``OSError`` reading it raised; the sandbox refusing is ``Denied`` or
    ``Invalid(("transfer", ...))``. Returns the totals copied.
    """
    return _transfer(handle, "upload", local_path, remote_path, progress=progress, timeout=timeout)


def download(
    handle: Handle,
    remote_path: str,
    local_path: str | os.PathLike[str],
    *,
    progress: Callable[[TransferProgress], object] | None = None,
    timeout: float | None = None,
) -> TransferProgress:
    """Copy the sandbox's file, symbolic link or directory tree at the absolute
    ``remote_path`` to ``local_path``, which becomes the copy (a directory there is
    merged into, files replaced), as :func:`upload` copies — except that what comes
    from the sandbox is trusted with nothing: no entry is written outside
    ``local_path`` nor through a link (``Invalid(("archive_entry", name))``), and no
    setuid, setgid or sticky bit is kept.

    ``NotFound(("path", remote_path))`` when nothing is there. ``progress`` is
    called as for ``upload``, its totals ``None`` (not known before the end).
    """
    return _transfer(
        handle, "download", local_path, remote_path, progress=progress, timeout=timeout
    )


def _transfer(
    handle: Handle,
    direction: str,
    local_path: object,
    remote_path: object,
    *,
    progress: object,
    timeout: object,
) -> TransferProgress:
    """``upload`` or ``download`` (``direction``), its arguments checked and the
    ``transfer`` capability required, then delegated."""
    adapter = _for_handle(handle)
    clean = _args.normalised(
        local_path=local_path, remote_path=remote_path, progress=progress, timeout=timeout
    )
    if Capability.TRANSFER not in adapter.capabilities():
        raise NotSupported(Capability.TRANSFER)
    options = {"progress": clean["progress"], "timeout": clean["timeout"]}
    if direction == "upload":
        return adapter.upload(handle, clean["local_path"], clean["remote_path"], **options)
    return adapter.download(handle, clean["remote_path"], clean["local_path"], **options)


def host_path(handle: Handle, path: str) -> str:
    """The path a process inside the sandbox sees for ``path``."""
    adapter = _for_handle(handle)
    return adapter.host_path(handle, path)
