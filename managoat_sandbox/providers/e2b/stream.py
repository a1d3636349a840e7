"""One envd process stream turned into frames (its stdin is the command's end, :mod:`.end`).

:func:`open_process` opens a ``Start`` stream and waits (bounded) for envd's
``start`` event before it returns, so a caller never holds a command whose
process envd has not registered (stdin sent earlier would read as "exited").
The rest of the stream is pumped into a shared :class:`Stream`, which keeps
the frame contract: stdout/stderr in order, then exactly one terminal frame.

Event → frame: ``data`` → ``Stdout``/``Stderr`` (``pty`` counts as stdout;
undecodable base64 is dropped); ``end`` → ``Exit`` with ``exitCode``, an
absent ``exitCode`` being 0 (proto-JSON omits zero values), and 128 + N for a
process signal N killed (:mod:`.ends`); an end-of-stream
envelope carrying an error → ``Error`` with the mapped error (``deadline_exceeded``
on an exec with a deadline → that deadline's ``exec_timeout``); a clean end of
the body without ``end`` → ``Error(Unavailable("closed_before_exit"))``, made
by the shared base, never an invented exit. In *replay* mode (``attach``) the
code at ``end`` comes from the session's exit file instead, and a missing exit
file is never turned into a code. A replay whose body ends without ``end`` is
also ``Error(Unavailable("closed_before_exit"))``, even when the exit file is
there: the cut may have come before the whole journal was replayed, and an
``Exit`` promises that all output was delivered.

With a ``deadline`` (an exec) no read waits past it: each read is bounded by
what is left of it, and a read it cut short fails the command with the
deadline's own error. An exec's pump runs in the calling thread
(``in_caller``), which would otherwise only wait for a reader thread.

After ``end`` the rest of the body (the end-of-stream envelope and the final
chunk) is read before the exit frame is delivered, so that urllib3 returns the
connection to its pool instead of discarding it; that read is bounded (each
wait for data at most :data:`TRAILER_WAIT` seconds, or half of what is left of
an exec deadline, and no new read once that much time has passed or
:data:`TRAILER_LIMIT` bytes were read: at most twice the bound in all, never
past an exec deadline) and whatever it finds is ignored: the ``end`` event
decided the outcome. If it gives up, the connection is dropped as before.
The response is then closed and the keepalive released, still before the exit
is delivered: a caller that sees it may send its next request at once, on the
same connection.
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from typing import Any

import attrs
import requests

from ..._deadline import Deadline
from ..._http import HttpClient, interrupt, set_read_timeout
from ..._readers import Readers
from ..._streaming import Stream, new_ref
from ...contract import Owner
from ...errors import (
    SandboxError,
    Unavailable,
)
from ...reasons import Reason
from . import connect
from .ends import exit_code
from .envd import Envd, read_chunks
from .errors import codec_error, connect_error

__all__ = ["Keepalive", "Reading", "open_process"]

log = logging.getLogger("managoat_sandbox.e2b")

#: The longest wait, after ``end``, for the body to end (so the connection can be reused).
TRAILER_WAIT = 0.5
#: The most bytes read after ``end`` while waiting for the body to end.
TRAILER_LIMIT = 64 * 1024

Keepalive = Callable[[], Callable[[], None]]


def _event(envelope: connect.Envelope) -> dict[str, Any] | None:
    """The envelope's ``event`` object, if it has one (JSON objects decode to dicts)."""
    message = envelope.message
    event = message.get("event") if isinstance(message, dict) else None
    return event if isinstance(event, dict) else None


def _decode(value: Any) -> bytes:
    if not isinstance(value, str) or not value:
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return b""


def _trailer_error(
    envelope: connect.Envelope, deadline: Deadline | None = None
) -> SandboxError | None:
    """The error an end-of-stream envelope carries (None for a clean end).

    envd ends a ``Start`` stream with ``deadline_exceeded`` once the
    ``Connect-Timeout-Ms`` sent for ``deadline`` has passed: that is the
    deadline's own error, whichever clock noticed first.
    """
    error = envelope.message.get("error") if isinstance(envelope.message, dict) else None
    if error is None:
        return None
    if (
        deadline is not None
        and deadline.timeout is not None
        and isinstance(error, dict)
        and error.get("code") == "deadline_exceeded"
    ):
        return deadline.error()
    return connect_error(error)


