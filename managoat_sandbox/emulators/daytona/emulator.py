"""``DaytonaEmulator``: the control plane and the toolbox on one local port.

Routes: ``/api/…`` (control plane) and ``/toolbox/{sandboxId}/…`` (proxy and
daemon folded together); every sandbox's ``toolboxProxyUrl`` is
``<base_url>/toolbox``, so the official SDK and our adapter reach the toolbox
exactly as they do in the cloud. Auth is ``Authorization: Bearer <key>``
(the toolbox also takes the sandbox's ``X-Daytona-Preview-Token``); a missing
or wrong key gets the API's Nest-shaped 401 (the daemon shape on ``/toolbox``).

Each sandbox is one box (:mod:`.boxes`) in ``<workdir>/sandboxes/<id>/``:
its commands run inside it — in their own namespaces, seeing only the
sandbox's files and processes, when the host can isolate them — as the
sandbox's user (``daytona``, home ``/home/daytona``: the work dir, ``HOME``,
and where relative file paths land). Every path the API names is a path
inside the sandbox, reached from the emulator through :mod:`.files` only.
The files survive stop/start; every process ends on stop (a new daemon
incarnation starts on the next start), and delete removes the box.

Fault injection (each method documents its fault; all go through
:attr:`faults`, so the HTTP control API ``POST /_emulator/faults`` (behind the
API key) can add them too with the same ``kind`` names):

* :meth:`hold_transitions` / :meth:`finish_transitions` — a controllable
  "transition in progress" window (409 "Sandbox state change in progress");
* :meth:`fail_next_create`, :meth:`drop_next_create_response`;
* :meth:`rate_limit` — 429 with the real suffixed headers;
* :meth:`unavailable` — 503 as JSON or as a load balancer's text;
* :meth:`drop_connections` — reset before any answer;
* :meth:`close_log_stream_early` — a follow that ends (Close 1000) without an exit;
* :meth:`reset_log_stream` — a follow reset (TCP RST) mid-stream;
* :meth:`cut_log_follows` — the follows open now end (Close 1000 or RST) mid-stream;
* :meth:`serve_stale_log_prefix` — a log snapshot that is only a prefix (re-reads
  then duplicate bytes for a client that does not count what it has seen);
* :meth:`cut_log_reads` — a log snapshot cut short of its ``Content-Length`` by a
  close or a reset;
* :meth:`endless_listing` — a listing whose every page names a next cursor;
* :meth:`mutate_listing` — a listing that changes while it is walked.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, ClassVar

import attrs
from aiohttp import web

from managoat_sandbox._engine import trees
from managoat_sandbox._engine.box import Box

from .._access import credential_matches
from .._blocking import run_blocking
from .._server import Emulator
from . import boxes
from .api import ApiRoutes
from .daemon import PERL, Daemon
from .sandboxes import Sandbox, SandboxStore, encode_cursor, label_ops
from .shapes import ApiError, DaemonError, api_error_response, daemon_error_response, iso
from .toolbox import ToolboxRoutes

__all__ = ["DaytonaEmulator"]


@attrs.define
class _ListMutation:
    after_page: int
    ops: list[tuple[str, str]]
    served: int = 0


class DaytonaEmulator(Emulator):
    """A local Daytona: ``/api`` plus the toolbox, real processes, injectable faults."""

    provider: ClassVar[str] = "daytona"
    credential_env: ClassVar[str] = "DAYTONA_API_KEY"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.store = SandboxStore()
        #: Serve ``GET /sandbox`` as the legacy bare array (< v0.180).
        self.legacy_list = False
        #: Seconds a log follow stays open after the exit code is recorded (~1 s live).
        self.log_idle_close = 1.0
        #: Emulate the newer daemon whose EXIT trap records ``exit N``
        #: (docs/protocols/daytona.md#exit-in-a-sourced-script).
        self.daemon_exit_trap = False
        #: The perl the daemon's line readers run with (None: the shell's ``read``,
        #: correct but slow); applies to daemons started from now on.
        self.perl: str | None = PERL
        #: Bumped by :meth:`cut_log_follows`; a follow opened before a bump ends.
        self.follow_cuts = 0
        #: How the last :meth:`cut_log_follows` ended them: "close" or "reset".
        self.follow_cut_mode = "close"
        self.proxy_domain = "proxy.localhost"
        self._daemons: dict[str, tuple[int, Daemon]] = {}
        self._boxes: dict[str, Box] = {}
        self._daemons_lock = threading.Lock()
        self._sandbox_locks: dict[str, threading.Lock] = {}
        self._mutations: list[_ListMutation] = []
        self._endless_pages = 0

    # -- wiring ---------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        """The control-plane base URL (what ``DAYTONA_API_URL`` should be)."""
        return self.base_url + "/api"

    @property
    def toolbox_url(self) -> str:
        """Every sandbox's ``toolboxProxyUrl``."""
        return self.base_url + "/toolbox"

    def add_routes(self, app: web.Application) -> None:
        """Register ``/api`` and ``/toolbox``."""
        ApiRoutes(self).register(app)
        ToolboxRoutes(self).register(app)

    def credential_of(self, request: web.Request) -> str | None:
        """The Bearer key; on the toolbox also a matching preview token."""
        header = request.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            return header[7:]
        preview = request.headers.get("X-Daytona-Preview-Token")
        parts = request.path.split("/")
        if preview and len(parts) > 2 and parts[1] == "toolbox":
            sandbox = self.store.by_id(parts[2])
            if sandbox is not None and credential_matches(preview, sandbox.token):
                return self.credential or preview
        return None

    def unauthorized(self, request: web.Request) -> web.StreamResponse:
        """Nest's 401 on ``/api``, the proxy's daemon-shaped 401 on ``/toolbox``."""
        if request.path.startswith("/toolbox/"):
            return daemon_error_response(request, DaemonError(401, "Unauthorized"))
        return api_error_response(request, ApiError(401, "Unauthorized"))

    def bad_request(self, request: web.Request, message: str) -> web.StreamResponse:
        """Nest's 400 on ``/api``, the daemon's on ``/toolbox``."""
        if request.path.startswith("/toolbox/"):
            return daemon_error_response(request, DaemonError(400, message))
        return api_error_response(request, ApiError(400, message))

    def secrets(self) -> list[str]:
        """The API key and every sandbox's preview token."""
        return [self.credential, *(row.token for row in self.store.all())]

    # -- boxes and daemons ----------------------------------------------------------------

    def sandbox_dir(self, sandbox_id: str) -> Path:
        """The directory of a sandbox's box."""
        return self.workdir / "sandboxes" / sandbox_id

    def current_daemon(self, sandbox: Sandbox) -> Daemon | None:
        """The daemon of the sandbox's current run if it already exists (never blocks)."""
        with self._daemons_lock:
            current = self._daemons.get(sandbox.id)
        if current is not None and current[0] == sandbox.generation:
            return current[1]
        return None

    def _sandbox_lock(self, sandbox_id: str) -> threading.Lock:
        with self._daemons_lock:
            return self._sandbox_locks.setdefault(sandbox_id, threading.Lock())

    def daemon_for(self, sandbox: Sandbox) -> Daemon:
        """The daemon of the sandbox's current run: a fresh one after each start, in the
        sandbox's box (made on first use). Blocking; DaemonError 400 unless the sandbox
        is started, EngineError/OSError if the box cannot be made."""
        current = self.current_daemon(sandbox)
        if current is not None:
            return current
        with self._sandbox_lock(sandbox.id):
            current = self.current_daemon(sandbox)
            if current is not None:
                return current
            if sandbox.state != "started":
                # It stopped (or went) while this call waited for the lock.
                raise DaemonError(400, "no IP address found. Is the Sandbox started?")
            with self._daemons_lock:
                stale = self._daemons.pop(sandbox.id, None)
                box = self._boxes.get(sandbox.id)
            if stale is not None:
                stale[1].shutdown()
            if box is None:
                box = boxes.open_box(self.sandbox_dir(sandbox.id), sandbox)
                with self._daemons_lock:
                    self._boxes[sandbox.id] = box
            box.set_policy(boxes.policy_for(sandbox))
            env = {
                "DAYTONA_SANDBOX_ID": sandbox.id,
                "DAYTONA_SANDBOX_USER": box.settings.user,
                **sandbox.env,
                **self.marker_env(),
            }
            if not box.settings.isolated:
                # Unisolated commands see the host's /tmp: point them at the sandbox's.
                env["TMPDIR"] = box.agent_path("/tmp")
            daemon = Daemon(
                box,
                run=f"run-{sandbox.generation}-{uuid.uuid4().hex[:8]}",
                env=box.environment(env),
                exit_trap=self.daemon_exit_trap,
                perl=self.perl,
            )
            with self._daemons_lock:
                self._daemons[sandbox.id] = (sandbox.generation, daemon)
            return daemon

    def apply_network(self, sandbox: Sandbox) -> None:
        """Put the sandbox's network settings in force in its box, if it has one (blocking)."""
        with self._daemons_lock:
            box = self._boxes.get(sandbox.id)
        if box is not None:
            box.set_policy(boxes.policy_for(sandbox))

    def retire(self, sandbox_id: str, *, destroy: bool = False) -> None:
        """The sandbox stopped (every process ends, files stay) or, with ``destroy``, was
        deleted (its box is removed). Blocking."""
        with self._sandbox_lock(sandbox_id):
            with self._daemons_lock:
                current = self._daemons.pop(sandbox_id, None)
                box = self._boxes.pop(sandbox_id, None) if destroy else None
                if destroy:
                    self._sandbox_locks.pop(sandbox_id, None)
            if current is not None:
                current[1].shutdown()
            if destroy:
                if box is not None:
                    box.stop()
                    box.close()
                trees.discard(self.sandbox_dir(sandbox_id))

    def close(self) -> None:
        """End every sandbox's processes; remove the boxes when the workdir is the
        emulator's own (the base then removes it)."""
        with self._daemons_lock:
            daemons = [d for _, d in self._daemons.values()]
            self._daemons.clear()
            owned = list(self._boxes.values())
            self._boxes.clear()
        for daemon in daemons:
            with contextlib.suppress(Exception):
                daemon.shutdown()
        for box in owned:
            with contextlib.suppress(Exception):
                box.stop()
                box.close()
            if self._own_workdir:
                with contextlib.suppress(OSError):
                    trees.discard(box.directory)

    # -- listing mutations ------------------------------------------------------------

    async def after_list_page(self) -> None:
        """Apply the listing mutations whose page count is reached (see :meth:`mutate_listing`)."""
        due: list[tuple[str, str]] = []
        with self._daemons_lock:
            for mutation in list(self._mutations):
                mutation.served += 1
                if mutation.served >= mutation.after_page:
                    due.extend(mutation.ops)
                    self._mutations.remove(mutation)
        for op, target in due:
            if op == "create":
                self.store.create({"name": target})
            elif op == "touch":
                self.store.touch(self.store.find(target).id)
            elif op == "rename_to_destroyed":
                self.store.delete(target, hold=True)
            else:
                sandbox = self.store.delete(target)
                await run_blocking(lambda s=sandbox.id: self.retire(s, destroy=True))  # type: ignore[misc]

    # -- fault API ----------------------------------------------------------------------

    def hold_transitions(self, action: str | None = None, *, times: int = 1) -> None:
        """Hold the next ``times`` lifecycle transitions in their intermediate state.

        ``action`` is ``create``, ``start``, ``stop``, ``archive`` or ``delete``
        (None: any). A held sandbox shows ``creating``/``starting``/``restoring``/
        ``stopping``/``archiving``/``destroying`` (a delete keeps its renamed
        ``DESTROYED_…`` row listable) and answers 409 "Sandbox state change in
        progress" to lifecycle calls until :meth:`finish_transitions`.
        """
        path = {
            None: r"^/api/sandbox(/[^/]+(/(start|stop|archive))?)?$",
            "create": r"^/api/sandbox$",
            "delete": r"^/api/sandbox/[^/]+$",
        }.get(action, rf"^/api/sandbox/[^/]+/{action}$")
        method = {"delete": "DELETE"}.get(action or "", None if action is None else "POST")
        self.faults.add("hold", path=path, method=method, times=times)

    def finish_transitions(self, id_or_name: str | None = None) -> list[str]:
        """Land held transitions (of one sandbox or all); the ids landed."""
        return [row.id for row in self.store.finish(id_or_name)]

    def fail_next_create(self, reason: str = "emulated start failure", *, times: int = 1) -> None:
        """Create answers 400 "Sandbox failed to start: <reason>"; the sandbox exists (error)."""
        self.faults.add(
            "create_error", method="POST", path=r"^/api/sandbox$", body=reason, times=times
        )

    def drop_next_create_response(self, *, times: int = 1) -> None:
        """Create succeeds but the connection drops before the answer (the client must adopt)."""
        self.faults.add("create_drop", method="POST", path=r"^/api/sandbox$", times=times)

    def rate_limit(
        self,
        *,
        path: str | None = None,
        method: str | None = None,
        throttler: str = "authenticated",
        retry_after: int = 1,
        plain: bool = False,
        times: int = 1,
    ) -> None:
        """429 with Nest's body and ``Retry-After-<throttler>`` + ``X-RateLimit-*-<throttler>``.

        ``plain`` sends the failed-auth tracker's plain ``Retry-After`` instead.
        """
        if plain:
            headers = {"Retry-After": str(retry_after)}
        else:
            headers = {
                f"Retry-After-{throttler}": str(retry_after),
                f"X-RateLimit-Limit-{throttler}": "100",
                f"X-RateLimit-Remaining-{throttler}": "0",
                f"X-RateLimit-Reset-{throttler}": str(retry_after),
            }
        body = {
            "path": path or "/api",
            "timestamp": iso(datetime.now(timezone.utc)),
            "statusCode": 429,
            "error": "Too Many Requests",
            "message": "ThrottlerException: Too Many Requests",
        }
        self.faults.add(
            "status", status=429, headers=headers, body=body, path=path, method=method, times=times
        )

    def unavailable(
        self,
        *,
        as_json: bool = True,
        path: str | None = None,
        method: str | None = None,
        times: int = 1,
    ) -> None:
        """503: the API's JSON, or (``as_json=False``) a load balancer's non-JSON text."""
        if as_json:
            body: Any = {
                "path": path or "/api",
                "timestamp": iso(datetime.now(timezone.utc)),
                "statusCode": 503,
                "error": "Service Unavailable",
                "message": "Service Unavailable",
            }
            headers: dict[str, str] = {}
        else:
            body = "<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>"
            headers = {"Content-Type": "text/html"}
        self.faults.add(
            "status", status=503, body=body, headers=headers, path=path, method=method, times=times
        )

    def drop_connections(
        self, *, path: str | None = None, method: str | None = None, times: int = 1
    ) -> None:
        """Close the connection without answering."""
        self.faults.add("drop", path=path, method=method, times=times)

    def close_log_stream_early(self, after_bytes: int = 0, *, times: int = 1) -> None:
        """The next log follow (WebSocket or chunked) ends cleanly after ``after_bytes``
        journal bytes although the command has not exited: no exit is implied."""
        self.faults.add("log_close_early", path=r"/logs$", size=after_bytes, times=times)

    def reset_log_stream(self, after_bytes: int = 0, *, times: int = 1) -> None:
        """The next log follows (WebSocket or chunked) are reset (TCP RST, no Close
        frame) after ``after_bytes`` journal bytes, the command still running."""
        self.faults.add("log_reset", path=r"/logs$", size=after_bytes, times=times)

    def cut_log_follows(self, *, reset: bool = False) -> None:
        """End every log follow open now (new ones are not affected), cleanly (Close
        1000, as if the stream had ended) or with ``reset`` by a TCP RST; the commands
        go on running."""
        self.follow_cut_mode = "reset" if reset else "close"
        self.follow_cuts += 1

    def serve_stale_log_prefix(self, size: int, *, times: int = 1) -> None:
        """The next log snapshot (plain GET) holds only the journal's first ``size`` bytes."""
        self.faults.add("log_stale_prefix", path=r"/logs$", size=size, times=times)

    def cut_log_reads(self, after_bytes: int = 0, *, reset: bool = False, times: int = 1) -> None:
        """The next log snapshots (plain GET) promise the whole journal in
        ``Content-Length`` but stop after ``after_bytes`` bytes (always at least one
        short): the connection is closed (FIN), or with ``reset`` reset (RST)."""
        self.faults.add(
            "log_cut",
            method="GET",
            path=r"/logs$",
            size=after_bytes,
            body="reset" if reset else "close",
            times=times,
        )

    def endless_listing(self, *, times: int = 1000) -> None:
        """The next ``times`` ``GET /sandbox`` pages each carry a fresh ``nextCursor``
        (each page is served from the start of the listing, whatever cursor was sent)."""
        self.faults.add("list_endless", method="GET", path=r"^/api/sandbox$", times=times)

    def next_endless_cursor(self) -> str:
        """A cursor never served before (for :meth:`endless_listing`)."""
        with self._daemons_lock:
            self._endless_pages += 1
            served = self._endless_pages
        return encode_cursor("endless", f"endless-{served}")

    def mutate_listing(self, after_page: int, ops: Sequence[tuple[str, str]]) -> None:
        """After the ``after_page``-th ``GET /sandbox`` page from now, apply ``ops``.

        Each op is ``(kind, target)``: ``("create", name)``, ``("delete", id_or_name)``,
        ``("touch", id_or_name)`` (bump ``lastActivityAt``: under the default
        ``lastActivityAt desc`` order it jumps behind the cursor and is skipped) or
        ``("rename_to_destroyed", id_or_name)`` (a lingering ``DESTROYED_…`` row).
        """
        mutation = _ListMutation(after_page, label_ops(ops))
        with self._daemons_lock:
            self._mutations.append(mutation)

    def age(self, id_or_name: str, *, seconds: float) -> None:
        """Move a sandbox's ``createdAt`` and ``lastActivityAt`` back (for order tests)."""
        row = self.store.find(id_or_name)
        delta = timedelta(seconds=seconds)
        self.store.update(
            id_or_name,
            created_at=row.created_at - delta,
            last_activity_at=row.last_activity_at - delta,
        )
