"""Secrets canary: the API key and the envd access token never reach a repr, an
exception's text (pickled or not) or a log record, across failing operations."""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Iterator

import pytest

from managoat_sandbox import config
from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.errors import SandboxError
from managoat_sandbox.providers.e2b import E2B
from managoat_sandbox.providers.e2b.settings import load
from managoat_sandbox.testing.mailbox import Mailbox, is_stdout, is_terminal

from ..conftest import wait_until
from .emulated import API_KEY, point_at

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def emulator() -> Iterator[E2BEmulator]:
    with E2BEmulator(credential=API_KEY) as running:
        point_at(running)
        yield running  # type: ignore[misc]


def test_no_secret_in_reprs_errors_or_logs(
    emulator: E2BEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    texts: list[str] = []

    def failing(operation: object, *args: object, **kwargs: object) -> None:
        try:
            operation(*args, **kwargs)  # type: ignore[operator]
        except SandboxError as error:
            copy = pickle.loads(pickle.dumps(error))
            texts.extend([str(error), repr(error), str(copy), repr(copy)])
        else:
            raise AssertionError(f"{operation} was meant to fail")

    with caplog.at_level(logging.DEBUG):
        e2b = E2B(heartbeat_interval=0.05)
        handle = e2b.create(f"secrets-{time.monotonic_ns()}")
        raw = e2b.get(handle).raw
        token = emulator.record(raw["sandboxID"]).access_token
        assert token and len(token) >= 8
        box = Mailbox()
        command = e2b.spawn(
            handle, "bash", ["-c", "echo ready; exec cat"], owner=box, stdin=True, detachable=True
        )
        box.expect(is_stdout(command.ref), 10)
        # The heartbeat's failures are logged (with the error's body): checked below.
        emulator.server_error(503, path=r"/timeout$", times=3)
        emulator.rate_limit(path=r"^/v2/sandboxes$", retry_after_seconds=3)
        failing(e2b.get, handle)
        emulator.server_error(502, path=r"/process\.Process/SendInput$")
        failing(e2b.write_stdin, command, b"x")
        emulator.stream_fault("error_end", body={"code": "unauthenticated", "message": "no"})
        failing(e2b.exec, handle, "true")
        emulator.stream_fault("no_end")
        failing(e2b.exec, handle, "true")
        failing(e2b.attach, handle, "fountain-unknown")
        texts += [
            repr(e2b),
            repr(handle),
            repr(command),
            repr(command.private),
            repr(load()),
            repr(box.history()),
        ]
        assert wait_until(lambda: any("heartbeat" in r.getMessage() for r in caplog.records))
        e2b.close_stdin(command)
        texts.append(repr(box.expect(is_terminal(command.ref), 10)))
        with config.override("e2b", api_key="e2b_wrong_" + API_KEY):
            failing(e2b.get, handle)
        e2b.destroy(handle)
    texts += [record.getMessage() for record in caplog.records]
    texts += [record.exc_text or "" for record in caplog.records]
    for text in texts:
        assert API_KEY not in text
        assert token not in text
