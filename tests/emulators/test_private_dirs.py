"""The directories an emulator keeps its sandboxes in are closed to other users.

Each emulator makes its workdir (a temporary directory, unless one is given)
and, under it, the directories that lead to each sandbox's files: every one
of them is ``0700``, whatever the umask, so no other local user can reach a
sandbox's files — a setuid file a command made there among them. A workdir
the caller gives is left as it is; what the emulator makes inside it is
``0700`` all the same.

The umask is set to the common ``022`` while a test runs, under which a
directory made with the default mode would be open to everyone.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import requests

from managoat_sandbox.emulators._server import Emulator
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.emulators.sprites import SpritesEmulator

pytestmark = pytest.mark.timeout(60)

KEY = "private-dirs-key"
BEARER = {"Authorization": f"Bearer {KEY}"}
E = TypeVar("E", bound=Emulator)


@pytest.fixture(autouse=True)
def common_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def sprite(emulator: SpritesEmulator) -> Path:
    answer = requests.post(
        f"{emulator.base_url}/v1/sprites", json={"name": "one"}, headers=BEARER, timeout=30
    )
    assert answer.status_code == 201, answer.text
    found = emulator.state.get("one")
    assert found is not None
    return found.box.fs


def e2b_sandbox(emulator: E2BEmulator) -> Path:
    answer = requests.post(
        f"{emulator.base_url}/v2/sandboxes",
        json={"templateID": "base"},
        headers={"X-API-Key": KEY},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    return emulator.world.table(answer.json()["sandboxID"]).sandbox.box.fs


def daytona_sandbox(emulator: DaytonaEmulator) -> Path:
    created = requests.post(
        f"{emulator.api_url}/sandbox", json={"name": "one"}, headers=BEARER, timeout=30
    )
    assert created.status_code == 200, created.text
    sandbox = created.json()
    # The box is made on the sandbox's first toolbox call.
    listed = requests.get(
        f"{sandbox['toolboxProxyUrl'].rstrip('/')}/{sandbox['id']}/files",
        params={"path": "/"},
        headers=BEARER,
        timeout=30,
    )
    assert listed.status_code == 200, listed.text
    return emulator.sandbox_dir(sandbox["id"]) / "fs"


def between(workdir: Path, files: Path) -> list[Path]:
    """The workdir and every directory under it that leads to ``files``."""
    assert files.is_relative_to(workdir), (files, workdir)
    return [workdir, *(workdir / part for part in _prefixes(files.parent.relative_to(workdir)))]


def _prefixes(relative: Path) -> list[Path]:
    return [Path(*relative.parts[: count + 1]) for count in range(len(relative.parts))]


def open_to_others(directories: list[Path]) -> dict[str, str]:
    """The directories among ``directories`` a group or other user may use, with modes."""
    modes = {str(d): stat.S_IMODE(d.stat().st_mode) for d in directories}
    return {d: f"{mode:04o}" for d, mode in modes.items() if mode & 0o077}


def check(emulator_type: Callable[..., E], make: Callable[[E], Path], given: Path) -> None:
    """A sandbox made (by ``make``, which answers the host directory holding its files)
    under a temporary workdir, then one under the workdir ``given`` (an existing
    ``0755`` directory): nothing on the way is open to others, and the given workdir
    keeps its mode."""
    emulator = emulator_type(credential=KEY)
    with emulator:
        chain = between(emulator.workdir, make(emulator))
        assert len(chain) >= 3, chain
        assert open_to_others(chain) == {}
    given.mkdir(mode=0o755)
    given.chmod(0o755)
    emulator = emulator_type(credential=KEY, workdir=given)
    with emulator:
        chain = between(given, make(emulator))
        assert open_to_others(chain[1:]) == {}
        assert stat.S_IMODE(given.stat().st_mode) == 0o755


def test_no_sprites_directory_on_the_way_to_a_sprites_files_is_open_to_others(
    tmp_path: Path,
) -> None:
    check(SpritesEmulator, sprite, tmp_path / "given")


def test_no_e2b_directory_on_the_way_to_a_sandboxs_files_is_open_to_others(
    tmp_path: Path,
) -> None:
    check(E2BEmulator, e2b_sandbox, tmp_path / "given")


def test_no_daytona_directory_on_the_way_to_a_sandboxs_files_is_open_to_others(
    tmp_path: Path,
) -> None:
    check(DaytonaEmulator, daytona_sandbox, tmp_path / "given")
