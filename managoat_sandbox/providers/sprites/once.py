"""The bounded "once" operations (docs/protocols/sprites.md#bounded-once-operations, in seconds).

Each makes the fewest requests the rule allows (one, or one plus one
confirming GET), on fresh connections, never retried, never redirected, within
one deadline, and answers with sanitised details only — provider prose never
reaches an error (a transport failure is the documented
``"<operation>_transport_failed"``, raised from an ``Unavailable(("transport",
kind, "host:port"))`` that says where it failed, never the URL):

* ``create_new``: ``AlreadyExists`` on 409; success needs a JSON object naming
  the sprite with a string ``id`` of 1-256 characters;
* ``destroy_once``: 404 is done; a 200/202/204 must be confirmed by exactly
  one GET answering 404;
* ``terminate_session``: a 16 KiB NDJSON stream ending in
  ``{"type": "complete", "exit_code": 0..255}`` after an ``exited`` or
  ``killed`` event (force mode also needs the ``SIGKILL`` signal event with a
  pid). A session that has already ended is success in both modes: a 410
  (already exited), or a 404 for a session the sprite still lists (in force
  mode, one confirming GET). Any other 404 is an absent session (never there,
  forgotten, or of a sprite that is gone): success in graceful mode,
  ``Unavailable("termination_unconfirmed")`` in force mode;
* ``create_checkpoint_once``: a 200 NDJSON stream of ``info`` events and one
  final ``complete``, then exactly one listed checkpoint carrying the
  operation's comment, within one 64 KiB budget for both answers.
"""

from __future__ import annotations

import json
from typing import Any

from ... import reasons
from ..._deadline import Deadline
from ..._http import BODY_LIMIT
from ..._transport import Transport
from ...errors import AlreadyExists, Unavailable
from ...reasons import Reason
from .api import sprite_path
from .bounded import Answer, Cut, Failed, TooLarge, exchange
from .errors import sanitised
from .settings import Settings

__all__ = [
    "TERMINATION_LIMIT",
    "checkpoint_comment",
    "create_checkpoint_once",
    "create_new",
    "destroy_once",
    "terminate_session",
]

TERMINATION_LIMIT = 16 * 1024
#: Transport time a termination may spend on top of the grace period.
TERMINATION_SLACK = 5.0
_ID_LIMIT = 256
_KILL_STEPS = frozenset({"signal", "timeout", "exited", "killed"})


def _request(
    settings: Settings,
    operation: str,
    method: str,
    path: str,
    *,
    deadline: Deadline,
    limit: int,
    transport: Transport | None = None,
    **kwargs: Any,
) -> Answer:
    """One bounded exchange; failures become ``Unavailable("<operation>_...")`` (a
    transport failure's cause names the endpoint; expiry is the deadline's own error,
    ``"<operation>_timeout"`` for a deadline from :func:`_deadline`)."""
    url = settings.url(path)
    try:
        return exchange(
            method,
            url,
            headers=settings.headers,
            deadline=deadline,
            limit=limit,
            transport=transport,
            **kwargs,
        )
    except Failed as failed:
        raise Unavailable(reasons.transport_failed(operation)) from failed.cause
    except (Cut, TooLarge):
        raise Unavailable(reasons.unconfirmed(operation)) from None


def _deadline(operation: str, timeout: float) -> Deadline:
    """The operation's one deadline; its expiry is ``DeadlineExpired("<operation>_timeout")``."""
    return Deadline(timeout, reason=reasons.timed_out(operation))


def _events(body: bytes) -> list[dict[str, Any]] | None:
    """The NDJSON lines of ``body`` as objects; ``None`` if any line is not a JSON object."""
    events = []
    for line in body.split(b"\n"):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            return None
        if not isinstance(event, dict):
            return None
        events.append(event)
    return events


def _valid_id(value: object) -> bool:
    return isinstance(value, str) and 1 <= len(value.encode("utf-8")) <= _ID_LIMIT


# -- create_new --------------------------------------------------------------


