"""The remembered-sandbox cache and its stale-retry rule (providers/e2b/remembered.py), alone.

No HTTP: the lookup is a scripted function and each "envd call" a function
that answers or raises; the wire-level behaviour is in test_remembered.py.
"""

from __future__ import annotations

import threading

import pytest

from managoat_sandbox import reasons
from managoat_sandbox.errors import (
    Denied,
    Invalid,
    NotFound,
    RateLimited,
    SandboxError,
    Truncated,
    Unavailable,
)
from managoat_sandbox.providers.e2b.api import SandboxAccess
from managoat_sandbox.providers.e2b.envd import Envd
from managoat_sandbox.providers.e2b.remembered import Remembered, answered_by_envd, is_stale
from managoat_sandbox.providers.e2b.settings import Settings

S = Settings(
    api_key="key-a",
    base_url="https://api.example.test",
    template="base",
    user="user",
    timeout=5.0,
    sandbox_url=None,
)
OLD = SandboxAccess("sbx-old", "token-old", "example.test")
NEW = SandboxAccess("sbx-new", "token-new", "example.test")
STALE_TOKEN = Denied((reasons.HTTP, 401, {"message": "bad token"}))


def proxy_502(message: str, sandbox_id: str | None = None) -> Unavailable:
    body: dict[str, str] = {"message": message}
    if sandbox_id is not None:
        body["sandboxId"] = sandbox_id
    return Unavailable((reasons.HTTP, 502, body))


class Lookups:
    """A scripted lookup: answers in order, counting the calls."""

    def __init__(self, *answers: tuple[SandboxAccess, bool]) -> None:
        self.answers = list(answers)
        self.names: list[str] = []

    def __call__(self, s: Settings, name: str) -> tuple[SandboxAccess, bool]:
        self.names.append(name)
        return self.answers.pop(0)


class Calls:
    """A scripted first call: raises the given errors in order, then answers the sandbox id
    it was given; ``accept`` sets the ``accepted`` event before raising."""

    def __init__(self, *errors: SandboxError, accept: bool = False) -> None:
        self.errors = list(errors)
        self.accept = accept
        self.sandboxes: list[str] = []

    def __call__(self, envd: Envd, accepted: threading.Event) -> str:
        self.sandboxes.append(envd.sandbox_id)
        if self.errors:
            if self.accept:
                accepted.set()
            raise self.errors.pop(0)
        return envd.sandbox_id


def remembering(
    access: SandboxAccess, *lookups: tuple[SandboxAccess, bool]
) -> tuple[Remembered, Lookups]:
    lookup = Lookups(*lookups)
    remembered = Remembered(lookup)
    remembered.remember(S, "box", access)
    return remembered, lookup


# -- the entries ------------------------------------------------------------------------


def test_an_entry_belongs_to_one_control_plane_and_account() -> None:
    remembered, _ = remembering(OLD)
    assert remembered.recall(S, "box") == OLD
    other_key = Settings(
        api_key="key-b",
        base_url=S.base_url,
        template="base",
        user="user",
        timeout=5.0,
        sandbox_url=None,
    )
    other_plane = Settings(
        api_key="key-a",
        base_url="https://api.other.test",
        template="base",
        user="user",
        timeout=5.0,
        sandbox_url=None,
    )
    assert remembered.recall(other_key, "box") is None
    assert remembered.recall(other_plane, "box") is None
    assert remembered.recall(S, "another") is None


def test_past_capacity_the_least_recently_used_name_goes_first() -> None:
    remembered = Remembered(Lookups(), capacity=2)
    remembered.remember(S, "a", OLD)
    remembered.remember(S, "b", OLD)
    assert remembered.recall(S, "a") == OLD
    remembered.remember(S, "c", NEW)
    assert remembered.recall(S, "b") is None
    assert remembered.recall(S, "a") == OLD
    assert remembered.recall(S, "c") == NEW


