"""Cross-check: the vendor's own Python SDK (``e2b``) works against the emulator unchanged.

The SDK is pointed at the emulator as docs/protocols/e2b.md#pointing-the-sdk-here says:
``E2B_API_URL`` and ``E2B_SANDBOX_URL`` both at the emulator's base URL,
``E2B_DEBUG=false``, ``E2B_HTTP_VERSION=1.1``. If the vendor's client cannot
drive our emulator, the emulator is wrong.
"""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from managoat_sandbox.emulators.e2b import E2BEmulator

from ..conftest import wait_until
from ..handshake import e2b_gate
from .e2b_sdk import point_sdk

e2b = pytest.importorskip("e2b")
process_pb = pytest.importorskip("e2b.envd.process.process_pb")
envd_rpc = pytest.importorskip("e2b.envd.rpc")
connect_code = pytest.importorskip("connectrpc.code")
connect_errors = pytest.importorskip("connectrpc.errors")

pytestmark = pytest.mark.timeout(90)

KEY = "e2b_sdk_test_key"


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[E2BEmulator]:
    with E2BEmulator(credential=KEY, log_bodies=True) as running:
        point_sdk(monkeypatch, running, KEY)
        yield running  # type: ignore[misc]


@pytest.fixture
def sandbox(emulator: E2BEmulator) -> Iterator[Any]:
    created = e2b.Sandbox.create(metadata={"suite": "sdk"})
    yield created
    created.kill()


def test_create_answers_what_the_sdk_expects(emulator: E2BEmulator, sandbox: Any) -> None:
    info = sandbox.get_info()
    assert info.sandbox_id == sandbox.sandbox_id
    assert info.metadata == {"suite": "sdk"}
    assert str(info.state) == "running"
    created = [r for r in emulator.requests if r.method == "POST" and r.path == "/v2/sandboxes"]
    assert len(created) == 1 and created[0].json()["templateID"] == "base"


def test_a_command_runs_and_reports_output_and_exit_code(sandbox: Any) -> None:
    result = sandbox.commands.run("echo hello; echo oops >&2")
    assert (result.stdout, result.stderr, result.exit_code) == ("hello\n", "oops\n", 0)
    with pytest.raises(e2b.CommandExitException) as failure:
        sandbox.commands.run("echo partial; exit 3")
    assert failure.value.exit_code == 3 and failure.value.stdout == "partial\n"


def test_envs_reach_the_process_as_envd_writes_them(sandbox: Any) -> None:
    """envd writes each env as ``key=value``: a name holding ``=`` sets what precedes
    its first ``=``; a NUL in an env or an argument fails the start (Go's exec
    refuses it); none of it harms the sandbox."""
    assert sandbox.commands.run('echo "$A"', envs={"A=B": "1"}).stdout == "B=1\n"
    with pytest.raises(e2b.InvalidArgumentException):
        sandbox.commands.run("true", envs={"A": "x\0y"})
    with pytest.raises(e2b.InvalidArgumentException):
        sandbox.commands.run("echo 'a\0b'")
    assert sandbox.commands.run("echo alive").stdout == "alive\n"


def test_output_streams_to_callbacks_as_it_is_produced(emulator: E2BEmulator, sandbox: Any) -> None:
    gate = e2b_gate(emulator, sandbox.sandbox_id)
    chunks: list[str] = []
    errors: list[str] = []

    def on_stdout(chunk: str) -> None:
        # Each next line is written only once the callback has had the last one.
        chunks.append(chunk)
        gate.release()

    result = sandbox.commands.run(
        gate.script("echo line-1", "echo line-2", "echo line-3", "echo warn >&2"),
        on_stdout=on_stdout,
        on_stderr=errors.append,
    )
    assert "".join(chunks) == "line-1\nline-2\nline-3\n" == result.stdout
    assert len(chunks) == 3
    assert errors == ["warn\n"]


def test_stdin_reaches_a_background_command(sandbox: Any) -> None:
    handle = sandbox.commands.run("cat", background=True, stdin=True)
    sandbox.commands.send_stdin(handle.pid, "ping\n")
    handle.send_stdin("pong\n")
    sandbox.commands.close_stdin(handle.pid)
    result = handle.wait()
    assert result.stdout == "ping\npong\n" and result.exit_code == 0


