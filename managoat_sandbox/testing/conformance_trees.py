"""The conformance promises of ``upload`` and ``download`` (capability ``transfer``).

Part of :class:`managoat_sandbox.testing.conformance.ConformanceTests`, kept in a
module of its own. Each test builds a local tree in a temporary directory,
copies it into a fresh directory under ``files_root`` in the sandbox and back
into another temporary directory, and compares the two trees entry by entry:
type, permission bits, bytes, link targets.
"""

from __future__ import annotations

import itertools
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from ..contract import Adapter, Capability
from ..errors import NotFound
from ..types import Handle, TransferProgress

if TYPE_CHECKING:
    from unittest import TestCase as _Base
else:
    _Base = object

__all__ = ["TransferTests", "describe_tree", "make_sample_tree"]

#: Bytes of the sample tree's large file (several chunks and progress reports).
LARGE = 3 * 1024 * 1024 + 7


def make_sample_tree(root: str) -> None:
    """A tree with what a workspace holds: nested and empty directories, binary and
    empty files, executable and private modes, a name with spaces and one not in
    ASCII, and links — relative, absolute, dangling and to a directory."""
    os.makedirs(os.path.join(root, "src", "pkg"))
    os.makedirs(os.path.join(root, "empty"))
    os.makedirs(os.path.join(root, "private"))
    files = {
        "src/pkg/module.py": b"print('hello')\n",
        "src/every-byte.bin": bytes(range(256)) * 64,
        "src/large.bin": os.urandom(LARGE),
        "empty.txt": b"",
        "run.sh": b"#!/bin/sh\necho run\n",
        "private/secret": b"s3cret\n",
        "with space \u00e9t\u00e9.txt": "caf\u00e9\n".encode(),
    }
    for name, data in files.items():
        with open(os.path.join(root, name), "wb") as file:
            file.write(data)
    os.chmod(os.path.join(root, "run.sh"), 0o755)
    os.chmod(os.path.join(root, "private", "secret"), 0o600)
    os.chmod(os.path.join(root, "private"), 0o750)
    os.symlink("pkg/module.py", os.path.join(root, "src", "relative-link"))
    os.symlink("/etc/hostname", os.path.join(root, "absolute-link"))
    os.symlink("no-such-target", os.path.join(root, "dangling-link"))
    os.symlink("src/pkg", os.path.join(root, "dir-link"))


def _describe(path: str) -> tuple[str, int, bytes | str]:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return ("link", 0, os.readlink(path))
    if stat.S_ISDIR(info.st_mode):
        return ("dir", stat.S_IMODE(info.st_mode), "")
    with open(path, "rb") as file:
        return ("file", stat.S_IMODE(info.st_mode), file.read())


def describe_tree(root: str) -> dict[str, tuple[str, int, bytes | str]]:
    """Every entry of ``root`` (itself as ``"."``, then what is below it): its type,
    permission bits and content (a file's bytes, a link's target), never following
    a link."""
    described = {".": _describe(root)}
    for directory, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = os.path.join(directory, name)
            described[os.path.relpath(path, root)] = _describe(path)
    return described


