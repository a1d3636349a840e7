"""Secrets canary: the Daytona API key never reaches a repr, an exception text or a log
record — through successes, HTTP failures, stream failures and stdin failures."""

from __future__ import annotations

import logging
import pickle
import re

import pytest
import responses

from managoat_sandbox import config
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.errors import Denied, SandboxError
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.testing.mailbox import Mailbox, is_terminal

from .conftest import API, KEY, TOOLBOX, sandbox
from .emulated import emulated_adapter


def texts_of(error: BaseException) -> list[str]:
    texts = [str(error), repr(error)]
    if isinstance(error, SandboxError):
        texts += [repr(error.detail), repr(pickle.loads(pickle.dumps(error)))]
    return texts


def test_the_api_key_appears_in_no_repr_error_or_log_record(
    mocked: responses.RequestsMock, daytona: Daytona, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    mocked.get(f"{API}/sandbox/box", json=sandbox())
    mocked.get(f"{API}/sandbox/denied", status=401, json={"message": "Unauthorized"})
    mocked.post(TOOLBOX + "/process/session", status=201)
    mocked.post(
        re.compile(re.escape(TOOLBOX) + r"/process/session/mgs-\w+/exec"),
        status=202,
        json={"cmdId": "c1"},
    )
    command_path = re.escape(TOOLBOX) + r"/process/session/mgs-\w+/command/c1"
    mocked.get(re.compile(command_path + "$"), status=503, body="down")
    mocked.get(re.compile(command_path + "/logs$"), status=503, body="down")
    mocked.post(re.compile(command_path + "/input$"), status=500, json={"message": "no fifo"})
    mocked.post(TOOLBOX + "/process/execute", status=502, body="bad gateway")
    handle = daytona.build_handle("box")
    with pytest.raises(Denied) as denied:
        daytona.get(daytona.build_handle("denied"))
    texts += texts_of(denied.value)
    box = Mailbox()
    command = daytona.spawn(handle, "bash", ["-lc", "cat"], owner=box, stdin=True)
    try:
        daytona.write_stdin(command, b"x")
    except SandboxError as error:
        texts += texts_of(error)
    daytona.close_stdin(command)
    terminal = box.expect(is_terminal(command.ref), 5)
    daytona.stop_command(command)
    texts += [repr(terminal), repr(command), repr(command.private), repr(handle), repr(daytona)]
    config.configure("daytona", api_key=None)
    try:
        daytona.get(handle)
    except Denied as error:
        assert "DAYTONA_API_KEY" in str(error)
        texts += texts_of(error)
    texts += [record.getMessage() for record in caplog.records]
    texts += [repr(record.args) for record in caplog.records]
    assert any("stdin relay" in text for text in texts), "the failure paths logged"
    for text in texts:
        assert KEY not in text


def test_a_wrong_key_is_denied_without_echoing_either_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with DaytonaEmulator(credential=KEY) as emulator:
        wrong = "wrong-dtn-key-canary"
        config.configure("daytona", api_key=wrong, api_url=emulator.base_url + "/api")
        with pytest.raises(Denied) as caught:
            emulated_adapter().create("box")
    texts = texts_of(caught.value) + [r.getMessage() for r in caplog.records]
    for text in texts:
        assert KEY not in text and wrong not in text
