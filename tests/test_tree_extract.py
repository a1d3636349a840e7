"""The download side's extractor against hostile tar streams: whatever a sandbox sends,
nothing is written outside the target, nor through a link, and the refusal names the
entry. Every attack writes only inside this test's temporary directory."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from managoat_sandbox._trees.counter import Counter
from managoat_sandbox._trees.unpack import Extractor
from managoat_sandbox.errors import Invalid

Member = tuple[str, str, bytes | str, int]  # (name, kind, data or link target, mode)


def archive(members: list[Member]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, payload, mode in members:
            info = tarfile.TarInfo(name)
            info.mode = mode
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif kind == "file":
                assert isinstance(payload, bytes)
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
            else:
                assert isinstance(payload, str)
                info.type = {"symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE}[kind]
                info.linkname = payload
                tar.addfile(info)
    return buffer.getvalue()


def extract(stream: bytes, target: Path, root: str = "box") -> Counter:
    counter = Counter(None)
    extractor = Extractor(str(target), root, counter)
    try:
        with tarfile.open(fileobj=io.BytesIO(stream), mode="r|") as tar:
            for member in tar:
                extractor.add(member, tar)
        extractor.finish()
    finally:
        extractor.close()
    return counter


@pytest.fixture
def scene(tmp_path: Path) -> tuple[Path, Path]:
    """``target`` (where the download goes) and ``outside`` (a sibling it must never touch,
    holding a file)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_bytes(b"untouched")
    return tmp_path / "target", outside


def untouched(outside: Path) -> bool:
    return (
        sorted(os.listdir(outside)) == ["victim"]
        and (outside / "victim").read_bytes() == b"untouched"
    )


def refused(stream: bytes, target: Path) -> Invalid:
    with pytest.raises(Invalid) as caught:
        extract(stream, target)
    return caught.value


def test_a_plain_tree_is_written_with_its_modes_and_links(scene: tuple[Path, Path]) -> None:
    target, _ = scene
    counter = extract(
        archive(
            [
                ("box", "dir", "", 0o750),
                ("box/sub", "dir", "", 0o700),
                ("box/sub/f", "file", b"data", 0o640),
                ("box/link", "symlink", "sub/f", 0o777),
                ("box/hard", "hardlink", "box/sub/f", 0o640),
            ]
        ),
        target,
    )
    assert (target / "sub" / "f").read_bytes() == b"data"
    assert stat.S_IMODE((target / "sub" / "f").stat().st_mode) == 0o640
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert os.readlink(target / "link") == "sub/f"
    assert (target / "hard").stat().st_ino == (target / "sub" / "f").stat().st_ino
    assert (counter.files, counter.bytes) == (3, 4)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("/etc/evil", "absolute"),
        ("box/../outside/victim", "'..'"),
        ("../outside/victim", "'..'"),
        ("other/x", "not under 'box'"),
    ],
)
def test_an_entry_named_outside_the_root_is_refused_by_name(
    scene: tuple[Path, Path], name: str, why: str
) -> None:
    target, outside = scene
    error = refused(archive([("box", "dir", "", 0o755), (name, "file", b"pwned", 0o644)]), target)
    assert error.detail == ("archive_entry", name)
    assert why in str(error.message)
    assert untouched(outside)


@pytest.mark.parametrize("through", ["box/escape/victim", "box/escape/new-file"])
def test_a_file_through_a_link_the_stream_planted_is_refused(
    scene: tuple[Path, Path], through: str
) -> None:
    target, outside = scene
    stream = archive(
        [
            ("box", "dir", "", 0o755),
            ("box/escape", "symlink", str(outside), 0o777),
            (through, "file", b"pwned", 0o644),
        ]
    )
    error = refused(stream, target)
    assert error.detail == ("archive_entry", through)
    assert "symlink" in str(error.message)
    assert untouched(outside)


