"""envd, the daemon inside each sandbox, as reached through E2B's edge proxy.

A request is an envd request when it carries ``E2b-Sandbox-Id`` and
``E2b-Sandbox-Port`` (how the proxy routes for IP hosts), or when its Host
is ``<port>-<sandbox id>.<domain>``. The proxy answers 502 with
``{"sandboxId", "message", "code": 502}`` when the sandbox is unknown, or
paused without auto-resume (a paused sandbox with auto-resume is resumed),
and when the port is not envd's (49983). Exactly one of the two headers is a
400.

Authorisation: every envd call needs ``X-Access-Token: <envdAccessToken>``
(docs/protocols/e2b.md#envd-headers) except ``GET /health``; ``/files`` also accepts a signed URL
(docs/protocols/e2b.md#signed-file-urls). The Linux user comes from ``Authorization: Basic <user:>``
(absent: the default user, docs/protocols/e2b.md#envd-headers), or from ``username`` on ``/files``.

RPCs: ``process.Process`` Start and Connect (server streams, see
:mod:`.streams`), List, SendInput, CloseStdin, SendSignal and Update (unary;
it resizes a PTY); ``filesystem.Filesystem`` ListDir, Stat, MakeDir, Move and
Remove (unary, see :mod:`.filesystem`), WatchDir (a server stream; the stream
faults that frame envelopes apply to it too) and CreateWatcher,
GetWatcherEvents and RemoveWatcher (unary; see :mod:`.watch`); ``StreamInput``
answers ``unimplemented``. Plain HTTP: ``POST /files`` (multipart part
``file`` or octet-stream, gzip accepted; ``X-Metadata-<key>`` headers become
``user.e2b.<key>`` extended attributes of every file written and the entries'
``metadata``), ``GET /files`` (the file streamed with its ``Content-Length``;
404 when missing, 400 for a directory or anything not a regular file),
``GET /health`` (204). ``/files`` and ``filesystem.Filesystem`` paths are the
sandbox's own (what its commands see at that path), reached through
:mod:`~managoat_sandbox._engine.safefs` (see :mod:`.layout`) as the sandbox's
user: what that user may not read or write is the 500 envd answers when its
open fails, the message ending in Go's text for the errno (``error opening
file '<p>': open <p>: permission denied`` for a read, ``error opening file:
open <p>: permission denied`` for a write;
docs/protocols/e2b.md#refused-by-file-permissions).

Fault taken here: ``tag_selector_404`` (a tag selector misses, as after a
pause/resume) and the stream faults of :meth:`Envd.plan`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import errno
import functools
import hashlib
import os
import posixpath
import re
import threading
from email.message import Message
from typing import Any

from aiohttp import web

from ..._engine import safefs
from ..._engine.subscription import Subscription
from .._access import credential_matches
from .._blocking import run_blocking
from .._fs import go_text
from .._input import BadInput, load_json, parse_int
from .._server import Faults
from . import connect, filesystem, watch
from .processes import Process, ProcessTable, RpcError, decode_bytes
from .state import SandboxRecord
from .streams import DEFAULT_STREAM_ERROR, Disconnected, EnvelopeWriter, StreamPlan, pump
from .watch import Watcher, Watchers
from .world import World

__all__ = ["ENVD_PORT", "Envd", "is_envd_request", "sandbox_target"]

ENVD_PORT = 49983
_RPC_PREFIXES = ("/process.Process/", "/filesystem.Filesystem/")
#: The Connect protocol's ``Connect-Timeout-Ms``: at most ten digits.
_MAX_TIMEOUT_MS = 9_999_999_999
#: The longest keep-alive interval and signed-URL expiration taken, in seconds.
_MAX_KEEPALIVE = 86_400
_MAX_EXPIRATION = 2**63 - 1
STREAM_CONTENT_TYPE = "application/connect+json"
#: Upload headers that carry file metadata (lowercase); it is kept under ``XATTR_PREFIX``.
METADATA_HEADER = "x-metadata-"
DEFAULT_KEEPALIVE = 90.0
_HOST = re.compile(r"^(?P<port>\d+)-(?P<id>[a-z0-9]+)\.")
_STREAM_FAULTS = (
    "stream_no_start",
    "stream_no_end",
    "stream_error_end",
    "stream_split",
    "stream_merge",
    "stream_hang",
    "stream_reset",
    "stream_rst",
    "stream_garbage",
)


def sandbox_target(request: web.Request) -> tuple[str | None, str | None]:
    """The sandbox id and port a request is addressed to (either may be None)."""
    sandbox_id = request.headers.get("E2b-Sandbox-Id")
    port = request.headers.get("E2b-Sandbox-Port")
    if sandbox_id is None and port is None:
        match = _HOST.match(request.host or "")
        if match is not None:
            return match["id"], match["port"]
    return sandbox_id, port


def is_envd_request(request: web.Request) -> bool:
    """Whether the proxy would send this request to a sandbox rather than the API."""
    sandbox_id, port = sandbox_target(request)
    return sandbox_id is not None or port is not None


def _unsubscribe(started: tuple[object, Subscription | None]) -> None:
    """Close the output subscription of a process started for a caller that went away
    (the process runs on in its table, as a process whose client disconnected does)."""
    subscription = started[1]
    if subscription is not None:
        subscription.close()


def _opening_error(error: Exception) -> dict[str, str]:
    """The end-of-stream error of a stream that failed before its first message."""
    if isinstance(error, RpcError):
        return connect.error_body(error.code, error.message)
    if isinstance(error, KeyError):
        return connect.error_body("unavailable", "sandbox is gone")
    return connect.error_body("invalid_argument", str(error))


def _rpc_error(error: RpcError) -> web.Response:
    return web.json_response(
        connect.error_body(error.code, error.message),
        status=connect.HTTP_STATUS.get(error.code, 500),
    )


def _http_error(status: int, message: str) -> web.Response:
    return web.json_response({"code": status, "message": message}, status=status)


def signature(path: str, operation: str, user: str, token: str, expiration: int | None) -> str:
    """envd's file URL signature (docs/protocols/e2b.md#signed-file-urls): ``v1_`` +
    unpadded base64 of a SHA-256."""
    raw = f"{path}:{operation}:{user}:{token}" + (f":{expiration}" if expiration else "")
    digest = hashlib.sha256(raw.encode()).digest()
    return "v1_" + base64.b64encode(digest).decode().rstrip("=")


class Envd:
    """Serves envd for every sandbox of a :class:`World`."""

    def __init__(self, world: World, faults: Faults, *, default_user: str = "user") -> None:
        self.world = world
        self.faults = faults
        self.default_user = default_user
        #: Multiplies ``Keepalive-Ping-Interval`` (tests shrink it).
        self.keepalive_scale = 1.0
        self._timers: set[asyncio.TimerHandle] = set()
        #: The watchers ``CreateWatcher`` made.
        self.watchers = Watchers()
        #: ``WatchDir`` streams being served now (changed on the event loop only).
        self.open_watches = 0

    # -- routing -------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Route one envd request (after the proxy's checks)."""
        sandbox_id, port = sandbox_target(request)
        if sandbox_id is None or port is None:
            return _http_error(400, "both E2b-Sandbox-Id and E2b-Sandbox-Port are required")
        record = self.world.registry.find(sandbox_id)
        if record is not None and record.state == "paused" and record.auto_resume:
            await run_blocking(lambda: self.world.resume(record, None))
        if record is None or record.state != "running":
            return web.json_response(
                {"sandboxId": sandbox_id, "message": "The sandbox was not found", "code": 502},
                status=502,
            )
        if port != str(ENVD_PORT):
            return web.json_response(
                {
                    "sandboxId": sandbox_id,
                    "message": "The sandbox is running but port is not open",
                    "port": port,
                    "code": 502,
                },
                status=502,
            )
        path, method = request.path, request.method
        if path == "/health" and method == "GET":
            return web.Response(status=204)
        if path == "/files":
            if method == "GET":
                return await self._read_file(request, record)
            if method == "POST":
                return await self._write_file(request, record)
            return _http_error(405, "method not allowed")
        if not self._token_ok(request, record):
            return _http_error(
                401,
                "unauthorized access, please provide a valid access token "
                "or method signing if supported",
            )
        if method == "POST" and path.startswith("/process.Process/"):
            return await self._process_rpc(request, record, path.rsplit("/", 1)[1])
        if method == "POST" and path.startswith("/filesystem.Filesystem/"):
            return await self._filesystem_rpc(request, record, path.rsplit("/", 1)[1])
        return web.Response(status=404, text="404 page not found\n")

    def authenticates(self, request: web.Request) -> bool:
        """Whether an envd request carries its sandbox's access token (or, on ``/files``,
        a valid signature): what :meth:`handle` asks of every route but ``/health``. For
        a sandbox the emulator does not know (gone, or never made), which the proxy
        answers whatever the token, an access token the emulator issued to any sandbox
        will do: its holder is a client of this emulator. Never raises."""
        sandbox_id, _ = sandbox_target(request)
        record = None if sandbox_id is None else self.world.registry.find(sandbox_id)
        if record is None:
            given = request.headers.get("X-Access-Token")
            return self.world.registry.issued_access_token(given)
        if request.path == "/files":
            operation = "read" if request.method == "GET" else "write"
            return self._file_authorised(request, record, operation)
        return self._token_ok(request, record)

    @staticmethod
    def bad_request(request: web.Request, message: str) -> web.Response:
        """envd's 400: a Connect ``invalid_argument`` on an RPC path, else the plain shape."""
        if request.path.startswith(_RPC_PREFIXES):
            return _rpc_error(RpcError("invalid_argument", message))
        return _http_error(400, message)

    @staticmethod
    def _token_ok(request: web.Request, record: SandboxRecord) -> bool:
        return credential_matches(request.headers.get("X-Access-Token"), record.access_token)

    def _user(self, request: web.Request) -> str:
        header = request.headers.get("Authorization", "")
        if not header:
            return self.default_user
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "basic":
            raise RpcError("unauthenticated", "invalid authorization header")
        try:
            user = base64.b64decode(value, validate=True).decode().partition(":")[0]
        except (binascii.Error, UnicodeDecodeError):
            raise RpcError("unauthenticated", "invalid authorization header") from None
        if not user:
            return self.default_user
        if user not in self.world.users:
            raise RpcError("unauthenticated", f"invalid username: '{user}'")
        return user

    # -- process.Process --------------------------------------------------------------------

    async def _process_rpc(
        self, request: web.Request, record: SandboxRecord, method: str
    ) -> web.StreamResponse:
        if method in ("Start", "Connect"):
            return await self._stream(request, record, method)
        unary = {
            "List": self._list,
            "SendInput": self._send_input,
            "CloseStdin": self._close_stdin,
            "SendSignal": self._send_signal,
            "Update": self._update,
        }
        handler = unary.get(method)
        if handler is None:
            return _rpc_error(
                RpcError("unimplemented", f"process.Process/{method} is not emulated")
            )
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return web.Response(status=415, text="unsupported content type\n")
        try:
            self._user(request)
            body = load_json(await request.read() or b"{}")
            if not isinstance(body, dict):
                raise RpcError("invalid_argument", "request must be a JSON object")
            table = self.world.table(record.sandbox_id)
            return web.json_response(await handler(request, table, body))
        except ValueError as error:
            return _rpc_error(RpcError("invalid_argument", str(error)))
        except KeyError:
            return _rpc_error(RpcError("unavailable", "sandbox is gone"))
        except RpcError as error:
            return _rpc_error(error)

    def _select(
        self, request: web.Request, table: ProcessTable, selector: Any, *, ended: bool = False
    ) -> Process:
        tags_work = True
        if isinstance(selector, dict) and "tag" in selector:
            tags_work = self.faults.take("tag_selector_404", request.method, request.path) is None
        return table.select(selector, ended=ended, tags_work=tags_work)

    async def _list(
        self, request: web.Request, table: ProcessTable, body: dict[str, Any]
    ) -> dict[str, Any]:
        processes = [p.listed() for p in table.live()]
        return {"processes": processes} if processes else {}

    async def _send_input(
        self, request: web.Request, table: ProcessTable, body: dict[str, Any]
    ) -> dict[str, Any]:
        process = self._select(request, table, body.get("process"))
        given = body.get("input")
        if not isinstance(given, dict) or not ({"stdin", "pty"} & given.keys()):
            raise RpcError("unimplemented", "invalid input type")
        data = decode_bytes(given.get("pty", given.get("stdin")), "input")
        await run_blocking(lambda: table.write(process, data))
        return {}

    async def _close_stdin(
        self, request: web.Request, table: ProcessTable, body: dict[str, Any]
    ) -> dict[str, Any]:
        process = self._select(request, table, body.get("process"))
        await run_blocking(lambda: table.close_stdin(process))
        return {}

    async def _send_signal(
        self, request: web.Request, table: ProcessTable, body: dict[str, Any]
    ) -> dict[str, Any]:
        process = self._select(request, table, body.get("process"))
        await run_blocking(lambda: table.signal(process, body.get("signal")))
        return {}

    async def _update(
        self, request: web.Request, table: ProcessTable, body: dict[str, Any]
    ) -> dict[str, Any]:
        process = self._select(request, table, body.get("process"))
        await run_blocking(lambda: table.resize(process, body.get("pty")))
        return {}

    # -- filesystem.Filesystem ---------------------------------------------------------------

    async def _filesystem_rpc(
        self, request: web.Request, record: SandboxRecord, method: str
    ) -> web.StreamResponse:
        """A ``filesystem.Filesystem`` call: ``WatchDir`` streams (:mod:`.watch`), the
        watcher calls go to :attr:`watchers`, the rest to :mod:`.filesystem`; a method
        neither knows answers ``unimplemented``."""
        if method == "WatchDir":
            return await self._stream(request, record, method)
        handler = filesystem.METHODS.get(method) or self.watchers.methods.get(method)
        if handler is None:
            return _rpc_error(
                RpcError("unimplemented", f"filesystem.Filesystem/{method} is not emulated")
            )
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return web.Response(status=415, text="unsupported content type\n")
        try:
            user = self._user(request)
            body = load_json(await request.read() or b"{}")
            if not isinstance(body, dict):
                raise RpcError("invalid_argument", "request must be a JSON object")
            sandbox = self.world.table(record.sandbox_id).sandbox
            return web.json_response(await run_blocking(lambda: handler(sandbox, body, user)))
        except ValueError as error:
            return _rpc_error(RpcError("invalid_argument", str(error)))
        except KeyError:
            return _rpc_error(RpcError("unavailable", "sandbox is gone"))
        except RpcError as error:
            return _rpc_error(error)
        except OSError as error:
            return _rpc_error(
                RpcError("internal", f"error reading the filesystem: {error.strerror or error}")
            )

    # -- streams ----------------------------------------------------------------------------

    def plan(self, request: web.Request) -> StreamPlan:
        """The stream faults that apply to this Start/Connect request.

        Kinds (``emulator.faults.add(kind, path=r"/process\\.Process/Start$", ...)``):
        ``stream_no_start`` (only an end-of-stream ``{}``; nothing is started),
        ``stream_no_end`` (``size`` data events, then ``{}`` without the end event),
        ``stream_error_end`` (the same with ``{"error": body}``),
        ``stream_split`` (``size`` bytes per HTTP chunk, default 1),
        ``stream_merge`` (all envelopes in one chunk at the end),
        ``stream_hang`` (silent after ``size`` envelopes, connection open),
        ``stream_reset`` (connection shut mid-envelope after ``size`` envelopes),
        ``stream_rst`` (a TCP reset between envelopes after ``size`` envelopes),
        ``stream_garbage`` (``body`` ``"json"``: a malformed payload,
        ``"compressed"``: a flag-0x01 envelope, right after ``start``).
        """
        plan = StreamPlan()
        for kind in _STREAM_FAULTS:
            fault = self.faults.take(kind, request.method, request.path)
            if fault is None:
                continue
            if kind == "stream_no_start":
                plan.no_start = True
            elif kind == "stream_no_end":
                plan.cut_after = fault.size
            elif kind == "stream_error_end":
                plan.cut_after = fault.size
                plan.cut_trailer = fault.body if fault.body is not None else DEFAULT_STREAM_ERROR
            elif kind == "stream_split":
                plan.split = fault.size or 1
            elif kind == "stream_merge":
                plan.merge = True
            elif kind == "stream_hang":
                plan.hang_after = fault.size
            elif kind == "stream_reset":
                plan.reset_after = fault.size
            elif kind == "stream_rst":
                plan.rst_after = fault.size
            else:
                plan.garbage = fault.body if isinstance(fault.body, str) else "json"
        return plan

    async def _stream(
        self, request: web.Request, record: SandboxRecord, method: str
    ) -> web.StreamResponse:
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if content_type != STREAM_CONTENT_TYPE:
            return web.Response(status=415, text="unsupported content type\n")
        plan = self.plan(request)
        # The request is read whole before the answer starts: aiohttp lets go of an
        # unread body once the response is prepared.
        body = await request.read()
        response = web.StreamResponse(status=200, headers={"Content-Type": STREAM_CONTENT_TYPE})
        response.enable_chunked_encoding()
        await response.prepare(request)
        writer = EnvelopeWriter(request, response, plan)
        try:
            if plan.no_start:
                await writer.send(connect.end_stream())
            elif method == "WatchDir":
                await self._run_watch(request, body, record, writer)
            else:
                await self._run_stream(request, body, record, method, writer)
            await writer.finish()
        except Disconnected:
            pass
        return response

    async def _run_stream(
        self,
        request: web.Request,
        body: bytes,
        record: SandboxRecord,
        method: str,
        writer: EnvelopeWriter,
    ) -> None:
        try:
            user = self._user(request)
            message = connect.decode_one(body)
            table = self.world.table(record.sandbox_id)
            subscription: Subscription | None
            if method == "Start":
                process, subscription = await run_blocking(
                    lambda: table.start(message, user=user, sandbox_env=record.env_vars),
                    discard=_unsubscribe,
                )
                self._arm_deadline(request, table, process)
            else:
                selector = message.get("process") if isinstance(message, dict) else None
                process = self._select(request, table, selector, ended=True)
                ended = process.end() is not None
                subscription = None if ended else await run_blocking(lambda: table.follow(process))
            deadline = self._stream_deadline(request)
        except (connect.EnvelopeError, BadInput, KeyError, RpcError) as error:
            await writer.send(connect.end_stream(_opening_error(error)))
            return
        await pump(
            writer,
            process,
            subscription,
            record,
            keepalive=self._keepalive(request),
            deadline=deadline,
        )

    async def _run_watch(
        self, request: web.Request, body: bytes, record: SandboxRecord, writer: EnvelopeWriter
    ) -> None:
        """A ``WatchDir`` stream (:mod:`.watch`): its watcher opened, then served."""
        try:
            user = self._user(request)
            message = connect.decode_one(body)
            if not isinstance(message, dict):
                raise RpcError("invalid_argument", "request must be a JSON object")
            sandbox = self.world.table(record.sandbox_id).sandbox
            watcher = await run_blocking(lambda: Watcher.open(sandbox, message, user))
            deadline = self._stream_deadline(request)
        except (connect.EnvelopeError, BadInput, KeyError, RpcError) as error:
            await writer.send(connect.end_stream(_opening_error(error)))
            return
        self.open_watches += 1
        try:
            await watch.stream(
                writer,
                watcher,
                sandbox,
                record,
                keepalive=self._keepalive(request),
                deadline=deadline,
            )
        finally:
            self.open_watches -= 1

    def _keepalive(self, request: web.Request) -> float | None:
        """Seconds between keep-alive pings: ``Keepalive-Ping-Interval`` (whole seconds,
        as envd reads it; the default when absent or not one), None for 0."""
        raw = request.headers.get("Keepalive-Ping-Interval")
        try:
            seconds = (
                parse_int(raw, "Keepalive-Ping-Interval", low=0, high=_MAX_KEEPALIVE)
                if raw
                else DEFAULT_KEEPALIVE
            )
        except BadInput:
            seconds = DEFAULT_KEEPALIVE
        return seconds * self.keepalive_scale if seconds > 0 else None

    @staticmethod
    def _timeout_ms(request: web.Request) -> float | None:
        """``Connect-Timeout-Ms`` in seconds; None when absent, 0, or not the at most ten
        digits the Connect protocol allows."""
        raw = request.headers.get("Connect-Timeout-Ms")
        try:
            value = parse_int(raw, "Connect-Timeout-Ms", low=0, high=_MAX_TIMEOUT_MS) if raw else 0
        except BadInput:
            return None
        return value / 1000 if value > 0 else None

    def _stream_deadline(self, request: web.Request) -> float | None:
        seconds = self._timeout_ms(request)
        return None if seconds is None else asyncio.get_running_loop().time() + seconds

    def _arm_deadline(self, request: web.Request, table: ProcessTable, process: Process) -> None:
        """``Connect-Timeout-Ms`` on Start bounds the process's own lifetime."""
        seconds = self._timeout_ms(request)
        if seconds is None:
            return
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._timers.discard(handle)
            threading.Thread(
                target=table.kill_on_deadline,
                args=(process,),
                name="e2b-emulator-deadline",
                daemon=True,
            ).start()

        handle = loop.call_later(seconds, fire)
        self._timers.add(handle)

    def cancel_timers(self) -> None:
        """Forget pending process deadlines (the emulator is stopping)."""
        for handle in list(self._timers):
            handle.cancel()
        self._timers.clear()

    # -- files ----------------------------------------------------------------------------------

    def _file_user(self, request: web.Request) -> str:
        user = request.query.get("username") or self.default_user
        if user not in self.world.users:
            raise RpcError("unauthenticated", f"invalid user: '{user}'")
        return user

    def _file_authorised(self, request: web.Request, record: SandboxRecord, operation: str) -> bool:
        if "X-Access-Token" in request.headers:
            return self._token_ok(request, record)
        given = request.query.get("signature")
        if not given:
            return False
        raw_expiration = request.query.get("signature_expiration")
        try:
            expiration = (
                parse_int(raw_expiration, "signature_expiration", low=0, high=_MAX_EXPIRATION)
                if raw_expiration
                else None
            )
        except BadInput:
            return False
        if expiration is not None and expiration < self.world.clock.now():
            return False
        expected = signature(
            request.query.get("path", ""),
            operation,
            request.query.get("username", ""),
            record.access_token,
            expiration,
        )
        return credential_matches(given, expected)

    def _file_caller(
        self, request: web.Request, record: SandboxRecord, operation: str
    ) -> str | web.StreamResponse:
        """The user a ``/files`` request acts as, or the 401 that refuses it."""
        if not self._file_authorised(request, record, operation):
            return _http_error(
                401,
                "unauthorized access, please provide a valid access token "
                "or method signing if supported",
            )
        try:
            return self._file_user(request)
        except RpcError as error:
            return _http_error(401, error.message)

    async def _read_file(self, request: web.Request, record: SandboxRecord) -> web.StreamResponse:
        """``GET /files``: the file streamed with its ``Content-Length`` (404 missing, 400 a
        directory or anything not a regular file, 500 a path through a file: envd's
        ``stat`` fails with ``ENOTDIR``, which it does not take for a missing path)."""
        user = self._file_caller(request, record, "read")
        if isinstance(user, web.StreamResponse):
            return user
        path = request.query.get("path")
        if not path:
            return _http_error(400, "path is required")
        sandbox = self.world.table(record.sandbox_id).sandbox
        absolute = sandbox.sandbox_path(path, user)
        try:
            fd = await run_blocking(
                lambda: filesystem.open_file(sandbox, absolute), discard=os.close
            )
        except FileNotFoundError:
            return _http_error(404, f"path '{absolute}' does not exist")
        except safefs.PathRefused as refusal:
            if refusal.reason == "not_a_directory":
                return _http_error(
                    500,
                    f"error checking if path exists '{absolute}': stat {absolute}: not a directory",
                )
            if refusal.reason == "is_directory":
                return _http_error(400, f"path '{absolute}' is a directory")
            return _http_error(400, f"cannot read path '{absolute}': {refusal}")
        except PermissionError as error:
            return _http_error(
                500, f"error opening file '{absolute}': open {absolute}: {go_text(error)}"
            )
        except OSError as error:
            return _file_os_error(absolute, "reading", error)
        try:
            return await _stream_file(request, fd)
        finally:
            os.close(fd)

    async def _write_file(self, request: web.Request, record: SandboxRecord) -> web.StreamResponse:
        user = self._file_caller(request, record, "write")
        if isinstance(user, web.StreamResponse):
            return user
        body = await request.read()  # aiohttp has already undone a gzip Content-Encoding
        content_type = request.headers.get("Content-Type", "")
        query_path = request.query.get("path")
        if content_type.startswith("multipart/form-data"):
            try:
                uploads = [
                    (query_path or name, data) for name, data in _file_parts(content_type, body)
                ]
            except ValueError as error:
                return _http_error(400, str(error))
        elif query_path:
            uploads = [(query_path, body)]
        else:
            return _http_error(400, "path is required for an octet-stream upload")
        if not uploads or any(not path for path, _ in uploads):
            return _http_error(400, "no file to write")
        try:
            metadata = _upload_metadata(request)
        except ValueError as error:
            return _http_error(400, str(error))
        xattrs = {filesystem.XATTR_PREFIX + key: value.encode() for key, value in metadata.items()}
        sandbox = self.world.table(record.sandbox_id).sandbox
        targets = [(sandbox.sandbox_path(path, user), data) for path, data in uploads]
        seen: set[str] = set()
        for absolute, _ in targets:
            if absolute in seen:
                return _http_error(400, f"path '{absolute}' appears twice")
            seen.add(absolute)
        written = []
        for absolute, data in targets:
            try:
                await run_blocking(functools.partial(sandbox.write_file, absolute, data, xattrs))
            except safefs.PathRefused as refusal:
                if refusal.reason == "is_directory":
                    return _http_error(400, f"path '{absolute}' is a directory")
                if refusal.reason == "read_only":
                    return _http_error(500, f"cannot write path '{absolute}': {refusal}")
                return _http_error(400, f"cannot write path '{absolute}': {refusal}")
            except PermissionError as error:
                return _http_error(500, f"error opening file: open {absolute}: {go_text(error)}")
            except OSError as error:
                return _file_os_error(absolute, "writing", error)
            entry: dict[str, Any] = {
                "path": absolute,
                "name": posixpath.basename(absolute),
                "type": "file",
            }
            if metadata:
                entry["metadata"] = dict(metadata)
            written.append(entry)
        return web.json_response(written)


