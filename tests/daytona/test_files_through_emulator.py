"""read_file and list_files through the Daytona emulator, on a sandbox's real files.

A 20 MiB file made in the sandbox comes back byte-exact (checked by size and digest)
through the streamed bulk download; ``max_bytes`` refuses it. The hostile tests plant
what a command could plant — a symlink to a host file (absolute, and through ``..``), a
FIFO — and check that a read or a listing never leaves the sandbox and never blocks.
They write only inside the sandbox and the test's own tmp dir, and need isolation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from managoat_sandbox._engine import isolation
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.errors import Invalid, NotFound, ProviderError, Truncated
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.types import Handle

from .emulated import serving

pytestmark = pytest.mark.timeout(120)

needs_isolation = pytest.mark.skipif(
    not isolation.support().available, reason="this host cannot isolate a sandbox"
)
BIG = 20 * 1024 * 1024


@pytest.fixture
def daytona(emulator: DaytonaEmulator) -> Iterator[Daytona]:
    with serving(emulator) as adapter:
        yield adapter


@pytest.fixture
def handle(daytona: Daytona, request: pytest.FixtureRequest) -> Handle:
    return daytona.create(f"files-{request.node.name[:40]}")


def run(daytona: Daytona, handle: Handle, script: str) -> str:
    result = daytona.exec(handle, "bash", ["-c", script])
    assert result.exit_code == 0, result
    return result.text


def test_a_twenty_mebibyte_file_comes_back_byte_exact(daytona: Daytona, handle: Handle) -> None:
    digest = run(
        daytona,
        handle,
        f"mkdir -p /tmp/big && head -c {BIG} /dev/urandom "
        "> /tmp/big/blob && sha256sum < /tmp/big/blob | cut -c1-64",
    )
    data = daytona.read_file(handle, "/tmp/big/blob")
    assert len(data) == BIG
    assert hashlib.sha256(data).hexdigest() == digest.strip()
    with pytest.raises(Truncated) as caught:
        daytona.read_file(handle, "/tmp/big/blob", max_bytes=BIG - 1)
    assert caught.value.detail == ("max_bytes", BIG - 1)
    [entry] = daytona.list_files(handle, "/tmp/big")
    assert (entry.name, entry.type, entry.size) == ("blob", "file", BIG)


def test_a_file_holding_the_daemons_fixed_boundary_is_refused_never_cut_short(
    daytona: Daytona, handle: Handle
) -> None:
    """The daemon's boundary is fixed, so this file's part seems to end early: the
    adapter refuses the answer rather than return the bytes before the boundary."""
    daytona.write_file(handle, "/tmp/b/f", b"start\r\n--DAYTONA-FILE-BOUNDARY--\r\nrest")
    with pytest.raises(ProviderError):
        daytona.read_file(handle, "/tmp/b/f")


def test_a_symlink_inside_the_sandbox_reads_and_lists_as_its_target(
    daytona: Daytona, handle: Handle
) -> None:
    daytona.write_file(handle, "/tmp/links/target.txt", b"target")
    run(daytona, handle, "cd /tmp/links && ln -s target.txt link && ln -s nowhere dangling")
    assert daytona.read_file(handle, "/tmp/links/link") == b"target"
    listed = {e.name: (e.type, e.size) for e in daytona.list_files(handle, "/tmp/links")}
    assert listed == {"target.txt": ("file", 6), "link": ("file", 6)}
    with pytest.raises(NotFound):
        daytona.read_file(handle, "/tmp/links/dangling")


@needs_isolation
def test_a_symlink_to_a_host_file_never_reads_the_host(
    daytona: Daytona, handle: Handle, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"HOST-SECRET")
    climb = "../" * 12 + str(secret).lstrip("/")
    run(
        daytona,
        handle,
        f"mkdir -p /tmp/evil && cd /tmp/evil && ln -s {secret} absolute "
        f"&& ln -s {climb} climbing && ln -s {tmp_path} folder",
    )
    for name in ("absolute", "climbing", "folder/secret.txt"):
        with pytest.raises(NotFound):
            daytona.read_file(handle, f"/tmp/evil/{name}")
    assert daytona.list_files(handle, "/tmp/evil") == []
    with pytest.raises(NotFound):
        daytona.list_files(handle, "/tmp/evil/folder")


@needs_isolation
def test_a_fifo_is_invalid_to_read_and_listed_as_other_without_blocking(
    daytona: Daytona, handle: Handle
) -> None:
    run(daytona, handle, "mkdir -p /tmp/fifo && mkfifo /tmp/fifo/pipe")
    with pytest.raises(Invalid):
        daytona.read_file(handle, "/tmp/fifo/pipe")
    [entry] = daytona.list_files(handle, "/tmp/fifo")
    assert (entry.name, entry.type) == ("pipe", "other")
