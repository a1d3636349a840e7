"""The facade: resolution, tagging, dispatch, optional operations and bad input."""

from __future__ import annotations

import importlib
import importlib.metadata
import pickle
import queue
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox import config, reasons, registry
from managoat_sandbox.contract import Capability
from managoat_sandbox.errors import (
    Invalid,
    NotFound,
    NotSupported,
    Unavailable,
    UnknownProvider,
)
from managoat_sandbox.frames import Exit, Stdout
from managoat_sandbox.testing import Fake
from managoat_sandbox.types import Command, Handle, NetworkPolicy


@pytest.fixture
def fake() -> Fake:
    instance = Fake()
    config.configure(
        adapters={"fake": instance, "sprites": instance, "e2b": instance, "daytona": instance}
    )
    return instance


# -- resolution ---------------------------------------------------------------


def test_an_unknown_provider_names_what_is_configured(fake: Fake) -> None:
    with pytest.raises(
        UnknownProvider,
        match=r"unknown sandbox provider 'modal' — configured: "
        r"\['daytona', 'e2b', 'fake'",
    ):
        sandbox.adapter_for("modal")
    assert issubclass(UnknownProvider, ValueError)


def test_a_non_str_provider_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        sandbox.adapter_for(42)  # type: ignore[arg-type]


def test_the_fake_is_built_in_and_adapters_is_a_read_only_snapshot() -> None:
    assert isinstance(sandbox.adapter_for("fake"), Fake)
    snapshot = sandbox.adapters()
    assert "fake" in snapshot
    with pytest.raises(TypeError):
        snapshot["x"] = Fake()  # type: ignore[index]


def test_a_class_in_the_map_is_instantiated_once_and_dropped_on_reconfigure() -> None:
    config.configure(adapters={"mine": Fake})
    first = sandbox.adapter_for("mine")
    assert sandbox.adapter_for("mine") is first
    config.configure(adapters={"mine": Fake})
    assert sandbox.adapter_for("mine") is not first


def test_the_map_can_change_between_calls() -> None:
    one, two = Fake(), Fake()
    config.configure(adapters={"box": one})
    handle = sandbox.create("box", "a")
    config.configure(adapters={"box": two})
    with pytest.raises(NotFound):
        sandbox.get(handle)


def test_explicit_map_beats_entry_points_which_beat_builtins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from_entry_point = Fake()

    class Entry:
        def __init__(self, name: str) -> None:
            self.name = name

        def load(self) -> Any:
            return from_entry_point

    monkeypatch.setattr(registry, "_entry_points", None)
    monkeypatch.setattr(
        importlib.metadata,
        "entry_points",
        lambda group: (
            [Entry("fake"), Entry("thirdparty")] if group == registry.ENTRY_POINT_GROUP else []
        ),
    )
    assert sandbox.adapter_for("thirdparty") is from_entry_point
    assert sandbox.adapter_for("fake") is from_entry_point
    explicit = Fake()
    config.configure(adapters={"fake": explicit})
    assert sandbox.adapter_for("fake") is explicit
    monkeypatch.setattr(registry, "_entry_points", None)


# -- tagging and dispatch -------------------------------------------------------


