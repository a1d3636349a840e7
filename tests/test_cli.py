"""The command line, in-process on a registered Fake (and twice as a real process)."""

from __future__ import annotations

import base64
import io
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox import config, reasons
from managoat_sandbox._cli.render import frame_document
from managoat_sandbox._cli.streaming import exit_status
from managoat_sandbox.cli import main
from managoat_sandbox.errors import WriteFailed
from managoat_sandbox.frames import Stderr, Stdout
from managoat_sandbox.testing import Fake
from managoat_sandbox.types import FileInfo, Handle, Info, NetworkPolicy

from .conftest import wait_until

ROOT = Path(__file__).resolve().parents[1]
Feed = Callable[[bytes], None]


@pytest.fixture
def fake() -> Iterator[Fake]:
    instance = Fake()
    config.configure(adapters={"fake": instance})
    yield instance
    instance.reset()


@pytest.fixture
def feed(monkeypatch: pytest.MonkeyPatch) -> Feed:
    """Replace stdin with the given bytes (then EOF)."""

    def set_stdin(data: bytes) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))

    return set_stdin


def cli(*argv: str) -> int:
    return main(["-p", "fake", *argv])


def lines(text: str) -> list[str]:
    return text.splitlines()


def only_session(handle: Handle) -> str:
    [session] = sandbox.list_sessions(handle)
    return session.id


# -- lifecycle ----------------------------------------------------------------


