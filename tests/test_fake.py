"""The Fake's own promises, its fault hook and its script vocabulary.

The promises: docs/protocols/contract.md#fake-promises.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import managoat_sandbox as sandbox
from managoat_sandbox import config, reasons
from managoat_sandbox.errors import (
    AlreadyExists,
    CommandExited,
    Denied,
    Invalid,
    NotFound,
    RateLimited,
    Unavailable,
)
from managoat_sandbox.frames import Error, Exit, Stderr, Stdout, iter_frames
from managoat_sandbox.retry import transient
from managoat_sandbox.testing import Fake
from managoat_sandbox.testing.mailbox import Mailbox, is_exit, is_stdout
from managoat_sandbox.types import Handle, NetworkPolicy


@pytest.fixture
def fake() -> Any:
    instance = Fake()
    yield instance
    instance.reset()


def test_fresh_creation_refuses_legacy_names_without_changing_their_files(fake: Fake) -> None:
    handle = fake.create("legacy")
    fake.write_file(handle, "/proof", b"original")
    with pytest.raises(AlreadyExists) as caught:
        fake.create_new("legacy")
    assert fake.file("legacy", "/proof") == b"original"
    assert not transient(caught.value)


def test_only_one_concurrent_create_new_wins_and_identity_matches_metadata(fake: Fake) -> None:
    results: list[Any] = []
    barrier = threading.Barrier(8)

    def race() -> None:
        barrier.wait()
        try:
            results.append(fake.create_new("raced"))
        except AlreadyExists as error:
            results.append(error)

    threads = [threading.Thread(target=race) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    winners = [r for r in results if isinstance(r, Handle)]
    assert len(winners) == 1 and len(results) == 8
    assert fake.get(winners[0]).raw == {"name": "raced", "id": winners[0].instance_id}


def test_create_new_after_destroy_is_a_different_incarnation(fake: Fake) -> None:
    first = fake.create_new("again")
    fake.destroy(first)
    second = fake.create_new("again")
    assert first.instance_id and second.instance_id and first.instance_id != second.instance_id


def test_create_new_through_the_facade_validates_its_timeout_and_options(fake: Fake) -> None:
    config.configure(adapters={"fake": fake})
    for bad in (0, -1, 120.5, "10", True, None):
        with pytest.raises(Invalid) as caught:
            sandbox.create_new("fake", "t", timeout=bad)
        assert caught.value.detail == "create_timeout"
    with pytest.raises(TypeError):
        sandbox.create_new("fake", "t", retry=True)
    assert fake.list_all_names() == frozenset()


def test_the_applied_policy_is_recorded_verbatim(fake: Fake) -> None:
    handle = fake.create("policy-check")
    fake.apply_network_policy(handle, NetworkPolicy(allow=[]))
    assert fake.policy("policy-check") == NetworkPolicy(allow=[])


def test_exec_answers_a_dropped_transport_as_the_stream_frame_does(fake: Fake) -> None:
    handle = fake.create("drop")
    with pytest.raises(Unavailable) as caught:
        fake.exec(handle, "emit", ["out:partial", "drop"])
    assert caught.value.detail == reasons.CLOSED_BEFORE_EXIT


def test_exec_folds_the_script_as_spawn_runs_it(fake: Fake) -> None:
    handle = fake.create("fold")
    assert fake.exec(handle, "emit", ["out:a", "exit:2", "out:never", "exit:3"]) == (b"a", 2)
    assert fake.exec(handle, "emit", ["out:a", "stay", "out:never"]) == (b"a", 0)
    assert fake.exec(handle, "emit", ["out:out", "err:noise"]) == (b"out", 0)
    assert fake.exec(handle, "emit", ["out:out", "err:err", "exit:4"], stderr_to_stdout=True) == (
        b"outerr",
        4,
    )


def test_exec_honours_its_deadline_across_sleeps(fake: Fake) -> None:
    handle = fake.create("slow")
    with pytest.raises(Unavailable) as caught:
        fake.exec(handle, "emit", ["out:a", "sleep:5", "exit:0"], timeout=0.05)
    assert caught.value.detail == (reasons.EXEC_TIMEOUT, 0.05)


def test_attach_replays_the_error_verdict_of_a_dropped_session(fake: Fake) -> None:
    handle = fake.create("dropped")
    box = Mailbox()
    command = fake.spawn(handle, "emit", ["out:partial", "drop"], owner=box)
    box.expect(lambda f: isinstance(f, Error) and f.ref == command.ref, 2)
    [session] = fake.list_sessions(handle)
    replay = Mailbox()
    attached = fake.attach(handle, session.id, owner=replay)
    assert replay.expect(is_stdout(attached.ref), 2) == Stdout(attached.ref, b"partial")
    error = replay.expect(lambda f: isinstance(f, Error) and f.ref == attached.ref, 2)
    assert error.reason == Unavailable(reasons.CLOSED_BEFORE_EXIT)
    replay.refute(is_exit(attached.ref), 0.05)


def test_write_file_stores_contents_the_sandbox_can_read_back(fake: Fake) -> None:
    handle = fake.create("files")
    fake.write_file(handle, "/home/sprite/.env", b"A=1\n", mode=0o600)
    assert fake.file("files", "/home/sprite/.env") == b"A=1\n"


def test_missing_sandboxes_and_sessions_are_definitively_not_found(fake: Fake) -> None:
    missing = fake.build_handle("missing")
    for call in (fake.public_url, fake.suspend, fake.resume, fake.get, fake.list_sessions):
        with pytest.raises(NotFound):
            call(missing)
    with pytest.raises(NotFound):
        fake.exec(missing, "emit", [])
    with pytest.raises(NotFound):
        fake.spawn(missing, "emit", [])
    with pytest.raises(NotFound):
        fake.attach(fake.create("exists"), "missing")


def test_a_script_without_a_terminal_auto_exits_and_replays_stderr(fake: Fake) -> None:
    handle = fake.create("auto")
    command = fake.spawn(handle, "emit", ["err:warning"])
    assert command.frames is not None
    assert command.frames.get(timeout=2) == Stderr(command.ref, b"warning")
    assert command.frames.get(timeout=2) == Exit(command.ref, 0)
    [session] = fake.list_sessions(handle)
    attached = fake.attach(handle, session.id)
    assert attached.frames is not None
    assert attached.frames.get(timeout=2) == Stderr(attached.ref, b"warning")
    assert attached.frames.get(timeout=2) == Exit(attached.ref, 0)
    with pytest.raises(CommandExited):
        fake.close_stdin(fake.attach(handle, session.id, stdin=True))


def test_destroy_ends_running_sessions_with_closed_before_exit(fake: Fake) -> None:
    handle = fake.create("doomed")
    box = Mailbox()
    command = fake.spawn(handle, "emit", ["out:ready", "stay"], owner=box, stdin=True)
    box.expect(is_stdout(command.ref), 2)
    fake.destroy(handle)
    error = box.expect(lambda f: isinstance(f, Error), 2)
    assert error.reason == Unavailable(reasons.CLOSED_BEFORE_EXIT)
    fake.stop_command(command)


def test_reset_ends_everything_silently(fake: Fake) -> None:
    handle = fake.create("quiet")
    box = Mailbox()
    command = fake.spawn(handle, "emit", ["out:ready", "stay"], owner=box, stdin=True)
    box.expect(is_stdout(command.ref), 2)
    fake.reset()
    box.refute(lambda f: f.terminal, 0.05)
    assert fake.list_all_names() == frozenset()


def test_write_stdin_through_the_facade_flattens_nested_data(fake: Fake) -> None:
    config.configure(adapters={"fake": fake})
    handle = sandbox.create("fake", "stdin")
    box = Mailbox()
    command = sandbox.spawn(handle, "emit", ["stay"], owner=box, stdin=True)
    sandbox.write_stdin(command, ["in", [b"pu", "t"]])
    assert box.expect(is_stdout(command.ref), 2).data == b"echo:input"
    fake.close_stdin(command)
    box.expect(is_exit(command.ref, 0), 2)


def test_write_to_a_live_script_without_stay_is_accepted_silently(fake: Fake) -> None:
    handle = fake.create("silent")
    box = Mailbox()
    command = fake.spawn(handle, "emit", ["sleep:5"], owner=box, stdin=True)
    fake.write_stdin(command, b"ignored")
    box.refute(is_stdout(command.ref), 0.05)


def test_a_command_without_stdin_refuses_writes_as_invalid(fake: Fake) -> None:
    handle = fake.create("nostdin")
    command = fake.spawn(handle, "emit", ["stay"])
    for call in (lambda: fake.write_stdin(command, b"x"), lambda: fake.close_stdin(command)):
        with pytest.raises(Invalid) as caught:
            call()
        assert caught.value.detail == reasons.STDIN_NOT_OPEN


@pytest.mark.parametrize(
    "arg",
    ["-lc", "echo", "exit:x", "exit:256", "exit:-1", "sleep:nan", "sleep:-1", "sleep:", "warp:9"],
)
def test_unknown_instructions_are_invalid_before_anything_starts(fake: Fake, arg: str) -> None:
    handle = fake.create("bad")
    with pytest.raises(Invalid) as caught:
        fake.spawn(handle, "emit", ["out:first", arg])
    assert caught.value.detail == ("fake_instruction", arg)
    assert fake.list_sessions(handle) == []


def test_fail_next_makes_the_next_calls_raise_the_chosen_error(fake: Fake) -> None:
    handle = fake.create("faulty")
    fake.fail_next("get", RateLimited(3), times=2)
    for _ in range(2):
        with pytest.raises(RateLimited) as caught:
            fake.get(handle)
        assert caught.value.retry_after == 3
    assert fake.get(handle).status == "running"
    fake.fail_next("spawn", Denied("nope"))
    with pytest.raises(Denied):
        fake.spawn(handle, "emit", ["out:x"])
    assert fake.list_sessions(handle) == []


def test_fail_next_refuses_exempt_operations_and_non_taxonomy_errors(fake: Fake) -> None:
    with pytest.raises(ValueError):
        fake.fail_next("build_handle", Unavailable("x"))
    with pytest.raises(ValueError):
        fake.fail_next("stop_command", Unavailable("x"))
    with pytest.raises(TypeError):
        fake.fail_next("get", RuntimeError("x"))  # type: ignore[arg-type]


def test_instances_do_not_share_state() -> None:
    one, two = Fake(), Fake()
    one.create("mine")
    assert two.list_all_names() == frozenset()


def test_new_output_reaches_both_the_original_owner_and_the_attacher(fake: Fake) -> None:
    handle = fake.create("both")
    original = Mailbox()
    command = fake.spawn(handle, "emit", ["out:ready", "stay"], owner=original, stdin=True)
    original.expect(is_stdout(command.ref), 2)
    [session] = fake.list_sessions(handle)
    attacher = Mailbox()
    attached = fake.attach(handle, session.id, owner=attacher, stdin=True)
    attacher.expect(is_stdout(attached.ref), 2)
    fake.write_stdin(attached, b"x")
    assert original.expect(is_stdout(command.ref), 2).data == b"echo:x"
    assert attacher.expect(is_stdout(attached.ref), 2).data == b"echo:x"
    fake.close_stdin(command)
    original.expect(is_exit(command.ref, 0), 2)
    attacher.expect(is_exit(attached.ref, 0), 2)


def test_wrong_argument_types_through_the_facade_are_type_errors(fake: Fake) -> None:
    config.configure(adapters={"fake": fake})
    fake.create("types")
    with pytest.raises(TypeError):
        sandbox.attach(42, "s")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        sandbox.terminate_session(42, "s")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        sandbox.destroy("types")  # type: ignore[arg-type]
    assert fake.file("types", 123) is None  # type: ignore[arg-type]


def test_spawn_and_attach_report_their_session_id(fake: Fake) -> None:
    handle = fake.create("sid")
    command = fake.spawn(handle, "emit", ["out:x"])
    [session] = fake.list_sessions(handle)
    assert command.session_id == session.id
    assert fake.attach(handle, session.id).session_id == session.id


instructions = st.lists(
    st.one_of(
        st.builds(lambda s: f"out:{s}", st.text("abc", min_size=1, max_size=4)),
        st.builds(lambda s: f"err:{s}", st.text("xyz", min_size=1, max_size=4)),
        st.builds(lambda n: f"exit:{n}", st.integers(0, 255)),
        st.just("drop"),
    ),
    max_size=8,
)


def _runs(output: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """Adjacent output of one stream joined: what the contract promises is the bytes of
    each stream in order, not where one frame ends and the next begins."""
    runs: list[tuple[str, bytes]] = []
    for kind, data in output:
        if runs and runs[-1][0] == kind:
            runs[-1] = (kind, runs[-1][1] + data)
        elif data:
            runs.append((kind, data))
    return runs


def _model(script: list[str]) -> tuple[list[tuple[str, bytes]], tuple[str, object]]:
    """What a script must produce: its output up to the first terminal, and that terminal."""
    output: list[tuple[str, bytes]] = []
    for arg in script:
        kind, _, value = arg.partition(":")
        if kind in ("out", "err"):
            output.append((kind, value.encode()))
        elif kind == "exit":
            return _runs(output), ("exit", int(value))
        else:
            return _runs(output), ("error", Unavailable(reasons.CLOSED_BEFORE_EXIT))
    return _runs(output), ("exit", 0)


def _observed(frames: list[Any]) -> tuple[list[tuple[str, bytes]], tuple[str, object]]:
    output = [("out" if isinstance(f, Stdout) else "err", f.data) for f in frames[:-1]]
    last = frames[-1]
    return _runs(output), ("exit", last.code) if isinstance(last, Exit) else ("error", last.reason)


@settings(max_examples=40, deadline=None)
@given(script=instructions)
def test_spawn_attach_and_exec_agree_with_the_script_model(script: list[str]) -> None:
    """Property: for any script, spawn delivers exactly the model's frames with one
    terminal frame last, a later attach replays the same, and exec folds the same."""
    fake = Fake()
    handle = fake.create("model")
    expected = _model(script)
    command = fake.spawn(handle, "emit", script)
    frames = list(iter_frames(command, timeout=2))
    assert _observed(frames) == expected
    [session] = fake.list_sessions(handle)
    replay = fake.attach(handle, session.id)
    assert _observed(list(iter_frames(replay, timeout=2))) == expected
    output, verdict = expected
    if verdict[0] == "error":
        with pytest.raises(Unavailable):
            fake.exec(handle, "emit", script, stderr_to_stdout=True)
    else:
        assert fake.exec(handle, "emit", script, stderr_to_stdout=True) == (
            b"".join(data for _, data in output),
            verdict[1],
        )
    fake.reset()
