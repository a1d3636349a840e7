"""Cross-check: the vendor's ``daytona`` SDK's file operations, unchanged, against the
emulator's toolbox (docs/protocols/daytona.md#files)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path
from typing import Any

import pytest
import requests

from managoat_sandbox.emulators.daytona import DaytonaEmulator

daytona = pytest.importorskip("daytona")

pytestmark = pytest.mark.timeout(120)
KEY = "sdk-files-key"


@pytest.fixture
def emulator() -> Iterator[DaytonaEmulator]:
    with DaytonaEmulator(credential=KEY) as running:
        yield running  # type: ignore[misc]


@pytest.fixture
def sandbox(emulator: DaytonaEmulator, monkeypatch: pytest.MonkeyPatch) -> Any:
    for name in ("DAYTONA_API_URL", "DAYTONA_SERVER_URL", "DAYTONA_TARGET", "DAYTONA_JWT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    client = daytona.Daytona(daytona.DaytonaConfig(api_key=KEY, api_url=emulator.api_url))
    return client.create(daytona.CreateSandboxFromSnapshotParams(name="sdk-fs"))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A host file outside every sandbox, which no file operation may reach."""
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("NEEDLE outside the sandbox\n")
    return secret


def _link(sandbox: Any, target: str, link: str) -> None:
    """A symlink made by a command inside the sandbox at ``link``, a path relative to its
    home (so that even a sandbox without isolation makes it in its own directory)."""
    assert not link.startswith("/")
    assert (
        sandbox.process.exec(
            f"mkdir -p \"$(dirname '{link}')\" && ln -s '{target}' '{link}'"
        ).exit_code
        == 0
    )


def test_bulk_download_parts_carry_their_content_length(sandbox: Any) -> None:
    data = os.urandom(300_000)
    sandbox.fs.upload_file(data, "/tmp/dl/blob.bin")
    seen: list[Any] = []
    streamed = b"".join(
        sandbox.fs.download_file_stream("/tmp/dl/blob.bin", on_progress=seen.append)
    )
    assert streamed == data
    assert seen and {p.total_bytes for p in seen} == {len(data)}
    assert seen[-1].bytes_received == len(data)


def test_upload_files_writes_every_file(sandbox: Any) -> None:
    uploads = [
        daytona.FileUpload(source=b"one", destination="/tmp/up/one.txt"),
        daytona.FileUpload(source=b"\x00two", destination="/tmp/up/deep/er/two.bin"),
        daytona.FileUpload(source=b"three", destination="up-rel/three.txt"),
    ]
    sandbox.fs.upload_files(uploads)
    for upload in uploads:
        assert sandbox.fs.download_file(upload.destination) == upload.source


def test_delete_file_and_directories_only_when_recursive(sandbox: Any) -> None:
    sandbox.fs.upload_file(b"x", "/tmp/del/tree/leaf.txt")
    sandbox.fs.upload_file(b"y", "/tmp/del/file.txt")
    sandbox.fs.delete_file("/tmp/del/file.txt")
    with pytest.raises(daytona.DaytonaNotFoundError):
        sandbox.fs.get_file_info("/tmp/del/file.txt")
    with pytest.raises(daytona.DaytonaError) as refused:
        sandbox.fs.delete_file("/tmp/del/tree")
    assert refused.value.status_code == 400
    assert sandbox.fs.download_file("/tmp/del/tree/leaf.txt") == b"x"
    sandbox.fs.delete_file("/tmp/del/tree", recursive=True)
    assert [f.name for f in sandbox.fs.list_files("/tmp/del")] == []
    with pytest.raises(daytona.DaytonaNotFoundError) as missing:
        sandbox.fs.delete_file("/tmp/del/missing")
    assert (missing.value.status_code, missing.value.code) == (404, "FILE_NOT_FOUND")


def test_delete_removes_a_link_not_what_it_names(sandbox: Any, outside: Path) -> None:
    sandbox.fs.upload_file(b"kept", "away/kept.txt")
    _link(sandbox, "away", "link-to-away")
    sandbox.fs.delete_file("link-to-away", recursive=True)
    assert sandbox.fs.download_file("away/kept.txt") == b"kept"
    _link(sandbox, str(outside.parent), "link-outside")
    with pytest.raises(daytona.DaytonaNotFoundError):
        sandbox.fs.delete_file("link-outside", recursive=True)
    assert outside.read_text() == "NEEDLE outside the sandbox\n"


