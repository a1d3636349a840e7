"""The one harness every fault-matrix cell runs through (docs/reliability.md#fault-matrix).

The matrix is :data:`FAULTS` (rows) by the HTTP adapters (one test module per
provider). A provider module maps *every* fault name to a :class:`Cell` —
where a provider's protocol has no such body, to the nearest analogue its
protocol has, said in the module docstring — and :func:`matrix` refuses a
module that leaves a row out, so no cell can be silently missing.

A cell is: an optional ``prepare`` (state the fault needs, made before any
baseline is taken), ``inject`` (queue the fault on the emulator — before the
operation, or with ``inject_after_output`` once the command's first stdout
has arrived, for faults that must land mid-stream), ``run`` (one contract
operation; it either raises, or returns the ``Command`` of a spawn whose
owner is :attr:`Ctx.box`), an :class:`Expect` and an optional ``verify`` (a
cell's own extra check, e.g. that a fault it expects to be ridden out was
really served). For each cell
:func:`run_cell` asserts, in this order:

1. **Outcome.** A raised error, or the command's terminal frame, is exactly
   the expected taxonomy class (``type(e) is cls``: the taxonomy is closed);
   its ``detail`` matches; a ``RateLimited`` carries the expected
   ``retry_after``. A cell whose fault the protocol rides out (idempotent
   polling) expects an ``Exit`` with the exact output instead.
2. **No hang past the deadline.** The operation is timed from just before
   ``run`` with ``time.monotonic``; a raise, or the terminal frame, must come
   within ``cell.bound`` (the operation's own configured bound: its read
   timeout, its retry budget, its follow budget — each module says which)
   plus :data:`MARGIN` (scheduling slack on a shared, loaded 2-core
   machine). Each module makes its fault outlast ``bound + MARGIN`` (a stall
   of 8 s, a command that runs on for 5-30 s, a keepalive that would only
   notice after 10 s), so an adapter that missed the fault fails this check.
   The wait for the terminal frame is itself a deadline wait, never a sleep.
3. **Request count.** When the cell says how many requests a path must see
   (a retried idempotent call: exactly ``attempts``; a non-idempotent call:
   exactly one; a capped listing: exactly the cap), the emulator's log says so.
4. **No leaked thread.** Every thread started during the cell ends within
   :data:`SETTLE` seconds (a bounded wait on a condition). Threads whose name
   contains ``emulator`` are the server's own short-lived workers and are
   not counted.
5. **Exactly one terminal frame, nothing after it.** Checked *after* the
   reader thread has ended (step 4), so nothing can still arrive: the
   command's whole frame history holds one terminal frame, and it is last.
6. **No leaked socket.** Sockets are counted from the kernel's view of this
   process: each ``/proc/self/fd`` entry that is a socket whose
   ``/proc/net/tcp{,6}`` row has the emulator's port as its *remote* port (so
   the emulator's own server-side sockets, which run in this process too,
   are not counted; a socket in CLOSE_WAIT still holds its fd and *is*
   counted). Keep-alive pools are the one legitimate holder of an idle
   connection: the adapters keep one ``requests.Session`` per thread, so the
   harness closes the *calling thread's* pool of every adapter the cell used
   (:func:`release_pools`) before taking the baseline and again before the
   final count. Reader threads must release their own pools when they end,
   so anything a reader, a worker or an abandoned response still holds is
   counted. The count must come back to the baseline within :data:`SETTLE`.
   Independently, ``ResourceWarning: unclosed <socket …>`` for a socket
   connected to the emulator's port — a socket closed only by the garbage
   collector — fails the cell (a ``gc.collect()`` at the end surfaces them).

What a cell measured (elapsed seconds, outcome) is logged on the
``tests.faults`` logger, for the reliability report.
"""

from __future__ import annotations

import gc
import logging
import os
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import pytest

import managoat_sandbox
from managoat_sandbox import config
from managoat_sandbox._http import HttpClient
from managoat_sandbox.contract import Adapter
from managoat_sandbox.errors import RateLimited, SandboxError
from managoat_sandbox.frames import Error, Exit, Frame, Stdout
from managoat_sandbox.testing.mailbox import Mailbox, is_stdout, is_terminal
from managoat_sandbox.types import Command, Handle

from ..conftest import wait_until

__all__ = [
    "FAULTS",
    "MARGIN",
    "SETTLE",
    "Cell",
    "Ctx",
    "Expect",
    "Requests",
    "client_sockets",
    "matrix",
    "release_pools",
    "run_cell",
]

log = logging.getLogger("tests.faults")

#: The rows of the matrix, in the order the report shows them.
FAULTS = (
    "reset_mid_stream",
    "close_without_exit",
    "rate_limited_429",
    "5xx_storm_idempotent",
    "5xx_storm_not_idempotent",
    "stall_past_read_timeout",
    "malformed_json",
    "truncated_stream_body",
    "oversized_body",
    "endless_pagination",
)

