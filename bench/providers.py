"""Per hosted provider (sprites, e2b, daytona), on its emulator: ours vs raw vs the SDK.

Each provider's emulator runs in a child process (:mod:`served`) and serves,
in one run, our adapter (through the facade, ``retry.attempts=1``), the
minimal raw-protocol client of :mod:`raw` and the vendor's SDK
(:mod:`sdks`). Measured, each as alternating pairs (:mod:`measure`):

1. exec round trip of ``true`` (for E2B ``/bin/bash -l -c true``, what the
   SDK runs): ours vs raw (target <= 1.2) and ours vs SDK (target < 1.0).
   Daytona's SDK exec does another job than ours (see below), so Daytona has
   two SDK rows: its one-shot ``process.exec``, shown with no target, and its
   synchronous session command, the same job as ours (target <= 1.0);
2. the HTTP requests (WebSocket upgrades included) one exec makes: on
   loopback they cost little, on a real network each is a round trip;
3. spawn -> first stdout frame of ``echo x``, ours vs raw (<= 1.2) and vs the
   SDK's streaming call (< 1.0);
4. throughput of a large stdout through ``spawn`` (``yes`` lines of 64 bytes
   cut by ``head -c``, read to the exit), ours vs raw (target >= 0.8).

Reading the latencies: every emulated command is a real process, forked by
its sandbox's agent (about a millisecond), and each request crosses the
emulator's HTTP server (a few milliseconds on a loaded 2-core machine), so
client-side differences of a fraction of a millisecond barely show. Daytona's
exec runs in a session the adapter (and the raw client) keeps, so it starts
no new session shell, and keeps stdout and stderr apart and byte-exact, with
a command id by which an answer lost to a broken connection is found again.
The SDK's ``process.exec`` is the one-shot ``/process/execute``: a fresh shell
per command, stdout and stderr merged into one string, invalid UTF-8 turned
into U+FFFD, nothing to recover a lost answer by — not the same job, so its
row carries no target. What the SDK offers for our job is a synchronous
``execute_session_command`` in a session it keeps (created once, outside the
timing), which answers stdout and stderr apart: that row has the target.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from measure import (
    AT_MOST_SDK,
    FASTER_THAN_SDK,
    LATENCY_VS_RAW,
    SPRITES_THROUGHPUT_VS_RAW,
    THROUGHPUT_VS_RAW,
    WAIT,
    Row,
    Target,
    compared,
    elapsed,
    guarded,
    paired,
)
from raw import CREDENTIAL, RawDaytona, RawE2B, RawRun, RawSprites
from sdks import OPENERS, SDK_ARGV, check_code
from served import Served

import managoat_sandbox as sandbox
from managoat_sandbox import Exit, Handle, Stdout, config

MIB = 1024 * 1024
LINE = "x" * 63  # with yes's newline, 64 bytes a line


class RawClient(Protocol):
    def run(self, argv: Sequence[str]) -> RawRun: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class Provider:
    """How to point our adapter at an emulator, and open a raw client on it."""

    name: str
    point: Callable[[str], None]
    raw: Callable[[str, Handle], RawClient]


PROVIDERS = {
    "sprites": Provider(
        "sprites",
        lambda url: config.configure("sprites", base_url=url, token=CREDENTIAL),
        lambda url, handle: RawSprites(url, handle.name),
    ),
    "e2b": Provider(
        "e2b",
        lambda url: config.configure("e2b", base_url=url, sandbox_url=url, api_key=CREDENTIAL),
        lambda url, _: RawE2B(url),
    ),
    "daytona": Provider(
        "daytona",
        lambda url: config.configure("daytona", api_url=url + "/api", api_key=CREDENTIAL),
        lambda url, _: RawDaytona(url + "/api", "bench-raw"),
    ),
}


@dataclass(frozen=True)
class Sizes:
    """How much work the provider measurements do."""

    rounds: int  # pairs per latency figure
    stream_rounds: int  # pairs per throughput figure
    stream_bytes: int  # stdout streamed per throughput sample


def stream_argv(size: int) -> tuple[str, ...]:
    return ("bash", "-c", f"yes {LINE} | head -c {size}")


def ours_spawn(handle: Handle, argv: Sequence[str]) -> RawRun:
    """Spawn ``argv`` and read its frames to ``Exit(0)`` (each wait bounded)."""
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
                return RawRun(first, time.perf_counter() - began, received, 0)
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


@contextlib.contextmanager
def opened(client: RawClient) -> Iterator[RawClient]:
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            client.close()


def measure(provider: Provider, served: Served, sizes: Sizes) -> list[Row]:
    """Rows 1-4 for one provider; each group of rows fails alone."""
    name = provider.name
    provider.point(served.base_url)
    with (
        our_sandbox(name, "bench-ours") as handle,
        opened(provider.raw(served.base_url, handle)) as raw,
    ):
        exec_argv, echo_argv = SDK_ARGV[name]

        def ours_exec() -> None:
            check_code(
                sandbox.exec(handle, exec_argv[0], list(exec_argv[1:]), timeout=WAIT).exit_code
            )

        # A raw client whose protocol has a cheaper call for a command run to its end
        # (Daytona's synchronous session exec) uses it for exec.
        raw_run_to_end = getattr(raw, "exec", raw.run)

        def raw_exec() -> None:
            check_code(raw_run_to_end(exec_argv).code)

        def first(run: Callable[[Sequence[str]], RawRun]) -> Callable[[], float]:
            return lambda: run(echo_argv).first_stdout

        def latency(
            measurement: str,
            ours: Callable[[], float],
            reference: Callable[[], float],
            vs: str,
            *,
            target: Target | None,
            note: str = "",
        ) -> Row:
            """A latency row against ``target`` (None: no target, the ``note`` says why)."""
            row = compared(
                name,
                measurement,
                paired(ours, reference, sizes.rounds),
                unit="ms",
                scale=1000,
                reference_name=vs,
                kind="latency",
                target=target,
            )
            row.note = note
            return row

        def vs_sdk() -> list[Row]:
            exec_name = f"exec {' '.join(exec_argv)}"
            with OPENERS[name](served.base_url) as sdk:
                if sdk.session_exec is None:
                    rows = [
                        latency(
                            exec_name,
                            elapsed(ours_exec),
                            elapsed(sdk.exec),
                            "SDK",
                            target=FASTER_THAN_SDK,
                        )
                    ]
                else:
                    rows = [
                        latency(
                            exec_name,
                            elapsed(ours_exec),
                            elapsed(sdk.exec),
                            "SDK one-shot",
                            target=None,
                            note="no target: another job (merged streams, U+FFFD, a lost "
                            "answer not recoverable); same job: the SDK session row",
                        ),
                        latency(
                            exec_name,
                            elapsed(ours_exec),
                            elapsed(sdk.session_exec),
                            "SDK session",
                            target=AT_MOST_SDK,
                        ),
                    ]
                rows.append(
                    latency(
                        "spawn -> first stdout",
                        first(lambda a: ours_spawn(handle, a)),
                        sdk.first_frame,
                        "SDK",
                        target=FASTER_THAN_SDK,
                    )
                )
                calls = [ours_exec, sdk.exec, raw_exec]
                if sdk.session_exec is not None:
                    calls.append(sdk.session_exec)
                counts = [served.requests_made(fn) for fn in calls]
            note = f"raw client: {counts[2]}"
            if sdk.session_exec is not None:
                note += f", SDK session: {counts[3]}"
            rows.append(
                Row(
                    name,
                    "HTTP requests per exec",
                    ours=counts[0],
                    reference=counts[1],
                    reference_name="SDK",
                    note=note,
                )
            )
            return rows

        size = sizes.stream_bytes
        big = stream_argv(size)

        def throughput(run: Callable[[Sequence[str]], RawRun]) -> Callable[[], float]:
            def sample() -> float:
                found = run(big)
                if found.stdout_bytes != size:
                    raise RuntimeError(f"{found.stdout_bytes} of {size} bytes streamed")
                return found.stdout_bytes / found.total

            return sample

        def stream() -> list[Row]:
            found = paired(
                throughput(lambda a: ours_spawn(handle, a)),
                throughput(raw.run),
                sizes.stream_rounds,
            )
            return [
                compared(
                    name,
                    f"stdout throughput, {size // MIB} MiB",
                    found,
                    unit="MiB/s",
                    scale=1 / MIB,
                    reference_name="raw",
                    kind="throughput",
                    target=SPRITES_THROUGHPUT_VS_RAW if name == "sprites" else THROUGHPUT_VS_RAW,
                )
            ]

        return [
            *guarded(
                name,
                "exec vs raw",
                lambda: [
                    latency(
                        f"exec {' '.join(exec_argv)}",
                        elapsed(ours_exec),
                        elapsed(raw_exec),
                        "raw",
                        target=LATENCY_VS_RAW,
                    )
                ],
            ),
            *guarded(
                name,
                "spawn -> first stdout vs raw",
                lambda: [
                    latency(
                        "spawn -> first stdout",
                        first(lambda a: ours_spawn(handle, a)),
                        first(raw.run),
                        "raw",
                        target=LATENCY_VS_RAW,
                    )
                ],
            ),
            *guarded(name, "vs SDK", vs_sdk),
            *guarded(name, "stdout throughput", stream),
        ]
