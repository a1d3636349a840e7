"""What a box is: its isolation, identity inside the sandbox and limits (``box.json``)."""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from .errors import EngineError
from .limits import Limits
from .options import DEFAULT_PATH, EGRESS_PORT

__all__ = [
    "DEFAULT_PATH",
    "EGRESS_PORT",
    "HOST_UIDS",
    "BoxSettings",
    "hostname_for",
    "new_host_uid",
]

_HOSTNAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\Z")
_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}\Z")


#: The host uids a root caller's sandboxes run as: one drawn at random per sandbox, far
#: above the ranges distributions give to users (1000…) and subordinate ids (100000…), and
#: below 2**31 (some tools take uids as signed). Two sandboxes share one with odds of about
#: one in 2**28 per pair.
HOST_UIDS = range(1_800_000_000, 1_800_000_000 + 2**28)


def new_host_uid() -> int | None:
    """The host uid a sandbox created now runs as: a fresh one from :data:`HOST_UIDS` when
    this process is root, else None (an unprivileged caller's sandbox user is the caller
    itself, mapped by its user namespace)."""
    if os.geteuid() != 0:
        return None
    return HOST_UIDS.start + secrets.randbelow(len(HOST_UIDS))


def hostname_for(name: str) -> str:
    """A valid host name for a sandbox called ``name`` (``sandbox`` if it is not one)."""
    return name if _HOSTNAME.match(name) else "sandbox"


@dataclass(frozen=True)
class BoxSettings:
    """How a box runs.

    ``isolated``: in its own namespaces under bubblewrap (else as plain host
    processes). ``user``/``uid``/``home``: who commands run as inside (an
    isolated sandbox has exactly this one user). ``egress``: whether an
    isolated sandbox gets the filtering proxy at all. ``host_uid``: for an isolated box
    created by root, the unprivileged host uid (and gid) its user is mapped to and
    that owns its files; None for an unprivileged creator (the user is mapped to
    the creator) and for an unisolated box.
    """

    isolated: bool
    hostname: str = "sandbox"
    user: str = "user"
    uid: int = 1000
    home: str = "/home/user"
    limits: Limits = field(default_factory=Limits)
    egress: bool = True
    host_uid: int | None = field(default_factory=new_host_uid)

    def __post_init__(self) -> None:
        if not self.isolated:
            object.__setattr__(self, "host_uid", None)
        if self.host_uid is not None and self.host_uid not in HOST_UIDS:
            raise ValueError(f"bad host uid {self.host_uid}")
        if not _HOSTNAME.match(self.hostname):
            raise ValueError(f"bad host name {self.hostname!r}")
        if not _USER.match(self.user) or not 0 < self.uid < 65534:
            raise ValueError(f"bad user {self.user!r} ({self.uid})")
        if not self.home.startswith("/") or "\x00" in self.home:
            raise ValueError(f"bad home {self.home!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "isolated": self.isolated,
            "hostname": self.hostname,
            "user": self.user,
            "uid": self.uid,
            "home": self.home,
            "limits": self.limits.to_json(),
            "egress": self.egress,
            "host_uid": self.host_uid,
        }

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> BoxSettings:
        try:
            return cls(
                isolated=bool(record["isolated"]),
                hostname=str(record["hostname"]),
                user=str(record["user"]),
                uid=int(record["uid"]),
                home=str(record["home"]),
                limits=Limits.from_json(dict(record.get("limits") or {})),
                egress=bool(record.get("egress", True)),
                host_uid=None if record.get("host_uid") is None else int(record["host_uid"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise EngineError(f"malformed box settings: {exc}") from None
