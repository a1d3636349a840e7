"""``upload`` and ``download`` through a ``tar`` run in the sandbox, over any adapter.

No provider offers a tree API that keeps modes and symbolic links (their
multi-file uploads and downloads carry bytes only), so a whole tree goes as
one tar stream through one command the adapter spawns — its stdin for an
upload, its stdout for a download — one streaming request on every provider,
memory bounded on both ends:

* upload: ``mkdir -p PARENT && cd PARENT && tar -x -p --no-same-owner -f -``
  in the sandbox, fed the stream :mod:`.pack` writes, in blocks of
  :data:`.pack.CHUNK` (each ``write_stdin`` waits for the command to take it);
* download: ``tar -c -f - -- NAME`` from ``PARENT`` in the sandbox, its stdout
  read through a byte-bounded queue (back-pressure to the command) and written
  by :mod:`.unpack`, which never writes outside the local target.

The sandbox needs a POSIX ``sh`` and a GNU-compatible ``tar``. How it ends:
the remote path missing is ``NotFound(("path", path))``; ``tar`` refused by file
permissions ``Denied(("path", path))``; another ``tar`` failure
``Invalid(("transfer", "<tar's last words>"))``; the transfer's ``timeout``
passing ``DeadlineExpired("transfer_timeout")`` (the command is stopped).
"""

from __future__ import annotations

import posixpath
import queue
import tarfile
import threading
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from .. import reasons
from .._deadline import Deadline
from .._frame_queue import FrameQueue
from ..contract import Owner
from ..errors import CommandExited, Denied, Invalid, NotFound
from ..frames import Error, Exit, Frame, Stderr, Stdout
from ..reasons import Reason
from ..types import Command, Handle, TransferProgress
from .counter import Counter, ProgressCallback
from .pack import plan, totals, write_archive
from .unpack import ChunkReader, Extractor, unusable

__all__ = ["MISSING", "PATH_MUST_EXIST", "Runner", "download", "explain", "split", "upload"]

#: ``$1`` the directory to extract in.
UPLOAD_SCRIPT = 'mkdir -p -- "$1" && cd -- "$1" && exec tar -x -p --no-same-owner -f -'
#: The exit code the download scripts give a missing path.
MISSING = 66
#: A download script's start: its path ``$1`` missing (not even a dangling link) ends it
#: with :data:`MISSING`.
PATH_MUST_EXIST = (
    f'[ -e "$1" ] || [ -L "$1" ] || {{ echo "no such file or directory" >&2; exit {MISSING}; }}; '
)
#: ``$1`` the path, ``$2`` its directory, ``$3`` its name.
DOWNLOAD_SCRIPT = PATH_MUST_EXIST + 'cd -- "$2" && exec tar -c -f - -- "$3"'
#: The most of a command's stderr kept to explain a failure.
STDERR_KEPT = 64 * 1024
#: The unread output a download lets wait before the command is held up.
QUEUE_BYTES = 8 * 1024 * 1024
TIMEOUT_REASON = reasons.timed_out("transfer")


class Runner(Protocol):
    """What a transfer needs of an adapter (:class:`managoat_sandbox.transfers.TarTransfers`)."""

    def transfer_command(
        self, handle: Handle, args: Sequence[str], *, owner: Owner, stdin: bool
    ) -> Command: ...

    def transfer_ended(self, handle: Handle, command: Command) -> None: ...

    def write_stdin(self, command: Command, data: bytes) -> None: ...

    def close_stdin(self, command: Command) -> None: ...

    def stop_command(self, command: Command) -> None: ...


def split(remote_path: str) -> tuple[str, str]:
    parent, name = posixpath.split(remote_path)
    return parent or "/", name


class _End:
    """What a transfer command's frames other than its output say: its stderr (the
    last :data:`STDERR_KEPT` bytes) and its terminal frame (an upload's owner)."""

    def __init__(self) -> None:
        self.stderr = b""
        self.terminal: Frame | None = None
        self.ended = threading.Event()

    def __call__(self, frame: Frame) -> None:
        if isinstance(frame, Stderr):
            self.stderr = (self.stderr + frame.data)[-STDERR_KEPT:]
        elif frame.terminal:
            self.terminal = frame
            self.ended.set()


