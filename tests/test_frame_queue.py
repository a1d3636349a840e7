"""The library's own frame queue: merged output for a lagging consumer, bounded by the output
it holds when asked; nothing else changed."""

from __future__ import annotations

import queue
import threading

import pytest

from managoat_sandbox import _frame_queue, reasons
from managoat_sandbox._frame_queue import FrameQueue
from managoat_sandbox._streaming import Stream
from managoat_sandbox.errors import Unavailable
from managoat_sandbox.frames import Error, Exit, Stderr, Stdout


def test_output_waiting_to_be_taken_is_merged_in_order_and_terminals_never_are() -> None:
    frames = FrameQueue()
    for frame in (
        Stdout("a", b"1"),
        Stdout("a", b"2"),
        Stderr("a", b"e"),
        Stderr("a", b"f"),
        Stdout("a", b"3"),
        Exit("a", 0),
    ):
        frames.put(frame)
    assert [frames.get_nowait() for _ in range(frames.qsize())] == [
        Stdout("a", b"12"),
        Stderr("a", b"ef"),
        Stdout("a", b"3"),
        Exit("a", 0),
    ]
    frames.put(Stdout("a", b"late"))
    frames.put(Error("a", Unavailable(reasons.CLOSED_BEFORE_EXIT)))
    frames.put(Stdout("a", b"after"))
    assert frames.qsize() == 3


def test_a_consumer_that_keeps_up_gets_every_frame_as_delivered() -> None:
    frames = FrameQueue()
    got: list[object] = []
    taken = threading.Event()
    for n in range(5):
        frames.put(Stdout("a", str(n).encode()))
        got.append(frames.get(timeout=5))
        taken.set()
    assert got == [Stdout("a", str(n).encode()) for n in range(5)]


def test_frames_of_other_commands_are_kept_apart_and_merging_is_bounded(
    monkeypatch: object,
) -> None:
    frames = FrameQueue()
    frames.put(Stdout("a", b"x"))
    frames.put(Stdout("b", b"y"))
    frames.put(Stdout("b", b"y"))
    assert [frames.get_nowait() for _ in range(2)] == [Stdout("a", b"x"), Stdout("b", b"yy")]
    limit = _frame_queue.MERGE_LIMIT
    chunk = b"z" * (limit // 2)
    for _ in range(4):
        frames.put(Stdout("c", chunk))
    sizes = [len(frames.get_nowait().data) for _ in range(frames.qsize())]
    assert sizes == [limit, limit] and sum(sizes) == 4 * len(chunk)


def test_join_counts_the_frames_taken() -> None:
    frames = FrameQueue()
    for _ in range(3):
        frames.put(Stdout("a", b"x"))
    frames.put(Exit("a", 0))
    for _ in range(frames.qsize()):
        frames.get_nowait()
        frames.task_done()
    frames.join()
    assert isinstance(frames, queue.Queue)


def test_a_byte_bound_holds_up_output_but_never_a_terminal_frame() -> None:
    frames = FrameQueue(max_bytes=1000)
    frames.put(Stdout("a", b"x" * 600))
    frames.put(Stdout("a", b"y" * 600))  # room was left: one piece may pass the bound
    assert frames.held >= 1000
    with pytest.raises(queue.Full):
        frames.put(Stderr("a", b"z"), timeout=0.01)
    with pytest.raises(queue.Full):
        frames.put(Stderr("a", b"z"), block=False)
    frames.put(Exit("a", 0), block=False)
    assert frames.qsize() == 2, "qsize counts items, as with a plain queue"
    assert frames.get_nowait() == Stdout("a", b"x" * 600 + b"y" * 600)
    assert frames.held == 0
    frames.put(Stderr("a", b"z"), block=False)
    assert [frames.get_nowait() for _ in range(2)] == [Exit("a", 0), Stderr("a", b"z")]


def test_a_put_waiting_for_room_goes_in_once_a_get_makes_it_in_order() -> None:
    frames = FrameQueue(max_bytes=10)
    frames.put(Stdout("a", b"first"))
    waiting = threading.Thread(target=frames.put, args=(Stdout("a", b"second"),), daemon=True)
    waiting.start()
    waiting.join(0.05)
    assert waiting.is_alive(), "the second put did not wait for room"
    assert frames.get(timeout=5) == Stdout("a", b"first")
    waiting.join(5)
    assert not waiting.is_alive()
    assert frames.get_nowait() == Stdout("a", b"second")


def test_a_stream_without_an_owner_queues_at_most_its_bound() -> None:
    stream = Stream("r", None, label="test")
    assert isinstance(stream.frames, FrameQueue)
    assert stream.frames.max_bytes == _frame_queue.COMMAND_QUEUE_BYTES
