"""Host-side access to a sandbox's files resolves as the sandbox would, and never leaves it."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from managoat_sandbox._engine import safefs


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[Path, int, Path]]:
    """A sandbox root, a descriptor of it, and a bait directory outside it."""
    root = tmp_path / "fs"
    outside = tmp_path / "outside"
    (root / "home").mkdir(parents=True)
    outside.mkdir()
    fd = safefs.open_root(root)
    yield root, fd, outside
    os.close(fd)


def test_absolute_symlinks_and_dotdot_stay_inside_the_root(tree: tuple[Path, int, Path]) -> None:
    root, fd, outside = tree
    inside = root / outside.relative_to("/")
    (root / "home" / "abs").symlink_to(outside)
    (root / "home" / "up").symlink_to("../../../../../../..")
    (root / "home" / "file").symlink_to(outside / "target")
    safefs.write_file(fd, "/home/abs/a", b"1")
    safefs.write_file(fd, f"/home/up{outside}/b", b"2")
    safefs.write_file(fd, "/../../home/../../c", b"3")
    safefs.write_file(fd, "/home/file", b"4")
    assert list(outside.iterdir()) == []
    assert (inside / "a").read_bytes() == b"1"
    assert (inside / "b").read_bytes() == b"2"
    assert (root / "c").read_bytes() == b"3"
    assert (inside / "target").read_bytes() == b"4"
    assert safefs.read_file(fd, "/home/up/c") == b"3"


def test_loops_non_directories_and_the_root_are_refused(tree: tuple[Path, int, Path]) -> None:
    root, fd, _ = tree
    (root / "loop").symlink_to("loop")
    (root / "plain").write_text("x")
    cases = {
        "/loop/x": "loop",
        "/plain/x": "not_a_directory",
        "/": "is_root",
        "/home": "is_directory",
    }
    for path, reason in cases.items():
        with pytest.raises(safefs.PathRefused) as caught:
            safefs.write_file(fd, path, b"x")
        assert caught.value.reason == reason, path


def test_writes_under_masked_paths_are_read_only(tree: tuple[Path, int, Path]) -> None:
    root, fd, _ = tree
    (root / "home" / "sys").symlink_to("/usr/lib")
    for path in ("/usr/bin/x", "/home/sys/x", "/usr"):
        with pytest.raises(safefs.PathRefused) as caught:
            safefs.write_file(fd, path, b"x", masked=("/usr",))
        assert caught.value.reason == "read_only"
    assert not (root / "usr").exists()


def test_writes_are_atomic_and_keep_or_set_the_mode(tree: tuple[Path, int, Path]) -> None:
    root, fd, _ = tree
    safefs.write_file(fd, "/home/f", b"one", mode=0o600)
    safefs.write_file(fd, "/home/f", b"two")
    assert (root / "home" / "f").read_bytes() == b"two"
    assert stat.S_IMODE((root / "home" / "f").stat().st_mode) == 0o600
    safefs.write_file(fd, "/home/g", b"")
    assert stat.S_IMODE((root / "home" / "g").stat().st_mode) == 0o644
    assert sorted(p.name for p in (root / "home").iterdir()) == ["f", "g"]


def test_writes_carry_their_xattrs_and_a_refused_xattr_replaces_nothing(
    tree: tuple[Path, int, Path],
) -> None:
    root, fd, _ = tree
    target = root / "home" / "x"
    try:
        safefs.write_file(fd, "/home/x", b"one", xattrs={"user.e2b.k": b"v"})
    except OSError as error:
        pytest.skip(f"no user xattrs on this file system: {error}")
    assert os.getxattr(target, "user.e2b.k") == b"v"
    with pytest.raises(OSError):
        safefs.write_file(fd, "/home/x", b"two", xattrs={"no-namespace": b"v"})
    assert target.read_bytes() == b"one"
    assert sorted(p.name for p in (root / "home").iterdir()) == ["x"]


def test_a_fifo_is_replaced_or_refused_never_opened(tree: tuple[Path, int, Path]) -> None:
    root, fd, _ = tree
    os.mkfifo(root / "home" / "pipe")
    os.mkfifo(root / "home" / "pipe2")
    outcome: list[str] = []
    done = threading.Event()

    def touch_fifos() -> None:
        try:
            safefs.read_file(fd, "/home/pipe")
        except safefs.PathRefused as refused:
            outcome.append(refused.reason)
        safefs.write_file(fd, "/home/pipe2", b"now a file")
        done.set()

    threading.Thread(target=touch_fifos, daemon=True).start()
    assert done.wait(10)
    assert outcome == ["not_a_file"]
    assert (root / "home" / "pipe2").read_bytes() == b"now a file"


def test_listing_stat_mkdir_rename_and_remove_resolve_inside(tree: tuple[Path, int, Path]) -> None:
    root, fd, outside = tree
    (outside / "keep").write_text("keep")
    (root / "home" / "out").symlink_to(outside)
    assert safefs.make_dirs(fd, "/home/out/made") is True
    assert safefs.make_dirs(fd, "/home/out/made") is False
    assert [name for name, _ in safefs.list_dir(fd, "/home/out")] == ["made"]
    safefs.rename(fd, "/home/out", "/moved/link")
    assert os.readlink(root / "moved" / "link") == str(outside)
    safefs.remove(fd, "/moved")
    assert safefs.is_directory(fd, "/") and not safefs.is_directory(fd, "/moved")
    assert sorted(p.name for p in outside.iterdir()) == ["keep"]
    assert stat.S_ISDIR(safefs.stat_path(fd, "/home").st_mode)
    with pytest.raises(safefs.PathRefused):
        safefs.remove(fd, "/")
    with pytest.raises(FileNotFoundError):
        safefs.read_file(fd, "/nothing")


def test_reads_past_the_limit_are_refused(tree: tuple[Path, int, Path]) -> None:
    _, fd, _ = tree
    safefs.write_file(fd, "/home/big", b"x" * 10)
    assert safefs.read_file(fd, "/home/big", limit=10) == b"x" * 10
    with pytest.raises(safefs.PathRefused) as caught:
        safefs.read_file(fd, "/home/big", limit=5)
    assert caught.value.reason == "too_large"


def test_reads_and_listings_under_masked_paths_are_refused_however_reached(
    tree: tuple[Path, int, Path],
) -> None:
    root, fd, _ = tree
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "tool").write_text("a mount point's placeholder")
    (root / "home" / "sys").symlink_to("/usr/bin")
    (root / "home" / "back").symlink_to("/usr/bin/..")
    for path in ("/usr/bin/tool", "/home/sys/tool", "/home/back/bin/tool"):
        with pytest.raises(safefs.PathRefused) as caught:
            safefs.open_file(fd, path, masked=("/usr",))
        assert caught.value.reason == "system_mount", path
    for path in ("/usr", "/home/sys", "/home/back"):
        with pytest.raises(safefs.PathRefused) as caught:
            safefs.list_dir(fd, path, masked=("/usr",))
        assert caught.value.reason == "system_mount", path
    assert [name for name, _ in safefs.list_dir(fd, "/", masked=("/usr",))] == ["home", "usr"]


def test_a_masked_name_is_refused_whatever_the_root_holds_there(
    tree: tuple[Path, int, Path],
) -> None:
    root, fd, _ = tree
    (root / "home" / "x").write_text("the sandbox's own")
    (root / "bin").symlink_to("home")
    with pytest.raises(safefs.PathRefused) as caught:
        safefs.open_file(fd, "/bin/x", masked=("/bin",))
    assert caught.value.reason == "system_mount"
    with pytest.raises(safefs.PathRefused) as caught:
        safefs.write_file(fd, "/bin/x", b"written", masked=("/bin",))
    assert caught.value.reason == "read_only"
    assert (root / "home" / "x").read_text() == "the sandbox's own"


def test_a_file_swapped_for_a_link_after_its_check_is_refused_not_followed(
    tree: tuple[Path, int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, fd, outside = tree
    (outside / "secret").write_text("secret")
    (root / "home" / "decoy").write_text("decoy")
    (root / "home" / "swapped").symlink_to(outside / "secret")
    regular = os.stat(root / "home" / "decoy")
    real_stat = os.stat

    real_lstat = os.lstat

    def stale_stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        # The checks saw a regular file; the command swapped in a link right after.
        return regular if path == "swapped" else real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    def stale_lstat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        return regular if path == "swapped" else real_lstat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(safefs.os, "stat", stale_stat)
    monkeypatch.setattr(safefs.os, "lstat", stale_lstat)
    with pytest.raises(safefs.PathRefused) as caught:
        safefs.open_file(fd, "/home/swapped")
    assert caught.value.reason == "not_a_file"


def test_a_file_swapped_for_a_fifo_after_its_check_is_refused_without_blocking(
    tree: tuple[Path, int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, fd, _ = tree
    (root / "home" / "decoy").write_text("decoy")
    os.mkfifo(root / "home" / "pipe")
    regular = os.stat(root / "home" / "decoy")
    real_stat = os.stat

    def stale_stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        return regular if path == "pipe" else real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(safefs.os, "stat", stale_stat)
    outcome: list[str] = []
    done = threading.Event()

    def read() -> None:
        try:
            safefs.open_file(fd, "/home/pipe")
        except safefs.PathRefused as refused:
            outcome.append(refused.reason)
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(10)
    assert outcome == ["not_a_file"]


def test_pieces_stop_at_the_length_given_however_long_the_file_grew(
    tree: tuple[Path, int, Path],
) -> None:
    root, fd, _ = tree
    (root / "home" / "growing").write_bytes(b"0123456789")
    file_fd = safefs.open_file(fd, "/home/growing")
    try:
        assert b"".join(safefs.pieces(file_fd, 4)) == b"0123"
        assert b"".join(safefs.pieces(file_fd, 100)) == b"456789"
    finally:
        os.close(file_fd)
    big = b"x" * (safefs.PIECE + 1)
    (root / "home" / "big").write_bytes(big)
    file_fd = safefs.open_file(fd, "/home/big")
    try:
        assert [len(piece) for piece in safefs.pieces(file_fd, len(big))] == [safefs.PIECE, 1]
    finally:
        os.close(file_fd)
