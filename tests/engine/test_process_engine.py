"""Tests for the process engine: real supervisors, real processes, real files.

Nothing here sleeps to win a race: every wait is on a condition with a
deadline. Sessions still running when a test ends are killed by the fixture.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from managoat_sandbox import _engine as engine
from managoat_sandbox._engine import (
    STDERR,
    STDOUT,
    EngineError,
    Exited,
    JournalReader,
    Lost,
    Output,
    ProcessExited,
    Running,
    StdinNotOpen,
    StdinWriter,
)

REPO = Path(__file__).resolve().parents[2]
Launch = Callable[..., Path]


def wait_until(predicate: Callable[[], object], timeout: float = 10.0) -> None:
    """Poll ``predicate`` every 10 ms until it is true; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        pause.wait(0.01)


def run_to_end(session_dir: Path, timeout: float = 15.0) -> tuple[bytes, bytes, Exited | Lost]:
    """Follow a session to its end: (stdout, stderr, terminal event)."""
    stop = threading.Event()
    timer = threading.Timer(timeout, stop.set)
    timer.start()
    out, err = bytearray(), bytearray()
    end: Exited | Lost | None = None
    try:
        for event in engine.follow(session_dir, stop=stop):
            assert end is None, "event after the terminal event"
            if isinstance(event, Output):
                (out if event.stream == STDOUT else err).extend(event.data)
            else:
                end = event
    finally:
        timer.cancel()
    assert end is not None, "session did not end in time"
    return bytes(out), bytes(err), end


class Follower:
    """Follows a session on a thread, collecting its events."""

    def __init__(self, session_dir: Path) -> None:
        self.stop = threading.Event()
        self.events: list[Any] = []
        self._dir = session_dir
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for event in engine.follow(self._dir, stop=self.stop):
            self.events.append(event)

    def stdout(self) -> bytes:
        return b"".join(e.data for e in list(self.events) if isinstance(e, Output))

    def join(self, timeout: float = 10.0) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "follower did not finish"


def children_of(pid: int) -> set[int]:
    """Pids whose parent is ``pid`` (any state, zombies included), from /proc."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            found.add(int(entry))
    return found


def process_state(pid: int | None) -> str:
    """The one-letter state of ``pid`` from /proc (R, S, T, Z...)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def journal_size(session_dir: Path) -> int:
    return (session_dir / "journal").stat().st_size


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Launch]:
    """Start sessions under ``tmp_path``; kill whatever still runs at teardown."""
    started: list[Path] = []

    def _launch(argv: list[str], name: str | None = None, **kwargs: Any) -> Path:
        session_dir = tmp_path / (name or f"session{len(started)}")
        engine.start(session_dir, argv, **kwargs)
        started.append(session_dir)
        return session_dir

    yield _launch
    for session_dir in started:
        if isinstance(engine.status(session_dir), Running):
            engine.terminate(session_dir, force=True, timeout=5)


def test_streams_keep_their_bytes(launch: Launch) -> None:
    # Writes to two pipes microseconds apart reach the supervisor together, so
    # their cross-stream order is not observable; it is tested stepwise below.
    out, err, end = run_to_end(launch(["bash", "-c", "echo a; echo b >&2; echo c"]))
    assert (out, err, end) == (b"a\nc\n", b"b\n", Exited(0))


def test_output_order_across_streams(launch: Launch) -> None:
    # Each echo waits for the previous line to be journaled (via stdin).
    script = "echo a; read -r _; echo b >&2; read -r _; echo c"
    session = launch(["bash", "-c", script], stdin=True)
    records: list[tuple[int, bytes]] = []
    stop = threading.Event()
    timer = threading.Timer(15, stop.set)
    timer.start()
    try:
        for event in engine.follow(session, stop=stop):
            if isinstance(event, Output):
                records.append((event.stream, event.data))
                if event.data in (b"a\n", b"b\n"):
                    engine.write_stdin(session, b"\n")
            else:
                assert event == Exited(0)
    finally:
        timer.cancel()
    assert records == [(STDOUT, b"a\n"), (STDERR, b"b\n"), (STDOUT, b"c\n")]


