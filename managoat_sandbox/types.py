"""Value types shared by the facade, the adapters and callers."""

from __future__ import annotations

import queue
from collections.abc import Hashable, Iterable
from datetime import datetime
from typing import Any, Literal, NamedTuple, get_args

import attrs

__all__ = ["Command", "ExecResult", "Handle", "Info", "NetworkPolicy", "Session", "Status"]

Status = Literal["running", "suspended", "unknown"]


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
    those are exactly the ones ``attach`` exists to recover.
    """

    id: str
    command: str | None = None
    created_at: datetime | None = None
    last_activity_at: datetime | None = None
    tty: bool = False


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


def _valid_status(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in get_args(Status):
        raise ValueError(f"Info.status must be one of {get_args(Status)}, got {value!r}")


@attrs.frozen
class Info:
    """What ``get`` returns: a normalised status and the provider's own answer."""

    status: Status = attrs.field(validator=_valid_status)
    raw: Any = None


class ExecResult(NamedTuple):
    """The result of ``exec``: collected output and the real exit code.

    Unpacks as ``output, code = exec(...)``.
    """

    output: bytes
    exit_code: int

    @property
    def text(self) -> str:
        """The output decoded as UTF-8, undecodable bytes replaced."""
        return self.output.decode("utf-8", errors="replace")
