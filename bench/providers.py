"""Provider benchmarks: ``python bench/providers.py [--quick]`` prints medians and ratios.

Each hosted provider (sprites, e2b, daytona) is measured against its local
emulator, started in this process, with retries off (``retry.attempts=1``).
Every figure is the median of N runs, ours and the reference alternating so
that drift on a noisy machine hits both; the table reports ratios and never
passes or fails (timing lives here, not in tests). Measured:

1. exec round trip through our adapter vs the vendor's official SDK
   (``sprites-py``, ``e2b``, ``daytona``) on the same emulator, running the
   same remote command: target ours/SDK < 1.0 (faster). Also the HTTP
   requests (WebSocket upgrades included) one exec makes, ours vs the SDK's:
   on loopback they cost little, on a real network each is a round trip. For
   Sprites also vs a minimal raw client (websocket-client, read to the exit
   frame): target ours/raw <= 1.2;
2. spawn -> first stdout frame of ``echo x`` (ours; for Sprites vs the raw
   client, target ours/raw <= 1.2);
3. throughput of a large stdout (``head -c SIZE /dev/zero`` via spawn, read
   to the exit; for Sprites vs the raw client, target >= 0.8 of raw);
4. fan-out on Sprites: K concurrent streaming commands from this process
   (each prints 50 lines, waits for a line on stdin, prints 50 more; all K
   are live at once), counting lost and duplicated lines (must be 0) and
   commands that did not end with exactly one ``Exit(0)`` (must be 0), and
   the growth of this process's peak RSS per command (VmHWM, reset through
   ``/proc/self/clear_refs`` first where the kernel allows). The emulator
   runs in a child process here, so that the memory figure is ours alone.

Reading the latencies: every emulated command starts a real process under a
supervisor, which puts a floor of tens of milliseconds under each round trip,
and the emulators poll the command's journal (Sprites backs off to 50 ms), so
round trips are bimodal and a median can land on either mode: client-side
differences smaller than that do not show, and ratios are compared across runs.

``--quick`` uses small N and sizes (well under a minute); the default run
takes a few minutes. Every wait is bounded and only loopback is used; a
failed measurement prints ``error: <class>`` in its row (the detail goes to
stderr) and the run goes on.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import select
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

import daytona
import e2b
import sprites
import websocket

import managoat_sandbox as sandbox
from managoat_sandbox import Command, Exit, Frame, Handle, Stdout, config
from managoat_sandbox.emulators import Emulator
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.emulators.sprites import SpritesEmulator

CREDENTIAL = "bench-key"
#: Bound, in seconds, on any single wait (a request, a frame, a command's end).
WAIT = 60.0
FAN_LINES = 100
FAN_SCRIPT = f"seq 1 {FAN_LINES // 2}; read _; seq {FAN_LINES // 2 + 1} {FAN_LINES}"
FAN_SPAWNERS = 16
#: Pause before reading the request log, so that requests a call left in flight are counted.
SETTLE = 0.2
Sample = Callable[[], float]
Exec = Callable[[], object]


@dataclass(frozen=True)
class Sizes:
    """How much work each measurement does."""

    repeat: int  # runs per latency median
    stream_bytes: int  # size of the streamed stdout
    stream_repeat: int  # runs per throughput median
    fan_out: int  # concurrent commands in the fan-out


QUICK = Sizes(repeat=9, stream_bytes=2_000_000, stream_repeat=3, fan_out=50)
FULL = Sizes(repeat=41, stream_bytes=20_000_000, stream_repeat=5, fan_out=500)


@dataclass(frozen=True)
class Row:
    """One line of the table."""

    provider: str
    measurement: str
    ours: str = ""
    reference: str = ""
    ratio: str = ""
    target: str = ""


Cells = tuple[str, str, str]  # ours, reference, ratio


@dataclass(frozen=True)
class Provider:
    """How to emulate a provider, point our adapter at it, and drive its SDK."""

    name: str
    emulator: Callable[[], Emulator]
    point: Callable[[str], None]  # configures our adapter for a base URL
    sdk: Callable[[str], contextlib.AbstractContextManager[Exec]]  # one SDK exec round trip
    exec_argv: tuple[str, ...]  # what ours runs: the SDK's remote command


# -- the official SDKs ------------------------------------------------------------------------


@contextlib.contextmanager
def sprites_sdk(base_url: str) -> Iterator[Exec]:
    """``sprite.run("true")``: argv ``["true"]`` over the exec WebSocket."""
    client = sprites.SpritesClient(CREDENTIAL, base_url=base_url)
    try:
        sprite = client.create_sprite("bench-sdk")
        yield lambda: _check_code(sprite.run("true", timeout=WAIT).returncode)
    finally:
        with contextlib.suppress(Exception):
            client.delete_sprite("bench-sdk")
        client.close()


@contextlib.contextmanager
def e2b_sdk(base_url: str) -> Iterator[Exec]:
    """``commands.run("true")``: envd runs ``/bin/bash -l -c true``."""
    box = e2b.Sandbox.create(api_key=CREDENTIAL, api_url=base_url, sandbox_url=base_url,
                             debug=False, http_version="1.1", request_timeout=WAIT)
    try:
        yield lambda: _check_code(
            box.commands.run("true", timeout=WAIT, request_timeout=WAIT).exit_code)
    finally:
        with contextlib.suppress(Exception):
            box.kill()


@contextlib.contextmanager
def daytona_sdk(base_url: str) -> Iterator[Exec]:
    """``process.exec("true")``: the toolbox's one-shot execute endpoint."""
    client = daytona.Daytona(daytona.DaytonaConfig(api_key=CREDENTIAL, api_url=base_url + "/api"))
    box = client.create(daytona.CreateSandboxFromSnapshotParams(name="bench-sdk"))
    try:
        yield lambda: _check_code(box.process.exec("true", timeout=int(WAIT)).exit_code)
    finally:
        with contextlib.suppress(Exception):
            box.delete()


