"""Reading files back from a sprite: ``read_file`` and ``list_files`` over the
filesystem API, as the vendor's SDKs call it.

Wire facts relied on:

* ``GET /v1/sprites/<name>/fs/read?path=<abs>&workingDir=/`` answers 200 (or
  206) with the file's raw bytes. The body is read as it arrives and handed
  to :func:`managoat_sandbox.files.collect` piece by piece, so ``max_bytes``
  stops the read early; a ``Content-Length`` over ``max_bytes`` refuses the
  file before its body is read. The request asks for ``Accept-Encoding:
  identity`` so the length announced is the file's. A body that ends before
  its ``Content-Length`` is ``Unavailable`` (transient), never a short file.
* ``GET /v1/sprites/<name>/fs/list?path=<abs>&workingDir=/`` answers 200
  ``{"path", "entries", "count"}``; each entry has ``name``, ``path``,
  ``type`` (``file``, ``directory``, ``symlink``…), ``isDir``, ``size``,
  ``mode`` (permission bits as octal text, e.g. ``"0644"``) and ``modTime``
  (RFC 3339). Listing a path that is not a directory answers one entry
  describing that path itself (the SDKs' ``stat`` reads a file this way): an
  entry whose ``path`` is the listed path and is no directory makes the
  listing ``Invalid``. The body is read up to 16 MiB; a larger listing is
  ``Truncated(("listing_bytes", limit))``, never a part passed off as the
  whole.
* Failures carry ``{"error": text, "code": errno name, "path"}`` (the code
  may be missing, e.g. on 404) and are mapped by :func:`.errors.file_error`:
  404 is ``NotFound``, a refusal by file permissions (``EACCES``/``EPERM``)
  ``Denied(("path", path))``, a path of the wrong kind (``EISDIR``/``ENOTDIR``)
  ``Invalid`` whatever the status; everything else maps like the adapter's
  other calls.
"""

from __future__ import annotations

import posixpath
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..._http import BODY_LIMIT, Response, body_chunks
from ...errors import Invalid, ProviderError, Truncated, Unavailable
from ...files import collect
from ...reasons import Reason
from ...types import FileInfo, FileType
from .api import SpritesApi, sprite_path
from .errors import file_error
from .timestamps import timestamp

if TYPE_CHECKING:
    import requests

__all__ = ["LISTING_LIMIT", "listing", "read"]

#: The largest listing body read (bytes).
LISTING_LIMIT = 16 * 1024 * 1024

_TYPES: dict[str, FileType] = {
    "file": "file",
    "directory": "dir",
    "dir": "dir",
    "symlink": "symlink",
    "link": "symlink",
}


@contextmanager
def _opened(api: SpritesApi, name: str, path: str) -> Iterator[requests.Response]:
    """``GET fs/read`` of ``path`` in sprite ``name``, its 2xx answer open for reading (a
    refusal is :func:`.errors.file_error`'s error)."""
    params = {"path": path, "workingDir": "/"}
    with api.stream(
        "GET",
        sprite_path(name, "fs", "read"),
        params=params,
        extra_headers={"Accept-Encoding": "identity"},
    ) as response:
        if not 200 <= response.status_code < 300:
            body = _head(body_chunks(response), BODY_LIMIT)
            raise file_error(Response(response.status_code, dict(response.headers), body), path)
        yield response


def read(api: SpritesApi, name: str, path: str, max_bytes: int | None) -> bytes:
    """The bytes of the file at ``path`` in sprite ``name`` (see the module docstring)."""
    with _opened(api, name, path) as response:
        return collect(body_chunks(response), max_bytes, size=_length(response.headers))


@contextmanager
def streamed(api: SpritesApi, name: str, path: str) -> Iterator[Iterator[bytes]]:
    """The bytes of the file at ``path`` as they arrive (a staged transfer's archive)."""
    with _opened(api, name, path) as response:
        yield body_chunks(response)


def listing(api: SpritesApi, name: str, path: str) -> list[FileInfo]:
    """The entries of the directory at ``path`` in sprite ``name`` (see the module
    docstring)."""
    try:
        response = api.call(
            "GET",
            sprite_path(name, "fs", "list"),
            params={"path": path, "workingDir": "/"},
            limit=LISTING_LIMIT,
        )
    except Unavailable as error:
        if error.reason is Reason.RESPONSE_TOO_LARGE and error.limit == LISTING_LIMIT:
            raise Truncated(Reason.LISTING_BYTES, limit=LISTING_LIMIT) from None
        raise
    if not response.ok:
        raise file_error(response, path)
    body = response.json()
    entries = body.get("entries") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        raise ProviderError("sprites", Reason.MALFORMED_FILE_LISTING)
    found = []
    for entry in entries:
        info = _info(entry, path)
        if info is not None:
            found.append(info)
    return found


def _head(pieces: Iterator[bytes], limit: int) -> bytes:
    """At most the first ``limit`` bytes of ``pieces`` (the rest is never read)."""
    kept = b""
    for piece in pieces:
        kept += piece[: limit - len(kept)]
        if len(kept) >= limit:
            break
    return kept


def _length(headers: Mapping[str, str]) -> int | None:
    """The announced body length: ``Content-Length`` when it is a plain number of bytes
    of an unencoded body, else None."""
    encoding = (headers.get("Content-Encoding") or "identity").strip().lower()
    text = (headers.get("Content-Length") or "").strip()
    if encoding != "identity" or not text.isdigit() or not text.isascii():
        return None
    return int(text)


def _info(entry: object, listed: str) -> FileInfo | None:
    """One entry as a ``FileInfo``; None for ``.``/``..`` and for a directory describing
    itself. ``Invalid`` when the entry is the listed path itself and no directory."""
    if not isinstance(entry, dict):
        raise ProviderError("sprites", Reason.MALFORMED_FILE_LISTING)
    name = entry.get("name")
    if not isinstance(name, str) or not name or "/" in name or "\x00" in name:
        raise ProviderError("sprites", Reason.MALFORMED_FILE_LISTING)
    if name in (".", ".."):
        return None
    kind = _type(entry)
    if _is_listed_path(entry.get("path"), listed):
        if kind == "dir":
            return None
        raise Invalid(Reason.NOT_A_DIRECTORY, path=listed)
    size = entry.get("size")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ProviderError("sprites", Reason.MALFORMED_FILE_LISTING)
    modified = timestamp(entry.get("modTime"))
    return FileInfo(
        name=name,
        path=posixpath.join(listed, name),
        type=kind,
        size=size,
        mode=_mode(entry.get("mode")),
        modified=modified if modified is not None and modified.tzinfo is not None else None,
    )


def _is_listed_path(value: object, listed: str) -> bool:
    if not isinstance(value, str) or not value.startswith("/"):
        return False
    return "/" + posixpath.normpath(value).lstrip("/") == listed


def _type(entry: dict[str, Any]) -> FileType:
    if entry.get("isDir") is True:
        return "dir"
    kind = entry.get("type")
    if kind is None:
        return "file"
    return _TYPES.get(kind, "other") if isinstance(kind, str) else "other"


def _mode(value: object) -> int | None:
    """Permission bits from octal text (``"0644"``) or a number; None if neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return stat.S_IMODE(value) if value >= 0 else None
    if isinstance(value, str) and value.isascii() and value.isdigit():
        try:
            return stat.S_IMODE(int(value, 8))
        except ValueError:
            return None
    return None
