"""The streaming machinery every streaming adapter shares.

A :class:`Stream` is the local end of one command: its ``ref``, its owner, a
reader thread that pumps frames from the transport (its own, or one of an
adapter's :class:`~._readers.Readers`, kept from an earlier stream), and the
guarantees of the frame contract, kept here once:

* frames reach the owner serially and in order;
* exactly one terminal frame (``Exit`` or ``Error``), after all output, and
  nothing after it — unless :meth:`Stream.stop` came first, after which
  nothing at all is delivered;
* a pump that ends without a terminal frame yields
  ``Error(ref, Unavailable("closed_before_exit"))``, never an invented exit;
* an owner callback that raises is reported as an exception in a thread is
  (:func:`_report_callback_failure`) and delivery goes on;
* a full bounded queue blocks the reader, and ``stop`` interrupts that wait;
* without an owner, frames go to a :class:`~._frame_queue.FrameQueue`, which
  hands output to a consumer that lags behind in fewer, larger frames, and
  holds at most :data:`~._frame_queue.COMMAND_QUEUE_BYTES` of output: past
  that the reader waits, and stops reading its transport, so a consumer that
  does not read holds up the command (as far back as the transport carries
  back-pressure) instead of filling this process's memory;
* a queue-like owner (one with ``put`` that is not a ``queue.Queue``) may
  raise a taxonomy error from ``put`` to end the command's delivery (the exec
  collector's output limit does): the delivery raises it into the pump, and a
  pump that lets it through ends with it, delivered as the terminal ``Error``;
* ``stop`` never deadlocks, also from inside the owner's callback, and from
  another thread it waits for a delivery in flight to finish.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections.abc import Callable, Hashable
from functools import partial
from typing import Any, ClassVar, Protocol, runtime_checkable

from ._frame_queue import COMMAND_QUEUE_BYTES, FrameQueue
from ._readers import Readers
from .contract import Adapter, Owner
from .errors import CommandExited, Invalid, SandboxError, Unavailable
from .frames import Error, Exit, Frame, Stderr, Stdout
from .reasons import Reason
from .types import Command

__all__ = ["CommandEnd", "Stream", "StreamingAdapter", "new_ref"]

log = logging.getLogger("managoat_sandbox.streaming")

_refs = itertools.count(1)
_BACKPRESSURE_POLL = 0.02


def new_ref(prefix: str = "cmd") -> str:
    """A command ref unique within this process."""
    return f"{prefix}-{next(_refs)}"


def _report_callback_failure(error: Exception) -> None:
    """Report ``error``, raised by an owner callback, as Python reports an exception that
    ends a thread: through :func:`threading.excepthook` (by default, ``Exception in
    thread …`` and the traceback on stderr; a program or test runner that sets the hook
    decides instead). It returns, so the caller goes on delivering; the thread named is
    the one that called the callback, which goes on running."""
    threading.excepthook(
        threading.ExceptHookArgs(
            (type(error), error, error.__traceback__, threading.current_thread())
        )
    )


def _is_queue(owner: object) -> bool:
    return callable(getattr(owner, "put", None))


class Stream:
    """One command's local end: serial delivery plus its reader thread.

    ``pump(stream)`` runs in the reader thread (or, through :meth:`run_here`, in
    the caller's) and delivers frames with
    :meth:`stdout`, :meth:`stderr`, :meth:`exit` and :meth:`fail`; it should
    return when :attr:`stopped` is set (``on_stop``, given to :meth:`start`,
    is called by :meth:`stop` to interrupt a blocking transport read).
    """

    def __init__(self, ref: Hashable, owner: Owner | None, *, label: str, stdin: bool = False):
        if owner is None:
            owner = FrameQueue(max_bytes=COMMAND_QUEUE_BYTES)
        if not _is_queue(owner) and not callable(owner):
            raise TypeError("owner must be a callable taking a frame, or a queue")
        self.ref = ref
        self.label = label
        self.stdin = stdin
        self.owner = owner
        self.frames: queue.Queue[Any] | None = owner if _is_queue(owner) else None  # type: ignore[assignment]
        self.stopped = threading.Event()
        self.finished = threading.Event()
        self._deliver_lock = threading.Lock()
        self._delivering: int | None = None
        self._thread: threading.Thread | None = None
        #: Set once the pump has returned, for a stream started on :class:`Readers`;
        #: ``_reader`` is then the thread running it.
        self._pumped: threading.Event | None = None
        self._reader: int | None = None
        self._on_stop: Callable[[], None] | None = None

    # -- delivery -------------------------------------------------------

    def deliver(self, frame: Frame) -> bool:
        """Deliver one frame; ``False`` if it was dropped (stopped or after the terminal)."""
        with self._deliver_lock:
            if self.stopped.is_set() or self.finished.is_set():
                return False
            if frame.terminal:
                self.finished.set()
            self._delivering = threading.get_ident()
            try:
                self._send(frame)
            finally:
                self._delivering = None
            return True

    def stdout(self, data: bytes) -> bool:
        """Deliver stdout bytes (empty chunks are skipped)."""
        return bool(data) and self.deliver(Stdout(self.ref, data))

    def stderr(self, data: bytes) -> bool:
        """Deliver stderr bytes (empty chunks are skipped)."""
        return bool(data) and self.deliver(Stderr(self.ref, data))

    def exit(self, code: int) -> bool:
        """Deliver the real exit code (terminal)."""
        return self.deliver(Exit(self.ref, code))

    def fail(self, reason: SandboxError) -> bool:
        """Deliver a transport failure (terminal)."""
        return self.deliver(Error(self.ref, reason))

    def _send(self, frame: Frame) -> None:
        owner = self.owner
        if isinstance(owner, queue.Queue):
            while not self.stopped.is_set():
                try:
                    owner.put(frame, timeout=_BACKPRESSURE_POLL)
                    return
                except queue.Full:
                    continue
        elif _is_queue(owner):
            owner.put(frame)  # type: ignore[union-attr]
        else:
            try:
                owner(frame)  # type: ignore[operator]
            except Exception as error:
                _report_callback_failure(error)

    # -- reader thread --------------------------------------------------

    def start(
        self,
        pump: Callable[[Stream], None],
        *,
        on_stop: Callable[[], None] | None = None,
        readers: Readers | None = None,
    ) -> None:
        """Start the reader running ``pump(self)``: a thread of its own, or with
        ``readers``, one of theirs (a thread kept from an earlier stream when one waits,
        :mod:`._readers`)."""
        self._on_stop = on_stop
        name = f"{self.label}-{self.ref}"
        if readers is not None:
            self._pumped = readers.run(name, partial(self._run_on_reader, pump))
            return
        self._thread = threading.Thread(target=self._run, args=(pump,), name=name, daemon=True)
        self._thread.start()

    def _run_on_reader(self, pump: Callable[[Stream], None]) -> None:
        self._reader = threading.get_ident()
        self._run(pump)

    def run_here(
        self, pump: Callable[[Stream], None], *, on_stop: Callable[[], None] | None = None
    ) -> None:
        """Run ``pump(self)`` in the calling thread, to its end, with the same delivery
        rules as :meth:`start` (a blocking exec needs no reader thread: its caller
        would only wait for one). The pump must bound its own waits."""
        self._on_stop = on_stop
        self._run(pump)

    def _run(self, pump: Callable[[Stream], None]) -> None:
        try:
            pump(self)
        except SandboxError as error:
            self.fail(error)
        except Exception as error:
            log.exception("%s: reader for %s failed", self.label, self.ref)
            self.fail(Unavailable(Reason.READER_FAILED, kind=type(error).__name__))
        if not self.finished.is_set():
            self.fail(Unavailable(Reason.CLOSED_BEFORE_EXIT))

    # -- local state ----------------------------------------------------

    def stop(self) -> None:
        """Detach this end: nothing is delivered once this returns. Idempotent."""
        first = not self.stopped.is_set()
        self.stopped.set()
        if first and self._on_stop is not None:
            try:
                self._on_stop()
            except Exception:
                log.exception("%s: closing the transport of %s failed", self.label, self.ref)
        if self._delivering != threading.get_ident():
            with self._deliver_lock:
                pass

    def join(self, timeout: float | None = None) -> None:
        """Wait for the reader to be done with this stream: its thread to end, or on
        :class:`Readers`, its pump to return (no-op from the reader itself)."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        pumped = self._pumped
        if pumped is not None and self._reader != threading.get_ident():
            pumped.wait(timeout)

    @property
    def connected(self) -> bool:
        """True until the command is detached with :meth:`stop`."""
        return not self.stopped.is_set()

    def check_stdin(self) -> None:
        """Raise unless stdin may be written: detached → ``CommandExited``,
        stdin not requested → ``Invalid("stdin_not_open")``."""
        if self.stopped.is_set():
            raise CommandExited(Reason.DETACHED)
        if not self.stdin:
            raise Invalid(Reason.STDIN_NOT_OPEN)

    def check_writable(self) -> None:
        """:meth:`check_stdin`, and an exited command is ``CommandExited``."""
        self.check_stdin()
        if self.finished.is_set():
            raise CommandExited(Reason.EXITED)


@runtime_checkable
class CommandEnd(Protocol):
    """The command's local end: what a streaming adapter keeps in ``Command.private``.

    It holds the command's :class:`Stream` and whatever reaches the command's
    stdin; it is not the remote process, which :meth:`stop` leaves running.
    """

    def write(self, data: bytes) -> None:
        """Write to the command's stdin (docs/protocols/contract.md#stdin-is-total)."""

    def close_stdin(self) -> None:
        """Send EOF (docs/protocols/contract.md#stdin-is-total)."""

    def stop(self) -> None:
        """Detach this end; never raises (docs/protocols/contract.md#stop_command-detaches)."""


class StreamingAdapter(Adapter):
    """An adapter whose commands keep a :class:`CommandEnd` in ``Command.private``.

    Implements ``write_stdin``, ``close_stdin`` and ``stop_command`` once, by
    delegating to that end. A subclass's ``spawn`` and ``attach`` return
    ``Command(self.provider, ref, private=end)``.

    A subclass must write ``capabilities``, ``build_handle``, ``create``, ``get``,
    ``destroy``, ``list_all_names``, ``write_file``, ``exec``, ``spawn`` and
    ``list_sessions``, and the operations whose capability it advertises; the
    others raise ``NotSupported`` (see :class:`~managoat_sandbox.contract.Adapter`).

    Naming: each adapter of this package names its end class
    ``<Provider>CommandEnd`` and keeps it in ``providers/<provider>/end.py``
    (``LocalCommandEnd``, ``SpritesCommandEnd``, ``E2BCommandEnd``,
    ``DaytonaCommandEnd``).

    :attr:`command_type` is optional. Left as ``None``, every command whose
    ``private`` has the :class:`CommandEnd` methods (``write``, ``close_stdin``,
    ``stop``) is served by delegating to that end — which is the command's own,
    so even another streaming adapter's command reaches the right process. Set
    to the end's class (``command_type = MyCommandEnd``), only commands whose
    ``private`` is an instance of it are served. A command that is not served
    is ``Invalid`` for ``write_stdin``/``close_stdin`` and left alone by
    ``stop_command``. (The provider tag cannot decide: the facade re-tags
    commands with the name the adapter is registered under.)
    """

    #: The class of this adapter's ``Command.private``, or None (see the class docstring).
    command_type: ClassVar[type[CommandEnd] | None] = None

    def _owns(self, command: Command) -> bool:
        """Whether this adapter serves ``command`` (see :attr:`command_type`)."""
        return isinstance(command.private, self.command_type or CommandEnd)

    def command_end(self, command: Command) -> CommandEnd:
        """The end a command of this adapter holds; ``Invalid`` for anyone else's."""
        if not isinstance(command, Command):
            raise TypeError(f"expected a Command, got {type(command).__name__}")
        if not self._owns(command):
            raise Invalid(
                Reason.HANDLE,
                problem="other_adapter",
                message=f"not a command of the {self.provider} adapter",
            )
        end: CommandEnd = command.private
        return end

    def write_stdin(self, command: Command, data: bytes) -> None:
        self.command_end(command).write(data)

    def close_stdin(self, command: Command) -> None:
        self.command_end(command).close_stdin()

    def stop_command(self, command: Command) -> None:
        """Detach this end; the remote process goes on. Idempotent; never raises
        a taxonomy error (a command of another adapter has nothing to stop here)."""
        if not isinstance(command, Command):
            raise TypeError(f"expected a Command, got {type(command).__name__}")
        if self._owns(command):
            command.private.stop()
