"""The fault matrix through the E2B emulator.

Each fault must give the right taxonomy error (or the intact result), exactly
one terminal frame, no hang past the deadline and no leaked adapter thread
(readers are named ``e2b-<ref>``, refs ``e2b-<n>``; heartbeats ``e2b-heartbeat-<id>``).
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from managoat_sandbox import config, reasons
from managoat_sandbox._http import HttpClient
from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.errors import (
    Denied,
    NotFound,
    ProviderError,
    RateLimited,
    Truncated,
    Unavailable,
)
from managoat_sandbox.frames import Error, Exit, Stdout
from managoat_sandbox.providers.e2b import E2B
from managoat_sandbox.providers.e2b.envd import Envd
from managoat_sandbox.providers.e2b.settings import load
from managoat_sandbox.testing.mailbox import Mailbox, is_stdout, is_terminal
from managoat_sandbox.types import Handle, NetworkPolicy

from ..conftest import wait_until
from .emulated import adapter_threads

pytestmark = pytest.mark.timeout(60)

WAIT = 10.0
SCRIPT = ("bash", ["-c", "echo one; echo two >&2; echo three; exit 4"])


def sandbox_id(e2b: E2B, handle: Handle) -> str:
    raw = e2b.get(handle).raw
    assert isinstance(raw, dict)
    return str(raw["sandboxID"])


def spawn(e2b: E2B, handle: Handle, *, detachable: bool = False) -> tuple[Mailbox, object]:
    box = Mailbox()
    command = e2b.spawn(handle, *SCRIPT, owner=box, detachable=detachable)
    return box, command.ref


def one_terminal(box: Mailbox, ref: object) -> object:
    terminal = box.expect(is_terminal(ref), WAIT)
    box.refute(is_terminal(ref), 0.1)
    frames = box.history(ref)
    assert [f for f in frames if f.terminal] == [terminal] and frames[-1] is terminal
    return terminal


# -- streams ------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["split", "merge"])
@pytest.mark.parametrize("after", [1, 5])
def test_split_and_merged_envelopes_decode_to_the_same_result(
    e2b: E2B, handle: Handle, emulator: E2BEmulator, fault: str, after: int
) -> None:
    emulator.stream_fault(fault, after=after)
    assert e2b.exec(handle, *SCRIPT) == (b"one\nthree\n", 4)
    emulator.stream_fault(fault, after=after)
    merged = e2b.exec(handle, *SCRIPT, stderr_to_stdout=True)
    assert sorted(merged.output.splitlines()) == [b"one", b"three", b"two"]


def test_split_envelopes_keep_a_large_output_whole(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    emulator.stream_fault("split", after=7)
    result = e2b.exec(handle, "bash", ["-c", "head -c 200000 /dev/zero | tr '\\0' y"])
    assert result == (b"y" * 200000, 0)


def test_a_stream_closed_before_start_fails_spawn_and_exec(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    emulator.stream_fault("no_start", times=2)
    box = Mailbox()
    with pytest.raises(Unavailable) as caught:
        e2b.spawn(handle, *SCRIPT, owner=box)
    assert caught.value.detail == reasons.CLOSED_BEFORE_EXIT
    with pytest.raises(Unavailable):
        e2b.exec(handle, *SCRIPT)
    box.refute(lambda frame: True, 0.1)


@pytest.mark.parametrize("detachable", [False, True])
def test_a_stream_without_end_is_one_closed_before_exit_error(
    e2b: E2B, handle: Handle, emulator: E2BEmulator, detachable: bool
) -> None:
    emulator.stream_fault("no_end", after=1)
    box, ref = spawn(e2b, handle, detachable=detachable)
    assert one_terminal(box, ref) == Error(ref, Unavailable(reasons.CLOSED_BEFORE_EXIT))
    emulator.stream_fault("no_end", after=1)
    with pytest.raises(Unavailable) as caught:
        e2b.exec(handle, *SCRIPT)
    assert caught.value.detail == reasons.CLOSED_BEFORE_EXIT


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"code": "unavailable", "message": "stream unavailable"}, Unavailable),
        ({"code": "deadline_exceeded", "message": "late"}, Unavailable),
        ("stream unavailable", ProviderError),
    ],
)
def test_an_error_end_frame_is_one_error_with_the_mapped_reason(
    e2b: E2B, handle: Handle, emulator: E2BEmulator, body: object, expected: type[Exception]
) -> None:
    emulator.stream_fault("error_end", after=1, body=body)
    box, ref = spawn(e2b, handle)
    terminal = one_terminal(box, ref)
    assert isinstance(terminal, Error) and isinstance(terminal.reason, expected)


@pytest.mark.parametrize("after", [1, 3])
def test_a_reset_mid_stream_is_one_unavailable_error(
    e2b: E2B, handle: Handle, emulator: E2BEmulator, after: int
) -> None:
    emulator.stream_fault("reset", after=after)
    box, ref = spawn(e2b, handle)
    terminal = one_terminal(box, ref)
    assert isinstance(terminal, Error) and isinstance(terminal.reason, Unavailable)


@pytest.mark.parametrize("flavour", ["json", "compressed"])
def test_garbage_envelopes_are_one_provider_error(
    e2b: E2B, handle: Handle, emulator: E2BEmulator, flavour: str
) -> None:
    emulator.stream_fault("garbage", body=flavour)
    box, ref = spawn(e2b, handle)
    terminal = one_terminal(box, ref)
    assert isinstance(terminal, Error) and isinstance(terminal.reason, ProviderError)


@pytest.mark.parametrize("after", [0, 1, 2])
def test_a_silent_hang_is_bounded_by_the_exec_deadline(
    e2b: E2B, handle: Handle, emulator: E2BEmulator, after: int
) -> None:
    emulator.stream_fault("hang", after=after)
    started = time.monotonic()
    with pytest.raises(Unavailable) as caught:
        e2b.exec(handle, *SCRIPT, timeout=0.5)
    assert caught.value.detail == (reasons.EXEC_TIMEOUT, 0.5)
    assert time.monotonic() - started < 3.0


def test_an_exec_reads_its_stream_in_the_calling_thread(
    e2b: E2B, handle: Handle, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[str] = []
    real_start = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        started.append(thread.name)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    result = e2b.exec(handle, *SCRIPT, timeout=WAIT)
    assert (result.output, result.stderr, result.exit_code) == (b"one\nthree\n", b"two\n", 4)
    assert [name for name in started if name.startswith("e2b-e2b-")] == []


def test_a_silent_hang_before_start_fails_spawn_after_timeout_ms(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    config.configure("e2b", timeout_ms=500)
    emulator.stream_fault("hang", after=0)
    started = time.monotonic()
    with pytest.raises(Unavailable) as caught:
        e2b.spawn(handle, *SCRIPT)
    assert caught.value.detail == "start_timeout"
    assert time.monotonic() - started < 3.0


def test_a_silent_live_stream_ends_in_one_timeout_error(
    handle: Handle, emulator: E2BEmulator
) -> None:
    quick = E2B(idle_timeout=0.5)
    emulator.stream_fault("hang", after=1)
    box = Mailbox()
    command = quick.spawn(handle, *SCRIPT, owner=box)
    assert one_terminal(box, command.ref) == Error(command.ref, Unavailable("timeout"))


def test_stop_command_unblocks_a_silent_stream_at_once(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    emulator.stream_fault("hang", after=1)
    box = Mailbox()
    command = e2b.spawn(handle, *SCRIPT, owner=box)
    started = time.monotonic()
    e2b.stop_command(command)
    assert time.monotonic() - started < 3.0, "stop must not wait for the 120 s idle timeout"
    assert not [name for name in adapter_threads() if str(command.ref) in name]
    box.refute(is_terminal(command.ref), 0.1)


def test_a_proxy_502_on_start_is_unavailable(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    emulator.server_error(502, path=r"/process\.Process/Start$")
    with pytest.raises(Unavailable) as caught:
        e2b.spawn(handle, *SCRIPT)
    assert caught.value.detail[:2] == ("http", 502)


# -- control plane ------------------------------------------------------------------


def test_429_carries_retry_after_from_the_header_or_the_body_field(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    emulator.rate_limit(path=r"^/v2/sandboxes$", retry_after=7)
    with pytest.raises(RateLimited) as caught:
        e2b.get(handle)
    assert caught.value.retry_after == 7.0
    emulator.rate_limit(path=r"^/v2/sandboxes$", retry_after=7, retry_after_seconds=17)
    with pytest.raises(RateLimited) as caught:
        e2b.get(handle)
    assert caught.value.retry_after == 17.0


@pytest.mark.parametrize("status", [500, 503, 599])
def test_5xx_is_unavailable_and_carries_the_body(
    e2b: E2B, handle: Handle, emulator: E2BEmulator, status: int
) -> None:
    emulator.server_error(status, path=r"^/v2/sandboxes$")
    with pytest.raises(Unavailable) as caught:
        e2b.get(handle)
    assert caught.value.detail[:2] == ("http", status)


def test_paged_listings_are_collected_whole(e2b: E2B, emulator: E2BEmulator) -> None:
    names = {f"paged-{time.monotonic_ns()}-{n}" for n in range(3)}
    handles = [e2b.create(name) for name in names]
    try:
        emulator.page_size(1)
        assert names <= e2b.list_all_names()
        pages = [r for r in emulator.requests if r.path == "/v2/sandboxes"]
        assert len(pages) >= 3
    finally:
        for created in handles:
            e2b.destroy(created)


def test_an_endless_listing_is_truncated(e2b: E2B, handle: Handle, emulator: E2BEmulator) -> None:
    before = len(emulator.requests)
    emulator.endless_listing()
    with pytest.raises(Truncated):
        e2b.list_all_names()
    pages = [r for r in emulator.requests[before:] if r.path == "/v2/sandboxes"]
    assert len(pages) == 40


def test_a_wrong_api_key_is_denied_and_never_echoed(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    with config.override("e2b", api_key="e2b_wrong_canary_KEY"), pytest.raises(Denied) as caught:
        e2b.get(handle)
    assert "e2b_wrong_canary_KEY" not in repr(caught.value) + str(caught.value)


# -- lifecycle and stdin across pause/resume -------------------------------------------


def test_a_sandbox_paused_behind_our_back_is_resumed_before_envd(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    emulator.pause(sandbox_id(e2b, handle))
    assert e2b.get(handle).status == "suspended"
    assert e2b.exec(handle, "bash", ["-c", "echo back"]) == (b"back\n", 0)
    assert e2b.get(handle).status == "running"


def test_suspend_resume_and_suspend_again_are_total(e2b: E2B, handle: Handle) -> None:
    e2b.suspend(handle)
    e2b.suspend(handle)
    assert e2b.get(handle).status == "suspended"
    resumed = e2b.resume(handle)
    assert e2b.get(resumed).status == "running"
    e2b.destroy(handle)
    with pytest.raises(NotFound):
        e2b.resume(handle)


def test_stdin_goes_by_pid_when_tag_selectors_fail_after_pause_and_resume(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    box = Mailbox()
    command = e2b.spawn(
        handle, "bash", ["-c", "echo ready; exec cat"], owner=box, stdin=True, detachable=True
    )
    box.expect(is_stdout(command.ref), WAIT)
    e2b.stop_command(command)
    e2b.suspend(handle)
    e2b.resume(handle)
    fault = emulator.break_tag_selectors(times=1000)
    [session] = e2b.list_sessions(handle)
    attached_box = Mailbox()
    attached = e2b.attach(handle, session.id, owner=attached_box, stdin=True)
    replay = b""
    while b"ready" not in replay:
        frame = attached_box.expect(is_stdout(attached.ref), WAIT)
        assert isinstance(frame, Stdout)
        replay += frame.data
    e2b.write_stdin(attached, b"after-attach\n")
    while b"after-attach" not in replay:
        frame = attached_box.expect(is_stdout(attached.ref), WAIT)
        assert isinstance(frame, Stdout)
        replay += frame.data
    e2b.close_stdin(attached)
    assert one_terminal(attached_box, attached.ref) == Exit(attached.ref, 0)
    assert fault.times == 1000, "a tag selector was used"
    selectors = [
        json.loads(r.body).get("process")
        for r in emulator.requests
        if r.path in ("/process.Process/SendInput", "/process.Process/CloseStdin")
    ]
    assert selectors and all(set(s) == {"pid"} for s in selectors)


def test_network_policy_is_applied_and_reapplied_after_resume(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    ident = sandbox_id(e2b, handle)
    e2b.apply_network_policy(handle, NetworkPolicy(allow=[]))
    assert emulator.record(ident).network.get("denyOut") == ["0.0.0.0/0"]
    e2b.apply_network_policy(handle, NetworkPolicy(allow=["example.com"]))
    assert emulator.record(ident).network.get("allowOut") == ["example.com"]
    emulator.pause(ident)
    before = len(emulator.requests)
    e2b.resume(handle)
    puts = [r for r in emulator.requests[before:] if r.method == "PUT"]
    assert [json.loads(r.body) for r in puts] == [
        {"allowOut": ["example.com"], "denyOut": ["0.0.0.0/0"]}
    ]


def test_a_domain_allowlist_is_valid_for_the_server(e2b: E2B, handle: Handle) -> None:
    e2b.apply_network_policy(handle, NetworkPolicy(allow=["*.example.com", "10.0.0.0/8"]))


def test_live_commands_renew_the_ttl_and_stop_renewing_when_they_end(
    handle: Handle, emulator: E2BEmulator
) -> None:
    beating = E2B(heartbeat_interval=0.1)
    ident = sandbox_id(beating, handle)
    path = f"/sandboxes/{ident}/timeout"
    box = Mailbox()
    command = beating.spawn(handle, "bash", ["-c", "echo ready; exec cat"], owner=box, stdin=True)
    box.expect(is_stdout(command.ref), WAIT)

    def beats() -> int:
        return sum(1 for r in emulator.requests if r.path == path)

    assert wait_until(lambda: beats() >= 2, timeout=WAIT)
    beating.close_stdin(command)
    assert one_terminal(box, command.ref) == Exit(command.ref, 0)
    assert wait_until(lambda: not adapter_threads(), timeout=WAIT)
    settled = beats()
    time.sleep(0.3)  # three intervals: a leaked heartbeat would have sent again
    assert beats() == settled


def test_write_file_reads_back_with_its_mode(e2b: E2B, handle: Handle) -> None:
    # A home-relative path: the emulator runs commands without a chroot, so only
    # paths relative to the home (the default cwd) mean the same file to both sides.
    e2b.write_file(handle, "notes/dir/file.txt", b"hello", mode=0o600)
    script = "cat notes/dir/file.txt; stat -c ' %a' notes/dir/file.txt"
    result = e2b.exec(handle, "bash", ["-c", script])
    assert result == (b"hello 600\n", 0)


def _live_commands(e2b: E2B, handle: Handle, emulator: E2BEmulator) -> list[str]:
    """The command lines envd lists as running (through envd's own ``List``, called with
    the token the emulator handed the sandbox)."""
    sandbox = sandbox_id(e2b, handle)
    s = load()
    envd = Envd(
        s.envd_url(sandbox, None), sandbox, emulator.record(sandbox).access_token, s.user, s.timeout
    )
    listing = envd.call(HttpClient(), "List", {})
    return [
        " ".join([p["config"]["cmd"], *p["config"].get("args", [])])
        for p in listing.get("processes", [])
    ]


def test_an_exec_past_its_deadline_is_killed_by_envd(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    with pytest.raises(Unavailable):
        e2b.exec(handle, "sleep", ["31.5"], timeout=0.3)

    def gone() -> bool:
        return not any("31.5" in c for c in _live_commands(e2b, handle, emulator))

    assert wait_until(gone, timeout=WAIT)


def test_stopping_an_attach_kills_its_replayer_but_not_the_session(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    box = Mailbox()
    command = e2b.spawn(
        handle, "bash", ["-c", "echo ready; exec cat"], owner=box, stdin=True, detachable=True
    )
    box.expect(is_stdout(command.ref), WAIT)
    [session] = e2b.list_sessions(handle)
    attached_box = Mailbox()
    attached = e2b.attach(handle, session.id, owner=attached_box)
    attached_box.expect(is_stdout(attached.ref), WAIT)
    assert any("tail -c +1" in c for c in _live_commands(e2b, handle, emulator))
    e2b.stop_command(attached)

    def replayer_gone() -> bool:
        return not any("tail -c +1" in c for c in _live_commands(e2b, handle, emulator))

    assert wait_until(replayer_gone, timeout=WAIT)
    e2b.write_stdin(command, b"still-here\n")
    frame = box.expect(is_stdout(command.ref), WAIT)
    assert isinstance(frame, Stdout) and frame.data == b"still-here\n"
    e2b.close_stdin(command)
    assert one_terminal(box, command.ref) == Exit(command.ref, 0)