async def _stream_file(request: web.Request, fd: int) -> web.StreamResponse:
    """Send the open file ``fd`` as the body, a chunk at a time (read off the loop).

    The length announced is the size when the answer starts; a file that shrinks
    meanwhile has its connection cut short rather than a short body passed off as whole.
    """
    size = os.fstat(fd).st_size
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/octet-stream"})
    response.content_length = size
    await response.prepare(request)
    remaining = size
    try:
        while remaining > 0:
            want = min(filesystem.READ_CHUNK, remaining)
            chunk = await run_blocking(
                functools.partial(os.read, fd, want), name="e2b-emulator-read"
            )
            if not chunk:
                if request.transport is not None:
                    request.transport.abort()
                return response
            await response.write(chunk)
            remaining -= len(chunk)
        await response.write_eof()
    except ConnectionError:
        pass  # the client went away
    return response


def _upload_metadata(request: web.Request) -> dict[str, str]:
    """The file metadata of an upload: ``X-Metadata-<key>: <value>`` headers, keys
    lowercased; ValueError for an empty key or a value that is not printable ASCII."""
    metadata: dict[str, str] = {}
    for name, value in request.headers.items():
        if not name.lower().startswith(METADATA_HEADER):
            continue
        key = name[len(METADATA_HEADER) :].lower()
        if not key:
            raise ValueError("invalid metadata header: empty key")
        if not all(" " <= char <= "~" for char in value):
            raise ValueError(f"invalid metadata value for key '{key}'")
        metadata[key] = value
    return metadata


