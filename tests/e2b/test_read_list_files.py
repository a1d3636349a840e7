"""``read_file`` and ``list_files`` of the E2B adapter, against the emulator and on the wire.

The conformance suite covers the shared semantics; here: a file of 20 MiB
byte for byte, what is sent (``GET /files`` with ``path``, ``username`` and
``Accept-Encoding: identity``; ``ListDir`` at depth 1), symlinks and FIFOs,
a remembered sandbox paused behind the adapter's back, a body cut short, a path
through a file (envd's 500, ``Invalid`` here), and how ``ListDir`` entries of
current and older envd become ``FileInfo``.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from managoat_sandbox import reasons
from managoat_sandbox._http import HttpClient, Response
from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.errors import (
    Invalid,
    NotFound,
    ProviderError,
    Truncated,
    Unavailable,
)
from managoat_sandbox.providers.e2b import E2B
from managoat_sandbox.providers.e2b.envd import Envd
from managoat_sandbox.providers.e2b.errors import files_policy
from managoat_sandbox.providers.e2b.files import listing
from managoat_sandbox.providers.e2b.handle import Carried
from managoat_sandbox.types import FileInfo, Handle

pytestmark = pytest.mark.timeout(120)

MIB = 1024 * 1024


def sandbox_id(handle: Handle) -> str:
    assert isinstance(handle.private, Carried) and handle.private.sandbox_id is not None
    return handle.private.sandbox_id


def run(e2b: E2B, handle: Handle, script: str, cwd: str) -> None:
    result = e2b.exec(handle, "bash", ["-c", script], dir=cwd, stderr_to_stdout=True)
    assert result.exit_code == 0, result


# -- against the emulator ----------------------------------------------------------------------


def test_a_20_mib_file_reads_back_byte_for_byte(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    data = os.urandom(20 * MIB + 7)
    emulator.write_file(sandbox_id(handle), "/data/big.bin", data)
    assert e2b.read_file(handle, "/data/big.bin") == data
    assert e2b.read_file(handle, "/data/big.bin", max_bytes=len(data)) == data
    with pytest.raises(Truncated) as refused:
        e2b.read_file(handle, "/data/big.bin", max_bytes=MIB)
    assert refused.value.detail == ("max_bytes", MIB)


def test_read_file_asks_for_the_path_as_the_user_without_compression(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    e2b.write_file(handle, "/data/a file&name", b"x")
    mark = len(emulator.requests)
    assert e2b.read_file(handle, "/data/a file&name") == b"x"
    (sent,) = [r for r in emulator.requests[mark:] if r.path == "/files"]
    headers = {k.lower(): v for k, v in sent.headers.items()}
    assert sent.method == "GET"
    assert dict(sent.query) == {"path": "/data/a file&name", "username": "user"}
    assert headers["accept-encoding"] == "identity"
    assert headers["x-access-token"] == "<redacted>"


def test_list_files_asks_envd_for_one_level(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    e2b.write_file(handle, "/data/sub/deeper/file", b"x")
    mark = len(emulator.requests)
    assert [(f.name, f.type) for f in e2b.list_files(handle, "/data")] == [("sub", "dir")]
    (sent,) = [r for r in emulator.requests[mark:] if "Filesystem" in r.path]
    assert sent.path == "/filesystem.Filesystem/ListDir"
    assert sent.json() == {"path": "/data", "depth": 1}


def test_symlinks_and_fifos_are_listed_for_what_they_are(e2b: E2B, handle: Handle) -> None:
    e2b.write_file(handle, "/data/dir/inner", b"12345")
    e2b.write_file(handle, "/data/file", b"abc", mode=0o600)
    run(
        e2b,
        handle,
        "ln -s file link && ln -s dir dirlink && ln -s /nowhere dangling && mkfifo pipe",
        "/data",
    )
    by_name = {f.name: f for f in e2b.list_files(handle, "/data")}
    assert {name: f.type for name, f in by_name.items()} == {
        "dir": "dir",
        "file": "file",
        "link": "symlink",
        "dirlink": "symlink",
        "dangling": "symlink",
        "pipe": "other",
    }
    file, link = by_name["file"], by_name["link"]
    assert (file.path, file.size, file.mode) == ("/data/file", 3, 0o600)
    assert (link.path, link.size, link.mode) == ("/data/link", len("file"), None)
    assert file.modified is not None and file.modified.tzinfo is not None
    assert abs(file.modified - datetime.now(timezone.utc)) < timedelta(hours=1)
    through = e2b.list_files(handle, "/data/dirlink")
    assert [(f.name, f.path, f.size) for f in through] == [("inner", "/data/dirlink/inner", 5)]
    assert e2b.read_file(handle, "/data/link") == b"abc"
    with pytest.raises(NotFound):
        e2b.read_file(handle, "/data/dangling")
    with pytest.raises(Invalid):
        e2b.read_file(handle, "/data/pipe")  # refused, never waited on
    with pytest.raises(Invalid):
        e2b.list_files(handle, "/data/link")


def test_a_path_through_a_file_is_invalid_at_once_never_retried(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    e2b.write_file(handle, "/data/file", b"x")
    mark = len(emulator.requests)
    with pytest.raises(Invalid) as read:
        e2b.read_file(handle, "/data/file/below")
    with pytest.raises(Invalid) as listed:
        e2b.list_files(handle, "/data/file/below")
    sent = [r.path for r in emulator.requests[mark:]]
    assert sent.count("/files") == 1, sent
    assert sent.count("/filesystem.Filesystem/ListDir") == 1, sent
    assert (read.value.status, listed.value.status) == (500, 500)


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (500, "error checking if path exists '/f/x': stat /f/x: not a directory", Invalid),
        (500, "error resolving symlink: not a directory", Invalid),
        (500, "error opening file '/f': input/output error", Unavailable),
        (500, "not a directory, but said first", Unavailable),
        (404, "path '/f/x' does not exist", NotFound),
        (400, "path '/f' is a directory", Invalid),
    ],
)
def test_only_envds_enotdir_500_is_a_callers_mistake_on_the_file_calls(
    status: int, message: str, expected: type[Exception]
) -> None:
    for body in ({"code": status, "message": message}, {"code": "internal", "message": message}):
        answer = Response(status, {"Content-Type": "application/json"}, json.dumps(body).encode())
        error = files_policy("/f/x").error(answer)
        assert type(error) is expected and error.status == status, error


def test_the_sandboxs_root_lists(e2b: E2B, handle: Handle) -> None:
    e2b.write_file(handle, "/top-level-file", b"x")
    entries = {f.name: f for f in e2b.list_files(handle, "/")}
    assert entries["top-level-file"].path == "/top-level-file"
    assert entries["tmp"].type == "dir"


@pytest.mark.parametrize("operation", ["read", "list"])
def test_a_sandbox_paused_behind_the_adapters_back_is_resumed_for_a_read(
    e2b: E2B, handle: Handle, emulator: E2BEmulator, operation: str
) -> None:
    e2b.write_file(handle, "/data/kept", b"kept")
    emulator.pause(sandbox_id(handle))
    mark = len(emulator.requests)
    if operation == "read":
        assert e2b.read_file(handle, "/data/kept") == b"kept"
    else:
        assert [f.name for f in e2b.list_files(handle, "/data")] == ["kept"]
    sent = [(r.method, r.path) for r in emulator.requests[mark:]]
    assert ("POST", f"/v2/sandboxes/{sandbox_id(handle)}/connect") in sent, sent
    assert e2b.get(handle).status == "running"


# -- on the wire -------------------------------------------------------------------------------


@pytest.fixture
def short_body() -> Iterator[str]:
    """A server answering one request with a Content-Length of 100 and 10 bytes, then
    closing the connection."""
    server = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def serve() -> None:
        connection, _ = server.accept()
        with connection:
            while b"\r\n\r\n" not in connection.recv(65536):
                pass
            connection.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n"
                b"Content-Type: application/octet-stream\r\n\r\n0123456789"
            )
        done.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    assert done.wait(10)
    server.close()


def test_a_body_cut_short_is_unavailable_never_a_short_file(short_body: str) -> None:
    envd = Envd(short_body, "sandbox", "token", "user", 10.0)
    with pytest.raises(Unavailable) as cut:
        envd.read(HttpClient(), "/file", None)
    assert cut.value.detail[0] == reasons.TRANSPORT, cut.value.detail


def entry(**fields: Any) -> dict[str, Any]:
    return {"name": "n", "path": "/d/n", **fields}


def test_a_listing_of_current_envd_becomes_file_infos() -> None:
    answer = {
        "entries": [
            entry(
                name="f",
                path="/d/f",
                type="FILE_TYPE_FILE",
                size="3",
                mode=0o640,
                permissions="-rw-r-----",
                modifiedTime="2024-05-06T07:08:09.123456789Z",
                owner="user",
                group="user",
            ),
            entry(
                name="l",
                path="/d/l",
                type="FILE_TYPE_DIRECTORY",
                isSymlink=True,
                size="3",
                mode=0o755,
                permissions="Lrwxrwxrwx",
                symlinkTarget="/d/x",
            ),
            entry(name="p", path="/d/p", permissions="prw-r--r--"),
            entry(name="e", path="/d/e", type="FILE_TYPE_FILE", permissions="----------"),
        ]
    }
    assert listing("/d", answer) == [
        FileInfo(
            "f",
            "/d/f",
            "file",
            3,
            0o640,
            datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone.utc),
        ),
        FileInfo("l", "/d/l", "symlink", 3, None, None),
        FileInfo("p", "/d/p", "other", 0, 0, None),
        FileInfo("e", "/d/e", "file", 0, 0, None),
    ]
    assert listing("/d", {}) == []


def test_a_listing_of_older_envd_becomes_file_infos() -> None:
    answer = {
        "entries": [
            {"name": "s", "type": "FILE_TYPE_SYMLINK"},
            {"name": "d", "type": 2, "size": 4096, "modified_time": "2024-05-06T07:08:09+02:00"},
            {"name": "f", "type": 1, "permissions": "-rw-r--r--", "mode": 420},
            {"name": "o", "type": "FILE_TYPE_DIRECTORY", "permissions": "Lrwxrwxrwx"},
        ]
    }
    assert listing("/d", answer) == [
        FileInfo("s", "/d/s", "symlink", 0, None, None),
        FileInfo(
            "d", "/d/d", "dir", 4096, None, datetime(2024, 5, 6, 5, 8, 9, tzinfo=timezone.utc)
        ),
        FileInfo("f", "/d/f", "file", 0, 0o644, None),
        FileInfo("o", "/d/o", "symlink", 0, None, None),
    ]


@pytest.mark.parametrize(
    "answer",
    [
        [],
        {"entries": {}},
        {"entries": ["x"]},
        {"entries": [{"path": "/d/x"}]},
        {"entries": [entry(size="-1")]},
        {"entries": [entry(size="many")]},
        {"entries": [entry(size=True)]},
        {"entries": [entry(mode=1.5)]},
    ],
)
def test_a_malformed_listing_is_a_provider_error(answer: Any) -> None:
    with pytest.raises(ProviderError):
        listing("/d", answer)


def test_an_unreadable_timestamp_is_no_timestamp() -> None:
    (info,) = listing("/d", {"entries": [entry(modifiedTime="yesterday")]})
    assert info.modified is None