def create_new(
    settings: Settings,
    name: str,
    *,
    timeout: float,
    wait_for_capacity: bool,
    transport: Transport | None = None,
) -> str:
    """Create ``name`` in one attempt; returns the provider's ``id`` (the instance id)."""
    deadline = _deadline("create", timeout)
    body = {
        "name": name,
        "wait_for_capacity": wait_for_capacity,
        "url_settings": {"auth": "public" if settings.public_urls else "sprite"},
    }
    answer = _request(
        settings,
        "create",
        "POST",
        "/v1/sprites",
        deadline=deadline,
        limit=BODY_LIMIT,
        transport=transport,
        json=body,
    )
    if answer.status == 409:
        raise AlreadyExists(Reason.SANDBOX, name=name)
    if not 200 <= answer.status < 300:
        raise sanitised(answer.status)
    try:
        created = json.loads(answer.body)
    except ValueError:
        raise Unavailable(Reason.CREATE_UNCONFIRMED) from None
    if not isinstance(created, dict) or created.get("name") != name:
        raise Unavailable(Reason.CREATE_UNCONFIRMED)
    instance_id = created.get("id")
    if not isinstance(instance_id, str) or not 1 <= len(instance_id) <= _ID_LIMIT:
        raise Unavailable(Reason.CREATE_UNCONFIRMED)
    return instance_id


# -- destroy_once ------------------------------------------------------------


def destroy_once(
    settings: Settings, name: str, *, timeout: float, transport: Transport | None = None
) -> None:
    """Delete ``name`` and confirm its absence with exactly one GET."""
    deadline = _deadline("delete", timeout)
    path = sprite_path(name)
    deleted = _request(
        settings, "delete", "DELETE", path, deadline=deadline, limit=BODY_LIMIT, transport=transport
    )
    if deleted.status == 404:
        return
    if deleted.status not in (200, 202, 204):
        raise Unavailable(Reason.DELETE_UNCONFIRMED)
    probe = _request(
        settings, "delete", "GET", path, deadline=deadline, limit=BODY_LIMIT, transport=transport
    )
    if probe.status != 404:
        raise Unavailable(Reason.DELETE_UNCONFIRMED)


# -- terminate_session -------------------------------------------------------


def terminate_session(
    settings: Settings,
    name: str,
    session_id: str,
    *,
    timeout_ms: int,
    force: bool,
    transport: Transport | None = None,
) -> None:
    """Signal the session's process group and require the provider's confirmation."""
    deadline = _deadline("termination", timeout_ms / 1000 + TERMINATION_SLACK)
    params = {"signal": "SIGKILL" if force else "SIGTERM", "timeout": f"{timeout_ms}ms"}
    answer = _request(
        settings,
        "termination",
        "POST",
        sprite_path(name, "exec", session_id, "kill"),
        deadline=deadline,
        limit=TERMINATION_LIMIT,
        transport=transport,
        params=params,
    )
    if answer.status == 410:
        return
    if answer.status == 404:
        if force and not _listed(settings, name, session_id, deadline, transport):
            raise Unavailable(Reason.TERMINATION_UNCONFIRMED)
        return
    if 200 <= answer.status < 300 and answer.status != 200:
        raise Unavailable(Reason.TERMINATION_UNCONFIRMED)
    if answer.status != 200:
        raise sanitised(answer.status)
    if not termination_confirmed(answer.body, force=force):
        raise Unavailable(Reason.TERMINATION_UNCONFIRMED)


def _listed(
    settings: Settings,
    name: str,
    session_id: str,
    deadline: Deadline,
    transport: Transport | None,
) -> bool:
    """Whether the sprite lists ``session_id`` (one confirming GET): a force kill's 404
    then means a session that existed and has ended, not an absent one (no such
    sprite lists nothing)."""
    answer = _request(
        settings,
        "termination",
        "GET",
        sprite_path(name, "exec"),
        deadline=deadline,
        limit=BODY_LIMIT,
        transport=transport,
    )
    if answer.status == 404:
        return False
    if answer.status != 200:
        raise sanitised(answer.status)
    try:
        listing = json.loads(answer.body)
    except ValueError:
        raise Unavailable(Reason.TERMINATION_UNCONFIRMED) from None
    entries = listing.get("sessions") if isinstance(listing, dict) else None
    return any(
        isinstance(entry, dict)
        and not isinstance(entry.get("id"), bool)
        and str(entry.get("id")) == session_id
        for entry in (entries if isinstance(entries, list) else ())
    )


