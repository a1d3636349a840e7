"""The E2B emulator: control plane and envd on one port, as E2B's SDK and adapters see them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import web

from .._blocking import run_blocking
from .._input import load_json
from .._server import DEFAULT_IDLE_TIMEOUT, Emulator, Fault
from .control import ControlPlane, api_error
from .envd import Envd, is_envd_request
from .layout import check_users
from .state import ApiError, SandboxRecord
from .world import World

__all__ = ["E2BEmulator"]

RATE_LIMIT_MESSAGE = "Rate limit exceeded"
CONTROL_PREFIX = "/_emulator/e2b/"
STREAM_RPCS = {
    "Start": r"/process\.Process/Start$",
    "Connect": r"/process\.Process/Connect$",
    None: r"/process\.Process/(Start|Connect)$",
}


class E2BEmulator(Emulator):
    """A local E2B: ``base_url`` serves the API (``E2B_API_URL``) and envd (``E2B_SANDBOX_URL``).

    Control-plane requests carry ``X-API-Key`` (or a deprecated Bearer token);
    envd requests are told apart by the ``E2b-Sandbox-Id``/``E2b-Sandbox-Port``
    headers and authorised by the sandbox's ``X-Access-Token`` instead. Each
    sandbox is one process-engine box under ``workdir`` (see :mod:`.layout`):
    its commands are real processes inside it, isolated in their own
    namespaces where the host allows, and every path envd handles is the
    sandbox's own. ``users`` are the Linux users envd accepts (the first is
    the default; they share the box's one uid, see :mod:`.layout`),
    ``domain`` the ``domain`` field of the answers, ``seed`` makes sandbox
    IDs repeatable.

    Test controls (all thread-safe, usable while serving):

    * :meth:`expire` / :meth:`advance` — the TTL clock, without waiting;
    * :meth:`pause` — pause a sandbox behind its client's back;
    * :meth:`stream_fault`, :meth:`rate_limit`, :meth:`server_error`,
      :meth:`page_size`, :meth:`endless_listing`, :meth:`break_tag_selectors`
      — the provider's faults (each a :class:`Fault` in :attr:`faults`, which
      also takes the base's generic kinds);
    * :meth:`record`, :meth:`read_file`, :meth:`write_file`, :meth:`exists`,
      :meth:`command_path`, :attr:`requests` — inspection.
    """

    provider = "e2b"
    credential_env = "E2B_API_KEY"

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        credential: str | None = None,
        workdir: str | Path | None = None,
        domain: str | None = None,
        users: tuple[str, ...] = ("user", "root"),
        seed: int | None = None,
        log_bodies: bool = False,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        check_users(users)
        super().__init__(
            host=host,
            port=port,
            credential=credential,
            workdir=workdir,
            log_bodies=log_bodies,
            idle_timeout=idle_timeout,
        )
        self.domain = domain
        self.world = World(self.workdir / "sandboxes", users=users, seed=seed)
        self.control = ControlPlane(self.world, self.faults, domain)
        self.envd = Envd(self.world, self.faults, default_user=users[0])

    # -- the base's hooks ----------------------------------------------------------------

    def add_routes(self, app: web.Application) -> None:
        """Every path goes through one dispatcher: the sandbox headers pick envd."""
        app.router.add_route("*", "/{tail:.*}", self._dispatch)

    def credential_of(self, request: web.Request) -> str | None:
        """``X-API-Key``, else a (deprecated) Bearer access token."""
        key = request.headers.get("X-API-Key")
        if key:
            return key
        header = request.headers.get("Authorization", "")
        return header[7:] if header.startswith("Bearer ") else None

    def unauthorized(self, request: web.Request) -> web.StreamResponse:
        """The API's 401."""
        return api_error(401, "Invalid API key")

    def bad_request(self, request: web.Request, message: str) -> web.StreamResponse:
        """envd's 400 for an envd request, else the API's."""
        if is_envd_request(request):
            return self.envd.bad_request(request, message)
        return api_error(400, message)

    def authenticated(self, request: web.Request) -> bool:
        """An envd request by its sandbox's access token (or a signed ``/files`` URL),
        anything else by the API key."""
        if is_envd_request(request):
            return self.envd.authenticates(request)
        return super().authenticated(request)

    def public_path(self, request: web.Request) -> bool:
        """envd requests skip the API key: envd answers them itself, refusing those
        without their sandbox's token as it does (or the proxy, an unknown sandbox)."""
        return is_envd_request(request)

    def secrets(self) -> list[str]:
        """The API key and every access and traffic token issued (gone sandboxes' too)."""
        return [self.credential, *self.world.registry.issued_tokens()]

    def serves_host(self, host: str) -> bool:
        """The sandbox hosts of the configured ``domain`` (``<port>-<id>.<domain>``,
        any subdomain of it); none without a domain."""
        if not self.domain:
            return False
        name, _, port = self.domain.lower().rpartition(":")
        if not (name and port.isdigit()):
            name = self.domain.lower()
        return host.endswith("." + name)

    def close(self) -> None:
        """Kill every sandbox's processes and forget them."""
        self.envd.cancel_timers()
        self.world.close()

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        if request.path.startswith(CONTROL_PREFIX):
            return await self._control_api(request)
        if self.world.registry.expired():
            await run_blocking(self.world.sweep)
        if is_envd_request(request):
            return await self.envd.handle(request)
        return await self.control.handle(request)

    async def _control_api(self, request: web.Request) -> web.StreamResponse:
        """Shell access to the TTL clock (behind the credential, like the base's
        control API, which checks it before this runs).

        ``POST /_emulator/e2b/clock`` with ``{"advance": seconds}`` moves the
        clock (a finite number from 0 to :data:`~.state.MAX_ADVANCE`, else 400);
        ``POST /_emulator/e2b/expire/{sandbox id}`` runs out a TTL now.
        """
        path = request.path[len(CONTROL_PREFIX) :]
        if request.method != "POST":
            return api_error(405, "Method Not Allowed")
        if path == "clock":
            try:
                seconds = load_json(await request.read())["advance"]
                self.advance(seconds)
            except (ValueError, KeyError, TypeError) as error:
                detail = str(error) if isinstance(error, ValueError) else ""
                return api_error(
                    400, 'body must be {"advance": seconds}' + (f": {detail}" if detail else "")
                )
            return web.Response(status=204)
        if path.startswith("expire/"):
            sandbox_id = path[len("expire/") :]
            try:
                await run_blocking(lambda: self.expire(sandbox_id))
            except (ApiError, KeyError):
                return api_error(404, f'sandbox "{sandbox_id}" not found')
            return web.Response(status=204)
        return api_error(404, "Not Found")

    # -- clock and lifecycle controls ------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Move the emulator's clock forward; TTLs that run out apply on the next
        request. ValueError unless ``seconds`` is a finite number from 0 to
        :data:`~.state.MAX_ADVANCE` (and the clock stays within
        :data:`~.state.MAX_OFFSET` of the wall clock)."""
        self.world.clock.advance(seconds)

    def expire(self, sandbox_id: str) -> None:
        """Run out the sandbox's TTL now: paused if it auto-pauses, else killed (blocking)."""
        self.world.expire(self.world.registry.get(sandbox_id))

    def pause(self, sandbox_id: str) -> None:
        """Pause a running sandbox as ``POST /sandboxes/{id}/pause`` would."""
        self.world.pause(self.world.registry.get(sandbox_id))

    def record(self, sandbox_id: str) -> SandboxRecord:
        """The live record of a sandbox (ApiError 404 if unknown); do not mutate it."""
        return self.world.registry.get(sandbox_id)

    def read_file(self, sandbox_id: str, path: str, user: str = "user") -> bytes:
        """The file at sandbox path ``path`` (relative and ``~/`` ones under ``user``'s
        home), read as ``GET /files`` does: FileNotFoundError if there is none."""
        sandbox = self.world.table(sandbox_id).sandbox
        return sandbox.read_file(sandbox.sandbox_path(path, user))

    def write_file(self, sandbox_id: str, path: str, data: bytes, user: str = "user") -> None:
        """Write the file at sandbox path ``path`` as ``POST /files`` does."""
        sandbox = self.world.table(sandbox_id).sandbox
        sandbox.write_file(sandbox.sandbox_path(path, user), data)

    def exists(self, sandbox_id: str, path: str, user: str = "user") -> bool:
        """Whether anything is at sandbox path ``path``."""
        sandbox = self.world.table(sandbox_id).sandbox
        return sandbox.exists(sandbox.sandbox_path(path, user))

    def command_path(self, sandbox_id: str, path: str, user: str = "user") -> str:
        """The path a command of the sandbox uses for sandbox path ``path``: the path
        itself when commands are isolated, its host path under the box otherwise."""
        return self.world.table(sandbox_id).sandbox.command_path(path, user)

    @property
    def keepalive_scale(self) -> float:
        """Multiplies each stream's ``Keepalive-Ping-Interval`` (shrink it in tests)."""
        return self.envd.keepalive_scale

    @keepalive_scale.setter
    def keepalive_scale(self, value: float) -> None:
        self.envd.keepalive_scale = value

    # -- faults --------------------------------------------------------------------------

    def stream_fault(
        self, kind: str, *, rpc: str | None = None, times: int = 1, after: int = 0, body: Any = None
    ) -> Fault:
        """Queue a stream fault for the next ``times`` Start/Connect streams.

        ``kind`` is one of ``no_start``, ``no_end``, ``error_end``, ``split``,
        ``merge``, ``hang``, ``reset``, ``rst`` or ``garbage`` (see :meth:`.Envd.plan`),
        ``rpc`` narrows it to ``"Start"`` or ``"Connect"``, ``after`` is the
        count the kind uses (data events, envelopes, or bytes per chunk for
        ``split``) and ``body`` the error value for ``error_end`` or the
        garbage flavour.
        """
        return self.faults.add(
            f"stream_{kind}",
            method="POST",
            path=STREAM_RPCS[rpc],
            times=times,
            size=after,
            body=body,
        )

    def rate_limit(
        self,
        *,
        path: str | None = None,
        method: str | None = None,
        times: int = 1,
        retry_after: int = 7,
        retry_after_seconds: Any = None,
    ) -> Fault:
        """Answer 429 ``{"code":429,"message":"Rate limit exceeded"}`` with ``Retry-After``.

        ``retry_after_seconds`` adds the ``retryAfterSeconds`` body field the
        real service never sends (for taxonomy vectors, docs/protocols/e2b.md#rate-limit-advice).
        """
        body: dict[str, Any] = {"code": 429, "message": RATE_LIMIT_MESSAGE}
        if retry_after_seconds is not None:
            body["retryAfterSeconds"] = retry_after_seconds
        headers = {
            "Retry-After": str(retry_after),
            "RateLimit-Limit": "20",
            "RateLimit-Remaining": "0",
            "RateLimit-Reset": str(retry_after),
        }
        return self.faults.add(
            "status", path=path, method=method, times=times, status=429, headers=headers, body=body
        )

    def server_error(
        self,
        status: int = 500,
        *,
        path: str | None = None,
        method: str | None = None,
        times: int = 1,
    ) -> Fault:
        """Answer a 5xx: the API's error JSON, or the proxy's JSON for a 502."""
        body: dict[str, Any] = {"code": status, "message": "internal server error"}
        if status == 502:
            body = {"message": "The sandbox was not found", "code": 502}
        return self.faults.add(
            "status", path=path, method=method, times=times, status=status, body=body
        )

    def page_size(self, size: int, *, times: int = 1000) -> Fault:
        """Serve ``GET /v2/sandboxes`` pages of ``size`` items (the next ``times`` pages)."""
        return self.faults.add(
            "list_page_size", method="GET", path=r"^/v2/sandboxes$", times=times, size=size
        )

    def endless_listing(self, *, times: int = 1000) -> Fault:
        """The next ``times`` listing pages each carry a fresh ``X-Next-Token``."""
        return self.faults.add("list_endless", method="GET", path=r"^/v2/sandboxes$", times=times)

    def break_tag_selectors(self, *, times: int = 1) -> Fault:
        """The next ``times`` tag selectors answer ``not_found`` (pids still work)."""
        return self.faults.add("tag_selector_404", path=r"^/process\.Process/", times=times)
