"""The fault matrix through the Sprites emulator: each fault yields the right taxonomy
error, exactly one terminal frame, no hang past the deadline and no leaked thread."""

from __future__ import annotations

import itertools
import logging
import queue
import time
from collections.abc import Callable
from typing import Any

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox import config, reasons
from managoat_sandbox.emulators.sprites import SpritesEmulator
from managoat_sandbox.errors import (
    AlreadyExists,
    CommandExited,
    DeadlineExpired,
    Denied,
    Invalid,
    NotFound,
    RateLimited,
    SandboxError,
    Truncated,
    Unavailable,
)
from managoat_sandbox.frames import Error, Exit, Frame, Stdout
from managoat_sandbox.providers.sprites import Sprites
from managoat_sandbox.types import Command, Handle

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("no_leaked_threads")]

_names = itertools.count(1)
STAY = ("bash", ["-c", "echo ready; exec cat"])


@pytest.fixture
def box(sprites: Sprites) -> Handle:
    handle = sprites.create(f"fault-{next(_names)}")
    yield handle
    sprites.destroy(handle)


def _drain(command: Command, timeout: float = 10) -> list[Frame]:
    """Every frame up to and including the terminal one, then proof nothing follows."""
    assert command.frames is not None
    frames = []
    while not frames or not frames[-1].terminal:
        frames.append(command.frames.get(timeout=timeout))
    with pytest.raises(queue.Empty):
        command.frames.get(timeout=0.05)
    return frames


def _within(seconds: float, call: Callable[[], Any]) -> SandboxError:
    """Run ``call``, which must raise a taxonomy error within ``seconds``."""
    started = time.monotonic()
    with pytest.raises(SandboxError) as raised:
        call()
    assert time.monotonic() - started < seconds, "the failure took longer than its bound"
    return raised.value


# -- streaming faults -----------------------------------------------------------------


@pytest.mark.parametrize("close_frame", [False, True], ids=["tcp-abort", "close-1000"])
def test_socket_dropped_before_exit(
    sprites: Sprites, emu: SpritesEmulator, box: Handle, close_frame: bool
) -> None:
    emu.drop_exec(after_frames=1, close_frame=close_frame)
    command = sprites.spawn(box, "bash", ["-c", "echo partial; sleep 5; echo never"])
    frames = _drain(command)
    assert frames == [
        Stdout(command.ref, b"partial\n"),
        Error(command.ref, Unavailable(reasons.CLOSED_BEFORE_EXIT)),
    ]


def test_exec_of_a_dropped_stream_raises_and_drops_partial_output(
    sprites: Sprites, emu: SpritesEmulator, box: Handle
) -> None:
    emu.drop_exec(after_frames=1)
    error = _within(10, lambda: sprites.exec(box, "bash", ["-c", "echo partial; sleep 5"]))
    assert error == Unavailable(reasons.CLOSED_BEFORE_EXIT)


@pytest.mark.parametrize("code", [0, 1, 127, 128, 130, 255])
def test_exit_codes_round_trip(sprites: Sprites, box: Handle, code: int) -> None:
    assert sprites.exec(box, "bash", ["-c", f"exit {code}"]).exit_code == code


def test_a_fresh_sprite_503_is_transient_then_exec_works(
    sprites: Sprites, emu: SpritesEmulator, box: Handle
) -> None:
    emu.refuse_fresh_execs(1, sprite=box.name)
    error = _within(10, lambda: sprites.exec(box, "bash", ["-lc", "echo hello"]))
    assert isinstance(error, Unavailable) and error.transient
    assert error.detail[:2] == ("http", 503)
    assert sprites.exec(box, "bash", ["-lc", "echo hello"]).output == b"hello\n"