def termination_confirmed(body: bytes, *, force: bool) -> bool:
    """Whether a kill stream proves the session ended (see the module docstring)."""
    events = _events(body)
    if not events:
        return False
    *steps, last = events
    code = last.get("exit_code")
    if last.get("type") != "complete" or isinstance(code, bool) or not isinstance(code, int):
        return False
    if not 0 <= code <= 255:
        return False
    kinds = [step.get("type") for step in steps]
    if any(kind not in _KILL_STEPS for kind in kinds):
        return False
    if not any(kind in ("exited", "killed") for kind in kinds):
        return False
    return not force or any(_is_sigkill(step) for step in steps)


def _is_sigkill(event: dict[str, Any]) -> bool:
    pid = event.get("pid")
    return (
        event.get("type") == "signal"
        and event.get("signal") == "SIGKILL"
        and isinstance(pid, int)
        and not isinstance(pid, bool)
        and pid > 0
    )


# -- create_checkpoint_once --------------------------------------------------


def checkpoint_comment(operation_id: str) -> str:
    """The comment that correlates a checkpoint with its operation."""
    return f"sandbox-operation:{operation_id}"


def create_checkpoint_once(
    settings: Settings,
    name: str,
    *,
    operation_id: str,
    timeout: float,
    transport: Transport | None = None,
) -> str:
    """Create one checkpoint and find exactly it in the listing; returns its id."""
    deadline = _deadline("checkpoint", timeout)
    comment = checkpoint_comment(operation_id)
    created = _request(
        settings,
        "checkpoint",
        "POST",
        sprite_path(name, "checkpoint"),
        deadline=deadline,
        limit=BODY_LIMIT,
        transport=transport,
        json={"comment": comment},
    )
    if created.status != 200 or not _checkpoint_completed(created.body):
        raise Unavailable(Reason.CHECKPOINT_UNCONFIRMED)
    budget = BODY_LIMIT - len(created.body)
    if budget <= 0:
        raise Unavailable(Reason.CHECKPOINT_UNCONFIRMED)
    listed = _request(
        settings,
        "checkpoint",
        "GET",
        sprite_path(name, "checkpoints"),
        deadline=deadline,
        limit=budget,
        transport=transport,
    )
    if listed.status != 200:
        raise Unavailable(Reason.CHECKPOINT_UNCONFIRMED)
    found = _correlated(listed.body, comment)
    if found is None:
        raise Unavailable(Reason.CHECKPOINT_UNCONFIRMED)
    return found


def _checkpoint_completed(body: bytes) -> bool:
    """``info`` events then exactly one final ``complete``; no ``error`` key anywhere."""
    events = _events(body)
    if not events:
        return False
    *progress, last = events
    for event in events:
        if "error" in event or not isinstance(event.get("data"), str):
            return False
    return last.get("type") == "complete" and all(e.get("type") == "info" for e in progress)


def _correlated(body: bytes, comment: str) -> str | None:
    """The id of the one listed checkpoint carrying ``comment`` (not ``Current``), or None."""
    try:
        listing = json.loads(body)
    except ValueError:
        return None
    if not isinstance(listing, list):
        return None
    matches = []
    for entry in listing:
        if not isinstance(entry, dict) or not _valid_id(entry.get("id")):
            return None
        if entry.get("comment") is not None and not isinstance(entry.get("comment"), str):
            return None
        if entry.get("comment") == comment:
            matches.append(entry["id"])
    if len(matches) != 1 or matches[0] == "Current":
        return None
    return str(matches[0])
