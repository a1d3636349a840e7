"""read_file and list_files through the facade: argument checks, gating, retries, and the
collector every adapter uses."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox import FileInfo, config
from managoat_sandbox.errors import Invalid, NotFound, NotSupported, Truncated, Unavailable
from managoat_sandbox.files import collect
from managoat_sandbox.testing.fake import Fake
from managoat_sandbox.types import Handle


@pytest.fixture
def box() -> Iterator[Handle]:
    handle = sandbox.create("fake", "files")
    yield handle
    sandbox.destroy(handle)


def test_round_trip_and_listing_through_the_facade(box: Handle) -> None:
    sandbox.write_file(box, "/work/a.bin", bytes(range(256)), mode=0o600)
    assert sandbox.read_file(box, "/work/a.bin") == bytes(range(256))
    assert sandbox.list_files(box, "/work/") == [
        FileInfo("a.bin", "/work/a.bin", "file", 256, 0o600)
    ]
    assert {e.name for e in sandbox.list_files(box, "/")} == {"work"}


@pytest.mark.parametrize("path", ["", "relative", "/a/../b", "/a/", "/a\x00b"])
def test_unusable_read_paths_are_invalid(box: Handle, path: str) -> None:
    with pytest.raises(Invalid):
        sandbox.read_file(box, path)


@pytest.mark.parametrize("max_bytes", [True, 1.5, "10"])
def test_max_bytes_of_the_wrong_type_is_a_type_error(box: Handle, max_bytes: object) -> None:
    with pytest.raises(TypeError):
        sandbox.read_file(box, "/f", max_bytes=max_bytes)  # type: ignore[arg-type]


def test_negative_max_bytes_is_invalid(box: Handle) -> None:
    with pytest.raises(Invalid):
        sandbox.read_file(box, "/f", max_bytes=-1)


def test_an_adapter_without_the_capability_is_not_supported() -> None:
    class Plain(Fake):
        def capabilities(self) -> frozenset[str]:
            return Fake.capabilities(self) - {"read_file", "list_files"}

    config.configure(adapters={"plain": Plain})
    handle = sandbox.create("plain", "x")
    with pytest.raises(NotSupported):
        sandbox.read_file(handle, "/f")
    with pytest.raises(NotSupported):
        sandbox.list_files(handle, "/")


def test_reads_are_retried_like_write_file(box: Handle) -> None:
    fake = sandbox.adapter_for("fake")
    assert isinstance(fake, Fake)
    sandbox.write_file(box, "/f", b"data")
    fake.fail_next("read_file", Unavailable("blip"), times=2)
    assert sandbox.read_file(box, "/f") == b"data"
    fake.fail_next("list_files", Unavailable("blip"), times=2)
    assert [e.name for e in sandbox.list_files(box, "/")] == ["f"]


def test_a_missing_file_is_not_found_and_not_retried(box: Handle) -> None:
    with pytest.raises(NotFound) as raised:
        sandbox.read_file(box, "/nothing")
    assert raised.value.attempts == 1


def test_collect_stops_reading_once_past_the_limit() -> None:
    taken: list[int] = []

    def pieces() -> Iterator[bytes]:
        for index in range(100):
            taken.append(index)
            yield b"x" * 10

    with pytest.raises(Truncated) as raised:
        collect(pieces(), max_bytes=25)
    assert raised.value.detail == ("max_bytes", 25)
    assert taken == [0, 1, 2]
    assert collect(iter([b"ab", b"", b"c"])) == b"abc"
    with pytest.raises(Truncated):
        collect(iter([b"x"]), max_bytes=100, size=101)
