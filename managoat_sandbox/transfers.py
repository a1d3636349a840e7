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

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence

from ._trees import over_command, staged
from .contract import Adapter, Owner
from .types import Command, Handle, TransferProgress

__all__ = ["StagedTarTransfers", "TarTransfers"]


class TarTransfers(Adapter):
    """``upload``/``download`` through ``tar`` in the sandbox (module docstring).

    Two hooks shape the command a transfer runs: :meth:`transfer_command` starts
    it (a plain ``spawn`` here) and :meth:`transfer_ended` is called once it has
    ended, whatever the outcome (nothing here) — for an adapter whose spawns
    leave a session behind that a transfer should not.
    """

    def transfer_command(
        self, handle: Handle, args: Sequence[str], *, owner: Owner, stdin: bool
    ) -> Command:
        """Start ``sh`` with ``args`` for a transfer, its frames to ``owner``."""
        return self.spawn(handle, "sh", args, owner=owner, stdin=stdin)

    def transfer_ended(self, handle: Handle, command: Command) -> None:
        """Called once a transfer's command has ended (or was stopped)."""

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


class StagedTarTransfers(TarTransfers):
    """``upload``/``download`` with the tar archive staged as one file in the sandbox's
    ``/tmp`` and moved by the provider's file API (:mod:`managoat_sandbox._trees.staged`),
    for a provider whose command input and output cost more per byte than its file API.
    The adapter implements :meth:`put_stream` and :meth:`get_stream`."""

    def put_stream(self, handle: Handle, path: str, chunks: Iterable[bytes]) -> None:
        """Write the file at ``path`` from ``chunks`` (parents made), streamed."""
        raise NotImplementedError

    def get_stream(
        self, handle: Handle, path: str
    ) -> contextlib.AbstractContextManager[Iterator[bytes]]:
        """The bytes of the file at ``path``, streamed as read."""
        raise NotImplementedError

    def upload(
        self,
        handle: Handle,
        local_path: str,
        remote_path: str,
        *,
        progress: Callable[[TransferProgress], object] | None = None,
        timeout: float | None = None,
    ) -> TransferProgress:
        return staged.upload(
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
        return staged.download(
            self, handle, remote_path, local_path, progress=progress, timeout=timeout
        )
