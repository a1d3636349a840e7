"""Wire contract with envd: Start streams, pid-addressed stdin, files, exec rules."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator

import pytest
import responses

from managoat_sandbox import reasons
from managoat_sandbox.errors import (
    CommandExited,
    Denied,
    Invalid,
    NotFound,
    NotSupported,
    ProviderError,
    SandboxError,
    Truncated,
    Unavailable,
    WriteFailed,
)
from managoat_sandbox.frames import Error, Exit, Stderr, Stdout
from managoat_sandbox.providers.e2b import E2B
from managoat_sandbox.providers.e2b.connect import Decoder, encode
from managoat_sandbox.testing.mailbox import Mailbox, is_stdout, is_terminal
from managoat_sandbox.types import Handle

from ..conftest import wait_until
from .wire import (
    API,
    ENVD,
    LISTING,
    START_URL,
    TOKEN,
    Pipe,
    configure,
    end,
    found,
    item,
    running,
    sandbox,
    start,
    stderr,
    stdout,
    stream,
    trailer,
)


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    configure()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


@pytest.fixture
def e2b() -> E2B:
    return E2B()


@pytest.fixture
def pipe() -> Iterator[Pipe]:
    p = Pipe()
    yield p
    p.dispose()


def box(e2b: E2B) -> Handle:
    return e2b.build_handle("box")


def start_calls(rsps: responses.RequestsMock) -> list[responses.Call]:
    return [c for c in rsps.calls if c.request.url == START_URL]


def start_request(call: responses.Call) -> object:
    body = call.request.body
    [envelope] = Decoder().feed(body if isinstance(body, bytes) else body.encode())
    assert not envelope.end_stream
    return envelope.message


def unary(rsps: responses.RequestsMock, method: str) -> list[bytes]:
    url = f"{ENVD}/process.Process/{method}"
    return [bytes(c.request.body) for c in rsps.calls if c.request.url == url]


# -- exec ---------------------------------------------------------------------


def test_exec_collects_stdout_and_the_exit_code(rsps: responses.RequestsMock, e2b: E2B) -> None:
    running(rsps)
    stream(rsps, start(), stdout(b"he"), stdout(b"llo"), stderr(b"dropped"), end(3), trailer())
    assert e2b.exec(box(e2b), "bash", ["-lc", "x"]) == (b"hello", 3)


def test_exec_merges_stderr_in_arrival_order(rsps: responses.RequestsMock, e2b: E2B) -> None:
    running(rsps)
    stream(rsps, start(), stdout(b"he"), stdout(b"llo"), stderr(b"dropped"), end(3), trailer())
    assert e2b.exec(box(e2b), "bash", stderr_to_stdout=True) == (b"hellodropped", 3)


def test_exit_zero_is_the_absent_exit_code_field(rsps: responses.RequestsMock, e2b: E2B) -> None:
    running(rsps)
    stream(
        rsps,
        start(),
        encode({"event": {"end": {"exited": True, "status": "exit status 0"}}}),
        trailer(),
    )
    assert e2b.exec(box(e2b), "true") == (b"", 0)


def test_exec_past_max_bytes_is_truncated_and_the_process_killed_by_pid(
    rsps: responses.RequestsMock, e2b: E2B, pipe: Pipe
) -> None:
    running(rsps)
    rsps.add(
        responses.POST,
        START_URL,
        body=pipe.reader,
        status=200,
        content_type="application/connect+json",
    )
    rsps.add(responses.POST, f"{ENVD}/process.Process/SendSignal", json={})
    pipe.send(start(42), stdout(b"x" * 10), stderr(b"y" * 10))
    with pytest.raises(Truncated) as caught:
        e2b.exec(box(e2b), "yes", max_bytes=15)
    assert caught.value.detail == (reasons.MAX_BYTES, 15)
    assert unary(rsps, "SendSignal") == [b'{"process":{"pid":42},"signal":"SIGNAL_SIGKILL"}'], (
        "the process was left running"
    )


def test_exec_within_max_bytes_kills_nothing(rsps: responses.RequestsMock, e2b: E2B) -> None:
    running(rsps)
    stream(rsps, start(), stdout(b"x" * 10), stderr(b"y" * 5), end(0), trailer())
    assert e2b.exec(box(e2b), "x", max_bytes=15) == (b"x" * 10, 0)
    assert unary(rsps, "SendSignal") == []


def test_exec_request_headers_and_body(rsps: responses.RequestsMock, e2b: E2B) -> None:
    running(rsps)
    stream(rsps, start(), end(0), trailer())
    e2b.exec(box(e2b), "bash", ["-lc", "echo hi"], env={"A": "1"}, dir="/home/user")
    [call] = start_calls(rsps)
    headers = call.request.headers
    assert headers["Content-Type"] == "application/connect+json"
    assert headers["X-Access-Token"] == TOKEN
    assert headers["E2b-Sandbox-Id"] == "sbx1"
    assert headers["E2b-Sandbox-Port"] == "49983"
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"user:").decode()
    assert headers["Keepalive-Ping-Interval"] == "50"
    assert "Connect-Timeout-Ms" not in headers
    request = start_request(call)
    assert isinstance(request, dict) and request["tag"].startswith("fountain-")
    assert request["process"] == {
        "cmd": "bash",
        "args": ["-lc", "echo hi"],
        "envs": {"A": "1"},
        "cwd": "/home/user",
    }
    assert request["stdin"] is False


def test_exec_omits_cwd_without_dir_and_bounds_the_process_with_its_timeout(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    running(rsps)
    stream(rsps, start(), end(0), trailer())
    e2b.exec(box(e2b), "true", timeout=2.5)
    [call] = start_calls(rsps)
    assert call.request.headers["Connect-Timeout-Ms"] == "2500"
    request = start_request(call)
    assert isinstance(request, dict)
    assert request["process"] == {"cmd": "true", "args": [], "envs": {}}


def test_the_access_token_is_fetched_once_per_sandbox(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    running(rsps)
    stream(rsps, start(), end(0), trailer())
    e2b.exec(box(e2b), "true")
    found(rsps, item())
    stream(rsps, start(), end(0), trailer())
    e2b.exec(box(e2b), "true")
    details = [c for c in rsps.calls if c.request.url == f"{API}/sandboxes/sbx1"]
    assert len(details) == 1


def test_an_envd_401_drops_the_cached_token(rsps: responses.RequestsMock, e2b: E2B) -> None:
    running(rsps)
    rsps.add(responses.POST, START_URL, status=401, json={"code": 401, "message": "unauthorized"})
    with pytest.raises(Denied):
        e2b.exec(box(e2b), "true")
    running(rsps)
    stream(rsps, start(), end(0), trailer())
    e2b.exec(box(e2b), "true")
    details = [c for c in rsps.calls if c.request.url == f"{API}/sandboxes/sbx1"]
    assert len(details) == 2


def test_sandbox_url_addresses_envd_with_the_routing_headers(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    configure(sandbox_url="http://envd.local:3000/")
    running(rsps)
    stream(rsps, start(), end(0), trailer(), url="http://envd.local:3000/process.Process/Start")
    assert e2b.exec(box(e2b), "true") == (b"", 0)
    call = rsps.calls[-1]
    assert call.request.headers["E2b-Sandbox-Id"] == "sbx1"
    assert call.request.headers["E2b-Sandbox-Port"] == "49983"


def test_exec_on_a_paused_sandbox_connects_before_start(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    found(rsps, item(state="paused"))
    rsps.add(
        responses.POST, f"{API}/v2/sandboxes/sbx1/connect", json=sandbox(token="fresh"), status=201
    )
    stream(rsps, start(), end(0), trailer())
    assert e2b.exec(box(e2b), "true") == (b"", 0)
    assert [c.request.url.split("?")[0] for c in rsps.calls] == [
        f"{API}/v2/sandboxes",
        f"{API}/v2/sandboxes/sbx1/connect",
        START_URL,
    ]
    assert rsps.calls[-1].request.headers["X-Access-Token"] == "fresh"


def test_exec_with_zero_timeout_makes_no_request(rsps: responses.RequestsMock, e2b: E2B) -> None:
    with pytest.raises(Unavailable) as caught:
        e2b.exec(box(e2b), "true", timeout=0)
    assert caught.value.detail == (reasons.EXEC_TIMEOUT, 0)
    assert len(rsps.calls) == 0


def test_a_lookup_that_spends_the_budget_dispatches_nothing(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    def slow_listing(request: object) -> tuple[int, dict[str, str], str]:
        time.sleep(0.05)
        return 200, {}, json.dumps([item()])

    rsps.add_callback(responses.GET, LISTING, callback=slow_listing)
    rsps.add(responses.GET, f"{API}/sandboxes/sbx1", json=sandbox())
    with pytest.raises(Unavailable) as caught:
        e2b.exec(box(e2b), "true", timeout=0.01)
    assert caught.value.detail == (reasons.EXEC_TIMEOUT, 0.01)
    assert start_calls(rsps) == []


def test_an_error_trailer_string_is_a_provider_error_and_partial_output_is_dropped(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    running(rsps)
    stream(rsps, start(), stdout(b"partial"), trailer("stream unavailable"))
    with pytest.raises(ProviderError) as caught:
        e2b.exec(box(e2b), "true")
    assert caught.value == ProviderError(
        "e2b",
        reasons.Reason.BAD_ENVELOPE,
        problem="the end-of-stream error (str) has no Connect code",
    )


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("unavailable", Unavailable),
        ("not_found", NotFound),
        ("unauthenticated", Denied),
        ("invalid_argument", Invalid),
    ],
)
def test_an_error_trailer_code_maps_like_its_http_status(
    rsps: responses.RequestsMock, e2b: E2B, code: str, error: type[Exception]
) -> None:
    running(rsps)
    stream(rsps, start(), trailer({"code": code, "message": "m"}))
    with pytest.raises(error):
        e2b.exec(box(e2b), "true")


def test_envd_ending_an_exec_with_deadline_exceeded_is_the_exec_timeout(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    # envd answers the Connect-Timeout-Ms the exec sent; its clock may run ahead of ours.
    running(rsps)
    stream(
        rsps,
        start(),
        stdout(b"partial"),
        trailer({"code": "deadline_exceeded", "message": "context deadline exceeded"}),
    )
    with pytest.raises(Unavailable) as caught:
        e2b.exec(box(e2b), "sleep", ["30"], timeout=30)
    assert caught.value.detail == (reasons.EXEC_TIMEOUT, 30)


def test_deadline_exceeded_without_an_exec_deadline_stays_a_stream_error(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    running(rsps)
    stream(rsps, start(), trailer({"code": "deadline_exceeded", "message": "m"}))
    with pytest.raises(Unavailable) as caught:
        e2b.exec(box(e2b), "true")
    assert not (
        isinstance(caught.value.detail, tuple)
        and caught.value.detail[:1] == (reasons.EXEC_TIMEOUT,)
    )


def test_a_stream_without_end_is_closed_before_exit(rsps: responses.RequestsMock, e2b: E2B) -> None:
    running(rsps)
    stream(rsps, start(), stdout(b"partial"), trailer())
    with pytest.raises(Unavailable) as caught:
        e2b.exec(box(e2b), "true")
    assert caught.value.detail == reasons.CLOSED_BEFORE_EXIT


def test_a_body_that_just_ends_is_closed_before_exit(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    running(rsps)
    stream(rsps, start(), stdout(b"partial"))
    with pytest.raises(Unavailable) as caught:
        e2b.exec(box(e2b), "true")
    assert caught.value.detail == reasons.CLOSED_BEFORE_EXIT


def test_a_malformed_envelope_is_a_provider_error(rsps: responses.RequestsMock, e2b: E2B) -> None:
    running(rsps)
    stream(rsps, start(), b"\x01\x00\x00\x00\x02{}")
    with pytest.raises(ProviderError):
        e2b.exec(box(e2b), "true")


def test_a_non_200_stream_answer_is_mapped(rsps: responses.RequestsMock, e2b: E2B) -> None:
    running(rsps)
    rsps.add(
        responses.POST,
        START_URL,
        status=502,
        json={"sandboxId": "sbx1", "message": "The sandbox was not found", "code": 502},
    )
    with pytest.raises(Unavailable) as caught:
        e2b.exec(box(e2b), "true")
    assert caught.value.detail[:2] == ("http", 502)


def test_keepalives_and_unknown_events_are_ignored(rsps: responses.RequestsMock, e2b: E2B) -> None:
    running(rsps)
    stream(
        rsps,
        encode({"event": {"keepalive": {}}}),
        start(),
        encode({"no": "event"}),
        encode({"event": {"mystery": {}}}),
        encode({"event": {"keepalive": {}}}),
        stdout(b"x"),
        encode({"event": {"data": {"stderr": "not base64!"}}}),
        end(0),
        trailer(),
    )
    assert e2b.exec(box(e2b), "true", stderr_to_stdout=True) == (b"x", 0)


def test_a_silent_stream_before_start_is_bounded_by_the_exec_deadline(
    rsps: responses.RequestsMock, e2b: E2B, pipe: Pipe
) -> None:
    running(rsps)
    rsps.add(
        responses.POST,
        START_URL,
        body=pipe.reader,
        status=200,
        content_type="application/connect+json",
    )
    # Without a socket there is no read to time out: the test ends the body
    # after the deadline to show that the expired deadline decides the verdict.
    timer = threading.Timer(0.3, pipe.close)
    timer.start()
    try:
        with pytest.raises(Unavailable) as caught:
            e2b.exec(box(e2b), "true", timeout=0.1)
        assert caught.value.detail == (reasons.EXEC_TIMEOUT, 0.1)
    finally:
        timer.cancel()


# -- spawn ------------------------------------------------------------------------


def test_spawn_delivers_output_then_one_exit(rsps: responses.RequestsMock, e2b: E2B) -> None:
    running(rsps)
    stream(rsps, start(), stdout(b"ready"), stderr(b"warn"), end(0), trailer())
    mailbox = Mailbox()
    command = e2b.spawn(box(e2b), "bash", owner=mailbox, stdin=True)
    assert command.session_id is None
    assert mailbox.expect(is_terminal(command.ref), 2) == Exit(command.ref, 0)
    assert mailbox.history(command.ref) == [
        Stdout(command.ref, b"ready"),
        Stderr(command.ref, b"warn"),
        Exit(command.ref, 0),
    ]
    with pytest.raises(CommandExited):
        e2b.write_stdin(command, b"late")
    e2b.stop_command(command)


def test_spawn_closed_without_end_is_an_error_frame(rsps: responses.RequestsMock, e2b: E2B) -> None:
    running(rsps)
    stream(rsps, start(), stdout(b"partial"), trailer())
    mailbox = Mailbox()
    command = e2b.spawn(box(e2b), "bash", owner=mailbox)
    frame = mailbox.expect(is_terminal(command.ref), 2)
    assert frame == Error(command.ref, Unavailable(reasons.CLOSED_BEFORE_EXIT))
    mailbox.refute(is_terminal(command.ref), 0.05)
    assert mailbox.history(command.ref)[0] == Stdout(command.ref, b"partial")


def test_spawn_of_a_stream_that_ends_before_start_raises(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    running(rsps)
    stream(rsps, trailer())
    mailbox = Mailbox()
    with pytest.raises(Unavailable) as caught:
        e2b.spawn(box(e2b), "bash", owner=mailbox)
    assert caught.value.detail == reasons.CLOSED_BEFORE_EXIT
    mailbox.refute(lambda frame: True, 0.05)


def test_stdin_and_close_stdin_address_the_pid_from_start(
    rsps: responses.RequestsMock, e2b: E2B, pipe: Pipe
) -> None:
    running(rsps)
    rsps.add(
        responses.POST,
        START_URL,
        body=pipe.reader,
        status=200,
        content_type="application/connect+json",
    )
    rsps.add(responses.POST, f"{ENVD}/process.Process/SendInput", json={})
    rsps.add(responses.POST, f"{ENVD}/process.Process/CloseStdin", json={})
    pipe.send(start(42))
    mailbox = Mailbox()
    command = e2b.spawn(box(e2b), "cat", owner=mailbox, stdin=True)
    e2b.write_stdin(command, b"hello")
    e2b.close_stdin(command)
    e2b.close_stdin(command)
    assert unary(rsps, "SendInput") == [b'{"process":{"pid":42},"input":{"stdin":"aGVsbG8="}}']
    assert unary(rsps, "CloseStdin") == [b'{"process":{"pid":42}}']
    headers = rsps.calls[-1].request.headers
    assert headers["Content-Type"] == "application/json" and headers["X-Access-Token"] == TOKEN
    pipe.send(end(0), trailer())
    pipe.close()
    assert mailbox.expect(is_terminal(command.ref), 2) == Exit(command.ref, 0)


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (
            404,
            {"code": "not_found", "message": "process with pid 42 not found"},
            CommandExited(reasons.EXITED),
        ),
        (
            500,
            {"code": "internal", "message": "error writing to stdin: stdin not enabled or closed"},
            Invalid(reasons.STDIN_NOT_OPEN),
        ),
        (
            503,
            {"code": "unavailable", "message": "x"},
            WriteFailed((reasons.REFUSED, "Unavailable")),
        ),
    ],
)
def test_write_stdin_is_total(
    rsps: responses.RequestsMock,
    e2b: E2B,
    pipe: Pipe,
    status: int,
    body: object,
    error: SandboxError,
) -> None:
    running(rsps)
    rsps.add(
        responses.POST,
        START_URL,
        body=pipe.reader,
        status=200,
        content_type="application/connect+json",
    )
    rsps.add(responses.POST, f"{ENVD}/process.Process/SendInput", status=status, json=body)
    pipe.send(start(42))
    command = e2b.spawn(box(e2b), "cat", owner=Mailbox(), stdin=True)
    with pytest.raises(type(error)) as caught:
        e2b.write_stdin(command, b"x")
    assert caught.value.detail == error.detail
    pipe.close()
    e2b.stop_command(command)


def test_stdin_on_a_command_without_stdin_is_stdin_not_open(
    rsps: responses.RequestsMock, e2b: E2B, pipe: Pipe
) -> None:
    running(rsps)
    rsps.add(
        responses.POST,
        START_URL,
        body=pipe.reader,
        status=200,
        content_type="application/connect+json",
    )
    pipe.send(start(42))
    command = e2b.spawn(box(e2b), "cat", owner=Mailbox())
    with pytest.raises(Invalid) as caught:
        e2b.write_stdin(command, b"x")
    assert caught.value.detail == reasons.STDIN_NOT_OPEN
    pipe.close()
    e2b.stop_command(command)


def test_stop_command_is_idempotent_and_detaches(
    rsps: responses.RequestsMock, e2b: E2B, pipe: Pipe
) -> None:
    running(rsps)
    rsps.add(
        responses.POST,
        START_URL,
        body=pipe.reader,
        status=200,
        content_type="application/connect+json",
    )
    pipe.send(start(42), stdout(b"ready"))
    mailbox = Mailbox()
    command = e2b.spawn(box(e2b), "cat", owner=mailbox, stdin=True)
    mailbox.expect(is_stdout(command.ref), 2)

    def more_output() -> None:  # a pipe has no socket to shut: the body goes on and ends
        pipe.send(stdout(b"after"), end(0), trailer())
        pipe.close()

    timer = threading.Timer(0.1, more_output)
    timer.start()
    e2b.stop_command(command)
    e2b.stop_command(command)
    timer.join()
    with pytest.raises(CommandExited):
        e2b.write_stdin(command, b"x")
    with pytest.raises(CommandExited):
        e2b.close_stdin(command)
    mailbox.refute(lambda frame: frame.terminal or getattr(frame, "data", b"") == b"after", 0.1)


def test_spawn_with_tty_is_not_supported(e2b: E2B) -> None:
    configure()
    with pytest.raises(NotSupported):
        e2b.spawn(box(e2b), "bash", tty=True)


def test_a_detachable_spawn_runs_the_journaling_shim(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    running(rsps)
    stream(rsps, start(), end(0), trailer())
    mailbox = Mailbox()
    command = e2b.spawn(
        box(e2b), "echo", ["a'b"], owner=mailbox, detachable=True, env={"K": "v"}, dir="/work"
    )
    mailbox.expect(is_terminal(command.ref), 2)
    request = start_request(start_calls(rsps)[0])
    assert isinstance(request, dict)
    assert command.session_id == request["tag"]
    process = request["process"]
    assert process["cmd"] == "bash" and process["args"][0] == "-c"
    script = process["args"][1]
    assert f"tee -a \"$HOME\"/.fountain/'{request['tag']}'.out" in script
    assert "'env' '--' 'K=v' 'echo' 'a'\\''b'" in script
    assert process["envs"] == {} and process["cwd"] == "/work"


# -- heartbeats -------------------------------------------------------------------


def test_a_live_command_renews_the_ttl_until_it_ends(
    rsps: responses.RequestsMock, pipe: Pipe
) -> None:
    e2b = E2B(heartbeat_interval=0.05)
    running(rsps)
    rsps.add(
        responses.POST,
        START_URL,
        body=pipe.reader,
        status=200,
        content_type="application/connect+json",
    )
    rsps.add(responses.POST, f"{API}/sandboxes/sbx1/timeout", status=204)
    pipe.send(start(42))
    baseline = threading.active_count()
    mailbox = Mailbox()
    command = e2b.spawn(box(e2b), "cat", owner=mailbox)

    def beats() -> list[responses.Call]:
        return [c for c in rsps.calls if c.request.url == f"{API}/sandboxes/sbx1/timeout"]

    assert wait_until(lambda: len(beats()) >= 2, timeout=5)
    assert all(bytes(c.request.body) == b'{"timeout":1800}' for c in beats())
    pipe.send(end(0), trailer())
    pipe.close()
    mailbox.expect(is_terminal(command.ref), 2)
    assert wait_until(lambda: threading.active_count() <= baseline, timeout=5)
    count = len(beats())
    time.sleep(0.2)  # no heartbeat may follow the end: wait several intervals and count
    assert len(beats()) == count


def test_a_failing_heartbeat_is_only_logged(
    rsps: responses.RequestsMock, pipe: Pipe, caplog: pytest.LogCaptureFixture
) -> None:
    e2b = E2B(heartbeat_interval=0.05)
    running(rsps)
    rsps.add(
        responses.POST,
        START_URL,
        body=pipe.reader,
        status=200,
        content_type="application/connect+json",
    )
    rsps.add(responses.POST, f"{API}/sandboxes/sbx1/timeout", status=503)
    pipe.send(start(42), stdout(b"x"))
    mailbox = Mailbox()
    command = e2b.spawn(box(e2b), "cat", owner=mailbox)
    assert wait_until(lambda: "heartbeat" in caplog.text, timeout=5)
    pipe.send(end(5), trailer())
    pipe.close()
    assert mailbox.expect(is_terminal(command.ref), 2) == Exit(command.ref, 5)


# -- files and sessions -----------------------------------------------------------


def test_write_file_uploads_through_envd(rsps: responses.RequestsMock, e2b: E2B) -> None:
    running(rsps)
    rsps.add(
        responses.POST,
        f"{ENVD}/files",
        status=200,
        json=[{"path": "/work/file.txt", "name": "file.txt", "type": "file"}],
    )
    e2b.write_file(box(e2b), "/work/file.txt", b"hello")
    call = rsps.calls[-1]
    assert call.request.url == f"{ENVD}/files?path=%2Fwork%2Ffile.txt&username=user"
    assert call.request.headers["X-Access-Token"] == TOKEN
    assert b'name="file"; filename="file.txt"' in call.request.body
    assert b"\r\n\r\nhello\r\n" in call.request.body


def test_write_file_failures_are_mapped(rsps: responses.RequestsMock, e2b: E2B) -> None:
    running(rsps)
    rsps.add(responses.POST, f"{ENVD}/files", status=503, json={"code": 503, "message": "x"})
    with pytest.raises(Unavailable):
        e2b.write_file(box(e2b), "/work/file.txt", b"x")
    found(rsps)
    with pytest.raises(NotFound):
        e2b.write_file(box(e2b), "/work/file.txt", b"x")


def refused_by_envd(rsps: responses.RequestsMock, status: int = 500) -> None:
    """envd's answers to a path its user may not use: the 500 (Connect ``internal``) of
    a refused ``open`` on each file call, or a 403 (Connect ``permission_denied``)."""
    code = "internal" if status == 500 else "permission_denied"
    rsps.add(
        responses.GET,
        f"{ENVD}/files",
        status=status,
        json={"code": status, "message": "error opening file '/s': open /s: permission denied"},
    )
    rsps.add(
        responses.POST,
        f"{ENVD}/files",
        status=status,
        json={"code": status, "message": "error opening file: open /s: operation not permitted"},
    )
    rsps.add(
        responses.POST,
        f"{ENVD}/filesystem.Filesystem/ListDir",
        status=status,
        json={"code": code, "message": "error reading directory /s: open /s: permission denied"},
    )


@pytest.mark.parametrize("status", [500, 403])
def test_a_path_the_user_may_not_use_is_denied_naming_it(
    rsps: responses.RequestsMock, e2b: E2B, status: int
) -> None:
    running(rsps)
    refused_by_envd(rsps, status)
    operations = {
        "read_file": lambda: e2b.read_file(box(e2b), "/s"),
        "write_file": lambda: e2b.write_file(box(e2b), "/s", b"x"),
        "list_files": lambda: e2b.list_files(box(e2b), "/s"),
    }
    for name, call in operations.items():
        with pytest.raises(Denied) as raised:
            call()
        assert (raised.value.detail, raised.value.status) == (("path", "/s"), status), name


def test_a_refused_path_keeps_the_remembered_sandbox(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    running(rsps)
    refused_by_envd(rsps)
    for _ in range(2):
        with pytest.raises(Denied):
            e2b.read_file(box(e2b), "/s")
    assert [c.request.method for c in rsps.calls if LISTING.match(c.request.url or "")] == ["GET"]


def test_write_file_with_mode_runs_chmod(rsps: responses.RequestsMock, e2b: E2B) -> None:
    running(rsps)
    rsps.add(responses.POST, f"{ENVD}/files", status=204)
    stream(rsps, start(), end(0), trailer())
    e2b.write_file(box(e2b), "/work/key", b"x", mode=0o600)
    request = start_request(start_calls(rsps)[0])
    assert isinstance(request, dict)
    assert request["process"]["cmd"] == "chmod"
    # The absolute path is reached from a cwd of "/", which envd takes as a sandbox path.
    assert request["process"]["args"] == ["600", "--", "./work/key"]
    assert request["process"]["cwd"] == "/"


def test_a_failed_chmod_says_why(rsps: responses.RequestsMock, e2b: E2B) -> None:
    running(rsps)
    rsps.add(responses.POST, f"{ENVD}/files", status=204)
    said = "chmod: changing permissions of './work/key': Operation not permitted"
    stream(rsps, start(), stdout(said.encode() + b"\n"), end(1), trailer())
    with pytest.raises(Invalid) as caught:
        e2b.write_file(box(e2b), "/work/key", b"x", mode=0o600)
    assert caught.value.detail == ("chmod_failed", 1, said)


def test_list_sessions_parses_the_journal_listing(rsps: responses.RequestsMock, e2b: E2B) -> None:
    running(rsps)
    line = b"fountain-1a 1700000000 1700000005 " + base64.b64encode(b"bash -lc true") + b"\n"
    stream(rsps, start(), stdout(line + b"garbage\n"), end(0), trailer())
    [session] = e2b.list_sessions(box(e2b))
    assert session.id == "fountain-1a" and session.command == "bash -lc true"
    assert session.created_at is not None and session.created_at.timestamp() == 1700000000


def test_attach_to_an_unknown_session_is_not_found(rsps: responses.RequestsMock, e2b: E2B) -> None:
    running(rsps)
    rsps.add(responses.GET, f"{ENVD}/files", status=404, json={"code": 404, "message": "nope"})
    rsps.add(responses.POST, f"{ENVD}/process.Process/List", json={"processes": []})
    with pytest.raises(NotFound):
        e2b.attach(box(e2b), "fountain-42")
    with pytest.raises(NotFound):
        e2b.attach(box(e2b), "other-session")


def _session_files(rsps: responses.RequestsMock, exit_file: tuple[int, bytes]) -> None:
    """The session's .cmd exists; .exit answers ``exit_file`` (status, body)."""

    def files(request: object) -> tuple[int, dict[str, str], bytes]:
        url = getattr(request, "url", "")
        if "fountain-42.cmd" in url:
            return 200, {}, b"cat"
        return exit_file[0], {}, exit_file[1]

    rsps.add_callback(responses.GET, f"{ENVD}/files", callback=files)


