"""The fault matrix for the Daytona adapter, through the Daytona emulator.

Settings: every HTTP read T = 2 s (``Timeouts(connect=2, api=2, toolbox=2)``),
the log follower pauses 20-100 ms between reads of a log whose follow ended,
looks into a log quiet for 0.3 s (``probe_after``) and gives up after 1 s of
consecutive failures (``unreachable_after``), listing pages of 2 capped at
5 pages; facade retries :data:`~.harness.RETRY` (3 attempts, 1-5 ms backoff,
Retry-After above 1 s not waited for).

A command's output is the daemon's log, followed over the WebSocket
``GET …/logs?follow=true`` (docs/protocols/daytona.md#log-follow) and, when a
follow ends before the journal is complete, finished from plain ``GET …/logs``
snapshots (docs/protocols/daytona.md#log-snapshot); its
end and exit code are in the journal itself (the shim's end frames). So
"mid-stream" faults hit the follow open while a command runs (injected once its
first output has arrived: the open follow is cut, later ones meet the fault) and
the snapshots read after it. A follow or a snapshot that fails is ridden out —
the truncated cell proves that exactly (every byte once, the real exit); a
fault on every read that persists past the follow budget ends the command with
one ``Error`` — the reset cell proves that.

* ``reset_mid_stream`` — the open follow and every later one is reset (RST) after 4 bytes,
  every log snapshot too; spawn → one ``Error(Unavailable(("transport", …)))`` after the
  1 s follow budget.
* ``close_without_exit`` — the command (record, log and follow) answers 404 — the daemon
  lost it — while the process runs on; spawn → one
  ``Error(Unavailable("closed_before_exit"))``, no invented exit.
* ``rate_limited_429`` — ``GET /api/sandbox/<name>`` answers 429, ``Retry-After-authenticated:
  7``; facade ``get`` → ``RateLimited(7.0)``, one request (7 s > the 1 s retry cap).
* ``5xx_storm_idempotent`` — every ``GET /api/sandbox/<name>`` answers 503; facade ``get`` →
  ``Unavailable(("http", 503, …))`` after exactly 3 requests.
* ``5xx_storm_not_idempotent`` — every ``POST …/process/session/<id>/exec`` answers 503; facade
  ``exec`` (one synchronous session exec) → ``Unavailable(("http", 503, …))``, exactly one
  exec request.
* ``stall_past_read_timeout`` — ``GET /api/sandbox/<name>`` held 8 s; an adapter with a 0.3 s
  API read timeout; ``get`` → ``Unavailable("timeout")`` within 0.3 s + margin.
* ``malformed_json`` — ``GET /api/sandbox/<name>`` answers 200 ``{"id": "sbx``; ``get`` →
  ``Unavailable(("malformed_json", 200))``.
* ``truncated_stream_body`` — the open follow ends early (Close 1000), the next three end
  after 10 bytes, and three log snapshots are cut (FIN) after 10 bytes of a 30-line output
  (the command prints its other 29 lines only once the cuts are queued: a FIFO handshake);
  spawn → ridden out: ``Exit(0)`` with the 30 lines exactly once.
* ``oversized_body`` — ``GET /api/sandbox/<name>`` answers 200 KB; ``get`` →
  ``Unavailable(("response_too_large", 65536))``.
* ``endless_pagination`` — every ``GET /api/sandbox`` page names a fresh ``nextCursor``;
  ``list_all_names`` → ``Truncated(("pages", 5))`` after exactly 5 pages.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from managoat_sandbox import config, reasons
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.errors import RateLimited, Truncated, Unavailable
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.providers.daytona.api import Timeouts
from managoat_sandbox.providers.daytona.stream import FollowPolicy

from ..daytona.emulated import KEY
from ..handshake import daytona_gate
from .harness import RETRY_ATTEMPTS, Cell, Ctx, Expect, Requests, matrix, run_cell

pytestmark = pytest.mark.timeout(60)

T = 2.0
UNREACHABLE_AFTER = 1.0
PROBE_AFTER = 0.3
FOLLOW = FollowPolicy(
    min_interval=0.02,
    max_interval=0.1,
    probe_after=PROBE_AFTER,
    max_probe_interval=0.6,
    unreachable_after=UNREACHABLE_AFTER,
    read_timeout=T,
)
MAX_PAGES = 5
SANDBOX = r"^/api/sandbox/matrix-[0-9]+$"
EXEC = r"^/toolbox/[^/]+/process/session/[^/]+/exec$"
COMMAND = r"/command/[^/]+(/logs)?$"
LINES = 30
#: The rest of the counter, printed once the first line has arrived and the cuts are queued.
REST = f"for i in $(seq 2 {LINES}); do echo line-$i; done"
EXPECTED = b"".join(b"line-%d\n" % i for i in range(1, LINES + 1))
CLOSED = Unavailable(reasons.CLOSED_BEFORE_EXIT).detail
#: Spawning (session, exec) and reaching the first output: two toolbox round trips.
TO_FIRST_OUTPUT = 2 * T
_names = itertools.count(1)


def _adapter(**timeouts: float) -> Daytona:
    return Daytona(
        follow=FOLLOW,
        timeouts=Timeouts(**{"connect": T, "api": T, "toolbox": T, **timeouts}),
        start_timeout=5.0,
        page_size=2,
        max_pages=MAX_PAGES,
    )


def _http(status: int) -> object:
    return lambda detail: detail[:2] == ("http", status)


def _transport(detail: object) -> bool:
    return isinstance(detail, tuple) and detail[0] == reasons.TRANSPORT


def _spawn(script: str) -> object:
    return lambda ctx: ctx.adapter.spawn(ctx.handle, "bash", ["-c", script], owner=ctx.box)


def _stall(ctx: Ctx) -> None:
    ctx.emulator.faults.add("stall", seconds=8, method="GET", path=SANDBOX)


def _reset_every_log_read(ctx: Ctx) -> None:
    ctx.emulator.reset_log_stream(after_bytes=4, times=10_000)
    ctx.emulator.cut_log_reads(after_bytes=4, reset=True, times=10_000)
    ctx.emulator.cut_log_follows(reset=True)


def _gated_counter(ctx: Ctx) -> object:
    """Prints line-1, then waits (at its gate) until the cuts are queued, then the rest."""
    gate = daytona_gate(ctx.emulator, ctx.handle.name)
    ctx.notes["gate"] = gate
    script = gate.script("echo line-1", REST)
    return ctx.adapter.spawn(ctx.handle, "bash", ["-c", script], owner=ctx.box)


def _cut_three_log_reads(ctx: Ctx) -> None:
    faults = ctx.emulator.faults
    ctx.notes["cuts"] = [
        faults.add("log_close_early", path=r"/logs$", size=10, times=3),
        faults.add("log_cut", method="GET", path=r"/logs$", size=10, body="close", times=3),
    ]
    ctx.emulator.cut_log_follows()
    ctx.notes["gate"].release()


def _all_cuts_served(ctx: Ctx) -> None:
    assert all(cut.times == 0 for cut in ctx.notes["cuts"]), (
        "every cut follow and log read was served (and ridden out)"
    )


CELLS = {
    "reset_mid_stream": Cell(
        inject=_reset_every_log_read,
        inject_after_output=True,
        run=_spawn("echo first; sleep 30"),
        stream=True,
        bound=TO_FIRST_OUTPUT + UNREACHABLE_AFTER + T,  # the budget, then one read in flight
        expect=Expect(Unavailable, _transport),
    ),
    "close_without_exit": Cell(
        inject=lambda ctx: ctx.emulator.faults.add(
            "status",
            path=COMMAND,
            status=404,
            times=10_000,
            body={"statusCode": 404, "message": "not found: command not found"},
        ),
        inject_after_output=True,
        run=_spawn("echo first; sleep 30"),
        stream=True,
        bound=TO_FIRST_OUTPUT + 2 * T,  # quiet for PROBE_AFTER < T, the record (404), a read
        expect=Expect(Unavailable, CLOSED),
    ),
    "rate_limited_429": Cell(
        inject=lambda ctx: ctx.emulator.rate_limit(path=SANDBOX, method="GET", retry_after=7),
        run=lambda ctx: ctx.facade().get(ctx.handle),
        bound=T,
        expect=Expect(RateLimited, retry_after=7.0),
        requests=Requests("GET", SANDBOX, 1),
    ),
    "5xx_storm_idempotent": Cell(
        inject=lambda ctx: ctx.emulator.unavailable(path=SANDBOX, method="GET", times=100),
        run=lambda ctx: ctx.facade().get(ctx.handle),
        bound=RETRY_ATTEMPTS * T,
        expect=Expect(Unavailable, _http(503)),
        requests=Requests("GET", SANDBOX, RETRY_ATTEMPTS),
    ),
    "5xx_storm_not_idempotent": Cell(
        inject=lambda ctx: ctx.emulator.unavailable(path=EXEC, method="POST", times=100),
        run=lambda ctx: ctx.facade().exec(ctx.handle, "true"),
        bound=3 * T,  # sandbox lookup, session creation, the refused exec
        expect=Expect(Unavailable, _http(503)),
        requests=Requests("POST", EXEC, 1),
    ),
    "stall_past_read_timeout": Cell(
        inject=_stall,
        run=lambda ctx: ctx.track(_adapter(api=0.3)).get(ctx.handle),
        bound=0.3,
        expect=Expect(Unavailable, "timeout"),
    ),
    "malformed_json": Cell(
        inject=lambda ctx: ctx.emulator.faults.add(
            "status",
            status=200,
            body='{"id": "sbx',
            method="GET",
            path=SANDBOX,
            headers={"Content-Type": "application/json"},
        ),
        run=lambda ctx: ctx.adapter.get(ctx.handle),
        bound=T,
        expect=Expect(Unavailable, ("malformed_json", 200)),
    ),
    "truncated_stream_body": Cell(
        inject=_cut_three_log_reads,
        inject_after_output=True,
        run=_gated_counter,
        stream=True,
        bound=TO_FIRST_OUTPUT + 4 * T,  # the command's rest, three cut reads, the drain
        expect=Expect(None, exit_code=0, output=EXPECTED),
        verify=_all_cuts_served,
    ),
    "oversized_body": Cell(
        inject=lambda ctx: ctx.emulator.faults.add(
            "oversize", size=200_000, method="GET", path=SANDBOX
        ),
        run=lambda ctx: ctx.adapter.get(ctx.handle),
        bound=T,
        expect=Expect(Unavailable, (reasons.RESPONSE_TOO_LARGE, 64 * 1024)),
    ),
    "endless_pagination": Cell(
        inject=lambda ctx: ctx.emulator.endless_listing(),
        run=lambda ctx: ctx.adapter.list_all_names(),
        bound=MAX_PAGES * T,
        expect=Expect(Truncated, ("pages", MAX_PAGES)),
        requests=Requests("GET", r"^/api/sandbox$", MAX_PAGES),
    ),
}


@pytest.fixture(scope="module")
def emulator() -> Iterator[DaytonaEmulator]:
    with DaytonaEmulator(credential=KEY) as running:
        yield running  # type: ignore[misc]


@pytest.fixture
def ctx(emulator: DaytonaEmulator) -> Iterator[Ctx]:
    config.configure("daytona", api_key=KEY, api_url=emulator.api_url)
    adapter = _adapter()
    context = Ctx("daytona", emulator, adapter, adapter.create(f"matrix-{next(_names)}"))
    yield context
    context.close()


@pytest.mark.parametrize("cell", matrix(CELLS))
def test_fault(ctx: Ctx, cell: Cell, request: pytest.FixtureRequest) -> None:
    run_cell(ctx, request.node.callspec.id, cell)
