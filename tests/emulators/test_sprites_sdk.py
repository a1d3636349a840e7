"""Cross-check: the vendor's official Python SDK (sprites-py 0.7.2) drives the emulator unchanged.

If the vendor's own client cannot talk to the emulator, the emulator is wrong
(and so may be any adapter tested against it). What the SDK needs of a
server is listed in docs/protocols/sprites.md#sdk-requirements
(e.g. ``tty`` in every ``session_info``, string session ids in the listing,
the kill JSON body, no ``has_more`` without a token), and the emulator keeps it.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from managoat_sandbox.emulators.sprites import SpritesEmulator
from tests.conftest import wait_until

sprites = pytest.importorskip("sprites", minversion="0.7.2")
from sprites import exceptions as sdk_errors  # noqa: E402
from sprites.policy import update_network_policy  # noqa: E402
from sprites.session import kill_session  # noqa: E402
from sprites.types import NetworkPolicy, PolicyRule, URLSettings  # noqa: E402

pytestmark = pytest.mark.timeout(60)
TOKEN = "sdk-token"
WAIT_GO = "while [ ! -e go ]; do sleep 0.01; done"


class Sink(io.RawIOBase):
    """A stdout the SDK writes into as frames arrive (so streaming is observable)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        with self._lock:
            self._data += bytes(data)
        return len(data)

    @property
    def value(self) -> bytes:
        with self._lock:
            return bytes(self._data)


class Background:
    """Run a blocking SDK call on a thread; keep its result or exception."""

    def __init__(self, fn: Any) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn: Any) -> None:
        try:
            self.result = fn()
        except BaseException as error:
            self.error = error

    def join(self) -> Background:
        self._thread.join(20)
        assert not self._thread.is_alive()
        return self


@pytest.fixture
def emulator() -> Iterator[SpritesEmulator]:
    with SpritesEmulator(credential=TOKEN, log_bodies=True) as server:
        yield server  # type: ignore[misc]


@pytest.fixture
def client(emulator: SpritesEmulator) -> Iterator[Any]:
    sdk = sprites.SpritesClient(TOKEN, base_url=emulator.base_url)
    yield sdk
    sdk.close()


@pytest.fixture
def sprite(client: Any) -> Any:
    return client.create_sprite("sdk-box")


def go(emulator: SpritesEmulator, name: str = "sdk-box") -> None:
    (emulator.sprite_root(name) / "go").touch()


# -- lifecycle ---------------------------------------------------------------------------------


def test_sdk_creates_gets_and_deletes_a_sprite(client: Any, emulator: SpritesEmulator) -> None:
    created = client.create_sprite("life", url_settings=URLSettings(auth="public"))
    assert created.id and created.status == "cold"
    assert created.url_settings.auth == "public"
    fetched = client.get_sprite("life")
    assert fetched.id == created.id and fetched.url == created.url
    client.update_url_settings("life", URLSettings(auth="sprite"))
    assert client.get_sprite("life").url_settings.auth == "sprite"
    client.delete_sprite("life")
    with pytest.raises(sdk_errors.NotFoundError):
        client.get_sprite("life")
    with pytest.raises(sdk_errors.NotFoundError):  # docs/protocols/sprites.md#sdk-requirements
        client.delete_sprite("life")


def test_sdk_sees_a_taken_name_as_a_409_error(client: Any) -> None:
    client.create_sprite("taken")
    with pytest.raises(sdk_errors.SpriteError, match="409"):
        client.create_sprite("taken")


def test_sdk_lists_every_sprite_across_pages(client: Any, emulator: SpritesEmulator) -> None:
    emulator.behaviour.page_size = 2
    for index in range(5):
        client.create_sprite(f"many-{index}")
    names = sorted(s.name for s in client.list_all_sprites())
    assert names == [f"many-{index}" for index in range(5)]
    pages = [r for r in emulator.requests if r.method == "GET" and r.path == "/v1/sprites"]
    assert len(pages) == 3
    assert dict(pages[0].query)["max_results"] == "100"
    page = client.list_sprites()
    assert page.has_more and page.next_continuation_token and page.cold == 5


# -- exec --------------------------------------------------------------------------------------


def test_sdk_runs_a_command_with_output_stderr_and_exit_code(sprite: Any) -> None:
    done = sprite.run("bash", "-c", "echo hello; echo oops >&2; exit 3", capture_output=True)
    assert (done.returncode, done.stdout, done.stderr) == (3, b"hello\n", b"oops\n")
    assert sprite.command("echo", "hi").output() == b"hi\n"
    with pytest.raises(sdk_errors.ExecError) as failed:
        sprite.command("bash", "-c", "exit 42").run()
    assert failed.value.exit_code() == 42


def test_sdk_streams_output_before_the_command_exits(
    sprite: Any, emulator: SpritesEmulator
) -> None:
    sink = Sink()
    cmd = sprite.command("bash", "-c", f"echo early; {WAIT_GO}; echo late", stdout=sink)
    worker = Background(cmd.run)
    assert wait_until(lambda: sink.value == b"early\n")
    (sprite.filesystem("/") / "go").write_bytes(b"")
    assert worker.join().error is None
    assert sink.value == b"early\nlate\n"


