"""A CI job: fan one command out to N sandboxes from a thread pool, streaming live.

Each job gets its own throwaway sandbox (``sandbox.temporary``: created fresh,
destroyed when the job ends, also on an error or Ctrl-C) and runs a multi-line
command in it with ``spawn``. Output is printed as it arrives, each line
prefixed by its job; a frame may carry several lines or part of one, so the
bytes are split into whole lines per job and stream before they are printed.
The script exits 0 when every command exited 0, and 1 otherwise — what a CI
step needs.

Run it (the ``local`` provider needs no account and no network)::

    python examples/ci_fanout.py                 # 4 jobs on local
    python examples/ci_fanout.py local 8         # 8 jobs
    python examples/ci_fanout.py fake            # the in-memory Fake (a scripted command)

The command each job runs is a bash script, ``$JOB`` being the job's number;
set ``CI_FANOUT_COMMAND`` to run your own, e.g. one that fails on job 2::

    CI_FANOUT_COMMAND='echo testing $JOB; [ "$JOB" != 2 ]' python examples/ci_fanout.py
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import managoat_sandbox as sandbox
from managoat_sandbox import Error, Exit, Stderr, Stdout

PROVIDER = sys.argv[1] if len(sys.argv) > 1 else "local"
JOBS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
FRAME_TIMEOUT = 60.0  # seconds to wait for each frame before giving a job up

# The default script prints a few lines, the last one in two writes (a frame may
# then hold half a line: it is still printed whole).
DEFAULT_SCRIPT = (
    'for step in 1 2 3; do echo "step $step of job $JOB"; done; '
    'printf "job $JOB: all "; printf "steps done\\n"'
)
SCRIPT = os.environ.get("CI_FANOUT_COMMAND", DEFAULT_SCRIPT)

print_lock = threading.Lock()  # one whole line at a time, whichever thread prints


class LinePrinter:
    """Turns one stream's chunks into whole lines, each printed with a prefix."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.pending = b""

    def feed(self, data: bytes) -> None:
        """Print every line ``data`` completes; keep a trailing partial line."""
        *lines, self.pending = (self.pending + data).split(b"\n")
        for line in lines:
            self._print(line)

    def flush(self) -> None:
        """Print what is left of a last line that had no newline."""
        if self.pending:
            self._print(self.pending)
            self.pending = b""

    def _print(self, line: bytes) -> None:
        with print_lock:
            print(f"{self.prefix} {line.decode(errors='replace')}", flush=True)


def command_for(job: int) -> tuple[str, list[str], dict[str, str]]:
    """The command, its arguments and environment for ``job`` on this provider."""
    if PROVIDER == "fake":  # the Fake runs scripts of its own vocabulary, not bash
        return "emit", [f"out:step 1 of job {job}\nstep 2", f"out: of job {job}\n", "exit:0"], {}
    return "bash", ["-c", SCRIPT], {"JOB": str(job)}


def run_job(job: int) -> int:
    """Run one job in a sandbox of its own, streaming its output; its exit code."""
    out = LinePrinter(f"[job {job}]")
    err = LinePrinter(f"[job {job} stderr]")
    cmd, args, env = command_for(job)
    with sandbox.temporary(PROVIDER, prefix=f"ci-job{job}") as handle:
        # owner=None: frames go to a bounded queue made for this command.
        command = sandbox.spawn(handle, cmd, args, env=env)
        code = 1  # stays 1 unless an Exit frame says otherwise
        try:
            # Each wait is bounded: a silent command raises DeadlineExpired, never hangs.
            for frame in sandbox.iter_frames(command, timeout=FRAME_TIMEOUT):
                if isinstance(frame, Stdout):
                    out.feed(frame.data)
                elif isinstance(frame, Stderr):
                    err.feed(frame.data)
                elif isinstance(frame, Exit):  # the real exit code, exactly once
                    code = frame.code
                elif isinstance(frame, Error):  # the transport failed: no exit code
                    err.feed(f"lost the command: {frame.reason!r}\n".encode())
                    code = 1
        finally:
            sandbox.stop_command(command)  # detach this end; idempotent
    out.flush()
    err.flush()
    return code


def main() -> int:
    # Threads are fine: every call blocks, and one adapter serves every thread.
    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        codes = list(pool.map(run_job, range(1, JOBS + 1)))
    for job, code in enumerate(codes, start=1):
        print(f"job {job}: exit {code}")
    failed = [job for job, code in enumerate(codes, start=1) if code != 0]
    print(f"{len(failed)} of {JOBS} jobs failed" if failed else f"all {JOBS} jobs passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