@pytest.mark.parametrize(
    "item,kept",
    [
        ({"sandboxID": "sbx-old", "state": "running"}, True),
        ({"sandboxID": "sbx-old", "state": "paused"}, False),
        ({"sandboxID": "sbx-new", "state": "running"}, False),
    ],
)
def test_reconcile_drops_an_entry_that_now_means_a_paused_or_another_sandbox(
    item: dict[str, str], kept: bool
) -> None:
    remembered, _ = remembering(OLD)
    remembered.reconcile(S, "box", item)
    assert (remembered.recall(S, "box") == OLD) is kept


def test_forget_drops_the_entry() -> None:
    remembered, _ = remembering(OLD)
    remembered.forget(S, "box")
    assert remembered.recall(S, "box") is None


# -- the first call -----------------------------------------------------------------------


def test_an_unremembered_name_is_looked_up_once_and_then_remembered() -> None:
    lookup = Lookups((OLD, False))
    remembered = Remembered(lookup)
    envd, answer = remembered.first_call(S, "box", Calls())
    assert (envd.sandbox_id, envd.token, answer) == ("sbx-old", "token-old", "sbx-old")
    remembered.first_call(S, "box", Calls())
    assert lookup.names == ["box"]
    assert remembered.recall(S, "box") == OLD


@pytest.mark.parametrize(
    "stale",
    [
        STALE_TOKEN,
        proxy_502("The sandbox was not found", "sbx-old"),
        proxy_502("sandbox is paused"),
    ],
)
def test_a_stale_refusal_of_a_remembered_sandbox_is_looked_up_and_sent_once_more(
    stale: SandboxError,
) -> None:
    remembered, lookup = remembering(OLD, (NEW, False))
    call = Calls(stale)
    envd, answer = remembered.first_call(S, "box", call)
    assert call.sandboxes == ["sbx-old", "sbx-new"]
    assert (envd.sandbox_id, answer) == ("sbx-new", "sbx-new")
    assert lookup.names == ["box"]
    assert remembered.recall(S, "box") == NEW


def test_a_stale_refusal_is_retried_when_the_lookup_had_to_resume_the_same_sandbox() -> None:
    remembered, _ = remembering(OLD, (OLD, True))
    call = Calls(proxy_502("sandbox is paused", "sbx-old"))
    assert remembered.first_call(S, "box", call)[1] == "sbx-old"
    assert call.sandboxes == ["sbx-old", "sbx-old"]


def test_a_stale_refusal_the_lookup_cannot_explain_stands() -> None:
    remembered, lookup = remembering(OLD, (OLD, False))
    call = Calls(STALE_TOKEN)
    with pytest.raises(Denied):
        remembered.first_call(S, "box", call)
    assert call.sandboxes == ["sbx-old"]
    assert lookup.names == ["box"]


def test_a_call_that_was_accepted_is_never_sent_twice() -> None:
    remembered, lookup = remembering(OLD, (NEW, False))
    call = Calls(STALE_TOKEN, accept=True)
    with pytest.raises(Denied):
        remembered.first_call(S, "box", call)
    assert call.sandboxes == ["sbx-old"]
    assert lookup.names == []
    assert remembered.recall(S, "box") is None


def test_a_fresh_lookup_is_not_retried_even_when_refused_as_stale() -> None:
    lookup = Lookups((OLD, False), (NEW, False))
    remembered = Remembered(lookup)
    call = Calls(STALE_TOKEN)
    with pytest.raises(Denied):
        remembered.first_call(S, "box", call)
    assert call.sandboxes == ["sbx-old"]
    assert lookup.names == ["box"]
    assert remembered.recall(S, "box") is None


@pytest.mark.parametrize(
    "refusal",
    [
        Unavailable((reasons.TRANSPORT, "ConnectionResetError")),
        proxy_502("bad gateway"),
        proxy_502("The sandbox was not found", "sbx-other"),
    ],
)
def test_any_other_failure_drops_the_entry_and_stands(refusal: SandboxError) -> None:
    remembered, lookup = remembering(OLD, (NEW, False))
    with pytest.raises(type(refusal)):
        remembered.first_call(S, "box", Calls(refusal))
    assert lookup.names == []
    assert remembered.recall(S, "box") is None