#: Seconds allowed on top of a cell's bound before it counts as a hang.
MARGIN = 3.0
#: Seconds threads and sockets get to wind down after the operation ended.
SETTLE = 5.0
#: Retry settings the facade cells run with (attempts, and a fast backoff).
RETRY_ATTEMPTS = 3
RETRY = {"attempts": RETRY_ATTEMPTS, "base_ms": 1, "max_ms": 5, "max_retry_after_ms": 1000}


# -- what a cell says ----------------------------------------------------------------------


@attrs.frozen
class Expect:
    """The outcome a cell requires.

    ``error``: the taxonomy class raised (or carried by the terminal ``Error``
    frame); ``None`` means the command must end in ``Exit(exit_code)`` with
    exactly ``output`` on stdout (a fault the protocol rides out).
    ``detail``: the exact ``detail``, or a predicate on it; ``None`` skips it.
    """

    error: type[SandboxError] | None
    detail: Any = None
    retry_after: float | None = None
    exit_code: int = 0
    output: bytes | None = None

    def describe(self) -> str:
        if self.error is None:
            return f"Exit({self.exit_code})"
        shown = "" if self.detail is None or callable(self.detail) else repr(self.detail)
        return f"{self.error.__name__}({shown})"


@attrs.frozen
class Requests:
    """Exactly ``count`` requests whose method is ``method`` and path matches ``path``."""

    method: str
    path: str
    count: int


@attrs.frozen
class Cell:
    """One fault against one adapter (see the module docstring)."""

    inject: Callable[[Ctx], object]
    run: Callable[[Ctx], Any]
    expect: Expect
    bound: float
    stream: bool = False
    requests: Requests | None = None
    prepare: Callable[[Ctx], None] | None = None
    inject_after_output: bool = False
    verify: Callable[[Ctx], None] | None = None


def matrix(cells: Mapping[str, Cell]) -> list[Any]:
    """``pytest.param``s over every fault, in :data:`FAULTS` order, with the fault as id.

    Raises ``ValueError`` at import if ``cells`` misses or invents a row, so
    a provider module cannot silently drop one.
    """
    if set(cells) != set(FAULTS):
        missing, extra = set(FAULTS) - set(cells), set(cells) - set(FAULTS)
        raise ValueError(f"fault matrix rows missing {sorted(missing)}, unknown {sorted(extra)}")
    return [pytest.param(cells[fault], id=fault) for fault in FAULTS]


# -- the context a cell runs in ------------------------------------------------------------


class Ctx:
    """One cell's world: the emulator, the adapter, a sandbox and a frame owner.

    ``track`` registers further adapters a cell builds (their pools are
    released too); ``keep`` registers commands to stop at the end; ``notes``
    is scratch space between ``prepare``, ``inject`` and ``run``.
    """

    def __init__(self, provider: str, emulator: Any, adapter: Adapter, handle: Handle) -> None:
        self.provider = provider
        self.emulator = emulator
        self.adapter = adapter
        self.handle = handle
        self.box = Mailbox()
        self.adapters: list[Adapter] = [adapter]
        self.commands: list[Command] = []
        self.notes: dict[str, Any] = {}

    def track(self, adapter: Adapter) -> Adapter:
        """Count ``adapter``'s pools as the cell's own; returns it."""
        self.adapters.append(adapter)
        return adapter

    def keep(self, command: Command) -> Command:
        """Stop ``command`` when the cell is done; returns it."""
        self.commands.append(command)
        return command

    def facade(self) -> Any:
        """The facade module, serving this provider with this adapter and :data:`RETRY`."""
        config.configure(adapters={self.provider: self.adapter})
        config.configure("retry", **RETRY)
        return managoat_sandbox

    def close(self) -> None:
        """Stop kept commands and destroy the sandbox (best effort, faults cleared first)."""
        self.emulator.faults.clear()
        for command in self.commands:
            self.adapter.stop_command(command)
        try:
            self.adapter.destroy(self.handle)
        except SandboxError as error:
            log.warning("cleanup: destroying %s failed: %r", self.handle.name, error)
        release_pools(self.adapters)


# -- sockets, pools, threads ----------------------------------------------------------------


