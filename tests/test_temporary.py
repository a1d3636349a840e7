"""``sandbox.temporary``: a fresh sandbox for a block, destroyed however the block ends,
never an existing one adopted."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox import config
from managoat_sandbox.contract import Capability
from managoat_sandbox.errors import AlreadyExists, Invalid, NotFound, Unavailable
from managoat_sandbox.testing import Fake
from managoat_sandbox.types import Handle


class WithoutCreateNew(Fake):
    """A Fake that does not offer ``create_new`` (as Daytona does not)."""

    def capabilities(self) -> frozenset[str]:
        return super().capabilities() - {Capability.CREATE_NEW}


class DestroyFails(Fake):
    def destroy(self, handle: Handle) -> None:
        raise Unavailable("destroy failed (test)")


@pytest.fixture(params=[Fake, WithoutCreateNew], ids=["create_new", "checked_create"])
def fake(request: pytest.FixtureRequest) -> Iterator[Fake]:
    instance: Fake = request.param()
    config.configure(adapters={"fake": instance}, retry={"attempts": 1})
    yield instance
    instance.reset()


def test_the_sandbox_is_new_named_from_the_prefix_and_gone_after_the_block(fake: Fake) -> None:
    with sandbox.temporary("fake", prefix="ci-job") as handle:
        assert handle.name.startswith("ci-job-") and len(handle.name) == len("ci-job-") + 12
        assert sandbox.get(handle).status == "running"
        assert handle.name in sandbox.list_all_names("fake")
    with pytest.raises(NotFound):
        sandbox.get(handle)


def test_two_temporaries_get_different_names(fake: Fake) -> None:
    with sandbox.temporary("fake") as first, sandbox.temporary("fake") as second:
        assert first.name != second.name
        assert {first.name, second.name} <= sandbox.list_all_names("fake")
    assert sandbox.list_all_names("fake") == frozenset()


@pytest.mark.parametrize("raised", [RuntimeError("boom"), KeyboardInterrupt()])
def test_the_sandbox_is_destroyed_when_the_block_raises_and_the_error_propagates(
    fake: Fake, raised: BaseException
) -> None:
    with pytest.raises(type(raised)) as caught, sandbox.temporary("fake") as handle:
        raise raised
    assert caught.value is raised
    with pytest.raises(NotFound):
        sandbox.get(handle)


def test_an_existing_sandbox_of_the_name_is_never_adopted_nor_destroyed(
    fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("managoat_sandbox._temporary.secrets.token_hex", lambda n: "0" * (2 * n))
    existing = sandbox.create("fake", "job-000000000000")
    sandbox.write_file(existing, "/mine", b"keep me")
    with pytest.raises(AlreadyExists), sandbox.temporary("fake", prefix="job"):
        pytest.fail("the block must not run with an adopted sandbox")
    assert sandbox.read_file(existing, "/mine") == b"keep me"


def test_a_failed_destroy_after_a_failing_block_is_noted_and_the_block_s_error_wins(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config.configure(adapters={"fake": DestroyFails()}, retry={"attempts": 1})
    with (
        caplog.at_level(logging.WARNING, logger="managoat_sandbox"),
        pytest.raises(RuntimeError) as caught,
        sandbox.temporary("fake", prefix="p"),
    ):
        raise RuntimeError("the test's own failure")
    assert str(caught.value) == "the test's own failure"
    notes: list[str] = getattr(caught.value, "__notes__", [])
    if sys.version_info >= (3, 11):
        assert any("may still exist" in note and "p-" in note for note in notes)
    assert "could not destroy the temporary sandbox" in caplog.text


def test_a_failed_destroy_after_a_clean_block_is_raised() -> None:
    config.configure(adapters={"fake": DestroyFails()}, retry={"attempts": 1})
    with pytest.raises(Unavailable), sandbox.temporary("fake"):
        pass


@pytest.mark.parametrize("prefix", ["nul\x00", "x" * 300])
def test_a_prefix_that_makes_an_unusable_name_is_invalid_before_anything_is_made(
    fake: Fake, prefix: str
) -> None:
    with pytest.raises(Invalid), sandbox.temporary("fake", prefix=prefix):
        pytest.fail("no sandbox may be made")
    assert sandbox.list_all_names("fake") == frozenset()


def test_a_prefix_that_is_not_a_str_is_a_type_error(fake: Fake) -> None:
    bad: Any = 7
    with pytest.raises(TypeError), sandbox.temporary("fake", prefix=bad):
        pytest.fail("no sandbox may be made")


CTRL_C = textwrap.dedent(
    """
    import os, signal, sys
    import managoat_sandbox as sandbox
    from managoat_sandbox import config

    config.configure("local", root=sys.argv[1])
    try:
        with sandbox.temporary("local", prefix="interrupted") as handle:
            print(handle.name, flush=True)
            os.kill(os.getpid(), signal.SIGINT)
            signal.pause()
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    """
)


def test_ctrl_c_in_the_block_destroys_a_local_sandbox(tmp_path: Path) -> None:
    """A real SIGINT, in a real process, while a real local sandbox runs."""
    root = tmp_path / "root"
    ran = subprocess.run(
        [sys.executable, "-c", CTRL_C, str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert ran.returncode == 0, ran.stderr
    name, word = ran.stdout.split()
    assert (name.startswith("interrupted-"), word) == (True, "interrupted")
    config.configure("local", root=str(root))
    assert sandbox.list_all_names("local") == frozenset()