@pytest.mark.parametrize(
    ("status", "headers", "body", "expected"),
    [
        (
            429,
            {"Retry-After": "17"},
            {"error": "slow", "retry_after_seconds": 17},
            RateLimited(17.0),
        ),
        (429, {"Retry-After": "5"}, {"error": "slow"}, RateLimited(5.0)),
        (401, {}, {"error": "unauthorized"}, Denied(("http", 401, {"error": "unauthorized"}))),
        (400, {}, {"error": "bad"}, Invalid(("http", 400, {"error": "bad"}))),
        (502, {}, "bad gateway", Unavailable(("http", 502, "bad gateway"))),
    ],
)
def test_ws_refused_at_upgrade_maps_like_http(
    sprites: Sprites,
    emu: SpritesEmulator,
    box: Handle,
    status: int,
    headers: dict[str, str],
    body: Any,
    expected: SandboxError,
) -> None:
    emu.refuse_upgrade(status, body=body, headers=headers)
    with pytest.raises(SandboxError) as raised:
        sprites.spawn(box, *STAY)
    assert raised.value == expected


def test_a_redirected_upgrade_is_invalid_and_never_followed(
    sprites: Sprites, emu: SpritesEmulator, box: Handle
) -> None:
    emu.clear_requests()
    target = "ws" + emu.base_url[len("http") :] + "/v1/sprites/elsewhere/exec"
    emu.refuse_upgrade(302, headers={"Location": target})
    with pytest.raises(Invalid) as raised:
        sprites.spawn(box, *STAY)
    assert raised.value.detail == ("http", 302, {})
    assert [r.path for r in emu.requests] == [f"/v1/sprites/{box.name}/exec"]


def test_the_facade_retries_idempotent_calls_through_a_5xx(
    sprites: Sprites, emu: SpritesEmulator, box: Handle
) -> None:
    config.configure(adapters={"sprites": sprites})
    emu.fail(503, method="GET", path=r"/v1/sprites/")
    assert sandbox.get(box).status in ("running", "suspended")
    emu.refuse_fresh_execs(1, sprite=box.name)
    with pytest.raises(Unavailable):
        sandbox.exec(box, "true")


def test_exec_on_a_missing_sprite_is_not_found(sprites: Sprites) -> None:
    with pytest.raises(NotFound):
        sprites.exec(Handle("sprites", "never-made"), "true")


def test_exec_deadline_covers_a_stalled_upgrade(
    sprites: Sprites, emu: SpritesEmulator, box: Handle
) -> None:
    emu.stall(3, method="GET", path=r"/exec$")
    error = _within(2, lambda: sprites.exec(box, "true", timeout=0.5))
    assert error == Unavailable((reasons.EXEC_TIMEOUT, 0.5))


def test_a_stalled_upgrade_times_out_at_timeout_ms(
    sprites: Sprites, emu: SpritesEmulator, box: Handle
) -> None:
    config.configure("sprites", timeout_ms=300)
    emu.stall(3, method="GET", path=r"/exec$")
    error = _within(2, lambda: sprites.spawn(box, *STAY))
    assert isinstance(error, Unavailable)


# -- stdin, stop, attach, tty ---------------------------------------------------------


def test_stdin_totality(sprites: Sprites, box: Handle) -> None:
    quiet = sprites.spawn(box, "bash", ["-c", "echo hi"])
    with pytest.raises(Invalid) as raised:
        sprites.write_stdin(quiet, b"x")
    assert raised.value.detail == reasons.STDIN_NOT_OPEN
    assert _drain(quiet)[-1] == Exit(quiet.ref, 0)
    done = sprites.spawn(box, "bash", ["-c", "echo hi"], stdin=True)
    assert _drain(done)[-1] == Exit(done.ref, 0)
    with pytest.raises(CommandExited):
        sprites.write_stdin(done, b"late")
    sprites.close_stdin(done)
    sprites.close_stdin(done)