def _check_code(code: object) -> None:
    if code != 0:
        raise RuntimeError(f"exit code {code!r}")


PROVIDERS = (
    Provider(
        "sprites", lambda: SpritesEmulator(credential=CREDENTIAL),
        lambda url: config.configure("sprites", base_url=url, token=CREDENTIAL),
        sprites_sdk, ("true",)),
    Provider(
        "e2b", lambda: E2BEmulator(credential=CREDENTIAL),
        lambda url: config.configure("e2b", base_url=url, sandbox_url=url, api_key=CREDENTIAL),
        e2b_sdk, ("/bin/bash", "-l", "-c", "true")),
    Provider(
        "daytona", lambda: DaytonaEmulator(credential=CREDENTIAL),
        lambda url: config.configure("daytona", api_url=url + "/api", api_key=CREDENTIAL),
        daytona_sdk, ("true",)),
)


# -- the raw Sprites client -------------------------------------------------------------------


@dataclass(frozen=True)
class RawRun:
    """What the raw client saw of one command."""

    first_stdout: float  # seconds from connect to the first stdout frame (inf: none)
    total: float  # seconds from connect to the exit frame
    stdout_bytes: int
    code: int


def raw_sprites_exec(base_url: str, sprite: str, argv: Sequence[str]) -> RawRun:
    """One command over the exec WebSocket with nothing but websocket-client (reference §3)."""
    params = [*(("cmd", arg) for arg in argv), ("path", argv[0]), ("stdin", "false")]
    url = (base_url.replace("http", "ws", 1) + f"/v1/sprites/{sprite}/exec?"
           + urlencode(params, quote_via=quote))
    began = time.perf_counter()
    first = float("inf")
    received = 0
    ws = websocket.create_connection(url, header=[f"Authorization: Bearer {CREDENTIAL}"],
                                     timeout=WAIT, suppress_origin=True,
                                     skip_utf8_validation=True)
    try:
        while True:
            opcode, data = ws.recv_data()
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                raise RuntimeError("closed before the exit frame")
            if opcode != websocket.ABNF.OPCODE_BINARY or not data:
                continue
            if data[0] == 0x01:
                first = min(first, time.perf_counter() - began)
                received += len(data) - 1
            elif data[0] == 0x03:
                code = data[1] if len(data) > 1 else 0
                return RawRun(first, time.perf_counter() - began, received, code)
    finally:
        ws.close()


# -- our adapter, through the facade ----------------------------------------------------------


@dataclass(frozen=True)
class Streamed:
    """What our spawn delivered of one command."""

    first_stdout: float
    total: float
    stdout_bytes: int


