"""The closed error taxonomy.

Every operational failure of a contract operation is an instance of one of the
classes below. Each carries ``.detail`` (what went wrong, safe to log: never a
credential) and ``.transient`` (whether an idempotent caller may retry).
Nothing else escapes a contract operation except :class:`UnknownProvider` and
``TypeError`` for arguments of the wrong type (a well-typed value that cannot be
used is :class:`Invalid`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from .reasons import Reason, shape

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

    Built from a :class:`~managoat_sandbox.reasons.Reason` and the keyword fields
    that reason carries (:func:`~managoat_sandbox.reasons.shape`):
    ``Invalid(Reason.PATH, problem="must not be empty")``. The error keeps
    ``reason`` and every field (:data:`~managoat_sandbox.reasons.FIELDS`; ``None``
    when not given) as attributes and builds ``detail`` from them — the reason's
    value alone, or ``(value, field, ...)`` in the shape's order. A field the
    reason does not carry is a ``TypeError``. A detail given as it is (a tuple or
    a string, as adapters written before reasons did) is kept as it is, and
    ``reason`` and the fields are read from it when it starts with a reason.

    ``message`` (optional) says in words what went wrong, for people: it is part
    of ``str()`` and ``repr()``, not of ``detail``, ``args`` or equality.

    Instances compare equal when they belong to the same taxonomy class (a
    refinement such as :class:`DeadlineExpired` counts as its taxonomy class)
    with equal ``args``, and pickle like ordinary exceptions, context included.

    Context beyond the fields, each ``None`` unless known: ``request_id`` (the
    provider's id of the request, when it sends one), ``attempts`` (how many
    tries a retried operation made; set by
    :func:`managoat_sandbox.retry.with_backoff`). ``repr`` shows ``message``,
    ``status`` and ``request_id``.
    """

    transient: ClassVar[bool] = True

    attempts: int | None = None
    request_id: str | None = None
    reason: Reason | None = None
    status: int | None = None
    body: Any = None
    kind: str | None = None
    address: str | None = None
    seconds: float | None = None
    limit: int | None = None
    count: int | None = None
    scope: str | None = None
    key: str | None = None
    name: str | None = None
    state: str | None = None
    code: Any = None
    path: str | None = None
    problem: str | None = None
    answer: str | None = None
    message: str | None = None

    #: Context attributes ``repr`` shows when they are set.
    _shown: ClassVar[tuple[str, ...]] = ("message", "status", "request_id")

    def __init__(
        self,
        detail: object = None,
        /,
        *,
        message: str | None = None,
        status: int | None = None,
        body: Any = None,
        kind: str | None = None,
        address: str | None = None,
        seconds: float | None = None,
        limit: int | None = None,
        count: int | None = None,
        scope: str | None = None,
        key: str | None = None,
        name: str | None = None,
        state: str | None = None,
        code: Any = None,
        path: str | None = None,
        problem: str | None = None,
        answer: str | None = None,
    ) -> None:
        fields = {
            "status": status,
            "body": body,
            "kind": kind,
            "address": address,
            "seconds": seconds,
            "limit": limit,
            "count": count,
            "scope": scope,
            "key": key,
            "name": name,
            "state": state,
            "code": code,
            "path": path,
            "problem": problem,
            "answer": answer,
        }
        detail = self._context(detail, fields)
        super().__init__(detail)
        self.detail = detail
        self.message = message

    def _context(self, detail: object, fields: dict[str, Any]) -> object:
        """Set ``reason`` and the fields; the detail they make (or ``detail`` as given)."""
        if isinstance(detail, str) and not isinstance(detail, Reason):
            detail = _member(detail, fields)
        if isinstance(detail, Reason):
            self.reason = detail
            built = build_detail(detail, fields)
        else:
            self.reason, read = read_detail(detail)
            fields = {**read, **{k: v for k, v in fields.items() if v is not None}}
            built = _plain(detail)
        for field, value in fields.items():
            if value is not None:
                setattr(self, field, value)
        return built

    def __str__(self) -> str:
        text = "" if self.detail is None else repr(self.detail)
        if self.message is not None:
            text = f"{text}: {self.message}" if text else self.message
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
        self.status = status
        self.request_id = request_id
        return self


def build_detail(reason: Reason, fields: Mapping[str, Any]) -> object:
    """The detail ``reason`` and its ``fields`` make (see :class:`SandboxError`); a field
    the reason does not carry is a ``TypeError``."""
    names = shape(reason)
    carried = {name.rstrip("?") for name in names}
    stray = sorted(
        field for field, value in fields.items() if value is not None and field not in carried
    )
    if stray:
        raise TypeError(f"reason {reason.value!r} carries no {', '.join(stray)}")
    values = [
        fields.get(name.rstrip("?"))
        for name in names
        if not (name.endswith("?") and fields.get(name.rstrip("?")) is None)
    ]
    return (reason.value, *values) if values else reason.value


def _member(detail: str, fields: Mapping[str, Any]) -> str | Reason:
    """A string detail given with fields as its reason, so the fields build the detail
    (a string that is no reason is then a ``TypeError``); without fields the string is
    kept as it was given."""
    if all(value is None for value in fields.values()):
        return detail
    try:
        return Reason(detail)
    except ValueError:
        raise TypeError(f"{detail!r} is no reason: fields need a Reason") from None


def _plain(detail: object) -> object:
    """``detail`` with a reason at its head as the reason's plain string, so a detail
    spelled with a member prints and pickles as one spelled with the string."""
    if isinstance(detail, tuple) and detail and isinstance(detail[0], Reason):
        return (detail[0].value, *detail[1:])
    return detail


def read_detail(detail: object) -> tuple[Reason | None, dict[str, Any]]:
    """The reason and fields of a detail given as it is: its first element's (or its
    own) reason, and the elements after it as the reason's fields in shape order;
    ``(None, {})`` when it does not start with a reason."""
    head, rest = (detail[0], detail[1:]) if isinstance(detail, tuple) and detail else (detail, ())
    if not isinstance(head, str):
        return None, {}
    try:
        reason = Reason(head)
    except ValueError:
        return None, {}
    names = [name.rstrip("?") for name in shape(reason)]
    if len(rest) > len(names):
        return reason, {}
    return reason, dict(zip(names, rest, strict=False))


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

    _shown = ("message", "status", "request_id", "retry_after")

    def __init__(
        self, detail: object = None, /, *, retry_after: float | None = None, **context: Any
    ) -> None:
        super().__init__(detail, **context)
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

    Its ``message`` says in words what was wrong — which argument and what it
    must be — for people; ``detail`` stays the machine-readable key callers
    match on.
    """

    transient = False


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

    @classmethod
    def of(cls, error: BaseException) -> WriteFailed:
        """The ``WriteFailed`` a stdin write raises from a provider's ``error``:
        ``("transport", kind)`` when the connection failed (the ``kind`` of its
        transport detail), else ``("refused", <its class name>)``."""
        if getattr(error, "reason", None) is Reason.TRANSPORT:
            return cls(Reason.TRANSPORT, kind=getattr(error, "kind", None))
        return cls(Reason.REFUSED, code=type(error).__name__)


class ProviderError(SandboxError):
    """Escape hatch for an answer the adapter does not recognise."""

    def __init__(self, provider: str, detail: object = None, /, **context: Any) -> None:
        super().__init__(detail, **context)
        self.args = (provider, self.detail)
        self.provider = provider

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
