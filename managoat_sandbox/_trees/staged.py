"""``upload`` and ``download`` with the archive staged as one file in the sandbox.

For a provider whose command input and output are costly per byte (Daytona
carries stdin as base64 lines, one request each, and stdout through its
command journal) while its file API streams raw bytes, the tar stream goes
through the file API instead, as one file in the sandbox's ``/tmp``:

* upload: the archive is packed (:mod:`.pack`) into a temporary file on this
  machine and streamed to ``/tmp/.managoat-transfer-<random>.tar.<n>`` in parts
  of at most :data:`PART_BYTES` (one file upload each: services, and our
  emulators, bound a request's body), then one command runs ``tar -x`` on the
  parts joined in order and removes them;
* download: one command runs ``tar -c`` into the staging file, it is streamed
  back in one file download into :class:`.unpack.Extractor`, and removed.

The same outcomes as :mod:`.over_command` (``NotFound``, ``Denied``,
``Invalid(("transfer", ...))``, ``DeadlineExpired("transfer_timeout")``), and
the same guarantees: memory bounded, nothing written outside the local target.
The staging file takes the archive's size on the sandbox's disk while the
transfer runs (an upload's on this machine's too); it is removed in every case
the sandbox can still be reached.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, Protocol

from .._deadline import Deadline
from ..errors import SandboxError
from ..types import ExecResult, Handle, TransferProgress
from .counter import Counter
from .over_command import PATH_MUST_EXIST, TIMEOUT_REASON, explain, split
from .pack import CHUNK, plan, totals, write_archive
from .unpack import ChunkReader, Extractor, unusable

__all__ = ["Stager", "download", "staging_path", "upload"]

log = logging.getLogger("managoat_sandbox")

#: The most bytes of an upload's archive sent in one request.
PART_BYTES = 32 * 1024 * 1024
#: ``$1`` the directory to extract in, ``$2`` the staged archive's path: its parts are
#: ``$2.0000``, ``$2.0001``… (the shell sorts them), removed in any case.
EXTRACT_SCRIPT = (
    'mkdir -p -- "$1" && cd -- "$1" && cat -- "$2".[0-9]* | tar -x -p --no-same-owner -f -; '
    'c=$?; rm -f -- "$2".[0-9]*; exit "$c"'
)
#: ``$1`` the path, ``$2`` its directory, ``$3`` its name, ``$4`` the archive to write.
ARCHIVE_SCRIPT = PATH_MUST_EXIST + 'cd -- "$2" && tar -c -f "$4" -- "$3"'
REMOVE_SCRIPT = 'rm -f -- "$1" "$1".[0-9]*'


def staging_path() -> str:
    """A new path for a staged archive in the sandbox."""
    return f"/tmp/.managoat-transfer-{secrets.token_hex(8)}.tar"


class Stager(Protocol):
    """What a staged transfer needs of an adapter: ``exec`` and a file API that streams."""

    def exec(
        self, handle: Handle, cmd: str, args: Sequence[str] = (), *, timeout: float | None = ...
    ) -> ExecResult: ...

    def put_stream(self, handle: Handle, path: str, chunks: Iterable[bytes]) -> None:
        """Write the file at ``path`` from ``chunks`` (parents made), one streamed request;
        ``chunks`` may be iterated again (each time from the start) to send it again."""

    def get_stream(
        self, handle: Handle, path: str
    ) -> contextlib.AbstractContextManager[Iterator[bytes]]:
        """The bytes of the file at ``path``, streamed as read; iterated to its end, the
        answer has been checked whole."""


def _run(
    adapter: Stager, handle: Handle, script: str, args: list[str], deadline: Deadline
) -> ExecResult:
    return adapter.exec(handle, "sh", ["-c", script, "sh", *args], timeout=deadline.remaining())


def _remove(adapter: Stager, handle: Handle, stage: str) -> None:
    """Remove a staged archive; a failure is only logged (the sandbox may be gone)."""
    try:
        adapter.exec(handle, "sh", ["-c", REMOVE_SCRIPT, "sh", stage], timeout=60.0)
    except SandboxError as error:
        log.warning("could not remove the staged archive %s: %r", stage, error)


class _FileChunks:
    """``length`` bytes of a staged archive from ``start``, in blocks, within the
    deadline; iterating again starts over (so a request an adapter sends again sends
    the whole part again)."""

    def __init__(self, file: IO[bytes], start: int, length: int, deadline: Deadline) -> None:
        self.file = file
        self.start = start
        self.length = length
        self.deadline = deadline

    def __iter__(self) -> Iterator[bytes]:
        self.file.seek(self.start)
        left = self.length
        while left and (chunk := self.file.read(min(CHUNK, left))):
            self.deadline.check()
            left -= len(chunk)
            yield chunk


def _send_parts(
    adapter: Stager, handle: Handle, stage: str, archive: IO[bytes], deadline: Deadline
) -> None:
    """The archive to ``<stage>.0000``, ``<stage>.0001``… in parts of :data:`PART_BYTES`."""
    size = archive.seek(0, 2)
    for index, start in enumerate(range(0, max(size, 1), PART_BYTES)):
        length = min(PART_BYTES, size - start)
        part = _FileChunks(archive, start, length, deadline)
        adapter.put_stream(handle, f"{stage}.{index:04d}", part)


def upload(
    adapter: Stager,
    handle: Handle,
    local_path: str,
    remote_path: str,
    *,
    progress: Callable[[TransferProgress], object] | None,
    timeout: float | None,
) -> TransferProgress:
    """Copy ``local_path`` to ``remote_path`` through a staged archive (module docstring);
    progress counts the packing."""
    deadline = Deadline(timeout, reason=TIMEOUT_REASON)
    parent, name = split(remote_path)
    entries = plan(local_path, name)
    files, size = totals(entries)
    counter = Counter(progress, files_total=files, bytes_total=size)
    stage = staging_path()
    with tempfile.TemporaryFile(prefix="managoat-transfer-") as archive:
        write_archive(entries, archive, counter)
        try:
            _send_parts(adapter, handle, stage, archive, deadline)
        except BaseException:
            _remove(adapter, handle, stage)
            raise
    result = _run(adapter, handle, EXTRACT_SCRIPT, [parent, stage], deadline)
    explain(result.exit_code, result.stderr, remote_path)
    return counter.done()


def _within(chunks: Iterator[bytes], deadline: Deadline) -> Iterator[bytes]:
    for chunk in chunks:
        deadline.check()
        yield chunk


def download(
    adapter: Stager,
    handle: Handle,
    remote_path: str,
    local_path: str,
    *,
    progress: Callable[[TransferProgress], object] | None,
    timeout: float | None,
) -> TransferProgress:
    """Copy ``remote_path`` to ``local_path`` through a staged archive (module docstring)."""
    deadline = Deadline(timeout, reason=TIMEOUT_REASON)
    parent, name = split(remote_path)
    stage = staging_path()
    counter = Counter(progress)
    try:
        made = _run(adapter, handle, ARCHIVE_SCRIPT, [remote_path, parent, name, stage], deadline)
        explain(made.exit_code, made.stderr, remote_path)
        with adapter.get_stream(handle, stage) as chunks:
            try:
                Extractor(local_path, name, counter).extract(ChunkReader(_within(chunks, deadline)))
            except tarfile.ReadError as error:
                raise unusable(error) from None
            for _ in chunks:
                pass  # the answer read to its end: what follows the archive is checked
    finally:
        _remove(adapter, handle, stage)
    return counter.done()