def ours_spawn(handle: Handle, argv: Sequence[str]) -> Streamed:
    """Spawn ``argv`` and read its frames to the terminal one (each wait bounded)."""
    began = time.perf_counter()
    command = sandbox.spawn(handle, argv[0], list(argv[1:]))
    first = float("inf")
    received = 0
    try:
        frames = command.frames
        assert frames is not None
        while True:
            frame = frames.get(timeout=WAIT)
            if isinstance(frame, Stdout):
                first = min(first, time.perf_counter() - began)
                received += len(frame.data)
            elif frame.terminal:
                if frame != Exit(command.ref, 0):
                    raise RuntimeError(f"ended with {frame!r}")
                return Streamed(first, time.perf_counter() - began, received)
    finally:
        sandbox.stop_command(command)


@contextlib.contextmanager
def our_sandbox(provider: str, name: str) -> Iterator[Handle]:
    handle = sandbox.create(provider, name)
    try:
        yield handle
    finally:
        with contextlib.suppress(Exception):
            sandbox.destroy(handle)


# -- measuring --------------------------------------------------------------------------------


def elapsed(fn: Exec) -> Sample:
    """A sample that times one call of ``fn``."""

    def sample() -> float:
        began = time.perf_counter()
        fn()
        return time.perf_counter() - began

    return sample


def paired(ours: Sample, reference: Sample, repeat: int) -> tuple[float, float]:
    """Medians of ``repeat`` alternating samples of each, after one untimed warm-up each."""
    ours()
    reference()
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(repeat):
        mine.append(ours())
        theirs.append(reference())
    return statistics.median(mine), statistics.median(theirs)


def median(sample: Sample, repeat: int) -> float:
    sample()
    return statistics.median(sample() for _ in range(repeat))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def rate(bytes_per_second: float) -> str:
    return f"{bytes_per_second / 1e6:.0f} MB/s"


def ratio(ours: float, reference: float) -> str:
    return f"{ours / reference:.2f}"


def guarded(provider: str, measurement: str, target: str, cells: Callable[[], Cells]) -> Row:
    """The row of one measurement, or ``error: <class>`` in it if the measurement failed."""
    return guarded_rows(provider, [(measurement, target)], lambda: [cells()])[0]


def guarded_rows(provider: str, names: Sequence[tuple[str, str]],
                 cells: Callable[[], Sequence[Cells]]) -> list[Row]:
    """Rows ``(measurement, target)`` of measurements made together; all errors if one failed."""
    try:
        found = cells()
    except Exception as error:
        return [failed(provider, measurement, error, target) for measurement, target in names]
    return [Row(provider, measurement, *row, target=target)
            for (measurement, target), row in zip(names, found, strict=True)]


def failed(provider: str, measurement: str, error: Exception, target: str = "") -> Row:
    """``error: <class>`` in the row; the detail goes to stderr."""
    print(f"{provider} {measurement}: {type(error).__name__}: {error}", file=sys.stderr)
    return Row(provider, measurement, f"error: {type(error).__name__}", target=target)


def measure_provider(provider: Provider, sizes: Sizes) -> list[Row]:
    """Rows 1-3 for one provider, against its in-process emulator."""
    try:
        with provider.emulator() as emulator:
            provider.point(emulator.base_url)
            with our_sandbox(provider.name, "bench-ours") as handle:
                return provider_rows(provider, sizes, emulator, handle)
    except Exception as error:
        return [failed(provider.name, "emulator and sandbox", error)]


def requests_made(emulator: Emulator, fn: Exec) -> int:
    """How many HTTP requests (WebSocket upgrades included) one call of ``fn`` made."""
    emulator.clear_requests()
    fn()
    time.sleep(SETTLE)
    return len(emulator.requests)


