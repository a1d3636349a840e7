"""The emulated sandboxes: control-plane records plus each sandbox's files and processes.

:class:`World` is the one place that changes a sandbox's lifecycle (create,
pause, resume, kill, TTL expiry), so records, process tables and directories
stay in step. Methods that kill processes or remove directories block; the
HTTP handlers call them off the event loop.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

from .layout import SandboxLayout
from .processes import ProcessTable
from .state import ApiError, Clock, Registry, SandboxRecord

__all__ = ["DEFAULT_RESUME_TIMEOUT", "World"]

DEFAULT_RESUME_TIMEOUT = 300


class World:
    """All sandboxes of one emulator; thread-safe."""

    def __init__(self, root: Path, *, users: tuple[str, ...], seed: int | None = None,
                 isolated: bool = False) -> None:
        self.root = root
        self.users = users
        self.isolated = isolated
        self.clock = Clock()
        self.registry = Registry(self.clock, seed=seed)
        self._tables: dict[str, ProcessTable] = {}
        self._lock = threading.Lock()

    def create(self, body: Any, *, default_timeout: int) -> SandboxRecord:
        """Store a new running sandbox and lay out its directories."""
        record = self.registry.create(body, default_timeout=default_timeout)
        layout = SandboxLayout(self.root / record.sandbox_id, self.users,
                               isolated=self.isolated)
        with self._lock:
            self._tables[record.sandbox_id] = ProcessTable(layout)
        return record

    def table(self, sandbox_id: str) -> ProcessTable:
        """The process table of a live sandbox (KeyError if it is gone)."""
        with self._lock:
            return self._tables[sandbox_id]

    def pause(self, record: SandboxRecord) -> None:
        """Stop the sandbox's processes and mark it paused; 409 if it already is."""
        with self.registry.lock:
            if record.state == "paused":
                raise ApiError(409, f"sandbox {record.sandbox_id} is already paused")
            record.state = "paused"
            record.generation += 1
        self.table(record.sandbox_id).suspend_all()

    def resume(self, record: SandboxRecord, timeout: int | None) -> None:
        """Continue a paused sandbox's processes with a TTL of ``timeout`` seconds."""
        with self.registry.lock:
            record.state = "running"
            seconds = DEFAULT_RESUME_TIMEOUT if timeout is None else max(timeout, 0)
            record.end_at = self.clock.now() + seconds
        self.table(record.sandbox_id).resume_all()

    def kill(self, sandbox_id: str) -> None:
        """Forget the sandbox, kill its processes and remove its directory (blocking)."""
        self.registry.remove(sandbox_id)
        with self._lock:
            table = self._tables.pop(sandbox_id)
        table.terminate_all()
        shutil.rmtree(table.layout.root, ignore_errors=True)

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
