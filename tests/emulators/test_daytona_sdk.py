"""Cross-check: the vendor's official ``daytona`` SDK drives the emulator unchanged."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from managoat_sandbox.emulators.daytona import DaytonaEmulator
from tests.conftest import wait_until

daytona = pytest.importorskip("daytona")

pytestmark = pytest.mark.timeout(120)
KEY = "sdk-key"


@pytest.fixture
def emulator() -> Iterator[DaytonaEmulator]:
    with DaytonaEmulator(credential=KEY) as running:
        running.log_idle_close = 0.05
        yield running  # type: ignore[misc]


@pytest.fixture
def client(emulator: DaytonaEmulator, monkeypatch: pytest.MonkeyPatch) -> Any:
    for name in ("DAYTONA_API_URL", "DAYTONA_SERVER_URL", "DAYTONA_TARGET", "DAYTONA_JWT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return daytona.Daytona(daytona.DaytonaConfig(api_key=KEY, api_url=emulator.api_url))


def test_sdk_create_exec_and_delete(client: Any, emulator: DaytonaEmulator) -> None:
    sandbox = client.create(
        daytona.CreateSandboxFromSnapshotParams(name="sdk-box", labels={"team": "x"})
    )
    assert sandbox.state == daytona.SandboxState.STARTED
    assert sandbox.labels["team"] == "x" and "code-toolbox-language" in sandbox.labels
    result = sandbox.process.exec("echo hi; echo err >&2; exit 3", env={"A": "1"})
    assert result.exit_code == 3 and sorted(result.result.splitlines()) == ["err", "hi"]
    toolbox = [r for r in emulator.requests if r.path.startswith("/toolbox/")]
    assert toolbox and toolbox[0].headers.get("X-Daytona-SDK-Version")
    sandbox.delete()
    assert [s.name for s in client.list()] == []


def test_sdk_session_command_with_logs_and_follow(client: Any) -> None:
    sandbox = client.create(daytona.CreateSandboxFromSnapshotParams(name="sdk-logs"))
    sandbox.process.create_session("s1")
    request = daytona.SessionExecuteRequest(
        command="echo out; echo e >&2; sleep 0.2; echo done; (exit 4)", run_async=True
    )
    command = sandbox.process.execute_session_command("s1", request)
    out: list[str] = []
    err: list[str] = []
    asyncio.run(
        sandbox.process.get_session_command_logs_async("s1", command.cmd_id, out.append, err.append)
    )
    assert "".join(out) == "out\ndone\n" and "".join(err) == "e\n"
    record = sandbox.process.get_session_command("s1", command.cmd_id)
    assert record.exit_code == 4
    logs = sandbox.process.get_session_command_logs("s1", command.cmd_id)
    assert (logs.stdout, logs.stderr) == ("out\ndone\n", "e\n")
    sync = sandbox.process.execute_session_command(
        "s1", daytona.SessionExecuteRequest(command="echo sync")
    )
    assert sync.exit_code == 0 and sync.stdout == "sync\n"
    sessions = sandbox.process.list_sessions()
    assert [s.session_id for s in sessions] == ["s1"] and len(sessions[0].commands) == 2


def test_sdk_stop_start_wipes_sessions_and_keeps_files(client: Any) -> None:
    sandbox = client.create(daytona.CreateSandboxFromSnapshotParams(name="sdk-life"))
    sandbox.fs.upload_file(b"kept", "dir/file.txt")
    sandbox.process.create_session("s1")
    sandbox.stop()
    assert sandbox.state == daytona.SandboxState.STOPPED
    sandbox.start()
    assert sandbox.state == daytona.SandboxState.STARTED
    assert sandbox.process.list_sessions() == []
    assert sandbox.process.exec("cat dir/file.txt").result == "kept"


def test_sdk_list_walks_every_page(client: Any) -> None:
    names = {f"sdk-list-{i}" for i in range(5)}
    for name in sorted(names):
        client.create(daytona.CreateSandboxFromSnapshotParams(name=name, labels={"g": "1"}))
    client.create(daytona.CreateSandboxFromSnapshotParams(name="other"))
    listed = client.list(daytona.ListSandboxesQuery(labels={"g": "1"}, limit=2))
    assert {s.name for s in listed} == names
    fetched = client.get("sdk-list-0")
    fetched.delete()
    assert wait_until(lambda: "sdk-list-0" not in {s.name for s in client.list()}, 5)


def test_sdk_downloads_binary_files_and_lists_directories(client: Any) -> None:
    sandbox = client.create(daytona.CreateSandboxFromSnapshotParams(name="sdk-files"))
    data = bytes(range(256)) * 1000 + b"\r\n-DAYTONA-FILE-BOUNDARY\r\n\x00"
    sandbox.fs.upload_file(data, "/tmp/sdk/every-byte.bin")
    sandbox.fs.upload_file(b"abc", "/tmp/sdk/sub/inner.txt")
    assert sandbox.fs.download_file("/tmp/sdk/every-byte.bin") == data
    streamed = b"".join(sandbox.fs.download_file_stream("/tmp/sdk/every-byte.bin"))
    assert streamed == data
    with pytest.raises(daytona.DaytonaNotFoundError) as missing:
        sandbox.fs.download_file("/tmp/sdk/missing")
    assert missing.value.status_code == 404 and missing.value.code == "FILE_NOT_FOUND"
    with pytest.raises(daytona.DaytonaError) as directory:
        sandbox.fs.download_file("/tmp/sdk/sub")
    assert directory.value.status_code == 400
    listed = {f.name: f for f in sandbox.fs.list_files("/tmp/sdk")}
    assert sorted(listed) == ["every-byte.bin", "sub"]
    blob, sub = listed["every-byte.bin"], listed["sub"]
    assert (blob.is_dir, blob.size, blob.path) == (False, len(data), "/tmp/sdk/every-byte.bin")
    assert (blob.mode, blob.permissions) == ("-rw-r--r--", "0644")
    assert blob.modified_at and blob.mod_time.endswith("+0000 UTC")
    assert (sub.is_dir, sub.mode[0]) == (True, "d")
    deep = sandbox.fs.list_files("/tmp/sdk", depth=2)
    assert sorted(f.path for f in deep) == [
        "/tmp/sdk/every-byte.bin",
        "/tmp/sdk/sub",
        "/tmp/sdk/sub/inner.txt",
    ]
    with pytest.raises(daytona.DaytonaNotFoundError):
        sandbox.fs.list_files("/tmp/sdk/missing")
