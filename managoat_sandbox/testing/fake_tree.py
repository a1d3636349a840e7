"""The Fake's ``upload`` and ``download``: whole trees in and out of its memory.

A Fake sandbox holds written files (bytes and a mode), and, from uploads,
directories (with a mode, also when empty) and symbolic links (their target
text; nothing is ever resolved through one). An upload stores what
:func:`managoat_sandbox._trees.pack.plan` finds in the local tree; a download
builds the same tar stream a sandbox's ``tar`` would send, in memory, and
writes it with :class:`managoat_sandbox._trees.unpack.Extractor` — the
extractor every adapter's download uses.
"""

from __future__ import annotations

import io
import os
import posixpath
import stat
import tarfile
from collections.abc import Callable, Iterator
from typing import Protocol

import attrs

from .._trees.counter import Counter
from .._trees.pack import plan, totals
from .._trees.unpack import Extractor
from ..errors import NotFound
from ..reasons import Reason
from ..types import TransferProgress

__all__ = ["Snapshot", "Tree", "download", "snapshot", "upload"]


class Tree(Protocol):
    """What a Fake sandbox holds, as this module reads and writes it."""

    files: dict[str, bytes]
    modes: dict[str, int]
    dirs: dict[str, int]
    links: dict[str, str]


@attrs.define
class Snapshot:
    """A copy of a tree's contents, read outside the Fake's lock."""

    files: dict[str, bytes]
    modes: dict[str, int]
    dirs: dict[str, int]
    links: dict[str, str]


def snapshot(tree: Tree) -> Snapshot:
    """The contents of ``tree`` now (the bytes are immutable: shared, not copied)."""
    return Snapshot(dict(tree.files), dict(tree.modes), dict(tree.dirs), dict(tree.links))


def _forget(tree: Tree, path: str) -> None:
    tree.files.pop(path, None)
    tree.modes.pop(path, None)
    tree.links.pop(path, None)


def upload(
    tree: Tree,
    local_path: str,
    remote_path: str,
    progress: Callable[[TransferProgress], object] | None,
) -> TransferProgress:
    """Store the local file, link or tree at ``local_path`` as ``remote_path``."""
    parent, name = posixpath.split(remote_path)
    entries = plan(local_path, name)
    files, size = totals(entries)
    counter = Counter(progress, files_total=files, bytes_total=size)
    for entry in entries:
        path = posixpath.join(parent, entry.arcname)
        info = os.lstat(entry.path)
        _forget(tree, path)
        if entry.kind == "dir":
            tree.dirs[path] = stat.S_IMODE(info.st_mode)
            continue
        tree.dirs.pop(path, None)
        if entry.kind == "symlink":
            tree.links[path] = os.readlink(entry.path)
        else:
            with open(entry.path, "rb") as file:
                tree.files[path] = file.read()
            tree.modes[path] = stat.S_IMODE(info.st_mode)
            counter.add_bytes(len(tree.files[path]))
        counter.add_file()
    return counter.done()


def _under(tree: Tree, path: str) -> Iterator[str]:
    """Every path below ``path``: those stored and the directories their paths imply,
    sorted (so a directory comes before what it holds)."""
    prefix = path.rstrip("/") + "/"
    names = {*tree.files, *tree.links, *tree.dirs}
    implied = {
        prefix + "/".join(name[len(prefix) :].split("/")[:depth])
        for name in names
        if name.startswith(prefix)
        for depth in range(1, name[len(prefix) :].count("/") + 1)
    }
    yield from sorted(name for name in names | implied if name.startswith(prefix))


def _archive(tree: Tree, remote_path: str) -> bytes:
    """The tar stream of ``remote_path``, as ``tar -c`` from its directory makes it."""
    parent = posixpath.dirname(remote_path)
    if remote_path in tree.files or remote_path in tree.links:
        paths = [remote_path]
    else:
        paths = list(_under(tree, remote_path))
        if remote_path not in tree.dirs and not paths:
            raise NotFound(Reason.PATH, path=remote_path)
        paths.insert(0, remote_path)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in paths:
            header = tarfile.TarInfo(path[len(parent) :].lstrip("/"))
            if path in tree.links:
                header.type, header.linkname = tarfile.SYMTYPE, tree.links[path]
                tar.addfile(header)
            elif path in tree.files:
                header.size, header.mode = len(tree.files[path]), tree.modes.get(path, 0o644)
                tar.addfile(header, io.BytesIO(tree.files[path]))
            else:
                header.type, header.mode = tarfile.DIRTYPE, tree.dirs.get(path, 0o755)
                tar.addfile(header)
    return buffer.getvalue()


def download(
    tree: Tree,
    remote_path: str,
    local_path: str,
    progress: Callable[[TransferProgress], object] | None,
) -> TransferProgress:
    """Write ``remote_path`` (a file, link or tree of the Fake) to ``local_path``."""
    counter = Counter(progress)
    archive = io.BytesIO(_archive(tree, remote_path))
    Extractor(local_path, posixpath.basename(remote_path), counter).extract(archive)
    return counter.done()
