"""The adapter's read_file and list_files: the wire calls (mocked API) and large files
through the emulator."""

from __future__ import annotations

import io
import os
import threading
from datetime import datetime, timezone
from typing import Any

import pytest
import responses

from managoat_sandbox import facade
from managoat_sandbox.emulators.sprites import SpritesEmulator
from managoat_sandbox.errors import (
    Denied,
    Invalid,
    NotFound,
    ProviderError,
    Truncated,
    Unavailable,
)
from managoat_sandbox.providers.sprites import Sprites
from managoat_sandbox.providers.sprites import files as sprites_files
from managoat_sandbox.types import FileInfo, Handle

from ..conftest import wait_until
from .wire import calls, query, url

BOX = Handle("sprites", "box")
READ = url("/v1/sprites/box/fs/read")
LIST = url("/v1/sprites/box/fs/list")


class Source(io.RawIOBase):
    """A response body of ``size`` bytes that counts what the client read of it."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.left = size
        self.taken = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = min(len(buffer), self.left, 4096)
        buffer[:count] = b"y" * count
        self.left -= count
        self.taken += count
        return count


class Untouchable(io.RawIOBase):
    """A response body that must never be read."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        raise AssertionError("the body was read")


def entry(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "path": f"/app/{name}",
        "type": "file",
        "size": 3,
        "mode": "0644",
        "modTime": "2026-07-20T10:00:00.123456789Z",
        "isDir": False,
        **fields,
    }


# -- read_file over the wire ----------------------------------------------------------