def test_stop_command_leaves_the_remote_process_running(sprites: Sprites, box: Handle) -> None:
    command = sprites.spawn(box, *STAY, stdin=True, detachable=True)
    assert command.frames is not None
    assert command.frames.get(timeout=10) == Stdout(command.ref, b"ready\n")
    sprites.stop_command(command)
    sprites.stop_command(command)
    with pytest.raises(CommandExited):
        sprites.close_stdin(command)
    [session] = sprites.list_sessions(box)
    attached = sprites.attach(box, session.id, stdin=True)
    assert attached.ref != command.ref
    assert attached.frames is not None
    assert attached.frames.get(timeout=10) == Stdout(attached.ref, b"ready\n")
    sprites.write_stdin(attached, b"still here\n")
    assert attached.frames.get(timeout=10) == Stdout(attached.ref, b"still here\n")
    sprites.close_stdin(attached)
    assert _drain(attached)[-1] == Exit(attached.ref, 0)


def test_attach_to_an_unknown_session_is_not_found(sprites: Sprites, box: Handle) -> None:
    with pytest.raises(NotFound):
        sprites.attach(box, "424242")


def test_tty_output_is_stdout_only_and_the_exit_is_real(sprites: Sprites, box: Handle) -> None:
    command = sprites.spawn(box, "bash", ["-c", "echo out; echo err >&2; exit 4"], tty=True)
    frames = _drain(command)
    assert frames[-1] == Exit(command.ref, 4)
    data = b"".join(f.data for f in frames if isinstance(f, Stdout))
    assert b"out" in data and b"err" in data
    assert all(isinstance(f, Stdout) for f in frames[:-1])


def test_exec_sends_argv_env_and_dir_as_query_parameters(
    sprites: Sprites, emu: SpritesEmulator, box: Handle
) -> None:
    emu.clear_requests()
    result = sprites.exec(
        box, "bash", ["-c", "echo $GREETING"], env={"GREETING": "hi there"}, dir="/"
    )
    assert result.output == b"hi there\n"
    [upgrade] = [r for r in emu.requests if r.path.endswith("/exec")]
    assert upgrade.query == (
        ("cmd", "bash"),
        ("cmd", "-c"),
        ("cmd", "echo $GREETING"),
        ("path", "bash"),
        ("env", "GREETING=hi there"),
        ("dir", "/"),
        ("tty", "false"),
        ("stdin", "false"),
    )


# -- REST faults ----------------------------------------------------------------------


def test_429_with_retry_after(sprites: Sprites, emu: SpritesEmulator, box: Handle) -> None:
    emu.rate_limit(retry_after=17, header=True, in_body=False, method="GET")
    with pytest.raises(RateLimited) as raised:
        sprites.get(box)
    assert raised.value.retry_after == 17


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_is_unavailable(
    sprites: Sprites, emu: SpritesEmulator, box: Handle, status: int
) -> None:
    emu.fail(status, method="GET", path=r"/v1/sprites/")
    with pytest.raises(Unavailable):
        sprites.get(box)


def test_endless_listing_is_truncated_at_the_page_cap(
    sprites: Sprites, emu: SpritesEmulator
) -> None:
    emu.endless_listing()
    error = _within(10, lambda: Sprites(page_cap=5).list_all_names())
    assert isinstance(error, Truncated)
    assert len([r for r in emu.requests if r.path == "/v1/sprites"]) == 5


def test_a_truncated_body_is_unavailable(sprites: Sprites, emu: SpritesEmulator) -> None:
    emu.truncate(method="GET")
    with pytest.raises(Unavailable):
        sprites.list_all_names()


def test_a_stall_past_the_read_timeout_is_unavailable(
    sprites: Sprites, emu: SpritesEmulator, box: Handle
) -> None:
    config.configure("sprites", timeout_ms=300)
    emu.stall(3, method="GET", path=r"/v1/sprites/")
    error = _within(2, lambda: sprites.get(box))
    assert error == Unavailable("timeout")


def test_an_oversized_body_is_refused(sprites: Sprites, emu: SpritesEmulator, box: Handle) -> None:
    emu.oversize(200_000, method="GET", path=r"/v1/sprites/")
    with pytest.raises(Unavailable) as raised:
        sprites.get(box)
    assert raised.value.detail == (reasons.RESPONSE_TOO_LARGE, 64 * 1024)


