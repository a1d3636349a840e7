"""Where the misses of ``docs/performance.md`` come from, measured: ``python bench/breakdown.py``.

Each step adds one thing to the one before it, against one emulator in a
child process, in alternating rounds; the difference of the medians is what
that one thing costs.

* **local**: a sandbox's life, one thing at a time (:mod:`breakdown_local`):
  ``bwrap`` alone with the sandbox's namespaces; with its whole command line
  (mounts, system call filter); running the agent's interpreter; importing
  the agent's modules; our ``create``; ``create`` + ``exec`` + ``destroy``.
  Then an ``exec`` against ``subprocess.run``, each 3,000 times in a row:
  wall time, this process's CPU, and the agent's (from ``/proc``).
* **e2b**: the exec the table measures (envd's ``Start`` stream of
  ``/bin/bash -l -c true``, read to its end-of-stream envelope and then to the
  end of the body, so that every client keeps its connection as ours does)
  made the least way each HTTP library allows: ``urllib3`` alone (which ours
  and ``requests`` sit on), ``httpx``, ``requests`` (the raw client); then the
  SDK's ``commands.run`` (connectrpc over pyqwest, an HTTP client written in
  Rust whose threads do the I/O) and our ``exec``. The first three differ only
  in the library; the last two add what each client does around the request.
  A second table gives the CPU time this process spends per exec (all its
  threads): ``urllib3`` alone, the same stream through our HTTP layer (the
  send path our exec uses: ``HttpClient(direct=True)``), the SDK's call and
  ours — what each adds on a machine whose cores the emulator and the sandbox
  also need.
* **daytona**: the SDK's call (``POST /process/execute`` of ``true``, a fresh
  shell, output merged); the same one-shot execute of the least a script
  must do there to keep stdout and stderr apart and byte-exact
  (:data:`ONE_SHOT_SPLIT`: run the program ``true`` rather than the shell
  builtin, capture each stream in a file, frame both, remove the files) —
  the floor of an exec built on the SDK's call; a synchronous session exec
  of the bare builtin ``true`` (the raw client); the same exec of the shim
  our adapter sends for ``true`` (``shim.exec_script``, made afresh for each
  exec as the adapter makes it: its capture files are named for the exec,
  and every :data:`~managoat_sandbox.providers.daytona.shim.SWEEP_EVERY`-th
  sweeps), posted by ``requests``; our adapter's ``exec(h, "true")`` through
  the facade. Steps
  1-4 are one request each from the same client, so their differences are
  the daemon's work; step 5 minus step 4 is ours. A second table splits one
  synchronous session exec — the raw client's, the SDK's
  ``execute_session_command``, the shim's sent by ``requests``, ours — into
  the emulator's share and the rest, measured inside the emulator's process
  (:mod:`timed_emulator`, which serves the Daytona emulator for this section):
  the time in its handler, of that the daemon's ``execute`` (the sandbox
  running the command and the daemon's wrapper) and the rest of the handler
  (the emulator's HTTP door, proxy, JSON, thread hop), and what lies outside
  the handler (the client, HTTP parsing and writing on both ends, loopback);
  each a median over the rounds, the differences medians of per-round ones.
"""

from __future__ import annotations

import itertools
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence

import breakdown_local
import httpx
import urllib3
from measure import WAIT, elapsed, rotated
from providers import PROVIDERS, our_sandbox
from raw import RawDaytona, RawE2B, envelope
from sdks import open_daytona, open_e2b
from served import emulator_process
from timed_emulator import Spent, Timed, timed_daytona

import managoat_sandbox as sandbox
from managoat_sandbox._http import HttpClient, raw_chunks
from managoat_sandbox.providers.daytona import shim
from managoat_sandbox.providers.e2b.errors import POLICY

ROUNDS = 101
#: A local sandbox's life takes tens of milliseconds a round.
LOCAL_ROUNDS = 31
#: An exec's CPU is read from /proc in clock ticks: enough calls to resolve it.
EXEC_CALLS = 3000
#: The least a one-shot execute must run for ``true`` to keep its streams apart and
#: byte-exact (not what the adapter sends; see the module docstring).
ONE_SHOT_SPLIT = "\n".join(
    [
        'o="${TMPDIR:-/tmp}/.mg-$$.o"; e="${TMPDIR:-/tmp}/.mg-$$.e"',
        '( exec true ) </dev/null >"$o" 2>"$e"; c=$?',
        'for f in "$o" "$e"; do if [ -s "$f" ]; then printf \':\'; base64 "$f" | tr -d \'\\n\';'
        " echo; fi; echo ':'; done",
        'rm -f "$o" "$e" </dev/null >/dev/null 2>&1 &',
        "printf '!%s\\n' \"$c\"",
    ]
)
Step = tuple[str, Callable[[], object]]