@attrs.define(eq=False)
class _Pump:
    """The loop over one open stream, run by its reader thread (an exec's: by its caller).

    The pump lets go of the stream (the keepalive released, the response closed
    and forgotten) before it delivers a terminal frame it decided on, so that a
    caller who sees the command end finds nothing left running for it (its
    ``stop`` has nothing to wait for); and a finished command its caller still
    holds does not keep the connection's pool (and an idle socket in it) alive
    after the pool's session has been closed.
    """

    response: requests.Response | None
    chunks: Iterator[bytes]
    decoder: connect.Decoder
    pending: list[connect.Envelope]
    closer: ExitStack
    keepalive: Keepalive
    recover: Callable[[], int | None] | None
    on_stopped: Callable[[], None] | None
    deadline: Deadline | None
    idle_timeout: float
    #: Releases the keepalive held while the pump runs (idempotent).
    release: Callable[[], None] = attrs.field(default=lambda: None, init=False)
    _closing: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _closed: bool = attrs.field(default=False, init=False)

    def __call__(self, stream: Stream) -> None:
        self.release = self.keepalive()
        try:
            self._drive(stream)
        finally:
            self._let_go()
            if stream.stopped.is_set() and not stream.finished.is_set() and self.on_stopped:
                self.on_stopped()

    def _let_go(self) -> None:
        """Release the sandbox's keepalive and close the response (its connection goes
        back to the pool when the body was read to its end). Idempotent."""
        self.release()
        with self._closing:
            self._closed = True
            self.closer.close()
            self.response, self.chunks = None, iter(())

    def interrupt(self) -> None:
        """Unblock the reader's read, unless the stream is closed already: once closed,
        its connection may be back in the pool, serving another request."""
        with self._closing:
            if not self._closed and self.response is not None:
                interrupt(self.response)

    def _drive(self, stream: Stream) -> None:
        """Deliver events until a terminal one or the body's end; at the body's end
        without a terminal frame the shared base fails the stream ``closed_before_exit``."""
        try:
            if self._handle(stream, self.pending):
                return
            for chunk in self._reads():
                if self._handle(stream, self.decoder.feed(chunk)):
                    return
        except connect.CodecError as error:
            self._fail(stream, codec_error(error.reason))
        except Unavailable as error:
            if not stream.stopped.is_set():
                self._fail(stream, error)

    def _fail(self, stream: Stream, error: SandboxError) -> None:
        """End the stream with ``error``, once the pump has let go of it."""
        self._let_go()
        stream.fail(error)

    def _reads(self) -> Iterator[bytes]:
        """The body's chunks; with a deadline, no read waits past it (see the module
        docstring): a read it cut short raises the deadline's error."""
        deadline = self.deadline
        while True:
            if deadline is not None and self.response is not None:
                set_read_timeout(self.response, deadline.clamp(self.idle_timeout))
            try:
                chunk = next(self.chunks, b"")
            except Unavailable as error:
                raise _late(deadline) or error from None
            if not chunk:
                return
            yield chunk

    def _handle(self, stream: Stream, envelopes: list[connect.Envelope]) -> bool:
        for envelope in envelopes:
            if stream.stopped.is_set():
                return True
            if envelope.end_stream:
                error = _trailer_error(envelope, self.deadline)
                if error is None:
                    return False
                self._fail(stream, error)
                return True
            event = _event(envelope)
            if event is None:
                continue
            data = event.get("data")
            if isinstance(data, dict):
                out, pty, err = data.get("stdout"), data.get("pty"), data.get("stderr")
                if out or pty:
                    stream.stdout(_decode(out) + _decode(pty))
                if err:
                    stream.stderr(_decode(err))
            elif "end" in event:
                self._end(stream, exit_code(event["end"]))
                return True
        return False

    def _end(self, stream: Stream, code: int) -> None:
        """The process ended: read the rest of the body, let go of the stream, then
        deliver the exit (so a caller that sees it finds the connection back in the
        pool and the pump all but done)."""
        self._finish_body()
        self._let_go()
        if self.recover is None:
            stream.exit(code)
        else:
            self._recovered_exit(stream)

    def _finish_body(self) -> None:
        """Read the body to its end, bounded (see the module docstring); never raises."""
        response = self.response
        if response is None:
            return
        remaining = None if self.deadline is None else self.deadline.remaining()
        bound = TRAILER_WAIT if remaining is None else min(TRAILER_WAIT, remaining / 2)
        if bound <= 0:
            return
        until = time.monotonic() + bound
        set_read_timeout(response, bound)
        read = 0
        try:
            while True:
                chunk = next(self.chunks, b"")
                read += len(chunk)
                if not chunk or read > TRAILER_LIMIT or time.monotonic() >= until:
                    return
        except Unavailable:
            return

    def _recovered_exit(self, stream: Stream) -> None:
        assert self.recover is not None
        try:
            code = self.recover()
        except SandboxError:
            code = None
        if code is None:
            stream.fail(Unavailable(Reason.CLOSED_BEFORE_EXIT))
        else:
            stream.exit(code)


