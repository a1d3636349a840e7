"""The control plane's state: sandbox records, the injectable clock, listings, validation.

Pure bookkeeping, no processes and no HTTP: the emulator drives processes and
turns :class:`ApiError` into the API's ``{"code", "message"}`` answers.
Everything here is guarded by :class:`Registry`'s lock, so the aiohttp thread
and a test thread (``emulator.expire(...)``) can both use it.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import math
import random
import secrets
import string
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .._access import credential_matches

__all__ = [
    "ALL_TRAFFIC",
    "CLIENT_ID",
    "ENVD_VERSION",
    "ApiError",
    "Clock",
    "Listing",
    "Registry",
    "SandboxRecord",
    "is_ip_or_cidr",
    "parse_metadata_filter",
    "validate_network",
]

CLIENT_ID = "6532622b"
ENVD_VERSION = "0.6.13"
ALL_TRAFFIC = "0.0.0.0/0"
MAX_TIMEOUT_S = 24 * 3600
MAX_LIMIT = 100
_ID_ALPHABET = string.ascii_lowercase + string.digits


class ApiError(Exception):
    """A control-plane refusal: answered as ``{"code": status, "message": message}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


#: The most one :meth:`Clock.advance` moves the clock (ten years), and the most the
#: clock may run ahead of the wall clock in all (a hundred years).
MAX_ADVANCE = 10 * 365 * 86400.0
MAX_OFFSET = 100 * 365 * 86400.0


class Clock:
    """Wall-clock seconds plus an offset that tests move with :meth:`advance`."""

    def __init__(self) -> None:
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        """Seconds since the epoch, as the emulator sees them."""
        with self._lock:
            return time.time() + self._offset

    def advance(self, seconds: float) -> None:
        """Move the emulator's time forward by ``seconds``: ValueError unless it is a
        finite number from 0 to :data:`MAX_ADVANCE` that keeps the offset within
        :data:`MAX_OFFSET` (the clock is unchanged then)."""
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, (int, float))
            or not (math.isfinite(seconds) and 0 <= seconds <= MAX_ADVANCE)
        ):
            raise ValueError(f"advance: a finite number of seconds from 0 to {MAX_ADVANCE:g}")
        with self._lock:
            if self._offset + seconds > MAX_OFFSET:
                raise ValueError(f"advance: the clock may run at most {MAX_OFFSET:g} s ahead")
            self._offset += seconds


def rfc3339(seconds: float) -> str:
    """``2026-01-02T03:04:05.123456Z``: microseconds, the precision the API reports."""
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> float:
    """The instant an ISO 8601 / RFC 3339 time names, to the microsecond (digits past
    the sixth are dropped); ValueError if it is not one.

    Two texts naming the same microsecond give the same float, and
    ``parse_time(rfc3339(parse_time(t))) == parse_time(t)``.
    """
    return datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00")).timestamp()


def as_reported(seconds: float) -> float:
    """``seconds`` cut to the precision :func:`rfc3339` reports: a time kept this way
    compares with a time a client read from an answer exactly as the client expects."""
    return parse_time(rfc3339(seconds))


