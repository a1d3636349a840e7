"""The adapter remembers a name's sandbox and reuses envd connections.

Through the emulator: a second exec on a handle makes no lookup, a remembered
sandbox that went away or was paused behind our back is looked up again once
(and the command still runs exactly once), lifecycle calls keep the entry
true, and sequential execs share one TCP connection. Through ``responses``:
the 401 path, a refusal the lookup cannot explain, and a command that was
accepted is never sent twice.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
import responses

from managoat_sandbox import config
from managoat_sandbox._readers import Readers
from managoat_sandbox._requests_adapter import DirectAdapter
from managoat_sandbox.emulators._server import LoggedRequest as Request
from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.errors import Denied, Invalid, NotFound, Unavailable
from managoat_sandbox.providers.e2b import E2B
from managoat_sandbox.providers.e2b.handle import Carried
from managoat_sandbox.types import Handle, NetworkPolicy

from ..conftest import counted_connects
from . import wire
from .emulated import point_at

pytestmark = pytest.mark.timeout(60)

START = "/process.Process/Start"
LISTING = "/v2/sandboxes"


@pytest.fixture
def e2b(emulator: E2BEmulator) -> E2B:
    point_at(emulator)
    emulator.faults.clear()
    return E2B()


@pytest.fixture
def handle(e2b: E2B) -> Iterator[Handle]:
    created = e2b.create(f"remembered-{time.monotonic_ns()}")
    yield created
    e2b.destroy(created)


def since(emulator: E2BEmulator, mark: int) -> list[Request]:
    return list(emulator.requests[mark:])


def paths(requests: list[Request]) -> list[str]:
    return [r.path for r in requests]


def sandbox_of(request: Request) -> str | None:
    return {k.lower(): v for k, v in request.headers.items()}.get("e2b-sandbox-id")


def current_id(e2b: E2B, handle: Handle) -> str:
    raw = e2b.get(handle).raw
    assert isinstance(raw, dict)
    return str(raw["sandboxID"])


RUN_ONCE = ("bash", ["-c", "echo run >> ran.txt; cat ran.txt"])


# -- no lookup while the sandbox is remembered ------------------------------------------------


def test_a_second_exec_on_a_handle_rebuilt_from_its_name_makes_no_lookup(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    fresh = E2B()
    rebuilt = fresh.build_handle(handle.name)
    mark = len(emulator.requests)
    assert fresh.exec(rebuilt, "bash", ["-c", "echo one"]) == (b"one\n", 0)
    first = since(emulator, mark)
    assert paths(first)[0] == LISTING and paths(first)[-1] == START
    mark = len(emulator.requests)
    assert fresh.exec(rebuilt, "bash", ["-c", "echo two"]) == (b"two\n", 0)
    assert paths(since(emulator, mark)) == [START]


def test_spawn_write_file_and_list_sessions_use_the_remembered_sandbox(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    e2b.exec(handle, "true")
    mark = len(emulator.requests)
    e2b.write_file(handle, "remembered.txt", b"x")
    e2b.list_sessions(handle)
    command = e2b.spawn(handle, "true")
    e2b.stop_command(command)
    assert LISTING not in paths(since(emulator, mark))


def test_envds_own_refusals_leave_the_sandbox_remembered(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    """A missing file, a directory read as a file or a path through a file is envd's
    answer about the request: the next operation still needs no lookup."""
    e2b.write_file(handle, "/tmp/plain", b"x")
    mark = len(emulator.requests)
    for path, error in (
        ("/tmp/none", NotFound),
        ("/tmp", Invalid),
        ("/tmp/plain/below", Invalid),
    ):
        with pytest.raises(error):
            e2b.read_file(handle, path)
    assert e2b.exec(handle, "true").exit_code == 0
    assert LISTING not in paths(since(emulator, mark))


# -- a stale entry is looked up again, once, before anything is dispatched --------------------


def test_a_sandbox_recreated_elsewhere_is_looked_up_once_and_the_command_runs_once(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    e2b.exec(handle, "true")
    old = current_id(e2b, handle)
    other = E2B()
    other.destroy(handle)
    new = sandbox_of_created(other, handle.name)
    assert new != old
    mark = len(emulator.requests)
    assert e2b.exec(handle, *RUN_ONCE) == (b"run\n", 0)
    seen = since(emulator, mark)
    assert paths(seen) == [START, LISTING, f"/sandboxes/{new}", START]
    assert [sandbox_of(r) for r in seen if r.path == START] == [old, new]


def sandbox_of_created(adapter: E2B, name: str) -> str:
    created = adapter.create(name)
    assert isinstance(created.private, Carried) and created.private.sandbox_id is not None
    return created.private.sandbox_id


def test_a_sandbox_paused_behind_our_back_is_resumed_then_the_command_runs_once(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    ident = current_id(e2b, handle)
    e2b.apply_network_policy(handle, NetworkPolicy(allow=["example.com"]))
    e2b.exec(handle, "true")
    emulator.pause(ident)
    mark = len(emulator.requests)
    assert e2b.exec(handle, *RUN_ONCE) == (b"run\n", 0)
    seen = since(emulator, mark)
    assert [(r.method, r.path) for r in seen] == [
        ("POST", START),
        ("GET", LISTING),
        ("POST", f"/v2/sandboxes/{ident}/connect"),
        ("PUT", f"/sandboxes/{ident}/network"),
        ("POST", START),
    ]
    assert json.loads(seen[3].body)["allowOut"] == ["example.com"]
    assert e2b.get(handle).status == "running"


def test_a_remembered_sandbox_that_is_gone_is_not_found(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    e2b.exec(handle, "true")
    E2B().destroy(handle)
    mark = len(emulator.requests)
    with pytest.raises(NotFound):
        e2b.exec(handle, "true")
    assert paths(since(emulator, mark)) == [START, LISTING]


def test_a_proxy_502_that_a_lookup_cannot_explain_stands(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    e2b.exec(handle, "true")
    emulator.server_error(502, path=r"/process\.Process/Start$")
    mark = len(emulator.requests)
    with pytest.raises(Unavailable) as caught:
        e2b.exec(handle, "true")
    assert caught.value.detail[:2] == ("http", 502)
    assert paths(since(emulator, mark)).count(START) == 1


# -- lifecycle calls keep the entry true -------------------------------------------------------


def test_suspend_forgets_so_the_next_exec_resumes_before_envd(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    ident = current_id(e2b, handle)
    e2b.exec(handle, "true")
    e2b.suspend(handle)
    mark = len(emulator.requests)
    assert e2b.exec(handle, "true") == (b"", 0)
    assert paths(since(emulator, mark)) == [LISTING, f"/v2/sandboxes/{ident}/connect", START]


def test_destroy_and_create_replace_the_entry(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    e2b.exec(handle, "true")
    e2b.destroy(handle)
    created = e2b.create(handle.name)
    mark = len(emulator.requests)
    assert e2b.exec(created, "true") == (b"", 0)
    [start] = since(emulator, mark)
    assert start.path == START and sandbox_of(start) == created.private.sandbox_id


# -- connection reuse --------------------------------------------------------------------------


def test_sequential_execs_reuse_one_connection(e2b: E2B, handle: Handle) -> None:
    assert e2b.exec(handle, "true") == (b"", 0)
    with counted_connects() as connects:
        assert e2b.exec(handle, "bash", ["-c", "echo a"]) == (b"a\n", 0)
        assert e2b.exec(handle, "bash", ["-c", "echo b"]) == (b"b\n", 0)
    assert connects == []


def test_a_spawned_commands_exit_comes_once_its_connection_is_back_in_the_pool(
    e2b: E2B, handle: Handle
) -> None:
    """The reader lets go of the stream before it delivers the exit, so a caller that
    sends its next request on seeing it (without ``stop_command``) reuses the
    connection. The command is read by one of the adapter's kept readers."""
    assert e2b.exec(handle, "true") == (b"", 0)
    exited = threading.Event()

    def owner(frame: object) -> None:
        if getattr(frame, "terminal", False):
            exited.set()

    with (
        counted_connects() as connects,
        mock.patch.object(Readers, "run", autospec=True, side_effect=Readers.run) as run,
    ):
        for _ in range(2):
            exited.clear()
            command = e2b.spawn(handle, "bash", ["-c", "echo x"], owner=owner)
            assert exited.wait(30)
            assert e2b.exec(handle, "true") == (b"", 0)
            e2b.stop_command(command)
    assert connects == []
    assert run.call_count == 2


