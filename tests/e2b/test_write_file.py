"""``write_file`` with a ``mode`` through the E2B emulator.

The mode is applied by a ``chmod`` command after the upload. ``/files`` and a
command's ``cwd`` take sandbox paths, but an absolute path given as a
command's argument is the sandbox's own only when the command sees the
sandbox's root as ``/`` (not so when the emulator cannot isolate its
commands), so the adapter must not rely on it.
"""

from __future__ import annotations

import pytest

from managoat_sandbox._engine import isolation
from managoat_sandbox.errors import Invalid
from managoat_sandbox.providers.e2b import E2B
from managoat_sandbox.types import Handle

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def unisolated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sandboxes created after this run their commands as plain host processes."""
    monkeypatch.setattr(
        isolation,
        "support",
        lambda refresh=False: isolation.Support(None, "turned off by the test"),
    )


def mode_of(e2b: E2B, handle: Handle, path: str) -> bytes:
    """The octal mode of the sandbox's absolute ``path``, as a command in ``/`` sees it."""
    result = e2b.exec(handle, "stat", ["-c", "%a", "." + path], dir="/")
    assert result.exit_code == 0, result
    return result.output.strip()


def test_an_absolute_path_gets_its_mode(e2b: E2B, handle: Handle) -> None:
    e2b.write_file(handle, "/app/.env", b"A=1\n", mode=0o600)
    assert mode_of(e2b, handle, "/app/.env") == b"600"


def test_an_absolute_path_gets_its_mode_when_commands_are_host_processes(
    unisolated: None, e2b: E2B, handle: Handle
) -> None:
    e2b.write_file(handle, "/app/.env", b"A=1\n", mode=0o640)
    assert mode_of(e2b, handle, "/app/.env") == b"640"


def test_an_empty_path_writes_nothing(e2b: E2B, handle: Handle) -> None:
    # The facade refuses it before dispatch; the adapter itself must not invent a name.
    with pytest.raises(Invalid):
        e2b.write_file(handle, "", b"x")
    assert e2b.exec(handle, "ls", ["-A"]).output == b""
