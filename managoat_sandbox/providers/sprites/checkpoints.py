"""Checkpoint create and restore (only when ``checkpoint_creation_enabled`` is on).

Both answer ``200`` with an NDJSON progress stream, and a failure is a normal
element of that stream (``{"type": "error", "error": "…"}``), so a drained
stream proves nothing by itself:

* create: the stream must end in ``complete`` with no failure in it; the id is
  never parsed from prose but resolved from the listing — the newest
  checkpoint (by ``create_time``) carrying the requested comment, never the
  synthetic ``Current`` entry and never an unrelated older one;
* restore: any element with ``type == "error"`` or a non-empty string
  ``error`` is ``RestoreFailed(("restore_failed", <its text>))``; a stream without ``complete`` is
  ``Unavailable("restore_unconfirmed")`` (its fate is unknown).
"""

from __future__ import annotations

import json
from typing import Any

from ...errors import ProviderError, RestoreFailed, Unavailable
from ...reasons import Reason
from .api import SpritesApi

__all__ = ["create", "restore"]


def _events(body: bytes) -> list[Any]:
    events = []
    for line in body.split(b"\n"):
        if line.strip():
            try:
                events.append(json.loads(line))
            except ValueError:
                raise ProviderError("sprites", Reason.MALFORMED_PROGRESS_STREAM) from None
    return events


def _failure(event: Any) -> str | None:
    """The failure text an event reports, or None."""
    if not isinstance(event, dict):
        return None
    error = event.get("error")
    if isinstance(error, str) and error:
        return error
    if event.get("type") == "error":
        return error if isinstance(error, str) else "error"
    return None


def _completed(events: list[Any]) -> bool:
    return any(isinstance(event, dict) and event.get("type") == "complete" for event in events)


def create(api: SpritesApi, name: str, comment: str) -> str:
    """Create a checkpoint of ``name`` and return its id (see the module docstring)."""
    events = _events(api.checkpoint(name, comment))
    for event in events:
        failure = _failure(event)
        if failure is not None:
            raise ProviderError("sprites", Reason.CHECKPOINT_FAILED, problem=failure)
    if not _completed(events):
        raise Unavailable(Reason.CHECKPOINT_UNCONFIRMED)
    candidates = [
        entry
        for entry in api.checkpoints(name)
        if isinstance(entry, dict)
        and isinstance(entry.get("id"), str)
        and entry["id"]
        and entry["id"] != "Current"
        and (entry.get("comment") or "") == comment
    ]
    if not candidates:
        raise ProviderError("sprites", Reason.NO_CHECKPOINT_ID)
    newest = max(candidates, key=lambda entry: str(entry.get("create_time") or ""))
    return str(newest["id"])


def restore(api: SpritesApi, name: str, checkpoint_id: str) -> None:
    """Restore ``checkpoint_id``; a reported failure is ``RestoreFailed``."""
    events = _events(api.restore(name, checkpoint_id))
    for event in events:
        failure = _failure(event)
        if failure is not None:
            raise RestoreFailed(Reason.RESTORE_FAILED, problem=failure)
    if not _completed(events):
        raise Unavailable(Reason.RESTORE_UNCONFIRMED)
