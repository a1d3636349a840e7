"""``read_file`` and ``list_files`` on local: a path means what a command sees there,
in the sandbox's own files, isolated or not; the host's system mounts are not those."""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone

import pytest

from managoat_sandbox import config
from managoat_sandbox.errors import Invalid, NotFound
from managoat_sandbox.providers.local import Local
from managoat_sandbox.types import Handle

from .conftest import requires_isolation


def test_read_file_gives_the_bytes_a_command_wrote(local: Local, either_mode: Handle) -> None:
    handle = either_mode
    target = local.host_path(handle, "/tmp/out/every-byte.bin")
    result = local.exec(
        handle,
        "python3",
        [
            "-c",
            (
                "import os, sys; os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True); "
                "open(sys.argv[1], 'wb').write(bytes(range(256)) * 4)"
            ),
            target,
        ],
    )
    assert result.exit_code == 0, result.output
    assert local.read_file(handle, "/tmp/out/every-byte.bin") == bytes(range(256)) * 4


def test_list_files_matches_what_a_command_sees_with_the_facts(
    local: Local, either_mode: Handle
) -> None:
    handle = either_mode
    before = datetime.now(timezone.utc).timestamp()
    local.write_file(handle, "/tmp/dir/b.txt", b"four", mode=0o640)
    local.write_file(handle, "/tmp/dir/sub/inner", b"")
    directory = local.host_path(handle, "/tmp/dir")
    script = f"chmod 1750 {directory}/sub; ln -s b.txt {directory}/a-link; ls -A {directory}"
    result = local.exec(handle, "bash", ["-c", script])
    entries = local.list_files(handle, "/tmp/dir")
    assert [e.name for e in entries] == result.output.decode().split() == ["a-link", "b.txt", "sub"]
    link, text, sub = entries
    assert (link.path, link.type, link.size) == ("/tmp/dir/a-link", "symlink", len("b.txt"))
    assert (text.path, text.type, text.size, text.mode) == ("/tmp/dir/b.txt", "file", 4, 0o640)
    assert (sub.path, sub.type, sub.mode) == ("/tmp/dir/sub", "dir", 0o1750)
    for entry in entries:
        assert entry.modified is not None and entry.modified.tzinfo is not None
        assert before - 5 <= entry.modified.timestamp() <= time.time() + 5


def test_the_root_lists_the_sandboxs_own_top_level(local: Local, either_mode: Handle) -> None:
    local.write_file(either_mode, "/opt/app/run.sh", b"#!/bin/sh\n")
    entries = {e.name: e for e in local.list_files(either_mode, "/")}
    assert {"home", "tmp", "opt"} <= set(entries)
    assert (entries["opt"].path, entries["opt"].type) == ("/opt", "dir")


def test_missing_paths_files_and_directories_are_told_apart(
    local: Local, either_mode: Handle
) -> None:
    handle = either_mode
    local.write_file(handle, "/tmp/only/file", b"x")
    with pytest.raises(NotFound):
        local.read_file(handle, "/tmp/only/missing")
    with pytest.raises(NotFound):
        local.read_file(handle, "/tmp/nowhere/file")
    with pytest.raises(Invalid) as caught:
        local.read_file(handle, "/tmp/only")
    assert caught.value.detail == ("path", "is_directory")
    with pytest.raises(Invalid) as caught:
        local.read_file(handle, "/tmp/only/file/below")
    assert caught.value.detail == ("path", "not_a_directory")
    with pytest.raises(Invalid) as caught:
        local.list_files(handle, "/tmp/only/file")
    assert caught.value.detail == ("path", "not_a_directory")
    with pytest.raises(NotFound):
        local.list_files(handle, "/tmp/nowhere")


def test_a_suspended_sandbox_can_be_read_and_stays_suspended(
    local: Local, either_mode: Handle
) -> None:
    local.write_file(either_mode, "/tmp/f", b"still here")
    local.suspend(either_mode)
    assert local.read_file(either_mode, "/tmp/f") == b"still here"
    assert [e.name for e in local.list_files(either_mode, "/tmp")] == ["f"]
    assert local.get(either_mode).status == "suspended"


@requires_isolation
def test_the_hosts_system_mounts_are_refused_as_not_the_sandboxs_own(local: Local) -> None:
    handle = local.create("box")
    assert local.exec(handle, "cat", ["/etc/hostname"]).output == b"box\n"
    local.exec(handle, "ln", ["-s", "/usr/bin", "/tmp/bin-link"])
    for path in ("/etc/hostname", "/usr/bin/env", "/tmp/bin-link/env", "/proc/self/environ"):
        with pytest.raises(Invalid) as caught:
            local.read_file(handle, path)
        assert caught.value.detail == ("path", "system_mount"), path
    for path in ("/usr", "/tmp/bin-link", "/dev"):
        with pytest.raises(Invalid) as caught:
            local.list_files(handle, path)
        assert caught.value.detail == ("path", "system_mount"), path


def test_unisolated_absolute_paths_never_reach_the_hosts_files(local: Local) -> None:
    config.configure("local", isolation="off")
    handle = local.create("box")
    with pytest.raises(NotFound):
        local.read_file(handle, "/etc/hostname")
    with pytest.raises(NotFound):
        local.list_files(handle, "/usr")


def test_names_that_are_not_utf8_keep_their_bytes(local: Local, either_mode: Handle) -> None:
    handle = either_mode
    directory = local.host_path(handle, "/tmp/odd")
    script = (
        f"import os; os.makedirs({directory!r}); "
        f"open({directory!r}.encode() + b'/\\xff\\x1bx', 'w')"
    )
    assert local.exec(handle, "python3", ["-c", script]).exit_code == 0
    [entry] = local.list_files(handle, "/tmp/odd")
    assert os.fsencode(entry.name) == b"\xff\x1bx"
    assert entry.type == "file"
