"""Egress, enforced by the kernel and the proxy outside the sandbox.

The only way out of an isolated sandbox is its proxy port; these tests reach a
server of their own on one of this host's non-loopback addresses (skipped if the
host has none), with a name pinned through ``local.egress_hosts`` — the network
here reaches nothing else.
"""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from managoat_sandbox import config
from managoat_sandbox.providers.local import Local
from managoat_sandbox.types import Handle, NetworkPolicy

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
