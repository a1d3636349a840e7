"""The fault matrix for the Sprites adapter, through the Sprites emulator.

Settings: ``timeout_ms`` = 2000 (T = 2 s, every REST read and the exec
upgrade), the WebSocket keepalive 10 s (a silent socket is first pinged after
10 s and declared dead after 30 s — past every stream cell's bound plus the
margin, so a stream cell passes only if the fault itself is noticed),
listing cap 5 pages; facade retries
:data:`~.harness.RETRY` (3 attempts, 1-5 ms backoff, Retry-After above 1 s
not waited for).

* ``reset_mid_stream`` — exec socket reset (RST) after one output frame; spawn → one
  ``Error(Unavailable("closed_before_exit"))``.
* ``close_without_exit`` — a normal WebSocket close (1000) after one output frame, no exit
  frame; spawn → one ``Error(Unavailable("closed_before_exit"))``.
* ``rate_limited_429`` — ``GET /v1/sprites/<name>`` answers 429, ``Retry-After: 17``; facade
  ``get`` → ``RateLimited(17.0)``, one request (17 s > the 1 s retry cap).
* ``5xx_storm_idempotent`` — every ``GET /v1/sprites/<name>`` answers 503; facade ``get`` →
  ``Unavailable(("http", 503, …))`` after exactly 3 requests.
* ``5xx_storm_not_idempotent`` — every exec upgrade answers 503; facade ``exec`` →
  ``Unavailable(("http", 503, …))``, exactly one upgrade.
* ``stall_past_read_timeout`` — ``GET /v1/sprites/<name>`` held 8 s; ``timeout_ms`` 300; ``get``
  → ``Unavailable("timeout")`` within 0.3 s + margin.
* ``malformed_json`` — ``GET /v1/sprites/<name>`` answers 200 ``{"name": "bro``; ``get`` →
  ``Unavailable(("malformed_json", 200))``.
* ``truncated_stream_body`` — the kill NDJSON stream: a ``signal`` line, half of an ``exited``
  line, then the connection closes inside the chunked body (Sprites' streaming bodies are its
  NDJSON kill/checkpoint/restore answers; exec output is WebSocket, covered above);
  ``terminate_session`` → ``Unavailable("termination_unconfirmed")``, one request.
* ``oversized_body`` — ``GET /v1/sprites/<name>`` answers 200 KB; ``get`` →
  ``Unavailable(("response_too_large", 65536))``.
* ``endless_pagination`` — every listing page says ``has_more`` with a fresh token;
  ``list_all_names`` → ``Truncated(("page_cap", 5))`` after exactly 5 pages.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from managoat_sandbox import config, reasons
from managoat_sandbox.emulators.sprites import SpritesEmulator
from managoat_sandbox.errors import RateLimited, Truncated, Unavailable
from managoat_sandbox.providers.sprites import Sprites
from managoat_sandbox.testing.mailbox import is_stdout

from ..sprites.conftest import TOKEN
from .harness import RETRY_ATTEMPTS, Cell, Ctx, Expect, Requests, matrix, run_cell

pytestmark = pytest.mark.timeout(60)

T = 2.0
KEEPALIVE = 10.0
PAGE_CAP = 5
SPRITE = r"^/v1/sprites/matrix-[0-9]+$"
EXEC = r"^/v1/sprites/[^/]+/exec$"
CLOSED = Unavailable(reasons.CLOSED_BEFORE_EXIT).detail
_names = itertools.count(1)


def _http(status: int) -> object:
    return lambda detail: detail[:2] == ("http", status)


def _partial_then_sleep(ctx: Ctx) -> object:
    return ctx.adapter.spawn(
        ctx.handle, "bash", ["-c", "echo partial; sleep 5; echo never"], owner=ctx.box
    )


def _live_session(ctx: Ctx) -> None:
    """A detachable command to terminate; its id from the listing."""
    command = ctx.keep(
        ctx.adapter.spawn(
            ctx.handle, "bash", ["-c", "echo ready; sleep 30"], owner=ctx.box, detachable=True
        )
    )
    ctx.box.expect(is_stdout(command.ref), 10)
    [session] = ctx.adapter.list_sessions(ctx.handle)
    ctx.notes["session"] = session.id


def _stall(ctx: Ctx) -> None:
    config.configure("sprites", timeout_ms=300)
    ctx.emulator.stall(8, method="GET", path=SPRITE)


CELLS = {
    "reset_mid_stream": Cell(
        inject=lambda ctx: ctx.emulator.drop_exec(after_frames=1, reset=True),
        run=_partial_then_sleep,
        stream=True,
        bound=T,
        expect=Expect(Unavailable, CLOSED),
    ),
    "close_without_exit": Cell(
        inject=lambda ctx: ctx.emulator.drop_exec(after_frames=1, close_frame=True),
        run=_partial_then_sleep,
        stream=True,
        bound=T,
        expect=Expect(Unavailable, CLOSED),
    ),
    "rate_limited_429": Cell(
        inject=lambda ctx: ctx.emulator.rate_limit(
            retry_after=17, in_body=False, method="GET", path=SPRITE
        ),
        run=lambda ctx: ctx.facade().get(ctx.handle),
        bound=T,
        expect=Expect(RateLimited, retry_after=17.0),
        requests=Requests("GET", SPRITE, 1),
    ),
    "5xx_storm_idempotent": Cell(
        inject=lambda ctx: ctx.emulator.fail(503, method="GET", path=SPRITE, times=100),
        run=lambda ctx: ctx.facade().get(ctx.handle),
        bound=RETRY_ATTEMPTS * T,
        expect=Expect(Unavailable, _http(503)),
        requests=Requests("GET", SPRITE, RETRY_ATTEMPTS),
    ),
    "5xx_storm_not_idempotent": Cell(
        inject=lambda ctx: ctx.emulator.refuse_upgrade(503, times=100),
        run=lambda ctx: ctx.facade().exec(ctx.handle, "true"),
        bound=T,
        expect=Expect(Unavailable, _http(503)),
        requests=Requests("GET", EXEC, 1),
    ),
    "stall_past_read_timeout": Cell(
        inject=_stall,
        run=lambda ctx: ctx.adapter.get(ctx.handle),
        bound=0.3,
        expect=Expect(Unavailable, "timeout"),
    ),
    "malformed_json": Cell(
        inject=lambda ctx: ctx.emulator.faults.add(
            "status",
            status=200,
            body='{"name": "bro',
            method="GET",
            path=SPRITE,
            headers={"Content-Type": "application/json"},
        ),
        run=lambda ctx: ctx.adapter.get(ctx.handle),
        bound=T,
        expect=Expect(Unavailable, ("malformed_json", 200)),
    ),
    "truncated_stream_body": Cell(
        prepare=_live_session,
        inject=lambda ctx: ctx.emulator.truncate_ndjson("kill"),
        run=lambda ctx: ctx.adapter.terminate_session(
            ctx.handle, ctx.notes["session"], timeout=0.001
        ),
        bound=0.001 + 5.0,  # the grace period plus the adapter's 5 s transport slack
        expect=Expect(Unavailable, reasons.TERMINATION_UNCONFIRMED),
        requests=Requests("POST", r"/kill$", 1),
    ),
    "oversized_body": Cell(
        inject=lambda ctx: ctx.emulator.oversize(200_000, method="GET", path=SPRITE),
        run=lambda ctx: ctx.adapter.get(ctx.handle),
        bound=T,
        expect=Expect(Unavailable, (reasons.RESPONSE_TOO_LARGE, 64 * 1024)),
    ),
    "endless_pagination": Cell(
        inject=lambda ctx: ctx.emulator.endless_listing(),
        run=lambda ctx: ctx.adapter.list_all_names(),
        bound=PAGE_CAP * T,
        expect=Expect(Truncated, ("page_cap", PAGE_CAP)),
        requests=Requests("GET", r"^/v1/sprites$", PAGE_CAP),
    ),
}


@pytest.fixture(scope="module")
def emulator() -> Iterator[SpritesEmulator]:
    with SpritesEmulator(credential=TOKEN) as running:
        yield running  # type: ignore[misc]


@pytest.fixture
def ctx(emulator: SpritesEmulator) -> Iterator[Ctx]:
    config.configure("sprites", base_url=emulator.base_url, token=TOKEN, timeout_ms=int(T * 1000))
    adapter = Sprites(keepalive=KEEPALIVE, page_cap=PAGE_CAP)
    context = Ctx("sprites", emulator, adapter, adapter.create(f"matrix-{next(_names)}"))
    yield context
    context.close()


@pytest.mark.parametrize("cell", matrix(CELLS))
def test_fault(ctx: Ctx, cell: Cell, request: pytest.FixtureRequest) -> None:
    run_cell(ctx, request.node.callspec.id, cell)
