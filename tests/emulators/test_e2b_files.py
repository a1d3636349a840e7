"""The E2B emulator's file reads and listings driven with raw HTTP.

``GET /files`` streams the sandbox's real file with its length;
``filesystem.Filesystem/ListDir`` and ``Stat`` answer envd's protobuf JSON
(int64 as strings, enum names, zero values left out). Neither follows a
symlink out of the sandbox, and neither waits on a FIFO.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from managoat_sandbox._engine import isolation
from managoat_sandbox.emulators.e2b import E2BEmulator

from .test_e2b_emulator import KEY, Raw, file_url, stdout_of

pytestmark = pytest.mark.timeout(60)

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3}|\.\d{6}|\.\d{9})?Z\Z")


@pytest.fixture
def emulator() -> Iterator[E2BEmulator]:
    with E2BEmulator(credential=KEY) as running:
        yield running  # type: ignore[misc]


@pytest.fixture
def raw(emulator: E2BEmulator) -> Iterator[Raw]:
    client = Raw(emulator)
    yield client
    client.session.close()


def fs_call(
    raw: Raw,
    sandbox: dict[str, Any],
    method: str,
    body: Any,
    content_type: str = "application/json",
) -> requests.Response:
    return raw.session.post(
        f"{raw.url}/filesystem.Filesystem/{method}",
        json=body,
        headers=raw.envd_headers(sandbox, content_type),
        timeout=10,
    )


def put(raw: Raw, sandbox: dict[str, Any], path: str, data: bytes) -> None:
    answer = requests.post(
        file_url(raw, path=path),
        data=data,
        timeout=10,
        headers=raw.envd_headers(sandbox, "application/octet-stream"),
    )
    assert answer.status_code == 200, answer.text


def get(raw: Raw, sandbox: dict[str, Any], path: str) -> requests.Response:
    headers = raw.envd_headers(sandbox)
    del headers["Content-Type"]
    return requests.get(file_url(raw, path=path), headers=headers, timeout=10)


def run(raw: Raw, sandbox: dict[str, Any], script: str, cwd: str) -> None:
    events = raw.stream(
        sandbox, "Start", {"process": {"cmd": "bash", "args": ["-c", script], "cwd": cwd}}
    )
    assert events[-2] == ("end", {"exited": True, "status": "exit status 0"}), (
        events,
        stdout_of(events, "stderr"),
    )


def test_list_dir_answers_entries_as_envds_protobuf_json(raw: Raw) -> None:
    sandbox = raw.create()
    put(raw, sandbox, "/work/b.txt", b"abc")
    put(raw, sandbox, "/work/A-empty", b"")
    put(raw, sandbox, "/work/sub/inner", b"x")
    run(raw, sandbox, "chmod 640 b.txt", "/work")
    answer = fs_call(raw, sandbox, "ListDir", {"path": "/work", "depth": 1})
    assert answer.status_code == 200, answer.text
    entries = answer.json()["entries"]
    assert [e["name"] for e in entries] == ["sub", "A-empty", "b.txt"]  # directories first
    sub, empty, three = entries
    stamp = three.pop("modifiedTime")
    assert TIMESTAMP.match(stamp), stamp
    assert three == {
        "name": "b.txt",
        "type": "FILE_TYPE_FILE",
        "path": "/work/b.txt",
        "size": "3",
        "mode": 0o640,
        "permissions": "-rw-r-----",
        "owner": "user",
        "group": "user",
    }
    assert "size" not in empty and empty["type"] == "FILE_TYPE_FILE"
    assert (sub["type"], sub["permissions"][0], sub["path"]) == (
        "FILE_TYPE_DIRECTORY",
        "d",
        "/work/sub",
    )
    deep = fs_call(raw, sandbox, "ListDir", {"path": "/work", "depth": 2}).json()["entries"]
    assert "/work/sub/inner" in [e["path"] for e in deep]
    run(raw, sandbox, "mkdir -p /work/hollow", "/")
    assert fs_call(raw, sandbox, "ListDir", {"path": "/work/hollow"}).json() == {}


def test_list_dir_and_stat_errors_are_connect_errors(raw: Raw) -> None:
    sandbox = raw.create()
    put(raw, sandbox, "/work/file", b"x")
    missing = fs_call(raw, sandbox, "ListDir", {"path": "/work/none"})
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    not_dir = fs_call(raw, sandbox, "ListDir", {"path": "/work/file"})
    assert not_dir.status_code == 400 and not_dir.json()["code"] == "invalid_argument"
    assert fs_call(raw, sandbox, "ListDir", {"path": "/work", "depth": -1}).status_code == 400
    assert fs_call(raw, sandbox, "Stat", {"path": "/work/none"}).status_code == 404
    stat = fs_call(raw, sandbox, "Stat", {"path": "/work/file"})
    assert stat.status_code == 200
    assert (stat.json()["entry"]["name"], stat.json()["entry"]["size"]) == ("file", "1")
    assert fs_call(raw, sandbox, "Unknown", {"path": "/work/file"}).status_code == 501
    assert fs_call(raw, sandbox, "ListDir", {"path": "/work"}, "text/plain").status_code == 415
    anonymous = requests.post(
        f"{raw.url}/filesystem.Filesystem/ListDir",
        json={"path": "/"},
        headers={"E2b-Sandbox-Id": sandbox["sandboxID"], "E2b-Sandbox-Port": "49983"},
        timeout=10,
    )
    assert anonymous.status_code == 401


def test_a_path_through_a_file_is_the_500_envd_answers_for_enotdir(raw: Raw) -> None:
    """envd does not take ENOTDIR for a missing path: its stat fails, and each call
    answers 500 (Connect ``internal``) with the message its own code builds."""
    sandbox = raw.create()
    put(raw, sandbox, "/work/file", b"x")
    listed = fs_call(raw, sandbox, "ListDir", {"path": "/work/file/below"})
    assert listed.status_code == 500
    assert listed.json() == {
        "code": "internal",
        "message": "error resolving symlink: not a directory",
    }
    stat = fs_call(raw, sandbox, "Stat", {"path": "/work/file/below"})
    assert stat.status_code == 500
    assert stat.json() == {
        "code": "internal",
        "message": "error getting file info: lstat /work/file/below: not a directory",
    }
    read = get(raw, sandbox, "/work/file/below")
    assert read.status_code == 500
    assert read.json() == {
        "code": 500,
        "message": "error checking if path exists '/work/file/below': "
        "stat /work/file/below: not a directory",
    }


@pytest.mark.skipif(
    os.geteuid() == 0 and not isolation.support().available,
    reason="a root caller's sandbox has no user of its own without isolation",
)
def test_what_the_sandboxs_user_may_not_use_is_the_500_envd_answers_for_a_refused_open(
    raw: Raw,
) -> None:
    """envd maps no permission error of its own: each call fails in its generic branch,
    the message ending in Go's text for EACCES."""
    sandbox = raw.create()
    put(raw, sandbox, "rights/secret", b"x")
    put(raw, sandbox, "rights/closed/inside", b"x")
    run(raw, sandbox, "chmod 000 rights/secret rights/closed", cwd="/home/user")
    base = "/home/user/rights"
    read = get(raw, sandbox, f"{base}/secret")
    assert (read.status_code, read.json()) == (
        500,
        {
            "code": 500,
            "message": f"error opening file '{base}/secret': open {base}/secret: permission denied",
        },
    )
    written = requests.post(
        file_url(raw, path=f"{base}/closed/new"),
        data=b"y",
        timeout=10,
        headers=raw.envd_headers(sandbox, "application/octet-stream"),
    )
    assert (written.status_code, written.json()) == (
        500,
        {"code": 500, "message": f"error opening file: open {base}/closed/new: permission denied"},
    )
    listed = fs_call(raw, sandbox, "ListDir", {"path": f"{base}/closed"})
    assert (listed.status_code, listed.json()) == (
        500,
        {
            "code": "internal",
            "message": f"error reading directory {base}/closed: open {base}/closed: "
            "permission denied",
        },
    )


