"""Where the misses of ``docs/performance.md`` come from, measured: ``python bench/breakdown.py``.

Each step adds one thing to the one before it, against one emulator in a
child process, in alternating rounds; the difference of the medians is what
that one thing costs.

* **e2b**: the same ``GET /health`` of the emulator through ``requests`` (what
  our adapters use) and through ``httpx`` (what the E2B SDK uses): the
  per-request cost of the HTTP library alone.
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
from collections.abc import Callable, Sequence

import httpx
import requests
from measure import WAIT, elapsed, rotated
from providers import PROVIDERS, our_sandbox
from raw import CREDENTIAL, RawDaytona
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


def report(title: str, medians: list[tuple[str, float]]) -> None:
    print(f"\n{title} (medians of {ROUNDS} rounds)")
    previous = None
    for name, value in medians:
        step = "" if previous is None else f"   {(value - previous) * 1000:+.2f} ms"
        print(f"  {name:58s} {value * 1000:7.2f} ms{step}")
        previous = value


def e2b() -> None:
    with emulator_process("e2b") as served, requests.Session() as plain, httpx.Client() as modern:
        url = f"{served.base_url}/health"
        plain.headers["X-API-Key"] = modern.headers["X-API-Key"] = CREDENTIAL
        report(
            "e2b: one GET of the same emulator",
            interleaved(
                [
                    (
                        "httpx.Client (the E2B SDK's library)",
                        lambda: modern.get(url, timeout=WAIT).raise_for_status(),
                    ),
                    (
                        "requests.Session (ours)",
                        lambda: plain.get(url, timeout=WAIT).raise_for_status(),
                    ),
                ],
                ROUNDS,
            ),
        )


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
