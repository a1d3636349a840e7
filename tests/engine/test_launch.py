"""What a sandbox leaves where its mounts go can never stop its agent from starting."""

from __future__ import annotations

import os
from pathlib import Path

from managoat_sandbox._engine import launch
from managoat_sandbox._engine.mounts import Mount
from managoat_sandbox._engine.settings import BoxSettings


def test_whatever_occupies_a_mount_point_is_moved_aside(tmp_path: Path) -> None:
    root = tmp_path / "fs"
    root.mkdir()
    (root / "bin").mkdir()
    (root / "bin" / "mine").write_text("kept")
    (root / "proc").write_text("a file")
    (root / "etc").symlink_to(tmp_path)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for mount in (
            Mount("symlink", "/bin", "usr/bin"),
            Mount("proc", "/proc"),
            Mount("ro-bind", "/etc/ssl", "/etc/ssl"),
        ):
            launch.prepare_mount_point(fd, mount)
    finally:
        os.close(fd)
    names = sorted(os.listdir(root))
    assert "bin" not in names and "proc" not in names
    assert (root / "etc").is_dir() and not (root / "etc").is_symlink()
    displaced = [n for n in names if n.startswith("bin.displaced-")]
    assert len(displaced) == 1 and (root / displaced[0] / "mine").read_text() == "kept"
    assert [n for n in names if n.startswith("proc.displaced-")]
    assert list(tmp_path.glob("ssl")) == []


def test_generated_identity_files_name_the_sandbox_user_and_host(tmp_path: Path) -> None:
    launch.write_generated_etc(tmp_path, BoxSettings(isolated=True, hostname="box7"))
    etc = tmp_path / "etc"
    assert "user:x:1000:1000:user:/home/user:/bin/bash\n" in (etc / "passwd").read_text()
    assert "user:x:1000:\n" in (etc / "group").read_text()
    assert (etc / "hostname").read_text() == "box7\n"
    assert "127.0.0.1\tlocalhost box7\n" in (etc / "hosts").read_text()
