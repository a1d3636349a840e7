"""Argument checks shared by the facade and the adapters.

Malformed types are ``TypeError``; values that are well typed but unusable
(NaN, out of range, a NUL or a lone surrogate in text, nesting too deep) are
``Invalid`` with a message that says what was wrong. No check lets an
``OverflowError``, ``RecursionError``, ``UnicodeEncodeError`` or ``ValueError``
out, whatever the value.
"""

from __future__ import annotations

import math
import os
import re
import reprlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from .errors import Invalid
from .reasons import Reason

SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,256}")
MAX_NAME_LENGTH = 256

#: The longest finite timeout, in seconds (the most a thread may wait); ``inf`` or
#: ``None`` mean no limit where a limit is optional.
MAX_SECONDS = threading.TIMEOUT_MAX

#: How deeply ``data`` given to ``write_file``/``write_stdin`` may nest iterables.
MAX_DATA_DEPTH = 64

#: The largest permission ``mode``: ``0o7777`` (setuid, setgid, sticky, and rwx thrice).
MAX_MODE = 0o7777


_SHOWN = reprlib.Repr()
_SHOWN.maxlevel = 2
_SHOWN.maxstring = 60
_SHOWN.maxother = 60


def shown(value: object) -> str:
    """``value`` for a message: bounded in length and nesting, and never failing (an int
    too long for ``repr`` is shown by its type)."""
    try:
        return _SHOWN.repr(value)
    except Exception:
        return f"<{type(value).__name__}>"


#: The seconds a timeout that may be "no limit" (exec's, ``iter_frames``'s) may be,
#: inclusive; ``None`` or ``inf`` is no limit.
TIMEOUT_RANGE = (0.0, MAX_SECONDS)


