"""envd's directory listing (``filesystem.Filesystem/ListDir``) as :class:`FileInfo` values.

The answer is ``{"entries": [EntryInfo...]}`` in protobuf JSON (``{}`` for an
empty directory: zero values are left out). An ``EntryInfo`` is read as:

* ``name`` and ``path`` (the path under the one listed; a missing ``path`` is
  the listed directory joined with ``name``);
* the type: a symlink when ``isSymlink`` is true (current envd, whose
  ``type`` is then the target's), when ``type`` is ``FILE_TYPE_SYMLINK``
  (older envd) or when ``permissions`` starts with Go's symlink letter ``L``;
  else ``FILE_TYPE_FILE`` is ``"file"``, ``FILE_TYPE_DIRECTORY`` ``"dir"``, and
  anything else (unspecified, or absent: a FIFO, a socket, a device, a dangling
  link) ``"other"``. Enum numbers (1, 2, 3) are accepted as well as names;
* ``size`` (int64: a JSON string or number; absent means 0; a symlink's own);
* ``mode``: the permission bits envd reports (``0o777`` at most), absent
  meaning 0 when the entry reports ``permissions``; ``None`` for a symlink,
  whose reported mode is its target's;
* ``modifiedTime`` (or ``modified_time``): RFC 3339, parsed to an aware
  datetime; ``None`` when absent or unreadable.

Owner, group and ``symlinkTarget`` are not carried over. A malformed answer
(not an object, ``entries`` not a list, an entry without a name) is a
``ProviderError``.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ...errors import ProviderError
from ...reasons import Reason
from ...types import FileInfo, FileType
from .errors import PROVIDER

__all__ = ["list_request", "listing"]

_TYPES: Mapping[Any, FileType] = {
    "FILE_TYPE_FILE": "file", 1: "file",
    "FILE_TYPE_DIRECTORY": "dir", 2: "dir",
    "FILE_TYPE_SYMLINK": "symlink", 3: "symlink",
}  # fmt: skip
_RFC3339 = re.compile(
    r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)\Z", re.IGNORECASE
)


def list_request(path: str) -> dict[str, Any]:
    """The ``ListDirRequest`` for the entries directly in ``path``."""
    return {"path": path, "depth": 1}


def _malformed(what: str) -> ProviderError:
    return ProviderError(PROVIDER, Reason.BAD_LISTING, problem=what)


def _type(entry: Mapping[str, Any]) -> FileType:
    permissions = entry.get("permissions")
    if (
        entry.get("isSymlink") is True
        or entry.get("is_symlink") is True
        or (isinstance(permissions, str) and permissions.startswith("L"))
    ):
        return "symlink"
    return _TYPES.get(entry.get("type"), "other")


def _integer(value: Any, what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _malformed(what)
    try:
        number = int(value)
    except ValueError:
        raise _malformed(what) from None
    if number < 0:
        raise _malformed(what)
    return number


def _modified(value: Any) -> datetime | None:
    """An RFC 3339 timestamp (fraction up to nanoseconds, kept to microseconds)."""
    match = _RFC3339.match(value) if isinstance(value, str) else None
    if match is None:
        return None
    stamp, fraction, zone = match.groups()
    micros = (fraction or "").ljust(6, "0")[:6]
    zone = "+00:00" if zone.upper() == "Z" else zone
    try:
        return datetime.fromisoformat(f"{stamp}.{micros}{zone}")
    except ValueError:
        return None


def _file_info(directory: str, entry: Any) -> FileInfo:
    if not isinstance(entry, Mapping):
        raise _malformed("entry")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise _malformed("name")
    path = entry.get("path")
    if not isinstance(path, str) or not path.startswith("/"):
        path = posixpath.join(directory, name)
    kind = _type(entry)
    mode: int | None = None
    if kind != "symlink" and ("mode" in entry or "permissions" in entry):
        mode = _integer(entry.get("mode"), "mode") & 0o7777
    modified = entry.get("modifiedTime", entry.get("modified_time"))
    return FileInfo(
        name, path, kind, _integer(entry.get("size"), "size"), mode, _modified(modified)
    )


def listing(directory: str, answer: Any) -> list[FileInfo]:
    """The entries of a ``ListDir`` answer for ``directory``."""
    if not isinstance(answer, Mapping):
        raise _malformed("answer")
    entries = answer.get("entries", [])
    if not isinstance(entries, list):
        raise _malformed("entries")
    return [_file_info(directory, entry) for entry in entries]
