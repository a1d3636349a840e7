"""Following a toolbox command: its log and its exit, polled, delivered once per byte.

The daemon journals a session command as one append-only byte stream in which
each line is preceded by a 3-byte channel marker (``01 01 01`` stdout,
``02 02 02`` stderr). The log endpoint has no offset: every read returns the
whole journal from byte zero. :class:`Demux` turns a journal snapshot into the
complete stdout and stderr seen so far; for a command run by our shim each
stream is a sequence of ``:<base64>`` frame lines (see :mod:`.shim`), which
:class:`FramedChannel` decodes back into the exact bytes written.
:class:`LogFollower` remembers, per stream, how much it has already
delivered, so a re-read — a later, longer snapshot, or a shorter one replayed
by a flaky server — only ever delivers bytes not delivered before. That is
also how ``attach`` replays from byte zero: a fresh follower starts with
nothing delivered.

The exit code is the daemon's record (``exitCode`` on the command), read
*before* the log in each round: the daemon records it only after the journal
is drained, so the log read that follows holds all the output, and the exit
frame comes after it. While a command is quiet without a recorded exit, the
follower probes the shim's state (:func:`shim.probe`): a code the shim wrote
is the real exit (the daemon may never record one when its session shell was
killed); a shim that died without writing one means the command is gone. A
command that is gone, or whose session vanished — the daemon restarted, the
session was deleted, the sandbox is gone — ends with
``Unavailable("closed_before_exit")`` after its last output; an exit code is
never invented. A code learnt from the shim is delivered only once the log
read after it has shown both streams' end frames: an ``Exit`` means all the
output was delivered, so a log that can no longer be read (or only a stale
prefix of it) ends with ``closed_before_exit`` instead. Transient failures are retried (honouring a
429's advice) within a budget, after which the last error ends the stream.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
import time
from collections.abc import Callable

import attrs

from ..._streaming import Stream
from ...errors import Denied, NotFound, RateLimited, SandboxError, Unavailable
from . import shim
from .toolbox import LogSnapshot, Toolbox

__all__ = ["Demux", "FollowPolicy", "FramedChannel", "LogFollower", "RawChannel"]

log = logging.getLogger("managoat_sandbox.daytona")

_MARKER = re.compile(rb"\x01\x01\x01|\x02\x02\x02")
_STDOUT_MARK = b"\x01\x01\x01"
_PARTIAL_MARKS = (b"\x01\x01", b"\x02\x02", b"\x01", b"\x02")
#: After this many consecutive failed rounds (and every as many again), ask the
#: control plane whether the sandbox still runs: if not, its sessions are gone.
_PROBE_EVERY = 3
#: How many times a finished command's log is read, at most, to find its end frames.
_DRAIN_READS = 6


class Demux:
    """Splits a journal snapshot into its stdout and stderr bytes.

    Bytes before the first marker belong to stdout (so does a journal from a
    daemon that strips the markers). A lone ``01`` or ``02`` followed by other
    bytes is content. Unless ``final``, a trailing ``01``/``0101``/``02``/
    ``0202`` is held back, since the next snapshot may complete it into a
    marker: the result for a snapshot is then always a prefix of the result
    for any longer snapshot of the same journal.
    """

    @staticmethod
    def split(journal: bytes, *, final: bool = False) -> tuple[bytes, bytes]:
        """``(stdout, stderr)`` of the journal snapshot."""
        out: list[bytes] = []
        err: list[bytes] = []
        target = out
        position = 0
        for found in _MARKER.finditer(journal):
            target.append(journal[position : found.start()])
            target = out if found.group() == _STDOUT_MARK else err
            position = found.end()
        tail = journal[position:]
        if not final:
            for partial in _PARTIAL_MARKS:
                if tail.endswith(partial):
                    tail = tail[: -len(partial)]
                    break
        target.append(tail)
        return b"".join(out), b"".join(err)


class RawChannel:
    """One stream of a journal not framed by our shim: its bytes as journaled.

    Nothing marks its end, so it always counts as ``ended``.
    """

    ended = True

    def __init__(self) -> None:
        self.delivered = 0

    def feed(self, data: bytes, *, final: bool) -> bytes:
        """The bytes of ``data`` (the whole stream so far) not returned before."""
        if len(data) <= self.delivered:
            return b""
        fresh = data[self.delivered :]
        self.delivered = len(data)
        return fresh


class FramedChannel:
    """One stream framed by our shim: lines ``:<base64>`` each carrying raw output bytes.

    Only complete lines are decoded (unless ``final``), so a snapshot's result
    is a prefix of any longer snapshot's. The empty frame ``:`` ends the stream
    (``ended``). A line that is not a frame — an error printed by the shim
    itself — is passed through as text.
    """

    def __init__(self) -> None:
        self.consumed = 0
        self.ended = False

    def feed(self, data: bytes, *, final: bool) -> bytes:
        """The decoded bytes of the complete lines of ``data`` not decoded before."""
        if len(data) <= self.consumed:
            return b""
        region = data[self.consumed :]
        if not final:
            end = region.rfind(b"\n")
            if end < 0:
                return b""
            region = region[: end + 1]
        self.consumed += len(region)
        decoded: list[bytes] = []
        for line in region.splitlines(keepends=True):
            body = line.rstrip(b"\n")
            if body == b":":
                self.ended = True
                continue
            if body.startswith(b":"):
                try:
                    decoded.append(base64.b64decode(body[1:], validate=True))
                    continue
                except binascii.Error:
                    pass
            decoded.append(line)
        return b"".join(decoded)


@attrs.frozen
class FollowPolicy:
    """How a follower paces itself.

    It polls every ``min_interval`` seconds while output flows, backing off by
    half again per quiet round up to ``max_interval``. A command quiet for
    ``probe_after`` seconds without a recorded exit has its shim probed,
    then again at doubling intervals up to ``max_probe_interval``. After
    ``unreachable_after`` seconds of consecutive failures the stream ends with
    the last error. ``read_timeout`` bounds each request.
    """

    min_interval: float = 0.05
    max_interval: float = 1.0
    probe_after: float = 2.0
    max_probe_interval: float = 16.0
    unreachable_after: float = 30.0
    read_timeout: float = 30.0


class LogFollower:
    """The reader-thread pump of one spawned or attached command (``Stream.start(follower)``)."""

    def __init__(
        self,
        toolbox: Toolbox,
        session_id: str,
        command_id: str,
        policy: FollowPolicy,
        *,
        sandbox_gone: Callable[[], bool],
        framed: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.toolbox = toolbox
        self.session_id = session_id
        self.command_id = command_id
        self.policy = policy
        kind = FramedChannel if framed else RawChannel
        self.channels: tuple[FramedChannel | RawChannel, ...] = (kind(), kind())
        self._sandbox_gone = sandbox_gone
        self._clock = clock

    # -- delivery -----------------------------------------------------------

    def deliver(self, stream: Stream, snapshot: LogSnapshot, *, final: bool) -> bool:
        """Deliver the bytes of ``snapshot`` not delivered yet; True if any were new."""
        if snapshot.split is not None:
            parts = snapshot.split
        else:
            parts = Demux.split(snapshot.raw or b"", final=final)
        fresh = False
        senders = (stream.stdout, stream.stderr)
        for data, channel, send in zip(parts, self.channels, senders, strict=True):
            new = channel.feed(data, final=final)
            if new:
                send(new)
                fresh = True
        return fresh

    # -- the pump -----------------------------------------------------------

    def __call__(self, stream: Stream) -> None:
        policy = self.policy
        interval = policy.min_interval
        probe_gap = policy.probe_after
        next_probe = self._clock() + probe_gap
        failing_since: float | None = None
        failures = 0
        try:
            while not stream.stopped.is_set():
                try:
                    code = self._recorded_exit()
                    snapshot = self._logs()
                except NotFound:
                    self._vanished(stream)
                    return
                except Denied as error:
                    stream.fail(error)
                    return
                except SandboxError as error:
                    now = self._clock()
                    failing_since = now if failing_since is None else failing_since
                    failures += 1
                    if now - failing_since >= policy.unreachable_after:
                        stream.fail(error)
                        return
                    if failures % _PROBE_EVERY == 0 and self._sandbox_gone():
                        stream.fail(Unavailable("closed_before_exit"))
                        return
                    wait = interval
                    if isinstance(error, RateLimited) and error.retry_after is not None:
                        wait = max(wait, error.retry_after)
                    stream.stopped.wait(wait)
                    interval = min(interval * 1.5, policy.max_interval)
                    continue
                failing_since, failures = None, 0
                if code is not None:
                    self._drain(stream, snapshot)
                    stream.exit(code)
                    return
                fresh = self.deliver(stream, snapshot, final=False)
                now = self._clock()
                if fresh:
                    interval = policy.min_interval
                    probe_gap = policy.probe_after
                    next_probe = now + probe_gap
                elif now >= next_probe:
                    found = self._probe()
                    if isinstance(found, int) or found == shim.GONE:
                        self._finish(stream, found)
                        return
                    probe_gap = min(probe_gap * 2, policy.max_probe_interval)
                    next_probe = now + probe_gap
                stream.stopped.wait(interval)
                if not fresh:
                    interval = min(interval * 1.5, policy.max_interval)
        finally:
            self.toolbox.api.http.release()

    def _recorded_exit(self) -> int | None:
        record = self.toolbox.command(self.session_id, self.command_id)
        code = record.get("exitCode")
        if isinstance(code, bool) or not isinstance(code, int):
            return None
        return code

    def _logs(self) -> LogSnapshot:
        return self.toolbox.logs(
            self.session_id, self.command_id, read_timeout=self.policy.read_timeout
        )

    def _probe(self) -> int | str | None:
        """The shim's state: its exit code, ``running``, ``gone``, or None (unreadable)."""
        try:
            status, output = self.toolbox.execute(shim.probe(self.session_id))
        except SandboxError as error:
            log.debug("daytona: probing %s failed: %r", self.session_id, error)
            return None
        return shim.parse_probe(output) if status == 0 else None

    def _drain(self, stream: Stream, snapshot: LogSnapshot | None) -> None:
        """Deliver the rest of a finished command's log.

        A log read after the exit should hold everything, but a stale read can
        be shorter: until every stream's end frame has been seen, the log is
        read again (a few times, briefly spaced) before the rest is flushed.
        """
        latest = snapshot
        for attempt in range(_DRAIN_READS):
            if snapshot is not None:
                latest = snapshot
                self.deliver(stream, snapshot, final=False)
            if all(channel.ended for channel in self.channels) or stream.stopped.is_set():
                break
            if attempt:
                stream.stopped.wait(self.policy.min_interval)
            try:
                snapshot = self._logs()
            except SandboxError as error:
                log.debug("daytona: log read of %s failed: %r", self.session_id, error)
                snapshot = None
        if latest is not None:
            self.deliver(stream, latest, final=True)

    def _complete(self) -> bool:
        """Whether every stream's end frame has been delivered.

        Only a framed stream can prove that: a raw one carries no end mark.
        The shim writes both end frames before its exit code, so once it has
        a code, a log read that lacks them lost output.
        """
        return all(
            isinstance(channel, FramedChannel) and channel.ended for channel in self.channels
        )

    def _finish(self, stream: Stream, found: int | str | None) -> None:
        """Drain the log, then the shim's exit code — only if the whole log was
        delivered (:meth:`_complete`); otherwise closed before exit."""
        self._drain(stream, None)
        if isinstance(found, int) and self._complete():
            stream.exit(found)
        else:
            stream.fail(Unavailable("closed_before_exit"))

    def _vanished(self, stream: Stream) -> None:
        """The command or its session is gone: the shim's code after the rest of
        the log (read while it still answers), else closed before exit."""
        self._finish(stream, self._probe())