@pytest.mark.parametrize("provider", ["sprites", "e2b", "daytona"])
def test_every_operation_round_trips_through_a_fake_registered_under(
    fake: Fake, provider: str
) -> None:
    name = f"{provider}-box"
    assert sandbox.adapter_for(provider) is fake
    assert sandbox.supports(provider, "suspend")
    assert sandbox.build_handle(provider, name) == Handle(provider, name)
    handle = sandbox.create(provider, name)
    assert handle.provider == provider
    assert name in sandbox.list_all_names(provider)
    assert sandbox.supports(handle, Capability.NETWORK_POLICY)
    assert sandbox.get(handle).status == "running"
    assert sandbox.public_url(handle) == f"https://{name}.fake.test"
    sandbox.suspend(handle)
    assert sandbox.get(handle).status == "suspended"
    resumed = sandbox.resume(handle)
    assert resumed.provider == provider and sandbox.get(resumed).status == "running"
    sandbox.write_file(handle, "/f", ["hel", b"lo"], mode=0o600)
    assert fake.file(name, "/f") == b"hello"
    assert sandbox.exec(
        handle, "emit", ["out:out", "err:err", "exit:4"], stderr_to_stdout=True
    ) == (b"out" + b"err", 4)

    command = sandbox.spawn(handle, "script", ["stay"], stdin=True)
    assert command.provider == provider
    assert sandbox.supports(command, "attach")
    sandbox.write_stdin(command, ["in", "put"])
    assert command.frames is not None
    assert command.frames.get(timeout=2) == Stdout(command.ref, b"echo:input")
    sandbox.close_stdin(command)
    assert command.frames.get(timeout=2) == Exit(command.ref, 0)
    sandbox.stop_command(command)

    runner = sandbox.spawn(handle, "runner", ["stay"], stdin=True)
    [session] = [s for s in sandbox.list_sessions(handle) if s.command == "runner stay"]
    attached = sandbox.attach(handle, session.id)
    assert attached.ref != runner.ref and attached.provider == provider
    sandbox.close_stdin(runner)
    assert list(sandbox.iter_frames(runner, timeout=2)) == [Exit(runner.ref, 0)]
    assert list(sandbox.iter_frames(attached, timeout=2)) == [Exit(attached.ref, 0)]

    sandbox.apply_network_policy(handle, NetworkPolicy(allow=["hex.pm"]))
    assert fake.policy(name) == NetworkPolicy(allow=("hex.pm",))
    with pytest.raises(NotSupported):
        sandbox.create_checkpoint(handle, comment="turn")
    with pytest.raises(NotSupported):
        sandbox.restore_checkpoint(handle, "checkpoint-1")
    assert sandbox.host_path(handle, "/home/sprite") == "/home/sprite"
    sandbox.terminate_session(handle, session.id)
    sandbox.destroy(handle)
    with pytest.raises(NotFound):
        sandbox.get(handle)


ENTRY_POINTS: dict[str, Callable[[Handle, Command], Any]] = {
    "supports(provider)": lambda h, c: sandbox.supports("modal", "suspend"),
    "supports(handle)": lambda h, c: sandbox.supports(h, "suspend"),
    "supports(command)": lambda h, c: sandbox.supports(c, "suspend"),
    "capabilities": lambda h, c: sandbox.capabilities("modal"),
    "adapter_for": lambda h, c: sandbox.adapter_for("modal"),
    "build_handle": lambda h, c: sandbox.build_handle("modal", "x"),
    "create": lambda h, c: sandbox.create("modal", "x"),
    "create_new": lambda h, c: sandbox.create_new("modal", "x"),
    "list_all_names": lambda h, c: sandbox.list_all_names("modal"),
    "get": lambda h, c: sandbox.get(h),
    "destroy": lambda h, c: sandbox.destroy(h),
    "destroy_once": lambda h, c: sandbox.destroy_once(h),
    "public_url": lambda h, c: sandbox.public_url(h),
    "suspend": lambda h, c: sandbox.suspend(h),
    "resume": lambda h, c: sandbox.resume(h),
    "write_file": lambda h, c: sandbox.write_file(h, "/x", b""),
    "exec": lambda h, c: sandbox.exec(h, "emit", []),
    "spawn": lambda h, c: sandbox.spawn(h, "emit", []),
    "write_stdin": lambda h, c: sandbox.write_stdin(c, b"x"),
    "close_stdin": lambda h, c: sandbox.close_stdin(c),
    "stop_command": lambda h, c: sandbox.stop_command(c),
    "list_sessions": lambda h, c: sandbox.list_sessions(h),
    "attach": lambda h, c: sandbox.attach(h, "s"),
    "terminate_session": lambda h, c: sandbox.terminate_session(h, "s"),
    "apply_network_policy": lambda h, c: sandbox.apply_network_policy(h, NetworkPolicy([])),
    "create_checkpoint": lambda h, c: sandbox.create_checkpoint(h),
    "create_checkpoint_once": lambda h, c: sandbox.create_checkpoint_once(h, operation_id="o"),
    "restore_checkpoint": lambda h, c: sandbox.restore_checkpoint(h, "cp"),
    "host_path": lambda h, c: sandbox.host_path(h, "/x"),
}