def test_move_files_renames_and_refuses_to_overwrite(sandbox: Any) -> None:
    sandbox.fs.upload_file(b"moved", "/tmp/mv/a.txt")
    sandbox.fs.upload_file(b"kept", "/tmp/mv/taken.txt")
    sandbox.fs.move_files("/tmp/mv/a.txt", "/tmp/mv/b.txt")
    assert sandbox.fs.download_file("/tmp/mv/b.txt") == b"moved"
    assert sorted(f.name for f in sandbox.fs.list_files("/tmp/mv")) == ["b.txt", "taken.txt"]
    with pytest.raises(daytona.DaytonaConflictError) as taken:
        sandbox.fs.move_files("/tmp/mv/b.txt", "/tmp/mv/taken.txt")
    assert taken.value.status_code == 409
    assert sandbox.fs.download_file("/tmp/mv/taken.txt") == b"kept"
    with pytest.raises(daytona.DaytonaNotFoundError):
        sandbox.fs.move_files("/tmp/mv/missing", "/tmp/mv/c.txt")
    with pytest.raises(daytona.DaytonaNotFoundError):
        sandbox.fs.move_files("/tmp/mv/b.txt", "/tmp/mv/no/parent.txt")


def test_create_folder_makes_parents_with_the_mode(sandbox: Any) -> None:
    sandbox.fs.create_folder("/tmp/mk/a/b", "700")
    sandbox.fs.create_folder("/tmp/mk/a/b", "700")
    info = sandbox.fs.get_file_info("/tmp/mk/a/b")
    assert (info.is_dir, info.mode, info.permissions) == (True, "drwx------", "0700")
    with pytest.raises(daytona.DaytonaError) as bad:
        sandbox.fs.create_folder("/tmp/mk/c", "9z")
    assert bad.value.status_code == 400


def test_find_files_searches_contents_by_line(sandbox: Any, outside: Path) -> None:
    sandbox.fs.upload_file(b"a\nfind NEEDLE here\nb\r\nNEEDLE again\r\n", "fd/one.txt")
    sandbox.fs.upload_file(b"NEEDLE\x00binary", "fd/bin.dat")
    sandbox.fs.upload_file(b"no match\n", "fd/sub/two.txt")
    sandbox.fs.upload_file(b"deep NEEDLE\n", "fd/sub/three.txt")
    _link(sandbox, str(outside), "fd/to-file")
    _link(sandbox, str(outside.parent), "fd/to-dir")
    _link(sandbox, "sub", "fd/to-sub")
    matches = sandbox.fs.find_files("fd", "NEEDLE")
    assert [(m.file, m.line, m.content) for m in matches] == [
        ("fd/one.txt", 2, "find NEEDLE here"),
        ("fd/one.txt", 4, "NEEDLE again"),
        ("fd/sub/three.txt", 1, "deep NEEDLE"),
    ]
    assert sandbox.fs.find_files("fd/missing", "NEEDLE") == []


def test_search_files_matches_globs_on_relative_paths(sandbox: Any) -> None:
    for name in ("a.txt", "b.py", "c.py", "sub/d.txt", "sub/deeper/e.txt"):
        sandbox.fs.upload_file(b"", f"/tmp/sr/{name}")
    assert sandbox.fs.search_files("/tmp/sr", "*.txt").files == ["/tmp/sr/a.txt"]
    assert sandbox.fs.search_files("/tmp/sr", "**/*.txt").files == [
        "/tmp/sr/a.txt",
        "/tmp/sr/sub/d.txt",
        "/tmp/sr/sub/deeper/e.txt",
    ]
    assert sandbox.fs.search_files("/tmp/sr", "{b,c}.p?").files == ["/tmp/sr/b.py", "/tmp/sr/c.py"]
    assert sandbox.fs.search_files("/tmp/sr", "sub").files == []
    with pytest.raises(daytona.DaytonaError) as bad:
        sandbox.fs.search_files("/tmp/sr", "[a")
    assert bad.value.status_code == 400


def test_replace_in_files_reports_each_file(sandbox: Any, outside: Path) -> None:
    sandbox.fs.upload_file(b"NEEDLE and NEEDLE\n", "rp/one.txt")
    _link(sandbox, str(outside), "rp/escape.txt")
    files = ["rp/one.txt", "rp/missing.txt", "rp/escape.txt", "rp"]
    results = sandbox.fs.replace_in_files(files, "NEEDLE", "pin")
    assert [(r.file, r.success, r.error) for r in results] == [
        ("rp/one.txt", True, None),
        ("rp/missing.txt", False, "open rp/missing.txt: no such file or directory"),
        ("rp/escape.txt", False, "open rp/escape.txt: no such file or directory"),
        ("rp", False, "read rp: is a directory"),
    ]
    assert sandbox.fs.download_file("rp/one.txt") == b"pin and pin\n"
    assert outside.read_text() == "NEEDLE outside the sandbox\n"


