"""The control plane's sandbox records: validation, lifecycle, cursor listing.

A :class:`SandboxStore` holds every sandbox of the emulator's one organisation
and implements the rules of docs/protocols/daytona.md#control-plane: create with
name/label/snapshot validation, lookups by id then by name, soft delete that
renames to ``DESTROYED_<name>_<ms>``, start/stop/archive with the
"state change in progress" conflict, network-settings merging, and the
keyset (cursor) listing with the real default order ``lastActivityAt desc``.

Transitions are deterministic. By default each one completes inside the call
that asks for it. A *held* transition (``hold=True``) leaves the sandbox in
its intermediate state (``stopping``, ``starting``, ``archiving``,
``restoring``, ``creating`` or a lingering ``destroying`` row) with
``state != desiredState`` until :meth:`SandboxStore.finish` lands it; while it
is held, lifecycle calls answer 409 "Sandbox state change in progress".

Timestamps come from a logical clock that never repeats a value, so every
activity bump moves a sandbox strictly ahead in ``lastActivityAt`` order.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
import secrets
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs

from .._input import BadInput, load_json
from .shapes import ApiError, iso

__all__ = ["DEFAULT_SNAPSHOT", "Clock", "Sandbox", "SandboxStore"]

DEFAULT_SNAPSHOT = "daytonaio/sandbox:0.5.0"
ORGANIZATION_ID = "00000000-0000-4000-8000-00000000da17"
SORT_FIELDS = ("name", "cpu", "memoryGib", "diskGib", "lastActivityAt", "createdAt")
CONFLICT = "Sandbox state change in progress"
RESOURCE_FIELDS = ("cpu", "memory", "disk", "gpu", "gpuType")
_NAME_FORBIDDEN = re.compile(r"<[^>]*>|https?://|www\.|[\x00-\x1f\x7f]", re.IGNORECASE)
_DOMAIN = re.compile(r"^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$", re.IGNORECASE)
#: Where a held transition lands, by the intermediate state it holds.
LANDING = {
    "creating": "started",
    "starting": "started",
    "restoring": "started",
    "stopping": "stopped",
    "archiving": "archived",
    "destroying": "destroyed",
}


class Clock:
    """UTC timestamps that strictly increase (by at least 1 ms) between calls."""

    def __init__(self) -> None:
        self._last = datetime.fromtimestamp(0, tz=timezone.utc)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """A timestamp later than every one returned before."""
        with self._lock:
            wall = datetime.now(timezone.utc)
            moment = wall.replace(microsecond=wall.microsecond // 1000 * 1000)
            if moment <= self._last:
                moment = self._last + timedelta(milliseconds=1)
            self._last = moment
            return moment


@attrs.define
class Sandbox:
    """One sandbox row. ``pending`` marks a held transition (see the module docstring)."""

    id: str
    name: str
    labels: dict[str, str]
    env: dict[str, str]
    user: str
    snapshot: str
    public: bool
    network_block_all: bool
    network_allow_list: str | None
    domain_allow_list: str | None
    auto_stop: int
    auto_archive: int
    auto_delete: int
    target: str
    created_at: datetime
    updated_at: datetime
    last_activity_at: datetime
    state: str = "started"
    desired_state: str = "started"
    error_reason: str | None = None
    token: str = attrs.field(factory=lambda: secrets.token_urlsafe(24))
    cpu: int = 1
    memory: int = 1
    disk: int = 3
    gpu: int = 0
    #: Bumped on every start: a new daemon incarnation (sessions do not survive).
    generation: int = 0

    @property
    def transitioning(self) -> bool:
        """Whether a held transition is in progress."""
        return self.state in LANDING and self.state != self.desired_state

    def sort_value(self, field: str) -> str | int:
        """The value listing sorts on for ``field``."""
        values: dict[str, str | int] = {
            "name": self.name,
            "cpu": self.cpu,
            "memoryGib": self.memory,
            "diskGib": self.disk,
            "lastActivityAt": iso(self.last_activity_at),
            "createdAt": iso(self.created_at),
        }
        return values[field]

    def list_item(self, toolbox_url: str) -> dict[str, Any]:
        """The list item shape the SDK requires (docs/protocols/daytona.md#listing)."""
        return {
            "id": self.id,
            "organizationId": ORGANIZATION_ID,
            "name": self.name,
            "target": self.target,
            "user": self.user,
            "public": self.public,
            "networkBlockAll": self.network_block_all,
            "cpu": self.cpu,
            "gpu": self.gpu,
            "memory": self.memory,
            "disk": self.disk,
            "labels": dict(self.labels),
            "toolboxProxyUrl": toolbox_url,
            "kvm": False,
            "snapshot": self.snapshot,
            "state": self.state,
            "desiredState": self.desired_state,
            "errorReason": self.error_reason,
            "recoverable": False,
            "autoStopInterval": self.auto_stop,
            "autoArchiveInterval": self.auto_archive,
            "autoDeleteInterval": self.auto_delete,
            "backupState": "None",
            "createdAt": iso(self.created_at),
            "updatedAt": iso(self.updated_at),
            "lastActivityAt": iso(self.last_activity_at),
            "sandboxClass": "container",
            "daemonVersion": "v0.190.0",
            "runnerId": "emulator-runner",
            "volumes": [],
        }

    def to_json(self, toolbox_url: str) -> dict[str, Any]:
        """The full Sandbox DTO (docs/protocols/daytona.md#the-sandbox-object)."""
        body = self.list_item(toolbox_url)
        body.update(
            env=dict(self.env),
            networkAllowList=self.network_allow_list,
            domainAllowList=self.domain_allow_list,
        )
        return body


def _string_map(value: object, field: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ApiError(400, f"{field} must be an object of string values")
    return dict(value)


_BAD_ENV = "env: a name must be non-empty without '=' or NUL, a value without NUL"


def _environment(value: object) -> dict[str, str]:
    """A create's ``env``: names non-empty without ``=`` or NUL, values without NUL (what
    a process's environment can hold); ApiError 400 otherwise."""
    env = _string_map(value, "env")
    for name, text in env.items():
        if not name or "=" in name or "\0" in name or "\0" in text:
            raise ApiError(400, _BAD_ENV)
    return env


def _interval(body: Mapping[str, Any], field: str, default: int) -> int:
    value = body.get(field)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise ApiError(400, f"{field} must be an integer number")
    return value


def _cidr_list(value: str) -> str:
    entries = [part.strip() for part in value.split(",") if part.strip()]
    if len(entries) > 10:
        raise ApiError(400, "networkAllowList can contain at most 10 CIDR blocks")
    for entry in entries:
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ApiError(400, f"Invalid CIDR block: {entry}") from None
        if network.version != 4:
            raise ApiError(400, f"Invalid CIDR block: {entry}")
    return ",".join(entries)


def _domain_list(value: str) -> str:
    entries = [part.strip() for part in value.split(",") if part.strip()]
    if len(entries) > 10:
        raise ApiError(400, "domainAllowList can contain at most 10 domains")
    for entry in entries:
        if not _DOMAIN.match(entry):
            raise ApiError(400, f"Invalid domain: {entry}")
    return ",".join(entries)


def encode_cursor(value: str | int, sandbox_id: str) -> str:
    """The opaque keyset cursor: base64 of ``{"sortValue", "id"}``."""
    raw = json.dumps({"sortValue": value, "id": sandbox_id}, separators=(",", ":"))
    return base64.b64encode(raw.encode()).decode()


def decode_cursor(cursor: str) -> tuple[str | int, str]:
    """The (sort value, id) of a cursor; ApiError 400 if it is not one of ours."""
    try:
        record = load_json(base64.b64decode(cursor.encode(), validate=True))
        value, sandbox_id = record["sortValue"], record["id"]
    except (ValueError, binascii.Error, KeyError, TypeError) as error:
        raise ApiError(400, f"Invalid cursor provided: {error}") from None
    if not isinstance(value, (str, int)) or not isinstance(sandbox_id, str):
        raise ApiError(400, "Invalid cursor provided: malformed key")
    return value, sandbox_id


@attrs.define
class ListQuery:
    """The parsed query of ``GET /sandbox``."""

    limit: int = 100
    cursor: str | None = None
    labels: dict[str, str] = attrs.field(factory=dict)
    name: str | None = None
    id: str | None = None
    states: tuple[str, ...] = ()
    include_errored_deleted: bool = False
    sort: str = "lastActivityAt"
    order: str = "desc"

    @classmethod
    def parse(cls, query: Mapping[str, str], multi: Callable[[str], list[str]]) -> ListQuery:
        """Validate the query string as the API does (400 on a bad value)."""
        parsed = cls()
        if "limit" in query:
            try:
                parsed.limit = int(query["limit"])
            except ValueError:
                raise ApiError(400, "limit must be an integer number") from None
            if parsed.limit > 200:
                raise ApiError(400, "limit must not be greater than 200")
            if parsed.limit < 1:
                raise ApiError(400, "limit must not be less than 1")
        parsed.cursor = query.get("cursor") or None
        if "labels" in query:
            try:
                labels = load_json(query["labels"])
            except BadInput:
                raise ApiError(400, "Invalid labels JSON format") from None
            if not isinstance(labels, dict):
                raise ApiError(400, "Invalid labels JSON format")
            parsed.labels = {str(k): str(v) for k, v in labels.items()}
        parsed.name = query.get("name") or None
        parsed.id = query.get("id") or None
        states = tuple(multi("states") + multi("states[]"))
        if "destroyed" in states:
            raise ApiError(400, "each value in states must be one of the following values")
        parsed.states = states
        parsed.include_errored_deleted = query.get("includeErroredDeleted") == "true"
        parsed.sort = query.get("sort", "lastActivityAt")
        if parsed.sort not in SORT_FIELDS:
            allowed = ", ".join(SORT_FIELDS)
            raise ApiError(400, f"sort must be one of the following values: {allowed}")
        parsed.order = query.get("order", "desc")
        if parsed.order not in ("asc", "desc"):
            raise ApiError(400, "order must be one of the following values: asc, desc")
        return parsed

    def admits(self, sandbox: Sandbox) -> bool:
        """Whether ``sandbox`` passes the filters."""
        if any(sandbox.labels.get(k) != v for k, v in self.labels.items()):
            return False
        if self.name and not sandbox.name.lower().startswith(self.name.lower()):
            return False
        if self.id and not sandbox.id.lower().startswith(self.id.lower()):
            return False
        if self.states and sandbox.state not in self.states:
            return False
        errored_deleted = sandbox.desired_state == "destroyed" and sandbox.state in (
            "error",
            "build_failed",
        )
        return self.include_errored_deleted or not errored_deleted


class SandboxStore:
    """Every sandbox of the organisation; thread-safe (one lock, short sections)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or Clock()
        self._lock = threading.RLock()
        self._rows: dict[str, Sandbox] = {}
        #: Snapshot names create accepts; an absent ``snapshot`` means the first.
        self.snapshots: list[str] = [DEFAULT_SNAPSHOT]
        #: Organisation under tier network restrictions (network-settings → 400).
        self.network_restricted = False

    # -- lookups -------------------------------------------------------------------

    def find(self, id_or_name: str) -> Sandbox:
        """By id first, then by name; ApiError 404 like the API."""
        with self._lock:
            row = self._rows.get(id_or_name) or next(
                (r for r in self._rows.values() if r.name == id_or_name), None
            )
            if row is None or (
                row.desired_state == "destroyed" and row.state in ("error", "build_failed")
            ):
                raise ApiError(404, f"Sandbox with ID or name {id_or_name} not found")
            return row

    def by_id(self, sandbox_id: str) -> Sandbox | None:
        """The row with this exact id (the toolbox proxy resolves ids only)."""
        with self._lock:
            return self._rows.get(sandbox_id)

    def all(self) -> list[Sandbox]:
        """Every row, in creation order."""
        with self._lock:
            return list(self._rows.values())

    def touch(self, sandbox_id: str) -> None:
        """Bump ``lastActivityAt`` (what every toolbox call through the proxy does)."""
        with self._lock:
            row = self._rows.get(sandbox_id)
            if row is not None:
                row.last_activity_at = self.clock.now()

    # -- create / delete -------------------------------------------------------------

    def create(self, body: Mapping[str, Any], *, hold: bool = False) -> Sandbox:
        """Validate and insert a sandbox; it is ``started`` unless ``hold``."""
        name = body.get("name")
        if name is not None and (not isinstance(name, str) or _NAME_FORBIDDEN.search(name)):
            raise ApiError(
                400, "Sandbox name must not contain HTML tags, URLs or control characters"
            )
        snapshot = body.get("snapshot")
        if snapshot is not None and snapshot not in self.snapshots:
            raise ApiError(
                400, f"Snapshot {snapshot} not found. Did you add it through the Daytona Dashboard?"
            )
        if any(body.get(f) is not None for f in RESOURCE_FIELDS) and body.get("buildInfo") is None:
            raise ApiError(400, "Cannot specify Sandbox resources when using a snapshot")
        auto_stop = _interval(body, "autoStopInterval", 15)
        if auto_stop < 0:
            raise ApiError(400, "autoStopInterval must not be less than 0")
        auto_archive = _interval(body, "autoArchiveInterval", 10080)
        auto_archive = 43200 if auto_archive in (0,) or auto_archive > 43200 else auto_archive
        network = self._network_fields(body, create=True)
        now = self.clock.now()
        sandbox_id = str(uuid.uuid4())
        row = Sandbox(
            id=sandbox_id,
            name=name or sandbox_id,
            labels=_string_map(body.get("labels"), "labels"),
            env=_environment(body.get("env")),
            user=body.get("user") or "daytona",
            snapshot=snapshot or self.snapshots[0],
            public=bool(body.get("public", False)),
            network_block_all=bool(network.get("networkBlockAll", False)),
            network_allow_list=network.get("networkAllowList"),
            domain_allow_list=network.get("domainAllowList"),
            auto_stop=auto_stop,
            auto_archive=auto_archive,
            auto_delete=_interval(body, "autoDeleteInterval", -1),
            target=str(body.get("target") or "us"),
            created_at=now,
            updated_at=now,
            last_activity_at=now,
            state="creating" if hold else "started",
        )
        with self._lock:
            if any(r.name == row.name for r in self._rows.values()):
                raise ApiError(409, f"Sandbox with name {row.name} already exists")
            self._rows[row.id] = row
        return row

    def fail(self, sandbox: Sandbox, reason: str) -> None:
        """Put a sandbox in ``error`` with ``reason`` (docs/protocols/daytona.md#create)."""
        with self._lock:
            sandbox.state, sandbox.error_reason = "error", reason
            sandbox.updated_at = self.clock.now()

    def delete(self, id_or_name: str, *, hold: bool = False) -> Sandbox:
        """Soft delete: rename to ``DESTROYED_<name>_<ms>``; the row is gone unless ``hold``."""
        with self._lock:
            row = self.find(id_or_name)
            if row.transitioning:
                raise ApiError(409, CONFLICT)
            now = self.clock.now()
            row.name = f"DESTROYED_{row.name}_{int(now.timestamp() * 1000)}"
            row.desired_state, row.state, row.updated_at = "destroyed", "destroying", now
            if not hold:
                self._land(row)
            return row

    def remove(self, sandbox_id: str) -> None:
        """Drop a row outright (the runner finished destroying it)."""
        with self._lock:
            self._rows.pop(sandbox_id, None)

    # -- lifecycle -------------------------------------------------------------------

    def start(self, id_or_name: str, *, hold: bool = False) -> Sandbox:
        """Start a stopped/archived sandbox (a no-op when started); a fresh preview token."""
        with self._lock:
            row = self.find(id_or_name)
            if row.transitioning:
                raise ApiError(409, CONFLICT)
            if row.state == "started":
                return row
            if row.state == "error":
                raise ApiError(400, "Sandbox is in an errored state")
            if row.state not in ("stopped", "archived"):
                raise ApiError(400, "Sandbox is not in valid state")
            row.state = "restoring" if row.state == "archived" else "starting"
            row.desired_state = "started"
            row.token = secrets.token_urlsafe(24)
            row.generation += 1
            row.updated_at = self.clock.now()
            if not hold:
                self._land(row)
            return row

    def stop(self, id_or_name: str, *, hold: bool = False) -> Sandbox:
        """Stop a started sandbox; an ephemeral one (autoDelete 0) is deleted instead."""
        with self._lock:
            row = self.find(id_or_name)
            if row.transitioning:
                raise ApiError(409, CONFLICT)
            if row.state not in ("started", "paused"):
                raise ApiError(400, "Sandbox is not in a stoppable state")
            if row.auto_delete == 0:
                return self.delete(row.id, hold=hold)
            row.state, row.desired_state = "stopping", "stopped"
            row.updated_at = self.clock.now()
            if not hold:
                self._land(row)
            return row

    def archive(self, id_or_name: str, *, hold: bool = False) -> Sandbox:
        """Archive a stopped sandbox."""
        with self._lock:
            row = self.find(id_or_name)
            if row.transitioning:
                raise ApiError(409, CONFLICT)
            if row.auto_delete == 0:
                raise ApiError(400, "Ephemeral sandboxes cannot be archived")
            if row.state != "stopped":
                raise ApiError(400, "Sandbox is not in a valid state to be archived")
            row.state, row.desired_state = "archiving", "archived"
            row.updated_at = self.clock.now()
            if not hold:
                self._land(row)
            return row

    def finish(self, id_or_name: str | None = None) -> list[Sandbox]:
        """Land held transitions (of one sandbox, or all); returns the rows landed."""
        with self._lock:
            rows = [self.find(id_or_name)] if id_or_name else list(self._rows.values())
            landed = [row for row in rows if row.transitioning]
            for row in landed:
                self._land(row)
            return landed

    def _land(self, row: Sandbox) -> None:
        target = LANDING[row.state]
        if target == "destroyed":
            self._rows.pop(row.id, None)
            row.state = "destroyed"
        else:
            row.state = target
        row.updated_at = self.clock.now()

    # -- settings ------------------------------------------------------------------

    def update(self, id_or_name: str, **fields: Any) -> Sandbox:
        """Set plain attributes (labels, public, intervals)."""
        with self._lock:
            row = self.find(id_or_name)
            for key, value in fields.items():
                setattr(row, key, value)
            row.updated_at = self.clock.now()
            return row

    def network_settings(self, id_or_name: str, body: Mapping[str, Any]) -> Sandbox:
        """Apply ``POST …/network-settings`` (docs/protocols/daytona.md#network-settings)."""
        with self._lock:
            row = self.find(id_or_name)
            fields = self._network_fields(body, create=False)
            if not fields:
                raise ApiError(
                    400,
                    "At least one of networkBlockAll, networkAllowList or "
                    "domainAllowList must be provided",
                )
            if "domainAllowList" in fields:
                row.domain_allow_list = fields["domainAllowList"] or None
            if fields.get("networkBlockAll") is True:
                row.network_block_all, row.network_allow_list = True, None
            elif fields.get("networkAllowList"):
                row.network_block_all = False
                row.network_allow_list = fields["networkAllowList"]
            elif fields.get("networkBlockAll") is False:
                row.network_block_all, row.network_allow_list = False, None
            row.updated_at = self.clock.now()
            return row

    def _network_fields(self, body: Mapping[str, Any], *, create: bool) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        block = body.get("networkBlockAll")
        if block is not None:
            if not isinstance(block, bool):
                raise ApiError(400, "networkBlockAll must be a boolean value")
            fields["networkBlockAll"] = block
        for key, check in (("networkAllowList", _cidr_list), ("domainAllowList", _domain_list)):
            value = body.get(key)
            if value is None:
                continue
            if not isinstance(value, str):
                raise ApiError(400, f"{key} must be a string")
            fields[key] = check(value)
        if (
            fields
            and self.network_restricted
            and not (create and not body.get("networkBlockAll") and len(fields) == 1)
        ):
            raise ApiError(
                400,
                "Network access is restricted and cannot be overridden at the "
                "sandbox level. See https://www.daytona.io/docs/network-limits",
            )
        return fields

    # -- listing -------------------------------------------------------------------

    def page(self, query: ListQuery) -> tuple[list[Sandbox], str | None]:
        """One keyset page: the rows after ``query.cursor`` and the next cursor (or None)."""
        after = decode_cursor(query.cursor) if query.cursor else None
        descending = query.order == "desc"
        with self._lock:
            rows = [r for r in self._rows.values() if query.admits(r)]
            keyed = sorted(
                ((r.sort_value(query.sort), r.id, r) for r in rows),
                key=lambda entry: (entry[0], entry[1]),
                reverse=descending,
            )
        if after is not None:
            try:
                keyed = [
                    entry
                    for entry in keyed
                    if ((entry[0], entry[1]) < after) == descending
                    and (entry[0], entry[1]) != after
                ]
            except TypeError:
                raise ApiError(400, "Invalid cursor provided: wrong key type") from None
        chunk = keyed[: query.limit]
        more = len(keyed) > query.limit
        next_cursor = encode_cursor(chunk[-1][0], chunk[-1][1]) if more and chunk else None
        return [entry[2] for entry in chunk], next_cursor

    def offset_page(self, query: ListQuery, page: int) -> tuple[list[Sandbox], int]:
        """The deprecated ``/sandbox/paginated`` page (1-based) and the total count."""
        with self._lock:
            rows = [r for r in self._rows.values() if query.admits(r)]
        rows.sort(key=lambda r: (r.sort_value(query.sort), r.id), reverse=query.order == "desc")
        start = (page - 1) * query.limit
        return rows[start : start + query.limit], len(rows)


def label_ops(ops: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Validate listing-mutation ops (``create``/``delete``/``touch``/``rename_to_destroyed``)."""
    known = {"create", "delete", "touch", "rename_to_destroyed"}
    for op, _ in ops:
        if op not in known:
            raise ValueError(f"unknown listing mutation {op!r}; known: {sorted(known)}")
    return list(ops)
