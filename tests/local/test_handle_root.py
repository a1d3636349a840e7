"""A local handle reaches the sandbox it was made for, whatever ``local.root`` is now.

A handle carries the root its sandbox lives under (``Handle.private``); one rebuilt
from a name alone (``private`` None) uses the root configured when it is used.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from managoat_sandbox import config
from managoat_sandbox.errors import NotFound
from managoat_sandbox.providers.local import Local
from managoat_sandbox.types import Handle

from ..conftest import wait_until
from .conftest import agent_pid, process_state


def _in_worker(action: Callable[[], None]) -> None:
    failures: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as error:  # handed back to the test thread
            failures.append(error)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(60)
    assert not worker.is_alive()
    if failures:
        raise failures[0]


def _directly(action: Callable[[], None]) -> None:
    action()


@pytest.mark.parametrize("run", [_directly, _in_worker], ids=["caller", "worker_thread"])
@pytest.mark.parametrize("how", ["create", "create_new", "build_handle"])
def test_destroy_after_the_override_ends_the_sandbox_it_was_made_for(
    local: Local, tmp_path: Path, run: Callable[[Callable[[], None]], None], how: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    with config.override("local", root=str(elsewhere)):
        if how == "build_handle":
            local.create("box")
            handle = local.build_handle("box")
        else:
            handle = getattr(local, how)("box")
        pid = agent_pid(elsewhere, handle)
    assert process_state(pid) != "gone"
    assert local.exec(handle, "echo", ["still here"]).output == b"still here\n"
    assert local.get(handle).raw["agent"] == "running"
    run(lambda: local.destroy(handle))
    assert wait_until(lambda: process_state(pid) in ("gone", "Z"))
    assert not (elsewhere / "box").exists()
    with pytest.raises(NotFound):
        local.get(handle)


def test_a_handle_rebuilt_from_a_name_uses_the_root_configured_now(
    local: Local, root: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    with config.override("local", root=str(elsewhere)):
        made = local.create("box")
    bare = Handle("local", "box")
    assert bare == made
    with pytest.raises(NotFound):
        local.get(bare)
    local.destroy(bare)  # nothing of that name under the configured root: gone is fine
    assert (elsewhere / "box").is_dir()
    with config.override("local", root=str(elsewhere)):
        local.write_file(bare, "/note", b"hi")
        assert local.read_file(made, "/note") == b"hi"
        local.destroy(bare)
    assert not (elsewhere / "box").exists()
    assert not (root / "box").exists()