def test_set_file_permissions_changes_mode_and_refuses_a_foreign_owner(sandbox: Any) -> None:
    sandbox.fs.upload_file(b"p", "/tmp/pm/file.txt")
    sandbox.fs.set_file_permissions("/tmp/pm/file.txt", mode="600")
    info = sandbox.fs.get_file_info("/tmp/pm/file.txt")
    assert (info.mode, info.permissions) == ("-rw-------", "0600")
    sandbox.fs.set_file_permissions("/tmp/pm/file.txt", owner=info.owner, group=info.group)
    foreign = "0" if info.owner != "0" else "1"
    with pytest.raises(daytona.DaytonaError) as refused:
        sandbox.fs.set_file_permissions("/tmp/pm/file.txt", owner=foreign)
    assert (refused.value.status_code, refused.value.code) == (403, "FILE_ACCESS_DENIED")
    with pytest.raises(daytona.DaytonaNotFoundError):
        sandbox.fs.set_file_permissions("/tmp/pm/missing", mode="600")


def test_get_file_info_and_list_files_describe_entries(sandbox: Any) -> None:
    sandbox.fs.upload_file(b"12345", "info/file.txt")
    info = sandbox.fs.get_file_info("info/file.txt")
    assert (info.name, info.size, info.is_dir, info.permissions) == ("file.txt", 5, False, "0644")
    assert info.mod_time.endswith("+0000 UTC") and info.owner.isdigit()
    folder = sandbox.fs.get_file_info("info")
    assert (folder.name, folder.is_dir, folder.mode[0]) == ("info", True, "d")
    assert [f.name for f in sandbox.fs.list_files("info")] == ["file.txt"]
    with pytest.raises(daytona.DaytonaNotFoundError):
        sandbox.fs.get_file_info("info/missing")


def test_wire_statuses_and_daemon_error_bodies(emulator: DaytonaEmulator, sandbox: Any) -> None:
    base = f"{emulator.toolbox_url.rstrip('/')}/{sandbox.id}"
    auth = {"Authorization": f"Bearer {KEY}"}

    def call(method: str, path: str, **kwargs: Any) -> requests.Response:
        return requests.request(method, base + path, headers=auth, timeout=30, **kwargs)

    assert call("POST", "/files/folder", params={"path": "w/d"}).status_code == 201
    moved = call("POST", "/files/move", params={"source": "w/d", "destination": "w/e"})
    assert (moved.status_code, moved.text) == (200, "")
    assert call("DELETE", "/files", params={"path": "w/e"}).status_code == 400
    assert call("DELETE", "/files", params={"path": "w/e", "recursive": "true"}).status_code == 204
    missing = call("DELETE", "/files", params={"path": "w/e"})
    body = missing.json()
    assert (missing.status_code, body["code"], body["statusCode"]) == (404, "FILE_NOT_FOUND", 404)
    assert body["message"] == "stat w/e: no such file or directory"
    assert {"timestamp", "path", "method"} <= set(body)
    unnamed = call("POST", "/files/move", params={"source": "w"})
    assert (unnamed.status_code, unnamed.json()["code"]) == (400, "BAD_REQUEST")


def test_every_bulk_download_part_carries_its_content_length(
    emulator: DaytonaEmulator, sandbox: Any
) -> None:
    sandbox.fs.upload_file(b"0123456789", "/tmp/cl/ten.bin")
    answer = requests.post(
        f"{emulator.toolbox_url.rstrip('/')}/{sandbox.id}/files/bulk-download",
        json={"paths": ["/tmp/cl/ten.bin", "/tmp/cl/missing"]},
        headers={"Authorization": f"Bearer {KEY}", "Accept": "multipart/form-data"},
        timeout=30,
    )
    head = f"Content-Type: {answer.headers['Content-Type']}\r\n\r\n".encode()
    parts = list(BytesParser(policy=HTTP).parsebytes(head + answer.content).iter_parts())
    lengths = [(p["Content-Length"], len(p.get_payload(decode=True))) for p in parts]
    assert [p.get_param("name", header="content-disposition") for p in parts] == ["file", "error"]
    assert lengths[0] == ("10", 10)
    assert int(lengths[1][0]) == lengths[1][1] > 0
