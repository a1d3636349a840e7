"""Checkpoints of a local sandbox: copies of its files (:mod:`managoat_sandbox._engine.trees`).

A checkpoint is ``checkpoints/<id>/fs``: the sandbox's files copied without
trusting them — links copied as links, FIFOs and devices left out, nothing
followed out of the tree.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..._engine import trees
from ..._engine.box import Box
from . import layout


def _directory(box: Box, checkpoint_id: str) -> Path:
    return box.directory / layout.CHECKPOINTS / checkpoint_id


def exists(box: Box, checkpoint_id: str) -> bool:
    return (_directory(box, checkpoint_id) / layout.FS).is_dir()


def create(box: Box, checkpoint_id: str, comment: str) -> None:
    """Copy the sandbox's files into a new checkpoint (complete, or not there at all)."""
    base = box.directory / layout.CHECKPOINTS
    base.mkdir(mode=0o700, exist_ok=True)
    staging = base / f".{checkpoint_id}"
    staging.mkdir(mode=0o700)
    try:
        trees.copy_tree(box.fs, staging / layout.FS)
        (staging / "comment").write_text(comment)
        os.rename(staging, _directory(box, checkpoint_id))
    except BaseException:
        trees.remove_tree(staging)
        raise


def restore(box: Box, checkpoint_id: str) -> None:
    """Replace the sandbox's files by a checkpoint's (its agent must not run)."""
    trees.replace_tree(box.fs, _directory(box, checkpoint_id) / layout.FS, box.directory)
