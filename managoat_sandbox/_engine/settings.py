"""What a box is: its isolation, identity inside the sandbox and limits (``box.json``)."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from .errors import EngineError
from .limits import Limits
from .options import DEFAULT_PATH, EGRESS_PORT

__all__ = ["DEFAULT_PATH", "EGRESS_PORT", "BoxSettings", "hostname_for"]

_HOSTNAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\Z")
_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}\Z")


def hostname_for(name: str) -> str:
    """A valid host name for a sandbox called ``name`` (``sandbox`` if it is not one)."""
    return name if _HOSTNAME.match(name) else "sandbox"


@dataclass(frozen=True)
class BoxSettings:
    """How a box runs.

    ``isolated``: in its own namespaces under bubblewrap (else as plain host
    processes). ``user``/``uid``/``home``: who commands run as inside (an
    isolated sandbox has exactly this one user). ``egress``: whether an
    isolated sandbox gets the filtering proxy at all. ``id``: a random name for
    the box's host-side resources (its cgroup).
    """

    isolated: bool
    hostname: str = "sandbox"
    user: str = "user"
    uid: int = 1000
    home: str = "/home/user"
    limits: Limits = field(default_factory=Limits)
    egress: bool = True
    id: str = field(default_factory=lambda: secrets.token_hex(8))

    def __post_init__(self) -> None:
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
            "id": self.id,
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
                id=str(record["id"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise EngineError(f"malformed box settings: {exc}") from None
