"""A start the provider refused becomes ``Invalid(("dir", ...))`` only when the sandbox says
``dir`` is not a directory; otherwise the refusal stands as it was."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest

from managoat_sandbox import reasons
from managoat_sandbox._deadline import Deadline
from managoat_sandbox._dir_refusal import raise_refusal
from managoat_sandbox.contract import Adapter
from managoat_sandbox.errors import Invalid, Unavailable
from managoat_sandbox.types import ExecResult, Handle

HANDLE = Handle("stub", "box")
REFUSED = Invalid(reasons.Reason.HTTP, status=400, body={"message": "cwd does not exist"})


class Sandbox:
    """Answers ``test -d`` with ``code`` (or raises ``error``); records what it ran."""

    def __init__(self, code: int = 1, error: Exception | None = None) -> None:
        self.code = code
        self.error = error
        self.ran: list[tuple[str, Sequence[str]]] = []

    def exec(self, handle: Handle, cmd: str, args: Sequence[str] = (), **opts: Any) -> ExecResult:
        self.ran.append((cmd, tuple(args)))
        if self.error is not None:
            raise self.error
        return ExecResult(b"", self.code, b"")


def refusal(sandbox: Sandbox, dir: str | None, error: Invalid = REFUSED) -> BaseException:
    with pytest.raises(Invalid) as caught:
        raise_refusal(error, dir, cast(Adapter, sandbox), HANDLE)
    return caught.value


def test_a_dir_the_sandbox_says_is_missing_is_the_common_dir_refusal() -> None:
    sandbox = Sandbox(code=1)
    raised = refusal(sandbox, "/no/such")
    assert isinstance(raised, Invalid)
    assert raised.detail == ("dir", "'/no/such' is not a directory in the sandbox")
    assert raised.__cause__ is REFUSED
    assert sandbox.ran == [("test", ("-d", "/no/such"))]


def test_a_refusal_with_a_dir_that_exists_stands() -> None:
    assert refusal(Sandbox(code=0), "/home") is REFUSED


def test_a_refusal_without_a_dir_stands_and_nothing_is_asked() -> None:
    sandbox = Sandbox()
    assert refusal(sandbox, None) is REFUSED
    assert sandbox.ran == []


def test_a_dir_refusal_already_is_not_asked_again() -> None:
    sandbox = Sandbox()
    already = Invalid(reasons.Reason.DIR, problem="'/x' is not a directory in the sandbox")
    assert refusal(sandbox, "/x", already) is already
    assert sandbox.ran == []


def test_a_check_that_fails_leaves_the_refusal_as_it_was() -> None:
    raised = refusal(Sandbox(error=Unavailable(reasons.Reason.HTTP, status=503)), "/x")
    assert raised is REFUSED


def test_the_check_keeps_within_the_call_s_deadline() -> None:
    sandbox = Sandbox(code=1)
    with pytest.raises(Invalid) as caught:
        raise_refusal(REFUSED, "/x", cast(Adapter, sandbox), HANDLE, Deadline(0))
    assert caught.value is REFUSED and sandbox.ran == [], "no time was left to ask"
