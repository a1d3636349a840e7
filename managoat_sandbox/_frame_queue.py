"""The queue a command's frames go to when its caller gives no owner.

It is a ``queue.Queue`` whose consumer never waits longer than with a plain
one, but which hands over output in fewer, larger frames when the consumer
falls behind: while an output frame is still waiting in the queue, further
output of the same stream joins it (up to :data:`MERGE_LIMIT` bytes), and the
frame is built once, when it is taken. A consumer that keeps up takes every
frame as it was delivered; one that lags takes what has accumulated at once,
instead of paying a hand-off per read. Order is unchanged and a terminal
frame is never merged, so the frame contract holds as with any queue:
only chunk boundaries differ, which the contract never promised.

Given ``max_bytes``, it is bounded by the output it holds rather than by a
count of frames: a ``put`` of output waits while the output not yet taken
amounts to ``max_bytes`` or more (each piece counted as its length plus
:data:`PIECE_COST`, for what holding it costs beyond its bytes). So a
consumer that does not read holds up its producer instead of letting output
pile up in memory; the producer waits (with the usual ``block``/``timeout``
of ``put``, ``queue.Full`` past it), and one piece may take the output held
past the bound. Terminal frames never wait. Without ``max_bytes`` it is as
unbounded as a plain ``queue.Queue()``.
"""

from __future__ import annotations

import queue
import time
from collections import deque
from collections.abc import Hashable
from typing import Any

from .frames import Stderr, Stdout

MERGE_LIMIT = 4 * 1024 * 1024
#: What a waiting piece of output is counted as beyond its length (the objects holding it).
PIECE_COST = 256
#: The bound of the queue a command's frames go to when its caller gives no owner.
COMMAND_QUEUE_BYTES = 2 * MERGE_LIMIT


class _Run:
    """Consecutive output of one stream of one command, not yet taken."""

    __slots__ = ("chunks", "kind", "ref", "size")

    def __init__(self, frame: Stdout | Stderr) -> None:
        self.kind: type[Stdout] | type[Stderr] = type(frame)
        self.ref: Hashable = frame.ref
        self.chunks = [frame.data]
        self.size = len(frame.data)

    @property
    def cost(self) -> int:
        """What holding this run counts for against a byte bound."""
        return self.size + PIECE_COST * len(self.chunks)

    def joins(self, frame: object) -> bool:
        return (
            type(frame) is self.kind
            and isinstance(frame, (Stdout, Stderr))
            and frame.ref == self.ref
            and self.size < MERGE_LIMIT
        )

    def add(self, data: bytes) -> None:
        self.chunks.append(data)
        self.size += len(data)

    def frame(self) -> Stdout | Stderr:
        data = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
        return self.kind(self.ref, data)


class FrameQueue(queue.Queue[Any]):
    """A ``queue.Queue`` of frames that merges output waiting to be taken, optionally
    bounded by the output it holds (module docs).

    ``task_done``/``join`` count the frames taken, as with a plain queue: a
    merged put does not count as a separate item. ``qsize`` counts items, as
    with a plain queue; :attr:`held` is what counts against ``max_bytes``.
    """

    def __init__(self, *, max_bytes: int | None = None) -> None:
        super().__init__()
        self.max_bytes = max_bytes
        #: The output waiting to be taken, as counted against ``max_bytes``.
        self.held = 0

    def _init(self, maxsize: int) -> None:
        self.queue: deque[Any] = deque()

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        """``queue.Queue.put`` (the queue has no bound on its count of items); output
        first waits for room under ``max_bytes``, in the same hold of the queue's lock."""
        with self.not_full:
            if self.max_bytes is not None and isinstance(item, (Stdout, Stderr)):
                self._wait_for_room(self.max_bytes, block, timeout)
            self._put(item)
            self.unfinished_tasks += 1
            self.not_empty.notify()

    def _wait_for_room(self, limit: int, block: bool, timeout: float | None) -> None:
        """Wait (``not_full`` held) until the output held is under ``limit``."""
        if not block:
            if self.held >= limit:
                raise queue.Full
            return
        expires = None if timeout is None else time.monotonic() + timeout
        while self.held >= limit:
            if expires is None:
                self.not_full.wait()
                continue
            remaining = expires - time.monotonic()
            if remaining <= 0:
                raise queue.Full
            self.not_full.wait(remaining)

    def _put(self, item: Any) -> None:
        tail = self.queue[-1] if self.queue else None
        if isinstance(tail, _Run) and tail.joins(item):
            tail.add(item.data)
            self.held += len(item.data) + PIECE_COST
            # put() counts every call as an unfinished task; this one added none.
            self.unfinished_tasks -= 1
        elif isinstance(item, (Stdout, Stderr)):
            run = _Run(item)
            self.held += run.cost
            self.queue.append(run)
        else:
            self.queue.append(item)

    def _get(self) -> Any:
        item = self.queue.popleft()
        if not isinstance(item, _Run):
            return item
        self.held -= item.cost
        return item.frame()