def test_sdk_stdin_reaches_the_process_and_its_end_ends_it(sprite: Any) -> None:
    read_end, write_end = os.pipe()
    sink = Sink()
    with open(read_end, "rb", buffering=0) as stdin:
        cmd = sprite.command("cat", stdin=stdin, stdout=sink)
        worker = Background(cmd.run)
        os.write(write_end, b"ping\n")
        assert wait_until(lambda: sink.value == b"ping\n")
        os.write(write_end, b"pong")
        os.close(write_end)
        assert worker.join().error is None
    assert sink.value == b"ping\npong"
    assert cmd.exit_code == 0


def test_sdk_tty_mode_gets_raw_output_and_the_text_exit(sprite: Any) -> None:
    done = sprite.run(
        "bash", "-c", "echo in-a-tty; test -t 1 && exit 4", tty=True, capture_output=True
    )
    assert done.returncode == 4
    assert b"in-a-tty" in done.stdout


def test_sdk_env_and_cwd(sprite: Any) -> None:
    (sprite.filesystem("/") / "sub" / ".keep").write_bytes(b"")
    done = sprite.run(
        "bash",
        "-c",
        'echo "$NAME"; basename "$PWD"',
        env={"NAME": "v"},
        cwd="/sub",
        capture_output=True,
    )
    assert done.stdout == b"v\nsub\n"


# -- sessions, attach, kill --------------------------------------------------------------------


def test_sdk_lists_sessions_and_attaches_with_replay_then_live_output(
    sprite: Any, emulator: SpritesEmulator
) -> None:
    owner_sink = Sink()
    owner = sprite.command("bash", "-c", f"echo first; {WAIT_GO}; echo second", stdout=owner_sink)
    owner_run = Background(owner.run)
    assert wait_until(lambda: owner_sink.value == b"first\n")
    (session,) = sprite.list_sessions()
    assert session.id == str(session.id) and session.command.startswith("bash -c echo first")
    attacher = sprite.attach_session(session.id)
    attach_sink = Sink()
    attacher.stdout = attach_sink
    attach_run = Background(attacher.run)
    assert wait_until(lambda: attach_sink.value == b"first\n")
    go(emulator)
    assert owner_run.join().error is None and attach_run.join().error is None
    assert owner_sink.value == attach_sink.value == b"first\nsecond\n"


def test_sdk_attaches_to_a_tty_session_in_tty_mode(sprite: Any, emulator: SpritesEmulator) -> None:
    owner_sink = Sink()
    owner = sprite.command("bash", "-c", f"echo tty-first; {WAIT_GO}", stdout=owner_sink, tty=True)
    owner_run = Background(owner.run)
    assert wait_until(lambda: b"tty-first" in owner_sink.value)
    (session,) = sprite.list_sessions()
    assert session.tty is True
    attacher = sprite.attach_session(session.id)
    attach_sink = Sink()
    attacher.stdout = attach_sink
    attach_run = Background(attacher.run)
    assert wait_until(lambda: b"tty-first" in attach_sink.value)  # not stripped (SDK requirement 3)
    go(emulator)
    assert owner_run.join().error is None and attach_run.join().error is None
    assert attacher.exit_code == 0


def test_sdk_kills_a_session_with_the_json_body_form(
    sprite: Any, emulator: SpritesEmulator
) -> None:
    owner = Background(sprite.command("bash", "-c", "echo up; sleep 30").run)
    assert wait_until(lambda: len(sprite.list_sessions()) == 1)
    (session,) = sprite.list_sessions()
    messages = list(kill_session(sprite, session.id, "SIGTERM", timeout=5))
    assert [m.type for m in messages] == ["signal", "exited", "complete"]
    assert all(m.error is None for m in messages)
    kill_request = [r for r in emulator.requests if r.path.endswith("/kill")][-1]
    assert kill_request.json() == {"signal": "SIGTERM", "timeout": 5}
    error = owner.join().error
    assert isinstance(error, sdk_errors.ExecError) and error.exit_code() == 143
    assert sprite.list_sessions() == []


# -- policy, files, checkpoints ----------------------------------------------------------------


def test_sdk_sets_and_reads_the_network_policy(sprite: Any) -> None:
    deny_all = NetworkPolicy(rules=[PolicyRule(domain="*", action="deny")])
    update_network_policy(sprite, deny_all)  # the path that requires exactly 204
    assert sprite.get_network_policy() == deny_all
    allow = NetworkPolicy(
        rules=[PolicyRule(domain="example.com", action="allow"), PolicyRule(include="defaults")]
    )
    sprite.update_network_policy(allow)
    assert sprite.get_network_policy() == allow


