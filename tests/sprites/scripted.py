"""A tiny scripted WebSocket server for protocol facts the emulator cannot produce.

Each connection to ``/v1/sprites/<name>/exec[/<id>]`` plays the script
registered for ``<name>``: send a binary or text message, close normally,
abort the TCP connection, or stay silent. Runs aiohttp in a background thread.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from aiohttp import web

Step = tuple[str, Any]


def binary(data: bytes) -> Step:
    return ("binary", data)


def text(data: str) -> Step:
    return ("text", data)


CLOSE: Step = ("close", None)
ABORT: Step = ("abort", None)


def silent(seconds: float) -> Step:
    return ("silent", seconds)


class ScriptedServer:
    """Plays ``scripts[name]`` to each WebSocket connecting for sprite ``name``."""

    def __init__(self, *, autoping: bool = True) -> None:
        self.scripts: dict[str, Sequence[Step]] = {}
        self.received: list[bytes] = []
        self._autoping = autoping
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._handlers: set[asyncio.Task[Any]] = set()
        self._thread = threading.Thread(target=self._serve, name="scripted-ws", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        script = self.scripts[request.match_info["name"]]
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)
        ws = web.WebSocketResponse(autoping=self._autoping)
        await ws.prepare(request)
        reader = asyncio.ensure_future(self._read(ws))
        try:
            for kind, value in script:
                if kind == "binary":
                    await ws.send_bytes(value)
                elif kind == "text":
                    await ws.send_str(value)
                elif kind == "close":
                    await ws.close()
                    return ws
                elif kind == "abort":
                    assert request.transport is not None
                    request.transport.abort()
                    return ws
                elif kind == "silent":
                    await asyncio.sleep(value)
            await asyncio.sleep(30)
            return ws
        finally:
            reader.cancel()

    async def _read(self, ws: web.WebSocketResponse) -> None:
        async for message in ws:
            if isinstance(message.data, bytes):
                self.received.append(message.data)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_get("/v1/sprites/{name}/exec", self._handle)
        app.router.add_get("/v1/sprites/{name}/exec/{sid}", self._handle)
        self._runner = web.AppRunner(app)
        self._loop.run_until_complete(self._runner.setup())
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._loop.run_until_complete(web.SockSite(self._runner, sock).start())
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._runner.cleanup())
        self._loop.close()

    @contextmanager
    def running(self) -> Iterator[ScriptedServer]:
        self._thread.start()
        self._ready.wait(10)
        try:
            yield self
        finally:
            self._loop.call_soon_threadsafe(self._shutdown)
            self._thread.join(10)

    def _shutdown(self) -> None:
        for task in list(self._handlers):
            task.cancel()
        self._loop.stop()
