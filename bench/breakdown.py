"""Where the misses of ``docs/performance.md`` come from, measured: ``python bench/breakdown.py``.

Each step adds one thing to the one before it, against one emulator in a
child process, in alternating rounds; the difference of the medians is what
that one thing costs.

* **e2b**: the exec the table measures (envd's ``Start`` stream of
  ``/bin/bash -l -c true``, read to its end-of-stream envelope) made the
  least way each HTTP library allows: ``urllib3`` alone (which ours and
  ``requests`` sit on), ``httpx`` (what the E2B SDK uses), ``requests``
  (the raw client); then the SDK's ``commands.run`` and our ``exec``. The
  first three differ only in the library; the last two add what each
  client does around the request. A second table gives the CPU time this
  process spends per exec (all its threads): ``urllib3`` alone, the same
  stream through ``requests``' transport adapter (the send path ours
  uses), the SDK's call and ours — what each adds on a machine whose cores
  the emulator and the sandbox also need.
* **daytona**: the SDK's call (``POST /process/execute`` of ``true``, a fresh
  shell, output merged); the same one-shot execute of the least a script
  must do there to keep stdout and stderr apart and byte-exact
  (:data:`ONE_SHOT_SPLIT`: run the program ``true`` rather than the shell
  builtin, capture each stream in a file, frame both, remove the files) —
  the floor of an exec built on the SDK's call; a synchronous session exec
  of the bare builtin ``true`` (the raw client); the same exec of the shim
  our adapter sends for ``true`` (``shim.exec_script``), posted by
  ``requests``; our adapter's ``exec(h, "true")`` through the facade. Steps
  1-4 are one request each from the same client, so their differences are
  the daemon's work; step 5 minus step 4 is ours.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence

import httpx
import requests
import urllib3
from measure import WAIT, elapsed, rotated
from providers import PROVIDERS, our_sandbox
from raw import RawDaytona, RawE2B, envelope
from sdks import open_e2b
from served import emulator_process

import managoat_sandbox as sandbox
from managoat_sandbox.providers.daytona import shim

ROUNDS = 101
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


def report(title: str, medians: list[tuple[str, float]], *, of: str = "medians") -> None:
    print(f"\n{title} ({of} of {ROUNDS} rounds)")
    previous = None
    for name, value in medians:
        step = "" if previous is None else f"   {(value - previous) * 1000:+.2f} ms"
        print(f"  {name:58s} {value * 1000:7.2f} ms{step}")
        previous = value


def _read_to_end(chunks: Iterable[bytes]) -> None:
    """Read Connect envelopes until the end-of-stream one."""
    buffer = bytearray()
    for chunk in chunks:
        buffer += chunk
        while len(buffer) >= 5:
            size = int.from_bytes(buffer[1:5], "big")
            if len(buffer) < 5 + size:
                break
            flags = buffer[0]
            del buffer[: 5 + size]
            if flags & 0x02:
                return
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

        transport = raw.http.get_adapter(url)

        def with_transport() -> None:
            request = requests.Request("POST", url, data=body, headers=raw.headers).prepare()
            with transport.send(request, stream=True, timeout=WAIT) as r:
                _read_to_end(iter(lambda: r.raw.read1(65536), b""))

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
                            ("Start stream with httpx (the SDK's library)", with_httpx),
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
                            ("Start stream through requests' transport adapter", with_transport),
                            ("the SDK's commands.run", sdk.exec),
                            ours,
                        ],
                        ROUNDS,
                    ),
                    of="means",
                )
        finally:
            raw.close()


def daytona() -> None:
    with emulator_process("daytona") as served:
        PROVIDERS["daytona"].point(served.base_url)
        raw = RawDaytona(served.base_url + "/api", "bench-breakdown-raw")
        try:
            session_id = raw.session.rsplit("/", 1)[1]
            shimmed = shim.exec_script(
                session_id, shim.program("true", [], env=None, cwd=None), merge=False
            )
            split = raw.http.post(
                raw.toolbox + "/process/execute", json={"command": ONE_SHOT_SPLIT}, timeout=WAIT
            ).json()
            if split != {"exitCode": 0, "result": ":\n:\n!0\n"}:
                raise RuntimeError(f"the one-shot split script answered {split!r}")

            def post(path: str, body: dict[str, object]) -> None:
                raw.http.post(raw.toolbox + path, json=body, timeout=WAIT).raise_for_status()

            with our_sandbox("daytona", "bench-breakdown") as handle:
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
                                lambda: post(raw.session + "/exec", {"command": shimmed}),
                            ),
                            (
                                "our exec(h, 'true')",
                                lambda: sandbox.exec(handle, "true", timeout=WAIT),
                            ),
                        ],
                        ROUNDS,
                    ),
                )
        finally:
            raw.close()


def main(argv: Sequence[str]) -> None:
    for name in argv or ("e2b", "daytona"):
        {"e2b": e2b, "daytona": daytona}[name]()


if __name__ == "__main__":
    main(sys.argv[1:])
