"""envd's server streams (Start, Connect) over chunked HTTP/1.1, with injectable faults.

A stream sends ``start``, then one ``data`` event per run of output the
engine delivered (at most 32 KiB each, 16 KiB for a PTY), then the ``end``
event and the ``{}`` end-of-stream envelope. What a stream carries is one
engine subscription, read on a thread of its own that hands each batch to
the event loop: Start's follows the process from byte zero, Connect's from
the moment it attached (envd replays no output; see :mod:`.processes`).
Keepalive events are sent after ``Keepalive-Ping-Interval`` seconds without
data. When the sandbox is paused or killed under an open stream, the stream
ends with an ``unavailable`` error; once the request's ``Connect-Timeout-Ms``
has passed it ends with a ``deadline_exceeded`` error instead of (or before)
the ``end`` event, as a connect-go handler whose context expired does.

Each envelope is normally one HTTP chunk. A :class:`StreamPlan` built from
the emulator's faults changes that (see the emulator's ``stream_fault``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from ..._engine import events, wire
from ..._engine.errors import EngineError
from ..._engine.subscription import Subscription
from .. import _cut
from . import connect
from .processes import LOST, Process
from .state import SandboxRecord

__all__ = ["Disconnected", "EnvelopeWriter", "Feed", "StreamPlan", "pump"]

MAX_CHUNK = 32 * 1024
MAX_PTY_CHUNK = 16 * 1024
#: How often an idle stream looks whether its sandbox was paused or killed, or its client left.
CHECK = 0.05
DEFAULT_STREAM_ERROR = connect.error_body("unavailable", "stream unavailable")
#: How a stream ends once its ``Connect-Timeout-Ms`` has passed (no ``end`` event).
DEADLINE_ERROR = connect.error_body("deadline_exceeded", "context deadline exceeded")


class Disconnected(Exception):
    """The client went away, or a fault cut the connection: stop streaming."""


@dataclass
class StreamPlan:
    """The faults applied to one stream (all off by default).

    ``cut_after``: after that many data events (or at the process's end,
    whichever comes first) the stream ends with ``cut_trailer`` instead of the
    end event; ``cut_trailer`` None means the clean ``{}``.
    ``split``: bytes per HTTP chunk (one envelope over several chunks).
    ``merge``: every envelope held back and written as one chunk at the end.
    ``hang_after`` / ``reset_after``: after that many envelopes the stream goes
    silent with the connection open / the connection is shut mid-envelope.
    ``rst_after``: after that many envelopes the connection is reset (TCP RST)
    between two envelopes.
    ``garbage``: ``"json"`` or ``"compressed"``, one bad envelope after start.
    """

    no_start: bool = False
    cut_after: int | None = None
    cut_trailer: Any = None
    split: int | None = None
    merge: bool = False
    hang_after: int | None = None
    reset_after: int | None = None
    rst_after: int | None = None
    garbage: str | None = None


class EnvelopeWriter:
    """Writes envelopes to a prepared chunked response, applying a plan's framing faults."""

    def __init__(
        self, request: web.Request, response: web.StreamResponse, plan: StreamPlan
    ) -> None:
        self._request = request
        self._response = response
        self.plan = plan
        self._held = bytearray()
        self.sent = 0

    @property
    def closing(self) -> bool:
        """Whether the client's connection is gone."""
        transport = self._request.transport
        return transport is None or transport.is_closing()

    async def send(self, envelope: bytes) -> None:
        """Write one envelope (raises Disconnected once the client is gone)."""
        plan = self.plan
        if plan.hang_after is not None and self.sent >= plan.hang_after:
            await self._hang()
        if plan.rst_after is not None and self.sent >= plan.rst_after:
            _cut.reset(self._request.transport)
            raise Disconnected
        if plan.reset_after is not None and self.sent >= plan.reset_after:
            await self._write(envelope[: max(1, len(envelope) // 2)])
            transport = self._request.transport
            if transport is not None:
                transport.close()
            raise Disconnected
        self.sent += 1
        if plan.merge:
            self._held += envelope
        elif plan.split:
            for start in range(0, len(envelope), plan.split):
                await self._write(envelope[start : start + plan.split])
        else:
            await self._write(envelope)

    async def finish(self) -> None:
        """Flush held envelopes and end the chunked body."""
        if self._held:
            await self._write(bytes(self._held))
            self._held.clear()
        try:
            await self._response.write_eof()
        except (ConnectionError, RuntimeError):
            raise Disconnected from None

    async def _write(self, data: bytes) -> None:
        if self.closing:
            raise Disconnected
        try:
            await self._response.write(data)
        except (ConnectionError, RuntimeError):
            raise Disconnected from None

    async def _hang(self) -> None:
        while not self.closing:
            await asyncio.sleep(0.05)
        raise Disconnected


def _event(kind: str, body: Any) -> bytes:
    return connect.encode({"event": {kind: body}})


def _pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


class Feed:
    """One engine subscription read on a thread of its own, its batches handed to the loop.

    The thread ends after the subscription's end event, or once :meth:`close`
    (callable from the loop) made its read return.
    """

    def __init__(self, subscription: Subscription, loop: asyncio.AbstractEventLoop) -> None:
        self._subscription = subscription
        self._loop = loop
        self._queue: asyncio.Queue[list[events.Event]] = asyncio.Queue()
        threading.Thread(target=self._read, name="e2b-emulator-follow", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                batch = self._subscription.read()
            except (OSError, EngineError) as error:
                batch = [events.Lost(str(error))]
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody listens any more
                self._loop.call_soon_threadsafe(self._queue.put_nowait, batch)
            if not batch or isinstance(batch[-1], (events.Exited, events.Lost)):
                return

    async def next(self, timeout: float) -> list[events.Event] | None:
        """The next batch (``[]``: the subscription ended without an end event), or None
        if none came within ``timeout`` seconds."""
        try:
            return await asyncio.wait_for(self._queue.get(), timeout)
        except asyncio.TimeoutError:
            return None

    def close(self) -> None:
        """Stop following: the thread's read returns and the thread ends."""
        self._subscription.close()


class _PlanFaults:
    """What a stream's :class:`StreamPlan` decides about the stream's content (its
    framing faults are :class:`EnvelopeWriter`'s): a bad envelope right after
    ``start`` (``garbage``), and where the stream is cut short (``cut_after``,
    ``cut_trailer``)."""

    def __init__(self, plan: StreamPlan) -> None:
        self._plan = plan

    async def after_start(self, writer: EnvelopeWriter) -> None:
        """Send the plan's bad envelope, if it has one."""
        if self._plan.garbage == "compressed":
            await writer.send(connect.encode({"event": {"keepalive": {}}}, connect.COMPRESSED))
        elif self._plan.garbage is not None:
            await writer.send(connect.encode(b'{"event": {"data": '))

    def cut_due(self, data_events: int) -> bool:
        """Whether the stream is cut now, ``data_events`` data events in."""
        return self._plan.cut_after is not None and data_events >= self._plan.cut_after

    @property
    def cuts_the_end(self) -> bool:
        """Whether the process's end event is replaced by the cut."""
        return self._plan.cut_after is not None

    async def cut(self, writer: EnvelopeWriter) -> None:
        """End the stream as the plan's cut does (its trailer; None is the clean ``{}``)."""
        await writer.send(connect.end_stream(self._plan.cut_trailer))


class _Stream:
    """The protocol of one stream: ``start``, the data events, keepalives, then the end
    event and the end of stream — or an early end (sandbox gone, deadline, a fault of
    the plan, whose decisions are :class:`_PlanFaults`'s)."""

    def __init__(
        self,
        writer: EnvelopeWriter,
        process: Process,
        feed: Feed | None,
        record: SandboxRecord,
        generation: int,
        *,
        keepalive: float | None,
        deadline: float | None,
    ) -> None:
        self._writer = writer
        self._faults = _PlanFaults(writer.plan)
        self._process = process
        self._feed = feed
        self._record = record
        self._generation = generation
        self._keepalive = keepalive
        self._deadline = deadline
        self._loop = asyncio.get_running_loop()
        self._size = MAX_PTY_CHUNK if process.pty else MAX_CHUNK
        #: Output to send, and the process's end (an end event's body) once it came.
        self.pending: deque[events.Output | dict[str, Any]] = deque()
        self._data_events = 0
        self._quiet_since = 0.0

    async def run(self) -> None:
        """Send ``start``, then what the process produces, until the stream has ended."""
        writer = self._writer
        await writer.send(_event("start", {"pid": self._process.pid}))
        await self._faults.after_start(writer)
        self._quiet_since = self._loop.time()
        while True:
            if self._sandbox_left():
                await writer.send(connect.end_stream(self._unavailable()))
                return
            if self._faults.cut_due(self._data_events):
                await self._faults.cut(writer)
                return
            now = self._loop.time()
            if self._deadline is not None and now >= self._deadline:
                await writer.send(connect.end_stream(DEADLINE_ERROR))
                return
            if self.pending:
                item = self.pending.popleft()
                if isinstance(item, events.Output):
                    await self._send_output(item)
                    continue
                await self._send_end(item)
                return
            await self._idle(now)

    def _sandbox_left(self) -> bool:
        """Whether the sandbox was killed, or paused (a new generation), under the stream."""
        return self._record.gone or self._record.generation != self._generation

    def _unavailable(self) -> dict[str, str]:
        return connect.error_body(
            "unavailable",
            f"the connection to sandbox {self._record.sandbox_id} ended before "
            "the stream completed",
        )

    async def _send_output(self, item: events.Output) -> None:
        """One data event per piece of ``item``, until a cut is due."""
        stream = "stdout" if item.stream == wire.OUT else "stderr"
        key = "pty" if self._process.pty else stream
        for piece in _pieces(item.data, self._size):
            if self._faults.cut_due(self._data_events):
                break
            await self._writer.send(_event("data", {key: base64.b64encode(piece).decode()}))
            self._data_events += 1
        self._quiet_since = self._loop.time()

    async def _send_end(self, end: dict[str, Any]) -> None:
        """The end event and the clean end of stream — or the plan's cut instead."""
        if self._faults.cuts_the_end:
            await self._faults.cut(self._writer)
            return
        await self._writer.send(_event("end", end))
        await self._writer.send(connect.end_stream())

    async def _idle(self, now: float) -> None:
        """Nothing to send: a keepalive if one is due, then wait for the feed's next batch
        (at most until the next check, the deadline or the next keepalive)."""
        if self._keepalive is not None and now - self._quiet_since >= self._keepalive:
            await self._writer.send(_event("keepalive", {}))
            self._quiet_since = now
        if self._writer.closing:
            raise Disconnected
        assert self._feed is not None  # without one, the kept end is pending until sent
        wait = CHECK
        if self._deadline is not None:
            wait = min(wait, self._deadline - now)
        if self._keepalive is not None:
            wait = min(wait, self._quiet_since + self._keepalive - now)
        batch = await self._feed.next(max(wait, 0.0))
        if batch is None:
            return
        if not batch:
            self.pending.append(dict(LOST))
        for event in batch:
            self.pending.append(
                event if isinstance(event, events.Output) else self._process.keep_end(event)
            )


async def pump(
    writer: EnvelopeWriter,
    process: Process,
    subscription: Subscription | None,
    record: SandboxRecord,
    *,
    keepalive: float | None,
    deadline: float | None,
) -> None:
    """Stream one process to the client until its end (or a fault, or a disconnect).

    ``subscription`` is what the stream carries and is closed here whatever
    happens; None streams the process's kept end alone (Connect to a process
    that has ended). An end the subscription delivers becomes the process's
    kept end. ``deadline`` (event-loop time) ends the stream with
    :data:`DEADLINE_ERROR` once reached, whatever is still to be sent.
    """
    generation = record.generation
    feed = Feed(subscription, asyncio.get_running_loop()) if subscription is not None else None
    stream = _Stream(
        writer, process, feed, record, generation, keepalive=keepalive, deadline=deadline
    )
    if feed is None:
        stream.pending.append(process.end() or dict(LOST))
    try:
        await stream.run()
    finally:
        if feed is not None:
            feed.close()