def test_create_get_list_destroy(fake: Fake, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("create", "box") == 0
    assert cli("create", "app") == 0
    assert cli("get", "box") == 0
    assert cli("list") == 0
    assert cli("destroy", "box") == 0
    assert capsys.readouterr().out == "box\napp\nrunning\napp\nbox\n"
    assert cli("get", "box") == 1
    assert capsys.readouterr().err == "managoat-sandbox: error: NotFound: ('sandbox', 'box')\n"
    assert cli("destroy", "box") == 0  # already gone is fine


def test_create_new_prints_the_instance_id_and_never_adopts(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("create", "--new", "job") == 0
    instance_id = capsys.readouterr().out.strip()
    assert instance_id.startswith("fake-")
    assert cli("create", "--new", "job") == 1
    assert "error: AlreadyExists: ('sandbox', 'job')" in capsys.readouterr().err


def test_suspend_and_resume(fake: Fake, capsys: pytest.CaptureFixture[str]) -> None:
    cli("create", "box")
    assert cli("suspend", "box") == 0
    cli("get", "box")
    assert cli("resume", "box") == 0
    cli("get", "box")
    assert lines(capsys.readouterr().out) == ["box", "suspended", "running"]


def test_get_never_prints_the_providers_raw_answer(capsys: pytest.CaptureFixture[str]) -> None:
    class Leaky(Fake):
        def get(self, handle: Handle) -> Info:
            return Info(status="running", raw={"envdAccessToken": "s3cret-token"})

    config.configure(adapters={"fake": Leaky()})
    assert cli("get", "box") == 0
    assert cli("--json", "get", "box") == 0
    captured = capsys.readouterr()
    assert "s3cret" not in captured.out + captured.err
    assert json.loads(lines(captured.out)[1]) == {
        "provider": "fake",
        "name": "box",
        "status": "running",
    }


def test_get_says_which_isolation_a_local_sandbox_runs_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config.configure("local", root=str(tmp_path))
    for mode, expected in (("off", "none"), ("auto", None)):
        config.configure("local", isolation=mode)
        name = f"box-{mode}"
        assert cli("-p", "local", "create", name) == 0
        try:
            assert cli("-p", "local", "get", name) == 0
            assert cli("-p", "local", "--json", "get", name) == 0
            out = lines(capsys.readouterr().out)
            shown = expected or sandbox.get(sandbox.build_handle("local", name)).raw["isolation"]
            assert out[1:3] == ["running", f"isolation: {shown}"]
            assert json.loads(out[3])["isolation"] == shown
        finally:
            sandbox.destroy(sandbox.build_handle("local", name))


def test_policy_needs_allow_or_an_explicit_deny_all(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    cli("create", "box")
    assert cli("policy", "--allow", "pypi.org", "--allow", "a.test", "box") == 0
    assert fake.policy("box") == NetworkPolicy(allow=["pypi.org", "a.test"])
    assert cli("policy", "box") == 2
    assert "one of the arguments --allow --deny-all is required" in capsys.readouterr().err
    assert fake.policy("box") == NetworkPolicy(allow=["pypi.org", "a.test"])
    assert cli("policy", "box", "--allow", "x.test", "--deny-all") == 2
    assert cli("policy", "box", "--deny-all") == 0
    assert fake.policy("box") == NetworkPolicy.deny_all()


def test_url_prints_it_or_says_there_is_none(capsys: pytest.CaptureFixture[str]) -> None:
    class NoUrl(Fake):
        def public_url(self, handle: Handle) -> str | None:
            return None

    config.configure(adapters={"fake": Fake(), "nourl": NoUrl()})
    cli("create", "box")
    capsys.readouterr()
    assert cli("url", "box") == 0
    assert capsys.readouterr().out == "https://box.fake.test\n"
    main(["-p", "nourl", "create", "box"])
    capsys.readouterr()
    assert main(["-p", "nourl", "url", "box"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "managoat-sandbox: box has no public URL at provider nourl\n"
    assert main(["-p", "nourl", "url", "box", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["url"] is None


def test_write_stores_stdin_bytes_verbatim(
    fake: Fake, feed: Feed, capsys: pytest.CaptureFixture[str]
) -> None:
    cli("create", "box")
    feed(b"A=1\n\x00\xff")
    assert cli("write", "box", "/app/.env", "--mode", "0o600", "--json") == 0
    assert fake.file("box", "/app/.env") == b"A=1\n\x00\xff"
    assert json.loads(lines(capsys.readouterr().out)[-1]) == {
        "ok": True,
        "action": "write",
        "provider": "fake",
        "name": "box",
        "path": "/app/.env",
        "bytes": 6,
    }


def test_checkpoints_on_the_fake_are_one_line_not_supported_errors(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    cli("create", "box")
    capsys.readouterr()
    assert cli("checkpoint", "box", "--comment", "before") == 1
    assert cli("restore", "box", "ckpt-1") == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "managoat-sandbox: error: NotSupported: 'checkpoint'\n" * 2


# -- read and ls ------------------------------------------------------------------

BINARY = bytes(range(256)) + b"\x1b[2J\r\n\x00end"


def test_read_writes_the_files_exact_bytes_to_stdout(
    fake: Fake, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    handle = sandbox.create("fake", "box")
    sandbox.write_file(handle, "/data/every-byte.bin", BINARY)
    assert cli("read", "box", "/data/every-byte.bin") == 0
    assert capsysbinary.readouterr() == (BINARY, b"")


def test_read_to_a_file_writes_it_there_and_nothing_to_stdout(
    fake: Fake, capsysbinary: pytest.CaptureFixture[bytes], tmp_path: Path
) -> None:
    handle = sandbox.create("fake", "box")
    sandbox.write_file(handle, "/data/every-byte.bin", BINARY)
    target = tmp_path / "copy.bin"
    target.write_bytes(b"old content, longer than nothing" * 100)
    assert (
        cli(
            "read",
            "box",
            "/data/every-byte.bin",
            "-o",
            str(target),
            "--max-bytes",
            str(len(BINARY)),
        )
        == 0
    )
    assert target.read_bytes() == BINARY
    assert capsysbinary.readouterr() == (b"", b"")


def test_read_past_max_bytes_is_one_truncated_line_and_writes_nothing(
    fake: Fake, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    handle = sandbox.create("fake", "box")
    sandbox.write_file(handle, "/data/f", b"12345")
    target = tmp_path / "never.bin"
    assert cli("read", "box", "/data/f", "--max-bytes", "4", "-o", str(target)) == 1
    assert capsys.readouterr() == ("", "managoat-sandbox: error: Truncated: ('max_bytes', 4)\n")
    assert not target.exists()


def test_read_of_a_missing_file_or_a_directory_fails_with_one_line(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = sandbox.create("fake", "box")
    sandbox.write_file(handle, "/data/f", b"x")
    assert cli("read", "box", "/data/missing") == 1
    assert cli("read", "box", "/data") == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "managoat-sandbox: error: NotFound: ('path', '/data/missing')",
        "managoat-sandbox: error: Invalid: ('path', \"'/data' is a directory\")",
    ]


def test_read_to_a_file_that_cannot_be_written_is_one_line(
    fake: Fake, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    handle = sandbox.create("fake", "box")
    sandbox.write_file(handle, "/data/f", b"x")
    target = tmp_path / "no-such-dir" / "f"
    assert cli("read", "box", "/data/f", "-o", str(target)) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"managoat-sandbox: error: cannot write {target}: No such file or directory\n"
    )


def test_read_json_gives_the_bytes_in_base64_and_text_only_when_utf8(
    fake: Fake, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    handle = sandbox.create("fake", "box")
    sandbox.write_file(handle, "/data/bin", BINARY)
    sandbox.write_file(handle, "/data/text", "héllo\n".encode())
    assert cli("read", "--json", "box", "/data/bin") == 0
    assert cli("read", "--json", "box", "/data/text") == 0
    assert cli("read", "--json", "box", "/data/text", "-o", str(tmp_path / "t")) == 0
    out = capsys.readouterr().out
    assert only_printable(out)
    binary, text, saved = [json.loads(line) for line in lines(out)]
    assert base64.b64decode(binary.pop("data_b64")) == BINARY
    assert binary == {"provider": "fake", "name": "box", "path": "/data/bin", "bytes": len(BINARY)}
    assert text["text"] == "héllo\n"
    assert base64.b64decode(text["data_b64"]) == "héllo\n".encode()
    assert saved == {
        "provider": "fake",
        "name": "box",
        "path": "/data/text",
        "bytes": 7,
        "output": str(tmp_path / "t"),
    }


@pytest.mark.parametrize("value", ["-1", "ten", "1.5"])
def test_read_max_bytes_must_be_a_whole_number_of_bytes(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("read", "box", "/data/f", "--max-bytes", value) == 2
    assert "argument --max-bytes" in capsys.readouterr().err


def test_ls_prints_type_mode_size_modified_and_name_by_name(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = sandbox.create("fake", "box")
    sandbox.write_file(handle, "/data/zeta.txt", b"abc", mode=0o600)
    sandbox.write_file(handle, "/data/alpha/inner", b"")
    assert cli("ls", "box", "/data/") == 0
    assert capsys.readouterr().out == "dir\t0755\t0\t-\talpha\nfile\t0600\t3\t-\tzeta.txt\n"


def test_ls_shows_modified_in_iso_8601_and_what_is_unknown_as_a_dash(
    capsys: pytest.CaptureFixture[str],
) -> None:
    moment = datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc)

    class Dated(Fake):
        def list_files(self, handle: Handle, path: str) -> list[FileInfo]:
            return [FileInfo("link", "/x/link", "symlink", 9, None, moment)]

    config.configure(adapters={"dated": Dated()})
    sandbox.create("dated", "box")
    assert main(["-p", "dated", "ls", "box", "/x"]) == 0
    assert main(["-p", "dated", "ls", "--json", "box", "/x"]) == 0
    text, document = lines(capsys.readouterr().out)
    assert text == "symlink\t-\t9\t2024-05-06T07:08:09+00:00\tlink"
    assert json.loads(document) == [
        {
            "name": "link",
            "path": "/x/link",
            "type": "symlink",
            "size": 9,
            "mode": None,
            "modified": "2024-05-06T07:08:09+00:00",
        }
    ]


def test_ls_json_gives_full_entries_with_exact_names(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = sandbox.create("fake", "box")
    sandbox.write_file(handle, f"/data/{HOSTILE}", b"x", mode=0o640)
    assert cli("ls", "--json", "box", "/data") == 0
    out = capsys.readouterr().out
    assert only_printable(out)
    assert json.loads(out) == [
        {
            "name": HOSTILE,
            "path": f"/data/{HOSTILE}",
            "type": "file",
            "size": 1,
            "mode": 0o640,
            "modified": None,
        }
    ]


def test_ls_escapes_names_and_keeps_its_columns(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = sandbox.create("fake", "box")
    sandbox.write_file(handle, f"/data/{HOSTILE}", b"x")
    assert cli("ls", "box", "/data") == 0
    out = capsys.readouterr().out
    assert out == f"file\t0644\t1\t-\t{HOSTILE_SHOWN}\n"


def test_ls_escapes_names_that_are_not_utf8_in_text_and_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    raw = os.fsdecode(b"\xff\x1bname")

    class Odd(Fake):
        def list_files(self, handle: Handle, path: str) -> list[FileInfo]:
            return [FileInfo(raw, f"/x/{raw}", "file", 0, 0o644)]

    config.configure(adapters={"odd": Odd()})
    sandbox.create("odd", "box")
    assert main(["-p", "odd", "ls", "box", "/x"]) == 0
    assert main(["-p", "odd", "ls", "--json", "box", "/x"]) == 0
    text, document = lines(capsys.readouterr().out)
    assert text == "file\t0644\t0\t-\t\\udcff\\x1bname"
    assert only_printable(document)
    assert json.loads(document)[0]["name"] == raw


def test_ls_of_a_missing_path_or_a_file_fails_with_one_line(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = sandbox.create("fake", "box")
    sandbox.write_file(handle, "/data/f", b"x")
    assert cli("ls", "box", "/nothing") == 1
    assert cli("ls", "box", "/data/f") == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert [line.split(":")[2] for line in lines(captured.err)] == [" NotFound", " Invalid"]


# -- exec -----------------------------------------------------------------------


def test_exec_prints_stdout_and_stderr_apart_and_exits_with_the_real_code(
    fake: Fake, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    cli("create", "box")
    capsysbinary.readouterr()
    assert cli("exec", "box", "--", "emit", "out:hello", "err:oops", "exit:3") == 3
    captured = capsysbinary.readouterr()
    assert (captured.out, captured.err) == (b"hello", b"oops")


def test_exec_max_bytes_bounds_the_output_it_holds(
    fake: Fake, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    cli("create", "box")
    capsysbinary.readouterr()
    assert cli("exec", "box", "--max-bytes", "9", "--", "emit", "out:hello", "err:oops") == 0
    assert capsysbinary.readouterr() == (b"hello", b"oops")
    assert cli("exec", "box", "--max-bytes", "8", "--", "emit", "out:hello", "err:oops") == 1
    captured = capsysbinary.readouterr()
    assert captured.out == b"" and b"Truncated" in captured.err and b"8" in captured.err


def test_exec_merge_stderr_sends_both_to_stdout(
    fake: Fake, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    cli("create", "box")
    capsysbinary.readouterr()
    argv = ("exec", "box", "--merge-stderr", "--env", "A=1", "--dir", "/", "--")
    assert cli(*argv, "emit", "out:one,", "err:two", "exit:0") == 0
    captured = capsysbinary.readouterr()
    assert (captured.out, captured.err) == (b"one,two", b"")


def test_exec_timeout_is_status_124_with_one_line_saying_so(
    fake: Fake, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    cli("create", "box")
    capsysbinary.readouterr()
    assert cli("exec", "box", "--timeout", "0.3", "--", "emit", "out:early", "sleep:5") == 124
    captured = capsysbinary.readouterr()
    assert captured.out == b""
    assert captured.err == (
        b"managoat-sandbox: error: Unavailable: ('exec_timeout', 0.3) (no exit within 0.3 s)\n"
    )


def test_json_exec_timeout_is_an_error_document(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    sandbox.create("fake", "box")
    assert cli("--json", "exec", "box", "--timeout", "0.2", "--", "emit", "sleep:5") == 124
    assert json.loads(capsys.readouterr().out) == {
        "type": "error",
        "error": "Unavailable",
        "detail": [reasons.EXEC_TIMEOUT, 0.2],
        "transient": True,
    }


def test_exec_timeout_zero_starts_nothing(fake: Fake) -> None:
    handle = sandbox.create("fake", "box")
    assert cli("exec", "box", "--timeout", "0", "--", "emit", "out:x") == 124
    assert sandbox.list_sessions(handle) == []


@pytest.mark.parametrize("subcommand", ["exec", "spawn"])
def test_a_stream_closed_before_exit_is_a_one_line_error(
    fake: Fake, subcommand: str, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    sandbox.create("fake", "box")
    assert cli(subcommand, "box", "--", "emit", "out:partial", "drop") == 1
    captured = capsysbinary.readouterr()
    assert captured.out == (b"partial" if subcommand == "spawn" else b"")
    assert captured.err.endswith(b"managoat-sandbox: error: Unavailable: 'closed_before_exit'\n")


def test_exec_of_a_missing_sandbox_is_not_found(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("exec", "nowhere", "--", "emit", "out:x") == 1
    assert capsys.readouterr().err == "managoat-sandbox: error: NotFound: ('sandbox', 'nowhere')\n"


# -- spawn, attach, sessions ----------------------------------------------------


def test_spawn_forwards_stdin_and_eof_ends_it_with_zero(
    fake: Fake, feed: Feed, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    handle = sandbox.create("fake", "box")
    feed(b"ping\n")
    assert cli("spawn", "--stdin", "box", "--", "emit", "out:ready\n", "stay") == 0
    captured = capsysbinary.readouterr()
    assert captured.out == b"ready\necho:ping\n"
    assert captured.err == f"managoat-sandbox: session {only_session(handle)}\n".encode()
    assert wait_until(
        lambda: (
            not [t for t in threading.enumerate() if t.name.startswith("managoat-sandbox-stdin")]
        )
    )


def test_a_failed_stdin_write_is_a_one_line_error(
    fake: Fake, feed: Feed, capsys: pytest.CaptureFixture[str]
) -> None:
    sandbox.create("fake", "box")
    fake.fail_next("write_stdin", WriteFailed("boom"))
    feed(b"ping\n")
    assert cli("spawn", "--stdin", "box", "--", "emit", "stay") == 1
    assert lines(capsys.readouterr().err)[-1] == "managoat-sandbox: error: WriteFailed: 'boom'"


def test_spawn_detach_prints_the_session_id_and_attach_rejoins_it(
    fake: Fake, feed: Feed, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = sandbox.create("fake", "box")
    assert cli("spawn", "--detach", "box", "--", "emit", "out:ready\n", "stay") == 0
    session_id = capsys.readouterr().out.strip()
    assert session_id == only_session(handle)
    feed(b"more\n")
    assert cli("attach", "--stdin", "box", session_id) == 0
    assert capsys.readouterr().out == "ready\necho:more\n"


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs pthread_kill")
def test_ctrl_c_detaches_without_killing_and_says_how_to_reattach(
    fake: Fake, feed: Feed, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = sandbox.create("fake", "box")
    stdout = io.StringIO()  # read while the CLI runs, which capsys cannot do without consuming
    monkeypatch.setattr(sys, "stdout", stdout)
    streaming: list[bool] = []

    def interrupt_once_streaming() -> None:
        # The command's first output on the CLI's stdout shows the CLI is in its frame loop.
        streaming.append(wait_until(lambda: stdout.getvalue() == "ready\n"))
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    interrupter = threading.Thread(target=interrupt_once_streaming)
    interrupter.start()
    try:
        assert cli("spawn", "box", "--", "emit", "out:ready\n", "stay") == 130
    finally:
        interrupter.join()
    assert streaming == [True], "SIGINT was sent before the CLI printed the command's output"
    session_id = only_session(handle)
    assert stdout.getvalue() == "ready\n"
    assert lines(capsys.readouterr().err) == [
        f"managoat-sandbox: session {session_id}",
        f"managoat-sandbox: detached; session {session_id} keeps running",
        f"managoat-sandbox: re-attach: managoat-sandbox -p fake attach box {session_id}",
        f"managoat-sandbox: end it:    managoat-sandbox -p fake terminate box {session_id}",
    ]
    replayed = io.StringIO()
    monkeypatch.setattr(sys, "stdout", replayed)
    feed(b"still here\n")
    assert cli("attach", "--stdin", "box", session_id) == 0
    assert replayed.getvalue() == "ready\necho:still here\n"


def test_attach_replays_a_finished_session_and_exits_with_its_code(
    fake: Fake, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    handle = sandbox.create("fake", "box")
    command = sandbox.spawn(handle, "emit", ["out:a", "err:b", "exit:4"])
    list(sandbox.iter_frames(command, timeout=5))
    assert cli("attach", "box", only_session(handle)) == 4
    captured = capsysbinary.readouterr()
    assert (captured.out, captured.err) == (b"a", b"b")


def test_attach_to_an_unknown_session_is_not_found(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    cli("create", "box")
    assert cli("attach", "box", "nope") == 1
    assert capsys.readouterr().err == "managoat-sandbox: error: NotFound: ('session', 'nope')\n"


def test_sessions_lists_id_state_created_and_command(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = sandbox.create("fake", "box")
    sandbox.stop_command(sandbox.spawn(handle, "emit", ["stay"]))
    assert cli("sessions", "box") == 0
    session_id, state, created, command = capsys.readouterr().out.rstrip("\n").split("\t")
    assert (session_id, state, command) == (only_session(handle), "running", "emit stay")
    assert created.endswith("+00:00")
    assert cli("sessions", "box", "--json") == 0
    [document] = json.loads(capsys.readouterr().out)
    assert document == {
        "id": session_id,
        "command": "emit stay",
        "created_at": created,
        "last_activity_at": None,
        "tty": False,
        "ended": False,
        "exit_code": None,
    }


def test_sessions_say_how_a_finished_session_ended(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = sandbox.create("fake", "box")
    command = sandbox.spawn(handle, "emit", ["exit:3"])
    assert [frame.code for frame in sandbox.iter_frames(command, timeout=10) if frame.terminal] == [
        3
    ]
    assert cli("sessions", "box") == 0
    [line] = lines(capsys.readouterr().out)
    assert line.split("\t")[1] == "exited 3"
    assert cli("sessions", "box", "--json") == 0
    [document] = json.loads(capsys.readouterr().out)
    assert (document["ended"], document["exit_code"]) == (True, 3)


@pytest.mark.parametrize("flags", [(), ("--force", "--timeout", "5")])
def test_terminate_ends_a_running_session(
    fake: Fake, flags: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    handle = sandbox.create("fake", "box")
    sandbox.stop_command(sandbox.spawn(handle, "emit", ["stay"]))
    session_id = only_session(handle)
    assert cli("terminate", "box", session_id, *flags) == 0
    assert cli("attach", "box", session_id) == 137


def test_terminate_an_absent_session_succeeds_and_force_cannot_confirm_it(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    cli("create", "box")
    capsys.readouterr()
    assert cli("terminate", "box", "nosuchsession") == 0
    assert cli("terminate", "box", "nosuchsession", "--force") == 1
    assert "error: Unavailable: 'termination_unconfirmed'" in capsys.readouterr().err


@pytest.mark.parametrize("timeout", ["99", "0", "0.0001"])
def test_terminate_names_the_timeout_and_its_range_when_it_is_out_of_range(
    fake: Fake, timeout: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cli("create", "box")
    assert cli("terminate", "box", "sess-1", "--timeout", timeout) == 2
    assert (
        f"error: argument --timeout: seconds must be from 0.001 to 30, got '{timeout}'"
        in capsys.readouterr().err
    )


def test_terminate_says_which_argument_the_library_refused(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    cli("create", "box")
    assert cli("terminate", "box", "../sess") == 1
    assert capsys.readouterr().err == (
        "managoat-sandbox: error: Invalid: 'termination_request': "
        "session_id must be 1-256 characters of [A-Za-z0-9_-]\n"
    )


def test_tty_on_the_fake_is_not_supported(fake: Fake, capsys: pytest.CaptureFixture[str]) -> None:
    cli("create", "box")
    assert cli("spawn", "--tty", "box", "--", "emit", "out:x") == 1
    assert capsys.readouterr().err == "managoat-sandbox: error: NotSupported: 'tty'\n"


# -- --json -----------------------------------------------------------------------


def test_json_documents_for_one_shot_commands(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("--json", "create", "box") == 0
    assert cli("get", "box", "--json") == 0
    assert cli("list", "--json") == 0
    assert cli("destroy", "box", "--json") == 0
    documents = [json.loads(line) for line in lines(capsys.readouterr().out)]
    assert documents == [
        {"provider": "fake", "name": "box", "instance_id": None},
        {"provider": "fake", "name": "box", "status": "running"},
        ["box"],
        {"ok": True, "action": "destroy", "provider": "fake", "name": "box"},
    ]


def test_json_spawn_emits_one_object_per_frame_and_round_trips_bytes(
    fake: Fake, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    sandbox.create("fake", "box")
    assert cli("--json", "spawn", "box", "--", "emit", "out:h\u00e9", "err:\u2603", "exit:2") == 2
    captured = capsysbinary.readouterr()
    assert captured.err == b""
    documents = [json.loads(line) for line in captured.out.splitlines()][1:]  # after the session
    assert [d["type"] for d in documents] == ["stdout", "stderr", "exit"]
    assert base64.b64decode(documents[0]["data_b64"]) == "h\u00e9".encode()
    assert documents[0]["text"] == "h\u00e9"
    assert base64.b64decode(documents[1]["data_b64"]) == "\u2603".encode()
    assert documents[2] == {"type": "exit", "code": 2}


def test_json_exec_emits_the_collected_output_then_the_exit(
    fake: Fake, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    sandbox.create("fake", "box")
    argv = ("--json", "exec", "--merge-stderr", "box", "--")
    assert cli(*argv, "emit", "out:h\u00e9", "err:\u2603", "exit:2") == 2
    captured = capsysbinary.readouterr()
    assert captured.err == b""
    documents = [json.loads(line) for line in captured.out.splitlines()]
    assert documents == [
        {
            "type": "stdout",
            "data_b64": base64.b64encode("h\u00e9\u2603".encode()).decode(),
            "text": "h\u00e9\u2603",
        },
        {"type": "exit", "code": 2},
    ]


def test_json_spawn_starts_with_the_session(fake: Fake, capsys: pytest.CaptureFixture[str]) -> None:
    handle = sandbox.create("fake", "box")
    assert cli("--json", "spawn", "box", "--", "emit", "out:x") == 0
    documents = [json.loads(line) for line in lines(capsys.readouterr().out)]
    assert documents[0] == {
        "type": "session",
        "provider": "fake",
        "name": "box",
        "session_id": only_session(handle),
    }
    assert [d["type"] for d in documents[1:]] == ["stdout", "exit"]


def test_frames_that_are_not_utf8_keep_every_byte() -> None:
    for frame in (Stdout("r", b"\xff\xfe\x00ok"), Stderr("r", b"\xe2\x98")):
        document = json.loads(json.dumps(frame_document(frame)))
        assert "text" not in document
        assert base64.b64decode(document["data_b64"]) == frame.data


def test_json_errors_are_a_document_and_a_line(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("--json", "get", "missing") == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {
        "type": "error",
        "error": "NotFound",
        "detail": ["sandbox", "missing"],
        "transient": False,
    }
    assert captured.err == "managoat-sandbox: error: NotFound: ('sandbox', 'missing')\n"


# -- providers, usage, exit statuses ----------------------------------------------


def test_an_unknown_provider_is_one_line_naming_the_configured_ones(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["-p", "modal", "list"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = lines(captured.err)
    assert line.startswith("managoat-sandbox: error: unknown sandbox provider 'modal'")
    assert "'fake'" in line
    assert "Traceback" not in captured.err


def test_the_provider_defaults_to_the_environment(
    fake: Fake, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MANAGOAT_SANDBOX_PROVIDER", "fake")
    sandbox.create("fake", "box")
    assert main(["list"]) == 0
    assert capsys.readouterr().out == "box\n"


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["bogus"],
        ["list", "extra"],
        ["exec", "box"],
        ["exec", "box", "--timeout", "nan", "--", "emit"],
        ["exec", "box", "--timeout", "-1", "--", "emit"],
        ["exec", "box", "--env", "NOEQUALS", "--", "emit"],
        ["spawn", "--stdin", "--detach", "box", "--", "emit"],
        ["write", "box", "/f", "--mode", "9"],
        ["policy", "box", "--allow", ""],
    ],
)
def test_bad_arguments_exit_2_with_usage(
    fake: Fake, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(*argv) == 2
    assert "usage: managoat-sandbox" in capsys.readouterr().err


@pytest.mark.parametrize(
    "subcommand",
    [
        "create",
        "get",
        "list",
        "destroy",
        "exec",
        "spawn",
        "attach",
        "sessions",
        "terminate",
        "suspend",
        "resume",
        "policy",
        "checkpoint",
        "restore",
        "url",
        "write",
        "read",
        "ls",
    ],
)
def test_every_subcommand_has_help_with_examples(
    subcommand: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([subcommand, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: managoat-sandbox {subcommand}")
    examples = out.split("\nexamples:\n", 1)[1]
    assert f"managoat-sandbox {subcommand} " in examples


def test_a_closed_stdout_is_status_141_without_a_traceback(
    fake: Fake, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class ClosedPipe(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError

    sandbox.create("fake", "box")
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert cli("list") == 141


def test_a_signal_death_maps_to_128_plus_the_signal() -> None:
    assert exit_status(-9) == 137
    assert exit_status(0) == 0
    assert exit_status(3) == 3


# -- as a real process --------------------------------------------------------------


def run_module(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "managoat_sandbox", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_python_dash_m_help_exits_zero() -> None:
    result = run_module("--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: managoat-sandbox")


FAKE_IS_IN_PROCESS = (
    "managoat-sandbox: warning: the fake provider keeps its sandboxes in this process only: "
    "nothing this command creates is there for the next managoat-sandbox command\n"
)


def test_python_dash_m_lists_the_builtin_fake_as_json() -> None:
    result = run_module("-p", "fake", "list", "--json")
    assert (result.returncode, result.stderr) == (0, FAKE_IS_IN_PROCESS)
    assert json.loads(result.stdout) == []


def test_each_command_on_the_builtin_fake_says_its_sandboxes_end_with_the_process() -> None:
    created = run_module("-p", "fake", "create", "box")
    assert (created.returncode, created.stdout, created.stderr) == (0, "box\n", FAKE_IS_IN_PROCESS)
    looked_up = run_module("-p", "fake", "get", "box")
    assert looked_up.returncode == 1
    assert looked_up.stderr == (
        FAKE_IS_IN_PROCESS + "managoat-sandbox: error: NotFound: ('sandbox', 'box')\n"
    )


def test_a_fake_the_calling_program_configured_is_shared_between_calls_and_not_warned_of(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("create", "box") == 0
    assert cli("get", "box") == 0
    assert capsys.readouterr() == ("box\nrunning\n", "")


def test_a_stdin_read_still_blocked_at_exit_does_not_abort_the_process() -> None:
    script = (
        "import sys\n"
        "import managoat_sandbox as sandbox\n"
        "from managoat_sandbox.cli import main\n"
        "sandbox.create('fake', 'box')\n"
        "argv = ['-p', 'fake', 'spawn', '--stdin', 'box', '--', 'emit', 'out:hi', 'exit:5']\n"
        "sys.exit(main(argv))\n"
    )
    read_end, write_end = os.pipe()  # stdin stays open and silent: the reader stays blocked
    try:
        result = subprocess.run(
            [sys.executable, "-c", script],
            stdin=read_end,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(read_end)
        os.close(write_end)
    assert (result.returncode, result.stdout) == (5, "hi")
    assert "Fatal" not in result.stderr


# -- hostile names ------------------------------------------------------------

#: ESC sequences (title, clear screen), BEL, CR, a C1 CSI, DEL, a bidi override,
#: a line separator and a tab: each could rewrite or disguise what a terminal shows.
HOSTILE = "evil\x1b]0;pwned\x07\r\x9b2J\x7f\u202eexe.txt\u2028\tend"
HOSTILE_SHOWN = r"evil\x1b]0;pwned\x07\x0d\x9b2J\x7f\u202eexe.txt\u2028\x09end"


def only_printable(text: str) -> bool:
    return all(line.isprintable() for line in text.split("\n"))


def test_list_escapes_control_characters_in_names(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    sandbox.create("fake", HOSTILE)
    assert cli("list") == 0
    assert capsys.readouterr().out == HOSTILE_SHOWN + "\n"


def test_json_listings_keep_the_exact_name_in_printable_escapes(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    sandbox.create("fake", HOSTILE)
    assert cli("list", "--json") == 0
    out = capsys.readouterr().out
    assert only_printable(out)
    assert json.loads(out) == [HOSTILE]


def test_create_and_errors_escape_the_name_they_show(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("create", HOSTILE) == 0
    assert cli("destroy", HOSTILE) == 0
    assert cli("get", HOSTILE) == 1
    captured = capsys.readouterr()
    assert captured.out == HOSTILE_SHOWN + "\n"
    assert captured.err.startswith("managoat-sandbox: error: NotFound: ")
    assert only_printable(captured.err)


def test_sessions_escape_ids_and_commands_but_keep_their_columns(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = sandbox.create("fake", "box")
    sandbox.stop_command(sandbox.spawn(handle, "emit", [f"out:{HOSTILE}", "stay"]))
    session_id = only_session(handle)
    assert cli("sessions", "box") == 0
    out = capsys.readouterr().out
    assert only_printable(out.replace("\t", " "))
    [(shown_id, _state, _created, command)] = [line.split("\t") for line in lines(out)]
    assert shown_id == session_id
    assert HOSTILE_SHOWN in command


def test_command_output_stays_raw(fake: Fake, capsys: pytest.CaptureFixture[str]) -> None:
    sandbox.create("fake", "box")
    colour = "\x1b[31mred\x1b[0m\r"
    assert cli("spawn", "box", "--", "emit", f"out:{colour}", f"err:{colour}") == 0
    captured = capsys.readouterr()
    assert captured.out == colour
    assert captured.err.endswith(colour)
    assert cli("exec", "box", "--", "emit", f"out:{colour}") == 0
    assert capsys.readouterr().out == colour


@pytest.mark.parametrize("timeout", ["-1", "-0.5", "nan", "-inf"])
def test_a_negative_or_nan_exec_timeout_is_a_usage_error_naming_the_range(
    fake: Fake, timeout: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sandbox.create("fake", "box")

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("exec must not be dispatched")

    monkeypatch.setattr(fake, "exec", never)
    capsys.readouterr()
    assert cli("exec", "box", f"--timeout={timeout}", "--", "emit", "out:x") == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (
        "error: argument --timeout: seconds must be from 0 to 9223372036, or inf for no limit, "
        f"got '{timeout}'"
    ) in captured.err


def test_an_infinite_exec_timeout_is_no_limit(
    fake: Fake, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    sandbox.create("fake", "box")
    capsysbinary.readouterr()
    assert cli("exec", "box", "--timeout", "inf", "--", "emit", "out:x") == 0
    assert capsysbinary.readouterr().out == b"x"


@pytest.mark.parametrize("timeout", ["-1", "nan"])
def test_a_negative_or_nan_terminate_timeout_is_a_usage_error_naming_the_range(
    fake: Fake, timeout: str, capsys: pytest.CaptureFixture[str]
) -> None:
    sandbox.create("fake", "box")
    capsys.readouterr()
    assert cli("terminate", "box", "sess-1", "--timeout", timeout) == 2
    assert (
        f"error: argument --timeout: seconds must be from 0.001 to 30, got '{timeout}'"
        in capsys.readouterr().err
    )