def test_a_directory_through_a_planted_link_is_refused(scene: tuple[Path, Path]) -> None:
    target, outside = scene
    stream = archive(
        [
            ("box", "dir", "", 0o755),
            ("box/escape", "symlink", str(outside), 0o777),
            ("box/escape/newdir", "dir", "", 0o755),
        ]
    )
    assert refused(stream, target).detail == ("archive_entry", "box/escape/newdir")
    assert untouched(outside)


def test_a_file_over_a_planted_link_replaces_the_link_not_its_target(
    scene: tuple[Path, Path],
) -> None:
    target, outside = scene
    extract(
        archive(
            [
                ("box", "dir", "", 0o755),
                ("box/victim", "symlink", str(outside / "victim"), 0o777),
                ("box/victim", "file", b"mine", 0o644),
            ]
        ),
        target,
    )
    assert (target / "victim").read_bytes() == b"mine"
    assert not (target / "victim").is_symlink()
    assert untouched(outside)


def test_a_link_already_in_the_target_is_not_written_through(scene: tuple[Path, Path]) -> None:
    target, outside = scene
    target.mkdir()
    (target / "sub").symlink_to(outside)
    stream = archive([("box", "dir", "", 0o755), ("box/sub/victim", "file", b"pwned", 0o644)])
    assert refused(stream, target).detail == ("archive_entry", "box/sub/victim")
    assert untouched(outside)


def test_a_hard_link_to_a_file_outside_is_refused(scene: tuple[Path, Path]) -> None:
    target, outside = scene
    for linkname in (str(outside / "victim"), "../outside/victim", "box/escape/victim"):
        stream = archive(
            [
                ("box", "dir", "", 0o755),
                ("box/escape", "symlink", str(outside), 0o777),
                ("box/hard", "hardlink", linkname, 0o644),
            ]
        )
        with pytest.raises(Invalid):
            extract(stream, target)
        assert untouched(outside)
        assert not (target / "hard").exists()


def test_no_setuid_setgid_or_sticky_bit_comes_from_a_sandbox(scene: tuple[Path, Path]) -> None:
    target, _ = scene
    extract(
        archive(
            [
                ("box", "dir", "", 0o1777),
                ("box/suid", "file", b"#!/bin/sh\n", 0o4755),
                ("box/sgid", "file", b"x", 0o2755),
            ]
        ),
        target,
    )
    assert stat.S_IMODE((target / "suid").stat().st_mode) == 0o755
    assert stat.S_IMODE((target / "sgid").stat().st_mode) == 0o755
    assert stat.S_IMODE(target.stat().st_mode) == 0o777


@pytest.mark.parametrize("kind", [tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE])
def test_devices_and_fifos_are_left_out(scene: tuple[Path, Path], kind: bytes) -> None:
    target, _ = scene
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        root = tarfile.TarInfo("box")
        root.type = tarfile.DIRTYPE
        tar.addfile(root)
        special = tarfile.TarInfo("box/node")
        special.type = kind
        special.devmajor, special.devminor = 1, 3
        tar.addfile(special)
    extract(buffer.getvalue(), target)
    assert os.listdir(target) == []


def test_an_entry_before_its_root_directory_is_refused(scene: tuple[Path, Path]) -> None:
    target, _ = scene
    stream = archive([("box/first", "file", b"x", 0o644), ("box", "dir", "", 0o755)])
    assert refused(stream, target).detail == ("archive_entry", "box/first")


def test_a_read_only_directory_still_receives_its_entries(scene: tuple[Path, Path]) -> None:
    target, _ = scene
    stream = archive(
        [("box", "dir", "", 0o755), ("box/ro", "dir", "", 0o555), ("box/ro/f", "file", b"x", 0o444)]
    )
    extract(stream, target)
    assert (target / "ro" / "f").read_bytes() == b"x"
    assert stat.S_IMODE((target / "ro").stat().st_mode) == 0o555