@dataclass
class SandboxRecord:
    """One sandbox as the control plane knows it.

    ``generation`` changes whenever the sandbox stops serving envd (pause,
    kill), so that open streams notice and end.
    """

    sandbox_id: str
    template_id: str
    alias: str | None
    metadata: dict[str, str]
    env_vars: dict[str, str]
    started_at: float
    end_at: float
    auto_pause: bool
    auto_resume: bool
    access_token: str = field(repr=False)
    #: Handed out while public traffic is off (``network.allowPublicTraffic`` false).
    traffic_token: str = field(repr=False)
    network: dict[str, Any] = field(default_factory=dict)
    allow_internet_access: bool = True
    state: str = "running"
    gone: bool = False
    generation: int = 0

    def listed(self) -> dict[str, Any]:
        """The ``ListedSandbox`` shape (no token)."""
        item: dict[str, Any] = {
            "templateID": self.template_id,
            "sandboxID": self.sandbox_id,
            "clientID": CLIENT_ID,
            "startedAt": rfc3339(self.started_at),
            "endAt": rfc3339(self.end_at),
            "cpuCount": 2,
            "memoryMB": 512,
            "diskSizeMB": 2048,
            "metadata": dict(self.metadata),
            "state": self.state,
            "envdVersion": ENVD_VERSION,
            "volumeMounts": [],
        }
        if self.alias is not None:
            item["alias"] = self.alias
        return item

    def created(self, domain: str | None) -> dict[str, Any]:
        """The ``Sandbox`` shape returned by create and connect (with the token)."""
        item: dict[str, Any] = {
            "templateID": self.template_id,
            "sandboxID": self.sandbox_id,
            "clientID": CLIENT_ID,
            "envdVersion": ENVD_VERSION,
            "envdAccessToken": self.access_token,
            "trafficAccessToken": self.traffic_access_token(),
            "domain": domain,
        }
        if self.alias is not None:
            item["alias"] = self.alias
        return item

    def traffic_access_token(self) -> str | None:
        """The token the sandbox's URLs require, or None while they accept anyone
        (``allowPublicTraffic`` absent or true)."""
        return self.traffic_token if self.network.get("allowPublicTraffic") is False else None

    def detail(self, domain: str | None) -> dict[str, Any]:
        """The ``SandboxDetail`` shape of ``GET /sandboxes/{id}`` (with the token)."""
        item = self.listed()
        item.update(
            envdAccessToken=self.access_token,
            domain=domain,
            allowInternetAccess=self.allow_internet_access,
            network=dict(self.network),
            lifecycle={
                "autoResume": self.auto_resume,
                "onTimeout": "pause" if self.auto_pause else "kill",
            },
        )
        return item


