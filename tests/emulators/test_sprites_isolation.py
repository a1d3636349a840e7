"""Each emulated sprite is one box: its paths, processes, network and files are its own.

What the filesystem API writes at a sprite path is what the sprite's commands
read at that path (never the host's file of that name); commands see only the
sprite's processes; allow-list network policies are enforced by the box's
egress filter; checkpoints copy the sprite's files without following what its
commands planted, and a restore ends the sprite's commands before swapping
its files. The tests that need the host's isolation skip without it (the
others name sprite paths relatively, from ``/`` or ``$HOME``, as commands see
them either way).
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
import requests
import websocket

from managoat_sandbox._engine import isolation
from managoat_sandbox.emulators.sprites import SpritesEmulator
from managoat_sandbox.emulators.sprites.network import egress_policy
from tests.conftest import wait_until

pytestmark = pytest.mark.timeout(60)
TOKEN = "sprites-isolation-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
isolated = pytest.mark.skipif(
    not isolation.support().available, reason="the host cannot isolate sandboxes"
)
#: A root caller's sprite has a user of its own only when isolated; unisolated, its
#: files are reached as root, who may use any of them.
has_a_user = pytest.mark.skipif(
    os.geteuid() == 0 and not isolation.support().available,
    reason="a root caller's sprite has no user of its own without isolation",
)


@pytest.fixture
def emulator() -> Iterator[SpritesEmulator]:
    with SpritesEmulator(credential=TOKEN) as server:
        for name in ("one", "two"):
            created = requests.post(
                f"{server.base_url}/v1/sprites", json={"name": name}, headers=AUTH, timeout=10
            )
            assert created.status_code == 201
        yield server  # type: ignore[misc]


def http(emulator: SpritesEmulator, method: str, path: str, **kwargs: Any) -> requests.Response:
    return requests.request(method, emulator.base_url + path, headers=AUTH, timeout=10, **kwargs)


def connect(emulator: SpritesEmulator, name: str, script: str) -> websocket.WebSocket:
    """A socket running ``bash -c script`` in sprite ``name``; its session_info consumed."""
    query = urlencode([("cmd", "bash"), ("cmd", "-c"), ("cmd", script), ("detachable", "true")])
    ws = websocket.create_connection(
        emulator.base_url.replace("http", "ws", 1) + f"/v1/sprites/{name}/exec?{query}",
        header=[f"Authorization: Bearer {TOKEN}"],
        timeout=20,
    )
    opcode, data = ws.recv_data()
    assert opcode == websocket.ABNF.OPCODE_TEXT and json.loads(data)["type"] == "session_info"
    return ws


def finish(ws: websocket.WebSocket) -> tuple[bytes, int | None]:
    """Stdout until the exit frame (its code) or a close without one (None)."""
    out = b""
    while True:
        opcode, data = ws.recv_data(control_frame=True)
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            return out, None
        if opcode == websocket.ABNF.OPCODE_BINARY and data[:1] == b"\x01":
            out += data[1:]
        elif opcode == websocket.ABNF.OPCODE_BINARY and data[:1] == b"\x03":
            return out, data[1]


def sh(emulator: SpritesEmulator, name: str, script: str) -> tuple[bytes, int | None]:
    return finish(connect(emulator, name, script))


def write(emulator: SpritesEmulator, name: str, path: str, data: bytes) -> requests.Response:
    return http(
        emulator,
        "PUT",
        f"/v1/sprites/{name}/fs/write",
        data=data,
        params={"path": path, "workingDir": "/", "mkdirParents": "true"},
    )


def read(emulator: SpritesEmulator, name: str, path: str) -> requests.Response:
    return http(
        emulator, "GET", f"/v1/sprites/{name}/fs/read", params={"path": path, "workingDir": "/"}
    )


# -- paths ---------------------------------------------------------------------------------------


@isolated
def test_an_absolute_path_means_the_same_file_to_the_api_and_to_commands_never_the_hosts(
    emulator: SpritesEmulator,
) -> None:
    top = f"/opt/msb-{secrets.token_hex(8)}"
    assert not os.path.lexists(top)
    assert write(emulator, "one", f"{top}/x", b"from the api").status_code == 200
    assert sh(emulator, "one", f"cat {top}/x; echo back > {top}/y") == (b"from the api", 0)
    assert read(emulator, "one", f"{top}/y").content == b"back\n"
    assert sh(emulator, "two", f"test -e {top}/x")[1] == 1
    assert not os.path.lexists(top)


@isolated
def test_a_symlink_a_command_plants_resolves_inside_the_sprite(emulator: SpritesEmulator) -> None:
    top = f"/opt/msb-{secrets.token_hex(8)}"
    assert sh(emulator, "one", f"ln -s {top} /home/sprite/link")[1] == 0
    assert write(emulator, "one", "/home/sprite/link/x", b"through the link").status_code == 200
    assert sh(emulator, "one", f"cat {top}/x") == (b"through the link", 0)
    assert read(emulator, "one", "/home/sprite/link/x").content == b"through the link"
    assert not os.path.lexists(top)


@isolated
def test_writes_under_the_read_only_system_mounts_are_refused(emulator: SpritesEmulator) -> None:
    refused = write(emulator, "one", "/usr/local/msb-x", b"x")
    assert refused.status_code == 400 and refused.json()["code"] == "EROFS"
    assert sh(emulator, "one", "test -e /usr/local/msb-x")[1] == 1


def test_a_fifo_is_never_opened_by_the_api(emulator: SpritesEmulator) -> None:
    assert sh(emulator, "one", 'mkfifo "$HOME/pipe"')[1] == 0
    answer = read(emulator, "one", "/home/sprite/pipe")
    assert answer.status_code == 400 and answer.json()["code"] == "EINVAL"


@has_a_user
def test_what_the_sprites_user_may_not_use_is_refused_with_the_vendors_error_body(
    emulator: SpritesEmulator,
) -> None:
    base = "/home/sprite/rights"
    assert write(emulator, "one", f"{base}/secret", b"x").status_code == 200
    assert write(emulator, "one", f"{base}/closed/inside", b"x").status_code == 200
    assert sh(emulator, "one", 'cd "$HOME/rights" && chmod 000 secret closed')[1] == 0
    answers = {
        f"{base}/secret": read(emulator, "one", f"{base}/secret"),
        f"{base}/closed": http(
            emulator,
            "GET",
            "/v1/sprites/one/fs/list",
            params={"path": f"{base}/closed", "workingDir": "/"},
        ),
        f"{base}/closed/new": write(emulator, "one", f"{base}/closed/new", b"y"),
    }
    for path, answer in answers.items():
        text = f"open {path}: permission denied"
        assert (answer.status_code, answer.json()) == (
            403,
            {"error": text, "message": text, "code": "EACCES", "path": path},
        )


# -- processes -----------------------------------------------------------------------------------


@isolated
def test_a_command_sees_only_its_sprites_processes(emulator: SpritesEmulator) -> None:
    markers = {name: f"msb-{name}-{secrets.token_hex(6)}" for name in ("one", "two")}
    sockets = [
        connect(emulator, name, f"echo up; sleep 300; : {marker}")
        for name, marker in markers.items()
    ]
    for ws in sockets:
        assert ws.recv_data() == (websocket.ABNF.OPCODE_BINARY, b"\x01up\n")
    listing, code = sh(
        emulator,
        "one",
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline;"
        " echo; done; echo ---; ps -eo pid=,args=",
    )
    assert code == 0
    proc_part, ps_part = listing.decode().split("---\n")
    for part in (proc_part, ps_part):
        assert markers["one"] in part
        assert markers["two"] not in part
        assert "pytest" not in part
    pids = [int(line.split()[0]) for line in ps_part.splitlines() if line.strip()]
    assert 1 in pids and len(pids) < 20  # the sprite's own PID namespace
    for ws in sockets:
        ws.close()


# -- network -------------------------------------------------------------------------------------

PROXY_PROBE = (
    "exec 3<>/dev/tcp/127.0.0.1/3128 || exit 9; "
    "printf 'CONNECT unlisted.example:443 HTTP/1.1\\r\\n"
    "Host: unlisted.example:443\\r\\n\\r\\n' >&3; head -n1 <&3"
)


@isolated
def test_allow_list_policies_are_enforced_by_the_egress_filter(emulator: SpritesEmulator) -> None:
    policy = "/v1/sprites/one/policy/network"
    allow = {
        "rules": [
            {"domain": "allowed.example", "action": "allow"},
            {"domain": "*", "action": "deny"},
        ]
    }
    assert http(emulator, "POST", policy, json=allow).status_code == 204
    answer, code = sh(emulator, "one", PROXY_PROBE)
    assert code == 0 and b" 403" in answer
    deny_all = {"rules": [{"domain": "*", "action": "deny"}]}
    assert http(emulator, "POST", policy, json=deny_all).status_code == 204
    assert sh(emulator, "one", PROXY_PROBE)[1] == 9
    assert http(emulator, "POST", policy, json={"rules": []}).status_code == 204
    assert sh(emulator, "one", "exec 3<>/dev/tcp/127.0.0.1/3128 && echo open") == (b"open\n", 0)


@pytest.mark.parametrize(
    ("rules", "allow"),
    [
        ([], None),
        ([{"domain": "*", "action": "deny"}], ()),
        ([{"domain": "Example.com", "action": "allow"}], ("example.com",)),
        (
            [
                {"domain": "*.example.com", "action": "allow"},
                {"domain": "a.io", "action": "allow"},
                {"domain": "*", "action": "deny"},
            ],
            ("*.example.com", "a.io"),
        ),
        ([{"domain": "not a host", "action": "allow"}], ()),
        ([{"domain": "*", "action": "allow"}], None),
        ([{"domain": "*", "action": "allow"}, {"domain": "x.com", "action": "allow"}], None),
        ([{"domain": "x.com", "action": "allow"}, {"include": "defaults"}], None),
        ([{"domain": "evil.com", "action": "deny"}], None),
        ([{"domain": "*", "action": "deny"}, {"domain": "*", "action": "allow"}], None),
    ],
)
def test_policies_map_onto_egress_allow_lists_only_where_they_are_one(
    rules: list[dict[str, str]],
    allow: tuple[str, ...] | None,
) -> None:
    assert egress_policy(rules).allow == allow


# -- checkpoints ---------------------------------------------------------------------------------


def test_a_checkpoint_copies_links_as_links_and_leaves_fifos_out(
    emulator: SpritesEmulator,
) -> None:
    script = (
        'cd "$HOME" && echo data > f && mkfifo pipe && ln -s /etc/hostname link '
        "&& mkdir -p d/e && echo deep > d/e/g && chmod 555 d"
    )
    assert sh(emulator, "one", script)[1] == 0
    created = http(emulator, "POST", "/v1/sprites/one/checkpoint", json={"comment": "c"})
    assert json.loads(created.text.splitlines()[-1])["type"] == "complete"
    assert sh(emulator, "one", 'cd "$HOME" && chmod 755 d && rm -r f link d pipe')[1] == 0
    restored = http(emulator, "POST", "/v1/sprites/one/checkpoints/v1/restore")
    assert json.loads(restored.text.splitlines()[-1])["type"] == "complete"
    out, code = sh(
        emulator,
        "one",
        'cd "$HOME" && cat f d/e/g && readlink link '
        "&& stat -c %a d && test ! -e pipe && echo no-pipe",
    )
    assert code == 0
    assert out.decode().split() == ["data", "deep", "/etc/hostname", "555", "no-pipe"]


def test_restoring_ends_the_running_commands_then_swaps_the_files(
    emulator: SpritesEmulator,
) -> None:
    assert write(emulator, "one", "/state.txt", b"before").status_code == 200
    http(emulator, "POST", "/v1/sprites/one/checkpoint", json={})
    assert write(emulator, "one", "/state.txt", b"after").status_code == 200
    running = connect(emulator, "one", "echo up; sleep 300")
    assert running.recv_data() == (websocket.ABNF.OPCODE_BINARY, b"\x01up\n")
    restored = http(emulator, "POST", "/v1/sprites/one/checkpoints/v1/restore")
    assert json.loads(restored.text.splitlines()[-1])["type"] == "complete"
    assert finish(running) == (b"", None)
    assert wait_until(
        lambda: http(emulator, "GET", "/v1/sprites/one/exec").json() == {"sessions": []}
    )
    assert sh(emulator, "one", "cat state.txt") == (b"before", 0)  # in /
