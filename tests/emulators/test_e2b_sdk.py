"""Cross-check: the vendor's own Python SDK (``e2b``) works against the emulator unchanged.

The SDK is pointed at the emulator as docs/protocols/e2b.md#pointing-the-sdk-here says:
``E2B_API_URL`` and ``E2B_SANDBOX_URL`` both at the emulator's base URL,
``E2B_DEBUG=false``, ``E2B_HTTP_VERSION=1.1``. If the vendor's client cannot
drive our emulator, the emulator is wrong.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from managoat_sandbox.emulators.e2b import E2BEmulator

from ..conftest import wait_until

e2b = pytest.importorskip("e2b")

pytestmark = pytest.mark.timeout(90)

KEY = "e2b_sdk_test_key"


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[E2BEmulator]:
    with E2BEmulator(credential=KEY, log_bodies=True) as running:
        monkeypatch.setenv("E2B_API_KEY", KEY)
        monkeypatch.setenv("E2B_API_URL", running.base_url)
        monkeypatch.setenv("E2B_SANDBOX_URL", running.base_url)
        monkeypatch.setenv("E2B_DEBUG", "false")
        monkeypatch.setenv("E2B_HTTP_VERSION", "1.1")
        yield running  # type: ignore[misc]


@pytest.fixture
def sandbox(emulator: E2BEmulator) -> Iterator[Any]:
    created = e2b.Sandbox.create(metadata={"suite": "sdk"})
    yield created
    created.kill()


def test_create_answers_what_the_sdk_expects(emulator: E2BEmulator, sandbox: Any) -> None:
    info = sandbox.get_info()
    assert info.sandbox_id == sandbox.sandbox_id
    assert info.metadata == {"suite": "sdk"}
    assert str(info.state) == "running"
    created = [r for r in emulator.requests if r.method == "POST" and r.path == "/v2/sandboxes"]
    assert len(created) == 1 and created[0].json()["templateID"] == "base"


def test_a_command_runs_and_reports_output_and_exit_code(sandbox: Any) -> None:
    result = sandbox.commands.run("echo hello; echo oops >&2")
    assert (result.stdout, result.stderr, result.exit_code) == ("hello\n", "oops\n", 0)
    with pytest.raises(e2b.CommandExitException) as failure:
        sandbox.commands.run("echo partial; exit 3")
    assert failure.value.exit_code == 3 and failure.value.stdout == "partial\n"


def test_output_streams_to_callbacks_as_it_is_produced(sandbox: Any) -> None:
    chunks: list[str] = []
    errors: list[str] = []
    result = sandbox.commands.run(
        "for i in 1 2 3; do echo line-$i; sleep 0.05; done; echo warn >&2",
        on_stdout=chunks.append, on_stderr=errors.append)
    assert "".join(chunks) == "line-1\nline-2\nline-3\n" == result.stdout
    assert len(chunks) == 3
    assert errors == ["warn\n"]


def test_stdin_reaches_a_background_command(sandbox: Any) -> None:
    handle = sandbox.commands.run("cat", background=True, stdin=True)
    sandbox.commands.send_stdin(handle.pid, "ping\n")
    handle.send_stdin("pong\n")
    sandbox.commands.close_stdin(handle.pid)
    result = handle.wait()
    assert result.stdout == "ping\npong\n" and result.exit_code == 0


def test_kill_ends_a_running_command(sandbox: Any) -> None:
    handle = sandbox.commands.run("sleep 30", background=True)
    assert handle.pid in [process.pid for process in sandbox.commands.list()]
    assert handle.kill() is True
    with pytest.raises(e2b.CommandExitException) as killed:
        handle.wait()
    assert killed.value.exit_code == -1
    assert wait_until(lambda: handle.pid not in [p.pid for p in sandbox.commands.list()])
    assert sandbox.commands.kill(handle.pid) is False


def test_connect_to_a_running_command_streams_new_output(sandbox: Any) -> None:
    handle = sandbox.commands.run("read a; echo got-$a; read b; echo got-$b",
                                  background=True, stdin=True)
    handle.disconnect()
    attached = sandbox.commands.connect(handle.pid)
    sandbox.commands.send_stdin(handle.pid, "one\n")
    sandbox.commands.send_stdin(handle.pid, "two\n")
    assert attached.wait().stdout == "got-one\ngot-two\n"


def test_listing_filters_by_metadata_and_kill_removes_the_sandbox(emulator: E2BEmulator) -> None:
    tagged = e2b.Sandbox.create(metadata={"fountain_name": "sdk-a"})
    other = e2b.Sandbox.create()
    query = e2b.SandboxQuery(metadata={"fountain_name": "sdk-a"})
    found = e2b.Sandbox.list(query=query).next_items()
    assert [info.sandbox_id for info in found] == [tagged.sandbox_id]
    paginator = e2b.Sandbox.list(limit=1)
    seen = []
    while paginator.has_next:
        seen += [info.sandbox_id for info in paginator.next_items()]
    assert sorted(seen) == sorted([tagged.sandbox_id, other.sandbox_id])
    assert e2b.Sandbox.kill(tagged.sandbox_id) is True
    other.kill()
    assert e2b.Sandbox.list().next_items() == []
    assert e2b.Sandbox.kill(tagged.sandbox_id) is False


def test_files_write_and_read_through_the_sdk(emulator: E2BEmulator, sandbox: Any) -> None:
    info = sandbox.files.write("/home/user/dir/a.txt", "data")
    assert info.path == "/home/user/dir/a.txt"
    assert sandbox.files.read("/home/user/dir/a.txt") == "data"
    assert emulator.read_file(sandbox.sandbox_id, "/home/user/dir/a.txt") == b"data"


def test_pause_and_connect_resume_the_same_sandbox(sandbox: Any) -> None:
    handle = sandbox.commands.run("cat", background=True, stdin=True)
    assert sandbox.pause() is True
    assert str(sandbox.get_info().state) == "paused"
    resumed = e2b.Sandbox.connect(sandbox.sandbox_id)
    assert str(resumed.get_info().state) == "running"
    resumed.commands.send_stdin(handle.pid, "after\n")
    resumed.commands.close_stdin(handle.pid)
    assert resumed.commands.run("echo alive").stdout == "alive\n"


def test_timeout_and_network_updates_are_accepted(emulator: E2BEmulator, sandbox: Any) -> None:
    sandbox.set_timeout(60)
    sandbox.update_network({"allow_out": ["1.1.1.1"], "deny_out": ["0.0.0.0/0"]})
    network = emulator.record(sandbox.sandbox_id).network
    assert network == {"allowOut": ["1.1.1.1"], "denyOut": ["0.0.0.0/0"]}


def test_the_sdk_leaves_no_emulator_thread_behind(emulator: E2BEmulator) -> None:
    created = e2b.Sandbox.create()
    created.commands.run("true")
    created.kill()
    names = lambda: {t.name for t in threading.enumerate()}  # noqa: E731
    assert wait_until(lambda: not any(n.startswith("e2b-emulator-call") for n in names()))
