"""Which isolation a sandbox gets, how it says so, and what holds even without isolation.

The unisolated tests run commands on the host for real: they read only their own
processes and touch nothing outside the test's temporary root.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings as warnings_module
from collections.abc import Iterator
from pathlib import Path

import pytest

from managoat_sandbox import IsolationWarning, cli, config
from managoat_sandbox._engine import isolation, process_tree
from managoat_sandbox.errors import Invalid, NotSupported, Unavailable
from managoat_sandbox.providers.local import Local, mode
from managoat_sandbox.types import NetworkPolicy

from ..conftest import wait_until
from .conftest import agent_pid, requires_isolation

SECRET = "canary-caller-secret-9c1e"


@pytest.fixture
def unavailable(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Pretend this host cannot isolate, for the reason yielded."""
    reason = "unprivileged user namespaces are disabled (test)"
    monkeypatch.setattr(isolation, "_cached", isolation.Support(None, reason))
    monkeypatch.setattr(mode, "_warned", threading.Event())
    yield reason


@pytest.fixture
def unisolated(local: Local) -> Local:
    config.configure("local", isolation="off")
    return local


def test_require_refuses_naming_what_is_missing_and_creates_nothing(
    local: Local, unavailable: str
) -> None:
    config.configure("local", isolation="require")
    with pytest.raises(Unavailable) as caught:
        local.create("strict")
    assert caught.value.detail == ("isolation_unavailable", unavailable)
    assert local.list_all_names() == frozenset()


def test_auto_degrades_with_one_warning_and_drops_network_policy(
    local: Local, unavailable: str, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="managoat_sandbox"),
        pytest.warns(IsolationWarning),
    ):
        first = local.create("one")
        local.create("two")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and unavailable in warnings[0].getMessage()
    assert "network_policy" not in local.capabilities()
    assert "isolation" not in local.capabilities()
    raw = local.get(first).raw
    assert raw["isolation"] == "none"
    assert unavailable in raw["isolation_note"]
    with pytest.raises(NotSupported):
        local.apply_network_policy(first, NetworkPolicy.deny_all())


def test_a_fallback_to_no_isolation_is_a_warning_shown_by_default(
    local: Local, unavailable: str
) -> None:
    with warnings_module.catch_warnings(record=True) as caught:
        warnings_module.resetwarnings()  # Python's own defaults: what a user's script gets
        warnings_module.simplefilter("default")
        local.create("seen")
    shown = [w for w in caught if issubclass(w.category, IsolationWarning)]
    assert len(shown) == 1
    assert unavailable in str(shown[0].message)


def test_the_cli_says_when_a_sandbox_is_unisolated(
    root: Path, unavailable: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["-p", "local", "create", "cli-box"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "cli-box\n"
    assert captured.err.startswith("managoat-sandbox: warning: local sandboxes run WITHOUT")
    assert unavailable in captured.err
    Local().destroy(Local().build_handle("cli-box"))


@requires_isolation
def test_require_refuses_a_sandbox_created_unisolated(local: Local) -> None:
    config.configure("local", isolation="off")
    handle = local.create("loose")
    config.configure("local", isolation="require")
    with pytest.raises(Unavailable) as adopting:
        local.create("loose")
    assert adopting.value.detail[0] == "isolation_unavailable"
    assert "without isolation" in adopting.value.detail[1]
    with pytest.raises(Unavailable):
        local.exec(handle, "cat", ["/proc/self/status"])
    with pytest.raises(Unavailable):
        local.spawn(handle, "true", [])
    local.destroy(handle)  # and it can still be removed
    assert local.list_all_names() == frozenset()


def test_a_bad_mode_is_invalid(local: Local, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(Invalid):
        config.configure("local", isolation="sometimes")
    monkeypatch.setenv("MANAGOAT_SANDBOX_LOCAL_ISOLATION", "sometimes")
    with pytest.raises(Invalid) as caught:
        local.create("box")
    assert caught.value.detail == ("config", "local", "isolation")


@requires_isolation
def test_an_isolated_sandbox_never_runs_unisolated(
    local: Local, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = local.create("kept")
    assert local.get(handle).raw["isolation"] == "namespaces"
    os.kill(agent_pid(root, handle), 9)
    assert wait_until(lambda: local.get(handle).raw["agent"] == "stopped")
    monkeypatch.setattr(isolation, "_cached", isolation.Support(None, "gone (test)"))
    with pytest.raises(Unavailable) as caught:
        local.exec(handle, "true")
    assert "isolation is unavailable: gone (test)" in str(caught.value.detail)


def test_unisolated_commands_get_a_scrubbed_environment(
    unisolated: Local, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAYTONA_API_KEY", SECRET)
    handle = unisolated.create("plain")
    assert unisolated.get(handle).raw["isolation"] == "none"
    output = unisolated.exec(handle, "env").output.decode()
    assert SECRET not in output
    agent_env = Path(f"/proc/{agent_pid(root, handle)}/environ").read_bytes().split(b"\0")
    assert sorted(e.split(b"=")[0] for e in agent_env if e) == [b"LANG", b"PATH"]


def test_unisolated_state_files_a_command_replaces_cannot_hang_the_caller(
    unisolated: Local, root: Path
) -> None:
    handle = unisolated.create("plain")
    command = unisolated.spawn(handle, "sleep", ["0"])
    assert command.session_id is not None
    assert wait_until(lambda: unisolated.exec(handle, "true").exit_code == 0)
    session = root / "plain" / "state" / "sessions" / command.session_id
    for name in ("journal", "exit.json", "spec.json"):
        (session / name).unlink()
        os.mkfifo(session / name)
    done = threading.Event()

    def read_back() -> None:
        try:
            unisolated.list_sessions(handle)
            attached = unisolated.attach(handle, command.session_id or "")
            assert attached.frames is not None
            attached.frames.get(timeout=10)
        except Exception:
            pass
        finally:
            done.set()

    threading.Thread(target=read_back, daemon=True).start()
    assert done.wait(20)


def test_unisolated_destroy_still_kills_detached_descendants(unisolated: Local, root: Path) -> None:
    handle = unisolated.create("plain")
    unisolated.spawn(handle, "bash", ["-c", "setsid sleep 300 & (sleep 300 &); exec sleep 300"])
    agent = agent_pid(root, handle)
    assert wait_until(lambda: len(process_tree.descendants(agent)) >= 3)
    descendants = process_tree.descendants(agent)
    unisolated.destroy(handle)
    assert wait_until(lambda: not [p for p in descendants if Path(f"/proc/{p}").exists()])