def _number(value: object, what: str) -> float:
    """``value`` (an int or float, not a bool) as a float; an int too large for a float
    is ``inf``. Not a number is ``TypeError``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, got {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def seconds(value: object, what: Reason | str = Reason.TIMEOUT) -> float:
    """Return ``value`` as finite seconds: an int or float, not a bool.

    NaN, and anything beyond ``±MAX_SECONDS`` (infinities and ints too large
    for a float included), is ``Invalid(what, problem=<the allowed range, and the
    value>)``; ``what`` is the argument's :class:`~managoat_sandbox.reasons.Reason`
    (or its value).
    A sign is not checked here: a bounded operation's adapter decides its own range
    (:func:`bounded_timeout`).
    """
    number = _number(value, str(what))
    if math.isnan(number) or not -MAX_SECONDS <= number <= MAX_SECONDS:
        raise Invalid(
            Reason(what),
            problem=(
                f"must be a finite number of seconds, at most {MAX_SECONDS:.0f} "
                f"either side of 0, got {shown(value)}"
            ),
        )
    return number


def optional_seconds(value: object, what: Reason = Reason.TIMEOUT) -> float | None:
    """A timeout that may be "no limit": ``None`` or ``inf`` is returned as ``None``;
    otherwise seconds ``0 <= value <= MAX_SECONDS`` (``0``: already expired).

    A negative or NaN value (or one beyond ``MAX_SECONDS``) is ``Invalid((what,
    "must be a number of seconds from 0 to 9223372036, or None or inf for no
    limit, got <value>"))`` (:data:`TIMEOUT_RANGE`): the one rule for exec's
    ``timeout`` and ``iter_frames``'s, which the CLI applies too.
    """
    if value is None or (isinstance(value, float) and value == math.inf):
        return None
    number = _number(value, what)
    low, high = TIMEOUT_RANGE
    if math.isnan(number) or not low <= number <= high:
        bounds = f"from {low:g} to {high:.0f}, or None or inf for no limit"
        raise Invalid(what, problem=f"must be a number of seconds {bounds}, got {shown(value)}")
    return number


def _is_nan(value: float) -> bool:
    """NaN test that an int too large for a float cannot overflow."""
    return isinstance(value, float) and math.isnan(value)


def utf8(value: str) -> bool:
    """Whether ``value`` can be encoded as UTF-8 (no lone surrogate). ASCII text, the
    usual case, is answered without encoding it."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _clean_text(value: str, what: Reason) -> str:
    """``value`` as text every provider carries: no NUL, and UTF-8 (no lone surrogates)."""
    if "\x00" in value:
        raise Invalid(what, problem="must not contain NUL")
    if not utf8(value):
        raise Invalid(what, problem="must be encodable as UTF-8 (no lone surrogates)")
    return value


def str_args(args: object) -> tuple[str, ...]:
    """A sequence of str without NUL (a bare str is a mistake, not a one-letter list)."""
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise TypeError("args must be a sequence of str, not a single string")
    for item in args:
        if not isinstance(item, str):
            raise TypeError(f"args entries must be str, got {type(item).__name__}")
        _clean_text(item, Reason.ARGS)
    return tuple(args)


def command_name(cmd: object) -> str:
    """The program to run: a non-empty str without NUL."""
    if not isinstance(cmd, str):
        raise TypeError(f"cmd must be a str, got {type(cmd).__name__}")
    if not cmd:
        raise Invalid(Reason.CMD, problem="must not be empty", message="cmd must not be empty")
    return _clean_text(cmd, Reason.CMD)


def env_map(env: object) -> dict[str, str] | None:
    """A ``Mapping[str, str]`` copied to a dict, or ``None``.

    A name must be non-empty without ``=`` or NUL and a value without NUL
    (``Invalid``): neither can reach a process's environment.
    """
    if env is None:
        return None
    if not isinstance(env, Mapping):
        raise TypeError(f"env must be a mapping of str to str, got {type(env).__name__}")
    out: dict[str, str] = {}
    for key, value in env.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError("env keys and values must be str")
        if not key or "=" in key:
            raise Invalid(Reason.ENV, problem="a name must be non-empty and must not contain '='")
        out[_clean_text(key, Reason.ENV)] = _clean_text(value, Reason.ENV)
    return out


def optional_str(value: object, what: Reason) -> str | None:
    """``None`` or a str without NUL."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    return _clean_text(value, what)


def flag(value: object, what: str) -> bool:
    """A real bool."""
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be a bool, got {type(value).__name__}")
    return value


def sandbox_name(name: object) -> str:
    """A sandbox name: a non-empty str without NUL or lone surrogates, at most 256
    characters (not a str is ``TypeError``, an unusable str ``Invalid``)."""
    if not isinstance(name, str):
        raise TypeError(f"sandbox name must be a str, got {type(name).__name__}")
    if not name:
        raise _bad_name("must not be empty")
    if "\x00" in name:
        raise _bad_name("must not contain NUL")
    if not utf8(name):
        raise _bad_name("must be encodable as UTF-8 (no lone surrogates)")
    if len(name) > MAX_NAME_LENGTH:
        raise _bad_name(f"is longer than {MAX_NAME_LENGTH} characters")
    return name


def _bad_name(problem: str) -> Invalid:
    return Invalid(Reason.NAME, problem=problem, message=f"sandbox name {problem}")


def session_id(value: object) -> str:
    """A session id: 1-256 characters of ``[A-Za-z0-9_-]``."""
    if not isinstance(value, str) or SESSION_ID.fullmatch(value) is None:
        raise Invalid(Reason.SESSION_ID, problem="must be 1-256 characters of [A-Za-z0-9_-]")
    return value


#: The longest ``write_file`` path, in bytes of UTF-8 (Linux's ``PATH_MAX``).
MAX_PATH_BYTES = 4096


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
        raise Invalid(Reason.PATH, problem="must not be empty")
    _clean_text(path, Reason.PATH)
    if not path.startswith("/"):
        raise Invalid(Reason.PATH, problem=f"must be absolute (start with /), got {path!r}")
    if path.endswith("/"):
        raise Invalid(Reason.PATH, problem=f"must name a file, not end with /, got {path!r}")
    if any(part in (".", "..") for part in path.split("/")):
        raise Invalid(Reason.PATH, problem=f"must not have a . or .. component, got {path!r}")
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        raise Invalid(Reason.PATH, problem=f"is longer than {MAX_PATH_BYTES} bytes")
    return path


def dir_path(path: object) -> str:
    """A directory path ``list_files`` can list: the :func:`file_path` rule, except that
    ``/`` and a trailing ``/`` are fine (the trailing ``/`` is dropped)."""
    if isinstance(path, str) and path.startswith("/"):
        stripped = path.rstrip("/")
        return "/" if not stripped else file_path(stripped)
    return file_path(path)


def max_bytes(value: object) -> int | None:
    """``None`` (no limit) or a number of bytes ``>= 0``; ``TypeError`` for a non-int,
    ``Invalid(("max_bytes", ...))`` for a negative one."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_bytes must be an int or None, got {type(value).__name__}")
    if value < 0:
        raise Invalid(Reason.MAX_BYTES, problem=f"must be >= 0, got {shown(value)}")
    return value


def file_mode(mode: object) -> int | None:
    """``None`` or a permission ``0 <= mode <= 0o7777`` (an int, not a bool).

    Not an int is ``TypeError``; out of range is ``Invalid(("mode", ...))``.
    """
    if mode is None:
        return None
    if isinstance(mode, bool) or not isinstance(mode, int):
        raise TypeError("mode must be an int such as 0o600")
    if not 0 <= mode <= MAX_MODE:
        raise Invalid(
            Reason.MODE, problem=f"must be a permission between 0 and 0o7777, got {shown(mode)}"
        )
    return mode


def flatten_bytes(data: Any) -> bytes:
    """Flatten bytes-like, str (UTF-8) or a nested iterable of those to bytes.

    A wrong type is ``TypeError``; nesting deeper than :data:`MAX_DATA_DEPTH`
    (a self-referential list included) or a str with a lone surrogate is
    ``Invalid``. Iterative, so no input can exhaust the interpreter's stack.
    """
    chunks: list[bytes] = []
    pending: list[Iterator[Any]] = [iter((data,))]
    while pending:
        item = next(pending[-1], _DONE)
        if item is _DONE:
            pending.pop()
        elif isinstance(item, (bytes, bytearray, memoryview)):
            chunks.append(bytes(item))
        elif isinstance(item, str):
            chunks.append(_data_text(item).encode("utf-8"))
        elif isinstance(item, Iterable) and not isinstance(item, Mapping):
            if len(pending) > MAX_DATA_DEPTH:
                raise Invalid(Reason.DATA, problem=f"nested deeper than {MAX_DATA_DEPTH} levels")
            pending.append(iter(item))
        else:
            kind = type(item).__name__
            raise TypeError(f"data must be bytes, str or an iterable of those, got {kind}")
    return b"".join(chunks)


_DONE = object()


def _data_text(text: str) -> str:
    """``text`` as data (NUL is data there), refused only when it is not UTF-8."""
    if not utf8(text):
        raise Invalid(Reason.DATA, problem="must be encodable as UTF-8 (no lone surrogates)")
    return text


def one_of(value: object, known: frozenset[str], what: Reason) -> str:
    """``value`` when it is one of ``known``: not a str is ``TypeError``, another str
    ``Invalid((what, ...))``."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    if value not in known:
        raise Invalid(what, problem=f"must be one of {sorted(known)}, got {shown(value)}")
    return value


TERMINATION_MODES = ("graceful", "force")

#: The longest ``timeout`` a bounded "once" operation takes, in seconds.
BOUNDED_LIMIT = 120.0

#: The seconds ``terminate_session`` may wait for confirmation, inclusive.
TERMINATION_TIMEOUT_RANGE = (0.001, 30.0)


def termination_request(session: object, timeout: object, mode: object) -> tuple[str, int, str]:
    """Validate a ``terminate_session`` request.

    Returns ``(session_id, timeout_ms, mode)``, the timeout in whole
    milliseconds rounded up. Anything malformed is
    ``Invalid("termination_request")``, with a ``message`` naming the argument:
    an id that is not 1-256 characters of ``[A-Za-z0-9_-]``, a timeout that is
    not an int or float (bools excluded) in ``0.001 <= timeout <= 30``
    (:data:`TERMINATION_TIMEOUT_RANGE`), or a mode other than graceful/force.
    """
    if not isinstance(session, str) or SESSION_ID.fullmatch(session) is None:
        raise _bad_termination("session_id must be 1-256 characters of [A-Za-z0-9_-]")
    low, high = TERMINATION_TIMEOUT_RANGE
    bounds = f"timeout must be a number of seconds from {low:g} to {high:g}"
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise _bad_termination(f"{bounds}, got {type(timeout).__name__}")
    if _is_nan(timeout) or not low <= timeout <= high:
        raise _bad_termination(f"{bounds}, got {shown(timeout)}")
    if mode not in TERMINATION_MODES:
        raise _bad_termination(f"mode must be one of {', '.join(TERMINATION_MODES)}")
    return session, termination_ms(timeout), str(mode)


def termination_ms(timeout: float) -> int:
    """A checked ``terminate_session`` timeout in whole milliseconds, rounded up (what an
    adapter sends; the facade has checked the value with :func:`termination_request`)."""
    return math.ceil(timeout * 1000 - 1e-9)


def _bad_termination(message: str) -> Invalid:
    return Invalid(Reason.TERMINATION_REQUEST, message=message)


def bounded_timeout(value: object, limit: float, detail: Reason | str) -> float:
    """A timeout for a bounded "once" operation: ``0 < value <= limit`` seconds.

    Anything else (negative, NaN, bools and non-numbers included) is
    ``Invalid(detail)`` (``detail``: the operation's
    :func:`~managoat_sandbox.reasons.timed_out` reason, or its value), whose
    ``message`` states the allowed range.
    """
    bounds = f"timeout must be a number of seconds more than 0 and at most {limit:g}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Invalid(Reason(detail), message=f"{bounds}, got {type(value).__name__}")
    if _is_nan(value) or not 0 < value <= limit:
        raise Invalid(Reason(detail), message=f"{bounds}, got {shown(value)}")
    return float(value)


def owner(value: object) -> object:
    """``None``, a callable taking a frame, or anything with ``put`` (a queue)."""
    if value is not None and not callable(value) and not callable(getattr(value, "put", None)):
        raise TypeError("owner must be a callable taking a frame, or a queue")
    return value


def local_path(value: object) -> str:
    """A path on this machine: a str or ``os.PathLike`` of str, not empty, without NUL
    (anything else is ``TypeError``; an empty path or a NUL ``Invalid``)."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"local_path must be a str or os.PathLike, got {type(value).__name__}")
    path = os.fspath(value)
    if not isinstance(path, str):
        raise TypeError("local_path must be a path of str, not of bytes")
    if not path:
        raise Invalid(Reason.LOCAL_PATH, problem="must not be empty")
    if "\x00" in path:
        raise Invalid(Reason.LOCAL_PATH, problem="must not contain NUL")
    return path


def progress(value: object) -> object:
    """``None`` or a callable taking a :class:`~managoat_sandbox.types.TransferProgress`."""
    if value is not None and not callable(value):
        raise TypeError("progress must be a callable taking a TransferProgress, or None")
    return value


def _flag_named(what: Reason) -> Callable[[object], bool]:
    return partial(flag, what=what)


def _optional_str_named(what: Reason) -> Callable[[object], str | None]:
    return partial(optional_str, what=what)


#: The one check of each contract parameter, by its name in the contract's signatures:
#: the facade passes every argument through :func:`normalised` before dispatch, so an
#: adapter receives clean values and a new parameter with a known name needs no new code.
CHECKS: dict[str, Callable[[Any], Any]] = {
    "name": sandbox_name,
    "cmd": command_name,
    "args": str_args,
    "env": env_map,
    "dir": _optional_str_named(Reason.DIR),
    "timeout": optional_seconds,
    "stderr_to_stdout": _flag_named(Reason.STDERR_TO_STDOUT),
    "stdin": _flag_named(Reason.STDIN),
    "tty": _flag_named(Reason.TTY),
    "detachable": _flag_named(Reason.DETACHABLE),
    "owner": owner,
    "session_id": session_id,
    "path": file_path,
    "mode": file_mode,
    "data": flatten_bytes,
    "max_bytes": max_bytes,
    "comment": _optional_str_named(Reason.COMMENT),
    "remote_path": file_path,
    "local_path": local_path,
    "progress": progress,
}


def normalised(**values: Any) -> dict[str, Any]:
    """Each value checked and normalised by :data:`CHECKS` under its parameter name
    (``TypeError`` for a wrong type, ``Invalid`` for an unusable value); a name with
    no check is a ``KeyError`` — a programming error, found by the tests."""
    return {name: CHECKS[name](value) for name, value in values.items()}
