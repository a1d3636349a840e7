"""Quickstart: create a sandbox, run a command, stream another, reattach, clean up.

Runs on the embedded ``local`` provider (processes on this machine, isolated
in their own namespaces where the host allows it; no account, no network).
Pass another provider name as the first argument to try it there, e.g.
``python examples/quickstart.py fake``.
"""

from __future__ import annotations

import sys

import managoat_sandbox as sandbox
from managoat_sandbox import Exit, Stderr, Stdout

PROVIDER = sys.argv[1] if len(sys.argv) > 1 else "local"
SCRIPTS = {
    "fake": {
        "exec": ("emit", ["out:hello from the sandbox\n", "exit:0"]),
        "spawn": ("emit", ["out:ready\n", "stay"]),
    },
}
DEFAULT = {
    "exec": ("bash", ["-lc", "echo hello from $(uname -s)"]),
    "spawn": ("bash", ["-c", "echo ready; exec cat"]),
}


def main() -> int:
    scripts = SCRIPTS.get(PROVIDER, DEFAULT)
    # A fresh sandbox for the block, destroyed when it ends (also on an error or Ctrl-C).
    with sandbox.temporary(PROVIDER, prefix="quickstart") as handle:
        info = sandbox.get(handle)
        isolation = info.raw.get("isolation") if isinstance(info.raw, dict) else None
        shown = f", isolation: {isolation}" if isolation else ""
        print(f"created {handle!r}: {info.status}{shown}")
        output, code = sandbox.exec(handle, *scripts["exec"], timeout=30)
        print(f"exec -> exit {code}: {output.decode().strip()}")

        command = sandbox.spawn(handle, *scripts["spawn"], stdin=True, detachable=True)
        frames = sandbox.iter_frames(command, timeout=10)
        print(f"spawn -> {next(frames).data.decode().strip()}")  # type: ignore[union-attr]
        sandbox.write_stdin(command, "ping\n")
        print(f"stdin round trip -> {next(frames).data.decode().strip()}")  # type: ignore[union-attr]

        [session] = sandbox.list_sessions(handle)
        replay = sandbox.attach(handle, session.id)
        sandbox.close_stdin(command)
        for frame in sandbox.iter_frames(replay, timeout=10):
            if isinstance(frame, (Stdout, Stderr)):
                print(f"attach replay -> {frame.data.decode().strip()!r}")
            elif isinstance(frame, Exit):
                print(f"attach replay -> exit {frame.code}")
        sandbox.stop_command(command)
    print("destroyed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