#: envd's own answers: the request reached the sandbox with the remembered token.
ENVD_ANSWERS = [
    NotFound((reasons.HTTP, 404, {"message": "path '/x' does not exist"})),
    Invalid((reasons.HTTP, 400, {"message": "path '/x' is a directory"})),
    Invalid((reasons.HTTP, 500, {"message": "stat /f/x: not a directory"})),
    Truncated((reasons.MAX_BYTES, 3)),
]


@pytest.mark.parametrize("answer", ENVD_ANSWERS)
def test_envds_own_answer_keeps_the_entry(answer: SandboxError) -> None:
    remembered, lookup = remembering(OLD)
    with pytest.raises(type(answer)):
        remembered.first_call(S, "box", Calls(answer))
    envd, _ = remembered.first_call(S, "box", Calls())

    def refused() -> None:
        raise answer

    with pytest.raises(type(answer)):
        remembered.later_call(S, "box", envd, refused)
    assert remembered.recall(S, "box") == OLD
    assert lookup.names == [], "no lookup: the entry was right"


@pytest.mark.parametrize(
    ("error", "answered"),
    [
        *((answer, True) for answer in ENVD_ANSWERS),
        (STALE_TOKEN, False),
        (proxy_502("The sandbox was not found"), False),
        (RateLimited(None), False),
        (Unavailable(reasons.TIMEOUT), False),
    ],
)
def test_only_invalid_not_found_or_truncated_is_envds_own_answer(
    error: SandboxError, answered: bool
) -> None:
    assert answered_by_envd(error) is answered


def test_the_retried_call_is_made_once_only() -> None:
    remembered, lookup = remembering(OLD, (NEW, False), (NEW, False))
    call = Calls(STALE_TOKEN, STALE_TOKEN)
    with pytest.raises(Denied):
        remembered.first_call(S, "box", call)
    assert call.sandboxes == ["sbx-old", "sbx-new"]
    assert lookup.names == ["box"]


# -- later calls ----------------------------------------------------------------------------


def test_a_failed_later_call_drops_the_entry_it_was_made_on() -> None:
    remembered, _ = remembering(OLD)
    envd, _ = remembered.first_call(S, "box", Calls())

    def refused() -> None:
        raise Unavailable((reasons.TRANSPORT, "ConnectionResetError"))

    with pytest.raises(Unavailable):
        remembered.later_call(S, "box", envd, refused)
    assert remembered.recall(S, "box") is None


def test_a_failed_later_call_keeps_an_entry_another_thread_refreshed() -> None:
    remembered, _ = remembering(OLD)
    envd, _ = remembered.first_call(S, "box", Calls())
    remembered.remember(S, "box", NEW)

    def refused() -> None:
        raise Unavailable((reasons.TRANSPORT, "ConnectionResetError"))

    with pytest.raises(Unavailable):
        remembered.later_call(S, "box", envd, refused)
    assert remembered.recall(S, "box") == NEW


def test_a_later_call_answers_and_keeps_the_entry() -> None:
    remembered, _ = remembering(OLD)
    envd, _ = remembered.first_call(S, "box", Calls())
    assert remembered.later_call(S, "box", envd, lambda: 7) == 7
    assert remembered.recall(S, "box") == OLD


# -- what is stale ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error,stale",
    [
        (STALE_TOKEN, True),
        (Unavailable((reasons.HTTP, 401, {})), False),
        (proxy_502("The sandbox was not found", "sbx-old"), True),
        (proxy_502("The sandbox was not found"), True),
        (proxy_502("The sandbox was not found", "sbx-other"), False),
        (proxy_502("upstream connect error"), False),
        (Unavailable((reasons.HTTP, 502, "not found")), False),
        (Unavailable((reasons.HTTP, 500, {"message": "not found"})), False),
        (Unavailable(reasons.CLOSED_BEFORE_EXIT), False),
    ],
)
def test_only_a_token_refusal_or_the_proxys_missing_sandbox_is_stale(
    error: SandboxError, stale: bool
) -> None:
    assert is_stale(error, "sbx-old") is stale
