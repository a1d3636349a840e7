"""Egress, enforced by the kernel and the proxy outside the sandbox.

The only way out of an isolated sandbox is its proxy port; these tests reach a
server of their own on one of this host's non-loopback addresses (skipped if the
host has none), with a name pinned through ``local.egress_hosts`` — the network
here reaches nothing else.
"""

from __future__ import annotations

import http.server
import os
import re
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from managoat_sandbox import Error, Exit, Stderr, Stdout, config, iter_frames
from managoat_sandbox._engine import keeper, launch
from managoat_sandbox.errors import Unavailable
from managoat_sandbox.providers.local import Local
from managoat_sandbox.types import Command, Handle, NetworkPolicy

from ..engine.echo import EchoServer
from .conftest import requires_isolation

pytestmark = requires_isolation


def _host_address() -> str | None:
    """An address of this host that is not loopback, or None."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else str(address)


ADDRESS = _host_address()


class Server:
    """An HTTP server on a host address that counts the requests it answers."""

    def __init__(self, address: str) -> None:
        hits: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                body = b"reached"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.hits = hits
        self.httpd = http.server.ThreadingHTTPServer((address, 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def server() -> Iterator[Server]:
    if ADDRESS is None:
        pytest.skip("this host has no non-loopback address to serve the test from")
    running = Server(ADDRESS)
    yield running
    running.close()


@pytest.fixture
def sandbox(local: Local, server: Server) -> Handle:
    assert ADDRESS is not None
    config.configure("local", egress_hosts={"allowed.test": ADDRESS, "other.test": ADDRESS})
    return local.create("net")


def fetch(local: Local, handle: Handle, host: str, port: int, *, tunnel: bool) -> str:
    """What a command gets asking the sandbox's proxy for ``http://host:port/x``."""
    if tunnel:
        request = (
            f"c = http.client.HTTPConnection('127.0.0.1', 3128, timeout=10)\n"
            f"c.set_tunnel('{host}', {port})\nc.request('GET', '/x')\n"
        )
    else:
        request = (
            f"c = http.client.HTTPConnection('127.0.0.1', 3128, timeout=10)\n"
            f"c.request('GET', 'http://{host}:{port}/x')\n"
        )
    script = (
        "import http.client\ntry:\n"
        + "".join(f"    {line}\n" for line in request.splitlines())
        + "    r = c.getresponse(); print(r.status, r.read().decode())\n"
        "except OSError as e:\n    print('error', e)\n"
    )
    output, _ = local.exec(handle, "python3", ["-c", script], timeout=30)
    return output.decode()


def direct(local: Local, handle: Handle, host: str, port: int) -> str:
    script = (
        f"import socket\ntry:\n    socket.create_connection(('{host}', {port}), 5)\n"
        f"    print('connected')\nexcept OSError as e:\n    print('error', e)\n"
    )
    return local.exec(handle, "python3", ["-c", script], timeout=30).output.decode()


def test_there_is_no_route_out_but_the_proxy(local: Local, sandbox: Handle, server: Server) -> None:
    assert ADDRESS is not None
    assert "Network is unreachable" in direct(local, sandbox, ADDRESS, server.port)
    assert server.hits == []


def test_without_a_policy_private_loopback_and_metadata_addresses_are_refused(
    local: Local, sandbox: Handle, server: Server
) -> None:
    assert ADDRESS is not None
    for host, port in (
        (ADDRESS, server.port),
        ("allowed.test", server.port),
        ("127.0.0.1", 22),
        ("169.254.169.254", 80),
        ("[::1]", 80),
    ):
        for tunnel in (True, False):
            answer = fetch(local, sandbox, host, port, tunnel=tunnel)
            assert "403" in answer, (host, tunnel, answer)
    assert server.hits == []


def test_an_allow_list_lets_through_only_the_named_domains(
    local: Local, sandbox: Handle, server: Server
) -> None:
    assert ADDRESS is not None
    local.apply_network_policy(sandbox, NetworkPolicy(allow=["allowed.test"]))
    assert fetch(local, sandbox, "allowed.test", server.port, tunnel=False) == "200 reached\n"
    assert fetch(local, sandbox, "allowed.test", server.port, tunnel=True) == "200 reached\n"
    for host in ("other.test", ADDRESS, "sub.allowed.test"):
        assert "403" in fetch(local, sandbox, host, server.port, tunnel=True), host
    assert server.hits == ["/x", "/x"]


