"""Wire contract of the Daytona adapter's file calls: ``read_file`` over the toolbox's bulk
download (multipart), ``list_files`` over ``GET /files`` and, refused by file permissions,
``write_file`` over the bulk upload, served by ``responses``."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import responses

from managoat_sandbox.contract import Capability
from managoat_sandbox.errors import (
    Denied,
    Invalid,
    NotFound,
    ProviderError,
    Truncated,
    Unavailable,
)
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.types import FileInfo, Handle

from .conftest import API, TOOLBOX, sandbox

BOUNDARY = "DAYTONA-FILE-BOUNDARY"
MULTIPART = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}


def part(field: str, path: str, content: bytes, content_type: str) -> bytes:
    return (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{field}"; '
        f'filename="{path}"\r\nContent-Type: {content_type}\r\n\r\n'
    ).encode() + content


def multipart(*parts: bytes) -> bytes:
    return b"\r\n".join(parts) + f"\r\n--{BOUNDARY}--\r\n".encode()


def error_part(path: str, status: int, code: str) -> bytes:
    return part(
        "error",
        path,
        json.dumps(
            {"statusCode": status, "message": "m", "code": code, "source": "DAYTONA_DAEMON"}
        ).encode(),
        "application/json",
    )


@pytest.fixture
def box(mocked: responses.RequestsMock) -> Handle:
    mocked.get(f"{API}/sandbox/box", json=sandbox())
    return Handle("daytona", "box")


def serve(mocked: responses.RequestsMock, body: bytes) -> None:
    """Answer the bulk download with ``body`` (replacing an earlier answer)."""
    mocked.upsert(responses.POST, TOOLBOX + "/files/bulk-download", body=body, headers=MULTIPART)


def test_both_capabilities_are_advertised(daytona: Daytona) -> None:
    assert {Capability.READ_FILE, Capability.LIST_FILES} <= daytona.capabilities()


def test_read_file_asks_for_one_path_and_returns_the_file_part_byte_for_byte(
    mocked: responses.RequestsMock, daytona: Daytona, box: Handle
) -> None:
    data = bytes(range(256)) * 64 + f"\r\n-{BOUNDARY}\n--{BOUNDARY}".encode() + b"\r\n"
    serve(mocked, multipart(part("file", "/w/f", data, "application/octet-stream")))
    assert daytona.read_file(box, "/w/f") == data
    call = next(c for c in mocked.calls if c.request.url.endswith("/files/bulk-download"))
    assert json.loads(call.request.body or b"") == {"paths": ["/w/f"]}
    assert call.request.headers["Accept"] == "multipart/form-data"


@pytest.mark.parametrize(
    ("status", "code", "error"),
    [
        (404, "FILE_NOT_FOUND", NotFound),
        (400, "INVALID_FILE_PATH", Invalid),
        (500, "FILE_READ_FAILED", Unavailable),
    ],
)
def test_an_error_part_is_its_status_in_the_taxonomy(
    mocked: responses.RequestsMock,
    daytona: Daytona,
    box: Handle,
    status: int,
    code: str,
    error: type[Exception],
) -> None:
    serve(mocked, multipart(error_part("/w/f", status, code)))
    with pytest.raises(error) as caught:
        daytona.read_file(box, "/w/f")
    assert caught.value.detail[:2] == ("http", status)  # type: ignore[attr-defined]
    assert caught.value.detail[2]["code"] == code  # type: ignore[attr-defined]


def test_an_older_daemons_plain_text_error_part_saying_not_found_is_not_found(
    mocked: responses.RequestsMock, daytona: Daytona, box: Handle
) -> None:
    serve(
        mocked,
        multipart(
            part("error", "/w/f", b"file not found or invalid: /w/f", "text/plain; charset=utf-8")
        ),
    )
    with pytest.raises(NotFound):
        daytona.read_file(box, "/w/f")


def test_an_error_part_after_the_file_part_is_raised_never_a_short_file(
    mocked: responses.RequestsMock, daytona: Daytona, box: Handle
) -> None:
    serve(
        mocked,
        multipart(
            part("file", "/w/f", b"the first half", "text/plain"),
            error_part("/w/f", 500, "FILE_READ_FAILED"),
        ),
    )
    with pytest.raises(Unavailable):
        daytona.read_file(box, "/w/f")


def test_a_body_cut_short_is_unavailable_and_one_not_multipart_a_provider_error(
    mocked: responses.RequestsMock, daytona: Daytona, box: Handle
) -> None:
    whole = multipart(part("file", "/w/f", b"x" * 1000, "text/plain"))
    serve(mocked, whole[:600])
    with pytest.raises(Unavailable) as caught:
        daytona.read_file(box, "/w/f")
    assert caught.value.detail == ("malformed_multipart", "truncated")
    mocked.replace(responses.POST, TOOLBOX + "/files/bulk-download", json={"files": []})
    with pytest.raises(ProviderError) as refused:
        daytona.read_file(box, "/w/f")
    assert refused.value.detail == ("malformed_multipart", "not_multipart")


def test_a_file_holding_the_fixed_boundary_is_refused_never_cut_short(
    mocked: responses.RequestsMock, daytona: Daytona, box: Handle
) -> None:
    for inside in (f"\r\n--{BOUNDARY}--\r\nmore", f"\r\n--{BOUNDARY}\r\nX: 1\r\n\r\nmore"):
        serve(mocked, multipart(part("file", "/w/f", b"start" + inside.encode(), "text/plain")))
        with pytest.raises(ProviderError) as refused:
            daytona.read_file(box, "/w/f")
        assert refused.value.detail[0] == "malformed_multipart"


def test_a_body_without_a_part_for_the_file_is_a_provider_error(
    mocked: responses.RequestsMock, daytona: Daytona, box: Handle
) -> None:
    serve(mocked, f"--{BOUNDARY}--\r\n".encode())
    with pytest.raises(ProviderError):
        daytona.read_file(box, "/w/f")


def test_max_bytes_refuses_a_longer_file_and_a_longer_announced_part(
    mocked: responses.RequestsMock, daytona: Daytona, box: Handle
) -> None:
    serve(mocked, multipart(part("file", "/w/f", b"0123456789", "text/plain")))
    assert daytona.read_file(box, "/w/f", max_bytes=10) == b"0123456789"
    with pytest.raises(Truncated) as caught:
        daytona.read_file(box, "/w/f", max_bytes=9)
    assert caught.value.detail == ("max_bytes", 9)
    announced = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; '
        f'filename="/w/f"\r\nContent-Length: 500\r\n\r\nabc'
    ).encode()
    serve(mocked, announced)
    with pytest.raises(Truncated):
        daytona.read_file(box, "/w/f", max_bytes=100)


# -- list_files -------------------------------------------------------------------------


def entry(
    name: str, mode: str, permissions: str, *, size: int = 3, is_dir: bool = False, **extra: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "size": size,
        "mode": mode,
        "permissions": permissions,
        "modTime": "2024-05-06 07:08:09.123456789 +0000 UTC",
        "isDir": is_dir,
        "owner": "0",
        "group": "0",
        **extra,
    }


def test_list_files_maps_the_daemons_file_info(
    mocked: responses.RequestsMock, daytona: Daytona, box: Handle
) -> None:
    mocked.get(
        TOOLBOX + "/files",
        json=[
            entry("a.txt", "-rw-r-----", "0640", modifiedAt="2024-05-06T07:08:09.5Z"),
            entry("sub", "drwxr-xr-x", "0755", size=4096, is_dir=True),
            entry("link", "Lrwxrwxrwx", "0777", modTime="2024-05-06 09:08:09 +0200 CEST m=+0.001"),
            entry("pipe", "prw-------", "0600", size=0),
            entry("tty", "Dcrw-rw-rw-", "0666", size=0),
            entry("suid", "urwxr-xr-x", "0755"),
            entry("sticky", "dtrwxrwxrwx", "0777", is_dir=True),
            entry("odd", "?", "x", modTime="yesterday"),
            entry(".", "drwxr-xr-x", "0755", is_dir=True),
        ],
    )
    listed = {e.name: e for e in daytona.list_files(box, "/w")}
    call = next(c for c in mocked.calls if "/files?" in c.request.url)
    assert call.request.url.endswith("/files?path=%2Fw")
    utc = timezone.utc
    assert listed["a.txt"] == FileInfo(
        "a.txt", "/w/a.txt", "file", 3, 0o640, datetime(2024, 5, 6, 7, 8, 9, 500000, tzinfo=utc)
    )
    assert (listed["sub"].type, listed["sub"].path) == ("dir", "/w/sub")
    assert listed["link"].type == "symlink"
    assert listed["link"].modified == datetime(
        2024, 5, 6, 9, 8, 9, tzinfo=timezone(timedelta(hours=2))
    )
    assert listed["pipe"].type == listed["tty"].type == "other"
    assert listed["suid"].mode == 0o4755 and listed["sticky"].mode == 0o1777
    assert (listed["odd"].mode, listed["odd"].modified) == (None, None)
    assert "." not in listed
    assert listed["sub"].modified == datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=utc)


def test_list_files_of_the_root_names_entries_under_it(
    mocked: responses.RequestsMock, daytona: Daytona, box: Handle
) -> None:
    mocked.get(TOOLBOX + "/files", json=[entry("tmp", "dtrwxrwxrwx", "0777", is_dir=True)])
    assert [e.path for e in daytona.list_files(box, "/")] == ["/tmp"]


@pytest.mark.parametrize(("status", "error"), [(404, NotFound), (400, Invalid)])
def test_list_files_errors_are_the_taxonomy(
    mocked: responses.RequestsMock,
    daytona: Daytona,
    box: Handle,
    status: int,
    error: type[Exception],
) -> None:
    mocked.get(TOOLBOX + "/files", status=status, json={"statusCode": status, "message": "m"})
    with pytest.raises(error):
        daytona.list_files(box, "/w")


@pytest.mark.parametrize(
    "answer", [{"files": []}, [{"name": "a/b", "size": 1}], [{"name": "a", "size": -1}], ["a"]]
)
def test_a_listing_the_adapter_does_not_recognise_is_a_provider_error(
    mocked: responses.RequestsMock, daytona: Daytona, box: Handle, answer: Any
) -> None:
    mocked.get(TOOLBOX + "/files", json=answer)
    with pytest.raises(ProviderError):
        daytona.list_files(box, "/w")


def test_a_path_the_daemon_may_not_use_is_denied_naming_it(
    mocked: responses.RequestsMock, daytona: Daytona, box: Handle
) -> None:
    denied = {
        "statusCode": 403,
        "message": "permission denied: /w/s",
        "code": "FILE_ACCESS_DENIED",
        "source": "DAYTONA_DAEMON",
        "path": "/w/s",
        "method": "POST",
    }
    serve(mocked, multipart(part("error", "/w/s", json.dumps(denied).encode(), "application/json")))
    mocked.get(
        TOOLBOX + "/files",
        status=403,
        json={"statusCode": 403, "message": "open /w/s: permission denied", "code": "FORBIDDEN"},
    )
    mocked.post(
        TOOLBOX + "/files/bulk-upload",
        status=400,
        json={
            "errors": ["/w/s: create temp: open /w/.daytona-upload-42: permission denied"],
            "files": [],
        },
    )
    operations = {
        "read_file": (lambda: daytona.read_file(box, "/w/s"), 403),
        "list_files": (lambda: daytona.list_files(box, "/w/s"), 403),
        "write_file": (lambda: daytona.write_file(box, "/w/s", b"x"), 400),
    }
    for name, (call, status) in operations.items():
        with pytest.raises(Denied) as caught:
            call()
        assert (caught.value.detail, caught.value.status) == (("path", "/w/s"), status), name