def test_kill_ends_a_running_command(sandbox: Any) -> None:
    handle = sandbox.commands.run("sleep 30", background=True)
    assert handle.pid in [process.pid for process in sandbox.commands.list()]
    assert handle.kill() is True
    with pytest.raises(e2b.CommandExitException) as killed:
        handle.wait()
    assert killed.value.exit_code == -1
    assert wait_until(lambda: handle.pid not in [p.pid for p in sandbox.commands.list()])
    assert sandbox.commands.kill(handle.pid) is False


def test_connect_to_a_running_command_streams_new_output(sandbox: Any) -> None:
    handle = sandbox.commands.run(
        "read a; echo got-$a; read b; echo got-$b", background=True, stdin=True
    )
    handle.disconnect()
    attached = sandbox.commands.connect(handle.pid)
    sandbox.commands.send_stdin(handle.pid, "one\n")
    sandbox.commands.send_stdin(handle.pid, "two\n")
    assert attached.wait().stdout == "got-one\ngot-two\n"


def _pty_output(handle: Any) -> queue.SimpleQueue[bytes | None]:
    """The terminal's output as it comes, then None at the end of the stream."""
    chunks: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()

    def read() -> None:
        try:
            for _, _, pty in handle:
                if pty is not None:
                    chunks.put(pty)
        finally:
            chunks.put(None)

    threading.Thread(target=read, name="sdk-pty-reader", daemon=True).start()
    return chunks


def _read_until(chunks: queue.SimpleQueue[bytes | None], pattern: bytes) -> bytes:
    """The first group of the regex ``pattern`` in the output (fails at the stream's end
    or after 20 s without output)."""
    seen = b""
    while (found := re.search(pattern, seen)) is None:
        chunk = chunks.get(timeout=20)
        assert chunk is not None, seen
        seen += chunk
    return found.group(1)


def _read_to_end(chunks: queue.SimpleQueue[bytes | None]) -> None:
    """Wait for the stream's end (the shell exited), 20 s at most between outputs."""
    while chunks.get(timeout=20) is not None:
        pass


# The shell prints <...> around what it reports; `echo "<"x">"` shows no <x> when the
# terminal echoes the line typed, so the marker matches the command's output only.


def test_a_pty_starts_at_the_size_asked_and_update_resizes_it(sandbox: Any) -> None:
    handle = sandbox.pty.create(e2b.PtySize(rows=45, cols=123))
    chunks = _pty_output(handle)
    sandbox.pty.send_stdin(handle.pid, b'echo "<"$(stty size)">"\n')
    assert _read_until(chunks, rb"<(\d+ \d+)>") == b"45 123"
    sandbox.pty.resize(handle.pid, e2b.PtySize(rows=30, cols=100))
    sandbox.pty.send_stdin(handle.pid, b'echo "<"$(tput cols) $(stty size)">"; exit\n')
    assert _read_until(chunks, rb"<(\d+ \d+ \d+)>") == b"100 30 100"
    _read_to_end(chunks)


def test_a_pty_resize_signals_sigwinch(sandbox: Any) -> None:
    handle = sandbox.pty.create(e2b.PtySize(rows=24, cols=80))
    chunks = _pty_output(handle)
    sandbox.pty.send_stdin(
        handle.pid,
        b"""trap 'echo "<winch "$(stty size)">"; kill $!; exit' WINCH; echo "<"ready">"; """
        b"sleep 60 & wait\n",
    )
    assert _read_until(chunks, rb"<(ready)>") == b"ready"
    sandbox.pty.resize(handle.pid, e2b.PtySize(rows=50, cols=132))
    assert _read_until(chunks, rb"<winch (\d+ \d+)>") == b"50 132"
    _read_to_end(chunks)


def test_listing_filters_by_metadata_and_kill_removes_the_sandbox(emulator: E2BEmulator) -> None:
    tagged = e2b.Sandbox.create(metadata={"fountain_name": "sdk-a"})
    other = e2b.Sandbox.create()
    query = e2b.SandboxQuery(metadata={"fountain_name": "sdk-a"})
    found = e2b.Sandbox.list(query=query).next_items()
    assert [info.sandbox_id for info in found] == [tagged.sandbox_id]
    paginator = e2b.Sandbox.list(limit=1)
    seen = []
    while paginator.has_next:
        seen += [info.sandbox_id for info in paginator.next_items()]
    assert sorted(seen) == sorted([tagged.sandbox_id, other.sandbox_id])
    assert e2b.Sandbox.kill(tagged.sandbox_id) is True
    other.kill()
    assert e2b.Sandbox.list().next_items() == []
    assert e2b.Sandbox.kill(tagged.sandbox_id) is False


