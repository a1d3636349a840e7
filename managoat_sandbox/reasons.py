"""The reasons the library puts in error details, named once.

An error's ``detail`` is a reason string, or a tuple whose first element is
one (``Unavailable(("exec_timeout", 0.5))``). Code that decides by reason
compares :func:`reason_of` with a constant here instead of indexing details
or repeating the string.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CLOSED_BEFORE_EXIT",
    "COMMAND_TOO_LARGE",
    "DETACHED",
    "DIR",
    "EXEC_TIMEOUT",
    "EXITED",
    "FRAME_TIMEOUT",
    "HTTP",
    "MAX_BYTES",
    "PATH",
    "REFUSED",
    "RESPONSE_TOO_LARGE",
    "SANDBOX_NOT_RUNNING",
    "STDIN_NOT_OPEN",
    "TERMINATION_REQUEST",
    "TERMINATION_TIMEOUT",
    "TERMINATION_TRANSPORT_FAILED",
    "TERMINATION_UNCONFIRMED",
    "TIMEOUT",
    "TRANSFER",
    "TRANSPORT",
    "no_such_dir",
    "reason_of",
    "timed_out",
    "transport_failed",
    "unconfirmed",
    "write_failure",
]

#: A stream ended without the command's exit: never a guessed code.
CLOSED_BEFORE_EXIT = "closed_before_exit"
#: ``exec``'s deadline passed: ``("exec_timeout", seconds)``.
EXEC_TIMEOUT = "exec_timeout"
#: ``iter_frames``'s wait for the next frame passed: ``("frame_timeout", seconds)``.
FRAME_TIMEOUT = "frame_timeout"
#: A request or stream waited past its own bound.
TIMEOUT = "timeout"
#: The connection failed: ``("transport", kind, "host:port")``; a stdin write's
#: ``WriteFailed(("transport", kind))``.
TRANSPORT = "transport"
#: A non-2xx HTTP answer: ``("http", status, body)``.
HTTP = "http"
#: An answer larger than the client reads: ``("response_too_large", limit)``.
RESPONSE_TOO_LARGE = "response_too_large"
#: A file larger than ``read_file``'s ``max_bytes``: ``("max_bytes", n)``.
MAX_BYTES = "max_bytes"
#: A stdin call on a command that has ended (a write that raced its exit, or an attached
#: session that had ended before the attach): ``CommandExited("exited")``.
EXITED = "exited"
#: A stdin call on a command whose local end was stopped: ``CommandExited("detached")``.
DETACHED = "detached"
#: A stdin write the provider (or local agent) answered with a refusal:
#: ``WriteFailed(("refused", code))`` (:func:`write_failure`).
REFUSED = "refused"
#: A stdin call on a command started without stdin, or after EOF.
STDIN_NOT_OPEN = "stdin_not_open"
#: ``upload``/``download``: the sandbox's ``tar`` failed, or sent no usable archive:
#: ``Invalid(("transfer", "<what it said>"))``.
TRANSFER = "transfer"
#: A malformed ``terminate_session`` request.
TERMINATION_REQUEST = "termination_request"
#: The provider did not confirm a termination in time.
TERMINATION_UNCONFIRMED = "termination_unconfirmed"
#: ``terminate_session``'s bound passed.
TERMINATION_TIMEOUT = "termination_timeout"
#: ``terminate_session`` could not reach the provider.
TERMINATION_TRANSPORT_FAILED = "termination_transport_failed"
#: The provider refused because the sandbox is not running (Daytona).
SANDBOX_NOT_RUNNING = "sandbox_not_running"
#: A command too large for the provider to record (Daytona).
COMMAND_TOO_LARGE = "command_too_large"
#: ``exec`` or ``spawn`` was given a ``dir`` the sandbox cannot enter (:func:`no_such_dir`).
DIR = "dir"
#: A file call's path: ``("path", path)`` (of a ``NotFound`` or a ``Denied``), or
#: ``("path", code)`` (of an ``Invalid`` path, its refusal's code).
PATH = "path"


def timed_out(operation: str) -> str:
    """A bounded "once" operation's deadline passed: ``"<operation>_timeout"``."""
    return f"{operation}_timeout"


def transport_failed(operation: str) -> str:
    """A bounded "once" operation could not reach the provider."""
    return f"{operation}_transport_failed"


def unconfirmed(operation: str) -> str:
    """A bounded "once" operation's outcome could not be confirmed."""
    return f"{operation}_unconfirmed"


def write_failure(error: Any) -> tuple[str, str]:
    """The detail of the ``WriteFailed`` a stdin write raises from a provider's error:
    ``("transport", kind)`` when the connection failed (``kind`` from its
    ``("transport", kind, "host:port")`` detail), else ``("refused", name)`` with the
    error's class name (``"Invalid"``, ``"Unavailable"``…)."""
    detail = getattr(error, "detail", None)
    if reason_of(detail) == TRANSPORT and isinstance(detail, tuple) and len(detail) > 1:
        return (TRANSPORT, str(detail[1]))
    return (REFUSED, type(error).__name__)


def no_such_dir(dir: str) -> tuple[str, str]:
    """The detail of the ``Invalid`` an ``exec`` or ``spawn`` in ``dir`` raises when ``dir``
    is not a directory in the sandbox: ``("dir", message)``."""
    return (DIR, f"{dir!r} is not a directory in the sandbox")


def reason_of(value: Any) -> str | None:
    """The reason of an error (or of a detail): the detail itself when it is a str, its
    first element when it is a tuple starting with a str, else ``None``."""
    detail = getattr(value, "detail", value)
    if isinstance(detail, str):
        return detail
    if isinstance(detail, tuple) and detail and isinstance(detail[0], str):
        return detail[0]
    return None
