"""Building blocks for adapter authors: the streaming base and the exec collector.

``Stream`` keeps the frame contract (order, exactly one terminal frame,
silence after ``stop``) for one command; ``collect_exec`` turns a spawn into an
``exec`` with one monotonic ``Deadline`` and exec's output limit
(``max_bytes``; ``ExecOutput`` is that collection, for an adapter whose exec
output does not arrive as frames); ``StreamingAdapter`` implements
``write_stdin``/``close_stdin``/``stop_command`` by delegating to the
``CommandEnd`` (the command's local end) each command keeps in
``Command.private``. Every streaming adapter in this package is built on them,
and a third-party adapter should be too.
"""

from ._collect import EXEC_MAX_BYTES, ExecOutput, ExecSink, collect_exec
from ._deadline import Deadline
from ._streaming import CommandEnd, Stream, StreamingAdapter, new_ref

__all__ = [
    "EXEC_MAX_BYTES",
    "CommandEnd",
    "Deadline",
    "ExecOutput",
    "ExecSink",
    "Stream",
    "StreamingAdapter",
    "collect_exec",
    "new_ref",
]
