"""An E2B command's end (what its ``Command.private`` holds): stdin by pid through envd.

The command's output is pumped into its :class:`Stream` by :mod:`.stream`;
this end writes stdin (``SendInput``), closes it (``CloseStdin``) and detaches.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Mapping

import attrs

from ..._http import HttpClient
from ..._streaming import Stream
from ...errors import CommandExited, Invalid, NotFound, SandboxError, WriteFailed
from ...reasons import Reason
from .envd import Envd

__all__ = ["E2BCommandEnd"]

#: Bytes of stdin per ``SendInput`` call.
STDIN_PIECE = 256 * 1024


@attrs.define(eq=False)
class E2BCommandEnd:
    """What an E2B ``Command.private`` holds: the stream and the stdin target.

    ``pid`` is the process stdin goes to; when ``None`` (an attach) it is
    found once, by ``List``, as the live process tagged ``tag``. ``live`` is
    false for an attach to a session that had already finished.
    """

    stream: Stream
    envd: Envd
    http: HttpClient = attrs.field(repr=False)
    tag: str
    pid: int | None
    live: bool = True
    stdin_closed: bool = False
    _lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)

    def _target(self) -> int | None:
        if self.pid is None:
            listing = self.envd.call(self.http, "List", {})
            processes = listing.get("processes") if isinstance(listing, Mapping) else None
            for entry in processes if isinstance(processes, list) else []:
                if isinstance(entry, Mapping) and entry.get("tag") == self.tag:
                    pid = entry.get("pid")
                    if isinstance(pid, int) and not isinstance(pid, bool):
                        self.pid = pid
                        break
        return self.pid

    def _check_connected(self) -> None:
        self.stream.check_stdin()
        if not self.live:
            raise CommandExited(Reason.EXITED)

    def write(self, data: bytes) -> None:
        """``SendInput`` by pid; total: exited → ``CommandExited``, else ``WriteFailed``."""
        self._check_connected()
        self.stream.check_writable()
        if self.stdin_closed:
            raise Invalid(Reason.STDIN_NOT_OPEN)
        with self._lock:
            try:
                pid = self._target()
                if pid is None:
                    raise CommandExited(Reason.EXITED)
                for start in range(0, len(data), STDIN_PIECE):
                    piece = base64.b64encode(data[start : start + STDIN_PIECE]).decode("ascii")
                    self.envd.call(
                        self.http, "SendInput", {"process": {"pid": pid}, "input": {"stdin": piece}}
                    )
            except (CommandExited, NotFound):
                raise CommandExited(Reason.EXITED) from None
            except SandboxError as error:
                if _stdin_closed(error):
                    raise Invalid(Reason.STDIN_NOT_OPEN) from None
                raise WriteFailed.of(error) from None

    def close_stdin(self) -> None:
        """``CloseStdin`` by pid; idempotent while connected, also after the exit."""
        self._check_connected()
        with self._lock:
            if self.stdin_closed or self.stream.finished.is_set():
                return
            try:
                pid = self._target()
                if pid is not None:
                    self.envd.call(self.http, "CloseStdin", {"process": {"pid": pid}})
            except NotFound:
                pass
            self.stdin_closed = True

    def stop(self) -> None:
        """Detach this end (the remote process goes on); never raises. The reader of a
        command that has not ended is waited for (at most 2 s) to let go of its
        stream; one that has ended let go of it before it delivered the end."""
        ended = self.stream.finished.is_set()
        self.stream.stop()
        if not ended:
            self.stream.join(2.0)


def _stdin_closed(error: SandboxError) -> bool:
    body = error.body
    if isinstance(body, Mapping):
        return "stdin not enabled or closed" in str(body.get("message", ""))
    return False
