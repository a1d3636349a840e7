"""Cross-check: the vendor's SDK (``e2b``) drives envd's filesystem service on the emulator.

``files.make_dir``, ``rename``, ``remove``, ``get_info``, ``list`` and
``exists`` (the unary ``filesystem.Filesystem`` calls), and watching a
directory: the sync SDK's ``watch_dir`` (``CreateWatcher`` /
``GetWatcherEvents`` / ``RemoveWatcher``) and the async SDK's (the
``WatchDir`` stream). The SDK is pointed at the emulator as
``test_e2b_sdk.py`` does.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from managoat_sandbox.emulators.e2b import E2BEmulator

from ..conftest import wait_until
from .e2b_sdk import point_sdk

e2b = pytest.importorskip("e2b")

pytestmark = pytest.mark.timeout(90)

KEY = "e2b_sdk_files_test_key"
CREATE, WRITE, REMOVE, RENAME, CHMOD = (
    e2b.FilesystemEventType.CREATE,
    e2b.FilesystemEventType.WRITE,
    e2b.FilesystemEventType.REMOVE,
    e2b.FilesystemEventType.RENAME,
    e2b.FilesystemEventType.CHMOD,
)


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[E2BEmulator]:
    with E2BEmulator(credential=KEY) as running:
        point_sdk(monkeypatch, running, KEY)
        yield running  # type: ignore[misc]


@pytest.fixture
def sandbox(emulator: E2BEmulator) -> Iterator[Any]:
    created = e2b.Sandbox.create()
    yield created
    created.kill()


def _events(handle: Any) -> list[tuple[str, Any]]:
    return [(event.name, event.type) for event in handle.get_new_events()]


def test_make_dir_creates_parents_and_reports_an_existing_directory(sandbox: Any) -> None:
    assert sandbox.files.make_dir("/tmp/made/deep/er") is True
    assert sandbox.files.make_dir("/tmp/made/deep/er") is False
    info = sandbox.files.get_info("/tmp/made/deep")
    assert (info.type, info.path, info.owner) == (e2b.FileType.DIR, "/tmp/made/deep", "user")
    sandbox.files.write("/tmp/made/file", b"x")
    with pytest.raises(e2b.InvalidArgumentException):
        sandbox.files.make_dir("/tmp/made/file")
    assert sandbox.files.make_dir("relative") is True
    assert sandbox.files.exists("/home/user/relative") is True


def test_rename_moves_an_entry_and_answers_its_new_entry_info(sandbox: Any) -> None:
    sandbox.files.write("/tmp/mv/a.txt", "abc", metadata={"tag": "kept"})
    moved = sandbox.files.rename("/tmp/mv/a.txt", "/tmp/mv/new/b.txt")
    assert (moved.name, moved.path, moved.type, moved.size) == (
        "b.txt",
        "/tmp/mv/new/b.txt",
        e2b.FileType.FILE,
        3,
    )
    assert moved.metadata == {"tag": "kept"}
    assert sandbox.files.exists("/tmp/mv/a.txt") is False
    assert sandbox.files.read("/tmp/mv/new/b.txt") == "abc"
    assert sandbox.files.rename("/tmp/mv/new", "/tmp/mv/dir").type == e2b.FileType.DIR
    with pytest.raises(e2b.FileNotFoundException):
        sandbox.files.rename("/tmp/mv/none", "/tmp/mv/other")


def test_remove_deletes_files_and_trees_and_a_missing_path_is_no_error(sandbox: Any) -> None:
    sandbox.files.write("/tmp/rm/tree/inner/f", b"x")
    sandbox.files.write("/tmp/rm/file", b"x")
    sandbox.files.remove("/tmp/rm/file")
    sandbox.files.remove("/tmp/rm/tree")
    assert sandbox.files.exists("/tmp/rm/file") is False
    assert sandbox.files.exists("/tmp/rm/tree") is False
    sandbox.files.remove("/tmp/rm/never-there")  # envd's RemoveAll: no error
    assert [entry.name for entry in sandbox.files.list("/tmp/rm")] == []


def test_get_info_and_list_answer_every_entry_field_and_upload_metadata(sandbox: Any) -> None:
    sandbox.files.write("/tmp/info/data.txt", "12345", metadata={"Owner": "alice", "run": "7"})
    sandbox.files.write("/tmp/info/plain.txt", "p")
    assert sandbox.commands.run("chmod 640 /tmp/info/data.txt").exit_code == 0
    info = sandbox.files.get_info("/tmp/info/data.txt")
    assert (info.name, info.type, info.path, info.size) == (
        "data.txt",
        e2b.FileType.FILE,
        "/tmp/info/data.txt",
        5,
    )
    assert (info.mode, info.permissions, info.owner, info.group) == (
        0o640,
        "-rw-r-----",
        "user",
        "user",
    )
    assert info.modified_time.tzinfo is not None and info.symlink_target is None
    assert info.metadata == {"owner": "alice", "run": "7"}
    listed = {entry.name: entry for entry in sandbox.files.list("/tmp/info")}
    assert listed["data.txt"] == info
    assert listed["plain.txt"].metadata is None
    out_of_band = sandbox.commands.run(
        "python3 -c \"import os; os.setxattr('/tmp/info/plain.txt', 'user.e2b.set', b'by-cmd')\""
    )
    if out_of_band.exit_code == 0:  # the sandbox's own tools may set one too
        assert sandbox.files.get_info("/tmp/info/plain.txt").metadata == {"set": "by-cmd"}


def test_exists_tells_files_and_directories_from_nothing(sandbox: Any) -> None:
    sandbox.files.make_dir("/tmp/ex/dir")
    sandbox.files.write("/tmp/ex/file", b"")
    assert sandbox.files.exists("/tmp/ex/dir") is True
    assert sandbox.files.exists("/tmp/ex/file") is True
    assert sandbox.files.exists("/tmp/ex/none") is False


def test_a_watcher_reports_the_sdks_own_changes_as_envd_names_them(sandbox: Any) -> None:
    sandbox.files.make_dir("/tmp/w")
    sandbox.files.write("/tmp/w/old.txt", "a")
    handle = sandbox.files.watch_dir("/tmp/w")
    assert _events(handle) == []
    sandbox.files.write("/tmp/w/new.txt", "data")
    assert _events(handle) == [("new.txt", CREATE), ("new.txt", WRITE)]
    sandbox.files.write("/tmp/w/new.txt", "changed")
    assert _events(handle) == [("new.txt", WRITE)]
    sandbox.files.rename("/tmp/w/old.txt", "/tmp/w/renamed.txt")
    assert _events(handle) == [("old.txt", RENAME), ("renamed.txt", CREATE)]
    sandbox.files.make_dir("/tmp/w/sub")
    sandbox.files.remove("/tmp/w/new.txt")
    assert _events(handle) == [("sub", CREATE), ("new.txt", REMOVE)]
    handle.stop()


def test_a_watcher_sees_what_sandbox_commands_change(sandbox: Any) -> None:
    sandbox.files.write("/tmp/cmd/file", "x")
    handle = sandbox.files.watch_dir("/tmp/cmd")
    sandbox.commands.run("cd /tmp/cmd && chmod 600 file && echo made > made && rm file")
    assert _events(handle) == [("made", CREATE), ("made", WRITE), ("file", REMOVE)]
    sandbox.commands.run("chmod 700 /tmp/cmd/made")
    assert _events(handle) == [("made", CHMOD)]


def test_only_a_recursive_watcher_sees_into_subdirectories(sandbox: Any) -> None:
    sandbox.files.make_dir("/tmp/rec/sub")
    flat = sandbox.files.watch_dir("/tmp/rec")
    deep = sandbox.files.watch_dir("/tmp/rec", recursive=True, include_entry=True)
    sandbox.files.write("/tmp/rec/sub/inner", "x")
    assert _events(flat) == []
    found = deep.get_new_events()
    assert [(event.name, event.type) for event in found] == [
        ("sub/inner", CREATE),
        ("sub/inner", WRITE),
    ]
    assert found[0].entry is not None and found[0].entry.path == "/tmp/rec/sub/inner"
    sandbox.files.remove("/tmp/rec/sub")
    removed = deep.get_new_events()
    assert [(event.name, event.type, event.entry) for event in removed] == [
        ("sub/inner", REMOVE, None),
        ("sub", REMOVE, None),
    ]


def test_a_removed_watcher_is_gone_and_a_missing_directory_cannot_be_watched(
    sandbox: Any,
) -> None:
    sandbox.files.make_dir("/tmp/gone")
    handle = sandbox.files.watch_dir("/tmp/gone")
    handle.stop()
    with pytest.raises(e2b.SandboxException):
        handle.stop()  # envd: watcher not found
    with pytest.raises(e2b.FileNotFoundException):
        sandbox.files.watch_dir("/tmp/never")
    sandbox.files.write("/tmp/a-file", "x")
    with pytest.raises(e2b.InvalidArgumentException):
        sandbox.files.watch_dir("/tmp/a-file")


class _Seen:
    """What an async watch's ``on_event`` got, with a way to wait for more."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self._changed = asyncio.Event()

    def __call__(self, event: Any) -> None:
        self.events.append((event.name, event.type))
        self._changed.set()

    async def until(self, wanted: list[tuple[str, Any]]) -> None:
        """Wait (20 s at most for each event) until exactly ``wanted`` has come."""
        while self.events != wanted:
            assert len(self.events) < len(wanted), self.events
            self._changed.clear()
            await asyncio.wait_for(self._changed.wait(), timeout=20)