def _file_os_error(path: str, doing: str, error: OSError) -> web.Response:
    """envd's answer to a failed file operation: 507 when the disk is full, else 500."""
    status = 507 if error.errno in (errno.ENOSPC, errno.EDQUOT) else 500
    return _http_error(status, f"error {doing} path '{path}': {error.strerror or error}")


def _file_parts(content_type: str, body: bytes) -> list[tuple[str, bytes]]:
    """The ``file`` parts of a multipart body: (filename, data) pairs; ValueError if malformed."""
    header = Message()
    header["Content-Type"] = content_type
    boundary = header.get_param("boundary")
    if not isinstance(boundary, str) or not boundary:
        raise ValueError("multipart body without a boundary")
    delimiter = b"--" + boundary.encode()
    chunks = body.split(delimiter)
    if len(chunks) < 3:
        raise ValueError("malformed multipart body")
    parts: list[tuple[str, bytes]] = []
    for raw in chunks[1:-1]:
        head, sep, data = raw.removeprefix(b"\r\n").removesuffix(b"\r\n").partition(b"\r\n\r\n")
        if not sep:
            raise ValueError("malformed multipart part")
        disposition = Message()
        for line in head.decode("utf-8", "replace").split("\r\n"):
            key, _, value = line.partition(":")
            disposition[key.strip()] = value.strip()
        if disposition.get_param("name", header="Content-Disposition") != "file":
            continue
        filename = disposition.get_param("filename", header="Content-Disposition")
        parts.append((filename if isinstance(filename, str) else "", data))
    return parts
