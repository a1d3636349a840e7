"""Whole trees in and out of a sandbox for adapter authors: :class:`TarTransfers`.

Mix it into an adapter whose sandboxes have a POSIX ``sh`` and a GNU-compatible
``tar``, and advertise ``Capability.TRANSFER``: ``upload`` and ``download``
then go as one tar stream through one command the adapter spawns (its stdin
for an upload, its stdout for a download), byte-exact, keeping permission bits
and symbolic links, memory bounded, and written locally never outside the
target (the stream from a sandbox is hostile). An adapter with a cheaper path
of its own overrides either method.
"""

from __future__ import annotations

from collections.abc import Callable

from ._trees import over_command
from .contract import Adapter
from .types import Handle, TransferProgress

__all__ = ["TarTransfers"]


class TarTransfers(Adapter):
    """``upload``/``download`` through ``tar`` in the sandbox (module docstring)."""

    def upload(
        self,
        handle: Handle,
        local_path: str,
        remote_path: str,
        *,
        progress: Callable[[TransferProgress], object] | None = None,
        timeout: float | None = None,
    ) -> TransferProgress:
        return over_command.upload(
            self, handle, local_path, remote_path, progress=progress, timeout=timeout
        )

    def download(
        self,
        handle: Handle,
        remote_path: str,
        local_path: str,
        *,
        progress: Callable[[TransferProgress], object] | None = None,
        timeout: float | None = None,
    ) -> TransferProgress:
        return over_command.download(
            self, handle, remote_path, local_path, progress=progress, timeout=timeout
        )
