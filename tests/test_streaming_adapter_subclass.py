"""Writing an adapter on StreamingAdapter: ``command_type`` may be left out.

A minimal subclass sets only ``provider`` and the abstract operations; its
commands keep an end with ``write``/``close_stdin``/``stop`` in ``private``, and
``write_stdin``/``close_stdin``/``stop_command`` reach that end — directly and
through the facade, which re-tags commands with the registered name.
"""

from __future__ import annotations

from typing import Any

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox import config
from managoat_sandbox.errors import Invalid
from managoat_sandbox.streaming import StreamingAdapter
from managoat_sandbox.types import Command, Handle


class End:
    """An adapter's end of one command, recording what reached it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes]] = []

    def write(self, data: bytes) -> None:
        self.calls.append(("write", data))

    def close_stdin(self) -> None:
        self.calls.append(("close_stdin", b""))

    def stop(self) -> None:
        self.calls.append(("stop", b""))


class Unrelated:
    """Another adapter's end: the same methods, not an :class:`End`."""

    def write(self, data: bytes) -> None:
        raise AssertionError("an end of another class must not be written to")

    def close_stdin(self) -> None:
        raise AssertionError("an end of another class must not be closed")

    def stop(self) -> None:
        raise AssertionError("an end of another class must not be stopped")


def _not_used(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("not used by these tests")


def _adapter_class(name: str, **attributes: Any) -> type[StreamingAdapter]:
    """A StreamingAdapter subclass: ``attributes``, and every other abstract operation
    unused. ``spawn`` hands out commands holding an :class:`End`."""

    def spawn(self: StreamingAdapter, handle: Handle, cmd: str, *args: Any, **kw: Any) -> Command:
        return Command(self.provider, f"{name}-1", private=End())

    def build_handle(self: StreamingAdapter, sandbox_name: str) -> Handle:
        return Handle(self.provider, sandbox_name)

    def capabilities(self: StreamingAdapter) -> frozenset[str]:
        return frozenset()

    operations = {op: _not_used for op in StreamingAdapter.__abstractmethods__}
    operations.update(
        spawn=spawn, build_handle=build_handle, capabilities=capabilities, provider="minimal"
    )
    return type(name, (StreamingAdapter,), {**operations, **attributes})


Minimal = _adapter_class("Minimal")


def test_a_subclass_without_command_type_delegates_to_its_commands_end() -> None:
    adapter = Minimal()
    command = adapter.spawn(adapter.build_handle("box"), "cat")
    adapter.write_stdin(command, b"ab")
    adapter.close_stdin(command)
    adapter.stop_command(command)
    adapter.stop_command(command)
    assert command.private.calls == [
        ("write", b"ab"),
        ("close_stdin", b""),
        ("stop", b""),
        ("stop", b""),
    ]


def test_without_command_type_a_command_with_no_end_is_invalid_and_not_stopped() -> None:
    adapter = Minimal()
    foreign = Command("minimal", "r", private=object())
    with pytest.raises(Invalid, match="not a command of the minimal adapter"):
        adapter.write_stdin(foreign, b"x")
    with pytest.raises(Invalid):
        adapter.close_stdin(foreign)
    adapter.stop_command(foreign)
    with pytest.raises(TypeError):
        adapter.write_stdin("not a command", b"x")  # type: ignore[arg-type]


def test_command_type_when_set_serves_only_ends_of_that_class() -> None:
    strict = _adapter_class("Strict", command_type=End)()
    own = strict.spawn(strict.build_handle("box"), "cat")
    strict.write_stdin(own, b"x")
    assert own.private.calls == [("write", b"x")]
    other = Command("minimal", "r", private=Unrelated())
    with pytest.raises(Invalid):
        strict.write_stdin(other, b"z")
    with pytest.raises(Invalid):
        strict.close_stdin(other)
    strict.stop_command(other)


def test_through_the_facade_under_another_registered_name() -> None:
    config.configure(adapters={"mine": Minimal})
    handle = sandbox.build_handle("mine", "box")
    command = sandbox.spawn(handle, "cat", stdin=True)
    assert command.provider == "mine"
    sandbox.write_stdin(command, b"hello")
    sandbox.close_stdin(command)
    sandbox.stop_command(command)
    assert command.private.calls == [("write", b"hello"), ("close_stdin", b""), ("stop", b"")]
