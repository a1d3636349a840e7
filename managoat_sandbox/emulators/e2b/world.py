"""The emulated sandboxes: control-plane records plus each sandbox's box and processes.

:class:`World` is the one place that changes a sandbox's lifecycle (create,
pause, resume, kill, TTL expiry), so records, process tables and boxes stay
in step. Each sandbox is one box (:mod:`.layout`); pausing suspends every
process in it, killing stops it and deletes its directory. Every lifecycle
method blocks (it talks to the box's agent); the HTTP handlers call them off
the event loop.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ..._engine import egress
from ..._engine.errors import EngineError
from .._fs import private_dirs
from .layout import SandboxBox
from .processes import ProcessTable
from .state import ALL_TRAFFIC, ApiError, Clock, Registry, SandboxRecord, is_ip_or_cidr

__all__ = ["DEFAULT_RESUME_TIMEOUT", "World"]

DEFAULT_RESUME_TIMEOUT = 300


class World:
    """All sandboxes of one emulator; thread-safe."""

    def __init__(self, root: Path, *, users: tuple[str, ...], seed: int | None = None) -> None:
        self.root = root
        self.users = users
        self.clock = Clock()
        self.registry = Registry(self.clock, seed=seed)
        self._tables: dict[str, ProcessTable] = {}
        self._lock = threading.Lock()

    def create(self, body: Any, *, default_timeout: int) -> SandboxRecord:
        """Store a new running sandbox and start its box; ApiError 500 if it cannot start."""
        record = self.registry.create(body, default_timeout=default_timeout)
        sandbox: SandboxBox | None = None
        try:
            private_dirs(self.root)
            sandbox = SandboxBox.create(
                self.root / record.sandbox_id, record.sandbox_id, self.users
            )
            policy = egress_policy(record.network)
            if policy.allow is not None:
                sandbox.box.set_policy(policy)
        except (OSError, EngineError) as error:
            self.registry.remove(record.sandbox_id)
            if sandbox is not None:
                sandbox.destroy()
            raise ApiError(500, f"cannot start sandbox {record.sandbox_id}: {error}") from None
        with self._lock:
            self._tables[record.sandbox_id] = ProcessTable(sandbox)
        return record

    def table(self, sandbox_id: str) -> ProcessTable:
        """The process table of a live sandbox (KeyError if it is gone)."""
        with self._lock:
            return self._tables[sandbox_id]

    def network(
        self, record: SandboxRecord, network: dict[str, Any], allow_internet_access: bool
    ) -> None:
        """Replace the sandbox's egress rules and put them in force (:func:`egress_policy`)."""
        with self.registry.lock:
            record.network = network
            record.allow_internet_access = allow_internet_access
        try:
            self.table(record.sandbox_id).sandbox.box.set_policy(egress_policy(network))
        except KeyError:
            raise ApiError(404, f"sandbox {record.sandbox_id} is gone") from None
        except (OSError, EngineError) as error:
            raise ApiError(500, f"cannot apply the network rules: {error}") from None

    def pause(self, record: SandboxRecord) -> None:
        """Suspend the sandbox's processes and mark it paused; 409 if it already is."""
        with self.registry.lock:
            if record.state == "paused":
                raise ApiError(409, f"sandbox {record.sandbox_id} is already paused")
            record.state = "paused"
            record.generation += 1
        try:
            self.table(record.sandbox_id).suspend_all()
        except EngineError as error:
            raise ApiError(500, f"cannot pause sandbox {record.sandbox_id}: {error}") from None

    def resume(self, record: SandboxRecord, timeout: int | None) -> None:
        """Continue a paused sandbox's processes with a TTL of ``timeout`` seconds."""
        with self.registry.lock:
            record.state = "running"
            seconds = DEFAULT_RESUME_TIMEOUT if timeout is None else max(timeout, 0)
            record.end_at = self.clock.now() + seconds
        try:
            self.table(record.sandbox_id).resume_all()
        except EngineError as error:
            raise ApiError(500, f"cannot resume sandbox {record.sandbox_id}: {error}") from None

    def kill(self, sandbox_id: str) -> None:
        """Forget the sandbox, stop its box (every process ends) and delete its directory."""
        self.registry.remove(sandbox_id)
        with self._lock:
            table = self._tables.pop(sandbox_id)
        table.sandbox.destroy()

    def expire(self, record: SandboxRecord) -> None:
        """The TTL ran out: pause the sandbox if it auto-pauses, else kill it (blocking)."""
        if record.auto_pause:
            if record.state == "running":
                self.pause(record)
        else:
            self.kill(record.sandbox_id)

    def sweep(self) -> None:
        """Apply every TTL that has run out (blocking)."""
        for record in self.registry.expired():
            try:
                self.expire(record)
            except (ApiError, KeyError):
                continue

    def close(self) -> None:
        """Kill every sandbox (blocking)."""
        for record in self.registry.all():
            try:
                self.kill(record.sandbox_id)
            except (ApiError, KeyError):
                continue


def egress_policy(network: dict[str, Any]) -> egress.Policy:
    """The engine's egress policy for E2B network rules, where they map onto one.

    ``denyOut`` holding ``0.0.0.0/0`` (also what ``allow_internet_access:
    false`` stores) with ``allowOut`` naming domains is an allow-list of those
    domains (``*.example.com`` for subdomains), an empty one when ``allowOut``
    names none. IP and CIDR rules have no counterpart: IP or CIDR entries in
    ``allowOut`` are then not reachable (stricter than E2B), and ``denyOut``
    without ``0.0.0.0/0`` leaves the engine's default (any public address;
    private, loopback and metadata addresses are always refused). Domains the
    engine cannot take as host names match nothing.
    """
    if ALL_TRAFFIC not in network.get("denyOut", []):
        return egress.Policy()
    allowed = []
    for entry in network.get("allowOut", []):
        if is_ip_or_cidr(entry):
            continue
        try:
            allowed.append(egress.check_domain(entry))
        except ValueError:
            continue
    return egress.Policy(allow=tuple(allowed))
