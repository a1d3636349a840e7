"""Secrets canary: a credential never reaches a repr, an exception message or a log record."""

from __future__ import annotations

import logging
import pickle

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox import config
from managoat_sandbox.errors import Denied, Unavailable, UnknownProvider
from managoat_sandbox.testing import Fake
from managoat_sandbox.types import Command, Handle

from .canary import CANARY


def test_handles_and_commands_hide_private_state_and_instance_ids() -> None:
    handle = Handle("sprites", "box", instance_id=CANARY, private={"token": CANARY})
    command = Command("sprites", "turn_ref", private={"secret": CANARY})
    for text in (repr(handle), str(handle), repr(command), str(command)):
        assert CANARY not in text
    assert "provider='sprites'" in repr(command) and "turn_ref" in repr(command)


def test_no_operation_leaks_a_configured_credential(caplog: pytest.LogCaptureFixture) -> None:
    fake = Fake()
    config.configure("sprites", token=CANARY)
    config.configure("e2b", api_key=CANARY)
    config.configure(adapters={"fake": fake})
    texts: list[str] = []
    with caplog.at_level(logging.DEBUG, logger="managoat_sandbox"):
        handle = sandbox.create("fake", "secret-box")
        fake.fail_next("get", Unavailable("blip"))
        sandbox.get(handle)
        fake.fail_next("get", Denied(("http", 401, {})))
        try:
            sandbox.get(handle)
        except Denied as error:
            texts += [str(error), repr(error), repr(pickle.loads(pickle.dumps(error)))]
        try:
            sandbox.adapter_for("modal")
        except UnknownProvider as error:
            texts.append(str(error))
        command = sandbox.spawn(handle, "emit", ["out:x"])
        texts += [repr(handle), repr(command), repr(sandbox.adapters())]
        texts += [repr(frame) for frame in sandbox.iter_frames(command, timeout=2)]
    texts += [record.getMessage() for record in caplog.records]
    assert caplog.records, "the retry must have logged, or this test checks nothing"
    for text in texts:
        assert CANARY not in text