def provider_rows(provider: Provider, sizes: Sizes, emulator: Emulator, handle: Handle,
                  ) -> list[Row]:
    name, argv, base_url = provider.name, provider.exec_argv, emulator.base_url
    big = ("head", "-c", str(sizes.stream_bytes), "/dev/zero")

    def ours_exec() -> None:
        _check_code(sandbox.exec(handle, argv[0], list(argv[1:]), timeout=WAIT).exit_code)

    def vs_sdk() -> list[Cells]:
        with provider.sdk(base_url) as sdk_exec:
            mine, theirs = paired(elapsed(ours_exec), elapsed(sdk_exec), sizes.repeat)
            sent, sdk_sent = requests_made(emulator, ours_exec), requests_made(emulator, sdk_exec)
        return [(ms(mine), f"{ms(theirs)} SDK", ratio(mine, theirs)),
                (str(sent), f"{sdk_sent} SDK", ratio(sent, sdk_sent))]

    def first_frame() -> float:
        return ours_spawn(handle, ("echo", "x")).first_stdout

    def throughput() -> float:
        streamed = ours_spawn(handle, big)
        if streamed.stdout_bytes != sizes.stream_bytes:
            raise RuntimeError(f"{streamed.stdout_bytes} bytes streamed")
        return streamed.stdout_bytes / streamed.total

    exec_name = f"exec round trip ({' '.join(argv)})"
    stream_name = f"stdout throughput ({sizes.stream_bytes / 1e6:g} MB)"
    rows = guarded_rows(name, [(exec_name, "ours/SDK < 1.0"),
                               ("requests per exec", "each a round trip on a real network")],
                        vs_sdk)
    if name != "sprites":
        rows.append(guarded(name, "spawn -> first stdout frame", "",
                            lambda: (ms(median(first_frame, sizes.repeat)), "", "")))
        rows.append(guarded(name, stream_name, "",
                            lambda: (rate(median(throughput, sizes.stream_repeat)), "", "")))
        return rows

    def raw(run_argv: Sequence[str]) -> RawRun:
        run = raw_sprites_exec(base_url, handle.name, run_argv)
        _check_code(run.code)
        return run

    def raw_throughput() -> float:
        run = raw(big)
        if run.stdout_bytes != sizes.stream_bytes:
            raise RuntimeError(f"{run.stdout_bytes} bytes streamed")
        return run.stdout_bytes / run.total

    def vs_raw(ours: Sample, reference: Sample, repeat: int, show: Callable[[float], str],
               ) -> Callable[[], Cells]:
        def cells() -> Cells:
            mine, theirs = paired(ours, reference, repeat)
            return show(mine), f"{show(theirs)} raw", ratio(mine, theirs)
        return cells

    rows.append(guarded(name, exec_name, "ours/raw <= 1.2", vs_raw(
        elapsed(ours_exec), lambda: raw(argv).total, sizes.repeat, ms)))
    rows.append(guarded(name, "spawn -> first stdout frame", "ours/raw <= 1.2", vs_raw(
        first_frame, lambda: raw(("echo", "x")).first_stdout, sizes.repeat, ms)))
    rows.append(guarded(name, stream_name, "ours/raw >= 0.8", vs_raw(
        throughput, raw_throughput, sizes.stream_repeat, rate)))
    return rows


# -- fan-out ----------------------------------------------------------------------------------