def test_sdk_writes_and_reads_files(sprite: Any, emulator: SpritesEmulator) -> None:
    path = sprite.filesystem("/") / "etc" / "app" / "key"
    path.write_bytes(b"\x00\xffsecret", mode=0o600)
    host = emulator.sprite_root("sdk-box") / "etc" / "app" / "key"
    assert host.read_bytes() == b"\x00\xffsecret"
    assert host.stat().st_mode & 0o777 == 0o600
    assert path.read_bytes() == b"\x00\xffsecret"
    assert sprite.run("cat", "etc/app/key", capture_output=True).stdout == b"\x00\xffsecret"
    with pytest.raises(sdk_errors.FileNotFoundError_):
        (sprite.filesystem("/") / "absent").read_bytes()


def test_sdk_reads_binary_content_byte_for_byte(sprite: Any, emulator: SpritesEmulator) -> None:
    data = bytes(range(256)) * 4099 + b"\r\n\x00end"
    (emulator.sprite_root("sdk-box") / "blob.bin").write_bytes(data)
    assert (sprite.filesystem("/") / "blob.bin").read_bytes() == data
    assert (sprite.filesystem("/tmp") / "../blob.bin").read_bytes() == data


def test_sdk_raises_its_not_found_and_is_a_directory_errors(
    sprite: Any, emulator: SpritesEmulator
) -> None:
    (emulator.sprite_root("sdk-box") / "dir").mkdir()
    fs = sprite.filesystem("/")
    with pytest.raises(sdk_errors.FileNotFoundError_):
        (fs / "dir" / "absent").read_bytes()
    with pytest.raises(sdk_errors.IsADirectoryError_):
        (fs / "dir").read_bytes()
    with pytest.raises(sdk_errors.FileNotFoundError_):
        (fs / "dir" / "absent").listdir()
    assert not (fs / "dir" / "absent").exists()


def test_sdk_lists_a_directory_and_stats_a_file(sprite: Any, emulator: SpritesEmulator) -> None:
    fs = sprite.filesystem("/")
    (fs / "app" / "three.txt").write_bytes(b"abc", mode=0o640)
    (fs / "app" / "sub" / "inner.txt").write_bytes(b"inner")
    assert sorted((fs / "app").listdir()) == ["sub", "three.txt"]
    assert sorted(str(p) for p in (fs / "app").iterdir()) == ["/app/sub", "/app/three.txt"]
    info = (fs / "app" / "three.txt").stat()
    assert (info.name, info.path, info.size, info.mode, info.is_dir) == (
        "three.txt",
        "/app/three.txt",
        3,
        "0640",
        False,
    )
    host = emulator.sprite_root("sdk-box") / "app" / "three.txt"
    assert abs(info.mod_time.timestamp() - host.stat().st_mtime) < 0.001
    assert (fs / "app" / "three.txt").is_file()
    assert (sprite.filesystem("/app") / "sub").listdir() == ["inner.txt"]


def test_sdk_checkpoints_and_restores(sprite: Any) -> None:
    path = sprite.filesystem("/") / "state.txt"
    path.write_text("one")
    created = list(sprite.create_checkpoint("before change"))
    assert created[-1].type == "complete" and created[-1].data == "Checkpoint v1 created"
    listed = sprite.list_checkpoints()
    assert [c.id for c in listed] == ["Current", "v1"]
    assert listed[1].comment == "before change"
    assert sprite.get_checkpoint("v1").comment == "before change"
    path.write_text("two")
    restored = list(sprite.restore_checkpoint("v1"))
    assert restored[-1].type == "complete"
    assert path.read_text() == "one"
    failed = list(sprite.restore_checkpoint("v9"))
    assert failed[-1].type == "error" and failed[-1].error == "checkpoint not found"


# -- faults as the SDK sees them ---------------------------------------------------------------


def test_sdk_reports_a_dropped_or_closed_socket_as_a_network_error(
    sprite: Any, emulator: SpritesEmulator
) -> None:
    emulator.drop_exec(after_frames=1)
    with pytest.raises(sdk_errors.NetworkError):
        sprite.run("bash", "-c", f"echo partial; {WAIT_GO}")
    go(emulator)
    emulator.drop_exec(after_frames=0, close_frame=True)
    with pytest.raises(sdk_errors.NetworkError):  # 1000 is not exit 0 (SDK requirement 1)
        sprite.run("bash", "-c", "exit 0")


def test_sdk_parses_refused_upgrades_as_api_errors(client: Any, emulator: SpritesEmulator) -> None:
    emulator.refuse_fresh_execs(1)
    fresh = client.create_sprite("booting")
    with pytest.raises(sdk_errors.APIError) as booting:
        fresh.run("true")
    assert booting.value.status_code == 503 and booting.value.error_code == "unavailable"
    assert fresh.run("true").returncode == 0
    emulator.refuse_upgrade(
        429,
        body={"error": "rate_limited", "retry_after_seconds": 17},
        headers={"Retry-After": "17"},
    )
    with pytest.raises(sdk_errors.APIError) as limited:
        fresh.run("true")
    assert limited.value.status_code == 429
    assert limited.value.retry_after_seconds == 17 and limited.value.retry_after_header == 17