@pytest.mark.parametrize(("argv", "code"), [(["true"], 0), (["bash", "-c", "exit 3"], 3)])
def test_exit_codes(launch: Launch, argv: list[str], code: int) -> None:
    session = launch(argv)
    assert run_to_end(session)[2] == Exited(code)
    assert engine.status(session) == Exited(code)


def test_missing_program_exits_127(launch: Launch) -> None:
    session = launch(["no-such-program-for-the-engine"])
    info = engine.read_process(session)
    assert info is not None and info.pid is None
    _, err, end = run_to_end(session)
    assert end == Exited(127)
    assert b"no-such-program-for-the-engine" in err


def test_unexecutable_program_exits_126(launch: Launch, tmp_path: Path) -> None:
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    assert run_to_end(launch([str(script)]))[2] == Exited(126)


def test_force_terminate_is_137(launch: Launch) -> None:
    session = launch(["sleep", "100"])
    assert engine.terminate(session, force=True, timeout=10) == 137
    assert engine.status(session) == Exited(137, signal.SIGKILL)


def test_graceful_terminate_is_143(launch: Launch) -> None:
    session = launch(["sleep", "100"])
    assert engine.terminate(session, timeout=10) == 143
    assert engine.terminate(session, timeout=10) == 143
    assert not engine.signal_group(session, signal.SIGTERM)


def test_graceful_terminate_runs_trap(launch: Launch) -> None:
    script = 'trap "exit 7" TERM; echo ready; while :; do sleep 0.05; done'
    session = launch(["bash", "-c", script])
    wait_until(lambda: engine.read_all(session)[0])
    assert engine.terminate(session, timeout=10) == 7


def test_sigterm_to_supervisor_is_forwarded(launch: Launch) -> None:
    session = launch(["sleep", "100"])
    info = engine.read_process(session)
    assert info is not None
    os.kill(info.supervisor_pid, signal.SIGTERM)
    assert run_to_end(session)[2] == Exited(143, signal.SIGTERM)


def test_replay_from_zero_then_tail(launch: Launch) -> None:
    session = launch(["cat"], stdin=True)
    first = Follower(session)
    engine.write_stdin(session, b"hello\n")
    wait_until(lambda: first.stdout() == b"hello\n")
    second = Follower(session)
    wait_until(lambda: second.stdout() == b"hello\n")
    engine.write_stdin(session, b"world\n")
    wait_until(lambda: first.stdout() == second.stdout() == b"hello\nworld\n")
    engine.close_stdin(session)
    for follower in (first, second):
        follower.join()
        assert follower.events[-1] == Exited(0)
        assert sum(not isinstance(e, Output) for e in follower.events) == 1


def test_stdin_errors(launch: Launch) -> None:
    session = launch(["cat"], stdin=True)
    with StdinWriter(session) as writer:
        writer.write(b"x" * 3_000_000)
        writer.close_stdin()
        writer.close_stdin()
        out, _, end = run_to_end(session)
        assert (len(out), end) == (3_000_000, Exited(0))
        with pytest.raises(ProcessExited):
            writer.write(b"after exit")
    with pytest.raises(ProcessExited):
        engine.write_stdin(session, b"after exit")
    with pytest.raises(ProcessExited):
        StdinWriter(session)
    engine.close_stdin(session)

    no_stdin = launch(["sleep", "100"])
    with pytest.raises(StdinNotOpen):
        engine.write_stdin(no_stdin, b"data")
    with pytest.raises(StdinNotOpen):
        engine.close_stdin(no_stdin)


def test_write_after_close_while_running(launch: Launch) -> None:
    session = launch(["bash", "-c", "cat >/dev/null; echo closed; sleep 100"], stdin=True)
    engine.write_stdin(session, b"ignored\n")
    engine.close_stdin(session)
    wait_until(lambda: engine.read_all(session)[0])
    assert isinstance(engine.status(session), Running)
    with pytest.raises(StdinNotOpen):
        engine.write_stdin(session, b"more")
    with StdinWriter(session) as writer, pytest.raises(StdinNotOpen):
        writer.write(b"more")
    engine.close_stdin(session)