def _wait_for_start(
    response: requests.Response,
    chunks: Iterator[bytes],
    decoder: connect.Decoder,
    *,
    bound: float,
    deadline: Deadline | None,
) -> tuple[int | None, list[connect.Envelope]]:
    """Read until envd's ``start`` (or an ``end``) event: its pid and what followed it.

    Waits at most ``bound`` seconds (``DeadlineExpired("start_timeout")``) and
    never past ``deadline``, whose own error wins when both have passed.
    """
    waiting = Deadline(bound, reason=Reason.START_TIMEOUT)

    def expired() -> SandboxError:
        return _late(deadline) or waiting.error()

    while True:
        set_read_timeout(
            response, waiting.clamp(bound if deadline is None else deadline.clamp(bound))
        )
        try:
            chunk = next(chunks)
        except StopIteration:
            raise _late(deadline) or Unavailable(Reason.CLOSED_BEFORE_EXIT) from None
        except Unavailable as error:
            if error.reason is Reason.TIMEOUT:
                raise expired() from None
            raise _late(deadline) or error from None
        try:
            envelopes = decoder.feed(chunk)
        except connect.CodecError as error:
            raise codec_error(error.reason) from None
        for index, envelope in enumerate(envelopes):
            if envelope.end_stream:
                raise _trailer_error(envelope, deadline) or Unavailable(Reason.CLOSED_BEFORE_EXIT)
            event = _event(envelope)
            if event is None:
                continue
            start = event.get("start")
            if isinstance(start, dict):
                pid = start.get("pid")
                return (pid if isinstance(pid, int) else None), envelopes[index + 1 :]
            if "end" in event or "data" in event:
                return None, envelopes[index:]


def _late(deadline: Deadline | None) -> SandboxError | None:
    """The deadline's error if it has expired: a failure after it is a timeout."""
    return deadline.error() if deadline is not None and deadline.expired() else None


@attrs.frozen
class Reading:
    """How a started process's stream is read, in each of the three modes.

    ``keepalive`` holds the sandbox's TTL up while the stream is read; reads are
    bounded by ``idle_timeout`` (envd sends keepalives well within it); a stream
    read in the background is read by one of ``readers`` (a thread of its own
    when ``None``). A spawn or an exec gives nothing more. Replay mode (an
    ``attach``, see the module docstring) gives ``recover``, which reads the
    journaled exit code when the stream ends without one, and
    ``on_stopped(pid)``, run in the reader thread when the command was stopped
    before its end.
    """

    keepalive: Keepalive
    idle_timeout: float
    readers: Readers | None = None
    recover: Callable[[], int | None] | None = None
    on_stopped: Callable[[int | None], None] | None = None


@attrs.frozen
class _Started:
    """A ``Start`` (or ``Connect``) stream whose ``start`` event has come: its pid, what
    was read past it, and what closes the response."""

    response: requests.Response
    chunks: Iterator[bytes]
    decoder: connect.Decoder
    pid: int | None
    pending: list[connect.Envelope]
    closer: ExitStack


def _start(
    http: HttpClient,
    envd: Envd,
    request: Mapping[str, Any],
    *,
    deadline: Deadline | None,
    extra_headers: Mapping[str, str] | None,
    accepted: threading.Event | None,
) -> _Started:
    """Open the stream and wait for its ``start`` event, bounded by the settings' timeout
    and by ``deadline`` (whose expiry raises its own error)."""
    with ExitStack() as stack:
        response = stack.enter_context(
            envd.stream(
                http, "Start", request, read_timeout=envd.timeout, extra_headers=extra_headers
            )
        )
        if accepted is not None:
            accepted.set()
        chunks = read_chunks(response)
        decoder = connect.Decoder()
        pid, pending = _wait_for_start(
            response, chunks, decoder, bound=envd.timeout, deadline=deadline
        )
        return _Started(response, chunks, decoder, pid, pending, stack.pop_all())


def open_process(
    http: HttpClient,
    envd: Envd,
    request: Mapping[str, Any],
    reading: Reading,
    *,
    owner: Owner | None,
    stdin: bool,
    deadline: Deadline | None = None,
    extra_headers: Mapping[str, str] | None = None,
    accepted: threading.Event | None = None,
    in_caller: bool = False,
) -> tuple[Stream, int | None]:
    """Start the process, wait for its ``start`` event, then pump it into a new Stream,
    read as ``reading`` says.

    ``accepted`` is set as soon as envd has answered the ``Start`` with 200:
    from then on the process may be running, so the call must not be repeated
    (an error raised while it is clear was a refusal: nothing was started).
    The stream is pumped by a reader thread, or with ``in_caller`` to its end
    in the calling thread before this returns (an exec, whose frames go to a
    queue it then reads).
    """
    started = _start(
        http, envd, request, deadline=deadline, extra_headers=extra_headers, accepted=accepted
    )
    set_read_timeout(started.response, reading.idle_timeout)
    stream = Stream(new_ref("e2b"), owner, label="e2b", stdin=stdin)
    on_stopped, pid = reading.on_stopped, started.pid
    pump = _Pump(
        started.response,
        started.chunks,
        started.decoder,
        started.pending,
        started.closer,
        reading.keepalive,
        reading.recover,
        None if on_stopped is None else (lambda: on_stopped(pid)),
        deadline,
        reading.idle_timeout,
    )
    if in_caller:
        stream.run_here(pump, on_stop=pump.interrupt)
    else:
        stream.start(pump, on_stop=pump.interrupt, readers=reading.readers)
    return stream, pid
