"""The fault matrix for the E2B adapter, through the E2B emulator.

Settings: ``timeout_ms`` = 2000 (T = 2 s: every control-plane read and the
wait for a stream's ``start``), the adapter's stream idle timeout left at its
default (a silent stream is declared dead only after minutes — so a stream
cell passes only if the fault itself is noticed); facade retries
:data:`~.harness.RETRY` (3 attempts, 1-5 ms backoff, Retry-After above 1 s not
waited for). The listing cap is the adapter's fixed 40 pages.

E2B's streaming body is envd's Connect server stream (``Start``): 5-byte
envelope headers, JSON messages, an end-of-stream envelope after the ``end``
event, over chunked HTTP/1.1. Its analogue of a truncated NDJSON stream is a
stream cut *inside* an envelope.

* ``reset_mid_stream`` — the Start stream is reset (RST) between envelopes after ``start`` and
  one ``data``; spawn → one ``Error(Unavailable(("transport", …)))``.
* ``close_without_exit`` — the Start stream ends cleanly (end-of-stream ``{}``) after one
  ``data`` event, with no ``end`` event; spawn → one
  ``Error(Unavailable("closed_before_exit"))``.
* ``rate_limited_429`` — ``GET /v2/sandboxes`` answers 429, ``Retry-After: 7``; facade ``get`` →
  ``RateLimited(7.0)``, one request (7 s > the 1 s retry cap).
* ``5xx_storm_idempotent`` — every ``GET /v2/sandboxes`` answers 503; facade ``get`` →
  ``Unavailable(("http", 503, …))`` after exactly 3 requests.
* ``5xx_storm_not_idempotent`` — every ``Start`` answers 503; facade ``exec`` →
  ``Unavailable(("http", 503, …))``, exactly one ``Start``.
* ``stall_past_read_timeout`` — ``GET /v2/sandboxes`` held 8 s; ``timeout_ms`` 300; ``get`` →
  ``Unavailable("timeout")`` within 0.3 s + margin.
* ``malformed_json`` — ``GET /v2/sandboxes`` answers 200 ``[{"sandboxID": "i``; ``get`` →
  ``Unavailable(("malformed_json", 200))``.
* ``truncated_stream_body`` — the Start stream is closed halfway through its third envelope;
  spawn → one ``Error(Unavailable(("transport", …)))``.
* ``oversized_body`` — ``GET /v2/sandboxes`` answers 200 KB; ``get`` →
  ``Unavailable(("response_too_large", 65536))``.
* ``endless_pagination`` — every listing page carries a fresh ``X-Next-Token``;
  ``list_all_names`` → ``Truncated`` after exactly 40 pages.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from managoat_sandbox import config, reasons
from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.errors import RateLimited, Truncated, Unavailable
from managoat_sandbox.providers.e2b import E2B
from managoat_sandbox.providers.e2b.api import MAX_PAGES
from managoat_sandbox.testing.mailbox import is_stdout

from ..e2b.emulated import API_KEY
from ..handshake import e2b_gate
from .harness import RETRY_ATTEMPTS, Cell, Ctx, Expect, Requests, matrix, run_cell

pytestmark = pytest.mark.timeout(60)

T = 2.0
LIST = r"^/v2/sandboxes$"
START = r"^/process\.Process/Start$"
CLOSED = Unavailable(reasons.CLOSED_BEFORE_EXIT).detail
_names = itertools.count(1)


def _http(status: int) -> object:
    return lambda detail: detail[:2] == ("http", status)


def _transport(detail: object) -> bool:
    return isinstance(detail, tuple) and detail[0] == reasons.TRANSPORT


def _partial_then_sleep(ctx: Ctx) -> object:
    """A spawn that prints "one", then — only once "one" has arrived as its own frame, so
    as a data event of its own — "two", then outlasts the bound before it ends."""
    gate = e2b_gate(ctx.emulator, ctx.handle.private.sandbox_id)
    script = gate.script("echo one", "echo two; sleep 5; echo never")
    command = ctx.adapter.spawn(ctx.handle, "bash", ["-c", script], owner=ctx.box)
    ctx.box.expect(is_stdout(command.ref), T)
    gate.release()
    return command


def _stall(ctx: Ctx) -> None:
    config.configure("e2b", timeout_ms=300)
    ctx.emulator.faults.add("stall", seconds=8, method="GET", path=LIST)


CELLS = {
    "reset_mid_stream": Cell(
        inject=lambda ctx: ctx.emulator.stream_fault("rst", rpc="Start", after=2),
        run=_partial_then_sleep,
        stream=True,
        bound=T,
        expect=Expect(Unavailable, _transport),
    ),
    "close_without_exit": Cell(
        inject=lambda ctx: ctx.emulator.stream_fault("no_end", rpc="Start", after=1),
        run=_partial_then_sleep,
        stream=True,
        bound=T,
        expect=Expect(Unavailable, CLOSED),
    ),
    "rate_limited_429": Cell(
        inject=lambda ctx: ctx.emulator.rate_limit(path=LIST, method="GET", retry_after=7),
        run=lambda ctx: ctx.facade().get(ctx.handle),
        bound=T,
        expect=Expect(RateLimited, retry_after=7.0),
        requests=Requests("GET", LIST, 1),
    ),
    "5xx_storm_idempotent": Cell(
        inject=lambda ctx: ctx.emulator.server_error(503, path=LIST, method="GET", times=100),
        run=lambda ctx: ctx.facade().get(ctx.handle),
        bound=RETRY_ATTEMPTS * T,
        expect=Expect(Unavailable, _http(503)),
        requests=Requests("GET", LIST, RETRY_ATTEMPTS),
    ),
    "5xx_storm_not_idempotent": Cell(
        inject=lambda ctx: ctx.emulator.server_error(503, path=START, times=100),
        run=lambda ctx: ctx.facade().exec(ctx.handle, "true"),
        bound=T,
        expect=Expect(Unavailable, _http(503)),
        requests=Requests("POST", START, 1),
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
            body='[{"sandboxID": "i',
            method="GET",
            path=LIST,
            headers={"Content-Type": "application/json"},
        ),
        run=lambda ctx: ctx.adapter.get(ctx.handle),
        bound=T,
        expect=Expect(Unavailable, ("malformed_json", 200)),
    ),
    "truncated_stream_body": Cell(
        inject=lambda ctx: ctx.emulator.stream_fault("reset", rpc="Start", after=2),
        run=_partial_then_sleep,
        stream=True,
        bound=T,
        expect=Expect(Unavailable, _transport),
    ),
    "oversized_body": Cell(
        inject=lambda ctx: ctx.emulator.faults.add(
            "oversize", size=200_000, method="GET", path=LIST
        ),
        run=lambda ctx: ctx.adapter.get(ctx.handle),
        bound=T,
        expect=Expect(Unavailable, (reasons.RESPONSE_TOO_LARGE, 64 * 1024)),
    ),
    "endless_pagination": Cell(
        inject=lambda ctx: ctx.emulator.endless_listing(),
        run=lambda ctx: ctx.adapter.list_all_names(),
        bound=MAX_PAGES * T,
        expect=Expect(Truncated),
        requests=Requests("GET", LIST, MAX_PAGES),
    ),
}


@pytest.fixture(scope="module")
def emulator() -> Iterator[E2BEmulator]:
    with E2BEmulator(credential=API_KEY) as running:
        yield running  # type: ignore[misc]


@pytest.fixture
def ctx(emulator: E2BEmulator) -> Iterator[Ctx]:
    config.configure(
        "e2b",
        api_key=API_KEY,
        base_url=emulator.base_url,
        sandbox_url=emulator.base_url,
        timeout_ms=int(T * 1000),
    )
    adapter = E2B()
    context = Ctx("e2b", emulator, adapter, adapter.create(f"matrix-{next(_names)}"))
    yield context
    context.close()


@pytest.mark.parametrize("cell", matrix(CELLS))
def test_fault(ctx: Ctx, cell: Cell, request: pytest.FixtureRequest) -> None:
    run_cell(ctx, request.node.callspec.id, cell)
