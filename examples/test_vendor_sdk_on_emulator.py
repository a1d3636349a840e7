"""Testing code that calls the E2B SDK itself, offline, against the E2B emulator.

The package's pytest plugin (registered when the package is installed) gives
a test the ``e2b_emulator`` fixture: an emulator started once per session on a
loopback port with a random credential. Its ``env`` holds the variables that
point the E2B SDK at it (``E2B_API_KEY``, ``E2B_API_URL``, ``E2B_SANDBOX_URL``,
...), so the SDK is used unchanged — as docs/testing.md shows. Needs the
``test`` extra (the ``e2b`` SDK) and the ``emulators`` extra.

Run it::

    python -m pytest examples/test_vendor_sdk_on_emulator.py
"""

from __future__ import annotations

from collections.abc import Iterator

import e2b
import pytest

from managoat_sandbox.pytest_plugin import EmulatorFixture


@pytest.fixture
def box(e2b_emulator: EmulatorFixture, monkeypatch: pytest.MonkeyPatch) -> Iterator[e2b.Sandbox]:
    """An E2B sandbox made by the SDK on the emulator, killed after the test."""
    for name, value in e2b_emulator.env.items():
        monkeypatch.setenv(name, value)  # the SDK reads its configuration from these
    sandbox = e2b.Sandbox.create()
    try:
        yield sandbox
    finally:
        sandbox.kill()


def test_the_sdk_runs_a_command(box: e2b.Sandbox, e2b_emulator: EmulatorFixture) -> None:
    result = box.commands.run("echo hello from $(uname -s)")
    assert (result.stdout, result.exit_code) == ("hello from Linux\n", 0)
    assert e2b_emulator.emulator.requests  # every request it served, newest last


def test_the_sdk_reports_a_failing_command(box: e2b.Sandbox) -> None:
    # As in the SDK against the real service, a nonzero exit raises.
    with pytest.raises(e2b.CommandExitException) as raised:
        box.commands.run("echo oops >&2; exit 3")
    assert (raised.value.exit_code, raised.value.stderr) == (3, "oops\n")


def test_the_sdk_writes_and_reads_a_file(box: e2b.Sandbox) -> None:
    box.files.write("/tmp/notes/hello.txt", "written by the SDK\n")
    assert box.files.read("/tmp/notes/hello.txt") == "written by the SDK\n"
    # The file is really in the sandbox: a command there sees it too.
    assert box.commands.run("cat /tmp/notes/hello.txt").stdout == "written by the SDK\n"