def test_a_dropped_connection_is_unavailable(
    sprites: Sprites, emu: SpritesEmulator, box: Handle
) -> None:
    emu.drop_connection(method="GET", path=r"/v1/sprites/")
    with pytest.raises(Unavailable):
        sprites.get(box)


def test_a_wrong_token_is_denied(sprites: Sprites) -> None:
    box = sprites.build_handle("any-box")
    config.configure("sprites", token="wrong")
    with pytest.raises(Denied):
        sprites.get(box)
    with pytest.raises(Denied):
        sprites.spawn(box, *STAY)


# -- bounded operations through the emulator ------------------------------------------


def test_terminate_graceful_and_force_on_real_sessions(sprites: Sprites, box: Handle) -> None:
    first = sprites.spawn(box, *STAY, stdin=True, detachable=True)
    second = sprites.spawn(
        box, "bash", ["-c", "trap '' TERM; echo ready; sleep 30"], detachable=True
    )
    for command in (first, second):
        assert command.frames is not None
        assert command.frames.get(timeout=10) == Stdout(command.ref, b"ready\n")
    ids = [s.id for s in sprites.list_sessions(box)]
    assert len(ids) == 2
    sprites.terminate_session(box, ids[0], timeout=2)
    assert isinstance(_drain(first)[-1], Exit)
    sprites.terminate_session(box, ids[1], mode="force", timeout=1)
    assert _drain(second)[-1] == Exit(second.ref, 137)
    assert sprites.exec(box, "bash", ["-lc", "echo alive"]).output == b"alive\n"


def test_terminate_unknown_session(sprites: Sprites, box: Handle) -> None:
    sprites.terminate_session(box, "999999")
    with pytest.raises(Unavailable) as raised:
        sprites.terminate_session(box, "999999", mode="force")
    assert raised.value == Unavailable(reasons.TERMINATION_UNCONFIRMED)


@pytest.mark.parametrize("gone_status", [404, 410])
def test_terminate_an_ended_session_is_success_in_both_modes(
    sprites: Sprites, emu: SpritesEmulator, box: Handle, gone_status: int
) -> None:
    emu.behaviour.list_finished_sessions = True
    emu.behaviour.kill_gone_status = gone_status
    try:
        command = sprites.spawn(box, "true", [], detachable=True)
        assert command.frames is not None
        while not command.frames.get(timeout=10).terminal:
            pass
        assert command.session_id is not None
        for mode in ("graceful", "force", "graceful"):
            sprites.terminate_session(box, command.session_id, mode=mode)
    finally:
        emu.behaviour.list_finished_sessions = False
        emu.behaviour.kill_gone_status = 404
    if gone_status == 404:  # forgotten now: absent, which force cannot confirm
        sprites.terminate_session(box, command.session_id)
        with pytest.raises(Unavailable) as raised:
            sprites.terminate_session(box, command.session_id, mode="force")
        assert raised.value == Unavailable(reasons.TERMINATION_UNCONFIRMED)


@pytest.mark.parametrize("stream", ["kill", "checkpoint"])
def test_malformed_ndjson_is_unconfirmed(
    sprites: Sprites, emu: SpritesEmulator, box: Handle, stream: str
) -> None:
    config.configure("sprites", checkpoint_creation_enabled=True)
    command = sprites.spawn(box, *STAY, stdin=True, detachable=True)
    assert command.frames is not None and command.frames.get(timeout=10)
    [session] = sprites.list_sessions(box)
    emu.malformed_ndjson(stream)
    with pytest.raises(Unavailable) as raised:
        if stream == "kill":
            sprites.terminate_session(box, session.id)
        else:
            sprites.create_checkpoint_once(box, operation_id="op-1")
    sprites.stop_command(command)
    assert raised.value.detail in (reasons.TERMINATION_UNCONFIRMED, "checkpoint_unconfirmed")