def test_writes_arrive_in_order(launch: Launch) -> None:
    session = launch(["cat"], stdin=True)
    chunks = [f"{i:05d}\n".encode() for i in range(300)]
    with StdinWriter(session, timeout=10) as writer:
        for chunk in chunks[:150]:
            writer.write(chunk)
    for chunk in chunks[150:]:
        engine.write_stdin(session, chunk)
    engine.close_stdin(session)
    assert run_to_end(session)[:1] == (b"".join(chunks),)


def test_supervisor_killed_is_lost(launch: Launch) -> None:
    session = launch(["bash", "-c", "echo started; exec sleep 100"], stdin=True)
    info = engine.read_process(session)
    assert info is not None and info.pgid is not None
    try:
        wait_until(lambda: engine.read_all(session)[0])
        os.kill(info.supervisor_pid, signal.SIGKILL)
        out, _, end = run_to_end(session)
        assert (out, end) == (b"started\n", Lost())
        assert engine.status(session) == Lost()
        assert engine.read_all(session)[1] == Lost()
        assert not engine.signal_group(session, signal.SIGTERM)
        assert engine.terminate(session, timeout=0.1) is None
        with pytest.raises(ProcessExited):
            engine.write_stdin(session, b"x")
        engine.close_stdin(session)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(info.pgid, signal.SIGKILL)