def test_relative_paths_are_under_the_users_home(raw: Raw) -> None:
    sandbox = raw.create()
    put(raw, sandbox, "notes.txt", b"n")
    entries = fs_call(raw, sandbox, "ListDir", {"path": "~"}).json()["entries"]
    assert [(e["name"], e["path"]) for e in entries] == [("notes.txt", "/home/user/notes.txt")]


def test_a_read_streams_the_whole_file_with_its_length(raw: Raw) -> None:
    sandbox = raw.create()
    data = bytes(range(256)) * (3 * 4096 + 1)  # over 3 MiB: several chunks
    put(raw, sandbox, "/work/big.bin", data)
    answer = get(raw, sandbox, "/work/big.bin")
    assert answer.status_code == 200
    assert answer.headers["Content-Length"] == str(len(data))
    assert answer.content == data


def test_a_symlink_never_leads_a_read_or_listing_out_of_the_sandbox(
    raw: Raw, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"host secret")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "host-file").write_bytes(b"host")
    sandbox = raw.create()
    put(raw, sandbox, "/work/inside", b"in the sandbox")
    climb = "../" * 40
    run(
        raw,
        sandbox,
        f"ln -s {secret} abs-file && ln -s {tmp_path}/dir abs-dir && "
        f"ln -s {climb}{str(secret).lstrip('/')} climb && ln -s inside ok && "
        f"ln -s loop loop",
        "/work",
    )
    for name in ("abs-file", "climb"):
        answer = get(raw, sandbox, f"/work/{name}")
        assert answer.status_code == 404, answer.content
        assert b"host secret" not in answer.content
    assert fs_call(raw, sandbox, "ListDir", {"path": "/work/abs-dir"}).status_code == 404
    assert get(raw, sandbox, "/work/ok").content == b"in the sandbox"
    entries = {
        e["name"]: e for e in fs_call(raw, sandbox, "ListDir", {"path": "/work"}).json()["entries"]
    }
    for name in ("abs-file", "abs-dir", "climb", "loop"):
        assert entries[name]["isSymlink"] is True
        assert "symlinkTarget" not in entries[name] and "type" not in entries[name], entries
    assert entries["ok"]["symlinkTarget"] == "/work/inside"
    assert entries["ok"]["type"] == "FILE_TYPE_FILE"
    assert secret.read_bytes() == b"host secret"


def test_a_fifo_is_refused_never_waited_on(raw: Raw) -> None:
    sandbox = raw.create()
    run(raw, sandbox, "mkfifo pipe", "/tmp")
    answer = get(raw, sandbox, "/tmp/pipe")  # the request's own timeout bounds a hang
    assert answer.status_code == 400
    (entry,) = [
        e
        for e in fs_call(raw, sandbox, "ListDir", {"path": "/tmp"}).json()["entries"]
        if e["name"] == "pipe"
    ]
    assert "type" not in entry and entry["permissions"].startswith("p")