def test_attach_replays_then_ends_with_the_journaled_exit(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    running(rsps)
    _session_files(rsps, (200, b"7\n"))
    stream(rsps, start(9), stdout(b"replayed"), end(0), trailer())
    mailbox = Mailbox()
    command = e2b.attach(box(e2b), "fountain-42", owner=mailbox)
    assert command.session_id == "fountain-42"
    assert mailbox.expect(is_terminal(command.ref), 2) == Exit(command.ref, 7)
    assert mailbox.history(command.ref)[0] == Stdout(command.ref, b"replayed")
    request = start_request(start_calls(rsps)[0])
    assert isinstance(request, dict)
    assert "tail -c +1" in request["process"]["args"][1]
    assert "\"$HOME\"/.fountain/'fountain-42'.out" in request["process"]["args"][1]
    assert [c.request.url for c in rsps.calls if "/files" in c.request.url][:2] == [
        f"{ENVD}/files?path=~%2F.fountain%2Ffountain-42.cmd&username=user",
        f"{ENVD}/files?path=~%2F.fountain%2Ffountain-42.exit&username=user",
    ]


def test_attach_closed_without_end_is_closed_before_exit_despite_the_exit_file(
    rsps: responses.RequestsMock, e2b: E2B
) -> None:
    running(rsps)
    _session_files(rsps, (200, b"17\n"))
    stream(rsps, start(9), stdout(b"replayed"), trailer())
    mailbox = Mailbox()
    command = e2b.attach(box(e2b), "fountain-42", owner=mailbox)
    assert mailbox.expect(is_terminal(command.ref), 2) == Error(
        command.ref, Unavailable(reasons.CLOSED_BEFORE_EXIT)
    )


@pytest.mark.parametrize("exit_file", [(404, b'{"code":404}'), (200, b"bad")])
def test_attach_without_a_readable_exit_file_never_invents_a_code(
    rsps: responses.RequestsMock, e2b: E2B, exit_file: tuple[int, bytes]
) -> None:
    running(rsps)
    _session_files(rsps, exit_file)
    stream(rsps, start(9), stdout(b"replayed"), end(4), trailer())
    mailbox = Mailbox()
    command = e2b.attach(box(e2b), "fountain-42", owner=mailbox)
    assert mailbox.expect(is_terminal(command.ref), 2) == Error(
        command.ref, Unavailable(reasons.CLOSED_BEFORE_EXIT)
    )


def test_attach_stdin_finds_the_original_pid_through_list(
    rsps: responses.RequestsMock, e2b: E2B, pipe: Pipe
) -> None:
    running(rsps)
    _session_files(rsps, (404, b"{}"))
    rsps.add(
        responses.POST,
        START_URL,
        body=pipe.reader,
        status=200,
        content_type="application/connect+json",
    )
    rsps.add(
        responses.POST,
        f"{ENVD}/process.Process/List",
        json={
            "processes": [
                {"pid": 3, "tag": "other", "config": {"cmd": "x"}},
                {"pid": 7, "tag": "fountain-42", "config": {"cmd": "bash"}},
            ]
        },
    )
    rsps.add(responses.POST, f"{ENVD}/process.Process/SendInput", json={})
    pipe.send(start(9))
    command = e2b.attach(box(e2b), "fountain-42", owner=Mailbox(), stdin=True)
    e2b.write_stdin(command, b"a")
    e2b.write_stdin(command, b"b")
    assert len(unary(rsps, "List")) == 1
    assert [json.loads(b)["process"] for b in unary(rsps, "SendInput")] == [
        {"pid": 7},
        {"pid": 7},
    ]
    pipe.close()
    e2b.stop_command(command)