class TransferTests(_Base):
    """``upload``/``download`` promises; mixed into ``ConformanceTests``."""

    if TYPE_CHECKING:
        adapter_instance: ClassVar[Adapter]

        def _created(self) -> Handle: ...
        def _require(self, capability: str) -> None: ...
        def _files_dir(self) -> str: ...
        def _raises(self, expected: Any, operation: Callable[..., object], *args: Any) -> Any: ...

    def _local_dir(self) -> str:
        """A temporary local directory, removed when the test ends."""
        path = tempfile.mkdtemp(prefix="conformance-transfer-")
        self.addCleanup(shutil.rmtree, path, ignore_errors=True)
        return path

    def _assert_same_tree(self, expected: str, got: str) -> None:
        want, have = describe_tree(expected), describe_tree(got)
        self.assertEqual(sorted(have), sorted(want), "the trees hold different entries")
        for name, entry in want.items():
            self.assertEqual(have[name], entry, f"{name!r} differs after the round trip")

    def test_a_tree_makes_the_round_trip_exactly(self) -> None:
        """A tree uploaded then downloaded comes back entry for entry: bytes, permission
        bits, empty directories, and links as links (not followed, dangling ones too);
        progress reports only grow and the upload's carry its totals."""
        self._require(Capability.TRANSFER)
        adapter = self.adapter_instance
        handle = self._created()
        source = os.path.join(self._local_dir(), "workspace")
        make_sample_tree(source)
        remote = f"{self._files_dir()}/workspace"
        reports: list[TransferProgress] = []
        sent = adapter.upload(handle, source, remote, progress=reports.append)
        files = sum(1 for entry in describe_tree(source).values() if entry[0] != "dir")
        self.assertEqual((sent.files, sent.files_total), (files, files))
        self.assertGreater(sent.bytes, LARGE)
        self.assertTrue(reports, "no progress was reported")
        self.assertEqual({(r.files_total, r.bytes_total) for r in reports}, {(files, sent.bytes)})
        pairs = list(itertools.pairwise(reports))
        self.assertTrue(all(a.bytes <= b.bytes and a.files <= b.files for a, b in pairs))
        back = os.path.join(self._local_dir(), "back")
        got = adapter.download(handle, remote, back)
        self.assertEqual((got.files, got.bytes), (sent.files, sent.bytes))
        self._assert_same_tree(source, back)

    def test_a_single_file_makes_the_round_trip_with_its_mode(self) -> None:
        """One file goes up and comes back byte for byte with its permission bits."""
        self._require(Capability.TRANSFER)
        adapter = self.adapter_instance
        handle = self._created()
        local = self._local_dir()
        path = os.path.join(local, "tool")
        with open(path, "wb") as file:
            file.write(bytes(range(256)) * 3)
        os.chmod(path, 0o751)
        remote = f"{self._files_dir()}/bin/tool"
        adapter.upload(handle, path, remote)
        back = os.path.join(local, "tool-back")
        got = adapter.download(handle, remote, back)
        self.assertEqual((got.files, got.bytes), (1, 768))
        self.assertEqual(describe_tree(back)["."], describe_tree(path)["."])

    def test_an_upload_merges_into_a_directory_and_replaces_its_files(self) -> None:
        """A second upload to the same path replaces the files it carries and keeps
        the others, as ``cp -r`` into an existing directory does."""
        self._require(Capability.TRANSFER)
        adapter = self.adapter_instance
        handle = self._created()
        local = self._local_dir()
        first, second = os.path.join(local, "one"), os.path.join(local, "two")
        for root, files in (
            (first, {"kept": b"1", "replaced": b"old"}),
            (second, {"replaced": b"new"}),
        ):
            os.makedirs(root)
            for name, data in files.items():
                with open(os.path.join(root, name), "wb") as file:
                    file.write(data)
        remote = f"{self._files_dir()}/merged"
        adapter.upload(handle, first, remote)
        adapter.upload(handle, second, remote)
        back = os.path.join(local, "back")
        adapter.download(handle, remote, back)
        tree = describe_tree(back)
        self.assertIn("kept", tree, "the second upload removed a file it did not carry")
        self.assertEqual((tree["kept"][2], tree["replaced"][2]), (b"1", b"new"))

    def test_a_download_of_a_missing_path_is_not_found_and_writes_nothing(self) -> None:
        """Nothing at the remote path: ``NotFound``, and nothing is made locally."""
        self._require(Capability.TRANSFER)
        adapter = self.adapter_instance
        handle = self._created()
        target = os.path.join(self._local_dir(), "never")
        self._raises(NotFound, adapter.download, handle, f"{self._files_dir()}/missing", target)
        self.assertFalse(os.path.lexists(target), "a failed download left something behind")