def test_envd_requests_take_the_direct_path_and_responses_still_sees_them(
    e2b: E2B, handle: Handle
) -> None:
    """Through the default transport an exec's ``Start`` is sent without a prepared
    request (``DirectAdapter.send_plain``); with ``responses`` active it is prepared
    and handed to ``HTTPAdapter.send``, so the mock answers it."""
    real = DirectAdapter.send_plain
    with mock.patch.object(DirectAdapter, "send_plain", autospec=True, side_effect=real) as sent:
        assert e2b.exec(handle, "bash", ["-c", "echo direct"]) == (b"direct\n", 0)
    assert [call.args[1].url.rsplit("/", 1)[1] for call in sent.call_args_list] == ["Start"]
    mocked = E2B()
    with (
        config.override("e2b", api_key=wire.API_KEY, base_url=wire.API, sandbox_url=None),
        responses.RequestsMock() as rsps,
    ):
        wire.running(rsps)
        wire.stream(rsps, wire.start(), wire.stdout(b"mocked"), wire.end(0), wire.trailer())
        assert mocked.exec(mocked.build_handle("box"), "true") == (b"mocked", 0)


def test_a_missing_trailer_after_end_delays_the_exit_only_briefly(
    e2b: E2B, handle: Handle, emulator: E2BEmulator
) -> None:
    e2b.exec(handle, "true")
    emulator.stream_fault("hang", after=2)  # start, end, then silence: no end of stream
    started = time.monotonic()
    assert e2b.exec(handle, "true", timeout=5.0) == (b"", 0)
    assert time.monotonic() - started < 4.0
    assert e2b.exec(handle, "true") == (b"", 0)


