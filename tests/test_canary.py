"""The suite-wide secrets canary (:mod:`tests.canary`) sees the token wherever it would leak.

Each test plants the canary where a leak would put it, checks the watch saw
it, and takes the sighting back so that the test itself does not fail.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

from managoat_sandbox.errors import Denied, ProviderError
from managoat_sandbox.types import Handle, Info

from .canary import CANARY, CREDENTIAL_ENV
from .conftest import WATCH


def test_every_hosted_adapter_credential_is_the_canary() -> None:
    assert all(os.environ[name] == CANARY for name in CREDENTIAL_ENV)


@contextlib.contextmanager
def watched_logger(name: str) -> Iterator[logging.Logger]:
    """A logger that reaches the watch's handler but not pytest's capture (whose report
    section would otherwise, rightly, fail these tests)."""
    logger = logging.getLogger(name)
    logger.propagate = False
    logger.addHandler(WATCH.handler)
    try:
        yield logger
    finally:
        logger.removeHandler(WATCH.handler)
        logger.propagate = True


def test_the_watch_sees_every_record_of_every_logger_and_all_of_the_package() -> None:
    assert WATCH.handler in logging.getLogger().handlers
    assert WATCH.handler.level == logging.NOTSET or WATCH.handler.level <= logging.DEBUG
    assert logging.getLogger("managoat_sandbox").getEffectiveLevel() == logging.DEBUG


def test_a_debug_record_holding_the_canary_is_seen() -> None:
    with watched_logger("managoat_sandbox.example") as logger:
        logger.setLevel(logging.DEBUG)
        logger.debug("token=%s", CANARY)
    assert WATCH.take() == ["a log record of 'managoat_sandbox.example' at DEBUG"]


def test_a_logged_exception_holding_the_canary_is_seen() -> None:
    with watched_logger("elsewhere") as logger:
        try:
            raise RuntimeError(CANARY)
        except RuntimeError:
            logger.warning("failed", exc_info=True)
    assert WATCH.take() == ["a log record of 'elsewhere' at WARNING"]


def test_an_error_holding_the_canary_is_seen_when_built_not_only_when_raised() -> None:
    Denied(("http", 401, {"echo": CANARY}))
    ProviderError("e2b", CANARY)
    assert sorted(WATCH.take()) == [
        "repr of a Denied",
        "repr of a ProviderError",
        "text of a Denied",
        "text of a ProviderError",
    ]


def test_a_value_repr_holding_the_canary_is_seen_and_private_fields_are_not() -> None:
    Handle("sprites", "box", instance_id=CANARY, private={"token": CANARY})
    assert WATCH.take() == []
    Info(status="running", raw={"token": CANARY})
    assert WATCH.take() == ["repr of a Info"]
