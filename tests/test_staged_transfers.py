"""Staged transfers (Sprites, E2B, Daytona): the archive goes through the file API as one file in
the sandbox's ``/tmp``, which is removed whatever the outcome; the multipart body that
carries it is streamed and can be sent again whole."""

from __future__ import annotations

import email.parser
import email.policy
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox import config
from managoat_sandbox._multipart import StreamedForm
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.emulators.sprites import SpritesEmulator
from managoat_sandbox.errors import NotFound
from managoat_sandbox.types import Handle

pytestmark = pytest.mark.timeout(120)

KEY = "staged-transfer-key"
STAGED = "ls -a /tmp | grep -c '^.managoat-transfer-' || true"


@pytest.fixture(params=["sprites", "e2b", "daytona"])
def handle(request: pytest.FixtureRequest) -> Iterator[Handle]:
    if request.param == "sprites":
        with SpritesEmulator(credential=KEY) as sprites:
            config.configure("sprites", token=KEY, base_url=sprites.base_url)
            with sandbox.temporary("sprites") as made:
                yield made
    elif request.param == "e2b":
        with E2BEmulator(credential=KEY) as e2b:
            config.configure("e2b", api_key=KEY, base_url=e2b.base_url, sandbox_url=e2b.base_url)
            with sandbox.temporary("e2b") as made:
                yield made
    else:
        with DaytonaEmulator(credential=KEY) as daytona:
            config.configure("daytona", api_key=KEY, api_url=daytona.api_url)
            with sandbox.temporary("daytona") as made:
                yield made


def staged_files(handle: Handle) -> int:
    return int(sandbox.exec(handle, "sh", ["-c", STAGED]).output.strip())


def test_a_round_trip_leaves_no_staged_archive(handle: Handle, tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "d").mkdir(parents=True)
    (source / "d" / "f").write_bytes(os.urandom(700_000))
    (source / "link").symlink_to("d/f")
    sandbox.upload(handle, source, "/tmp/work/src")
    sandbox.download(handle, "/tmp/work/src", tmp_path / "back")
    assert (tmp_path / "back" / "d" / "f").read_bytes() == (source / "d" / "f").read_bytes()
    assert os.readlink(tmp_path / "back" / "link") == "d/f"
    assert staged_files(handle) == 0


def test_a_failed_download_leaves_no_staged_archive(handle: Handle, tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        sandbox.download(handle, "/tmp/nothing-here", tmp_path / "x")
    assert staged_files(handle) == 0
    assert not (tmp_path / "x").exists()


def test_a_streamed_form_is_a_multipart_body_and_can_be_sent_again() -> None:
    chunks = [b"first ", b"second", b"\r\n--not-a-boundary\r\n"]
    form = StreamedForm((("files[0].path", "/tmp/a.tar"),), "files[0].file", "a.tar", chunks)
    sent = [b"".join(form), b"".join(form)]
    assert sent[0] == sent[1]
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {form.content_type}\r\n\r\n".encode() + sent[0]
    )
    parts = list(message.iter_parts())
    assert [part.get_param("name", header="content-disposition") for part in parts] == [
        "files[0].path",
        "files[0].file",
    ]
    assert parts[0].get_payload(decode=True) == b"/tmp/a.tar"
    assert parts[1].get_payload(decode=True) == b"".join(chunks)


@pytest.mark.parametrize("unsafe", ['a"b', "a\r\nb", "a\\b"])
def test_a_name_a_header_cannot_carry_as_it_is_is_refused(unsafe: str) -> None:
    with pytest.raises(ValueError):
        b"".join(StreamedForm((), "file", unsafe, [b"x"]))


def test_an_archive_larger_than_a_part_goes_in_parts_joined_in_order(
    handle: Handle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("managoat_sandbox._trees.staged.PART_BYTES", 64 * 1024)
    data = os.urandom(1_500_000)  # 23 parts: more than ten, so their order is tested
    (tmp_path / "big.bin").write_bytes(data)
    sandbox.upload(handle, tmp_path / "big.bin", "/tmp/work/big.bin")
    sandbox.download(handle, "/tmp/work/big.bin", tmp_path / "back.bin")
    assert (tmp_path / "back.bin").read_bytes() == data
    assert staged_files(handle) == 0