# -- through responses: tokens, and nothing accepted is sent twice -----------------------------


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    wire.configure()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock_:
        yield mock_


Answer = tuple[int, dict[str, str], bytes]


def answers(rsps: responses.RequestsMock, method: str, url: str, *replies: Answer) -> None:
    """``url`` answers ``replies`` in order, the last one from then on."""
    queue = list(replies)

    def reply(request: Any) -> Answer:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    rsps.add_callback(method, url, callback=reply)


def ok_stream() -> Answer:
    return (
        200,
        {"Content-Type": "application/connect+json"},
        wire.start() + wire.stdout(b"ran") + wire.end(0) + wire.trailer(),
    )


def detail(token: str, sandbox_id: str = "sbx1") -> Answer:
    return 200, {}, json.dumps(wire.sandbox(sandbox_id, token=token)).encode()


UNAUTHORIZED: Answer = (401, {}, b'{"code":401,"message":"unauthorized access"}')
LISTED: Answer = (200, {}, json.dumps([wire.item()]).encode())


def urls(rsps: responses.RequestsMock, mark: int) -> list[str]:
    return [c.request.url.split("?")[0] for c in rsps.calls[mark:]]


def remembered() -> E2B:
    """An adapter that has run one exec on ``box`` (so it remembers sbx1)."""
    e2b = E2B()
    assert e2b.exec(e2b.build_handle("box"), "true") == (b"ran", 0)
    return e2b


