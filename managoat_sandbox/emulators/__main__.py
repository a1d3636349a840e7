"""``python -m managoat_sandbox.emulators <sprites|e2b|daytona> --port N [--host H]``.

Serves that provider's wire protocol until interrupted, printing its base URL
once it accepts connections. Port 0 picks a free port.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from collections.abc import Sequence

PROVIDERS = {
    "sprites": ("managoat_sandbox.emulators.sprites", "SpritesEmulator"),
    "e2b": ("managoat_sandbox.emulators.e2b", "E2BEmulator"),
    "daytona": ("managoat_sandbox.emulators.daytona", "DaytonaEmulator"),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one emulator in the foreground until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(
        prog="python -m managoat_sandbox.emulators",
        description="Serve a local, protocol-faithful emulator of a sandbox provider.",
    )
    parser.add_argument("provider", choices=sorted(PROVIDERS))
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--token", "--api-key", dest="credential", default=None,
                        help="the only credential accepted (default: the provider's "
                             "environment variable, else any)")
    parser.add_argument("--workdir", default=None,
                        help="where sandboxes live (default: a temp dir)")
    args = parser.parse_args(argv)
    module_name, class_name = PROVIDERS[args.provider]
    try:
        emulator_class = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as error:
        print(f"emulator for {args.provider} is not available: {error}", file=sys.stderr)
        return 1
    emulator = emulator_class(host=args.host, port=args.port, credential=args.credential,
                              workdir=args.workdir)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    emulator.start()
    print(emulator.base_url, flush=True)
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
