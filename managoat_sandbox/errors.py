"""The closed error taxonomy.

Every operational failure of a contract operation is an instance of one of the
classes below. Each carries ``.detail`` (what went wrong, safe to log: never a
credential) and ``.transient`` (whether an idempotent caller may retry).
Nothing else escapes a contract operation except :class:`UnknownProvider` and
``TypeError``/``ValueError`` for malformed arguments.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

__all__ = [
    "AlreadyExists",
    "CommandExited",
    "Denied",
    "Invalid",
    "NotFound",
    "NotSupported",
    "ProviderError",
    "RateLimited",
    "RestoreFailed",
    "SandboxError",
    "Truncated",
    "Unavailable",
    "UnknownProvider",
    "WriteFailed",
]


class SandboxError(Exception):
    """Base of the taxonomy; never raised itself.

    Instances compare equal when they are of the same class with equal
    ``args``, and pickle like ordinary exceptions.
    """

    transient: ClassVar[bool] = True

    #: How many attempts a retried operation made before raising this (set by
    #: :func:`managoat_sandbox.retry.with_backoff`; ``None`` for a single try).
    attempts: int | None = None

    def __init__(self, detail: Any = None) -> None:
        super().__init__(detail)
        self.detail = detail

    def __str__(self) -> str:
        text = "" if self.detail is None else repr(self.detail)
        if self.attempts is not None and self.attempts > 1:
            text = f"{text} (after {self.attempts} attempts)".lstrip()
        return text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.detail!r})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.args == getattr(other, "args", None)

    def __hash__(self) -> int:
        return hash((type(self), _hashable(self.args)))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), self.args, dict(self.__dict__))


def _hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


class NotFound(SandboxError):
    """The sandbox or session definitively does not exist."""

    transient = False


class Truncated(SandboxError):
    """A listing refused to return a partial view."""

    transient = False


class NotSupported(SandboxError):
    """The adapter does not implement this, or the capability is off."""

    transient = False


class AlreadyExists(SandboxError):
    """``create_new`` refused an existing name; nothing was adopted."""

    transient = False


class CommandExited(SandboxError):
    """A stdin write raced the command's exit, or the handle was detached."""


class RateLimited(SandboxError):
    """Throttled by the provider.

    ``retry_after`` is the provider's advice in seconds, or ``None`` when it
    gave none; it is also the ``detail``.
    """

    def __init__(self, retry_after: float | None = None) -> None:
        super().__init__(retry_after)
        self.retry_after = retry_after


class Unavailable(SandboxError):
    """A 5xx, a timeout, a transport failure, or a stream closed before exit.

    ``retry_after`` is the provider's advice in seconds when it sent one with the
    answer (a 503 with ``Retry-After`` while a machine boots), else ``None``; the
    retry policy waits at least that long, as it does for :class:`RateLimited`.
    """

    def __init__(self, detail: Any = None, *, retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class Denied(SandboxError):
    """401/403, or no credential configured: a permanent credential problem."""

    transient = False


class Invalid(SandboxError):
    """Any other 4xx, an unfollowed 3xx, or a bad value from the caller.

    ``reason`` (optional) says in words what was wrong — which argument and
    what it must be — for people: it is part of ``str()`` and ``repr()``, not of
    ``detail``, ``args`` or equality, so ``detail`` stays the machine-readable
    key callers match on.
    """

    transient = False

    def __init__(self, detail: Any = None, *, reason: str | None = None) -> None:
        super().__init__(detail)
        self.reason = reason

    def __str__(self) -> str:
        if self.reason is None:
            return super().__str__()
        return f"{super().__str__()}: {self.reason}"

    def __repr__(self) -> str:
        if self.reason is None:
            return super().__repr__()
        return f"Invalid({self.detail!r}, reason={self.reason!r})"


class RestoreFailed(SandboxError):
    """A checkpoint restore reported failure."""

    transient = False


class WriteFailed(SandboxError):
    """A stdin write failed for a reason other than the command's exit."""


class ProviderError(SandboxError):
    """Escape hatch for an answer the adapter does not recognise."""

    def __init__(self, provider: str, detail: Any = None) -> None:
        Exception.__init__(self, provider, detail)
        self.provider = provider
        self.detail = detail

    def __str__(self) -> str:
        return f"{self.provider}: {self.detail!r}"

    def __repr__(self) -> str:
        return f"ProviderError({self.provider!r}, {self.detail!r})"


class UnknownProvider(ValueError):
    """No adapter is registered under the provider name.

    Its message names the configured providers.
    """

    def __init__(self, provider: object, configured: Iterable[str] = ()) -> None:
        names = sorted(configured)
        super().__init__(f"unknown sandbox provider {provider!r} — configured: {names!r}")
        self.provider = provider
        self.configured = names

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.provider, self.configured))
