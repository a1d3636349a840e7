"""The vendors' official SDKs driven the way their documentation shows, on our emulators.

Each ``open_*`` context manager creates the SDK's own sandbox and yields an
:class:`Sdk`: ``exec`` runs ``true`` to its exit code, ``first_frame`` times
``echo x`` from the call to the first stdout callback. The remote command is
whatever the SDK makes of that text; :data:`SDK_ARGV` says which argv our
adapter and the raw client run for the same comparison.

* sprites-py: ``sprite.run("true")`` / ``sprite.command("echo", "x", stdout=w)``
  (argv over the exec WebSocket);
* e2b: ``commands.run("true")`` / ``commands.run("echo x", on_stdout=cb)``:
  envd runs ``/bin/bash -l -c <text>``;
* daytona: ``process.exec("true")`` (the toolbox's one-shot execute, which
  merges stderr into stdout); and :attr:`Sdk.session_exec`, what the SDK
  offers for the job our exec does — separate stdout and stderr, a command id
  to find a lost answer again by —: ``process.execute_session_command`` of
  ``true`` with ``run_async=False`` (one synchronous session exec) in a
  session created once, outside any timing. First frame through a session
  command followed with ``get_session_command_logs_async`` (the log
  WebSocket). The SDK holds back a chunk's tail in case it is a split channel
  marker, so a short output reaches the callback only when the WebSocket
  closes, about a second after the command's exit (the daemon's idle close):
  that is the SDK's cost, and the row shows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import daytona
import e2b
import sprites
from measure import WAIT
from raw import CREDENTIAL

#: What the SDK runs remotely for ``true`` and ``echo x``, as argv for ours and the raw client.
SDK_ARGV: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "sprites": (("true",), ("echo", "x")),
    "e2b": (("/bin/bash", "-l", "-c", "true"), ("/bin/bash", "-l", "-c", "echo x")),
    "daytona": (("true",), ("echo", "x")),
}


@dataclass(frozen=True)
class Sdk:
    """One SDK sandbox's measured calls: ``exec`` (the SDK's own way to run a command to
    its end), ``first_frame`` and, where the SDK's exec does another job than ours,
    ``session_exec``: the SDK's call for the same job (None where ``exec`` is it)."""

    exec: Callable[[], None]
    first_frame: Callable[[], float]
    session_exec: Callable[[], None] | None = None


def check_code(code: object) -> None:
    if code != 0:
        raise RuntimeError(f"exit code {code!r}")


class _FirstWrite:
    """A file-like stdout that notes when its first byte arrived."""

    def __init__(self) -> None:
        self.at = float("inf")

    def write(self, data: bytes | str) -> int:
        if data and self.at == float("inf"):
            self.at = time.perf_counter()
        return len(data)

    def flush(self) -> None:
        """Nothing buffered."""


@contextlib.contextmanager
def open_sprites(base_url: str) -> Iterator[Sdk]:
    client = sprites.SpritesClient(CREDENTIAL, base_url=base_url)
    try:
        sprite = client.create_sprite("bench-sdk")

        def first_frame() -> float:
            began = time.perf_counter()
            sink = _FirstWrite()
            sprite.command("echo", "x", stdout=sink, timeout=WAIT).run()
            return sink.at - began

        yield Sdk(lambda: check_code(sprite.run("true", timeout=WAIT).returncode), first_frame)
    finally:
        with contextlib.suppress(Exception):
            client.delete_sprite("bench-sdk")
        client.close()


@contextlib.contextmanager
def open_e2b(base_url: str) -> Iterator[Sdk]:
    box = e2b.Sandbox.create(
        api_key=CREDENTIAL,
        api_url=base_url,
        sandbox_url=base_url,
        debug=False,
        http_version="1.1",
        request_timeout=WAIT,
    )
    try:

        def first_frame() -> float:
            sink = _FirstWrite()
            began = time.perf_counter()
            check_code(
                box.commands.run(
                    "echo x", timeout=WAIT, request_timeout=WAIT, on_stdout=sink.write
                ).exit_code
            )
            return sink.at - began

        yield Sdk(
            lambda: check_code(
                box.commands.run("true", timeout=WAIT, request_timeout=WAIT).exit_code
            ),
            first_frame,
        )
    finally:
        with contextlib.suppress(Exception):
            box.kill()


@contextlib.contextmanager
def open_daytona(base_url: str) -> Iterator[Sdk]:
    client = daytona.Daytona(daytona.DaytonaConfig(api_key=CREDENTIAL, api_url=base_url + "/api"))
    box = client.create(daytona.CreateSandboxFromSnapshotParams(name="bench-sdk"))
    counter = iter(range(1 << 30))
    try:
        kept = "sdk-kept"
        box.process.create_session(kept)

        def session_exec() -> None:
            answer = box.process.execute_session_command(
                kept,
                daytona.SessionExecuteRequest(command="true", run_async=False),
                timeout=int(WAIT),
            )
            check_code(answer.exit_code)

        def first_frame() -> float:
            session = f"sdk-{next(counter)}"
            began = time.perf_counter()
            box.process.create_session(session)
            try:
                answer = box.process.execute_session_command(
                    session, daytona.SessionExecuteRequest(command="echo x", run_async=True)
                )
                return asyncio.run(_first_log(box, session, str(answer.cmd_id))) - began
            finally:
                box.process.delete_session(session)

        yield Sdk(
            lambda: check_code(box.process.exec("true", timeout=int(WAIT)).exit_code),
            first_frame,
            session_exec,
        )
    finally:
        with contextlib.suppress(Exception):
            box.delete()


async def _first_log(box: daytona.Sandbox, session: str, command: str) -> float:
    """When the log WebSocket delivered the first stdout chunk (the follow is then cancelled)."""
    arrived = asyncio.Event()
    follow = asyncio.ensure_future(
        box.process.get_session_command_logs_async(
            session, command, lambda _: arrived.set(), lambda _: None
        )
    )
    try:
        await asyncio.wait_for(arrived.wait(), WAIT)
        return time.perf_counter()
    finally:
        follow.cancel()
        with contextlib.suppress(BaseException):
            await follow


OPENERS: dict[str, Callable[[str], contextlib.AbstractContextManager[Sdk]]] = {
    "sprites": open_sprites,
    "e2b": open_e2b,
    "daytona": open_daytona,
}