@pytest.mark.parametrize("entry_point", sorted(ENTRY_POINTS))
def test_every_entry_point_rejects_an_unknown_provider(entry_point: str) -> None:
    handle, command = Handle("modal", "x"), Command("modal", "ref")
    with pytest.raises(UnknownProvider, match="unknown sandbox provider 'modal'"):
        ENTRY_POINTS[entry_point](handle, command)


# -- optional operations ----------------------------------------------------------


class Legacy(Fake):
    """An older adapter: terminate_session without force, and no create_new."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def capabilities(self) -> frozenset[str]:
        return super().capabilities() - {Capability.FORCE_TERMINATE_SESSION}

    def terminate_session(
        self, handle: Handle, session_id: str, *, timeout: float = 10.0, mode: str = "graceful"
    ) -> None:
        self.calls.append(mode)


def test_force_mode_refuses_a_legacy_adapter_before_it_can_ignore_the_option() -> None:
    legacy = Legacy()
    config.configure(adapters={"legacy": legacy})
    handle = sandbox.create("legacy", "w")
    with pytest.raises(NotSupported):
        sandbox.terminate_session(handle, "s1", mode="force")
    assert legacy.calls == []
    sandbox.terminate_session(handle, "s1")
    assert legacy.calls == ["graceful"]


@pytest.mark.parametrize(
    "session_id,kwargs",
    [
        ("", {}),
        ("../other", {}),
        ("a/b", {}),
        ("a?x=1", {}),
        ("a" * 257, {}),
        (None, {}),
        ("ok", {"timeout": 0}),
        ("ok", {"timeout": 30.001}),
        ("ok", {"timeout": True}),
        ("ok", {"timeout": "1"}),
        ("ok", {"mode": "unknown"}),
        ("ok", {"timeout": float("nan")}),
    ],
)
def test_terminate_session_validates_before_checking_capabilities(
    session_id: Any, kwargs: dict[str, Any]
) -> None:
    class NoTerminate(Fake):
        def capabilities(self) -> frozenset[str]:
            return frozenset()

    config.configure(adapters={"plain": NoTerminate()})
    with pytest.raises(Invalid) as caught:
        sandbox.terminate_session(Handle("plain", "x"), session_id, **kwargs)
    assert caught.value.detail == reasons.TERMINATION_REQUEST


@pytest.mark.parametrize(
    "session_id,kwargs,reason",
    [
        ("../other", {}, "session_id must be 1-256 characters of [A-Za-z0-9_-]"),
        ("ok", {"timeout": 100}, "timeout must be a number of seconds from 0.001 to 30, got 100"),
        ("ok", {"timeout": "1"}, "timeout must be a number of seconds from 0.001 to 30, got str"),
        ("ok", {"mode": "soft"}, "mode must be one of graceful, force"),
    ],
)
def test_a_refused_termination_says_which_argument_and_what_it_must_be(
    fake: Fake, session_id: str, kwargs: dict[str, Any], reason: str
) -> None:
    with pytest.raises(Invalid) as caught:
        sandbox.terminate_session(Handle("fake", "x"), session_id, **kwargs)
    error = caught.value
    assert str(error) == f"'termination_request': {reason}"
    assert error.detail == reasons.TERMINATION_REQUEST
    assert error == Invalid(reasons.TERMINATION_REQUEST)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.detail, copy.message) == (reasons.TERMINATION_REQUEST, reason)


def test_terminate_session_without_the_capability_is_not_supported_and_never_destroys() -> None:
    class NoTerminate(Fake):
        def capabilities(self) -> frozenset[str]:
            return frozenset({Capability.ATTACH})

    adapter = NoTerminate()
    config.configure(adapters={"plain": adapter})
    handle = sandbox.create("plain", "keep")
    with pytest.raises(NotSupported):
        sandbox.terminate_session(handle, "s1")
    assert sandbox.get(handle).status == "running"


def test_create_new_without_the_operation_never_falls_back_to_create() -> None:
    class NoCreateNew(Fake):
        create_new = sandbox.Adapter.create_new

    adapter = NoCreateNew()
    config.configure(adapters={"plain": adapter})
    with pytest.raises(NotSupported):
        sandbox.create_new("plain", "fresh")
    assert "fresh" not in adapter.list_all_names()
    with pytest.raises(NotSupported):
        sandbox.destroy_once(Handle("plain", "fresh"))
    with pytest.raises(NotSupported):
        sandbox.create_checkpoint_once(Handle("plain", "fresh"), operation_id="op-1")


def test_public_url_none_means_no_such_concept(fake: Fake) -> None:
    class NoUrl(Fake):
        def capabilities(self) -> frozenset[str]:
            return super().capabilities() - {Capability.PUBLIC_URL}

        def public_url(self, handle: Handle) -> str | None:
            return None

    config.configure(adapters={"nourl": NoUrl()})
    assert sandbox.public_url(sandbox.create("nourl", "n")) is None


def test_supports_rejects_an_unknown_capability(fake: Fake) -> None:
    with pytest.raises(Invalid) as caught:
        sandbox.supports("fake", "teleport")
    assert caught.value.detail[0] == "capability" and "teleport" in caught.value.detail[1]
    with pytest.raises(TypeError):
        sandbox.supports("fake", 42)  # type: ignore[arg-type]


def test_spawn_refuses_tty_and_detachable_without_the_capabilities(fake: Fake) -> None:
    handle = sandbox.create("fake", "caps")
    with pytest.raises(NotSupported):
        sandbox.spawn(handle, "emit", ["out:x"], tty=True)

    class NoAttach(Fake):
        def capabilities(self) -> frozenset[str]:
            return frozenset()

    config.configure(adapters={"plain": NoAttach()})
    with pytest.raises(NotSupported):
        sandbox.spawn(sandbox.create("plain", "p"), "emit", [], detachable=True)


# -- bad input -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "a\x00b", "x" * 257])
def test_bad_sandbox_names_are_invalid_before_anything_starts(fake: Fake, name: Any) -> None:
    with pytest.raises(Invalid):
        sandbox.create("fake", name)
    with pytest.raises(Invalid):
        sandbox.create_new("fake", name)
    assert fake.list_all_names() == frozenset()


@pytest.mark.parametrize("name", [None, 42, b"box"])
def test_a_sandbox_name_of_the_wrong_type_is_a_type_error(fake: Fake, name: Any) -> None:
    """As the README says of every argument: a wrong type is TypeError, not Invalid."""
    for operation in (sandbox.create, sandbox.create_new, sandbox.build_handle):
        with pytest.raises(TypeError):
            operation("fake", name)
    assert fake.list_all_names() == frozenset()


@pytest.mark.parametrize(
    ("path", "what"),
    [
        ("", "empty"),
        ("app/.env", "absolute"),
        ("~/.env", "absolute"),
        ("/app/", "file"),
        ("/", "file"),
        ("/app/../etc/passwd", ". or .."),
        ("/app/./.env", ". or .."),
        ("/app/\x00.env", "NUL"),
        ("/" + "a" * 4096, "4096 bytes"),
        ("/\udc80", "UTF-8"),
    ],
)
def test_unusable_write_paths_are_invalid_before_dispatch(
    fake: Fake, monkeypatch: pytest.MonkeyPatch, path: str, what: str
) -> None:
    handle = sandbox.create("e2b", "paths")
    dispatched: list[str] = []
    monkeypatch.setattr(fake, "write_file", lambda h, p, d, *, mode=None: dispatched.append(p))
    with pytest.raises(Invalid) as caught:
        sandbox.write_file(handle, path, b"x")
    kind, message = caught.value.detail
    assert kind == "path" and what in message
    assert dispatched == []


def test_a_usable_write_path_and_mode_reach_the_adapter_as_given(fake: Fake) -> None:
    handle = sandbox.create("daytona", "paths")
    sandbox.write_file(handle, "/app//.env", b"x", mode=0)
    assert fake.file("paths", "/app//.env") == b"x"


@pytest.mark.parametrize("mode", [-1, 0o10000])
def test_an_out_of_range_mode_is_invalid_before_dispatch(fake: Fake, mode: int) -> None:
    handle = sandbox.create("sprites", "modes")
    with pytest.raises(Invalid) as caught:
        sandbox.write_file(handle, "/f", b"x", mode=mode)
    assert caught.value.detail[0] == "mode"
    assert fake.file("modes", "/f") is None


@pytest.mark.parametrize(
    "call",
    [
        lambda h: sandbox.exec(h, "emit", "out:x"),
        lambda h: sandbox.exec(h, "emit", [1]),
        lambda h: sandbox.exec(h, 7, []),
        lambda h: sandbox.exec(h, "emit", [], env={"A": 1}),
        lambda h: sandbox.exec(h, "emit", [], env=[("A", "1")]),
        lambda h: sandbox.exec(h, "emit", [], timeout="5"),
        lambda h: sandbox.exec(h, "emit", [], timeout=True),
        lambda h: sandbox.exec(h, "emit", [], stderr_to_stdout="yes"),
        lambda h: sandbox.spawn(h, "emit", [], owner=42),
        lambda h: sandbox.spawn(h, "emit", [], stdin="yes"),
        lambda h: sandbox.write_file(h, "/x", 3.5),
        lambda h: sandbox.write_file(h, b"/x", b""),
        lambda h: sandbox.write_file(h, "/x", b"", mode="600"),
        lambda h: sandbox.write_file(h, "/x", b"", mode=True),
        lambda h: sandbox.apply_network_policy(h, ["a.com"]),
        lambda h: sandbox.get("not a handle"),
        lambda h: sandbox.write_stdin("not a command", b""),
        lambda h: NetworkPolicy(allow="a.com"),
        lambda h: NetworkPolicy(allow=[1]),
    ],
)
def test_wrong_argument_types_are_type_errors(fake: Fake, call: Callable[[Handle], Any]) -> None:
    handle = sandbox.create("fake", "types")
    with pytest.raises(TypeError):
        call(handle)
    assert fake.list_sessions(handle) == []


def test_nan_timeout_is_invalid(fake: Fake) -> None:
    with pytest.raises(Invalid) as caught:
        sandbox.exec(sandbox.create("fake", "nan"), "emit", [], timeout=float("nan"))
    assert caught.value.detail == (
        "timeout",
        "must be a number of seconds from 0 to 9223372036, or None or inf for no limit, got nan",
    )


def test_an_unknown_fake_instruction_is_invalid_before_anything_starts(fake: Fake) -> None:
    handle = sandbox.create("fake", "script")
    for call in (sandbox.exec, sandbox.spawn):
        with pytest.raises(Invalid) as caught:
            call(handle, "bash", ["-lc", "echo hi"])
        assert caught.value.detail == ("fake_instruction", "-lc")
    assert fake.list_sessions(handle) == []


def test_a_bad_session_id_for_attach_is_invalid(fake: Fake) -> None:
    handle = sandbox.create("fake", "attach")
    with pytest.raises(Invalid):
        sandbox.attach(handle, "../x")


def test_zero_timeout_exec_raises_at_once_and_dispatches_nothing(fake: Fake) -> None:
    handle = sandbox.create("fake", "zero")
    fake.fail_next("exec", Unavailable("would have been called"))
    with pytest.raises(Unavailable) as caught:
        sandbox.exec(handle, "emit", ["out:x"], timeout=0)
    assert caught.value.detail == (reasons.EXEC_TIMEOUT, 0)
    with pytest.raises(Unavailable) as caught:
        sandbox.exec(handle, "emit", ["out:x"])
    assert caught.value.detail == "would have been called"


def test_iter_frames_rules(fake: Fake) -> None:
    handle = sandbox.create("fake", "iter")
    seen: list[Any] = []
    command = sandbox.spawn(handle, "emit", ["out:x"], owner=seen.append)
    with pytest.raises(Invalid):
        list(sandbox.iter_frames(command))
    frames: queue.Queue[Any] = queue.Queue()
    stay = sandbox.spawn(handle, "emit", ["stay"], owner=frames, stdin=True)
    assert stay.frames is frames
    with pytest.raises(TimeoutError):
        list(sandbox.iter_frames(frames, timeout=0.05))
    sandbox.close_stdin(stay)
    assert list(sandbox.iter_frames(stay, timeout=2)) == [Exit(stay.ref, 0)]


def test_no_submodule_shadows_a_facade_function() -> None:
    """Importing a submodule sets it as an attribute of the package; none may share a
    name with a facade function (``managoat_sandbox.adapters`` once did)."""
    importlib.import_module("managoat_sandbox.providers.local")
    package = Path(sandbox.__file__).parent
    for name in sandbox.facade.__all__:
        assert not (package / name).exists() and not (package / f"{name}.py").exists(), name
        assert callable(getattr(sandbox, name)), name
