"""The adapter contract: the ABC every provider implements, and capability names."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .errors import NotSupported
from .frames import Frame
from .reasons import Reason
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
    "IDEMPOTENT_OPERATIONS",
    "KNOWN_CAPABILITIES",
    "Adapter",
    "Capability",
    "Owner",
    "SupportsPut",
]


class Capability:
    """Capability names: each is a promise the conformance suite checks."""

    SUSPEND = "suspend"
    NETWORK_POLICY = "network_policy"
    CHECKPOINT = "checkpoint"
    CREATE_CHECKPOINT_ONCE = "create_checkpoint_once"
    ATTACH = "attach"
    TTY = "tty"
    PUBLIC_URL = "public_url"
    TERMINATE_SESSION = "terminate_session"
    FORCE_TERMINATE_SESSION = "force_terminate_session"
    CREATE_NEW = "create_new"
    DESTROY_ONCE = "destroy_once"
    READ_FILE = "read_file"
    LIST_FILES = "list_files"
    ISOLATION = "isolation"
    TRANSFER = "transfer"


class IsolationWarning(UserWarning):
    """A sandbox is being created without isolation from the host (``local`` where
    the host cannot isolate and ``local.isolation`` is ``"auto"``): its commands run
    as the caller's processes, with the caller's files and network. Issued through
    :mod:`warnings` (shown by default), never raised as an error; the CLI prints it.
    """


KNOWN_CAPABILITIES: frozenset[str] = frozenset(
    value for key, value in vars(Capability).items() if key.isupper()
)

#: The operations that may be retried: repeating them cannot do harm.
IDEMPOTENT_OPERATIONS: frozenset[str] = frozenset(
    {
        "create",
        "get",
        "destroy",
        "list_all_names",
        "suspend",
        "resume",
        "write_file",
        "read_file",
        "list_files",
        "list_sessions",
        "apply_network_policy",
        "public_url",
    }
)


class SupportsPut(Protocol):
    """Anything with a ``put`` method, such as ``queue.Queue``."""

    def put(self, item: Any, block: bool = ..., timeout: float | None = ...) -> None: ...


#: Where frames go: a callable taking one frame, or a queue.
Owner = Callable[[Frame], object] | SupportsPut


class Adapter(ABC):
    """One provider's implementation of the contract.

    Adapters are thread-safe (one instance serves every thread), read their
    settings through :mod:`managoat_sandbox.config` at call time, and
    translate every failure into the error taxonomy. They receive clean values:
    the facade checks and normalises every argument once
    (:func:`managoat_sandbox._args.normalised`) — ``args`` a sequence of str,
    ``data`` bytes, ``timeout`` a finite float or ``None``, names, paths and ids
    valid — so an adapter does not check them again.

    Required (abstract): ``capabilities``, ``build_handle``, ``create``, ``get``,
    ``destroy``, ``list_all_names``, ``write_file``, ``exec``, ``spawn``,
    ``write_stdin``, ``close_stdin``, ``stop_command`` and ``list_sessions``. Every
    other operation is optional: here it raises ``NotSupported`` whose detail is
    the capability it needs (``suspend`` for ``suspend``/``resume``, ``attach``,
    ``network_policy`` for ``apply_network_policy``, ``public_url``, ``checkpoint``
    for ``create_checkpoint``/``restore_checkpoint``) or, for the operations named
    after their capability (``create_new``, ``destroy_once``,
    ``create_checkpoint_once``, ``terminate_session``, ``read_file``,
    ``list_files``), the operation — and never falls back to a neighbour. An
    adapter overrides the ones whose capability it advertises. A new adapter proves
    itself with :class:`managoat_sandbox.testing.ConformanceTests`.

    An adapter whose commands stream builds on
    :class:`managoat_sandbox.streaming.StreamingAdapter`, which implements
    ``write_stdin``, ``close_stdin`` and ``stop_command`` by delegating to the
    local end each command keeps in ``Command.private`` (a
    :class:`managoat_sandbox.streaming.CommandEnd`: an object with ``write``,
    ``close_stdin`` and ``stop``). Its ``command_type`` is optional: set it to
    the end's class to refuse commands whose end is of any other class.
    """

    #: The tag put on handles and commands, and the config scope read.
    provider: str

    @abstractmethod
    def capabilities(self) -> frozenset[str]:
        """The capabilities this adapter keeps now (may depend on config)."""

    @abstractmethod
    def build_handle(self, name: str) -> Handle:
        """A handle for ``name``; pure, no I/O."""

    @abstractmethod
    def create(self, name: str, **opts: Any) -> Handle:
        """Create the sandbox ``name``, adopting it if it exists."""

    def create_new(self, name: str, *, timeout: float = 120.0, **opts: Any) -> Handle:
        """One creation attempt that never adopts; the handle has ``instance_id``."""
        raise NotSupported(Reason.CREATE_NEW)

    @abstractmethod
    def get(self, handle: Handle) -> Info:
        """The sandbox's status; ``NotFound`` only when definitively gone."""

    @abstractmethod
    def destroy(self, handle: Handle) -> None:
        """Destroy the sandbox; an already-gone sandbox is fine."""

    def destroy_once(self, handle: Handle, *, timeout: float = 120.0) -> None:
        """One bounded deletion attempt that needs provider-confirmed absence."""
        raise NotSupported(Reason.DESTROY_ONCE)

    @abstractmethod
    def list_all_names(self) -> frozenset[str]:
        """Every sandbox name of the account, or ``Truncated``."""

    def suspend(self, handle: Handle) -> None:
        """Park the sandbox with its disk preserved (capability ``suspend``;
        ``NotSupported("suspend")`` here)."""
        raise NotSupported(Capability.SUSPEND)

    def resume(self, handle: Handle) -> Handle:
        """Wake the sandbox; the returned handle is usable (capability ``suspend``;
        ``NotSupported("suspend")`` here)."""
        raise NotSupported(Capability.SUSPEND)

    @abstractmethod
    def write_file(
        self, handle: Handle, path: str, data: bytes, *, mode: int | None = None
    ) -> None:
        """Write ``data`` at ``path``, creating parent directories."""

    def read_file(self, handle: Handle, path: str, *, max_bytes: int | None = None) -> bytes:
        """The bytes of the file at ``path`` (capability ``read_file``).

        ``NotFound`` when nothing is there, ``Invalid`` for a directory,
        ``Truncated(("max_bytes", n))`` as soon as the file is seen to hold more
        than ``max_bytes`` bytes (read no further). Byte-exact; read in pieces
        so a large file does not need twice its size in memory
        (:func:`managoat_sandbox.files.collect`).
        """
        raise NotSupported(Reason.READ_FILE)

    def list_files(self, handle: Handle, path: str) -> list[FileInfo]:
        """The entries of the directory at ``path`` (capability ``list_files``), in
        no particular order, ``.`` and ``..`` left out. ``NotFound`` when nothing is
        there, ``Invalid`` for a path that is not a directory."""
        raise NotSupported(Reason.LIST_FILES)

    @abstractmethod
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
        """Run to exit and collect output; a nonzero exit is data.

        More than ``max_bytes`` bytes of output, stdout and stderr together
        (``None``: no limit), is ``Truncated(("max_bytes", n))`` as soon as it is
        seen, and the command is stopped (killed, where the provider can). Output
        is held once, not copied on the way
        (:class:`managoat_sandbox.streaming.ExecOutput`, or
        :func:`~managoat_sandbox.streaming.collect_exec` for a spawned command).
        """

    @abstractmethod
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
        """Start a streaming command whose frames go to ``owner``."""

    @abstractmethod
    def write_stdin(self, command: Command, data: bytes) -> None:
        """Write to the command's stdin; total (``CommandExited``/``WriteFailed``)."""

    @abstractmethod
    def close_stdin(self, command: Command) -> None:
        """Send EOF to the command's stdin."""

    @abstractmethod
    def stop_command(self, command: Command) -> None:
        """Tear down this process's end of the command; never raises."""

    @abstractmethod
    def list_sessions(self, handle: Handle) -> list[Session]:
        """The sandbox's detachable sessions, finished ones included."""

    def attach(
        self, handle: Handle, session_id: str, *, owner: Owner | None = None, stdin: bool = False
    ) -> Command:
        """Rejoin a session: replay its output from byte zero, then tail (capability
        ``attach``; ``NotSupported("attach")`` here)."""
        raise NotSupported(Capability.ATTACH)

    def terminate_session(
        self, handle: Handle, session_id: str, *, timeout: float = 10.0, mode: str = "graceful"
    ) -> None:
        """Terminate a remote session with provider confirmation."""
        raise NotSupported(Reason.TERMINATE_SESSION)

    def apply_network_policy(self, handle: Handle, policy: NetworkPolicy) -> None:
        """Apply the egress allowlist; ``allow=[]`` denies all egress (capability
        ``network_policy``; ``NotSupported("network_policy")`` here)."""
        raise NotSupported(Capability.NETWORK_POLICY)

    def public_url(self, handle: Handle) -> str | None:
        """The sandbox's openable URL (capability ``public_url``). An adapter that
        does not advertise it may answer ``None`` where the platform has no such
        concept; ``NotSupported("public_url")`` here."""
        raise NotSupported(Capability.PUBLIC_URL)

    def create_checkpoint(self, handle: Handle, *, comment: str | None = None) -> str:
        """Snapshot the sandbox; returns the checkpoint id (capability ``checkpoint``;
        ``NotSupported("checkpoint")`` here)."""
        raise NotSupported(Capability.CHECKPOINT)

    def create_checkpoint_once(
        self, handle: Handle, *, operation_id: str, timeout: float = 120.0
    ) -> str:
        """Exactly one checkpoint correlated to ``operation_id``, bounded."""
        raise NotSupported(Reason.CREATE_CHECKPOINT_ONCE)

    def restore_checkpoint(self, handle: Handle, checkpoint_id: str) -> None:
        """Restore a checkpoint; a reported failure is ``RestoreFailed`` (capability
        ``checkpoint``; ``NotSupported("checkpoint")`` here)."""
        raise NotSupported(Capability.CHECKPOINT)

    def upload(
        self,
        handle: Handle,
        local_path: str,
        remote_path: str,
        *,
        progress: Callable[[TransferProgress], object] | None = None,
        timeout: float | None = None,
    ) -> TransferProgress:
        """Copy the local file, symbolic link or directory tree at ``local_path`` to
        ``remote_path`` in the sandbox, which becomes the copy (capability
        ``transfer``; ``NotSupported("transfer")`` here; see
        :class:`managoat_sandbox.transfers.TarTransfers`)."""
        raise NotSupported(Capability.TRANSFER)

    def download(
        self,
        handle: Handle,
        remote_path: str,
        local_path: str,
        *,
        progress: Callable[[TransferProgress], object] | None = None,
        timeout: float | None = None,
    ) -> TransferProgress:
        """Copy the sandbox's file, symbolic link or directory tree at ``remote_path``
        to ``local_path``, which becomes the copy, never writing outside it
        (capability ``transfer``; ``NotSupported("transfer")`` here)."""
        raise NotSupported(Capability.TRANSFER)

    def host_path(self, handle: Handle, path: str) -> str:
        """The path a process inside the sandbox sees; identity by default."""
        return path

    def __repr__(self) -> str:
        return f"<{type(self).__name__} provider={getattr(self, 'provider', '?')!r}>"
