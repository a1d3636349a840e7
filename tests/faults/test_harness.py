"""The harness fails a cell for each thing it promises to catch (so a green matrix means
something): a missing row, a leaked socket, a socket only the garbage collector closed, a
leaked thread, and a frame after the terminal one. Driven through the Sprites cells."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from managoat_sandbox.frames import Exit, Stdout
from managoat_sandbox.types import Command

from . import test_sprites_matrix as sprites
from .harness import FAULTS, Cell, Ctx, matrix, run_cell

pytestmark = pytest.mark.timeout(60)

#: The Sprites matrix's fixtures, reused here.
emulator, ctx = sprites.emulator, sprites.ctx
QUICK = sprites.CELLS["oversized_body"]
#: How long a leak is given to go away: short, as it never does here.
SETTLE = 0.5


def _quick_with(extra: object) -> Cell:
    """The quick oversized-body cell, with ``extra(ctx)`` done while injecting."""

    def inject(ctx: Ctx) -> None:
        QUICK.inject(ctx)
        extra(ctx)  # type: ignore[operator]

    return Cell(inject=inject, run=QUICK.run, bound=QUICK.bound, expect=QUICK.expect)


def test_a_module_missing_a_row_is_refused() -> None:
    with pytest.raises(ValueError, match=FAULTS[-1]):
        matrix({fault: QUICK for fault in FAULTS[:-1]})


@pytest.fixture
def held() -> Iterator[list[socket.socket]]:
    sockets: list[socket.socket] = []
    yield sockets
    for sock in sockets:
        sock.close()


def test_a_socket_left_open_to_the_emulator_fails_the_cell(
    ctx: Ctx, held: list[socket.socket]
) -> None:
    cell = _quick_with(
        lambda c: held.append(socket.create_connection(("127.0.0.1", c.emulator.port)))
    )
    with pytest.raises(AssertionError, match="sockets leaked"):
        run_cell(ctx, "leak", cell, settle=SETTLE)


def test_a_socket_closed_only_by_the_garbage_collector_fails_the_cell(ctx: Ctx) -> None:
    def abandon(c: Ctx) -> None:
        socket.create_connection(("127.0.0.1", c.emulator.port))

    with pytest.raises(AssertionError, match="garbage collector"):
        run_cell(ctx, "gc", _quick_with(abandon))


def test_a_thread_outliving_the_cell_fails_it(ctx: Ctx) -> None:
    release = threading.Event()
    cell = _quick_with(lambda c: threading.Thread(target=release.wait, name="lingering").start())
    try:
        with pytest.raises(AssertionError, match="threads leaked"):
            run_cell(ctx, "thread", cell, settle=SETTLE)
    finally:
        release.set()


def test_a_frame_after_the_terminal_frame_fails_the_cell(ctx: Ctx) -> None:
    def run(c: Ctx) -> Command:
        command = Command("sprites", "harness-ref")
        for frame in (
            Stdout("harness-ref", b"out"),
            Exit("harness-ref", 0),
            Stdout("harness-ref", b"late"),
        ):
            c.box(frame)
        return command

    cell = Cell(
        inject=lambda c: None,
        run=run,
        stream=True,
        bound=1.0,
        expect=sprites.CELLS["close_without_exit"].expect,
    )
    with pytest.raises(AssertionError, match="after the terminal frame"):
        run_cell(ctx, "late-frame", cell)