def test_policies_change_on_a_live_sandbox_and_survive_suspend_and_resume(
    local: Local, sandbox: Handle, server: Server
) -> None:
    local.apply_network_policy(sandbox, NetworkPolicy(allow=["*.test"]))
    assert fetch(local, sandbox, "other.test", server.port, tunnel=True) == "200 reached\n"
    local.apply_network_policy(sandbox, NetworkPolicy.deny_all())
    assert "Connection refused" in fetch(local, sandbox, "other.test", server.port, tunnel=True)
    local.suspend(sandbox)
    local.resume(sandbox)
    assert "Connection refused" in fetch(local, sandbox, "other.test", server.port, tunnel=True)
    local.apply_network_policy(sandbox, NetworkPolicy(allow=["allowed.test"]))
    assert fetch(local, sandbox, "allowed.test", server.port, tunnel=True) == "200 reached\n"
    assert server.hits == ["/x", "/x"]


def test_a_deny_all_policy_survives_the_agent_restarting(
    local: Local, sandbox: Handle, server: Server
) -> None:
    local.apply_network_policy(sandbox, NetworkPolicy.deny_all())
    local.restore_checkpoint(sandbox, local.create_checkpoint(sandbox))
    assert "Connection refused" in fetch(local, sandbox, "allowed.test", server.port, tunnel=True)
    assert server.hits == []


# -- what a hostile command can make the proxy do ---------------------------------------------

#: Seconds allowed for each step (a bound for a loaded machine, not an expected time).
STEP = 30.0

#: Opens 200 connections to the proxy and sends nothing; counts those the proxy refuses
#: at once, then holds the rest until its stdin ends.
CROWD = """
import select, socket, sys
cap = int(sys.argv[1])
socks = [socket.create_connection(("127.0.0.1", 3128), 10) for _ in range(200)]
refused = set()
while len(refused) < len(socks) - cap:
    ready, _, _ = select.select([s for s in socks if s not in refused], [], [], 20)
    if not ready:
        break
    for s in ready:
        s.recv(4096)
        refused.add(s)
print("refused", len(refused), flush=True)
sys.stdin.read()
"""

#: 2,000 malformed requests, one per connection; stops at the first not answered 400.
GARBAGE = """
import socket
kinds = [
    b"GET http://a:99999/ HTTP/1.1\\r\\n\\r\\n",
    b"CONNECT host:1:2 HTTP/1.1\\r\\n\\r\\n",
    b"CONNECT " + b"a" * 64 + b".example:443 HTTP/1.1\\r\\n\\r\\n",
    "CONNECT b\\u00fccher.example:443 HTTP/1.1\\r\\n\\r\\n".encode(),
    b"CONNECT xn--.example:443 HTTP/1.1\\r\\n\\r\\n",
    b"GET http://[::1/ HTTP/1.1\\r\\n\\r\\n",
    b"\\xff\\xfe\\r\\n\\r\\n",
]
for i in range(2000):
    s = socket.create_connection(("127.0.0.1", 3128), 10)
    s.settimeout(10)
    s.sendall(kinds[i % len(kinds)])
    answer = b""
    try:
        while chunk := s.recv(4096):
            answer += chunk
    except OSError as e:
        answer += repr(e).encode()
    s.close()
    if not answer.startswith(b"HTTP/1.1 400 "):
        print("unanswered", i, answer[:60])
        break
else:
    print("answered", i + 1)
"""

#: Two tunnels through the proxy to the echo server (``a`` to allowed.test, ``b`` to
#: other.test); each line on stdin names one to try, answered "<name> ok|cut".
TUNNELS = """
import socket, sys
port = int(sys.argv[1])
def tunnel(host):
    s = socket.create_connection(("127.0.0.1", 3128), 10)
    s.settimeout(10)
    s.sendall(f"CONNECT {host}:{port} HTTP/1.1\\r\\nHost: {host}\\r\\n\\r\\n".encode())
    head = b""
    while not head.endswith(b"\\r\\n\\r\\n"):
        chunk = s.recv(1)
        if not chunk:
            raise SystemExit(f"closed during CONNECT: {head!r}")
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head
    return s
tunnels = {"a": tunnel("allowed.test"), "b": tunnel("other.test")}
print("open", flush=True)
for line in sys.stdin:
    name = line.strip()
    try:
        tunnels[name].sendall(b"ping\\n")
        answer = tunnels[name].recv(16)
    except OSError:
        answer = b""
    print(name, "ok" if answer == b"ping\\n" else "cut", flush=True)
"""

