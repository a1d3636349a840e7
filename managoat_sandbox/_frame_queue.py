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
"""

from __future__ import annotations

import queue
from collections import deque
from collections.abc import Hashable
from typing import Any

from .frames import Stderr, Stdout

MERGE_LIMIT = 4 * 1024 * 1024


class _Run:
    """Consecutive output of one stream of one command, not yet taken."""

    __slots__ = ("chunks", "kind", "ref", "size")

    def __init__(self, frame: Stdout | Stderr) -> None:
        self.kind: type[Stdout] | type[Stderr] = type(frame)
        self.ref: Hashable = frame.ref
        self.chunks = [frame.data]
        self.size = len(frame.data)

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
    """A ``queue.Queue`` of frames that merges output waiting to be taken (module docs).

    ``task_done``/``join`` count the frames taken, as with a plain queue: a
    merged put does not count as a separate item.
    """

    def _init(self, maxsize: int) -> None:
        self.queue: deque[Any] = deque()

    def _put(self, item: Any) -> None:
        tail = self.queue[-1] if self.queue else None
        if isinstance(tail, _Run) and tail.joins(item):
            tail.add(item.data)
            # put() counts every call as an unfinished task; this one added none.
            self.unfinished_tasks -= 1
        elif isinstance(item, (Stdout, Stderr)):
            self.queue.append(_Run(item))
        else:
            self.queue.append(item)

    def _get(self) -> Any:
        item = self.queue.popleft()
        return item.frame() if isinstance(item, _Run) else item