def _remote_port_by_inode() -> dict[str, int]:
    """inode → remote port of every TCP socket in this network namespace."""
    found: dict[str, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as rows:
                next(rows)
                for row in rows:
                    fields = row.split()
                    found[fields[9]] = int(fields[2].rsplit(":", 1)[1], 16)
        except FileNotFoundError:
            continue
    return found


def client_sockets(port: int) -> int:
    """How many of this process's fds are TCP sockets connected *to* ``port``."""
    remote = _remote_port_by_inode()
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and remote.get(target[8:-1]) == port:
            count += 1
    return count


def _http_clients(value: object, depth: int = 2) -> Iterable[HttpClient]:
    """The ``HttpClient``s an adapter holds (directly, or one attribute down)."""
    if isinstance(value, HttpClient):
        yield value
        return
    if depth == 0 or not hasattr(value, "__dict__"):
        return
    for attribute in vars(value).values():
        yield from _http_clients(attribute, depth - 1)


def release_pools(adapters: Iterable[Adapter]) -> None:
    """Close the calling thread's keep-alive pool of each adapter (see the module docstring)."""
    for adapter in adapters:
        for client in _http_clients(adapter):
            client.release()


def _new_threads(baseline: set[int | None]) -> list[str]:
    return [
        t.name
        for t in threading.enumerate()
        if t.ident not in baseline and t.is_alive() and "emulator" not in t.name
    ]


def _unclosed_sockets(caught: list[warnings.WarningMessage], port: int) -> list[str]:
    pattern = re.compile(rf"unclosed <socket\.socket .*raddr=\('[^']*', {port}")
    return [
        str(w.message)
        for w in caught
        if issubclass(w.category, ResourceWarning) and pattern.search(str(w.message))
    ]


# -- running a cell ------------------------------------------------------------------------


def _matches(expected: Any, actual: Any) -> bool:
    return expected(actual) if callable(expected) else expected == actual


def _check_error(error: BaseException, expect: Expect) -> None:
    assert expect.error is not None, f"expected the fault to be ridden out, got {error!r}"
    assert isinstance(error, SandboxError)
    assert error.taxonomy() is expect.error, f"expected {expect.error.__name__}, got {error!r}"
    if expect.detail is not None:
        assert _matches(expect.detail, error.detail), f"unexpected detail: {error.detail!r}"
    if expect.retry_after is not None:
        assert isinstance(error, RateLimited)
        assert error.retry_after == expect.retry_after, error.retry_after


def _check_frames(history: list[Frame], expect: Expect) -> None:
    terminals = [frame for frame in history if frame.terminal]
    assert len(terminals) == 1, f"{len(terminals)} terminal frames: {terminals!r}"
    assert history[-1] is terminals[0], "a frame came after the terminal frame"
    terminal = terminals[0]
    if expect.error is None:
        assert terminal == Exit(terminal.ref, expect.exit_code), terminal
        if expect.output is not None:
            data = b"".join(f.data for f in history if isinstance(f, Stdout))
            assert data == expect.output, "output lost or duplicated"
    else:
        assert isinstance(terminal, Error), f"expected an Error frame, got {terminal!r}"
        _check_error(terminal.reason, expect)


def run_cell(ctx: Ctx, fault: str, cell: Cell, *, settle: float = SETTLE) -> float:
    """Run ``cell`` in ``ctx`` and assert everything the module docstring lists.

    ``settle`` is how long threads and sockets get to wind down. Returns the
    seconds the operation took (to its raise or terminal frame).
    """
    emulator = ctx.emulator
    emulator.faults.clear()
    if cell.prepare is not None:
        cell.prepare(ctx)
    release_pools(ctx.adapters)
    sockets_before = client_sockets(emulator.port)
    threads_before = {t.ident for t in threading.enumerate()}
    emulator.clear_requests()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        if not cell.inject_after_output:
            cell.inject(ctx)
        started = time.monotonic()
        limit = cell.bound + MARGIN
        command: Command | None = None
        try:
            returned = cell.run(ctx)
        except SandboxError as error:
            elapsed = time.monotonic() - started
            assert not cell.stream, f"the stream cell raised at once: {error!r}"
            _check_error(error, cell.expect)
            outcome = repr(error)
        else:
            assert cell.stream, f"expected {cell.expect.describe()} to be raised, got {returned!r}"
            assert isinstance(returned, Command)
            command = ctx.keep(returned)
            if cell.inject_after_output:
                ctx.box.expect(is_stdout(command.ref), max(started + limit - time.monotonic(), 0))
                cell.inject(ctx)
            terminal = ctx.box.expect(
                is_terminal(command.ref), max(started + limit - time.monotonic(), 0.0)
            )
            elapsed = time.monotonic() - started
            outcome = repr(terminal)
        assert elapsed <= limit, f"took {elapsed:.2f}s, bound {cell.bound}s + {MARGIN}s"
        if cell.verify is not None:
            cell.verify(ctx)
        if cell.requests is not None:
            wanted = cell.requests
            seen = [
                r
                for r in emulator.requests
                if r.method == wanted.method and re.search(wanted.path, r.path)
            ]
            assert len(seen) == wanted.count, (
                f"{len(seen)} {wanted.method} {wanted.path} requests, expected {wanted.count}"
            )
        assert wait_until(lambda: not _new_threads(threads_before), settle), (
            f"threads leaked: {_new_threads(threads_before)}"
        )
        if command is not None:
            _check_frames(ctx.box.history(command.ref), cell.expect)
        release_pools(ctx.adapters)
        assert wait_until(lambda: client_sockets(emulator.port) <= sockets_before, settle), (
            f"sockets leaked: {client_sockets(emulator.port)} open to the emulator, "
            f"{sockets_before} before"
        )
        gc.collect()
    unclosed = _unclosed_sockets(caught, emulator.port)
    assert not unclosed, f"sockets closed only by the garbage collector: {unclosed}"
    log.info("%s %s: %s in %.3fs (bound %.3fs)", ctx.provider, fault, outcome, elapsed, cell.bound)
    return elapsed