def _outcome(terminal: Frame | None, stderr: bytes, remote_path: str) -> None:
    """Raise what a finished ``tar`` command's end says went wrong, if anything."""
    if isinstance(terminal, Error):
        raise terminal.reason
    assert isinstance(terminal, Exit)
    explain(terminal.code, stderr, remote_path)


def explain(code: int, stderr: bytes, remote_path: str) -> None:
    """Raise what a ``tar`` script's exit ``code`` and ``stderr`` say went wrong (see
    the module docstring), if anything."""
    if code == 0:
        return
    words = stderr.decode("utf-8", "replace").strip()
    if code == MISSING and "no such file or directory" in words:
        raise NotFound(Reason.PATH, path=remote_path)
    if "Permission denied" in words or "Operation not permitted" in words:
        raise Denied(Reason.PATH, path=remote_path)
    last = words.splitlines()[-1] if words else f"exit {code}"
    raise Invalid(Reason.TRANSFER, problem=last, message=f"tar in the sandbox failed: {last}")


class _Stdin:
    """The archive's sink: whole blocks to the command's stdin, each within the
    deadline."""

    def __init__(self, adapter: Runner, command: Command, deadline: Deadline) -> None:
        self.adapter = adapter
        self.command = command
        self.deadline = deadline

    def write(self, data: bytes) -> int:
        self.deadline.check()
        self.adapter.write_stdin(self.command, bytes(data))
        return len(data)


def upload(
    adapter: Runner,
    handle: Handle,
    local_path: str,
    remote_path: str,
    *,
    progress: ProgressCallback | None,
    timeout: float | None,
) -> TransferProgress:
    """Copy ``local_path`` (a file, link or tree) to ``remote_path`` (module docstring)."""
    deadline = Deadline(timeout, reason=TIMEOUT_REASON)
    parent, name = split(remote_path)
    entries = plan(local_path, name)
    files, size = totals(entries)
    counter = Counter(progress, files_total=files, bytes_total=size)
    end = _End()
    argv = ["-c", UPLOAD_SCRIPT, "sh", parent]
    command = adapter.transfer_command(handle, argv, owner=end, stdin=True)
    try:
        try:
            write_archive(entries, _Stdin(adapter, command, deadline), counter)
            adapter.close_stdin(command)
        except CommandExited:
            pass  # tar ended early: its end says why
        if not end.ended.wait(deadline.clamp()):
            raise deadline.error()
    except BaseException:
        adapter.stop_command(command)
        raise
    finally:
        adapter.transfer_ended(handle, command)
    _outcome(end.terminal, end.stderr, remote_path)
    return counter.done()


def _stdout_of(frames: queue.Queue[Any], end: _End, deadline: Deadline) -> Iterator[bytes]:
    """A download command's stdout as it arrives, within the deadline; its other frames
    (stderr, the terminal one) go to ``end``."""
    while end.terminal is None:
        try:
            frame = frames.get(timeout=deadline.clamp())
        except queue.Empty:
            raise deadline.error() from None
        if isinstance(frame, Stdout):
            yield frame.data
        else:
            end(frame)


def download(
    adapter: Runner,
    handle: Handle,
    remote_path: str,
    local_path: str,
    *,
    progress: ProgressCallback | None,
    timeout: float | None,
) -> TransferProgress:
    """Copy ``remote_path`` (a file, link or tree) to ``local_path`` (module docstring)."""
    deadline = Deadline(timeout, reason=TIMEOUT_REASON)
    parent, name = split(remote_path)
    frames = FrameQueue(max_bytes=QUEUE_BYTES)
    argv = ["-c", DOWNLOAD_SCRIPT, "sh", remote_path, parent, name]
    command = adapter.transfer_command(handle, argv, owner=frames, stdin=False)
    counter = Counter(progress)
    end = _End()
    stdout = _stdout_of(frames, end, deadline)
    try:
        unreadable: tarfile.ReadError | None = None
        try:
            Extractor(local_path, name, counter).extract(ChunkReader(stdout))
        except tarfile.ReadError as error:
            unreadable = error  # none at all when tar failed before writing one
        for _ in stdout:
            pass  # what follows the archive, up to the command's end
        if unreadable is not None and isinstance(end.terminal, Exit) and end.terminal.code == 0:
            raise unusable(unreadable) from None
    except BaseException:
        adapter.stop_command(command)
        raise
    finally:
        adapter.transfer_ended(handle, command)
    _outcome(end.terminal, end.stderr, remote_path)
    return counter.done()
