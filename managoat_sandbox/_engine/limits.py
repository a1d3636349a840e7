"""Resource limits of a sandbox, enforced by the kernel without privileges.

Each limit is an rlimit the agent sets on itself (soft = hard) before it runs
any command, so every process of the sandbox inherits it and none can raise
it. What each covers, and where it does not hold:

``processes`` (``RLIMIT_NPROC``)
    Processes of the sandbox's user. In an isolated sandbox that user lives in
    the sandbox's own user namespace, so the count is the sandbox's; a root
    caller's sandbox runs as an unprivileged host uid of its own, which the
    kernel limits like any other (it exempts only root). Without isolation it
    would count every process of your user, so it is not applied.
``memory`` (``RLIMIT_AS``)
    Address space per process (not per sandbox: without cgroups the kernel has
    no per-sandbox memory limit for an unprivileged user).
``open_files`` (``RLIMIT_NOFILE``)
    Open descriptors per process. Commands start with a soft limit of
    :data:`CHILD_OPEN_FILES` and may raise it up to this hard limit; the agent
    itself lives within it too.
``file_size`` (``RLIMIT_FSIZE``)
    Largest file a process may write. The agent's journals obey it as well: a
    session whose output outgrows it is ended with a ``journal_failed`` error,
    never cut silently.

``None`` means unlimited (the host's own limit applies).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

CHILD_OPEN_FILES = 1024
_GIB = 1024**3
_MINIMUM = {"processes": 16, "memory": 256 * 1024**2, "open_files": 256, "file_size": 1024**2}
#: The largest limit the kernel takes through ``setrlimit`` (a C long).
_MAXIMUM = 2**63 - 1


def _default_memory() -> int:
    """Half of physical memory, at least 1 GiB: a runaway allocation stops well short."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 * _GIB
    return max(total // 2, _GIB)


@dataclass(frozen=True)
class Limits:
    """Per-sandbox resource limits (bytes for sizes); ``None`` is unlimited."""

    processes: int | None = 4096
    memory: int | None = field(default_factory=_default_memory)
    open_files: int | None = 16384
    file_size: int | None = 16 * _GIB

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> Limits:
        """Defaults overridden by ``values``; ValueError/TypeError naming a bad entry."""
        if values is None:
            return cls()
        if not isinstance(values, Mapping):
            raise TypeError("limits must be a mapping of limit name to int or None")
        unknown = sorted(set(values) - set(cls.names()))
        if unknown:
            raise ValueError(f"unknown limits {unknown}; known: {list(cls.names())}")
        for name, value in values.items():
            if value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"limit {name!r} must be an int or None")
            if value < _MINIMUM[name]:
                raise ValueError(f"limit {name!r} must be at least {_MINIMUM[name]}")
            if value > _MAXIMUM:
                raise ValueError(f"limit {name!r} must be at most {_MAXIMUM}")
        return replace(cls(), **dict(values))

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> Limits:
        """Limits as stored by :meth:`to_json` (a missing key takes its default)."""
        return replace(cls(), **{name: record[name] for name in cls.names() if name in record})

    def to_json(self) -> dict[str, int | None]:
        return asdict(self)
