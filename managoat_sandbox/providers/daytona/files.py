"""A Daytona sandbox's files: bulk upload, bulk download and the directory listing.

The wire facts relied on (as the official SDK, daytona 0.226.1, uses them):

* ``write_file`` is ``POST {toolbox}/files/bulk-upload`` of one file
  (:meth:`.toolbox.Toolbox.upload`).
* ``read_file`` is ``POST {toolbox}/files/bulk-download`` with ``{"paths": [path]}``,
  the download the official SDK makes for every file. The daemon answers 200
  ``multipart/form-data`` with one part per path, its
  ``Content-Disposition: form-data; name="file"|"error"; filename="<path>"``.
  A ``file`` part is the file's bytes; an ``error`` part is JSON
  ``{"statusCode", "message", "code", "source", …}`` (``404 FILE_NOT_FOUND``,
  ``400 INVALID_FILE_PATH`` for a directory, ``403 FILE_ACCESS_DENIED``) — or,
  from older daemons, plain text (``file not found or invalid: <path>``). A
  daemon that fails mid-file writes an error part after the file part, so the
  body is read to its closing delimiter before the bytes are trusted. The
  boundary is fixed (``DAYTONA-FILE-BOUNDARY``): a file holding
  ``CRLF--DAYTONA-FILE-BOUNDARY`` cannot be told apart from the end of its
  part, so a part after the file's or data after the closing delimiter is a
  ``ProviderError``, never a short file.
* ``list_files`` is ``GET {toolbox}/files?path=<dir>``: a JSON list of
  ``{name, size, mode, permissions, modTime, modifiedAt?, isDir, owner, group,
  path?}``; 404 for a missing path, 400 for one that is not a directory. The
  daemon stats each entry *through* symlinks (an entry that is a link is
  reported as what it points at; a dangling one is left out). ``mode`` is Go's
  ``FileMode.String()`` (``-rw-r--r--``, ``drwxr-xr-x``, ``Lrwxrwxrwx``,
  ``prw-------``, ``Dcrw-rw-rw-``, setuid/setgid/sticky as ``u``/``g``/``t``),
  ``permissions`` the octal ``0644``; ``modifiedAt`` is RFC 3339, ``modTime``
  Go's ``time.String()`` (``2006-01-02 15:04:05.999999999 -0700 MST``).
* What the daemon was refused by file permissions (a 403
  ``FILE_ACCESS_DENIED`` error part, a 403 listing, a bulk upload's 400 whose
  ``errors`` say "permission denied") is ``Denied(("path", path))``:
  :func:`.errors.file_error`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

from ..._http import BODY_LIMIT, Response
from ...errors import ProviderError, SandboxError, Truncated, Unavailable
from ...files import collect
from ...reasons import Reason
from ...types import FileInfo, FileType
from .errors import error_from, file_error
from .multipart import MalformedMultipart, Part, boundary_of, parts
from .settings import PROVIDER
from .toolbox import LISTING_LIMIT, Toolbox

__all__ = ["file_info", "listing", "modified_time", "read", "write"]

#: Go ``FileMode`` type letters that make an entry neither a file, a directory nor a link.
_OTHER_LETTERS = frozenset("DpSc?")
_SPECIAL_BITS = {"u": 0o4000, "g": 0o2000, "t": 0o1000}
_OCTAL = re.compile(r"[0-7]{1,4}")
_RFC3339 = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:([Zz])|([+-])(\d\d):(\d\d))"
)
_GO_TIME = re.compile(
    r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))? ()([+-])(\d\d)(\d\d)"
    r"(?: [^ ]+)?(?: m=[+-][0-9.]+)?"
)


# -- read_file --------------------------------------------------------------------------


def _field(part: Part) -> str | None:
    """The form-field name of a part (``file`` or ``error``), from its Content-Disposition."""
    disposition = part.headers.get("content-disposition", "")
    found = re.search(r';\s*name\s*=\s*(?:"([^"]*)"|([^;\s]*))', disposition)
    return None if found is None else (found.group(1) or found.group(2))


def _length(part: Part) -> int | None:
    value = part.headers.get("content-length", "").strip()
    return int(value) if value.isdigit() else None


def _error_of(part: Part) -> SandboxError:
    """The taxonomy error an error part stands for (its JSON ``statusCode``; a plain-text
    one from an older daemon is NotFound when it says "not found", else Invalid)."""
    body = bytearray()
    for piece in part.content:
        body += piece
        if len(body) > BODY_LIMIT:
            break
    content_type = part.headers.get("content-type", "")
    status = None
    try:
        answer = json.loads(bytes(body[:BODY_LIMIT]))
    except ValueError:
        answer = None
    if isinstance(answer, Mapping):
        code = answer.get("statusCode", answer.get("status_code"))
        if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
            status = code
    if status is None:
        text = body.decode("utf-8", "replace").lower()
        status = 404 if "not found" in text else 400
    return error_from(Response(status, {"Content-Type": content_type}, bytes(body)))


def read(toolbox: Toolbox, path: str, max_bytes: int | None) -> bytes:
    """The bytes of the file at ``path``, collected as they arrive (``files.collect``).

    The body is read to its closing delimiter: an error part (also after the
    file's part: the daemon failed mid-file) is raised; a body cut short is
    ``Unavailable``; any other part after the file's, or a body that is not
    the multipart answer asked for, is a ``ProviderError`` — never a short file.
    """
    content: bytes | None = None
    with toolbox.download(path) as (content_type, pieces):
        try:
            for part in parts(pieces, boundary_of(content_type)):
                field = _field(part)
                if field == "error":
                    raise file_error(_error_of(part), path)
                if content is not None:
                    raise ProviderError(PROVIDER, Reason.MALFORMED_MULTIPART, problem="extra_part")
                if field == "file":
                    content = collect(part.content, max_bytes, size=_length(part))
        except MalformedMultipart as error:
            if error.reason == "truncated":
                raise Unavailable(Reason.MALFORMED_MULTIPART, problem=error.reason) from None
            raise ProviderError(
                PROVIDER, Reason.MALFORMED_MULTIPART, problem=error.reason
            ) from None
    if content is None:
        raise ProviderError(PROVIDER, Reason.NO_FILE_PART, path=path)
    return content


@contextmanager
def streamed(toolbox: Toolbox, path: str) -> Iterator[Iterator[bytes]]:
    """The bytes of the file at ``path``, as they arrive (for a staged download): the
    same answer as :func:`read` reads, its error part raised when met; a body cut short
    is ``Unavailable``, a malformed one a ``ProviderError``."""
    with toolbox.download(path) as (content_type, pieces):
        yield _file_content(parts(pieces, boundary_of(content_type)), path)


def _file_content(found: Iterator[Part], path: str) -> Iterator[bytes]:
    """The file part's content, the answer then read to its end as :func:`read` reads
    it: an error part after it (the daemon failed mid-file) is raised, never a file
    cut short."""
    content_seen = False
    try:
        for part in found:
            field = _field(part)
            if field == "error":
                raise file_error(_error_of(part), path)
            if content_seen:
                raise ProviderError(PROVIDER, Reason.MALFORMED_MULTIPART, problem="extra_part")
            if field == "file":
                content_seen = True
                yield from part.content
    except MalformedMultipart as error:
        if error.reason == "truncated":
            raise Unavailable(Reason.MALFORMED_MULTIPART, problem=error.reason) from None
        raise ProviderError(PROVIDER, Reason.MALFORMED_MULTIPART, problem=error.reason) from None
    if not content_seen:
        raise ProviderError(PROVIDER, Reason.NO_FILE_PART, path=path)


# -- write_file -------------------------------------------------------------------------


def write(toolbox: Toolbox, path: str, data: bytes) -> None:
    """Upload ``data`` to ``path`` (the toolbox's bulk upload; parent directories made);
    a refused upload is :func:`.errors.file_error`'s answer."""
    try:
        toolbox.upload(path, data)
    except SandboxError as error:
        raise file_error(error, path) from None


# -- list_files -------------------------------------------------------------------------


def _datetime(match: re.Match[str]) -> datetime:
    year, month, day, hour, minute, second, fraction, utc, sign, hours, minutes = match.groups()
    offset = timedelta(0) if utc else timedelta(hours=int(hours), minutes=int(minutes))
    moment = datetime(
        int(year),
        int(month),
        int(day),
        int(hour),
        int(minute),
        int(second),
        int((fraction or "0")[:6].ljust(6, "0")),
        tzinfo=timezone(-offset if sign == "-" else offset),
    )
    return moment


def modified_time(entry: Mapping[str, Any]) -> datetime | None:
    """An entry's modification time: ``modifiedAt`` (RFC 3339), else ``modTime`` (Go's
    ``time.String()``); None when neither parses."""
    for key, pattern in (("modifiedAt", _RFC3339), ("modTime", _GO_TIME)):
        value = entry.get(key)
        match = pattern.fullmatch(value.strip()) if isinstance(value, str) else None
        if match is not None:
            try:
                return _datetime(match)
            except ValueError:
                continue
    return None


def _type_letters(mode: object) -> str:
    """The letters of a Go ``FileMode.String()`` before its nine ``rwx`` characters."""
    return mode[:-9] if isinstance(mode, str) and len(mode) > 9 else ""


def _file_type(is_dir: bool, letters: str) -> FileType:
    if is_dir or "d" in letters:
        return "dir"
    if "L" in letters:
        return "symlink"
    if _OTHER_LETTERS & set(letters):
        return "other"
    return "file"


def _permissions(value: object, letters: str) -> int | None:
    if not isinstance(value, str) or not _OCTAL.fullmatch(value):
        return None
    bits = int(value, 8)
    for letter, bit in _SPECIAL_BITS.items():
        if letter in letters:
            bits |= bit
    return bits


def file_info(entry: object, directory: str) -> FileInfo:
    """One daemon FileInfo as a contract :class:`FileInfo` under ``directory``."""
    if not isinstance(entry, Mapping):
        raise ProviderError(PROVIDER, Reason.NOT_A_FILE_INFO, answer=type(entry).__name__)
    name, size, is_dir = entry.get("name"), entry.get("size"), entry.get("isDir", False)
    if (
        not isinstance(name, str)
        or not name
        or "/" in name
        or isinstance(size, bool)
        or not isinstance(size, int)
        or size < 0
        or not isinstance(is_dir, bool)
    ):
        raise ProviderError(PROVIDER, Reason.NOT_A_FILE_INFO, answer=type(entry).__name__)
    letters = _type_letters(entry.get("mode"))
    return FileInfo(
        name=name,
        path=f"{directory.rstrip('/')}/{name}",
        type=_file_type(is_dir, letters),
        size=size,
        mode=_permissions(entry.get("permissions"), letters),
        modified=modified_time(entry),
    )


def listing(toolbox: Toolbox, directory: str) -> list[FileInfo]:
    """The entries of ``directory`` (``.`` and ``..`` left out). A listing larger than
    :data:`~.toolbox.LISTING_LIMIT` bytes is ``Truncated``; a refused one is
    :func:`.errors.file_error`'s answer."""
    try:
        answer = toolbox.list_files(directory)
    except SandboxError as error:
        if error.reason is Reason.RESPONSE_TOO_LARGE:
            raise Truncated(
                Reason.LISTING_BYTES,
                limit=LISTING_LIMIT,
                message=f"the listing of {directory} is larger than {LISTING_LIMIT} bytes",
            ) from None
        raise file_error(error, directory) from None
    if not isinstance(answer, list):
        raise ProviderError(PROVIDER, Reason.NOT_A_LISTING, answer=type(answer).__name__)
    return [
        file_info(entry, directory)
        for entry in answer
        if not (isinstance(entry, Mapping) and entry.get("name") in (".", ".."))
    ]