def test_cross_process_start_then_follow(tmp_path: Path) -> None:
    session = tmp_path / "cross"
    code = (
        "import sys; from pathlib import Path; from managoat_sandbox import _engine as e; "
        "e.start(Path(sys.argv[1]), ['bash', '-c', "
        "'read -r line; echo \"got $line\"; echo err >&2; exit 5'], stdin=True)"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", code, str(session)], env=env, check=True, timeout=30)
    assert isinstance(engine.status(session), Running)
    engine.write_stdin(session, b"it\n")
    assert run_to_end(session) == (b"got it\n", b"err\n", Exited(5))
    assert engine.read_all(session) == (
        [Output(STDOUT, b"got it\n"), Output(STDERR, b"err\n")],
        Exited(5),
    )


def test_tty(launch: Launch) -> None:
    script = "[ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo yes; echo err >&2"
    out, err, end = run_to_end(launch(["bash", "-c", script], tty=True))
    assert (out.replace(b"\r\n", b"\n"), err, end) == (b"yes\nerr\n", b"", Exited(0))


@pytest.mark.parametrize("attempt", range(3))
def test_tty_stdin_and_eof(launch: Launch, attempt: int) -> None:
    # Repeated: a pty master closed as the child exits would SIGHUP it (129).
    session = launch(["cat"], tty=True, stdin=True)
    engine.write_stdin(session, b"hi\n")
    engine.close_stdin(session)
    out, err, end = run_to_end(session)
    assert (out, err, end) == (b"hi\r\nhi\r\n", b"", Exited(0))


def test_suspend_and_resume(launch: Launch) -> None:
    session = launch(["bash", "-c", "while :; do echo x; sleep 0.05; done"])
    wait_until(lambda: journal_size(session) > 0)
    info = engine.read_process(session)
    assert info is not None
    pause = threading.Event()
    assert engine.suspend(session)
    wait_until(lambda: process_state(info.pid) == "T")
    pause.wait(0.15)
    stopped_size = journal_size(session)
    pause.wait(0.3)
    assert journal_size(session) == stopped_size
    assert isinstance(engine.status(session), Running)
    assert engine.resume(session)
    wait_until(lambda: journal_size(session) > stopped_size)
    assert engine.suspend(session)
    assert engine.terminate(session, timeout=10) == 143


def test_large_output_integrity(launch: Launch, tmp_path: Path) -> None:
    blob = tmp_path / "blob"
    blob.write_bytes(os.urandom(5_000_000))
    out, err, end = run_to_end(launch(["cat", str(blob)]), timeout=30)
    assert (err, end) == (b"", Exited(0))
    assert hashlib.sha256(out).digest() == hashlib.sha256(blob.read_bytes()).digest()


def test_long_session_path_supports_stdin(launch: Launch, tmp_path: Path) -> None:
    name = os.path.join("d" * 60, "e" * 60, "session")
    session = launch(["cat"], name=name, stdin=True)
    assert len(os.fsencode(session / "stdin.sock")) > 110
    with StdinWriter(session) as writer:
        writer.write(b"long\n")
    engine.write_stdin(session, b"path\n")
    engine.close_stdin(session)
    assert run_to_end(session) == (b"long\npath\n", b"", Exited(0))


def test_no_zombies_or_children_left(launch: Launch) -> None:
    before = children_of(os.getpid())
    for i in range(10):
        assert run_to_end(launch(["bash", "-c", f"exit {i}"]))[2] == Exited(i)
    assert children_of(os.getpid()) == before


def test_descendant_holding_pipes_does_not_block_exit(launch: Launch) -> None:
    session = launch(["bash", "-c", "sleep 30 & echo hi"])
    info = engine.read_process(session)
    assert info is not None and info.pgid is not None
    try:
        assert run_to_end(session, timeout=5) == (b"hi\n", b"", Exited(0))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(info.pgid, signal.SIGKILL)


def test_spec_env_cwd_and_metadata(launch: Launch, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("ENGINE_TEST_INHERITED", "yes")
    before = datetime.now(timezone.utc)
    session = launch(
        ["bash", "-c", 'echo "$FOO:${ENGINE_TEST_INHERITED:-}"; pwd'],
        env={"FOO": "bar"},
        cwd=tmp_path,
        stdin=True,
    )
    spec = engine.read_spec(session)
    assert spec.argv[0] == "bash" and spec.stdin and not spec.tty
    assert spec.cwd == tmp_path
    assert before <= spec.created_at <= datetime.now(timezone.utc)
    out, _, end = run_to_end(session)
    assert (out, end) == (f"bar:yes\n{tmp_path}\n".encode(), Exited(0))
    assert engine.last_activity(session) >= spec.created_at
    assert not (session / "launch.json").exists()
    wait_until(lambda: not engine.supervisor_alive(session))
    assert not (session / "stdin.sock").exists()

    bare = launch(["bash", "-c", 'echo "${ENGINE_TEST_INHERITED:-unset} $PATH"'], inherit_env=False)
    out = run_to_end(bare)[0]
    assert out.startswith(b"unset /")

    with pytest.raises(FileExistsError):
        engine.start(session, ["true"])
    with pytest.raises(FileNotFoundError):
        engine.status(tmp_path)


def test_read_all_while_running(launch: Launch) -> None:
    session = launch(["bash", "-c", "echo one; exec sleep 100"])
    wait_until(lambda: engine.read_all(session)[0])
    assert engine.read_all(session) == ([Output(STDOUT, b"one\n")], None)
    assert engine.supervisor_alive(session)


def test_follow_returns_promptly_on_stop(launch: Launch) -> None:
    follower = Follower(launch(["sleep", "100"]))
    follower.stop.set()
    follower.join(timeout=2)
    assert follower.events == []


def test_journal_reader_waits_for_partial_record(tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    record = b"\x01\x00\x00\x00\x05hello" + b"\x01\x00\x00\x00\x01!" + b"\x02\x00\x00\x00\x02ab"
    journal.write_bytes(record[:7])
    with JournalReader(tmp_path) as reader:
        assert reader.read() == []
        with journal.open("ab") as f:
            f.write(record[7:])
        assert reader.read() == [Output(STDOUT, b"hello!"), Output(STDERR, b"ab")]
        assert reader.offset == len(record)
        with journal.open("ab") as f:
            f.write(b"\x07\x00\x00\x00\x00")
        with pytest.raises(EngineError):
            reader.read()
