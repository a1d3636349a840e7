"""The adapter behind the facade, registered by name (as BUILTINS will do)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox import config
from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.frames import Exit, Stdout
from managoat_sandbox.providers.e2b import E2B

from .emulated import API_KEY, point_at

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def emulator() -> Iterator[E2BEmulator]:
    with E2BEmulator(credential=API_KEY) as running:
        point_at(running)
        config.configure(adapters={"e2b": E2B})
        yield running  # type: ignore[misc]


def test_the_facade_drives_the_adapter_and_retries_a_rate_limited_lookup(
    emulator: E2BEmulator,
) -> None:
    handle = sandbox.create("e2b", f"facade-{time.monotonic_ns()}")
    try:
        emulator.rate_limit(path=r"^/v2/sandboxes$", retry_after=0, times=2)
        assert sandbox.get(handle).status == "running"
        assert sandbox.exec(handle, "bash", ["-c", "echo hi; exit 2"]) == (b"hi\n", 2)
        command = sandbox.spawn(handle, "bash", ["-c", "echo streamed"], detachable=True)
        frames = list(sandbox.iter_frames(command, timeout=10))
        assert frames == [Stdout(command.ref, b"streamed\n"), Exit(command.ref, 0)]
        assert sandbox.capabilities("e2b") == frozenset(
            {
                "isolation",
                "suspend",
                "network_policy",
                "attach",
                "read_file",
                "list_files",
                "transfer",
            }
        )
        sandbox.write_file(handle, "/tmp/facade/note", b"note")
        assert sandbox.read_file(handle, "/tmp/facade/note") == b"note"
        assert [f.name for f in sandbox.list_files(handle, "/tmp/facade/")] == ["note"]
        assert sandbox.public_url(handle) is None
    finally:
        sandbox.destroy(handle)
    assert handle.name not in sandbox.list_all_names("e2b")