def interleaved(steps: Sequence[Step], rounds: int) -> list[tuple[str, float]]:
    """The median seconds of each step over ``rounds`` rounds, the order rotating."""
    found = rotated([elapsed(call) for _, call in steps], rounds)
    return [
        (name, statistics.median(samples)) for (name, _), samples in zip(steps, found, strict=True)
    ]


def cpu_time(fn: Callable[[], object]) -> Callable[[], float]:
    """A sample of the CPU seconds this process (all its threads) spends in one call."""

    def sample() -> float:
        began = time.process_time()
        fn()
        return time.process_time() - began

    return sample


def cpu_interleaved(steps: Sequence[Step], rounds: int) -> list[tuple[str, float]]:
    """The mean CPU seconds of each step over ``rounds`` rounds, the order rotating (CPU
    time is counted in clock ticks: a mean, not a median, resolves it)."""
    found = rotated([cpu_time(call) for _, call in steps], rounds)
    return [
        (name, statistics.mean(samples)) for (name, _), samples in zip(steps, found, strict=True)
    ]


def report(
    title: str, medians: list[tuple[str, float]], *, of: str = "medians", rounds: int = ROUNDS
) -> None:
    print(f"\n{title} ({of} of {rounds} rounds)")
    previous = None
    for name, value in medians:
        step = "" if previous is None else f"   {(value - previous) * 1000:+.2f} ms"
        print(f"  {name:58s} {value * 1000:7.2f} ms{step}")
        previous = value


def _read_to_end(chunks: Iterable[bytes]) -> None:
    """Read Connect envelopes until the end-of-stream one, then the body to its end (a
    body left unread costs its connection: the next request would open another)."""
    buffer = bytearray()
    ended = False
    for chunk in chunks:
        buffer += chunk
        while not ended and len(buffer) >= 5:
            size = int.from_bytes(buffer[1:5], "big")
            if len(buffer) < 5 + size:
                break
            ended = bool(buffer[0] & 0x02)
            del buffer[: 5 + size]
    if not ended:
        raise RuntimeError("body ended without an end-of-stream envelope")


def e2b() -> None:
    argv = ["/bin/bash", "-l", "-c", "true"]
    with emulator_process("e2b") as served, httpx.Client() as modern:
        PROVIDERS["e2b"].point(served.base_url)
        raw = RawE2B(served.base_url)
        pool = urllib3.PoolManager()
        url = f"{served.base_url}/process.Process/Start"
        body = envelope({"process": {"cmd": argv[0], "args": argv[1:]}, "stdin": False})

        def with_urllib3() -> None:
            answer = pool.request(
                "POST", url, body=body, headers=raw.headers, preload_content=False, timeout=WAIT
            )
            _read_to_end(iter(lambda: answer.read1(65536), b""))
            answer.release_conn()

        def with_httpx() -> None:
            with modern.stream("POST", url, content=body, headers=raw.headers, timeout=WAIT) as r:
                _read_to_end(r.iter_raw())

        def with_requests() -> None:
            with raw.http.post(url, data=body, headers=raw.headers, stream=True, timeout=WAIT) as r:
                _read_to_end(r.iter_content(chunk_size=None))

        ours_http = HttpClient(direct=True)

        def with_our_http() -> None:
            with ours_http.open(
                "POST", url, policy=POLICY, timeout=(WAIT, WAIT), headers=raw.headers, data=body
            ) as r:
                _read_to_end(raw_chunks(r))

        try:
            with our_sandbox("e2b", "bench-breakdown") as handle, open_e2b(served.base_url) as sdk:
                ours = (
                    "our exec",
                    lambda: sandbox.exec(handle, argv[0], argv[1:], timeout=WAIT),
                )
                report(
                    "e2b: exec of /bin/bash -l -c true, by HTTP library and client",
                    interleaved(
                        [
                            ("Start stream with urllib3", with_urllib3),
                            ("Start stream with httpx", with_httpx),
                            ("Start stream with requests (the raw client)", with_requests),
                            ("the SDK's commands.run", sdk.exec),
                            ours,
                        ],
                        ROUNDS,
                    ),
                )
                report(
                    "e2b: this process's CPU time per exec",
                    cpu_interleaved(
                        [
                            ("Start stream with urllib3", with_urllib3),
                            ("Start stream through our HTTP layer", with_our_http),
                            ("the SDK's commands.run", sdk.exec),
                            ours,
                        ],
                        ROUNDS,
                    ),
                    of="means",
                )
        finally:
            raw.close()