@contextlib.contextmanager
def emulator_process(provider: str) -> Iterator[str]:
    """Serve ``provider``'s emulator from a child process; yields its base URL."""
    child = subprocess.Popen(
        [sys.executable, "-m", "managoat_sandbox.emulators", provider, "--port", "0",
         "--token", CREDENTIAL], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        readable, _, _ = select.select([child.stdout], [], [], WAIT)
        line = child.stdout.readline() if readable else ""
        if not line.startswith("http://"):
            raise RuntimeError(f"{provider} emulator did not start")
        yield line.strip()
    finally:
        child.terminate()
        try:
            child.wait(WAIT)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(WAIT)


def peak_rss_kib(*, reset: bool = False) -> int:
    """This process's peak RSS (VmHWM, KiB); ``reset`` first lowers it to the current RSS."""
    if reset:
        with contextlib.suppress(OSError):
            Path("/proc/self/clear_refs").write_text("5")
    found = re.search(r"VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text())
    if found is None:
        raise RuntimeError("no VmHWM in /proc/self/status")
    return int(found.group(1))


class FanOut:
    """K commands' frames, collected by one owner callback from K reader threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.frames: dict[Hashable, list[Frame]] = {}
        self.stdout: dict[Hashable, bytearray] = {}
        self.ended: set[Hashable] = set()

    def owner(self, frame: Frame) -> None:
        with self.lock:
            self.frames.setdefault(frame.ref, []).append(frame)
            if isinstance(frame, Stdout):
                self.stdout.setdefault(frame.ref, bytearray()).extend(frame.data)
            if frame.terminal:
                self.ended.add(frame.ref)

    def wait(self, done: Callable[[], bool], deadline: float) -> None:
        while time.monotonic() < deadline:
            with self.lock:
                if done():
                    return
            time.sleep(0.05)
        raise TimeoutError("fan-out commands did not get there in time")

    def tally(self, refs: Sequence[Hashable]) -> tuple[int, int, int]:
        """Lost lines, duplicated lines, commands not ending in exactly one final ``Exit(0)``."""
        expected = Counter(str(n) for n in range(1, FAN_LINES + 1))
        lost = duplicated = bad_end = 0
        for ref in refs:
            got = Counter(bytes(self.stdout.get(ref, b"")).decode().split())
            lost += sum((expected - got).values())
            duplicated += sum((got - expected).values())
            frames = self.frames.get(ref, [])
            terminals = [frame for frame in frames if frame.terminal]
            if terminals != [Exit(ref, 0)] or not frames[-1].terminal:
                bad_end += 1
        return lost, duplicated, bad_end


@dataclass(frozen=True)
class FanOutResult:
    """What a fan-out found."""

    lost: int
    duplicated: int
    bad_ends: int
    wall: float  # seconds from the first spawn to the last exit
    peak_kib_per_command: float


def run_fan_out(handle: Handle, commands: int) -> FanOutResult:
    """Spawn ``commands`` at once, hold them all live, release them, and check every frame."""
    collected = FanOut()
    half = "".join(f"{n}\n" for n in range(1, FAN_LINES // 2 + 1)).encode()
    before = peak_rss_kib(reset=True)
    began = time.monotonic()
    deadline = began + WAIT + commands * 0.5
    running: list[Command] = []
    try:
        with ThreadPoolExecutor(FAN_SPAWNERS) as pool:
            running += pool.map(lambda _: sandbox.spawn(
                handle, "bash", ["-c", FAN_SCRIPT], owner=collected.owner, stdin=True),
                range(commands))
        refs = [command.ref for command in running]

        def all_live() -> bool:
            return all(collected.stdout.get(ref, b"") == half for ref in refs)

        collected.wait(all_live, deadline)
        for command in running:
            sandbox.write_stdin(command, "go\n")
            sandbox.close_stdin(command)
        collected.wait(lambda: len(collected.ended) == commands, deadline)
        wall = time.monotonic() - began
        peak = (peak_rss_kib() - before) / commands
    finally:
        for command in running:
            sandbox.stop_command(command)
    return FanOutResult(*collected.tally(refs), wall, peak)


def fan_out(provider: Provider, commands: int) -> list[Row]:
    """Row 4: ``commands`` concurrent streaming commands against a child-process emulator."""
    name = f"fan-out, {commands} commands"
    try:
        with emulator_process(provider.name) as base_url:
            provider.point(base_url)
            with our_sandbox(provider.name, "bench-fanout") as handle:
                result = run_fan_out(handle, commands)
    except Exception as error:
        return [failed(provider.name, name, error, "all must be 0")]
    return [
        Row(provider.name, f"{name}: lines", f"{result.lost} lost, {result.duplicated} dup",
            f"{result.bad_ends} bad ends", target="all must be 0"),
        Row(provider.name, f"{name}: wall time", f"{result.wall:.1f} s"),
        Row(provider.name, f"{name}: peak RSS growth",
            f"{result.peak_kib_per_command:.1f} KiB/cmd", target="reported (emulator in a child)"),
    ]


# -- main -------------------------------------------------------------------------------------


def print_table(rows: Sequence[Row]) -> None:
    header = Row("provider", "measurement", "ours", "reference", "ratio", "target")
    table = [header, *rows]
    widths = [max(len(getattr(row, field)) for row in table)
              for field in ("provider", "measurement", "ours", "reference", "ratio")]
    for row in table:
        print(f"{row.provider:<{widths[0]}}  {row.measurement:<{widths[1]}}  "
              f"{row.ours:>{widths[2]}}  {row.reference:>{widths[3]}}  "
              f"{row.ratio:>{widths[4]}}  {row.target}".rstrip())


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small N and sizes (under a minute)")
    sizes = QUICK if parser.parse_args(argv).quick else FULL
    config.configure("retry", attempts=1)
    began = time.monotonic()
    rows: list[Row] = []
    for provider in PROVIDERS:
        rows += measure_provider(provider, sizes)
    rows += fan_out(PROVIDERS[0], sizes.fan_out)
    print_table(rows)
    print(f"({'quick' if sizes is QUICK else 'full'} run, {time.monotonic() - began:.0f} s; "
          f"medians of {sizes.repeat} runs, {sizes.stream_repeat} for throughput)")


if __name__ == "__main__":
    main()
