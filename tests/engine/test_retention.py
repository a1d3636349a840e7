"""The agent's bound on finished sessions, on a state directory of its own."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from managoat_sandbox._engine.retention import Retention, finished_on_disk, remove_session


@pytest.fixture
def state(tmp_path: Path) -> Iterator[int]:
    (tmp_path / "state" / "sessions").mkdir(parents=True)
    fd = os.open(tmp_path / "state", os.O_RDONLY | os.O_DIRECTORY)
    yield fd
    os.close(fd)


def session(tmp_path: Path, sid: str, *, ended_at: int | None) -> Path:
    directory = tmp_path / "state" / "sessions" / sid
    directory.mkdir()
    (directory / "spec.json").write_text("{}")
    (directory / "journal").write_bytes(b"")
    if ended_at is not None:
        (directory / "exit.json").write_text('{"code": 0, "signal": null}')
        os.utime(directory / "exit.json", ns=(ended_at, ended_at))
    return directory


def remaining(tmp_path: Path) -> set[str]:
    return {entry.name for entry in (tmp_path / "state" / "sessions").iterdir()}


def test_sessions_left_by_an_earlier_agent_are_ordered_by_their_end(
    tmp_path: Path, state: int
) -> None:
    session(tmp_path, "a", ended_at=3_000)
    session(tmp_path, "b", ended_at=1_000)
    session(tmp_path, "c", ended_at=None)
    session(tmp_path, "d", ended_at=2_000)
    assert finished_on_disk(state) == ["b", "d", "a"]


def test_the_bound_removes_the_earliest_ends_and_never_a_running_session(
    tmp_path: Path, state: int
) -> None:
    for n, sid in enumerate(["a", "b", "c"]):
        session(tmp_path, sid, ended_at=1_000 * (n + 1))
    session(tmp_path, "running", ended_at=None)
    retention = Retention(state)
    retention.set_bound(2)
    assert remaining(tmp_path) == {"b", "c", "running"}
    session(tmp_path, "d", ended_at=9_000)
    retention.finished("d")
    assert remaining(tmp_path) == {"c", "d", "running"}
    retention.set_bound(0)
    assert remaining(tmp_path) == {"running"}


def test_without_a_bound_everything_stays(tmp_path: Path, state: int) -> None:
    session(tmp_path, "a", ended_at=1_000)
    retention = Retention(state)
    session(tmp_path, "b", ended_at=2_000)
    retention.finished("b")
    assert remaining(tmp_path) == {"a", "b"}


@pytest.mark.parametrize("bad", [-1, True, 1.5, "2"])
def test_a_bad_bound_is_refused(state: int, bad: object) -> None:
    with pytest.raises(ValueError, match="retention bound"):
        Retention(state).set_bound(bad)  # type: ignore[arg-type]


def test_removal_never_follows_a_link_put_in_place_of_a_session(tmp_path: Path, state: int) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "spec.json").write_text("keep")
    (tmp_path / "state" / "sessions" / "planted").symlink_to(outside)
    remove_session(state, "planted")
    assert remaining(tmp_path) == set()
    assert (outside / "spec.json").read_text() == "keep"


def test_a_session_is_removed_whole_and_a_missing_one_is_fine(tmp_path: Path, state: int) -> None:
    session(tmp_path, "a", ended_at=1_000)
    remove_session(state, "a")
    remove_session(state, "a")
    assert remaining(tmp_path) == set()
