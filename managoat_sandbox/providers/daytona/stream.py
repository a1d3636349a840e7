"""Following a toolbox command: its log, streamed and delivered once per byte, then its exit.

The log is followed over the daemon's WebSocket (:mod:`.follow`) and decoded
as it arrives (:mod:`.decoder`), so following costs time linear in the
output, whatever its size. A command run by our shim has finished once its
journal is complete — both streams' end frames and the exit-code frame the
shim writes after everything else: the ``Exit`` then carries that code, and
the follower closes the socket itself rather than wait for the daemon's
close (about a second after the exit).

The WebSocket is not trusted to carry the whole log (the daemon may close it
early, or replay only a prefix): when it ends, or cannot be opened, before the
journal is complete, a plain snapshot of the log (streamed, never held whole)
delivers what is new, skipping every byte consumed before; if the command is
still running the follow is opened again after a pause, which grows while the
log does not (it replays from byte zero; consumed bytes are skipped again). A
round in which neither the follow nor the snapshot could be read is a
failure; after ``unreachable_after`` seconds of consecutive failures the
stream ends with the last error (a 429's advice lengthens the pause). A
silent follow is pinged every ``read_timeout`` seconds and given up after
three such intervals without a sign of life.

An exit code is never invented. A log that neither grows nor completes for
``probe_after`` seconds is looked into (again at doubling intervals): the
command is over once the daemon recorded its exit or lost the command (404),
or once the shim (:func:`.shim.probe`) recorded a code or died without one
(its session shell was killed). Then the log is read a few more times, and the
stream ends with ``Exit`` only if the journal is complete — otherwise with
``Unavailable("closed_before_exit")``, as it does when the command or its
session vanished or the sandbox is gone. A session our shim did not start
has no frames: its exit is the daemon's command record, read whenever a
follow ends or the log stays quiet, and the ``Exit`` follows a last snapshot
of the log.

A follower may be given ``started``, called once in the reader thread when
the command has shown it is under way — its first bytes were delivered, its
follow stayed silent for ``max_interval``, or the stream ended —, for work
that should not compete with the command's own start (a spawn creates the
next spawn's session then: :mod:`.ahead`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import attrs

from ..._streaming import Stream
from ...errors import DeadlineExpired, Denied, NotFound, RateLimited, SandboxError, Unavailable
from ...reasons import Reason
from . import shim
from .decoder import STDOUT, Event, JournalDecoder, JournalRead
from .follow import LogSocket
from .toolbox import Toolbox

__all__ = ["FollowPolicy", "LogFollower"]

log = logging.getLogger("managoat_sandbox.daytona")

#: After this many consecutive failed rounds (and every as many again), ask the
#: control plane whether the sandbox still runs: if not, its sessions are gone.
_PROBE_EVERY = 3
#: How many times the log of a command that ended is read, at most, to complete it.
_DRAIN_READS = 6
#: Ping intervals of silence after which a follow is declared dead.
_DEAD_AFTER = 3


@attrs.frozen
class FollowPolicy:
    """How a follower paces itself.

    ``min_interval`` is the first pause before a log whose follow ended early
    is read again; it grows by half per round without new output, up to
    ``max_interval`` (which is also how often an open follow is checked on
    while it is silent). A log quiet for ``probe_after`` seconds without
    completing has its shim probed, then again at doubling intervals up to
    ``max_probe_interval``. After ``unreachable_after`` seconds of consecutive
    failures the stream ends with the last error. ``read_timeout`` bounds each
    request, and is how long a follow may stay silent before it is pinged.
    """

    min_interval: float = 0.05
    max_interval: float = 1.0
    probe_after: float = 2.0
    max_probe_interval: float = 16.0
    unreachable_after: float = 30.0
    read_timeout: float = 30.0


class _Quiet:
    """When a log that neither grows nor completes is due for a probe of its shim."""

    def __init__(self, policy: FollowPolicy, now: float) -> None:
        self._policy = policy
        self._gap = policy.probe_after
        self._at = now + self._gap

    def grew(self, now: float) -> None:
        self._gap = self._policy.probe_after
        self._at = now + self._gap

    def due(self, now: float) -> bool:
        return now >= self._at

    def probed(self, now: float) -> None:
        self._gap = min(self._gap * 2, self._policy.max_probe_interval)
        self._at = now + self._gap


class LogFollower:
    """The reader-thread pump of one spawned or attached command.

    Start it with ``stream.start(follower, on_stop=follower.abort)``.
    """

    def __init__(
        self,
        toolbox: Toolbox,
        session_id: str,
        command_id: str,
        policy: FollowPolicy,
        *,
        sandbox_gone: Callable[[], bool],
        framed: bool = True,
        started: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.toolbox = toolbox
        self.session_id = session_id
        self.command_id = command_id
        self.policy = policy
        self.decoder = JournalDecoder(framed=framed)
        self._sandbox_gone = sandbox_gone
        self._started = started
        self._clock = clock
        self._socket: LogSocket | None = None
        self._aborted = False

    def abort(self) -> None:
        """Unblock the reader thread (it is being stopped): the open follow is shut down."""
        self._aborted = True
        socket = self._socket
        if socket is not None:
            socket.abort()

    # -- delivery -----------------------------------------------------------

    @staticmethod
    def _deliver(stream: Stream, events: list[Event]) -> None:
        for kind, data in events:
            if kind == STDOUT:
                stream.stdout(data)
            else:
                stream.stderr(data)

    def _under_way(self) -> None:
        """Call ``started`` the first time only; what it raises is only logged (the
        stream must not fail for it)."""
        started, self._started = self._started, None
        if started is not None:
            try:
                started()
            except Exception:
                log.exception("daytona: the start hook of %s failed", self.session_id)

    def _ended(self, stream: Stream) -> bool:
        """Deliver the exit if the journal is complete; whether it was."""
        code = self.decoder.code
        if not self.decoder.complete or code is None:
            return False
        stream.exit(code)
        return True

    # -- the pump -----------------------------------------------------------

    def __call__(self, stream: Stream) -> None:
        try:
            self._pump(stream)
        finally:
            self._drop_socket()
            self._under_way()
            self.toolbox.api.http.release()

    def _pump(self, stream: Stream) -> None:
        policy = self.policy
        pause = policy.min_interval
        quiet = _Quiet(policy, self._clock())
        failing_since: float | None = None
        failures = 0
        while not stream.stopped.is_set():
            before = self.decoder.consumed
            error: SandboxError | None = None
            try:
                if self._follow(stream, quiet):
                    return
            except (NotFound, Denied) as lost:
                self._lost(stream, lost)
                return
            except SandboxError as failed:
                error = failed
            if stream.stopped.is_set():
                return
            try:
                if self._snapshot(stream) or self._recorded(stream):
                    return
                error = None
            except (NotFound, Denied) as lost:
                self._lost(stream, lost)
                return
            except SandboxError as failed:
                error = failed
            now = self._clock()
            if self.decoder.consumed != before:
                pause = policy.min_interval
                quiet.grew(now)
            if error is None or self.decoder.consumed != before:
                failing_since, failures = None, 0
            else:
                failing_since = now if failing_since is None else failing_since
                failures += 1
                if now - failing_since >= policy.unreachable_after:
                    stream.fail(error)
                    return
                if failures % _PROBE_EVERY == 0 and self._sandbox_gone():
                    stream.fail(Unavailable(Reason.CLOSED_BEFORE_EXIT))
                    return
            if quiet.due(now) and self._quiet_over(stream, quiet, now):
                return
            wait = pause
            if isinstance(error, RateLimited) and error.retry_after is not None:
                wait = max(wait, error.retry_after)
            stream.stopped.wait(wait)
            pause = min(pause * 1.5, policy.max_interval)

    def _follow(self, stream: Stream, quiet: _Quiet) -> bool:
        """Follow the log over a WebSocket until the stream has ended (True: its terminal
        frame was delivered) or the follow has (False)."""
        socket = self.toolbox.follow(self.session_id, self.command_id)
        self._socket = socket
        if self._aborted:
            return False
        read = self.decoder.read()
        policy = self.policy
        heard = pinged = self._clock()
        try:
            while not stream.stopped.is_set():
                try:
                    data = socket.read(policy.max_interval)
                except TimeoutError:
                    self._under_way()
                    now = self._clock()
                    if quiet.due(now) and self._quiet_over(stream, quiet, now):
                        return True
                    if now - heard >= _DEAD_AFTER * policy.read_timeout:
                        raise DeadlineExpired(Reason.TIMEOUT) from None
                    if now - max(heard, pinged) >= policy.read_timeout:
                        socket.ping()
                        pinged = now
                    continue
                if data is None:
                    return False
                heard = self._clock()
                if data:
                    before = self.decoder.consumed
                    self._deliver(stream, read.feed(data))
                    if self.decoder.consumed != before:
                        quiet.grew(heard)
                        self._under_way()
                    if self._ended(stream):
                        return True
            return False
        finally:
            self._drop_socket()

    def _drop_socket(self) -> None:
        socket, self._socket = self._socket, None
        if socket is not None:
            socket.close()

    def _read_log(self, stream: Stream, read: JournalRead) -> None:
        """Feed ``read`` a snapshot of the whole log, delivering what is new."""
        with self.toolbox.log(
            self.session_id, self.command_id, read_timeout=self.policy.read_timeout
        ) as body:
            if body.split is not None:
                self._deliver(stream, self.decoder.split_read(*body.split))
            for chunk in body.chunks or ():
                if stream.stopped.is_set():
                    return
                self._deliver(stream, read.feed(chunk))

    def _snapshot(self, stream: Stream) -> bool:
        """Read a snapshot of the log; whether the stream has ended (its exit delivered)."""
        self._read_log(stream, self.decoder.read())
        return self._ended(stream)

    def _recorded(self, stream: Stream) -> bool:
        """For a session our shim did not start: the daemon's exit record, after a last
        snapshot of the log; whether the stream has ended. ``NotFound`` if the daemon
        lost the command; other failures read as "not recorded"."""
        if self.decoder.framed:
            return False
        code = self._recorded_code()
        if code is None:
            return False
        read = self.decoder.read()
        try:
            self._read_log(stream, read)
            self._deliver(stream, read.finish())
        except SandboxError as error:
            log.debug("daytona: the last log read of %s failed: %r", self.session_id, error)
        stream.exit(code)
        return True

    def _recorded_code(self) -> int | None:
        """The exit code the daemon recorded, if it did (``NotFound`` if it lost the command)."""
        try:
            code = self.toolbox.command(self.session_id, self.command_id).get("exitCode")
        except NotFound:
            raise
        except SandboxError as error:
            log.debug("daytona: reading the record of %s failed: %r", self.session_id, error)
            return None
        return None if isinstance(code, bool) or not isinstance(code, int) else code

    def _quiet_over(self, stream: Stream, quiet: _Quiet, now: float) -> bool:
        """A log quiet for a while: whether the command is over (its terminal frame then
        delivered). It is when the daemon recorded its exit or lost it, or when the
        shim (:func:`.shim.probe`) recorded a code or died without one."""
        quiet.probed(now)
        if not self.decoder.framed:
            return self._recorded(stream)
        try:
            over = self._recorded_code() is not None
        except NotFound:
            over = True
        if not over:
            try:
                status, output = self.toolbox.execute(shim.probe(self.session_id))
            except SandboxError as error:
                log.debug("daytona: probing %s failed: %r", self.session_id, error)
                return False
            found = shim.parse_probe(output) if status == 0 else None
            over = isinstance(found, int) or found == shim.GONE
        if over:
            self._drop_socket()
            self._finish(stream)
        return over

    def _finish(self, stream: Stream) -> None:
        """The command is over: read the log until its journal is complete (a few
        times, briefly spaced), then its exit — or, if it never completes, closed
        before exit."""
        for attempt in range(_DRAIN_READS):
            if stream.stopped.is_set():
                return
            if attempt:
                stream.stopped.wait(self.policy.min_interval)
            try:
                if self._snapshot(stream):
                    return
            except NotFound:
                break
            except SandboxError as error:
                log.debug("daytona: log read of %s failed: %r", self.session_id, error)
        stream.fail(Unavailable(Reason.CLOSED_BEFORE_EXIT))

    def _lost(self, stream: Stream, error: SandboxError) -> None:
        """The command or its session is gone (``NotFound``: finish from what can still be
        read), or the credential was refused (``Denied`` ends the stream)."""
        if isinstance(error, Denied):
            stream.fail(error)
        else:
            self._finish(stream)