def test_watch_dir_streams_events_to_the_callback_and_ends_on_stop(
    emulator: E2BEmulator,
) -> None:
    async def scenario() -> None:
        sandbox = await e2b.AsyncSandbox.create()
        try:
            await sandbox.files.make_dir("/tmp/stream/sub")
            seen = _Seen()
            handle = await sandbox.files.watch_dir("/tmp/stream", seen, recursive=True)
            await sandbox.files.write("/tmp/stream/sub/f", "x")
            await seen.until([("sub/f", CREATE), ("sub/f", WRITE)])
            await sandbox.commands.run("rm -r /tmp/stream/sub")
            await seen.until(
                [("sub/f", CREATE), ("sub/f", WRITE), ("sub/f", REMOVE), ("sub", REMOVE)]
            )
            assert emulator.envd.open_watches == 1
            await handle.stop()
        finally:
            await sandbox.kill()

    asyncio.run(scenario())
    assert wait_until(lambda: emulator.envd.open_watches == 0)


def test_a_watch_stream_ends_with_an_error_when_its_sandbox_is_killed(
    emulator: E2BEmulator,
) -> None:
    async def scenario() -> Exception | None:
        sandbox = await e2b.AsyncSandbox.create()
        ended: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()
        await sandbox.files.watch_dir("/tmp", lambda event: None, on_exit=ended.set_result)
        assert emulator.envd.open_watches == 1
        await sandbox.kill()
        return await asyncio.wait_for(ended, timeout=20)

    error = asyncio.run(scenario())
    assert isinstance(error, e2b.SandboxException), error
    assert wait_until(lambda: emulator.envd.open_watches == 0)
    names = lambda: {t.name for t in threading.enumerate()}  # noqa: E731
    assert wait_until(lambda: not any(n.startswith("e2b-emulator-call") for n in names()))


def test_a_watch_stream_ends_when_its_client_goes_away(emulator: E2BEmulator) -> None:
    async def scenario() -> None:
        sandbox = await e2b.AsyncSandbox.create()
        try:
            handle = await sandbox.files.watch_dir("/tmp", lambda event: None)
            assert emulator.envd.open_watches == 1
            await handle.stop()
        finally:
            await sandbox.kill()

    asyncio.run(scenario())
    assert wait_until(lambda: emulator.envd.open_watches == 0)