#: Tries to take the proxy's port every way a command could; prints one word per try.
TAKE_PORT = """
import socket
from errno import errorcode
A, R, P = socket.SOL_SOCKET, socket.SO_REUSEADDR, socket.SO_REUSEPORT
results = []
for family, address, options in [
    (socket.AF_INET, "127.0.0.1", []),
    (socket.AF_INET, "127.0.0.1", [R]),
    (socket.AF_INET, "127.0.0.1", [R, P]),
    (socket.AF_INET, "0.0.0.0", [R, P]),
    (socket.AF_INET6, "::", [R, P]),
    (socket.AF_INET6, "::ffff:127.0.0.1", [R, P]),
]:
    try:
        s = socket.socket(family)
    except OSError as e:
        results.append(errorcode.get(e.errno, "error"))
        continue
    try:
        for option in options:
            s.setsockopt(A, option, 1)
        s.bind((address, 3128))
        s.listen(1)
        results.append("bound")
    except OSError as e:
        results.append(errorcode.get(e.errno, "error"))
    finally:
        s.close()
print(" ".join(results))
"""


class Lines:
    """The lines a spawned command prints, read as they come (each within :data:`STEP`)."""

    def __init__(self, command: Command) -> None:
        self._frames = iter_frames(command, timeout=STEP)
        self._buffer = b""
        self._errors = b""

    def next(self) -> str:
        while b"\n" not in self._buffer:
            frame = next(self._frames, None)
            if isinstance(frame, Stdout):
                self._buffer += frame.data
            elif isinstance(frame, Stderr):
                self._errors += frame.data
            else:
                raise AssertionError(f"the command ended ({frame}): {self._errors!r}")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def end(self) -> Exit | Error:
        for frame in self._frames:
            if isinstance(frame, (Exit, Error)):
                return frame
        raise AssertionError("the command's frames ended without an end")


def keeper_of(root: Path, handle: Handle) -> subprocess.Popen[bytes]:
    """The keeper this process launched for the sandbox (and runs now)."""
    launched = [
        proc
        for proc in launch._launched.get(root / handle.name, [])
        if "--agent" in argv_of(proc) and proc.poll() is None
    ]
    assert len(launched) == 1, launched
    return launched[0]


def argv_of(proc: subprocess.Popen[bytes]) -> list[str]:
    assert isinstance(proc.args, list)
    return [str(arg) for arg in proc.args]


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    if ADDRESS is None:
        pytest.skip("this host has no non-loopback address to serve the test from")
    running = EchoServer(ADDRESS)
    yield running
    running.close()


def test_a_sandbox_holds_at_most_its_share_of_proxy_connections_on_a_few_keeper_threads(
    local: Local, root: Path
) -> None:
    """A sandbox limited to 32 processes may hold 32 proxy connections: the rest are
    refused at once (503), and the keeper serves them all on a fixed few threads."""
    handle = local.create("crowd", limits={"processes": 32})
    keeper_process = keeper_of(root, handle)
    command = local.spawn(handle, "python3", ["-c", CROWD, "32"], stdin=True)
    lines = Lines(command)
    assert lines.next() == f"refused {200 - 32}"
    status = Path(f"/proc/{keeper_process.pid}/status").read_text()
    threads = re.search(r"^Threads:\s+(\d+)$", status, re.MULTILINE)
    assert threads is not None and int(threads.group(1)) <= 2 + keeper.RESOLVERS, status
    assert len(os.listdir(f"/proc/{keeper_process.pid}/fd")) <= 32 + 16
    local.close_stdin(command)
    assert lines.end() == Exit(command.ref, 0)


def test_malformed_requests_are_answered_400_and_the_log_stays_bounded(
    local: Local, root: Path
) -> None:
    handle = local.create("garbage")
    log = root / handle.name / "state" / launch.LOG
    before = log.stat().st_size
    result = local.exec(handle, "python3", ["-c", GARBAGE], timeout=300)
    assert result.output.decode() == "answered 2000\n", result
    size = log.stat().st_size
    assert size - before < 1024, "the keeper logged malformed requests"
    assert size <= keeper.LOG_LIMIT


