"""Writing an adapter: only the required operations are abstract.

Every operation behind a capability has a base implementation raising
``NotSupported`` (its detail the capability), so an adapter writes the required
operations and what it advertises. A minimal ``StreamingAdapter`` subclass is
instantiable and refuses the rest, directly and through the facade; a minimal
``Adapter`` (the Fake's required operations, nothing advertised) passes the
conformance suite, whose tests for capabilities it lacks are skipped or check
the refusal.
"""

from __future__ import annotations

import unittest
from collections.abc import Callable, Sequence
from typing import Any

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox import config
from managoat_sandbox.contract import Adapter, Owner
from managoat_sandbox.errors import NotSupported
from managoat_sandbox.streaming import StreamingAdapter
from managoat_sandbox.testing.conformance import ConformanceTests
from managoat_sandbox.testing.fake import Fake
from managoat_sandbox.types import (
    Command,
    ExecResult,
    Handle,
    Info,
    NetworkPolicy,
    Session,
)

from .test_fake_conformance import FAKE_FIXTURES


class Bare(StreamingAdapter):
    """Only the ten operations a StreamingAdapter must write; advertises nothing."""

    provider = "bare"

    def capabilities(self) -> frozenset[str]:
        return frozenset()

    def build_handle(self, name: str) -> Handle:
        return Handle(self.provider, name)

    def create(self, name: str, **opts: Any) -> Handle:
        return self.build_handle(name)

    def get(self, handle: Handle) -> Info:
        return Info(status="running")

    def destroy(self, handle: Handle) -> None:
        return None

    def list_all_names(self) -> frozenset[str]:
        return frozenset()

    def write_file(
        self, handle: Handle, path: str, data: bytes, *, mode: int | None = None
    ) -> None:
        return None

    def exec(
        self,
        handle: Handle,
        cmd: str,
        args: Sequence[str] = (),
        *,
        env: dict[str, str] | None = None,
        dir: str | None = None,
        timeout: float | None = None,
        stderr_to_stdout: bool = False,
        max_bytes: int | None = None,
    ) -> ExecResult:
        return ExecResult(b"", 0)

    def spawn(
        self,
        handle: Handle,
        cmd: str,
        args: Sequence[str] = (),
        *,
        owner: Owner | None = None,
        env: dict[str, str] | None = None,
        dir: str | None = None,
        stdin: bool = False,
        tty: bool = False,
        detachable: bool = False,
    ) -> Command:
        raise AssertionError("not used by these tests")

    def list_sessions(self, handle: Handle) -> list[Session]:
        return []


#: Each optional operation (called on a handle of ``box``) and the detail of its refusal.
REFUSALS: list[tuple[str, Callable[[Adapter, Handle], object], str]] = [
    ("suspend", lambda a, h: a.suspend(h), "suspend"),
    ("resume", lambda a, h: a.resume(h), "suspend"),
    ("attach", lambda a, h: a.attach(h, "s-1"), "attach"),
    (
        "apply_network_policy",
        lambda a, h: a.apply_network_policy(h, NetworkPolicy([])),
        "network_policy",
    ),
    ("public_url", lambda a, h: a.public_url(h), "public_url"),
    ("create_checkpoint", lambda a, h: a.create_checkpoint(h), "checkpoint"),
    ("restore_checkpoint", lambda a, h: a.restore_checkpoint(h, "cp-1"), "checkpoint"),
    ("terminate_session", lambda a, h: a.terminate_session(h, "s-1"), "terminate_session"),
    ("read_file", lambda a, h: a.read_file(h, "/f"), "read_file"),
    ("list_files", lambda a, h: a.list_files(h, "/"), "list_files"),
    ("create_new", lambda a, h: a.create_new(h.name), "create_new"),
    ("destroy_once", lambda a, h: a.destroy_once(h), "destroy_once"),
    (
        "create_checkpoint_once",
        lambda a, h: a.create_checkpoint_once(h, operation_id="op-1"),
        "create_checkpoint_once",
    ),
]


def test_only_the_required_operations_are_abstract() -> None:
    assert StreamingAdapter.__abstractmethods__ == {
        "capabilities",
        "build_handle",
        "create",
        "get",
        "destroy",
        "list_all_names",
        "write_file",
        "exec",
        "spawn",
        "list_sessions",
    }
    assert Adapter.__abstractmethods__ == StreamingAdapter.__abstractmethods__ | {
        "write_stdin",
        "close_stdin",
        "stop_command",
    }


@pytest.mark.parametrize(("operation", "call", "detail"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_an_unadvertised_operation_is_not_supported_naming_its_capability(
    operation: str, call: Callable[[Adapter, Handle], object], detail: str
) -> None:
    adapter = Bare()
    with pytest.raises(NotSupported) as raised:
        call(adapter, adapter.build_handle("box"))
    assert raised.value.detail == detail


def test_through_the_facade_the_unadvertised_operations_are_not_supported() -> None:
    config.configure(adapters={"bare": Bare})
    handle = sandbox.create("bare", "box")
    calls: list[Callable[[], object]] = [
        lambda: sandbox.suspend(handle),
        lambda: sandbox.resume(handle),
        lambda: sandbox.attach(handle, "s-1"),
        lambda: sandbox.apply_network_policy(handle, NetworkPolicy([])),
        lambda: sandbox.public_url(handle),
        lambda: sandbox.create_checkpoint(handle),
        lambda: sandbox.restore_checkpoint(handle, "cp-1"),
    ]
    for call in calls:
        with pytest.raises(NotSupported):
            call()
    assert sandbox.exec(handle, "true") == (b"", 0)


class Required(Adapter):
    """A plain Adapter writing only the thirteen required operations (the Fake's),
    advertising nothing."""

    provider = "fake"

    def __init__(self) -> None:
        self.fake = Fake()

    def capabilities(self) -> frozenset[str]:
        return frozenset()

    def build_handle(self, name: str) -> Handle:
        return self.fake.build_handle(name)

    def create(self, name: str, **opts: Any) -> Handle:
        return self.fake.create(name, **opts)

    def get(self, handle: Handle) -> Info:
        return self.fake.get(handle)

    def destroy(self, handle: Handle) -> None:
        self.fake.destroy(handle)

    def list_all_names(self) -> frozenset[str]:
        return self.fake.list_all_names()

    def write_file(
        self, handle: Handle, path: str, data: bytes, *, mode: int | None = None
    ) -> None:
        self.fake.write_file(handle, path, data, mode=mode)

    def exec(self, handle: Handle, cmd: str, args: Sequence[str] = (), **kw: Any) -> ExecResult:
        return self.fake.exec(handle, cmd, args, **kw)

    def spawn(self, handle: Handle, cmd: str, args: Sequence[str] = (), **kw: Any) -> Command:
        return self.fake.spawn(handle, cmd, args, **kw)

    def write_stdin(self, command: Command, data: bytes) -> None:
        self.fake.write_stdin(command, data)

    def close_stdin(self, command: Command) -> None:
        self.fake.close_stdin(command)

    def stop_command(self, command: Command) -> None:
        self.fake.stop_command(command)

    def list_sessions(self, handle: Handle) -> list[Session]:
        return self.fake.list_sessions(handle)


class RequiredOnlyConformanceTest(ConformanceTests, unittest.TestCase):
    adapter = Required
    fixtures = FAKE_FIXTURES
