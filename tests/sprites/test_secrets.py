"""Secrets canary: the Sprites token never reaches a repr, an exception text or a log record."""

from __future__ import annotations

import logging
import pickle
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from managoat_sandbox import config
from managoat_sandbox.emulators.sprites import SpritesEmulator
from managoat_sandbox.providers.sprites import Sprites
from managoat_sandbox.providers.sprites.settings import load
from managoat_sandbox.types import Handle, NetworkPolicy

CANARY = "canary-3b9d-SPRITES-SECRET"


def _texts_of(error: BaseException) -> list[str]:
    """Everything an exception can show: str, repr, pickled copy, and the full traceback
    including chained causes."""
    texts = [str(error), repr(error), repr(pickle.loads(pickle.dumps(error)))]
    texts.append("".join(traceback.format_exception(error)))
    return texts


@pytest.fixture
def emu() -> Iterator[SpritesEmulator]:
    """An emulator that accepts only the canary token."""
    server = SpritesEmulator(credential=CANARY)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.timeout(60)
def test_the_token_never_leaks_across_a_failing_run(
    emu: SpritesEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    config.configure(
        "sprites",
        base_url=emu.base_url,
        token=CANARY,
        checkpoint_creation_enabled=True,
        timeout_ms=500,
    )
    adapter = Sprites(keepalive=0.2)
    box = Handle("sprites", "secret-box")
    texts: list[str] = [repr(adapter), repr(load()), str(load())]
    failing: list[Callable[[], Any]] = [
        lambda: adapter.create("secret-box"),
        lambda: adapter.get(box),
        lambda: adapter.exec(box, "true"),
        lambda: adapter.spawn(box, "true"),
        lambda: adapter.attach(box, "1"),
        adapter.list_all_names,
        lambda: adapter.apply_network_policy(box, NetworkPolicy([])),
        lambda: adapter.create_new("secret-box", timeout=2),
        lambda: adapter.destroy_once(box, timeout=2),
        lambda: adapter.terminate_session(box, "1", timeout=0.5),
        lambda: adapter.create_checkpoint_once(box, operation_id="op", timeout=2),
        lambda: adapter.restore_checkpoint(box, "v1"),
    ]
    with caplog.at_level(logging.DEBUG):
        emu.fail(500, body={"error": "boom"}, times=1000)
        for operation in failing:
            with pytest.raises(Exception) as raised:
                operation()
            texts += _texts_of(raised.value)
        emu.faults.clear()
        emu.refuse_upgrade(401, times=10)
        for operation in failing[2:5]:
            with pytest.raises(Exception) as raised:
                operation()
            texts += _texts_of(raised.value)
        emu.faults.clear()
        handle = adapter.create("secret-box")
        emu.drop_exec(after_frames=1)
        command = adapter.spawn(handle, "bash", ["-c", "echo x; sleep 5"])
        assert command.frames is not None
        frames = [command.frames.get(timeout=10), command.frames.get(timeout=10)]
        texts += [repr(command), repr(command.private), repr(handle), *map(repr, frames)]
        adapter.stop_command(command)
        adapter.destroy(handle)
        config.configure("sprites", base_url="http://127.0.0.1:9")
        for operation in failing[:4]:
            with pytest.raises(Exception) as raised:
                operation()
            texts += _texts_of(raised.value)
    texts += [record.getMessage() for record in caplog.records]
    texts += [str(record.args) for record in caplog.records]
    texts += [entry.headers.get("Authorization", "") for entry in emu.requests]
    assert len(texts) > 50
    for text in texts:
        assert CANARY not in text
