"""What a hostile command leaves in its files cannot lead ``read_file`` or ``list_files``
out of the sandbox, nor make them hang.

These attack the library's own file access, not the sandbox's isolation, so they run
for isolated and unisolated sandboxes alike (``either_mode``). A command plants its
traps at ``host_path`` (where the sandbox path is for it, in both modes). Every bait
lives in this test's own temporary directory, never at a real host path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from managoat_sandbox.errors import Invalid, NotFound, Truncated
from managoat_sandbox.providers.local import Local
from managoat_sandbox.types import Handle

SECRET = b"canary-host-secret-5b1e"


def sh(local: Local, handle: Handle, script: str) -> None:
    result = local.exec(handle, "bash", ["-c", script], stderr_to_stdout=True)
    assert result.exit_code == 0, result.output


def outcome(call: Callable[[], object], within: float = 20.0) -> object:
    """What ``call`` returned or raised, waited on an event for at most ``within``
    seconds; fails the test if it is still running then (it blocked)."""
    done = threading.Event()
    result: list[object] = []

    def run() -> None:
        try:
            result.append(call())
        except Exception as error:
            result.append(error)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(within), "the call did not return: it blocked"
    return result[0]


@pytest.fixture
def bait(tmp_path: Path) -> Path:
    """A directory of the test's own, outside every sandbox, holding a secret."""
    path = tmp_path / "bait"
    path.mkdir()
    (path / "secret.txt").write_bytes(SECRET)
    return path


def test_planted_links_never_carry_read_file_out_of_the_sandbox(
    local: Local, either_mode: Handle, bait: Path
) -> None:
    handle = either_mode
    plant = local.host_path(handle, "/tmp/plant")
    sh(
        local,
        handle,
        f"mkdir -p {plant}/d; ln -s {bait}/secret.txt {plant}/file; "
        f"ln -s {bait} {plant}/out; ln -s ../../../../../../../../.. {plant}/up; "
        f"ln -s / {plant}/d/root; ln -s file {plant}/chain",
    )
    for path in (
        "/tmp/plant/file",
        "/tmp/plant/chain",
        "/tmp/plant/out/secret.txt",
        f"/tmp/plant/up{bait}/secret.txt",
        f"/tmp/plant/d/root{bait}/secret.txt",
    ):
        assert isinstance(outcome(lambda p=path: local.read_file(handle, p)), NotFound), path
    local.write_file(handle, f"{bait}/secret.txt", b"the sandbox's own")
    assert local.read_file(handle, "/tmp/plant/file") == b"the sandbox's own"
    assert local.read_file(handle, "/tmp/plant/out/secret.txt") == b"the sandbox's own"
    assert (bait / "secret.txt").read_bytes() == SECRET


def test_a_symlinked_parent_directory_is_resolved_inside_never_followed_out(
    local: Local, either_mode: Handle, bait: Path
) -> None:
    handle = either_mode
    plant = local.host_path(handle, "/tmp/plant")
    sh(
        local,
        handle,
        f"mkdir -p {plant}/real; echo inner > {plant}/real/inner.txt; "
        f"ln -s {bait} {plant}/out; ln -s ../../../../../../../../.. {plant}/up; "
        f"ln -s /tmp/plant/real {plant}/alias",
    )
    for path in ("/tmp/plant/out", f"/tmp/plant/up{bait}"):
        assert isinstance(outcome(lambda p=path: local.list_files(handle, p)), NotFound), path
    [inner] = local.list_files(handle, "/tmp/plant/alias")
    assert (inner.name, inner.path, inner.type) == (
        "inner.txt",
        "/tmp/plant/alias/inner.txt",
        "file",
    )
    assert local.read_file(handle, "/tmp/plant/alias/inner.txt") == b"inner\n"


def test_links_in_a_listing_are_reported_as_links_not_followed(
    local: Local, either_mode: Handle, bait: Path
) -> None:
    handle = either_mode
    plant = local.host_path(handle, "/tmp/plant")
    sh(
        local,
        handle,
        f"mkdir -p {plant}; ln -s {bait} {plant}/out; ln -s {bait}/secret.txt {plant}/file",
    )
    entries = {e.name: e for e in local.list_files(handle, "/tmp/plant")}
    assert {name: e.type for name, e in entries.items()} == {"out": "symlink", "file": "symlink"}
    assert entries["out"].size == len(str(bait))
    assert entries["file"].size == len(f"{bait}/secret.txt")


