"""The Daytona emulator timing its own work, in a child process: what a session exec costs it.

Users run their tests against the emulators, so what one request costs the
emulator itself, apart from what it costs the client, is worth knowing.
``python bench/timed_emulator.py daytona --port 0 --token T`` serves the Daytona
emulator as ``python -m managoat_sandbox.emulators daytona`` does (printing its
base URL once it accepts connections, stopping on SIGTERM), and measures, in
its own process and with its own clock, every synchronous or asynchronous
session exec (``POST /toolbox/{id}/process/session/{sid}/exec``):

* ``handler``: from the moment aiohttp hands the request to the application
  (its head parsed) until the answer is ready to be written, taken by an
  outermost middleware: the emulator's door (Host and credential checks, the
  request log, which reads the body), the proxy's sandbox lookup, the JSON
  both ways, the thread hop, and the daemon's work;
* ``daemon``: of that, :meth:`Daemon.execute` — the emulated daemon's work for
  the command, on its worker thread: the command's directory, files and
  FIFOs, the wrapper written to the session shell, and (for a synchronous
  exec) the wait until the shell announces the exit code, that is the
  sandbox running the wrapper: its two line readers, the sourced script, the
  command.

Everything else of a round trip — the client and its HTTP library, aiohttp
reading the request and writing the answer, loopback — is the round trip
minus ``handler``. Only the measurement is added: the emulator's source is
not changed (the middleware is added to the application of a subclass, and
``Daemon.execute`` is wrapped, in this process only). The samples are read,
and forgotten, with ``GET /_emulator/bench-timings`` (the emulator's
credential as a Bearer header), which answers
``[{"kind": "handler"|"daemon", "seconds": s}, …]`` in the order the timed
work ended. :func:`timed_daytona` serves it for the parent, and
:meth:`Timed.spent` reads the figures of one call.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from aiohttp import web
from measure import WAIT
from raw import CREDENTIAL
from served import Served, emulator_process

from managoat_sandbox.emulators.daytona.daemon import Daemon
from managoat_sandbox.emulators.daytona.emulator import DaytonaEmulator

#: Where the samples are read (a control route: the emulator's credential as Bearer).
TIMINGS = "/_emulator/bench-timings"
#: The most samples kept between two reads.
_KEPT = 10_000


@dataclass(frozen=True)
class Spent:
    """What one call cost: its round trip seen by the client, and the emulator's own time
    in its handler and, of that, in the daemon's ``execute`` (sums over the call's
    session execs)."""

    round_trip: float
    handler: float
    daemon: float


@dataclass(frozen=True)
class Timed(Served):
    """A running timed emulator."""

    def timings(self) -> list[dict[str, Any]]:
        """The samples taken since the last read (then forgotten)."""
        answer = requests.get(
            self.base_url + TIMINGS, headers={"Authorization": f"Bearer {CREDENTIAL}"}, timeout=WAIT
        )
        answer.raise_for_status()
        found: list[dict[str, Any]] = answer.json()
        return found

    def spent(self, call: Callable[[], object], *, execs: int = 1) -> Spent:
        """Time ``call``, which must make ``execs`` session execs and no other; its cost."""
        self.timings()
        began = time.perf_counter()
        call()
        round_trip = time.perf_counter() - began
        found = self.timings()
        kinds = [sample["kind"] for sample in found]
        if kinds.count("handler") != execs or kinds.count("daemon") != execs:
            raise RuntimeError(f"expected {execs} session exec(s), the emulator timed {kinds}")
        return Spent(
            round_trip,
            sum(s["seconds"] for s in found if s["kind"] == "handler"),
            sum(s["seconds"] for s in found if s["kind"] == "daemon"),
        )


@contextlib.contextmanager
def timed_daytona() -> Iterator[Timed]:
    """Serve the timed Daytona emulator from a child process until the block ends."""
    with emulator_process("daytona", entry=(str(Path(__file__)),)) as served:
        yield Timed(served.provider, served.base_url)


# -- the child ------------------------------------------------------------------------------


def _serve(argv: Sequence[str]) -> int:
    """Serve the timed emulator until SIGTERM (``daytona --port N --token T --workdir D``)."""
    parser = argparse.ArgumentParser(prog="timed_emulator.py")
    parser.add_argument("provider", choices=["daytona"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args(argv)
    samples: list[dict[str, Any]] = []
    lock = threading.Lock()

    def note(kind: str, seconds: float) -> None:
        with lock:
            samples.append({"kind": kind, "seconds": seconds})
            del samples[:-_KEPT]

    execute = Daemon.execute

    @functools.wraps(execute)
    def timed_execute(self: Daemon, *given: Any, **named: Any) -> Any:
        began = time.perf_counter()
        try:
            return execute(self, *given, **named)
        finally:
            note("daemon", time.perf_counter() - began)

    Daemon.execute = timed_execute  # type: ignore[method-assign]

    @web.middleware
    async def timer(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        began = time.perf_counter()
        try:
            return await handler(request)
        finally:
            if request.method == "POST" and request.path.endswith("/exec"):
                note("handler", time.perf_counter() - began)

    async def read(request: web.Request) -> web.StreamResponse:
        with lock:
            found = list(samples)
            samples.clear()
        return web.json_response(found)

    class TimedDaytona(DaytonaEmulator):
        def add_routes(self, app: web.Application) -> None:
            super().add_routes(app)
            app.middlewares.insert(0, timer)
            app.router.add_get(TIMINGS, read)

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    emulator = TimedDaytona(port=args.port, credential=args.token, workdir=args.workdir)
    emulator.start()
    try:
        print(emulator.base_url, flush=True)
        done.wait()
    finally:
        emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1:]))
