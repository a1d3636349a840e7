"""Argument checks shared by the facade and the adapters.

Malformed types are ``TypeError``, malformed numbers ``ValueError``; values
that are well typed but unusable as sandbox names or session ids are
``Invalid`` with a message that says what was wrong.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .errors import Invalid

SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,256}")
MAX_NAME_LENGTH = 256


def seconds(value: object, what: str = "timeout") -> float:
    """Return ``value`` as seconds: an int or float, not a bool, not NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, got {type(value).__name__}")
    if math.isnan(value):
        raise ValueError(f"{what} must not be NaN")
    return float(value)


def optional_seconds(value: object, what: str = "timeout") -> float | None:
    """Like :func:`seconds`, with ``None`` meaning "no limit"."""
    return None if value is None else seconds(value, what)


def str_args(args: object) -> tuple[str, ...]:
    """A sequence of str (a bare str is a mistake, not a one-letter list)."""
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise TypeError("args must be a sequence of str, not a single string")
    for item in args:
        if not isinstance(item, str):
            raise TypeError(f"args entries must be str, got {type(item).__name__}")
    return tuple(args)


def command_name(cmd: object) -> str:
    """The program to run: a non-empty str."""
    if not isinstance(cmd, str):
        raise TypeError(f"cmd must be a str, got {type(cmd).__name__}")
    if not cmd:
        raise Invalid("cmd must not be empty")
    return cmd


def env_map(env: object) -> dict[str, str] | None:
    """A ``Mapping[str, str]`` copied to a dict, or ``None``."""
    if env is None:
        return None
    if not isinstance(env, Mapping):
        raise TypeError(f"env must be a mapping of str to str, got {type(env).__name__}")
    out: dict[str, str] = {}
    for key, value in env.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError("env keys and values must be str")
        out[key] = value
    return out


def optional_str(value: object, what: str) -> str | None:
    """``None`` or a str."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    return value


def flag(value: object, what: str) -> bool:
    """A real bool."""
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be a bool, got {type(value).__name__}")
    return value


def sandbox_name(name: object) -> str:
    """A sandbox name: a non-empty str without NUL, at most 256 characters."""
    if not isinstance(name, str):
        raise Invalid(f"sandbox name must be a str, got {type(name).__name__}")
    if not name:
        raise Invalid("sandbox name must not be empty")
    if "\x00" in name:
        raise Invalid("sandbox name must not contain NUL")
    if len(name) > MAX_NAME_LENGTH:
        raise Invalid(f"sandbox name is longer than {MAX_NAME_LENGTH} characters")
    return name


def session_id(value: object) -> str:
    """A session id: 1-256 characters of ``[A-Za-z0-9_-]``."""
    if not isinstance(value, str) or SESSION_ID.fullmatch(value) is None:
        raise Invalid(("session_id", "must be 1-256 characters of [A-Za-z0-9_-]"))
    return value


MAX_PATH_BYTES = 4096
MAX_MODE = 0o7777


def file_path(path: object) -> str:
    """A path ``write_file`` can write, the same on every provider.

    It is absolute (providers resolve a relative path against different
    directories: the home, ``/``, or not at all), names a file (no trailing
    ``/``), has no ``.`` or ``..`` component (providers resolve those
    differently around symlinks), no NUL, and is at most 4096 bytes of UTF-8.
    Not a str is ``TypeError``; anything else unusable is
    ``Invalid(("path", <what is wrong>))``.
    """
    if not isinstance(path, str):
        raise TypeError(f"path must be a str, got {type(path).__name__}")
    if not path:
        raise Invalid(("path", "must not be empty"))
    if "\x00" in path:
        raise Invalid(("path", "must not contain NUL"))
    if not path.startswith("/"):
        raise Invalid(("path", f"must be absolute (start with /), got {path!r}"))
    if path.endswith("/"):
        raise Invalid(("path", f"must name a file, not end with /, got {path!r}"))
    if any(part in (".", "..") for part in path.split("/")):
        raise Invalid(("path", f"must not have a . or .. component, got {path!r}"))
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError:
        raise Invalid(("path", "must be encodable as UTF-8 (no lone surrogates)")) from None
    if len(encoded) > MAX_PATH_BYTES:
        raise Invalid(("path", f"is longer than {MAX_PATH_BYTES} bytes"))
    return path


def file_mode(mode: object) -> int | None:
    """``None`` or a permission ``0 <= mode <= 0o7777`` (an int, not a bool).

    Not an int is ``TypeError``; out of range is ``Invalid(("mode", ...))``.
    """
    if mode is None:
        return None
    if isinstance(mode, bool) or not isinstance(mode, int):
        raise TypeError("mode must be an int such as 0o600")
    if not 0 <= mode <= MAX_MODE:
        raise Invalid(("mode", f"must be a permission between 0 and 0o7777, got {mode:#o}"))
    return mode


def flatten_bytes(data: Any) -> bytes:
    """Flatten bytes-like, str (UTF-8) or a nested iterable of those to bytes."""
    chunks: list[bytes] = []
    _flatten_into(data, chunks)
    return b"".join(chunks)


def _flatten_into(data: Any, chunks: list[bytes]) -> None:
    if isinstance(data, (bytes, bytearray, memoryview)):
        chunks.append(bytes(data))
    elif isinstance(data, str):
        chunks.append(data.encode("utf-8"))
    elif isinstance(data, Iterable) and not isinstance(data, Mapping):
        for item in data:
            _flatten_into(item, chunks)
    else:
        kind = type(data).__name__
        raise TypeError(f"data must be bytes, str or an iterable of those, got {kind}")


TERMINATION_MODES = ("graceful", "force")


def termination_request(session: object, timeout: object, mode: object) -> tuple[str, int, str]:
    """Validate a ``terminate_session`` request.

    Returns ``(session_id, timeout_ms, mode)``, the timeout in whole
    milliseconds rounded up. Anything malformed is
    ``Invalid("termination_request")``: an id that is not 1-256 characters of
    ``[A-Za-z0-9_-]``, a timeout that is not an int or float (bools excluded)
    in ``0.001 <= timeout <= 30``, or a mode other than graceful/force.
    """
    if not isinstance(session, str) or SESSION_ID.fullmatch(session) is None:
        raise Invalid("termination_request")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise Invalid("termination_request")
    if math.isnan(timeout) or not 0.001 <= timeout <= 30:
        raise Invalid("termination_request")
    if mode not in TERMINATION_MODES:
        raise Invalid("termination_request")
    return session, math.ceil(timeout * 1000 - 1e-9), str(mode)


def bounded_timeout(value: object, limit: float, detail: str) -> float:
    """A timeout for a bounded "once" operation: ``0 < value <= limit`` seconds.

    Anything else (bools and non-numbers included) is ``Invalid(detail)``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Invalid(detail)
    if math.isnan(value) or not 0 < value <= limit:
        raise Invalid(detail)
    return float(value)