def test_a_fifo_or_a_device_is_refused_at_once_never_opened(
    local: Local, either_mode: Handle
) -> None:
    handle = either_mode
    plant = local.host_path(handle, "/tmp/plant")
    sh(
        local,
        handle,
        f"mkdir -p {plant}; mkfifo {plant}/fifo; ln -s fifo {plant}/to-fifo; "
        f"ln -s /dev/zero {plant}/zero",
    )
    for path in ("/tmp/plant/fifo", "/tmp/plant/to-fifo"):
        assert isinstance(outcome(lambda p=path: local.read_file(handle, p)), Invalid), path
        assert isinstance(outcome(lambda p=path: local.list_files(handle, p)), Invalid), path
    assert isinstance(
        outcome(lambda: local.read_file(handle, "/tmp/plant/zero")), (Invalid, NotFound)
    )


def test_a_huge_file_is_refused_past_max_bytes_before_it_is_read(
    local: Local, either_mode: Handle
) -> None:
    handle = either_mode
    huge = local.host_path(handle, "/tmp/huge")
    sh(local, handle, f"truncate -s 8G {huge}")
    error = outcome(lambda: local.read_file(handle, "/tmp/huge", max_bytes=1 << 20))
    assert isinstance(error, Truncated)
    assert error.detail == ("max_bytes", 1 << 20)


def test_files_swapped_for_links_while_being_read_never_yield_the_bait(
    local: Local, either_mode: Handle, bait: Path
) -> None:
    handle = either_mode
    plant = local.host_path(handle, "/tmp/plant")
    sh(
        local,
        handle,
        f"mkdir -p {plant}/real; echo inside > {plant}/real/f; cp {plant}/real/f {plant}/f",
    )
    swapper = local.spawn(
        handle,
        "bash",
        [
            "-c",
            (
                f"cd {plant}; while :; do "
                f"ln -sfn {bait}/secret.txt f.new; mv -T f.new f; "
                f"cp real/f f.new; mv -T f.new f; "
                f"ln -sfn {bait} d.new; mv -T d.new d; "
                f"ln -sfn real d.new; mv -T d.new d; done"
            ),
        ],
    )
    try:
        seen: set[object] = set()
        for _ in range(300):
            for path in ("/tmp/plant/f", "/tmp/plant/d/f"):
                result = outcome(lambda p=path: local.read_file(handle, p))
                seen.add(result if isinstance(result, bytes) else type(result))
        assert seen <= {b"inside\n", NotFound, Invalid}, seen
        assert b"inside\n" in seen
    finally:
        assert swapper.session_id is not None
        local.terminate_session(handle, swapper.session_id, mode="force")


def test_an_upload_never_writes_through_a_link_the_sandbox_planted(
    local: Local, either_mode: Handle, tmp_path: Path
) -> None:
    """The sandbox plants a link where an upload's directory goes, pointing at another
    directory of its own: the upload makes a real directory there (the sandbox's
    ``tar`` replaces the link, as GNU tar does) and the link's target stays as it was.
    Every path is the sandbox's, at ``host_path`` (in this test's temporary root)."""
    handle = either_mode
    dest, elsewhere = local.host_path(handle, "/tmp/dest"), local.host_path(handle, "/tmp/other")
    sh(local, handle, f"mkdir -p {elsewhere} {dest} && ln -s {elsewhere} {dest}/sub")
    source = tmp_path / "project"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "file").write_bytes(b"uploaded")
    local.upload(handle, str(source), dest)
    check = local.exec(
        handle,
        "sh",
        [
            "-c",
            f"test -d {dest}/sub && ! test -L {dest}/sub && cat {dest}/sub/file "
            f"&& ls -A {elsewhere} | wc -l",
        ],
    )
    assert (check.output, check.exit_code) == (b"uploaded0\n", 0)