def test_narrowing_a_policy_cuts_the_connections_it_no_longer_permits(
    local: Local, root: Path, echo: EchoServer
) -> None:
    """Once ``apply_network_policy`` returns, no connection the new policy forbids is
    left: a host the allow-list drops loses its tunnel at once, the others keep theirs,
    and deny-all leaves no route out at all."""
    assert ADDRESS is not None
    config.configure("local", egress_hosts={"allowed.test": ADDRESS, "other.test": ADDRESS})
    handle = local.create("cut")
    local.apply_network_policy(handle, NetworkPolicy(allow=["allowed.test", "other.test"]))
    command = local.spawn(handle, "python3", ["-c", TUNNELS, str(echo.port)], stdin=True)
    lines = Lines(command)
    assert lines.next() == "open"

    def attempt(name: str) -> str:
        local.write_stdin(command, f"{name}\n".encode())
        return lines.next()

    assert attempt("a") == "a ok" and attempt("b") == "b ok"
    local.apply_network_policy(handle, NetworkPolicy(allow=["other.test"]))
    assert attempt("a") == "a cut"
    assert attempt("b") == "b ok"
    local.apply_network_policy(handle, NetworkPolicy.deny_all())
    assert attempt("b") == "b cut"
    local.close_stdin(command)
    assert lines.end() == Exit(command.ref, 0)


def test_no_command_can_take_the_proxy_port_whatever_the_policy(
    local: Local, sandbox: Handle, server: Server
) -> None:
    """The agent holds the proxy's port for the sandbox's whole life, also under
    deny-all (where connecting to it is refused): re-allowing always works, and the
    sandbox's sessions live on."""
    follower = local.spawn(sandbox, "cat", [], stdin=True)
    lines = Lines(follower)
    refused_everywhere = ["EADDRINUSE"] * 6
    assert _take_port(local, sandbox) == refused_everywhere
    local.apply_network_policy(sandbox, NetworkPolicy.deny_all())
    assert "Connection refused" in fetch(local, sandbox, "allowed.test", server.port, tunnel=True)
    assert _take_port(local, sandbox) == refused_everywhere
    local.apply_network_policy(sandbox, NetworkPolicy(allow=["allowed.test"]))
    assert fetch(local, sandbox, "allowed.test", server.port, tunnel=True) == "200 reached\n"
    local.write_stdin(follower, b"still here\n")
    assert lines.next() == "still here"
    local.close_stdin(follower)
    assert lines.end() == Exit(follower.ref, 0)


def _take_port(local: Local, handle: Handle) -> list[str]:
    words = local.exec(handle, "python3", ["-c", TAKE_PORT], timeout=30).output.decode().split()
    # Where the sandbox has no IPv6, its two tries cannot bind anything either.
    return ["EADDRINUSE" if word == "EAFNOSUPPORT" else word for word in words]


def test_a_policy_change_that_cannot_be_put_in_force_is_an_error(
    local: Local, root: Path, sandbox: Handle, server: Server
) -> None:
    """With the keeper gone, opening egress cannot be put in force: it is Unavailable,
    never a success, and the agent serves on; closing it still can be."""
    keeper_process = keeper_of(root, sandbox)
    keeper_process.kill()
    keeper_process.wait(STEP)
    try:
        with pytest.raises(Unavailable) as caught:
            local.apply_network_policy(sandbox, NetworkPolicy(allow=["allowed.test"]))
        assert caught.value.detail[0] == "policy_failed"
        assert "not running" in caught.value.detail[1]
        assert local.exec(sandbox, "true").exit_code == 0
        local.apply_network_policy(sandbox, NetworkPolicy.deny_all())
        assert "Connection refused" in fetch(local, sandbox, "allowed.test", 80, tunnel=True)
        assert server.hits == []
    finally:
        local.destroy(sandbox)


def test_destroy_ends_and_reaps_the_keeper_it_launched(local: Local, root: Path) -> None:
    """The keeper's work ends with the agent: once destroy returns the keeper has ended
    (killed, or gone by itself on seeing the agent exit) and been reaped, and nothing
    of the sandbox is left tracked as this process's child."""
    handle = local.create("brief")
    keeper_process = keeper_of(root, handle)
    local.destroy(handle)
    assert keeper_process.returncode is not None
    assert root / handle.name not in launch._launched