def _strings(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ApiError(400, f"{what} must be an object of strings")
    return dict(value)


def is_ip_or_cidr(entry: str) -> bool:
    """Whether ``entry`` is an IP address or a CIDR block (else E2B takes it as a domain)."""
    try:
        ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return False
    return True


def validate_network(config: Any) -> dict[str, Any]:
    """Check egress rules as the API does (docs/protocols/e2b.md#egress-rules); the stored config.

    ``denyOut`` entries must be IPs or CIDRs; ``allowOut`` may hold domains,
    but then ``denyOut`` must contain ``0.0.0.0/0``. Fields left out are
    cleared (``PUT /network`` replaces the whole configuration).
    """
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise ApiError(400, "network must be an object")
    stored: dict[str, Any] = {}
    for key in ("allowOut", "denyOut"):
        entries = config.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
            raise ApiError(400, f"{key} must be a list of strings")
        stored[key] = list(entries)
    for entry in stored.get("denyOut", []):
        if not is_ip_or_cidr(entry):
            raise ApiError(400, f"invalid denied CIDR {entry}: only IPs and CIDRs are allowed")
    domains = [e for e in stored.get("allowOut", []) if not is_ip_or_cidr(e)]
    if domains and ALL_TRAFFIC not in stored.get("denyOut", []):
        raise ApiError(
            400,
            "When specifying allowed domains in allow out, you must include 'ALL_TRAFFIC' "
            "in deny out to block all other traffic.",
        )
    public = config.get("allowPublicTraffic")
    if public is not None and not isinstance(public, bool):
        raise ApiError(400, "allowPublicTraffic must be a boolean")
    for key in ("allowPublicTraffic", "maskRequestHost"):
        if config.get(key) is not None:
            stored[key] = config[key]
    return stored


def parse_metadata_filter(value: str) -> dict[str, str]:
    """Decode the ``metadata`` listing parameter with the server's extra unescaping.

    ``value`` is the query parameter already decoded once; the server unescapes
    the whole string again, splits it on ``&`` and ``=``, and unescapes each
    key and value a third time (docs/protocols/e2b.md#metadata-escaping).
    """
    pairs: dict[str, str] = {}
    text = urllib.parse.unquote(value)
    for part in text.split("&"):
        if not part:
            continue
        key, sep, val = part.partition("=")
        if not sep:
            raise ApiError(400, f"invalid metadata filter {part!r}")
        pairs[urllib.parse.unquote(key)] = urllib.parse.unquote(val)
    return pairs


def _cursor(record: SandboxRecord, ascending: bool) -> str:
    raw = f"{rfc3339(record.started_at)}__{record.sandbox_id}" + ("__asc" if ascending else "")
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _parse_cursor(token: str, ascending: bool) -> tuple[str, str]:
    try:
        raw = base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ApiError(400, "Invalid next token") from None
    parts = raw.split("__")
    if len(parts) == 3 and parts[2] == "asc":
        if not ascending:
            raise ApiError(400, "Invalid next token")
        parts = parts[:2]
    elif ascending:
        raise ApiError(400, "Invalid next token")
    if len(parts) != 2 or not parts[1]:
        raise ApiError(400, "Invalid next token")
    try:
        datetime.strptime(parts[0], "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        raise ApiError(400, "Invalid next token") from None
    return parts[0], parts[1]


@dataclass(frozen=True)
class Listing:
    """One page of a v2 listing and the headers that go with it."""

    items: list[dict[str, Any]]
    next_token: str | None
    total_running: int | None


class Registry:
    """The sandboxes of one emulator, keyed by ID; thread-safe."""

    def __init__(self, clock: Clock, *, seed: int | None = None) -> None:
        self.clock = clock
        self._random = random.Random(seed)
        self._lock = threading.RLock()
        self._records: dict[str, SandboxRecord] = {}
        #: Every (access, traffic) token pair issued, the gone sandboxes' too.
        self._issued: list[tuple[str, str]] = []

    @property
    def lock(self) -> threading.RLock:
        """The lock guarding every record (held by callers that mutate one)."""
        return self._lock

    def _new_id(self) -> str:
        while True:
            candidate = "i" + "".join(self._random.choice(_ID_ALPHABET) for _ in range(20))
            if candidate not in self._records:
                return candidate

    def create(self, body: Any, *, default_timeout: int) -> SandboxRecord:
        """Validate a ``NewSandbox`` body and store a running sandbox."""
        if not isinstance(body, dict):
            raise ApiError(400, "request body must be a JSON object")
        template = body.get("templateID")
        if not isinstance(template, str) or not template:
            raise ApiError(400, "templateID is required")
        timeout = body.get("timeout", default_timeout)
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0:
            raise ApiError(400, "timeout must be a positive integer number of seconds")
        if timeout > MAX_TIMEOUT_S:
            raise ApiError(400, "Max instance length exceeded")
        auto_pause = body.get("autoPause", False)
        if not isinstance(auto_pause, bool):
            raise ApiError(400, "autoPause must be a boolean")
        if body.get("autoPauseMemory") is False and not auto_pause:
            raise ApiError(400, "autoPauseMemory can only be set when autoPause is enabled")
        resume = body.get("autoResume")
        auto_resume = isinstance(resume, dict) and resume.get("enabled") is True
        network = validate_network(body.get("network"))
        internet = body.get("allow_internet_access", True)
        if internet is False:
            network.setdefault("denyOut", [ALL_TRAFFIC])
        name = template.partition(":")[0]
        with self._lock:
            now = as_reported(self.clock.now())
            record = SandboxRecord(
                sandbox_id=self._new_id(),
                template_id=name,
                alias=name,
                metadata=_strings(body.get("metadata"), "metadata"),
                env_vars=_strings(body.get("envVars"), "envVars"),
                started_at=now,
                end_at=now + timeout,
                auto_pause=auto_pause,
                auto_resume=auto_resume,
                access_token=secrets.token_urlsafe(24),
                traffic_token=secrets.token_urlsafe(24),
                network=network,
                allow_internet_access=internet is not False,
            )
            self._records[record.sandbox_id] = record
            self._issued.append((record.access_token, record.traffic_token))
            return record

    def get(self, sandbox_id: str) -> SandboxRecord:
        """The live record, or ApiError 404."""
        with self._lock:
            record = self._records.get(sandbox_id)
            if record is None:
                raise ApiError(
                    404, f"sandbox \"{sandbox_id}\" doesn't exist or you don't have access to it"
                )
            return record

    def find(self, sandbox_id: str) -> SandboxRecord | None:
        """The live record or None."""
        with self._lock:
            return self._records.get(sandbox_id)

    def remove(self, sandbox_id: str) -> SandboxRecord:
        """Forget a sandbox (marked gone); ApiError 404 if unknown."""
        with self._lock:
            record = self.get(sandbox_id)
            del self._records[sandbox_id]
            record.gone = True
            record.generation += 1
            return record

    def issued_tokens(self) -> list[str]:
        """Every access and traffic token issued so far, the gone sandboxes' too."""
        with self._lock:
            return [token for pair in self._issued for token in pair]

    def issued_access_token(self, given: str | None) -> bool:
        """Whether ``given`` is an access token issued to a sandbox, live or gone
        (compared in constant time)."""
        with self._lock:
            tokens = [access for access, _ in self._issued]
        return any(credential_matches(given, token) for token in tokens)

    def all(self) -> list[SandboxRecord]:
        """Every live record."""
        with self._lock:
            return list(self._records.values())

    def expired(self) -> list[SandboxRecord]:
        """Running sandboxes whose TTL has passed."""
        now = self.clock.now()
        with self._lock:
            return [r for r in self._records.values() if r.state == "running" and now > r.end_at]

    def list_v2(self, query: Mapping[str, str], *, page_size: int | None = None) -> Listing:
        """One page of ``GET /v2/sandboxes`` (docs/protocols/e2b.md#listing-sandboxes).

        ``startedAfter`` keeps the sandboxes started at or after that time: a
        sandbox's own reported ``startedAt`` lists it (both are compared at the
        reported microsecond precision).
        """
        states = self._states(query.get("state"))
        wanted = parse_metadata_filter(query["metadata"]) if query.get("metadata") else {}
        order = query.get("order", "desc")
        if order not in ("asc", "desc"):
            raise ApiError(400, f"invalid order {order!r}")
        ascending = order == "asc"
        limit = self._limit(query.get("limit"))
        if page_size is not None:
            limit = page_size
        started_after = self._time(query.get("startedAfter"))
        template = query.get("template")
        with self._lock:
            records = [
                r
                for r in self._records.values()
                if r.state in states
                and _matches(r.metadata, wanted)
                and (started_after is None or r.started_at >= started_after)
                and (template is None or template in (r.template_id, r.alias))
            ]
            running = sum(1 for r in self._records.values() if r.state == "running")
        records.sort(key=lambda r: r.sandbox_id)
        records.sort(key=lambda r: r.started_at, reverse=not ascending)
        token = query.get("nextToken")
        if token:
            stamp, last_id = _parse_cursor(token, ascending)
            records = [r for r in records if _after(r, stamp, last_id, ascending)]
        page, rest = records[:limit], records[limit:]
        next_token = _cursor(page[-1], ascending) if rest and page else None
        return Listing(
            [r.listed() for r in page], next_token, running if "running" in states else None
        )

    def list_v1(self, query: Mapping[str, str]) -> list[dict[str, Any]]:
        """``GET /sandboxes``: every running sandbox matching the metadata filter."""
        wanted = parse_metadata_filter(query["metadata"]) if query.get("metadata") else {}
        with self._lock:
            records = [
                r
                for r in self._records.values()
                if r.state == "running" and _matches(r.metadata, wanted)
            ]
        records.sort(key=lambda r: (-r.started_at, r.sandbox_id))
        return [r.listed() for r in records]

    @staticmethod
    def _states(value: str | None) -> frozenset[str]:
        if not value:
            return frozenset({"running", "paused"})
        states = frozenset(s.strip() for s in value.split(",") if s.strip())
        unknown = states - {"running", "paused"}
        if unknown or not states:
            raise ApiError(400, f"invalid state filter {value!r}")
        return states

    @staticmethod
    def _limit(value: str | None) -> int:
        if value is None:
            return MAX_LIMIT
        try:
            limit = int(value)
        except ValueError:
            raise ApiError(400, f"invalid limit {value!r}") from None
        return min(max(limit, 1), MAX_LIMIT)

    @staticmethod
    def _time(value: str | None) -> float | None:
        if not value:
            return None
        try:
            return parse_time(value)
        except ValueError:
            raise ApiError(400, f"invalid startedAfter {value!r}") from None


def _matches(metadata: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    if not wanted:
        return True
    return bool(metadata) and all(metadata.get(k) == v for k, v in wanted.items())


def _after(record: SandboxRecord, stamp: str, last_id: str, ascending: bool) -> bool:
    mine = rfc3339(record.started_at)
    if mine == stamp:
        return record.sandbox_id > last_id
    return mine > stamp if ascending else mine < stamp