def daytona_share(served: Timed, steps: Sequence[Step], rounds: int) -> None:
    """Print, per step (one session exec each), its round trip and the emulator's share."""
    found: list[list[Spent]] = [[] for _ in steps]

    def sample(index: int) -> Callable[[], float]:
        def timed() -> float:
            spent = served.spent(steps[index][1])
            found[index].append(spent)
            return spent.round_trip

        return timed

    rotated([sample(n) for n in range(len(steps))], rounds)
    print(
        "\ndaytona: one session exec, in the emulator's process and outside it"
        f" (medians of {rounds} rounds, ms)"
    )
    heads = ("round trip", "handler", "daemon", "handler-daemon", "outside")
    print(f"  {'':58s}" + "".join(f"{head:>15s}" for head in heads))
    for (name, _), samples in zip(steps, found, strict=True):
        spent = samples[1:]  # the warm-up's sample left out
        columns = [
            statistics.median(s.round_trip for s in spent),
            statistics.median(s.handler for s in spent),
            statistics.median(s.daemon for s in spent),
            statistics.median(s.handler - s.daemon for s in spent),
            statistics.median(s.round_trip - s.handler for s in spent),
        ]
        print(f"  {name:58s}" + "".join(f"{value * 1000:15.2f}" for value in columns))


def daytona() -> None:
    with timed_daytona() as served:
        PROVIDERS["daytona"].point(served.base_url)
        raw = RawDaytona(served.base_url + "/api", "bench-breakdown-raw")
        try:
            session_id = raw.session.rsplit("/", 1)[1]
            run = shim.program("true", [], env=None, cwd=None)
            sent = itertools.count(1)

            def shimmed() -> str:
                """The script our adapter would send for this exec in the raw session."""
                sweep = next(sent) % shim.SWEEP_EVERY == 0
                return shim.exec_script(session_id, run, merge=False, sweep=sweep)

            split = raw.http.post(
                raw.toolbox + "/process/execute", json={"command": ONE_SHOT_SPLIT}, timeout=WAIT
            ).json()
            if split != {"exitCode": 0, "result": ":\n:\n!0\n"}:
                raise RuntimeError(f"the one-shot split script answered {split!r}")

            def post(path: str, body: dict[str, object]) -> None:
                raw.http.post(raw.toolbox + path, json=body, timeout=WAIT).raise_for_status()

            with (
                our_sandbox("daytona", "bench-breakdown") as handle,
                open_daytona(served.base_url) as sdk,
            ):
                assert sdk.session_exec is not None
                report(
                    "daytona: exec of true, step by step",
                    interleaved(
                        [
                            (
                                "/process/execute 'true' (the SDK's exec)",
                                lambda: post("/process/execute", {"command": "true"}),
                            ),
                            (
                                "/process/execute, 'true' kept byte-exact and apart",
                                lambda: post("/process/execute", {"command": ONE_SHOT_SPLIT}),
                            ),
                            (
                                "session exec 'true', a shell builtin (the raw client)",
                                lambda: post(raw.session + "/exec", {"command": "true"}),
                            ),
                            (
                                "session exec of our shim for true (requests)",
                                lambda: post(raw.session + "/exec", {"command": shimmed()}),
                            ),
                            (
                                "our exec(h, 'true')",
                                lambda: sandbox.exec(handle, "true", timeout=WAIT),
                            ),
                        ],
                        ROUNDS,
                    ),
                )
                daytona_share(
                    served,
                    [
                        (
                            "session exec 'true', a shell builtin (the raw client)",
                            lambda: post(raw.session + "/exec", {"command": "true"}),
                        ),
                        ("the SDK's session command 'true'", sdk.session_exec),
                        (
                            "session exec of our shim for true (requests)",
                            lambda: post(raw.session + "/exec", {"command": shimmed()}),
                        ),
                        ("our exec(h, 'true')", lambda: sandbox.exec(handle, "true", timeout=WAIT)),
                    ],
                    ROUNDS,
                )
        finally:
            raw.close()


def local() -> None:
    with breakdown_local.steps() as steps:
        report(
            "local: a sandbox's life, step by step",
            interleaved(steps, LOCAL_ROUNDS),
            rounds=LOCAL_ROUNDS,
        )
    print(f"\nlocal: exec true and subprocess.run, {EXEC_CALLS} calls in a row each (means)")
    for name, seconds in breakdown_local.exec_costs(EXEC_CALLS):
        print(f"  {name:58s} {seconds * 1000:7.3f} ms")
    print(f"\nlocal: spawn -> first stdout, by where the sandbox's files are ({ROUNDS} rounds)")
    for name, seconds in breakdown_local.first_frame_places(ROUNDS):
        print(f"  {name:58s} {seconds * 1000:7.3f} ms")


def main(argv: Sequence[str]) -> None:
    for name in argv or ("local", "e2b", "daytona"):
        {"local": local, "e2b": e2b, "daytona": daytona}[name]()


if __name__ == "__main__":
    main(sys.argv[1:])
