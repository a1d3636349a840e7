"""How a transfer through a command ends, whatever the sandbox's ``tar`` sent: a stub
runner plays the command's frames, so each outcome is decided by the frames alone."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from managoat_sandbox._trees import over_command
from managoat_sandbox._trees.unpack import ChunkReader
from managoat_sandbox.errors import Denied, Invalid, NotFound
from managoat_sandbox.frames import Exit, Frame, Stderr, Stdout
from managoat_sandbox.types import Command, Handle


def archive_of(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class Played:
    """A runner whose transfer command delivers ``frames`` to its owner at once."""

    def __init__(self, frames: Sequence[Frame]) -> None:
        self.frames = frames
        self.ended: list[Command] = []
        self.stopped: list[Command] = []

    def transfer_command(
        self, handle: Handle, args: Sequence[str], *, owner: Any, stdin: bool
    ) -> Command:
        for frame in self.frames:
            owner.put(frame)
        return Command("stub", "ref")

    def transfer_ended(self, handle: Handle, command: Command) -> None:
        self.ended.append(command)

    def write_stdin(self, command: Command, data: bytes) -> None:
        raise AssertionError("a download writes no stdin")

    def close_stdin(self, command: Command) -> None:
        raise AssertionError("a download writes no stdin")

    def stop_command(self, command: Command) -> None:
        self.stopped.append(command)


def download(frames: Sequence[Frame], target: Path) -> Played:
    runner = Played(frames)
    over_command.download(
        runner, Handle("stub", "box"), "/w/f", str(target), progress=None, timeout=10
    )
    return runner


def test_an_archive_split_across_frames_is_written_whole(tmp_path: Path) -> None:
    data = archive_of("f", b"x" * 70_000)
    frames = [Stdout("ref", data[i : i + 999]) for i in range(0, len(data), 999)]
    runner = download([*frames, Exit("ref", 0)], tmp_path / "f")
    assert (tmp_path / "f").read_bytes() == b"x" * 70_000
    assert (len(runner.ended), runner.stopped) == (1, [])


def test_a_tar_that_succeeds_without_an_archive_is_invalid(tmp_path: Path) -> None:
    with pytest.raises(Invalid) as caught:
        download([Stdout("ref", b"not a tar stream at all"), Exit("ref", 0)], tmp_path / "f")
    assert caught.value.detail == ("transfer", "not a tar archive")


def test_a_tar_that_fails_before_writing_is_explained_by_its_words(tmp_path: Path) -> None:
    words = b"tar: f: Cannot stat: Input/output error\ntar: Exiting with failure status\n"
    with pytest.raises(Invalid) as caught:
        download([Stderr("ref", words), Exit("ref", 2)], tmp_path / "f")
    assert caught.value.detail == ("transfer", "tar: Exiting with failure status")


@pytest.mark.parametrize(
    ("words", "code", "error"),
    [
        (b"no such file or directory\n", over_command.MISSING, NotFound),
        (b"tar: f: Cannot open: Permission denied\n", 2, Denied),
    ],
)
def test_a_missing_or_refused_path_is_its_taxonomy_error(
    tmp_path: Path, words: bytes, code: int, error: type[Exception]
) -> None:
    with pytest.raises(error):
        download([Stderr("ref", words), Exit("ref", code)], tmp_path / "f")
    assert not (tmp_path / "f").exists()


def test_a_chunk_reader_returns_at_most_what_is_asked_and_empty_at_the_end() -> None:
    reader = ChunkReader(iter([b"", b"abcdef", b"gh"]))
    assert [reader.read(4), reader.read(4), reader.read(4), reader.read(4)] == [
        b"abcd",
        b"ef",
        b"gh",
        b"",
    ]
