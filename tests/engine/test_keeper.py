"""The keeper's proxy, driven as the agent drives it: connections passed over a socket
pair (``c``), policy notices (``p``) confirmed with ``a``.

No isolation is needed: the proxy runs in this process, on a thread. Relays go
to an echo server on this host's own address through a pinned name (skipped
where the host has none); everything else stays on socket pairs.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from managoat_sandbox._engine import egress, keeper
from managoat_sandbox._engine.egress import Policy

from .echo import EchoServer, host_address

#: Seconds allowed for each step (a bound for a loaded machine, not an expected time).
STEP = 20.0
ADDRESS = host_address()


class Harness:
    """A :class:`keeper.Proxy` on a thread, fed as the agent feeds it."""

    def __init__(self, state: Path, **options: float) -> None:
        self.state = state
        self.state_fd = os.open(state, os.O_RDONLY | os.O_DIRECTORY)
        self.agent, self._keeper_end = socket.socketpair()
        self.agent.settimeout(STEP)
        cap = int(options.pop("max_connections", keeper.MAX_CONNECTIONS))
        self.proxy = keeper.Proxy(self.state_fd, self._keeper_end, max_connections=cap, **options)
        self.thread = threading.Thread(target=self.proxy.run, daemon=True)
        self.thread.start()

    def connect(self) -> socket.socket:
        """A new connection to the proxy, as a command's would arrive."""
        client, theirs = socket.socketpair()
        socket.send_fds(self.agent, [b"c"], [theirs.fileno()])
        theirs.close()
        client.settimeout(STEP)
        return client

    def apply(self, policy: Policy) -> None:
        """Put ``policy`` in force and wait for the proxy's confirmation."""
        (self.state / egress.POLICY).write_text(json.dumps(policy.to_json()))
        self.agent.sendall(b"p")
        assert self.agent.recv(1) == b"a", "the proxy did not confirm the policy change"

    def close(self) -> None:
        self.agent.close()
        self.thread.join(STEP)
        assert not self.thread.is_alive(), "the proxy did not stop when its agent went away"
        self._keeper_end.close()
        os.close(self.state_fd)


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    running = Harness(tmp_path)
    yield running
    running.close()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    if ADDRESS is None:
        pytest.skip("this host has no non-loopback address to serve the test from")
    server = EchoServer(ADDRESS)
    yield server
    server.close()


def answer_of(sock: socket.socket) -> bytes:
    """Everything ``sock`` receives until the proxy closes it (within :data:`STEP`)."""
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def status_of(sock: socket.socket, request: bytes) -> bytes:
    sock.sendall(request)
    answer = answer_of(sock)
    sock.close()
    return answer.split(b" ", 2)[1] if answer.startswith(b"HTTP/1.1 ") else answer


def is_cut(sock: socket.socket) -> bool:
    """Whether the proxy has ended a relayed connection (end of file or reset)."""
    try:
        sock.sendall(b"ping\n")
        return sock.recv(16) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def echoes(sock: socket.socket) -> bool:
    sock.sendall(b"ping\n")
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(16)
        if not chunk:
            return False
        data += chunk
    return data == b"ping\n"


def tunnel(harness: Harness, host: str, port: int) -> socket.socket:
    sock = harness.connect()
    sock.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        chunk = sock.recv(1)
        assert chunk, f"the proxy closed the tunnel: {head!r}"
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head
    return sock


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET http://a:99999/ HTTP/1.1\r\n\r\n",
        b"GET http://a:1:2/ HTTP/1.1\r\n\r\n",
        b"CONNECT host:1:2 HTTP/1.1\r\n\r\n",
        b"CONNECT a:0 HTTP/1.1\r\n\r\n",
        b"CONNECT a:+80 HTTP/1.1\r\n\r\n",
        "CONNECT a:\uff18\uff10 HTTP/1.1\r\n\r\n".encode(),
        b"CONNECT :443 HTTP/1.1\r\n\r\n",
        b"CONNECT " + b"a" * 64 + b".example:443 HTTP/1.1\r\n\r\n",
        b"CONNECT " + b"a." * 130 + b"com:443 HTTP/1.1\r\n\r\n",
        "CONNECT b\u00fccher.example:443 HTTP/1.1\r\n\r\n".encode(),
        b"CONNECT xn--.example:443 HTTP/1.1\r\n\r\n",
        b"GET http://a..b/ HTTP/1.1\r\n\r\n",
        b"GET http://[::1/ HTTP/1.1\r\n\r\n",
        b"GET http://[not-v6]:80/ HTTP/1.1\r\n\r\n",
        b"GET http://%/ HTTP/1.1\r\n\r\n",
        b"GET ftp://a/ HTTP/1.1\r\n\r\n",
        b"GET http://a/ HTTP/2.0\r\n\r\n",
        b"GET  http://a/ HTTP/1.1\r\n\r\n",
        b"\xff\xfe\x00\r\n\r\n",
        b"nonsense\r\n\r\n",
        b"GET /relative HTTP/1.1\r\n\r\n",
    ],
)
def test_a_malformed_request_is_answered_400_and_closed(
    harness: Harness, request_bytes: bytes, capfd: pytest.CaptureFixture[str]
) -> None:
    assert status_of(harness.connect(), request_bytes) == b"400"
    # The proxy goes on serving, and nothing was written for it (no traceback).
    assert status_of(harness.connect(), b"CONNECT 127.0.0.1:22 HTTP/1.1\r\n\r\n") == b"403"
    assert capfd.readouterr().err == ""


