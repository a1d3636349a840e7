"""One answer for a command started in a ``dir`` that is not a directory.

The local sandbox, Daytona and the Fake know before anything runs that
``dir`` is missing and raise ``Invalid(("dir", "'<dir>' is not a directory in
the sandbox"))``. Sprites and E2B only refuse the start, in words of their own
(an HTTP 400, envd's ``invalid_argument``), which the shared mapping turns
into ``Invalid(("http", 400, {...}))``. :func:`raise_refusal` gives such a
refusal the common answer, after asking the sandbox whether ``dir`` is a
directory — never guessing from the provider's wording.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from ._deadline import Deadline
from .errors import Invalid, SandboxError
from .reasons import Reason, no_such_dir, reason_of

if TYPE_CHECKING:
    from .contract import Adapter
    from .types import Handle

__all__ = ["DIR_CHECK_TIMEOUT", "raise_refusal"]

#: Seconds the check of a refused ``dir`` may take (an ``exec`` of ``test -d``).
DIR_CHECK_TIMEOUT = 30.0


def raise_refusal(
    error: Invalid,
    dir: str | None,
    adapter: Adapter,
    handle: Handle,
    deadline: Deadline | None = None,
) -> NoReturn:
    """Raise what an ``exec`` or ``spawn`` in ``dir`` on ``handle`` raises when the
    provider refused to start it with ``error``.

    With a ``dir`` that is not a directory in the sandbox — asked only now, after
    the refusal, with ``test -d`` run by ``adapter`` within what is left of the
    call's ``deadline`` (at most :data:`DIR_CHECK_TIMEOUT`) — ``Invalid(Reason.DIR)``,
    as every provider says it (caused by ``error``). Otherwise (no ``dir``, already
    a ``dir`` refusal, a directory after all, a check that failed or had no time
    left) ``error`` itself.
    """
    if dir is None or reason_of(error) is Reason.DIR:
        raise error
    try:
        timeout = DIR_CHECK_TIMEOUT if deadline is None else deadline.clamp(DIR_CHECK_TIMEOUT)
        found = adapter.exec(handle, "test", ["-d", dir], timeout=timeout).exit_code
    except SandboxError:
        raise error from None
    if found == 0:
        raise error
    raise Invalid(Reason.DIR, problem=no_such_dir(dir)) from error