def test_files_write_and_read_through_the_sdk(emulator: E2BEmulator, sandbox: Any) -> None:
    info = sandbox.files.write("/home/user/dir/a.txt", "data")
    assert info.path == "/home/user/dir/a.txt"
    assert sandbox.files.read("/home/user/dir/a.txt") == "data"
    assert emulator.read_file(sandbox.sandbox_id, "/home/user/dir/a.txt") == b"data"


def test_files_read_gives_back_binary_content_byte_for_byte(
    emulator: E2BEmulator, sandbox: Any
) -> None:
    data = bytes(range(256)) * 1025 + b"\r\n\x00"
    emulator.write_file(sandbox.sandbox_id, "/tmp/blob.bin", data)
    read = sandbox.files.read("/tmp/blob.bin", format="bytes")
    assert bytes(read) == data
    streamed = b"".join(sandbox.files.read("/tmp/blob.bin", format="stream"))
    assert streamed == data


def test_files_read_of_a_missing_file_or_a_directory_raises_the_sdks_errors(sandbox: Any) -> None:
    with pytest.raises(e2b.FileNotFoundException):
        sandbox.files.read("/tmp/no-such-file")
    with pytest.raises(e2b.InvalidArgumentException):
        sandbox.files.read("/tmp")


def test_a_path_through_a_file_is_neither_missing_nor_invalid_to_the_sdk(sandbox: Any) -> None:
    """envd answers such a path with a 500 (Connect ``internal``), which the SDK
    raises as its generic error (docs/protocols/e2b.md#files-api)."""
    sandbox.files.write("/tmp/plain", b"x")
    for call in (sandbox.files.read, sandbox.files.list):
        with pytest.raises(e2b.SandboxException) as caught:
            call("/tmp/plain/below")
        assert type(caught.value) is e2b.SandboxException, caught.value
        assert str(caught.value).endswith("not a directory"), caught.value


def test_files_list_gives_each_entry_with_its_type_size_and_mode(
    emulator: E2BEmulator, sandbox: Any
) -> None:
    sandbox.files.write("/tmp/listed/three.txt", b"abc")
    sandbox.files.write("/tmp/listed/sub/inner.txt", b"inner")
    assert (
        sandbox.commands.run(
            "cd /tmp/listed && chmod 640 three.txt && ln -s three.txt link && mkfifo pipe"
        ).exit_code
        == 0
    )
    entries = {entry.name: entry for entry in sandbox.files.list("/tmp/listed")}
    # The SDK leaves out what envd reports without a type (the FIFO).
    assert sorted(entries) == ["link", "sub", "three.txt"]
    three, sub, link = entries["three.txt"], entries["sub"], entries["link"]
    assert (three.type, three.path, three.size) == (e2b.FileType.FILE, "/tmp/listed/three.txt", 3)
    assert (three.mode, three.permissions, three.owner) == (0o640, "-rw-r-----", "user")
    assert three.modified_time.tzinfo is not None
    assert (sub.type, sub.path) == (e2b.FileType.DIR, "/tmp/listed/sub")
    assert (link.type, link.symlink_target) == (e2b.FileType.SYMLINK, "/tmp/listed/three.txt")
    assert [(e.name, e.size) for e in sandbox.files.list("/tmp/listed/sub")] == [("inner.txt", 5)]
    deep = {entry.path for entry in sandbox.files.list("/tmp/listed", depth=2)}
    assert "/tmp/listed/sub/inner.txt" in deep
    with pytest.raises(e2b.FileNotFoundException):
        sandbox.files.list("/tmp/listed/missing")
    with pytest.raises(e2b.InvalidArgumentException):
        sandbox.files.list("/tmp/listed/three.txt")


def test_files_exists_and_get_info_use_stat(sandbox: Any) -> None:
    sandbox.files.write("/tmp/stat/file", b"12345")
    assert sandbox.files.exists("/tmp/stat/file") is True
    assert sandbox.files.exists("/tmp/stat/none") is False
    info = sandbox.files.get_info("/tmp/stat/file")
    assert (info.name, info.path, info.type, info.size) == (
        "file",
        "/tmp/stat/file",
        e2b.FileType.FILE,
        5,
    )