def test_read_file_gets_the_raw_bytes_of_the_absolute_path(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    data = bytes(range(256)) * 3
    api.get(READ, body=data, content_type="application/octet-stream")
    assert adapter.read_file(BOX, "/app/blob.bin") == data
    assert calls(api) == [("GET", "/v1/sprites/box/fs/read")]
    assert query(api) == [("path", "/app/blob.bin"), ("workingDir", "/")]
    assert api.calls[0].request.headers["Accept-Encoding"] == "identity"


def test_a_content_length_over_max_bytes_refuses_the_file_before_its_body_is_read(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.get(READ, body=io.BufferedReader(Untouchable()), headers={"Content-Length": "5000"})
    with pytest.raises(Truncated) as raised:
        adapter.read_file(BOX, "/big", max_bytes=4999)
    assert raised.value.detail == ("max_bytes", 4999)


def test_max_bytes_stops_reading_a_body_without_a_length_early(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    source = Source(8 * 1024 * 1024)
    api.get(READ, body=io.BufferedReader(source))
    with pytest.raises(Truncated):
        adapter.read_file(BOX, "/big", max_bytes=100_000)
    assert source.taken < 200_000


def test_a_file_of_exactly_max_bytes_is_read_whole(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.get(READ, body=b"12345")
    assert adapter.read_file(BOX, "/f", max_bytes=5) == b"12345"


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (404, {"error": "open /x: no such file or directory", "path": "/x"}, NotFound),
        (400, {"error": "is a directory", "code": "EISDIR"}, Invalid),
        (500, {"error": "read /app: is a directory"}, Invalid),
        (500, {"error": "stat /app/f/x: not a directory", "code": "ENOTDIR"}, Invalid),
        (500, {"error": "input/output error", "code": "EIO"}, Unavailable),
        (400, {"error": "not a regular file", "code": "EINVAL"}, Invalid),
    ],
)
def test_read_file_failures_map_to_the_taxonomy(
    api: responses.RequestsMock,
    adapter: Sprites,
    status: int,
    body: Any,
    error: type[Exception],
) -> None:
    api.get(READ, json=body, status=status)
    with pytest.raises(error):
        adapter.read_file(BOX, "/x")


def test_a_huge_error_body_is_cut_not_read_whole(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    source = Source(4 * 1024 * 1024)
    api.get(READ, body=io.BufferedReader(source), status=500)
    with pytest.raises(Unavailable):
        adapter.read_file(BOX, "/x")
    assert source.taken < 1024 * 1024


# -- list_files over the wire ---------------------------------------------------------


def test_list_files_maps_each_entry(api: responses.RequestsMock, adapter: Sprites) -> None:
    api.get(
        LIST,
        json={
            "path": "/app",
            "count": 5,
            "entries": [
                entry("a.txt", mode="0640"),
                entry("sub", type="directory", isDir=True, size=4096, mode="0755"),
                entry("ln", type="symlink", size=5, mode="0777"),
                entry("pipe", type="other", size=0),
                entry("..", type="directory", isDir=True),
            ],
        },
    )
    listed = adapter.list_files(BOX, "/app")
    assert query(api) == [("path", "/app"), ("workingDir", "/")]
    moment = datetime(2026, 7, 20, 10, 0, 0, 123456, tzinfo=timezone.utc)
    assert listed == [
        FileInfo("a.txt", "/app/a.txt", "file", 3, 0o640, moment),
        FileInfo("sub", "/app/sub", "dir", 4096, 0o755, moment),
        FileInfo("ln", "/app/ln", "symlink", 5, 0o777, moment),
        FileInfo("pipe", "/app/pipe", "other", 0, 0o644, moment),
    ]


def test_list_files_of_the_root_joins_paths_once(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.get(
        LIST,
        json={
            "path": "/",
            "count": 1,
            "entries": [entry("etc", path="/etc", type="directory", isDir=True)],
        },
    )
    assert [(e.name, e.path, e.type) for e in adapter.list_files(BOX, "/")] == [
        ("etc", "/etc", "dir")
    ]


def test_unreported_or_odd_mode_and_time_are_none(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.get(
        LIST,
        json={
            "entries": [
                {"name": "a", "path": "/app/a", "size": 1},
                entry("b", mode="rw-r--r--", modTime="yesterday"),
                entry("c", mode=None, modTime="2026-07-20T10:00:00"),
            ]
        },
    )
    assert [(e.name, e.type, e.mode, e.modified) for e in adapter.list_files(BOX, "/app")] == [
        ("a", "file", None, None),
        ("b", "file", None, None),
        ("c", "file", None, None),
    ]


def test_a_listing_describing_a_file_itself_is_invalid(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.get(
        LIST,
        json={"path": "/app/a.txt", "count": 1, "entries": [entry("a.txt", path="/app/a.txt")]},
    )
    with pytest.raises(Invalid) as raised:
        adapter.list_files(BOX, "/app/a.txt")
    assert raised.value.detail == ("not_a_directory", "/app/a.txt")


def test_a_directory_describing_itself_is_left_out(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.get(
        LIST,
        json={
            "entries": [entry("app", path="/app/", type="directory", isDir=True), entry("a.txt")]
        },
    )
    assert [e.name for e in adapter.list_files(BOX, "/app")] == ["a.txt"]


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (404, {"error": "stat /app/none: no such file or directory"}, NotFound),
        (400, {"error": "not a directory", "code": "ENOTDIR"}, Invalid),
        (500, {"error": "readdirent /app/f: not a directory"}, Invalid),
        (500, {"error": "boom"}, Unavailable),
    ],
)
def test_list_files_failures_map_to_the_taxonomy(
    api: responses.RequestsMock,
    adapter: Sprites,
    status: int,
    body: Any,
    error: type[Exception],
) -> None:
    api.get(LIST, json=body, status=status)
    with pytest.raises(error):
        adapter.list_files(BOX, "/app/none")


# -- a refusal by file permissions ------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body"),
    [
        # the emulator's answer: the vendor's error body, its documented 403
        (403, {"error": "open /s: permission denied", "code": "EACCES", "path": "/s"}),
        # how the vendor's SDKs recognise one, whatever the status: the code, or the text
        (500, {"error": "chmod /s: operation not permitted", "code": "EPERM"}),
        (400, {"error": "open /s: permission denied"}),
    ],
)
def test_a_refusal_by_file_permissions_is_denied_naming_the_path(
    api: responses.RequestsMock, adapter: Sprites, status: int, body: Any
) -> None:
    api.get(READ, json=body, status=status)
    api.get(LIST, json=body, status=status)
    api.put(url("/v1/sprites/box/fs/write"), json=body, status=status)
    operations = {
        "read_file": lambda: adapter.read_file(BOX, "/s"),
        "list_files": lambda: adapter.list_files(BOX, "/s"),
        "write_file": lambda: adapter.write_file(BOX, "/s", b"x"),
    }
    for name, call in operations.items():
        with pytest.raises(Denied) as raised:
            call()
        assert (raised.value.detail, raised.value.status) == (("path", "/s"), status), name


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"entries": {}},
        {"entries": [3]},
        {"entries": [{"path": "/app/x", "size": 1}]},
        {"entries": [entry("a/b")]},
        {"entries": [entry("")]},
        {"entries": [entry("a", size=-1)]},
        {"entries": [entry("a", size="3")]},
        {"entries": [entry("a", size=True)]},
    ],
)
def test_a_malformed_listing_is_a_provider_error(
    api: responses.RequestsMock, adapter: Sprites, body: Any
) -> None:
    api.get(LIST, json=body)
    with pytest.raises(ProviderError):
        adapter.list_files(BOX, "/app")


def test_a_listing_over_the_limit_is_truncated_never_partial(
    api: responses.RequestsMock, adapter: Sprites, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sprites_files, "LISTING_LIMIT", 1000)
    api.get(LIST, json={"entries": [entry(f"file-{i}") for i in range(50)]})
    with pytest.raises(Truncated) as raised:
        adapter.list_files(BOX, "/app")
    assert raised.value.detail == ("listing_bytes", 1000)
    assert len(api.calls) == 1


# -- through the emulator ---------------------------------------------------------------


def test_a_20_mib_file_comes_back_byte_for_byte(sprites: Sprites, emu: SpritesEmulator) -> None:
    handle = sprites.create("large-read")
    data = os.urandom(20 * 1024 * 1024 + 4097)
    (emu.sprite_root("large-read") / "large.bin").write_bytes(data)
    assert sprites.read_file(handle, "/large.bin") == data
    assert facade.read_file(handle, "/large.bin", max_bytes=len(data)) == data
    with pytest.raises(Truncated):
        sprites.read_file(handle, "/large.bin", max_bytes=len(data) - 1)


def test_a_read_abandoned_by_the_client_ends_the_emulators_reader(
    sprites: Sprites, emu: SpritesEmulator
) -> None:
    handle = sprites.create("abandoned-read")
    (emu.sprite_root("abandoned-read") / "large.bin").write_bytes(b"z" * (24 * 1024 * 1024))
    with pytest.raises(Truncated):
        sprites.read_file(handle, "/large.bin", max_bytes=1024)

    def readers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "sprites-emulator-read"]

    assert wait_until(lambda: not readers(), timeout=10), readers()


def test_a_body_cut_short_of_its_length_is_unavailable_never_a_short_file(
    sprites: Sprites, emu: SpritesEmulator
) -> None:
    handle = sprites.create("cut-read")
    sprites.write_file(handle, "/f", b"x")
    emu.truncate(method="GET", path="/fs/read$")
    with pytest.raises(Unavailable):
        sprites.read_file(handle, "/f")


def test_listing_through_the_emulator_reports_links_without_following_them(
    sprites: Sprites, emu: SpritesEmulator
) -> None:
    handle = sprites.create("links")
    sprites.write_file(handle, "/d/a.txt", b"abc", mode=0o600)
    os.symlink("/", emu.sprite_root("links") / "d" / "up")
    listed = {e.name: e for e in sprites.list_files(handle, "/d/")}
    assert (listed["up"].type, listed["up"].size, listed["up"].path) == ("symlink", 1, "/d/up")
    assert (listed["a.txt"].mode, listed["a.txt"].size) == (0o600, 3)
    assert listed["a.txt"].modified is not None and listed["a.txt"].modified.tzinfo is not None
    assert [e.name for e in sprites.list_files(handle, "/d/up/d")] == ["a.txt", "up"]