def test_refusals_are_answered_and_closed(harness: Harness) -> None:
    for request, status in (
        (b"CONNECT 127.0.0.1:22 HTTP/1.1\r\n\r\n", b"403"),
        (b"GET http://169.254.169.254/latest/meta-data HTTP/1.1\r\nHost: x\r\n\r\n", b"403"),
        (b"CONNECT [::1]:80 HTTP/1.1\r\n\r\n", b"403"),
        (b"CONNECT [::ffff:127.0.0.1]:80 HTTP/1.1\r\n\r\n", b"403"),
        (b"GET http://x/ HTTP/1.1\r\n" + b"X: " + b"y" * egress.HEAD_LIMIT + b"\r\n\r\n", b"431"),
    ):
        sock = harness.connect()
        sock.sendall(request)
        answer = answer_of(sock)
        sock.close()
        assert answer.split(b" ", 2)[1] == status, (request[:40], answer)
        assert b"X-Managoat-Egress: refused" in answer
    harness.apply(Policy(allow=()))
    assert status_of(harness.connect(), b"CONNECT 8.8.8.8:443 HTTP/1.1\r\n\r\n") == b"403"


def test_connections_beyond_the_cap_are_refused_at_once_on_no_new_thread(tmp_path: Path) -> None:
    harness = Harness(tmp_path, max_connections=3)
    try:
        threads = threading.active_count()
        held = [harness.connect() for _ in range(3)]
        for _ in range(50):
            extra = harness.connect()
            answer = answer_of(extra)
            extra.close()
            assert answer.startswith(b"HTTP/1.1 503"), answer
        assert threading.active_count() <= threads, "the proxy started threads for connections"
        # A held connection that ends frees its place for the next one.
        assert status_of(held.pop(), b"nonsense\r\n\r\n") == b"400"
        assert status_of(harness.connect(), b"nonsense\r\n\r\n") == b"400"
        for sock in held:
            sock.close()
    finally:
        harness.close()


def test_a_silent_connection_is_answered_408_after_the_head_timeout(tmp_path: Path) -> None:
    harness = Harness(tmp_path, head_timeout=0.2)
    try:
        answer = answer_of(harness.connect())
        assert answer.startswith(b"HTTP/1.1 408"), answer
        # A head that is still coming in when the time is up is not waited for either.
        partial = harness.connect()
        partial.sendall(b"CONNECT ")
        assert answer_of(partial).startswith(b"HTTP/1.1 408")
    finally:
        harness.close()


def test_an_idle_relay_is_closed_and_an_active_one_is_not(tmp_path: Path, echo: EchoServer) -> None:
    assert ADDRESS is not None
    idle = 0.4
    harness = Harness(tmp_path, idle_timeout=idle)
    try:
        harness.apply(Policy(allow=("echo.test",), resolve={"echo.test": ADDRESS}))
        active = tunnel(harness, "echo.test", echo.port)
        # Busy for several idle timeouts: a relay that carries data is never cut.
        pace = threading.Event()
        until = time.monotonic() + 4 * idle
        while time.monotonic() < until:
            assert echoes(active), "an active relay was cut"
            pace.wait(idle / 4)
        # Then silent: closed once idle for the timeout.
        assert active.recv(16) == b""
        active.close()
    finally:
        harness.close()


def test_narrowing_the_policy_cuts_the_relays_it_no_longer_permits(
    harness: Harness, echo: EchoServer
) -> None:
    assert ADDRESS is not None
    pins = {"a.test": ADDRESS, "b.test": ADDRESS}
    harness.apply(Policy(allow=("a.test", "b.test"), resolve=pins))
    a, b = tunnel(harness, "a.test", echo.port), tunnel(harness, "b.test", echo.port)
    assert echoes(a) and echoes(b)
    harness.apply(Policy(allow=("b.test",), resolve=pins))
    assert is_cut(a), "a relay to a host the policy no longer names goes on"
    assert echoes(b)
    # No policy: only public addresses, and this one is not.
    harness.apply(Policy(resolve=pins))
    assert is_cut(b), "a relay to an address the policy no longer permits goes on"


def test_deny_all_cuts_every_connection_whatever_its_state(
    harness: Harness, echo: EchoServer
) -> None:
    assert ADDRESS is not None
    pins = {"a.test": ADDRESS}
    harness.apply(Policy(allow=("a.test",), resolve=pins))
    relayed = tunnel(harness, "a.test", echo.port)
    waiting = harness.connect()
    waiting.sendall(b"CONNECT a.te")
    harness.apply(Policy(allow=(), resolve=pins))
    assert is_cut(relayed)
    assert answer_of(waiting) == b""
    assert status_of(harness.connect(), b"CONNECT a.test:1 HTTP/1.1\r\n\r\n") == b"403"


def test_the_log_never_grows_past_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "agent.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, b"from before\n")
        stream = keeper.bounded_stderr(fd, 1000)
        for line in range(1000):
            stream.write(f"traceback line {line}\n")
        stream.flush()
        assert path.stat().st_size == 1000
        stream.write("more\n")
        stream.flush()
        assert path.stat().st_size == 1000
        assert path.read_bytes().startswith(b"from before\ntraceback line 0\n")
    finally:
        os.close(fd)


def test_the_cap_is_the_sandboxs_process_limit_when_lower() -> None:
    assert keeper.connection_cap(None) == keeper.MAX_CONNECTIONS
    assert keeper.connection_cap(32) == 32
    assert keeper.connection_cap(keeper.MAX_CONNECTIONS * 4) == keeper.MAX_CONNECTIONS