@pytest.mark.parametrize("octet_stream", [True, False])
def test_files_written_with_metadata_answer_it(sandbox: Any, octet_stream: bool) -> None:
    info = sandbox.files.write(
        "/home/user/meta.txt",
        "data",
        use_octet_stream=octet_stream,
        metadata={"Owner": "alice", "run-id": "7"},
    )
    assert info.metadata == {"owner": "alice", "run-id": "7"}
    assert sandbox.files.write("/home/user/plain.txt", "data").metadata is None


def test_pause_and_connect_resume_the_same_sandbox(sandbox: Any) -> None:
    handle = sandbox.commands.run("cat", background=True, stdin=True)
    assert sandbox.pause() is True
    assert str(sandbox.get_info().state) == "paused"
    resumed = e2b.Sandbox.connect(sandbox.sandbox_id)
    assert str(resumed.get_info().state) == "running"
    resumed.commands.send_stdin(handle.pid, "after\n")
    resumed.commands.close_stdin(handle.pid)
    assert resumed.commands.run("echo alive").stdout == "alive\n"


def test_timeout_and_network_updates_are_accepted(emulator: E2BEmulator, sandbox: Any) -> None:
    sandbox.set_timeout(60)
    sandbox.update_network({"allow_out": ["1.1.1.1"], "deny_out": ["0.0.0.0/0"]})
    network = emulator.record(sandbox.sandbox_id).network
    assert network == {"allowOut": ["1.1.1.1"], "denyOut": ["0.0.0.0/0"]}


def test_the_sdk_leaves_no_emulator_thread_behind(emulator: E2BEmulator) -> None:
    created = e2b.Sandbox.create()
    created.commands.run("true")
    created.kill()
    names = lambda: {t.name for t in threading.enumerate()}  # noqa: E731
    assert wait_until(lambda: not any(n.startswith("e2b-emulator-call") for n in names()))


def test_a_command_outliving_its_timeout_is_a_timeout_and_is_killed(sandbox: Any) -> None:
    handle = sandbox.commands.run("sleep 30", background=True, timeout=1)
    with pytest.raises(e2b.TimeoutException):
        handle.wait()
    assert wait_until(lambda: handle.pid not in [p.pid for p in sandbox.commands.list()])


def test_envd_ends_a_stream_past_its_deadline_with_deadline_exceeded(sandbox: Any) -> None:
    # The SDK's own client, with the deadline sent as a header only: the SDK must not time
    # out first, so what it raises is what envd answered.
    request = process_pb.StartRequest(process=process_pb.ProcessConfig(cmd="sleep", args=["30"]))
    events = sandbox.commands._rpc.start(request, headers={"Connect-Timeout-Ms": "300"})
    kinds = []
    with pytest.raises(connect_errors.ConnectError) as ended:
        for response in events:
            kinds.append(response.event.event.field)
    assert kinds == ["start"]
    assert ended.value.code == connect_code.Code.DEADLINE_EXCEEDED
    assert isinstance(envd_rpc.handle_rpc_exception(ended.value), e2b.TimeoutException)


def test_listing_started_after_a_sandboxs_own_start_lists_it(emulator: E2BEmulator) -> None:
    created = [e2b.Sandbox.create() for _ in range(3)]
    try:
        for sandbox in created:
            started = sandbox.get_info().started_at
            at = e2b.Sandbox.list(query=e2b.SandboxQuery(started_after=started)).next_items()
            assert sandbox.sandbox_id in [info.sandbox_id for info in at]
            later = e2b.SandboxQuery(started_after=started + timedelta(microseconds=1))
            assert sandbox.sandbox_id not in [
                info.sandbox_id for info in e2b.Sandbox.list(query=later).next_items()
            ]
    finally:
        for sandbox in created:
            sandbox.kill()


def test_a_sandbox_closed_to_public_traffic_carries_a_traffic_access_token(
    emulator: E2BEmulator,
) -> None:
    closed = e2b.Sandbox.create(network={"allow_public_traffic": False})
    public = e2b.Sandbox.create()
    try:
        token = closed.traffic_access_token
        assert isinstance(token, str) and token
        assert e2b.Sandbox.connect(closed.sandbox_id).traffic_access_token == token
        assert public.traffic_access_token is None
    finally:
        closed.kill()
        public.kill()
