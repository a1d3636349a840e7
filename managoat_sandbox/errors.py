"""The closed error taxonomy.

Every operational failure of a contract operation is an instance of one of the
classes below. Each carries ``.detail`` (what went wrong, safe to log: never a
credential) and ``.transient`` (whether an idempotent caller may retry).
Nothing else escapes a contract operation except :class:`UnknownProvider` and
``TypeError`` for arguments of the wrong type (a well-typed value that cannot be
used is :class:`Invalid`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from . import reasons

__all__ = [
    "AlreadyExists",
    "CommandExited",
    "DeadlineExpired",
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

    Instances compare equal when they belong to the same taxonomy class (a
    refinement such as :class:`DeadlineExpired` counts as its taxonomy class)
    with equal ``args``, and pickle like ordinary exceptions, context included.

    Context, each ``None`` unless known: ``status`` and ``body`` (the HTTP
    status and parsed body of the answer the error was made from; read from an
    ``("http", status, body)`` detail when not set), ``request_id`` (the
    provider's id of that request, when it sends one), ``attempts`` (how many
    tries a retried operation made; set by
    :func:`managoat_sandbox.retry.with_backoff`). ``repr`` shows ``status`` and
    ``request_id``.
    """

    transient: ClassVar[bool] = True

    attempts: int | None = None
    request_id: str | None = None
    _status: int | None = None

    #: Context attributes ``repr`` shows when they are set.
    _shown: ClassVar[tuple[str, ...]] = ("status", "request_id")

    def __init__(self, detail: Any = None) -> None:
        super().__init__(detail)
        self.detail = detail

    def __str__(self) -> str:
        text = "" if self.detail is None else repr(self.detail)
        if self.attempts is not None and self.attempts > 1:
            text = f"{text} (after {self.attempts} attempts)".lstrip()
        return text

    def __repr__(self) -> str:
        extra = "".join(
            f", {name}={getattr(self, name)!r}"
            for name in self._shown
            if getattr(self, name) is not None
        )
        return f"{type(self).__name__}({self.detail!r}{extra})"

    @property
    def status(self) -> int | None:
        """The HTTP status this error was made from, else ``None``."""
        if self._status is not None:
            return self._status
        http = self._http_detail()
        return None if http is None else http[0]

    @property
    def body(self) -> Any:
        """The parsed body of the HTTP answer this error was made from, else ``None``."""
        http = self._http_detail()
        return None if http is None else http[1]

    def _http_detail(self) -> tuple[int, Any] | None:
        """``(status, body)`` of an ``("http", status, body)`` detail (the one place that
        reads that shape), else ``None``."""
        detail = self.detail
        if (
            isinstance(detail, tuple)
            and len(detail) == 3
            and detail[0] == reasons.HTTP
            and isinstance(detail[1], int)
        ):
            return detail[1], detail[2]
        return None

    @classmethod
    def taxonomy(cls) -> type[SandboxError]:
        """The closed-set class this error belongs to: itself, or the one it refines
        (``DeadlineExpired.taxonomy()`` is ``Unavailable``)."""
        for klass in cls.__mro__:
            if klass in _TAXONOMY:
                return klass
        return cls

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, SandboxError)
            and self.taxonomy() is other.taxonomy()
            and self.args == other.args
        )

    def __hash__(self) -> int:
        return hash((self.taxonomy(), _hashable(self.args)))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), self.args, dict(self.__dict__))

    def with_context(
        self, *, status: int | None = None, request_id: str | None = None
    ) -> SandboxError:
        """Set the HTTP context this error was made from; returns the error."""
        self._status = status
        self.request_id = request_id
        return self


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
    """A stdin call on a command that can no longer take input.

    ``detail`` is ``"exited"`` when the command has ended (a write raced its
    exit, or an attached session had ended before the attach) and
    ``"detached"`` when ``stop_command`` detached this end — the same on every
    adapter (:data:`managoat_sandbox.reasons.EXITED`, ``DETACHED``).
    """


class RateLimited(SandboxError):
    """Throttled by the provider.

    ``retry_after`` is the provider's advice in seconds, or ``None`` when it
    gave none; it is also the ``detail``.
    """

    def __init__(self, retry_after: float | None = None) -> None:
        super().__init__(retry_after)
        self.retry_after = retry_after


class Unavailable(SandboxError):
    """A 5xx, a timeout, a transport failure, or a stream closed before exit (an
    expired deadline is always its refinement :class:`DeadlineExpired`).

    ``retry_after`` is the provider's advice in seconds when it sent one with the
    answer (a 503 with ``Retry-After`` while a machine boots), else ``None``; the
    retry policy waits at least that long, as it does for :class:`RateLimited`.
    """

    _shown = ("status", "request_id", "retry_after")

    def __init__(self, detail: Any = None, *, retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class DeadlineExpired(Unavailable, TimeoutError):
    """A deadline passed; the ``detail`` says which: exec's (``("exec_timeout",
    seconds)``), :func:`~managoat_sandbox.frames.iter_frames`'s wait for a frame
    (``("frame_timeout", seconds)``), a bounded operation's
    (``"<operation>_timeout"``, ``terminate_session``'s ``"termination_timeout"``
    included) or a request's own bound (``"timeout"``).

    Every expired deadline raises this one type. It is an :class:`Unavailable`
    (transient, its taxonomy class, and equal to the ``Unavailable`` with the
    same detail), so ``except Unavailable`` still catches it, and a built-in
    ``TimeoutError``, so ``except TimeoutError`` does too; catch
    ``DeadlineExpired`` for every expiry at once, without reading details. Its
    ``OSError`` fields (``errno``, ``strerror``, ``filename``) are always ``None``.
    """


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
    _shown = ("reason", "status", "request_id")

    def __init__(self, detail: Any = None, *, reason: str | None = None) -> None:
        super().__init__(detail)
        self.reason = reason

    def __str__(self) -> str:
        if self.reason is None:
            return super().__str__()
        return f"{super().__str__()}: {self.reason}"


class RestoreFailed(SandboxError):
    """A checkpoint restore reported failure."""

    transient = False


class WriteFailed(SandboxError):
    """A stdin write failed for a reason other than the command's exit.

    ``detail`` is ``("transport", kind)`` when the write could not reach the
    command (``kind`` names the failure, an exception class name such as
    ``"ConnectionResetError"``) and ``("refused", code)`` when the provider or
    local agent refused it (``code`` is the agent's refusal code or the
    taxonomy class name of the provider's answer) — the same on every adapter.
    """


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


#: The closed set: every error a contract operation raises is an instance of one of these.
_TAXONOMY: frozenset[type[SandboxError]] = frozenset(
    {
        NotFound,
        Truncated,
        NotSupported,
        AlreadyExists,
        CommandExited,
        RateLimited,
        Unavailable,
        Denied,
        Invalid,
        RestoreFailed,
        WriteFailed,
        ProviderError,
    }
)
