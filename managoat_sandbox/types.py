"""Value types shared by the facade, the adapters and callers."""

from __future__ import annotations

import queue
from collections.abc import Hashable, Iterable
from datetime import datetime
from typing import Any, Literal, NamedTuple, get_args

import attrs

__all__ = [
    "Command",
    "ExecResult",
    "FileInfo",
    "FileType",
    "Handle",
    "Info",
    "NetworkPolicy",
    "Session",
    "Status",
    "TransferProgress",
]

Status = Literal["running", "suspended", "unknown"]

#: What a directory entry is: a regular file, a directory, a symbolic link, or
#: anything else (a device, a FIFO, a socket).
FileType = Literal["file", "dir", "symlink", "other"]


def _require_str(field_name: str) -> Any:
    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, str):
            raise TypeError(f"{field_name} must be a str, got {type(value).__name__}")

    return check


@attrs.frozen
class Handle:
    """A provider-tagged reference to a sandbox.

    Equality and hash use ``provider`` and ``name`` only. ``private`` belongs
    to the adapter that made the handle and ``instance_id`` is provider
    control metadata; neither appears in ``repr``. Every operation works on a
    handle whose ``private`` is ``None``: handles are rebuilt from names.
    """

    provider: str = attrs.field(validator=_require_str("provider"))
    name: str = attrs.field(validator=_require_str("name"))
    instance_id: str | None = attrs.field(default=None, eq=False, repr=False)
    private: Any = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen
class Command:
    """A provider-tagged reference to a streaming command (spawned or attached).

    ``ref`` is unique process-wide and is carried by every frame of the
    command. ``frames`` is the queue frames go to whenever they go to a queue.
    ``session_id`` names the remote session a detachable spawn (or an attach)
    is bound to, where the adapter knows it — what ``attach`` and
    ``terminate_session`` take — else ``None``. ``private``, ``frames`` and
    ``session_id`` are excluded from ``repr``, equality and hash.
    """

    provider: str = attrs.field(validator=_require_str("provider"))
    ref: Hashable
    frames: queue.Queue[Any] | None = attrs.field(default=None, eq=False, repr=False)
    private: Any = attrs.field(default=None, eq=False, repr=False)
    session_id: str | None = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen
class Session:
    """A detachable command living inside a sandbox.

    Deliberately has no ``is_active``: a detached session reads inactive, and
    those are exactly the ones ``attach`` exists to recover. What the provider
    knows of the command's end is said instead, never guessed:

    * ``ended`` — True once the command has ended (its exit recorded, or its
      end known to be lost), False while it is known to run, None where the
      provider's listing does not say;
    * ``exit_code`` — the command's real exit code (as its ``Exit`` frame
      carries it) when ``ended`` is True and the provider recorded one; None
      otherwise (running, unknown, or ended without a recorded code).
    """

    id: str
    command: str | None = None
    created_at: datetime | None = None
    last_activity_at: datetime | None = None
    tty: bool = False
    ended: bool | None = None
    exit_code: int | None = None


def _to_allowlist(value: Any) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError("NetworkPolicy.allow must be an iterable of str, not a single value")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"NetworkPolicy.allow entries must be str, got {type(item).__name__}")
    return items


@attrs.frozen
class NetworkPolicy:
    """The complete egress allowlist; everything else is denied.

    ``NetworkPolicy(allow=[])`` means **deny all egress**, never "no policy".
    """

    allow: tuple[str, ...] = attrs.field(converter=_to_allowlist)

    @classmethod
    def deny_all(cls) -> NetworkPolicy:
        """The policy that denies every egress connection."""
        return cls(allow=())


def _valid_file_type(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in get_args(FileType):
        raise ValueError(f"FileInfo.type must be one of {get_args(FileType)}, got {value!r}")


@attrs.frozen
class FileInfo:
    """One entry of a directory listing (``list_files``).

    ``name`` is the entry's name, ``path`` its absolute path in the sandbox;
    ``size`` is in bytes (a symlink's own size, not its target's); ``mode``
    holds the permission bits (``0..0o7777``) and ``modified`` the
    modification time (timezone-aware), each ``None`` where the provider does
    not report it.
    """

    name: str = attrs.field(validator=_require_str("name"))
    path: str = attrs.field(validator=_require_str("path"))
    type: FileType = attrs.field(validator=_valid_file_type)
    size: int
    mode: int | None = None
    modified: datetime | None = None


def _valid_status(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in get_args(Status):
        raise ValueError(f"Info.status must be one of {get_args(Status)}, got {value!r}")


@attrs.frozen
class Info:
    """What ``get`` returns: a normalised status and the provider's own answer."""

    status: Status = attrs.field(validator=_valid_status)
    raw: Any = None


class _Collected(NamedTuple):
    output: bytes
    exit_code: int


class ExecResult(_Collected):
    """The result of ``exec``: collected output, the command's stderr and the real exit code.

    Unpacks as ``output, code = exec(...)`` — a two-element tuple, compared as
    one. ``output`` is stdout, or stdout and stderr together when
    ``stderr_to_stdout=True`` (in the order written where the command has one
    pipe for both, by arrival where the provider delivers them apart).
    ``stderr`` is the command's stderr when it was kept apart (empty when
    merged); it is collected like ``output``, under the same deadline and the
    same provider limits, so a failing command says why.
    """

    stderr: bytes

    def __new__(cls, output: bytes, exit_code: int, stderr: bytes = b"") -> ExecResult:
        result = super().__new__(cls, output, exit_code)
        result.stderr = stderr
        return result

    def __getnewargs__(self) -> tuple[bytes, int, bytes]:
        return (self.output, self.exit_code, self.stderr)

    def _replace(self, **changes: Any) -> ExecResult:
        fields: dict[str, Any] = {
            "output": self.output,
            "exit_code": self.exit_code,
            "stderr": self.stderr,
        }
        unknown = set(changes) - set(fields)
        if unknown:
            raise ValueError(f"ExecResult has no fields {sorted(unknown)}")
        fields.update(changes)
        return ExecResult(**fields)

    def __repr__(self) -> str:
        return (
            f"ExecResult(output={self.output!r}, exit_code={self.exit_code!r}, "
            f"stderr={self.stderr!r})"
        )

    @property
    def text(self) -> str:
        """The output decoded as UTF-8, undecodable bytes replaced."""
        return self.output.decode("utf-8", errors="replace")


@attrs.frozen
class TransferProgress:
    """How far an ``upload`` or ``download`` has come, and what it returns when done.

    ``files`` counts the regular files and symbolic links copied so far and
    ``bytes`` their content; ``files_total`` and ``bytes_total`` are the whole
    transfer's where they are known before it starts (an upload's, counted from
    the local tree), else ``None``. The value a finished transfer returns has
    its totals set.
    """

    files: int
    bytes: int
    files_total: int | None = None
    bytes_total: int | None = None