def test_a_401_for_a_remembered_token_fetches_a_new_one_and_runs_once(
    rsps: responses.RequestsMock,
) -> None:
    rsps.add_callback(responses.GET, wire.LISTING, callback=lambda _: LISTED)
    answers(rsps, responses.GET, f"{wire.API}/sandboxes/sbx1", detail(wire.TOKEN), detail("fresh"))
    answers(rsps, responses.POST, wire.START_URL, ok_stream(), UNAUTHORIZED, ok_stream())
    e2b = remembered()
    mark = len(rsps.calls)
    assert e2b.exec(e2b.build_handle("box"), "true") == (b"ran", 0)
    assert urls(rsps, mark) == [
        wire.START_URL,
        f"{wire.API}/v2/sandboxes",
        f"{wire.API}/sandboxes/sbx1",
        wire.START_URL,
    ]
    assert rsps.calls[-1].request.headers["X-Access-Token"] == "fresh"


def test_a_401_that_a_new_lookup_cannot_explain_stands(rsps: responses.RequestsMock) -> None:
    rsps.add_callback(responses.GET, wire.LISTING, callback=lambda _: LISTED)
    answers(rsps, responses.GET, f"{wire.API}/sandboxes/sbx1", detail(wire.TOKEN))
    answers(rsps, responses.POST, wire.START_URL, ok_stream(), UNAUTHORIZED)
    e2b = remembered()
    mark = len(rsps.calls)
    with pytest.raises(Denied):
        e2b.exec(e2b.build_handle("box"), "true")
    assert urls(rsps, mark).count(wire.START_URL) == 1


def test_the_lookup_is_retried_once_only(rsps: responses.RequestsMock) -> None:
    gone = (
        502,
        {},
        json.dumps(
            {"sandboxId": "sbx1", "message": "The sandbox was not found", "code": 502}
        ).encode(),
    )
    moved = (
        502,
        {},
        json.dumps(
            {"sandboxId": "sbx2", "message": "The sandbox was not found", "code": 502}
        ).encode(),
    )
    answers(
        rsps,
        responses.GET,
        wire.LISTING,
        LISTED,
        (200, {}, json.dumps([wire.item("sbx2")]).encode()),
    )
    rsps.add_callback(
        responses.GET, f"{wire.API}/sandboxes/sbx1", callback=lambda _: detail(wire.TOKEN)
    )
    rsps.add_callback(
        responses.GET, f"{wire.API}/sandboxes/sbx2", callback=lambda _: detail(wire.TOKEN, "sbx2")
    )
    answers(rsps, responses.POST, wire.START_URL, ok_stream(), gone)
    answers(rsps, responses.POST, "https://49983-sbx2.test/process.Process/Start", moved)
    e2b = remembered()
    mark = len(rsps.calls)
    with pytest.raises(Unavailable) as caught:
        e2b.exec(e2b.build_handle("box"), "true")
    assert caught.value.detail[:2] == ("http", 502)
    assert [u for u in urls(rsps, mark) if u.endswith("/Start")] == [
        wire.START_URL,
        "https://49983-sbx2.test/process.Process/Start",
    ]


def test_a_start_that_was_accepted_is_never_sent_again(rsps: responses.RequestsMock) -> None:
    rejected_inside = (
        200,
        {"Content-Type": "application/connect+json"},
        wire.trailer({"code": "unauthenticated", "message": "invalid username"}),
    )
    rsps.add_callback(responses.GET, wire.LISTING, callback=lambda _: LISTED)
    answers(rsps, responses.GET, f"{wire.API}/sandboxes/sbx1", detail(wire.TOKEN), detail("fresh"))
    answers(rsps, responses.POST, wire.START_URL, ok_stream(), rejected_inside, ok_stream())
    e2b = remembered()
    mark = len(rsps.calls)
    with pytest.raises(Denied):
        e2b.exec(e2b.build_handle("box"), "true")
    assert urls(rsps, mark) == [wire.START_URL]
