"""Streaming: frames to a callback, frames to a queue, stdin, and reattaching.

Shows the three ways to follow a running command:

1. **A callback** (``owner=callable``): frames arrive on the command's reader
   thread, possibly before ``spawn`` returns. The main thread waits for the
   terminal frame on a ``threading.Event``, with a deadline.
2. **A queue** (``owner=None``: one is made for you) read with
   ``iter_frames(command, timeout=...)``, each wait bounded; with stdin open,
   lines written with ``write_stdin`` round-trip through the command, and
   ``close_stdin`` (EOF) ends it.
3. **Reattaching** to a detachable session (``list_sessions``/``attach``),
   which replays its output from byte zero and then its real exit code —
   only where the provider advertises ``attach`` (``sandbox.supports``).

Run it (the commands are bash, so any provider but the in-memory ``fake``)::

    python examples/streaming.py            # on local
    python examples/streaming.py e2b        # with E2B configured, or its emulator
"""

from __future__ import annotations

import sys
import threading

import managoat_sandbox as sandbox
from managoat_sandbox import Error, Exit, Frame, Handle, Stdout

PROVIDER = sys.argv[1] if len(sys.argv) > 1 else "local"
TIMEOUT = 30.0  # seconds: the most any one wait below may take


def to_a_callback(handle: Handle) -> None:
    """Frames go to a function called on the reader thread; wait on an Event."""
    done = threading.Event()
    ends: list[Frame] = []

    def on_frame(frame: Frame) -> None:
        # Runs on the reader thread. Keep it short: it holds up the next frame.
        if isinstance(frame, Stdout):
            print(f"callback got: {frame.data!r}")
        elif frame.terminal:  # Exit or Error: exactly one, and the last frame
            ends.append(frame)
            done.set()

    script = "for i in 1 2 3; do echo tick $i; done"
    command = sandbox.spawn(handle, "bash", ["-c", script], owner=on_frame)
    try:
        if not done.wait(TIMEOUT):  # a deadline, never a sleep
            raise TimeoutError(f"no exit within {TIMEOUT} s")
    finally:
        sandbox.stop_command(command)  # after this returns, the callback is not called again
    print(f"callback: command ended with {ends[0]!r}")


def to_a_queue_with_stdin(handle: Handle) -> None:
    """Frames go to a queue read with iter_frames; stdin round-trips through bash."""
    # A line-by-line echo that upper-cases what it reads, until stdin's EOF.
    script = 'echo ready; while IFS= read -r line; do echo "echo: ${line^^}"; done'
    command = sandbox.spawn(handle, "bash", ["-c", script], stdin=True)
    to_send = ["hello", "world"]
    pending = b""  # a frame may end mid-line: keep the partial line for the next one
    try:
        for frame in sandbox.iter_frames(command, timeout=TIMEOUT):
            if isinstance(frame, Stdout):
                *lines, pending = (pending + frame.data).split(b"\n")
                for line in lines:
                    print(f"queue got: {line.decode()}")
                    # Each line answers what was sent last ("ready" first): send the next.
                    if to_send:
                        word = to_send.pop(0)
                        print(f"queue: sending {word!r}")
                        sandbox.write_stdin(command, word + "\n")
                    else:
                        sandbox.close_stdin(command)  # EOF: the loop ends, bash exits 0
            elif isinstance(frame, Exit):
                print(f"queue: exit {frame.code}")
            elif isinstance(frame, Error):
                raise frame.reason
    finally:
        sandbox.stop_command(command)


def reattach(handle: Handle) -> None:
    """Detach from a detachable session, then attach to it and replay it from byte zero."""
    if not sandbox.supports(handle, "attach"):
        print(f"{handle.provider} does not advertise attach: skipping reattach")
        return
    script = 'for i in 1 2 3; do echo "session line $i"; done; exit 7'
    command = sandbox.spawn(handle, "bash", ["-c", script], detachable=True)
    sandbox.stop_command(command)  # detach at once: the session runs on without us
    session_id = command.session_id  # None where the provider does not say
    listed = [session.id for session in sandbox.list_sessions(handle)]
    if session_id not in listed:
        print(f"session {session_id} is not listed: skipping reattach")
        return
    print(f"{len(listed)} sessions listed; reattaching to {session_id}")
    replay = sandbox.attach(handle, session_id)
    try:
        for frame in sandbox.iter_frames(replay, timeout=TIMEOUT):
            if isinstance(frame, Stdout):
                print(f"replay: {frame.data!r}")
            elif isinstance(frame, Exit):
                print(f"replay: exit {frame.code}")  # the real code, 7
            elif isinstance(frame, Error):
                raise frame.reason
    finally:
        sandbox.stop_command(replay)


def main() -> int:
    with sandbox.temporary(PROVIDER, prefix="streaming") as handle:
        to_a_callback(handle)
        to_a_queue_with_stdin(handle)
        reattach(handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