def test_an_oversized_kill_stream_is_unconfirmed(
    sprites: Sprites, emu: SpritesEmulator, box: Handle
) -> None:
    emu.oversize(20_000, method="POST", path=r"/kill$")
    with pytest.raises(Unavailable) as raised:
        sprites.terminate_session(box, "12")
    assert raised.value.detail == reasons.TERMINATION_UNCONFIRMED


@pytest.mark.parametrize(
    ("operation", "detail"),
    [
        (lambda a, h: a.create_new("stalled-new", timeout=0.3), "create_timeout"),
        (lambda a, h: a.destroy_once(h, timeout=0.3), "delete_timeout"),
        (
            lambda a, h: a.create_checkpoint_once(h, operation_id="op", timeout=0.3),
            "checkpoint_timeout",
        ),
    ],
    ids=["create_new", "destroy_once", "create_checkpoint_once"],
)
def test_a_stalled_once_operation_ends_at_its_deadline(
    sprites: Sprites,
    emu: SpritesEmulator,
    box: Handle,
    operation: Callable[[Sprites, Handle], Any],
    detail: str,
) -> None:
    config.configure("sprites", checkpoint_creation_enabled=True)
    emu.stall(2, path=r"/v1/sprites")
    error = _within(1.5, lambda: operation(sprites, box))
    assert error == Unavailable(detail)


def test_a_stalled_termination_ends_within_grace_plus_five_seconds(
    sprites: Sprites, emu: SpritesEmulator, box: Handle
) -> None:
    emu.stall(8, method="POST", path=r"/kill$")
    error = _within(6.5, lambda: sprites.terminate_session(box, "12", timeout=0.001))
    assert isinstance(error, DeadlineExpired)
    assert error == Unavailable(reasons.TERMINATION_TIMEOUT)


def test_create_new_then_destroy_once_round_trip(sprites: Sprites, emu: SpritesEmulator) -> None:
    first = sprites.create_new("incarnation")
    with pytest.raises(AlreadyExists):
        sprites.create_new("incarnation")
    sprites.destroy_once(first, timeout=5)
    second = sprites.create_new("incarnation")
    assert second.instance_id != first.instance_id
    sprites.destroy_once(second)
    with pytest.raises(NotFound):
        sprites.get(second)
    assert "incarnation" not in sprites.list_all_names()


def test_checkpoint_round_trip(sprites: Sprites, box: Handle) -> None:
    config.configure("sprites", checkpoint_creation_enabled=True)
    sprites.write_file(box, "/data.txt", b"before")
    checkpoint = sprites.create_checkpoint_once(box, operation_id="op-7")
    assert checkpoint != "Current"
    sprites.write_file(box, "/data.txt", b"after")
    sprites.restore_checkpoint(box, checkpoint)
    assert sprites.exec(box, "cat", ["data.txt"]).output == b"before"
    named = sprites.create_checkpoint(box, comment="named")
    assert named not in ("Current", checkpoint)


def test_exec_past_max_bytes_is_truncated_and_its_process_killed(
    sprites: Sprites, emu: SpritesEmulator, box: Handle, caplog: pytest.LogCaptureFixture
) -> None:
    """An endless command's exec ends at ``max_bytes`` with ``Truncated``, and its process
    is killed through the kill endpoint (confirmed, or a line is logged) rather than left
    to outlive the socket."""
    emu.clear_requests()
    with (
        caplog.at_level(logging.DEBUG, logger="managoat_sandbox.providers.sprites"),
        pytest.raises(Truncated) as raised,
    ):
        sprites.exec(box, "yes", max_bytes=64 * 1024, timeout=20)
    assert raised.value.detail == (reasons.MAX_BYTES, 64 * 1024)
    kills = [r for r in emu.requests if r.method == "POST" and r.path.endswith("/kill")]
    assert [dict(r.query).get("signal") for r in kills] == ["SIGKILL"]
    assert not [r for r in caplog.records if "killing exec session" in r.getMessage()]
    assert sprites.exec(box, "echo", ["after"]).output == b"after\n"
