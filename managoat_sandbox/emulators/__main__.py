"""``python -m managoat_sandbox.emulators <sprites|e2b|daytona> --port N [--host H]``.

Serves that provider's wire protocol until interrupted, printing its base URL
once it accepts connections (then, when it made its own credential, a second
line ``credential: <value>``). Port 0 picks a free port. The credential is
``--token``/``--api-key``, else the first line of ``--credential-file``, else
the provider's environment variable, else a random one (docs/emulators.md).
``--idle-timeout SECONDS`` closes connections silent for that long (default 60).
When it cannot serve (the ``emulators`` extra is not installed, the port is in
use, the host cannot be bound) it says so in one line on stderr, saying what
to do, and exits 1.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import pkgutil
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import MISSING_EXTRA, MissingExtraError
from ._access import read_credential_file

if TYPE_CHECKING:
    from ._server import Emulator


def _emulated() -> list[str]:
    """The providers with an emulator: each subpackage of this package, which exports
    its server class as the one name of its ``__all__`` (imported only when chosen)."""
    package = importlib.import_module(__package__ or "managoat_sandbox.emulators")
    return sorted(found.name for found in pkgutil.iter_modules(package.__path__) if found.ispkg)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m managoat_sandbox.emulators",
        description="Serve a local, protocol-faithful emulator of a sandbox provider.",
    )
    parser.add_argument("provider", choices=_emulated())
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    _add_credential_arguments(parser)
    parser.add_argument(
        "--workdir", default=None, help="where sandboxes live (default: a temp dir)"
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="close a connection silent for this long while none of its requests is "
        "being answered (default 60)",
    )
    return parser


def import_problem(provider: str, error: ImportError | AttributeError) -> str:
    """The one line to print when ``provider``'s emulator cannot be imported:
    :data:`MISSING_EXTRA` when the ``emulators`` extra is not installed."""
    if isinstance(error, MissingExtraError):
        return MISSING_EXTRA
    return f"the {provider} emulator is not available: {error}"


def start_problem(host: str, port: int, cause: BaseException) -> str:
    """The one line to print when the emulator could not start on ``host:port``
    (``cause``: the ``OSError`` of a failed listen, else the failure itself)."""
    if isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE:
        return f"port {port} on {host} is in use; pass --port 0 (a free port) or another port"
    if isinstance(cause, OSError):
        reason = cause.strerror or str(cause)
        return f"cannot listen on {host} port {port}: {reason}; check --host and --port"
    return f"the emulator failed to start: {cause!r}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one emulator in the foreground until SIGINT/SIGTERM (see the module docstring)."""
    args = _parser().parse_args(argv)
    module_name = f"{__package__}.{args.provider}"
    try:
        module = importlib.import_module(module_name)
        (class_name,) = module.__all__
        emulator_class = getattr(module, class_name)
    except (ImportError, AttributeError) as error:
        print(import_problem(args.provider, error), file=sys.stderr)
        return 1
    try:
        credential = _credential(args)
    except (OSError, ValueError) as error:
        print(f"cannot read the credential file: {error}", file=sys.stderr)
        return 1
    try:
        emulator = emulator_class(
            host=args.host,
            port=args.port,
            credential=credential,
            workdir=args.workdir,
            **_idle_timeout(args),
        )
    except ValueError as error:
        print(f"cannot serve: {error}", file=sys.stderr)
        return 1
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        emulator.start()
    except RuntimeError as error:
        emulator.stop()
        print(start_problem(args.host, args.port, error.__cause__ or error), file=sys.stderr)
        return 1
    print(_banner(emulator), flush=True)
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        emulator.stop()
    return 0


def _add_credential_arguments(parser: argparse.ArgumentParser) -> None:
    """``--token``/``--api-key`` and ``--credential-file``."""
    given = parser.add_mutually_exclusive_group()
    given.add_argument(
        "--token",
        "--api-key",
        dest="credential",
        default=None,
        help="the only credential accepted (visible in ps: prefer "
        "--credential-file or the provider's environment variable; "
        "with none of them a random one is made and printed)",
    )
    given.add_argument(
        "--credential-file",
        default=None,
        help="a file whose first line is the only credential accepted",
    )


def _credential(args: argparse.Namespace) -> str | None:
    """The credential the command line gives, if any (OSError/ValueError for a bad file)."""
    if args.credential_file is not None:
        return read_credential_file(args.credential_file)
    return args.credential  # type: ignore[no-any-return]


def _idle_timeout(args: argparse.Namespace) -> dict[str, float]:
    """``idle_timeout`` for the emulator when ``--idle-timeout`` gives one."""
    return {} if args.idle_timeout is None else {"idle_timeout": args.idle_timeout}


def _banner(emulator: Emulator) -> str:
    """The base URL, and the credential when the emulator made it (nobody else knows it)."""
    if emulator.credential_generated:
        return f"{emulator.base_url}\ncredential: {emulator.credential}"
    return emulator.base_url


if __name__ == "__main__":
    sys.exit(main())
