"""Fake termination: confirmed kills, exit 137 once, neighbours untouched.

The rules: docs/protocols/contract.md#fake-termination.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox import config, reasons
from managoat_sandbox.errors import CommandExited, DeadlineExpired, Invalid, Unavailable
from managoat_sandbox.testing import Fake
from managoat_sandbox.testing.mailbox import Mailbox, is_exit, is_stdout
from managoat_sandbox.types import Command, Handle


@pytest.fixture
def fake() -> Iterator[Fake]:
    instance = Fake()
    instance.create("worker")
    yield instance
    instance.reset()


def start(fake: Fake, name: str) -> tuple[Command, str, Mailbox]:
    box = Mailbox()
    handle = fake.build_handle("worker")
    command = fake.spawn(handle, name, ["out:ready", "stay"], owner=box, stdin=True)
    box.expect(is_stdout(command.ref), 1)
    [session] = [s for s in fake.list_sessions(handle) if s.command == f"{name} out:ready stay"]
    return command, session.id, box


def alive(fake: Fake, command: Command) -> bool:
    thread = command.private.session.thread
    return thread is not None and thread.is_alive()


def test_local_detach_leaves_the_session_alive_and_termination_stops_only_it(fake: Fake) -> None:
    worker = fake.build_handle("worker")
    victim, victim_id, victim_box = start(fake, "victim")
    neighbor, _, neighbor_box = start(fake, "neighbor")
    fake.stop_command(victim)
    fake.stop_command(victim)
    assert alive(fake, victim)
    with pytest.raises(CommandExited):
        fake.write_stdin(victim, b"x")
    with pytest.raises(CommandExited):
        fake.close_stdin(victim)
    attacher = Mailbox()
    attached = fake.attach(worker, victim_id, owner=attacher)
    assert attacher.expect(is_stdout(attached.ref), 1).data == b"ready"
    fake.terminate_session(worker, victim_id)
    attacher.expect(is_exit(attached.ref, 137), 1)
    assert not alive(fake, victim)
    victim_box.refute(is_exit(victim.ref), 0.05)
    fake.write_stdin(neighbor, b"still here")
    assert neighbor_box.expect(is_stdout(neighbor.ref), 1).data == b"echo:still here"


def test_an_absent_session_on_another_sandbox_cannot_stop_the_owned_one(fake: Fake) -> None:
    victim, victim_id, _ = start(fake, "victim")
    other = fake.create("other")
    fake.terminate_session(other, victim_id)
    assert alive(fake, victim)
    with pytest.raises(Unavailable) as unconfirmed:
        fake.terminate_session(other, victim_id, mode="force")
    assert unconfirmed.value.detail == reasons.TERMINATION_UNCONFIRMED
    assert alive(fake, victim)
    fake.terminate_session(fake.build_handle("worker"), "absent")
    config.configure(adapters={"fake": fake})
    with pytest.raises(Invalid) as caught:
        sandbox.terminate_session(fake.build_handle("worker"), "../id")
    assert caught.value.detail == reasons.TERMINATION_REQUEST


def test_concurrent_terminations_emit_one_terminal_frame(fake: Fake) -> None:
    worker = fake.build_handle("worker")
    command, session_id, box = start(fake, "victim")
    errors: list[BaseException] = []

    def terminate() -> None:
        try:
            fake.terminate_session(worker, session_id)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=terminate) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert errors == []
    box.expect(is_exit(command.ref, 137), 1)
    box.refute(is_exit(command.ref), 0.05)
    fake.terminate_session(worker, session_id)


def test_force_confirms_a_known_process_and_an_absent_one_is_unconfirmed(fake: Fake) -> None:
    worker = fake.build_handle("worker")
    command, session_id, box = start(fake, "victim")
    fake.terminate_session(worker, session_id, mode="force")
    assert not alive(fake, command)
    box.expect(is_exit(command.ref, 137), 1)
    fake.terminate_session(worker, session_id, mode="force")
    with pytest.raises(Unavailable) as caught:
        fake.terminate_session(worker, "absent", mode="force")
    assert caught.value == Unavailable(reasons.TERMINATION_UNCONFIRMED)


def test_completed_results_are_preserved_and_destroyed_handles_can_still_detach(
    fake: Fake,
) -> None:
    worker: Handle = fake.build_handle("worker")
    command, session_id, box = start(fake, "done")
    fake.close_stdin(command)
    box.expect(is_exit(command.ref, 0), 1)
    fake.terminate_session(worker, session_id)
    box.refute(is_exit(command.ref, 137), 0.05)
    replay = Mailbox()
    attached = fake.attach(worker, session_id, owner=replay)
    replay.expect(is_exit(attached.ref, 0), 1)
    fake.destroy(worker)
    fake.stop_command(command)
    fake.terminate_session(worker, session_id)
    with pytest.raises(Unavailable) as caught:
        fake.terminate_session(worker, session_id, mode="force")
    assert caught.value.detail == reasons.TERMINATION_UNCONFIRMED


def test_a_later_attach_replays_exit_137(fake: Fake) -> None:
    worker = fake.build_handle("worker")
    _, session_id, _ = start(fake, "victim")
    fake.terminate_session(worker, session_id, timeout=0.5)
    replay = Mailbox()
    attached = fake.attach(worker, session_id, owner=replay)
    assert replay.expect(is_stdout(attached.ref), 1).data == b"ready"
    replay.expect(is_exit(attached.ref, 137), 1)


def test_a_process_deaf_to_a_graceful_termination_is_deadline_expired_and_force_ends_it(
    fake: Fake,
) -> None:
    worker = fake.build_handle("worker")
    box = Mailbox()
    command = fake.spawn(worker, "deaf", ["out:ready", "deaf:30"], owner=box)
    box.expect(is_stdout(command.ref), 1)
    [session] = fake.list_sessions(worker)
    with pytest.raises(DeadlineExpired) as caught:
        fake.terminate_session(worker, session.id, timeout=0.05)
    assert caught.value.detail == reasons.TERMINATION_TIMEOUT
    assert alive(fake, command)
    fake.terminate_session(worker, session.id, mode="force")
    box.expect(is_exit(command.ref, 137), 1)


def test_a_graceful_termination_takes_effect_when_a_deaf_pause_ends(fake: Fake) -> None:
    worker = fake.build_handle("worker")
    box = Mailbox()
    command = fake.spawn(worker, "deaf", ["out:ready", "deaf:0.2", "out:never"], owner=box)
    box.expect(is_stdout(command.ref), 1)
    [session] = fake.list_sessions(worker)
    with pytest.raises(DeadlineExpired):
        fake.terminate_session(worker, session.id, timeout=0.01)
    box.expect(is_exit(command.ref, 143), 5)
    assert b"never" not in b"".join(getattr(f, "data", b"") for f in box.history(command.ref))
