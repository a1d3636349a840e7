"""What following a process yields: its output, then exactly one end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from . import wire


@dataclass(frozen=True)
class Output:
    """A run of output from one stream (:data:`.wire.OUT` or :data:`.wire.ERR`)."""

    stream: int
    data: bytes


@dataclass(frozen=True)
class Exited:
    """The recorded end of a process: ``code`` (128 + N if killed by signal N)."""

    code: int
    signal: int | None = None


@dataclass(frozen=True)
class Lost:
    """The process's outcome cannot be known; ``reason`` says why.

    ``agent_gone``: the agent ended before recording an end; ``journal_failed:
    E…``: output could not be journaled, so the process was killed;
    ``closed_before_exit``: the connection ended early.
    """

    reason: str


End: TypeAlias = Exited | Lost
Event: TypeAlias = Output | Exited | Lost


def end_from_record(record: dict[str, Any]) -> End:
    """An end from its recorded or transmitted form."""
    if "lost" in record:
        return Lost(str(record["lost"]))
    code = record.get("code")
    signal = record.get("signal")
    if not isinstance(code, int) or isinstance(code, bool):
        return Lost("malformed end record")
    return Exited(
        code, signal if isinstance(signal, int) and not isinstance(signal, bool) else None
    )


def coalesce(frames: list[tuple[int, bytes]]) -> list[Output]:
    """Output events for OUT/ERR frames, adjacent frames of one stream merged."""
    runs: list[tuple[int, list[bytes]]] = []
    for kind, data in frames:
        if runs and runs[-1][0] == kind:
            runs[-1][1].append(data)
        else:
            runs.append((kind, [data]))
    return [Output(kind, b"".join(parts)) for kind, parts in runs]


OUTPUT_KINDS: frozenset[int] = frozenset((wire.OUT, wire.ERR))
