"""The keeper: the host-side process of an isolated sandbox, and the egress proxy it runs.

Started by :func:`.launch.launch` once the agent serves. Every connection a
command makes to the proxy port arrives here as a descriptor the agent passes
over a socket pair (the *channel*); the keeper speaks HTTP proxy to it, asks
:mod:`.egress` where it may go, and relays it (:class:`Proxy`). The keeper
exits when the agent does.

The channel carries, from the agent, ``c`` with one descriptor (a new
connection) and ``p`` (the policy changed); and back to it one ``a`` for each
``p``, once every connection the new policy does not permit has been cut.

What a sandbox can make the keeper — a process of the caller — spend is bounded
whatever its commands do:

* **connections**: at most :func:`connection_cap` at once, that is
  :data:`MAX_CONNECTIONS` or the sandbox's ``processes`` limit if lower; one
  more is answered ``503`` and closed at once, never queued;
* **threads**: one event loop serves every connection, and host names are
  looked up on at most :data:`RESOLVERS` threads, so the keeper runs a fixed
  handful of threads however many connections there are;
* **time**: a request head must arrive within :data:`HEAD_TIMEOUT` (else
  ``408``), a lookup and each connection attempt take at most
  :data:`CONNECT_TIMEOUT` (else ``504``/``502``), and a relayed connection that
  carries nothing either way for :data:`IDLE_TIMEOUT` is closed; one that
  carries data is never cut for its age;
* **memory**: a request head of at most :data:`.egress.HEAD_LIMIT`, and one
  buffer of at most :data:`RELAY_CHUNK` each way per connection (a side is not
  read while the other has not taken what was read from it);
* **its log** (``state/agent.log``, shared with the agent): what the keeper
  writes stops at :data:`LOG_LIMIT` bytes (:class:`BoundedLog`). A request it
  cannot parse is answered ``400`` and closed; nothing is logged for it.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import functools
import io
import os
import queue
import resource
import select
import selectors
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from . import egress
from .egress import Address, Refusal
from .options import KEEPER, parse

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

#: Most proxy connections a sandbox may hold at once.
MAX_CONNECTIONS = 256
#: Threads that look host names up (the only threads besides the event loop's).
RESOLVERS = 4
#: Seconds a new connection has to send its request head.
HEAD_TIMEOUT = 30.0
#: Seconds a host name lookup, and each attempt to connect to one of its addresses, may take.
CONNECT_TIMEOUT = 10.0
#: Seconds a relayed connection may carry nothing either way before it is closed.
IDLE_TIMEOUT = 300.0
#: Largest chunk read from either side of a relay (and so its buffer each way).
RELAY_CHUNK = 64 * 1024
#: Largest size of the sandbox's log the keeper writes to (what would pass it is dropped).
LOG_LIMIT = 1024 * 1024

_POLL = 1.0
#: Descriptors kept for everything but connections (the state directory, the
#: channel, the selector, the log, the resolver wake-up pair, a connection attempt).
_SPARE_FDS = 64
_CHANNEL_READS = 64
_LINGER_RESET = struct.pack("ii", 1, 0)


class BoundedLog(io.RawIOBase):
    """An append-only writer to descriptor ``fd`` that never makes its file larger than
    ``limit`` bytes: whatever would pass the limit is dropped, silently.

    The file's size is read before every write, so other processes appending
    to the same file (the agent, bubblewrap) count too: the file stays within
    ``limit`` plus what those others write themselves. Never raises.
    """

    def __init__(self, fd: int, limit: int) -> None:
        super().__init__()
        self._fd = fd
        self._limit = limit
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, data: ReadableBuffer, /) -> int:
        view = memoryview(data).cast("B")
        with self._lock, contextlib.suppress(OSError):
            room = self._limit - os.fstat(self._fd).st_size
            if room > 0:
                os.write(self._fd, view[:room])
        return len(view)


def bounded_stderr(fd: int = 2, limit: int = LOG_LIMIT) -> io.TextIOWrapper:
    """A text stream over :class:`BoundedLog` for ``sys.stderr`` (tracebacks of the
    keeper's threads and of the process go there), written out line by line."""
    return io.TextIOWrapper(
        io.BufferedWriter(BoundedLog(fd, limit)),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )


def connection_cap(processes: int | None) -> int:
    """How many proxy connections the sandbox may hold at once: :data:`MAX_CONNECTIONS`,
    or its ``processes`` limit (``--processes``, given by the launch) if lower, and no
    more than this process's descriptors allow (its soft ``RLIMIT_NOFILE`` is raised
    towards the hard one for them). Each connection counts once, whatever its state,
    from the moment the keeper receives it until both of its sockets are closed."""
    cap = MAX_CONNECTIONS
    if processes is not None:
        cap = min(cap, processes)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2 * cap + _SPARE_FDS
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft != resource.RLIM_INFINITY:
        cap = min(cap, (soft - _SPARE_FDS) // 2)
    return max(cap, 1)


# -- the proxy ---------------------------------------------------------------------------


class _Flow:
    """One direction of a relay: what is read from ``source`` waits in ``buffer`` until
    ``sink`` takes it; the end of ``source`` is passed on once the buffer is empty."""

    def __init__(self, source: socket.socket, sink: socket.socket) -> None:
        self.source = source
        self.sink = sink
        self.buffer = bytearray()
        self.ended = False
        self.shut = False

    def pump(self) -> bool:
        """Move what moves without blocking (one read at most); True if anything did.
        OSError of either socket propagates: the relay is over."""
        moved = self._drain()
        if not self.buffer and not self.ended:
            try:
                data = self.source.recv(RELAY_CHUNK)
            except BlockingIOError:
                return moved
            if data:
                self.buffer += data
            else:
                self.ended = True
            moved = True
            self._drain()
        return moved

    def _drain(self) -> bool:
        moved = False
        if self.buffer:
            try:
                sent = self.sink.send(self.buffer)
            except BlockingIOError:
                return False
            del self.buffer[:sent]
            moved = sent > 0
        if self.ended and not self.buffer and not self.shut:
            self.sink.shutdown(socket.SHUT_WR)
            self.shut = True
            moved = True
        return moved

    def wants_read(self) -> bool:
        return not self.ended and not self.buffer

    def wants_write(self) -> bool:
        return bool(self.buffer)


class _Connection:
    """One proxy connection, from its head to the end of its relay.

    ``state``: ``head`` (reading the request), ``lookup`` (its host name is being
    looked up), ``connect`` (connecting to ``address``), ``relay``. ``deadline``:
    when the current state times out (in ``relay``, when it has been idle too long).
    """

    def __init__(self, client: socket.socket, deadline: float) -> None:
        self.client = client
        self.state = "head"
        self.deadline = deadline
        self.head = bytearray()
        self.request: egress.Request | None = None
        self.rest = b""
        self.destinations: list[tuple[Address, int]] = []
        self.upstream: socket.socket | None = None
        self.address: Address | None = None
        self.failure = ""
        self.outbound: _Flow | None = None
        self.inbound: _Flow | None = None
        self.closed = False


class _Resolvers:
    """Host name lookups off the event loop, on at most ``size`` threads (started as
    needed), with at most ``backlog`` lookups waiting for one. Each answer is queued
    in :attr:`answers` and the loop woken through ``wake``; the lookup of a
    connection closed meanwhile is skipped."""

    def __init__(self, size: int, backlog: int, wake: socket.socket) -> None:
        self._size = size
        self._backlog = backlog
        self._wake = wake
        self._jobs: queue.SimpleQueue[tuple[_Connection, str, int] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._waiting = 0
        self._lock = threading.Lock()
        self.answers: collections.deque[tuple[_Connection, list[Address] | Refusal]] = (
            collections.deque()
        )

    def submit(self, conn: _Connection, host: str, port: int) -> None:
        """Look ``host`` up for ``conn``; Refusal(503) when too many lookups wait."""
        with self._lock:
            if self._waiting >= self._backlog:
                raise Refusal(503, "too many host name lookups are waiting")
            self._waiting += 1
        self._jobs.put((conn, host, port))
        if len(self._threads) < self._size:
            thread = threading.Thread(target=self._work, name="egress-lookup", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Let every thread end once it has finished its lookup (not waited for)."""
        for _ in self._threads:
            self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            with self._lock:
                self._waiting -= 1
            conn, host, port = job
            if conn.closed:
                continue
            result: list[Address] | Refusal
            try:
                result = egress.lookup(host, port)
            except Refusal as refusal:
                result = refusal
            self.answers.append((conn, result))
            with contextlib.suppress(OSError):
                self._wake.send(b"x")


class Proxy:
    """The egress proxy of one sandbox: one event loop over the channel from its agent
    and every connection it passed (see the module's documentation for the bounds).

    ``state_fd``: the sandbox's state directory (its policy and settings).
    ``channel``: the keeper's end of the socket pair from the agent.
    """

    def __init__(
        self,
        state_fd: int,
        channel: socket.socket,
        *,
        max_connections: int = MAX_CONNECTIONS,
        head_timeout: float = HEAD_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self._state = state_fd
        self._channel = channel
        self._cap = max_connections
        self._head_timeout = head_timeout
        self._connect_timeout = connect_timeout
        self._idle_timeout = idle_timeout
        self._connections: set[_Connection] = set()
        self._selector = selectors.DefaultSelector()
        self._masks: dict[socket.socket, int] = {}
        self._acks = 0
        self._serving = True
        self._wake_r, wake_w = socket.socketpair()
        for sock in (channel, self._wake_r, wake_w):
            sock.setblocking(False)
        self._resolvers = _Resolvers(RESOLVERS, max_connections, wake_w)
        self._wake_w = wake_w

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> None:
        """Serve until the agent closes the channel; then close every connection, and the
        channel (so that the agent sees the proxy gone, however the loop ended)."""
        self._watch(self._channel, selectors.EVENT_READ, None)
        self._watch(self._wake_r, selectors.EVENT_READ, None)
        try:
            while self._serving:
                now = time.monotonic()
                nearest = min((c.deadline for c in self._connections), default=now + _POLL)
                for key, mask in self._selector.select(max(nearest - now, 0.0)):
                    self._dispatch(key.fileobj, key.data, mask)
                self._expire(time.monotonic())
        finally:
            for conn in list(self._connections):
                self._close(conn)
            self._resolvers.stop()
            self._selector.close()
            self._wake_r.close()
            self._wake_w.close()
            self._channel.close()

    def _dispatch(self, fileobj: Any, conn: _Connection | None, mask: int) -> None:
        if conn is None:
            if fileobj is self._channel:
                self._on_channel(mask)
            else:
                self._on_answers()
            return
        if not conn.closed:
            self._handle(conn, functools.partial(self._on_ready, conn))

    def _handle(self, conn: _Connection, step: Callable[[], None]) -> None:
        """Run ``step`` of ``conn``'s life. A refusal is answered; a socket error ends the
        connection (reset); anything else is a fault of the keeper's own, not of the
        request: the connection ends, the proxy goes on, and the (bounded) log says
        what happened."""
        try:
            step()
        except Refusal as refusal:
            self._refuse(conn, refusal)
        except OSError:
            self._close(conn, reset=True)
        except Exception:
            traceback.print_exc()
            self._close(conn)

    def _on_ready(self, conn: _Connection) -> None:
        if conn.state == "head":
            self._read_head(conn)
        elif conn.state == "connect":
            self._connected(conn)
        elif conn.state == "relay":
            self._relay(conn)

    def _expire(self, now: float) -> None:
        for conn in [c for c in self._connections if c.deadline <= now]:
            self._handle(conn, functools.partial(self._time_out, conn))

    def _time_out(self, conn: _Connection) -> None:
        if conn.state == "head":
            raise Refusal(408, f"no request within {self._head_timeout:g} s")
        if conn.state == "lookup":
            raise Refusal(504, "looking the host up took too long")
        if conn.state == "connect":
            conn.failure = "timed out"
            self._drop_upstream(conn)
            self._attempt(conn)
        else:
            self._close(conn)

    # -- the channel -----------------------------------------------------------------------

    def _on_channel(self, mask: int) -> None:
        if mask & selectors.EVENT_WRITE:
            self._send_acks()
        if not mask & selectors.EVENT_READ:
            return
        for _ in range(_CHANNEL_READS):
            try:
                data, fds, _, _ = socket.recv_fds(self._channel, 1024, 16)
            except BlockingIOError:
                return
            except OSError:
                data, fds = b"", []
            if not data:
                for fd in fds:
                    os.close(fd)
                self._serving = False
                return
            for byte in data:
                if byte == ord("c") and fds:
                    self._accept(fds.pop(0))
                elif byte == ord("p"):
                    self._policy_changed()
            for fd in fds:
                os.close(fd)

    def _send_acks(self) -> None:
        while self._acks:
            try:
                sent = self._channel.send(b"a" * self._acks)
            except BlockingIOError:
                break
            except OSError:
                self._acks = 0
                break
            self._acks -= sent
        mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if self._acks else 0)
        self._watch(self._channel, mask, None)

    def _policy_changed(self) -> None:
        """Cut every connection the policy now in force does not permit (all of them
        under deny-all), then confirm to the agent. A connection still reading its
        head or looking its host up is decided under the new policy when it gets there."""
        policy = egress.read_policy(self._state)
        for conn in list(self._connections):
            request, address = conn.request, conn.address
            if policy.deny_all or (
                request is not None
                and address is not None
                and not egress.permits(policy, request.host, address)
            ):
                self._close(conn, reset=True)
        self._acks += 1
        self._send_acks()

    def _accept(self, fd: int) -> None:
        try:
            client = socket.socket(fileno=fd)
        except OSError:
            os.close(fd)
            return
        client.setblocking(False)
        if len(self._connections) >= self._cap:
            with contextlib.suppress(OSError):
                client.send(
                    egress.answer(503, f"the sandbox has {self._cap} proxy connections open")
                )
            client.close()
            return
        conn = _Connection(client, time.monotonic() + self._head_timeout)
        self._connections.add(conn)
        self._watch(client, selectors.EVENT_READ, conn)

    # -- a connection's life ---------------------------------------------------------------

    def _read_head(self, conn: _Connection) -> None:
        try:
            chunk = conn.client.recv(8192)
        except BlockingIOError:
            return
        if not chunk:
            self._close(conn)
            return
        conn.head += chunk
        end = conn.head.find(b"\r\n\r\n")
        if end < 0 or end > egress.HEAD_LIMIT:
            if len(conn.head) > egress.HEAD_LIMIT:
                raise Refusal(431, "request head too large")
            return
        conn.request = egress.parse_request(bytes(conn.head[:end]))
        conn.rest = bytes(conn.head[end + 4 :])
        conn.head = bytearray()
        self._watch(conn.client, 0, conn)
        policy = egress.read_policy(self._state)
        addresses = egress.plan(policy, conn.request.host)
        if addresses is None:
            conn.state = "lookup"
            conn.deadline = time.monotonic() + self._connect_timeout
            self._resolvers.submit(conn, conn.request.host, conn.request.port)
            return
        conn.destinations = egress.choose(policy, conn.request.host, conn.request.port, addresses)
        self._attempt(conn)

    def _on_answers(self) -> None:
        with contextlib.suppress(OSError):
            while self._wake_r.recv(4096):
                pass
        while self._resolvers.answers:
            conn, result = self._resolvers.answers.popleft()
            if not conn.closed and conn.state == "lookup":
                self._handle(conn, functools.partial(self._looked_up, conn, result))

    def _looked_up(self, conn: _Connection, result: list[Address] | Refusal) -> None:
        """Go on with ``conn`` once its host is looked up, under the policy in force now
        (it may have changed during the lookup)."""
        request = conn.request
        assert request is not None
        if isinstance(result, Refusal):
            raise result
        policy = egress.read_policy(self._state)
        known = egress.plan(policy, request.host)
        addresses = result if known is None else known
        conn.destinations = egress.choose(policy, request.host, request.port, addresses)
        self._attempt(conn)

    def _attempt(self, conn: _Connection) -> None:
        """Start connecting to the next destination; Refusal(502) when none is left."""
        while conn.destinations:
            address, port = conn.destinations.pop(0)
            family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
            try:
                upstream = socket.socket(family, socket.SOCK_STREAM)
            except OSError as exc:
                conn.failure = exc.strerror or str(exc)
                continue
            upstream.setblocking(False)
            code = upstream.connect_ex((str(address), port))
            if code not in (0, errno.EINPROGRESS):
                conn.failure = os.strerror(code)
                upstream.close()
                continue
            conn.state = "connect"
            conn.upstream, conn.address = upstream, address
            conn.deadline = time.monotonic() + self._connect_timeout
            self._watch(upstream, selectors.EVENT_WRITE, conn)
            return
        raise Refusal(502, f"cannot connect: {conn.failure or 'no address'}")

    def _drop_upstream(self, conn: _Connection) -> None:
        if conn.upstream is not None:
            self._unwatch(conn.upstream)
            conn.upstream.close()
        conn.upstream = conn.address = None

    def _connected(self, conn: _Connection) -> None:
        upstream, request = conn.upstream, conn.request
        assert upstream is not None and request is not None
        code = upstream.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            conn.failure = os.strerror(code)
            self._drop_upstream(conn)
            self._attempt(conn)
            return
        conn.state = "relay"
        conn.outbound = _Flow(conn.client, upstream)
        conn.inbound = _Flow(upstream, conn.client)
        if request.upstream_head is None:
            conn.inbound.buffer += b"HTTP/1.1 200 Connection established\r\n\r\n"
            conn.outbound.buffer += conn.rest
        else:
            conn.outbound.buffer += request.upstream_head + conn.rest
        conn.rest = b""
        conn.deadline = time.monotonic() + self._idle_timeout
        self._relay(conn)

    def _relay(self, conn: _Connection) -> None:
        outbound, inbound, upstream = conn.outbound, conn.inbound, conn.upstream
        assert outbound is not None and inbound is not None and upstream is not None
        moved = outbound.pump()
        moved = inbound.pump() or moved
        if moved:
            conn.deadline = time.monotonic() + self._idle_timeout
        if outbound.shut and inbound.shut:
            self._close(conn)
            return
        read, write = selectors.EVENT_READ, selectors.EVENT_WRITE
        self._watch(
            conn.client,
            (read if outbound.wants_read() else 0) | (write if inbound.wants_write() else 0),
            conn,
        )
        self._watch(
            upstream,
            (read if inbound.wants_read() else 0) | (write if outbound.wants_write() else 0),
            conn,
        )

    def _refuse(self, conn: _Connection, refusal: Refusal) -> None:
        """Answer ``refusal`` (as far as the socket takes it now) and close."""
        if conn.closed:
            return
        with contextlib.suppress(OSError):
            conn.client.send(egress.answer(refusal.status, str(refusal)))
            conn.client.shutdown(socket.SHUT_WR)
        self._close(conn)

    def _close(self, conn: _Connection, *, reset: bool = False) -> None:
        """Close both of ``conn``'s sockets; ``reset`` aborts them (the peers see a reset,
        never an end they could take for a complete answer)."""
        if conn.closed:
            return
        conn.closed = True
        self._connections.discard(conn)
        for sock in (conn.client, conn.upstream):
            if sock is None:
                continue
            self._unwatch(sock)
            if reset:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
            sock.close()

    # -- the selector ----------------------------------------------------------------------

    def _watch(self, sock: socket.socket, mask: int, conn: _Connection | None) -> None:
        current = self._masks.get(sock, 0)
        if mask == current:
            return
        if not mask:
            self._unwatch(sock)
        elif current:
            self._selector.modify(sock, mask, conn)
            self._masks[sock] = mask
        else:
            self._selector.register(sock, mask, conn)
            self._masks[sock] = mask

    def _unwatch(self, sock: socket.socket) -> None:
        if self._masks.pop(sock, 0):
            self._selector.unregister(sock)


def _wait_for_exit(pid: int) -> None:
    """Return once process ``pid`` (not a child of ours) has exited."""
    try:
        handle = os.pidfd_open(pid)
    except OSError:
        handle = -1
    if handle >= 0:
        select.select([handle], [], [])
        os.close(handle)
        return
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            pass
        time.sleep(_POLL)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of a keeper started with its proxy loaded (see :mod:`.keeper_start`
    for the one a launch starts)."""
    return serve(parse(sys.argv[1:] if argv is None else argv, **KEEPER))


def serve(options: dict[str, str]) -> int:
    """Run the proxy for the sandbox that ``options`` (:data:`.options.KEEPER`) describe until
    its agent exits; then exit the process."""
    state, agent = int(options["state"]), int(options["agent"])
    channel = socket.socket(fileno=int(options["egress"]))
    sys.stderr = bounded_stderr()

    def finish() -> None:
        _wait_for_exit(agent)
        os._exit(0)

    threading.Thread(target=finish, name="agent", daemon=True).start()
    try:
        processes = int(options["processes"]) if "processes" in options else None
        Proxy(state, channel, max_connections=connection_cap(processes)).run()
    except Exception:
        traceback.print_exc()
    finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
