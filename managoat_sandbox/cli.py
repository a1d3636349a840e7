"""The ``managoat-sandbox`` command line (also ``python -m managoat_sandbox``).

Every subcommand calls the facade with the provider named by ``--provider``
(else ``$MANAGOAT_SANDBOX_PROVIDER``, else ``local``); ``managoat-sandbox
--help`` documents the commands, the ``--json`` format and the exit statuses.
Expected failures never print a traceback: a ``SandboxError`` is one line
``managoat-sandbox: error: <ErrorClass>: <detail>`` on stderr and status 1;
an unknown provider is one line naming the configured ones and status 2, as
are bad arguments. A sandbox created without isolation is one line
``managoat-sandbox: warning: …`` on stderr, and so is every command on the
built-in ``fake`` provider, whose sandboxes live only as long as the process.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator, Sequence

from . import config
from ._cli import exits
from ._cli.console import Console
from ._cli.parser import PROVIDER_ENV, Handler, build_parser, default_provider
from .contract import IsolationWarning
from .errors import SandboxError, UnknownProvider

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = build_parser(default_provider())
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help and --version (0), or a usage error (2)
        return stop.code if isinstance(stop.code, int) else exits.USAGE
    console = Console(json_mode=args.json)
    handler: Handler = args.handler
    _note_in_process_fake(args.provider, console)
    try:
        with _isolation_warnings(console):
            return handler(args, console)
    except UnknownProvider as error:
        console.failure(error, f" (choose one with --provider or ${PROVIDER_ENV})")
        return exits.USAGE
    except SandboxError as error:
        console.failure(error)
        return exits.ERROR
    except KeyboardInterrupt:
        console.note("interrupted")
        return exits.INTERRUPTED
    except BrokenPipeError:
        _discard_stdout()
        return exits.BROKEN_PIPE


def _note_in_process_fake(provider: str, console: Console) -> None:
    """Warn on stderr, before the command runs, when ``provider`` is ``fake`` and the
    ``adapters`` map does not serve it: the built-in Fake keeps its sandboxes in this
    process's memory, so nothing this command creates is there for the next one. (A
    program that configures a ``fake`` adapter and calls :func:`main` shares it between
    calls, and hears nothing.)"""
    if provider == "fake" and provider not in (config.get(None, "adapters") or {}):
        console.note(
            "warning: the fake provider keeps its sandboxes in this process only: "
            "nothing this command creates is there for the next managoat-sandbox command"
        )


@contextlib.contextmanager
def _isolation_warnings(console: Console) -> Iterator[None]:
    """Print each :class:`IsolationWarning` a command raises as one
    ``managoat-sandbox: warning: …`` line on stderr (after the command's own output,
    whatever ``--json`` says); other warnings go where they would have gone."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", IsolationWarning)
        try:
            yield
        finally:
            for warning in caught:
                if issubclass(warning.category, IsolationWarning):
                    console.note(f"warning: {warning.message}")
                else:
                    warnings.showwarning(
                        warning.message, warning.category, warning.filename, warning.lineno
                    )


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so flushing it at exit does not fail again."""
    with contextlib.suppress(OSError, ValueError):  # no descriptor (captured): nothing to do
        target = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, target)
        os.close(devnull)
