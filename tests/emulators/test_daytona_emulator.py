"""The Daytona emulator over raw HTTP: routes, status codes, states, log formats, faults."""

from __future__ import annotations

import base64
import email.parser
import email.policy
import json
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
import websocket

from managoat_sandbox._engine import isolation
from managoat_sandbox.emulators._reap import marked_processes
from managoat_sandbox.emulators._server import MARKER_ENV
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.emulators.daytona.downloads import go_mode
from tests.conftest import wait_until
from tests.handshake import daytona_gate

pytestmark = pytest.mark.timeout(60)
KEY = "test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
SPLIT = {**AUTH, "X-Daytona-Split-Output": "true"}


class Client:
    """Raw HTTP against one emulator."""

    def __init__(self, emulator: DaytonaEmulator) -> None:
        self.emulator = emulator
        self.api = emulator.api_url

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("headers", AUTH)
        kwargs.setdefault("timeout", 30)
        return requests.request(method, self.api + path, **kwargs)

    def create(self, name: str, **body: Any) -> dict[str, Any]:
        answer = self.call("POST", "/sandbox", json={"name": name, **body})
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def tb(
        self, sandbox: dict[str, Any], method: str, path: str, **kwargs: Any
    ) -> requests.Response:
        kwargs.setdefault("headers", AUTH)
        kwargs.setdefault("timeout", 30)
        url = sandbox["toolboxProxyUrl"].rstrip("/") + "/" + sandbox["id"] + path
        return requests.request(method, url, **kwargs)

    def session(self, sandbox: dict[str, Any], session_id: str = "s1") -> None:
        answer = self.tb(sandbox, "POST", "/process/session", json={"sessionId": session_id})
        assert answer.status_code == 201, answer.text

    def run(self, sandbox: dict[str, Any], command: str, session_id: str = "s1") -> str:
        answer = self.tb(
            sandbox,
            "POST",
            f"/process/session/{session_id}/exec",
            json={"command": command, "runAsync": True},
        )
        assert answer.status_code == 202, answer.text
        return str(answer.json()["cmdId"])

    def record(self, sandbox: dict[str, Any], command_id: str, session_id: str = "s1") -> Any:
        return self.tb(sandbox, "GET", f"/process/session/{session_id}/command/{command_id}").json()

    def wait_exit(self, sandbox: dict[str, Any], command_id: str, session_id: str = "s1") -> int:
        assert wait_until(lambda: "exitCode" in self.record(sandbox, command_id, session_id), 10)
        return int(self.record(sandbox, command_id, session_id)["exitCode"])

    def logs(
        self,
        sandbox: dict[str, Any],
        command_id: str,
        headers: dict[str, str],
        session_id: str = "s1",
        **kwargs: Any,
    ) -> requests.Response:
        return self.tb(
            sandbox,
            "GET",
            f"/process/session/{session_id}/command/{command_id}/logs",
            headers=headers,
            **kwargs,
        )


@pytest.fixture
def emulator() -> Iterator[DaytonaEmulator]:
    with DaytonaEmulator(credential=KEY) as running:
        running.log_idle_close = 0.05
        yield running  # type: ignore[misc]


@pytest.fixture
def client(emulator: DaytonaEmulator) -> Client:
    return Client(emulator)


@pytest.fixture
def sandbox(client: Client) -> dict[str, Any]:
    return client.create("box", labels={"team": "a"})


# -- auth ----------------------------------------------------------------------------


def test_api_wants_the_bearer_key_and_answers_nest_401(client: Client) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        answer = client.call("GET", "/sandbox", headers=headers)
        assert answer.status_code == 401
        body = answer.json()
        assert body["statusCode"] == 401 and body["error"] == "Unauthorized"
        assert {"path", "timestamp", "message"} <= set(body)
    assert KEY not in repr(client.emulator.requests)


def test_toolbox_401_is_daemon_shaped_and_preview_token_is_accepted(
    client: Client, sandbox: dict[str, Any]
) -> None:
    answer = client.tb(sandbox, "GET", "/process/session", headers={})
    assert answer.status_code == 401 and answer.json()["code"] == "UNAUTHORIZED"
    token = client.call("GET", f"/sandbox/{sandbox['id']}/ports/3000/preview-url").json()["token"]
    ok = client.tb(sandbox, "GET", "/process/session", headers={"X-Daytona-Preview-Token": token})
    assert ok.status_code == 200 and ok.json() == []


# -- create / get / delete -------------------------------------------------------------


def test_create_returns_every_field_the_sdk_needs(client: Client) -> None:
    body = client.create("full", labels={"a": "1"}, ttlMinutes=0, autoStopInterval=0)
    required = {
        "id",
        "organizationId",
        "name",
        "target",
        "user",
        "env",
        "labels",
        "public",
        "networkBlockAll",
        "cpu",
        "gpu",
        "memory",
        "disk",
        "toolboxProxyUrl",
        "kvm",
        "state",
        "desiredState",
        "createdAt",
        "lastActivityAt",
        "autoStopInterval",
    }
    assert required <= set(body)
    assert body["state"] == "started" and body["labels"] == {"a": "1"}
    assert body["toolboxProxyUrl"] == client.emulator.base_url + "/toolbox"
    assert body["user"] == "daytona" and body["autoStopInterval"] == 0
    assert body["autoArchiveInterval"] == 10080 and body["autoDeleteInterval"] == -1


def test_create_validation(client: Client) -> None:
    client.create("taken")
    conflict = client.call("POST", "/sandbox", json={"name": "taken"})
    assert conflict.status_code == 409
    assert conflict.json()["message"] == "Sandbox with name taken already exists"
    snapshot = client.call("POST", "/sandbox", json={"snapshot": "nope"})
    assert snapshot.status_code == 400
    assert snapshot.json()["message"].startswith("Snapshot nope not found.")
    assert client.call("POST", "/sandbox", json={"cpu": 2}).status_code == 400
    assert client.call("POST", "/sandbox", json={"autoStopInterval": -1}).status_code == 400
    assert client.call("POST", "/sandbox", json={"name": "<b>x</b>"}).status_code == 400
    unnamed = client.call("POST", "/sandbox", json={}).json()
    assert unnamed["name"] == unnamed["id"]


def test_get_by_id_or_name_and_404(client: Client, sandbox: dict[str, Any]) -> None:
    assert client.call("GET", f"/sandbox/{sandbox['id']}").json()["name"] == "box"
    assert client.call("GET", "/sandbox/box").json()["id"] == sandbox["id"]
    missing = client.call("GET", "/sandbox/ghost")
    assert missing.status_code == 404
    assert missing.json()["message"] == "Sandbox with ID or name ghost not found"


def test_delete_renames_at_once_and_frees_the_name(client: Client, sandbox: dict[str, Any]) -> None:
    answer = client.call("DELETE", "/sandbox/box")
    assert answer.status_code == 200
    assert answer.json()["name"].startswith("DESTROYED_box_")
    assert answer.json()["desiredState"] == "destroyed"
    assert client.call("GET", "/sandbox/box").status_code == 404
    assert client.call("GET", f"/sandbox/{sandbox['id']}").status_code == 404
    assert client.create("box")["id"] != sandbox["id"]


def test_held_delete_lingers_as_a_listable_destroying_row(
    client: Client, emulator: DaytonaEmulator
) -> None:
    row = client.create("linger", labels={"k": "v"})
    emulator.hold_transitions("delete")
    client.call("DELETE", "/sandbox/linger")
    listed = client.call("GET", "/sandbox", params={"labels": '{"k":"v"}'}).json()["items"]
    assert [i["state"] for i in listed] == ["destroying"]
    assert listed[0]["name"].startswith("DESTROYED_linger_")
    assert client.call("DELETE", f"/sandbox/{row['id']}").status_code == 409
    assert emulator.finish_transitions() == [row["id"]]
    assert client.call("GET", f"/sandbox/{row['id']}").status_code == 404


# -- listing ----------------------------------------------------------------------------


def _walk(client: Client, **params: Any) -> list[str]:
    names: list[str] = []
    cursor: str | None = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        page = client.call("GET", "/sandbox", params=query).json()
        names += [item["name"] for item in page["items"]]
        cursor = page["nextCursor"]
        if cursor is None:
            return names


def test_cursor_listing_default_order_is_last_activity_desc(client: Client) -> None:
    for name in ("a", "b", "c"):
        client.create(name)
    first = client.call("GET", "/sandbox", params={"limit": 2}).json()
    assert [i["name"] for i in first["items"]] == ["c", "b"] and first["nextCursor"]
    item = first["items"][0]
    assert "env" not in item and item["kvm"] is False and "toolboxProxyUrl" in item
    assert _walk(client, limit=2) == ["c", "b", "a"]
    assert _walk(client, limit=1, sort="createdAt", order="asc") == ["a", "b", "c"]
    assert _walk(client, sort="name", order="desc") == ["c", "b", "a"]


def test_listing_filters_and_validation(client: Client) -> None:
    client.create("alpha-1", labels={"fountain": "1", "x": "y"})
    client.create("alpha-2", labels={"fountain": "2"})
    client.create("beta")
    assert _walk(client, labels='{"fountain":"1"}') == ["alpha-1"]
    assert sorted(_walk(client, name="ALPHA")) == ["alpha-1", "alpha-2"]
    assert _walk(client, states="stopped") == []
    assert client.call("GET", "/sandbox", params={"limit": 201}).status_code == 400
    bad = client.call("GET", "/sandbox", params={"cursor": "garbage!"})
    assert bad.status_code == 400 and bad.json()["message"].startswith("Invalid cursor provided")
    labels = client.call("GET", "/sandbox", params={"labels": "{nope"})
    assert labels.status_code == 400 and labels.json()["message"] == "Invalid labels JSON format"


def test_legacy_and_paginated_shapes(client: Client, emulator: DaytonaEmulator) -> None:
    for name in ("p1", "p2", "p3"):
        client.create(name)
    page = client.call("GET", "/sandbox/paginated", params={"page": 2, "limit": 2}).json()
    assert page["total"] == 3 and page["page"] == 2 and page["totalPages"] == 2
    assert [i["name"] for i in page["items"]] == ["p1"]
    emulator.legacy_list = True
    assert sorted(i["name"] for i in client.call("GET", "/sandbox").json()) == ["p1", "p2", "p3"]


# -- lifecycle ----------------------------------------------------------------------------


def test_stop_start_archive_state_machine(client: Client, sandbox: dict[str, Any]) -> None:
    token = client.call("GET", "/sandbox/box/ports/80/preview-url").json()["token"]
    stopped = client.call("POST", "/sandbox/box/stop", params={"force": "false"})
    assert stopped.status_code == 200 and stopped.json()["state"] == "stopped"
    again = client.call("POST", "/sandbox/box/stop")
    assert again.status_code == 400
    assert again.json()["message"] == "Sandbox is not in a stoppable state"
    assert client.call("POST", "/sandbox/box/archive").json()["state"] == "archived"
    started = client.call("POST", "/sandbox/box/start", json={})
    assert started.status_code == 200 and started.json()["state"] == "started"
    assert client.call("POST", "/sandbox/box/start").status_code == 200
    assert client.call("POST", "/sandbox/box/archive").status_code == 400
    assert client.call("GET", "/sandbox/box/ports/80/preview-url").json()["token"] != token


def test_held_transition_answers_409_until_finished(
    client: Client, emulator: DaytonaEmulator, sandbox: dict[str, Any]
) -> None:
    emulator.hold_transitions("stop")
    body = client.call("POST", "/sandbox/box/stop").json()
    assert (body["state"], body["desiredState"]) == ("stopping", "stopped")
    for method, path in (
        ("POST", "/sandbox/box/start"),
        ("POST", "/sandbox/box/stop"),
        ("DELETE", "/sandbox/box"),
    ):
        answer = client.call(method, path)
        assert answer.status_code == 409
        assert answer.json()["message"] == "Sandbox state change in progress"
    blocked = client.tb(sandbox, "POST", "/process/execute", json={"command": "true"})
    assert blocked.status_code == 400 and "Is the Sandbox started?" in blocked.json()["message"]
    emulator.finish_transitions("box")
    assert client.call("GET", "/sandbox/box").json()["state"] == "stopped"
    emulator.hold_transitions("start")
    assert client.call("POST", "/sandbox/box/start").json()["state"] == "starting"
    emulator.finish_transitions()
    assert client.call("GET", "/sandbox/box").json()["state"] == "started"


def test_stopping_an_ephemeral_sandbox_deletes_it(client: Client) -> None:
    client.create("eph", autoDeleteInterval=0)
    assert client.call("POST", "/sandbox/eph/stop").status_code == 200
    assert client.call("GET", "/sandbox/eph").status_code == 404


def test_settings_routes_answer_201_and_labels_replace(
    client: Client, sandbox: dict[str, Any]
) -> None:
    for path in (
        "/public/true",
        "/autostop/0",
        "/autoarchive/60",
        "/autodelete/-1",
        "/ports/3000/signed-preview-url/tok/expire",
    ):
        assert client.call("POST", "/sandbox/box" + path).status_code == 201, path
    body = client.call("GET", "/sandbox/box").json()
    assert body["public"] is True and body["autoArchiveInterval"] == 60
    labels = client.call("PUT", "/sandbox/box/labels", json={"labels": {"n": "1"}})
    assert labels.status_code == 200 and labels.json() == {"labels": {"n": "1"}}
    signed = client.call(
        "GET", "/sandbox/box/ports/3000/signed-preview-url", params={"expiresInSeconds": 30}
    ).json()
    assert {"sandboxId", "port", "token", "url"} <= set(signed)
    bad_port = client.call("GET", "/sandbox/box/ports/0/preview-url")
    assert bad_port.json()["message"] == "Invalid port"
    proxy = client.call("GET", f"/sandbox/{sandbox['id']}/toolbox-proxy-url").json()
    assert proxy == {"url": client.emulator.toolbox_url}


def test_network_settings_merge_rules(
    client: Client, emulator: DaytonaEmulator, sandbox: dict[str, Any]
) -> None:
    path = "/sandbox/box/network-settings"
    body = client.call("POST", path, json={"networkAllowList": "10.0.0.0/8"}).json()
    assert body["networkAllowList"] == "10.0.0.0/8" and body["networkBlockAll"] is False
    body = client.call(
        "POST", path, json={"networkBlockAll": True, "domainAllowList": "hex.pm,github.com"}
    ).json()
    assert body["networkBlockAll"] is True and body["networkAllowList"] is None
    assert body["domainAllowList"] == "hex.pm,github.com"
    body = client.call("POST", path, json={"domainAllowList": ""}).json()
    assert body["domainAllowList"] is None and body["networkBlockAll"] is True
    array = client.call("POST", path, json={"domainAllowList": ["a.com"]})
    assert array.status_code == 400
    assert array.json()["message"] == "domainAllowList must be a string"
    none = client.call("POST", path, json={})
    assert none.status_code == 400 and none.json()["message"].startswith("At least one of")
    emulator.store.network_restricted = True
    restricted = client.call("POST", path, json={"networkBlockAll": True})
    assert restricted.status_code == 400 and "restricted" in restricted.json()["message"]


# -- toolbox: execute -----------------------------------------------------------------------


def test_execute_merges_output_and_applies_envs_cwd_timeout(
    client: Client, sandbox: dict[str, Any]
) -> None:
    answer = client.tb(
        sandbox,
        "POST",
        "/process/execute",
        json={
            "command": "echo out; echo $GREETING; echo err >&2; exit 3",
            "envs": {"GREETING": "hi"},
        },
    )
    assert answer.status_code == 200 and answer.json()["exitCode"] == 3
    assert sorted(answer.json()["result"].splitlines()) == ["err", "hi", "out"]
    assert client.tb(sandbox, "GET", "/work-dir").json()["dir"] == "/home/daytona"
    made = client.tb(sandbox, "POST", "/process/execute", json={"command": "mkdir sub"})
    assert made.json()["exitCode"] == 0
    cwd = client.tb(sandbox, "POST", "/process/execute", json={"command": "pwd", "cwd": "sub"})
    assert cwd.json()["result"].rstrip("\n").endswith("/home/daytona/sub")
    missing = client.tb(sandbox, "POST", "/process/execute", json={"command": "pwd", "cwd": "nope"})
    assert missing.json()["exitCode"] == -1
    slow = client.tb(
        sandbox, "POST", "/process/execute", json={"command": "sleep 30", "timeout": 1}
    )
    assert slow.status_code == 408
    assert slow.json()["message"] == "request timeout: command execution timeout"
    assert client.tb(sandbox, "POST", "/process/execute", json={"command": " "}).status_code == 400


def test_toolbox_needs_a_started_sandbox_known_by_id(
    client: Client, sandbox: dict[str, Any]
) -> None:
    by_name = dict(sandbox, id="box")
    assert client.tb(by_name, "GET", "/process/session").status_code == 404
    client.call("POST", "/sandbox/box/stop")
    stopped = client.tb(sandbox, "GET", "/process/session")
    assert stopped.status_code == 400 and stopped.json()["code"] == "BAD_REQUEST"


def test_toolbox_calls_bump_last_activity_unless_told_not_to(
    client: Client, sandbox: dict[str, Any]
) -> None:
    client.create("newer")
    assert _walk(client)[0] == "newer"
    skip = {**AUTH, "X-Daytona-Skip-Last-Activity-Update": "true"}
    client.tb(sandbox, "GET", "/process/session", headers=skip)
    assert _walk(client)[0] == "newer"
    client.tb(sandbox, "GET", "/process/session")
    assert _walk(client)[0] == "box"


# -- toolbox: sessions ----------------------------------------------------------------------


def test_session_routes_and_status_codes(client: Client, sandbox: dict[str, Any]) -> None:
    client.session(sandbox)
    dup = client.tb(sandbox, "POST", "/process/session", json={"sessionId": "s1"})
    assert dup.status_code == 409 and dup.json()["message"] == "conflict: session already exists"
    reserved = client.tb(sandbox, "POST", "/process/session", json={"sessionId": "entrypoint"})
    assert reserved.status_code == 400
    assert client.tb(sandbox, "GET", "/process/session").json() == [
        {"sessionId": "s1", "commands": []}
    ]
    assert client.tb(sandbox, "GET", "/process/session/s1").json()["commands"] == []
    missing = client.tb(sandbox, "GET", "/process/session/nope")
    assert missing.status_code == 404
    assert missing.json()["message"] == "not found: session not found"
    unknown = client.tb(sandbox, "POST", "/process/session/nope/exec", json={"command": "ls"})
    assert unknown.status_code == 500
    assert unknown.json()["message"] == "failed to execute command: not found: session not found"
    empty = client.tb(sandbox, "POST", "/process/session/s1/exec", json={"command": ""})
    assert empty.status_code == 400 and empty.content == b""
    assert client.tb(sandbox, "DELETE", "/process/session/s1").status_code == 204
    assert client.tb(sandbox, "DELETE", "/process/session/s1").status_code == 404


def test_async_command_lifecycle_with_input_and_410_after_exit(
    client: Client, sandbox: dict[str, Any]
) -> None:
    client.session(sandbox)
    answer = client.tb(
        sandbox,
        "POST",
        "/process/session/s1/exec",
        json={"command": "read line; echo got $line; (exit 5)", "runAsync": True},
    )
    assert answer.status_code == 202
    body = answer.json()
    assert body["output"] is None and body["exitCode"] is None and body["cmdId"]
    command_id = body["cmdId"]
    running = client.record(sandbox, command_id)
    assert running == {"id": command_id, "command": "read line; echo got $line; (exit 5)"}
    sent = client.tb(
        sandbox, "POST", f"/process/session/s1/command/{command_id}/input", json={"data": "hello"}
    )
    assert sent.status_code == 204
    assert client.wait_exit(sandbox, command_id) == 5
    assert client.logs(sandbox, command_id, SPLIT).content == (
        b"\x01\x01\x01hello\n\x01\x01\x01got hello\n"
    )
    gone = client.tb(
        sandbox, "POST", f"/process/session/s1/command/{command_id}/input", json={"data": "late"}
    )
    assert gone.status_code == 410
    assert gone.json()["message"] == "gone: command has already completed with exit code 5"


def test_sync_exec_and_session_shell_state_persist(client: Client, sandbox: dict[str, Any]) -> None:
    client.session(sandbox)
    first = client.tb(
        sandbox, "POST", "/process/session/s1/exec", json={"command": "export X=kept; cd /"}
    )
    assert first.status_code == 200 and first.json()["exitCode"] == 0
    second = client.tb(
        sandbox, "POST", "/process/session/s1/exec", json={"command": "echo $X; pwd"}
    ).json()
    assert second["output"] == "kept\n/\n" and "stdout" not in second
    sdk = client.tb(
        sandbox,
        "POST",
        "/process/session/s1/exec",
        json={"command": "echo o; echo e >&2"},
        headers={**AUTH, "X-Daytona-SDK-Version": "0.226.1"},
    ).json()
    assert (sdk["stdout"], sdk["stderr"]) == ("o\n", "e\n")
    assert sorted(sdk["output"].splitlines()) == ["\x01\x01\x01o", "\x02\x02\x02e"]


def test_exit_in_a_script_ends_the_shell_and_records_nothing(
    client: Client, sandbox: dict[str, Any]
) -> None:
    client.session(sandbox)
    safe = client.run(sandbox, "echo a; (exit 4)")
    assert client.wait_exit(sandbox, safe) == 4
    fatal = client.run(sandbox, "echo b; exit 6")
    session = client.emulator.daemon_for(client.emulator.store.find("box")).session("s1")
    assert wait_until(lambda: not session.shell_alive(), 10)
    assert "exitCode" not in client.record(sandbox, fatal)
    assert client.logs(sandbox, fatal, SPLIT).content == b"\x01\x01\x01b\n"
    after = client.tb(sandbox, "POST", "/process/session/s1/exec", json={"command": "true"})
    assert after.status_code == 400


def test_newer_daemon_records_exit_through_its_trap(
    client: Client, emulator: DaytonaEmulator
) -> None:
    emulator.daemon_exit_trap = True
    sandbox = client.create("trap")
    client.session(sandbox)
    fatal = client.run(sandbox, "echo b; exit 6")
    assert client.wait_exit(sandbox, fatal) == 6
    dead = client.tb(sandbox, "POST", "/process/session/s1/exec", json={"command": "true"})
    assert dead.status_code == 410
    client.session(sandbox, "s2")
    sync = client.tb(sandbox, "POST", "/process/session/s2/exec", json={"command": "exit 2"})
    assert sync.status_code == 400
    assert sync.json()["message"] == "bad request: session shell ended without a command result"


def _host_processes(marker: str) -> list[int]:
    """Host pids of every process whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                cmdline = file.read()
        except OSError:
            continue
        if marker.encode() in cmdline.replace(b"\0", b" "):
            found.append(int(entry))
    return found


def _sleeper() -> str:
    """A ``sleep`` whose argument marks it uniquely among the host's processes."""
    return f"sleep 60.{secrets.randbelow(10**9):09d}"


def _sandbox_pid(client: Client, sandbox: dict[str, Any], path: str) -> int:
    """The pid a command wrote to the sandbox file ``path``, once it is there."""

    def written() -> str:
        answer = client.tb(sandbox, "GET", "/files/download", params={"path": path})
        return answer.text.strip() if answer.status_code == 200 else ""

    assert wait_until(lambda: written() != "", 10)
    return int(written())


def test_deleting_a_session_kills_its_process_group(
    client: Client, sandbox: dict[str, Any]
) -> None:
    client.session(sandbox)
    sleeper = _sleeper()
    command_id = client.run(sandbox, f"echo $$ > pid; {sleeper}")
    pid = _sandbox_pid(client, sandbox, "pid")
    assert wait_until(lambda: _host_processes(sleeper), 10)
    alive = client.tb(sandbox, "POST", "/process/execute", json={"command": f"kill -0 {pid}"})
    assert alive.json()["exitCode"] == 0, "the reported pid is the sandbox's"
    assert client.tb(sandbox, "DELETE", "/process/session/s1").status_code == 204
    assert wait_until(lambda: not _host_processes(sleeper), 10)
    gone = client.tb(sandbox, "POST", "/process/execute", json={"command": f"kill -0 {pid}"})
    assert gone.json()["exitCode"] != 0
    assert client.tb(sandbox, "GET", f"/process/session/s1/command/{command_id}").status_code == 404


@pytest.mark.skipif(shutil.which("setsid") is None, reason="no setsid here")
def test_deleting_a_session_kills_the_descendants_that_left_its_group(
    client: Client, sandbox: dict[str, Any]
) -> None:
    client.session(sandbox)
    sleeper = _sleeper()
    # The pid is written from inside the new session: the sleeper has left the group.
    client.run(sandbox, f"setsid sh -c 'echo $$ > escaped; exec {sleeper}' & wait")
    _sandbox_pid(client, sandbox, "escaped")
    assert wait_until(lambda: _host_processes(sleeper), 10)
    assert client.tb(sandbox, "DELETE", "/process/session/s1").status_code == 204
    assert wait_until(lambda: not _host_processes(sleeper), 10), "it outlived its session"


def test_sessions_vanish_on_stop_start_but_files_stay(
    client: Client, sandbox: dict[str, Any]
) -> None:
    client.session(sandbox)
    client.tb(sandbox, "POST", "/process/execute", json={"command": "echo kept > f.txt"})
    client.call("POST", "/sandbox/box/stop")
    client.call("POST", "/sandbox/box/start")
    assert client.tb(sandbox, "GET", "/process/session").json() == []
    assert (
        client.tb(sandbox, "POST", "/process/execute", json={"command": "cat f.txt"}).json()[
            "result"
        ]
        == "kept\n"
    )


# -- toolbox: logs -----------------------------------------------------------------------


def _journaled(client: Client, sandbox: dict[str, Any], command_id: str, line: bytes) -> None:
    """Wait until the command's journal (its split log) holds ``line``."""
    assert wait_until(lambda: line in client.logs(sandbox, command_id, SPLIT).content, 10), line


def _finished(client: Client, sandbox: dict[str, Any]) -> str:
    """A command whose stdout line is journaled before its stderr line, and that one
    before the end: each next step waits until the last one's line is in the journal."""
    client.session(sandbox)
    gate = daytona_gate(client.emulator, sandbox["id"])
    command_id = client.run(sandbox, gate.script("echo out; printf tail", "echo err >&2", ":"))
    _journaled(client, sandbox, command_id, b"\x01\x01\x01out\n")
    gate.release()
    _journaled(client, sandbox, command_id, b"\x02\x02\x02err\n")
    gate.release()
    assert client.wait_exit(sandbox, command_id) == 0
    return command_id


def test_log_renderings_follow_the_headers(client: Client, sandbox: dict[str, Any]) -> None:
    command_id = _finished(client, sandbox)
    # "tail" has no newline: the line reader journals it only at EOF, after "err".
    raw = b"\x01\x01\x01out\n\x02\x02\x02err\n\x01\x01\x01tail\n"
    assert client.logs(sandbox, command_id, AUTH).content == b"out\nerr\ntail\n"
    assert client.logs(sandbox, command_id, SPLIT).content == raw
    sdk = client.logs(sandbox, command_id, {**AUTH, "X-Daytona-SDK-Version": "0.226.1"})
    assert sdk.headers["Content-Type"].startswith("application/json")
    assert sdk.json() == {"output": raw.decode(), "stdout": "out\ntail\n", "stderr": "err\n"}
    middle = client.logs(sandbox, command_id, {**AUTH, "X-Daytona-SDK-Version": "0.100.0"})
    assert middle.content == raw
    old = client.logs(sandbox, command_id, {**AUTH, "X-Daytona-SDK-Version": "0.20.0"})
    assert old.content == b"out\nerr\ntail\n"
    snapshot_follow = client.logs(sandbox, command_id, SPLIT, params={"follow": "true"})
    assert snapshot_follow.headers["Content-Type"] == "application/octet-stream"
    assert snapshot_follow.content == b"out\nerr\ntail\n"


def _ws_url(client: Client, sandbox: dict[str, Any], command_id: str) -> str:
    base = sandbox["toolboxProxyUrl"].replace("http://", "ws://")
    return f"{base}/{sandbox['id']}/process/session/s1/command/{command_id}/logs?follow=true"


def _ws_open(url: str, headers: dict[str, str]) -> websocket.WebSocket:
    return websocket.create_connection(
        url, header=[f"{k}: {v}" for k, v in headers.items()], timeout=20
    )


def _ws_frames(
    ws: websocket.WebSocket, frames: list[bytes], until: Callable[[bytes], bool] | None = None
) -> int | None:
    """Append the binary frames that arrive to ``frames`` until the close frame (its
    code is returned), or until ``until`` holds for all of them joined (None)."""
    while until is None or not until(b"".join(frames)):
        opcode, data = ws.recv_data(control_frame=True)
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            return int.from_bytes(data[:2], "big") if len(data) >= 2 else None
        if opcode == websocket.ABNF.OPCODE_BINARY:
            frames.append(data)
    return None


def _ws_read(url: str, headers: dict[str, str]) -> tuple[list[bytes], int | None]:
    ws = _ws_open(url, headers)
    frames: list[bytes] = []
    try:
        code = _ws_frames(ws, frames)
    finally:
        ws.close()
    return frames, code


def test_websocket_follow_replays_live_in_small_frames_then_closes_1000(
    client: Client, sandbox: dict[str, Any]
) -> None:
    client.session(sandbox)
    gate = daytona_gate(client.emulator, sandbox["id"])
    command_id = client.run(
        sandbox, gate.script("head -c 3000 /dev/zero | tr '\\0' a; echo", "echo err >&2")
    )
    out = b"\x01\x01\x01" + b"a" * 3000 + b"\n"
    ws = _ws_open(_ws_url(client, sandbox, command_id), SPLIT)
    frames: list[bytes] = []
    try:
        # The stderr line is written only once the stdout has come over the follow.
        assert _ws_frames(ws, frames, until=lambda data: len(data) >= len(out)) is None
        gate.release()
        code = _ws_frames(ws, frames)
    finally:
        ws.close()
    assert code == 1000
    assert all(len(frame) <= 1024 for frame in frames) and len(frames) >= 3
    assert b"".join(frames) == b"\x01\x01\x01" + b"a" * 3000 + b"\n\x02\x02\x02err\n"
    combined, _ = _ws_read(_ws_url(client, sandbox, command_id), AUTH)
    assert b"".join(combined) == b"a" * 3000 + b"\nerr\n"


def test_chunked_follow_streams_combined_output_until_exit(
    client: Client, sandbox: dict[str, Any]
) -> None:
    client.session(sandbox)
    gate = daytona_gate(client.emulator, sandbox["id"])
    command_id = client.run(sandbox, gate.script("echo one", "echo two >&2"))
    answer = client.logs(sandbox, command_id, SPLIT, params={"follow": "true"}, stream=True)
    assert answer.headers.get("Transfer-Encoding") == "chunked"
    chunks = answer.iter_content(None)
    received = b""
    # The stderr line is written only once the stdout line has come over the follow.
    while b"\n" not in received:
        received += next(chunks)
    gate.release()
    assert received + b"".join(chunks) == b"one\ntwo\n"


@pytest.mark.parametrize(
    "replacement",
    [
        'mkfifo "$__dtn_d/output.log.new"',
        'ln -s /etc/hostname "$__dtn_d/output.log.new"',
    ],
    ids=["fifo", "symlink"],
)
def test_a_log_a_command_replaced_is_refused_never_waited_on_or_followed(
    client: Client, sandbox: dict[str, Any], replacement: str
) -> None:
    client.session(sandbox)
    # $__dtn_d is the command's own directory in the wrapper that sources the script.
    command_id = client.run(
        sandbox, f'echo before; {replacement}; mv "$__dtn_d/output.log.new" "$__dtn_d/output.log"'
    )
    assert client.wait_exit(sandbox, command_id) == 0
    snapshot = client.logs(sandbox, command_id, SPLIT, timeout=10)
    assert snapshot.status_code == 500 and snapshot.json()["code"] == "INTERNAL_SERVER_ERROR"
    frames, code = _ws_read(_ws_url(client, sandbox, command_id), SPLIT)
    assert (frames, code) == ([], 1011)
    sync = client.tb(
        sandbox,
        "POST",
        "/process/session/s1/exec",
        json={"command": "echo still serving"},
        timeout=10,
    )
    assert sync.json()["output"] == "still serving\n"


# -- toolbox: files -------------------------------------------------------------------------


def test_uploads_write_into_the_sandbox(client: Client, sandbox: dict[str, Any]) -> None:
    plain = client.tb(
        sandbox,
        "POST",
        "/files/upload",
        params={"path": "a/one.txt"},
        files={"file": ("one.txt", b"1")},
    )
    assert plain.status_code == 200 and plain.content == b""
    v2 = client.tb(
        sandbox,
        "POST",
        "/files/upload-v2",
        params={"path": "two.txt"},
        files={"file": ("two.txt", b"2")},
    )
    assert v2.json()["name"] == "two.txt" and v2.json()["type"] == "file"
    bulk = client.tb(
        sandbox,
        "POST",
        "/files/bulk-upload",
        files=[
            ("files[0].path", (None, "deep/dir/three.txt")),
            ("files[0].file", ("three.txt", b"333")),
        ],
    )
    assert bulk.status_code == 200 and bulk.json()["files"][0]["bytes"] == 3
    cat = client.tb(
        sandbox,
        "POST",
        "/process/execute",
        json={"command": "cat a/one.txt two.txt deep/dir/three.txt"},
    )
    assert cat.json()["result"] == "12333"
    no_path = client.tb(sandbox, "POST", "/files/upload", files={"file": ("x", b"x")})
    assert no_path.status_code == 400 and no_path.content == b""
    assert client.tb(sandbox, "GET", "/files/download", params={"path": "two.txt"}).content == b"2"


def _upload(client: Client, sandbox: dict[str, Any], path: str, data: bytes) -> None:
    answer = client.tb(
        sandbox,
        "POST",
        "/files/bulk-upload",
        files=[("files[0].path", (None, path)), ("files[0].file", ("f", data))],
    )
    assert answer.status_code == 200, answer.text


def _multipart_parts(answer: requests.Response) -> list[tuple[dict[str, str], bytes]]:
    """The parts of a multipart answer, read with the standard library's email parser."""
    head = f"Content-Type: {answer.headers['Content-Type']}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + answer.content)
    return [
        ({k.lower(): str(v) for k, v in part.items()}, part.get_payload(decode=True))
        for part in message.iter_parts()
    ]


def test_bulk_download_answers_one_part_per_path_in_order(
    client: Client, sandbox: dict[str, Any]
) -> None:
    data = bytes(range(256)) * 50
    _upload(client, sandbox, "/tmp/dl/blob.bin", data)
    _upload(client, sandbox, "/tmp/dl/note.txt", b"note")
    answer = client.tb(
        sandbox,
        "POST",
        "/files/bulk-download",
        json={"paths": ["/tmp/dl/blob.bin", "/tmp/dl/missing", "/tmp/dl", "/tmp/dl/note.txt"]},
    )
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "multipart/form-data; boundary=DAYTONA-FILE-BOUNDARY"
    assert answer.content.endswith(b"\r\n--DAYTONA-FILE-BOUNDARY--\r\n")
    (blob, blob_data), (missing, missing_data), (folder, folder_data), (note, note_data) = (
        _multipart_parts(answer)
    )
    assert blob["content-disposition"] == 'form-data; name="file"; filename="/tmp/dl/blob.bin"'
    assert (blob["content-type"], blob_data) == ("application/octet-stream", data)
    assert (note["content-type"], note_data) == ("text/plain", b"note")
    for part, content, status, code in (
        (missing, missing_data, 404, "FILE_NOT_FOUND"),
        (folder, folder_data, 400, "INVALID_FILE_PATH"),
    ):
        assert part["content-disposition"].startswith('form-data; name="error"; filename="/tmp/')
        assert part["content-type"] == "application/json"
        error = json.loads(content)
        assert (error["statusCode"], error["code"], error["source"]) == (
            status,
            code,
            "DAYTONA_DAEMON",
        )
        assert set(error) >= {"message", "timestamp", "path", "method"}


def test_bulk_download_names_a_path_that_cannot_be_quoted_in_rfc_5987_form(
    client: Client, sandbox: dict[str, Any]
) -> None:
    _upload(client, sandbox, "/tmp/dl/caf\u00e9.txt", b"x")
    answer = client.tb(
        sandbox,
        "POST",
        "/files/bulk-download",
        json={"paths": ["/tmp/dl/caf\u00e9.txt", '/tmp/dl/"q"\nx']},
    )
    assert b"name=\"file\"; filename*=utf-8''%2Ftmp%2Fdl%2Fcaf%C3%A9.txt\r\n" in answer.content
    assert b"name=\"error\"; filename*=utf-8''%2Ftmp%2Fdl%2F%22q%22%0Ax\r\n" in answer.content
    (found, content), _refused = _multipart_parts(answer)
    assert content == b"x"
    assert 'filename="/tmp/dl/caf\u00e9.txt"' in found["content-disposition"], "decodable"


def test_bulk_download_wants_a_non_empty_list_of_paths(
    client: Client, sandbox: dict[str, Any]
) -> None:
    for body in ({"paths": []}, {"paths": "x"}, {}, [1]):
        answer = client.tb(sandbox, "POST", "/files/bulk-download", json=body)
        assert answer.status_code == 400 and answer.json()["code"] == "BAD_REQUEST", body


def test_listing_reports_the_fields_the_sdk_parses(client: Client, sandbox: dict[str, Any]) -> None:
    _upload(client, sandbox, "/tmp/ls/a.txt", b"abc")
    _upload(client, sandbox, "/tmp/ls/sub/b.txt", b"b")
    answer = client.tb(sandbox, "GET", "/files", params={"path": "/tmp/ls"})
    assert answer.status_code == 200
    a_txt, sub = answer.json()
    assert {k: a_txt[k] for k in ("name", "size", "isDir", "path", "mode", "permissions")} == {
        "name": "a.txt",
        "size": 3,
        "isDir": False,
        "path": "/tmp/ls/a.txt",
        "mode": "-rw-r--r--",
        "permissions": "0644",
    }
    assert a_txt["modTime"].endswith(" +0000 UTC") and a_txt["modifiedAt"].endswith("Z")
    assert a_txt["owner"].isdigit() and a_txt["group"].isdigit()
    assert (sub["name"], sub["isDir"], sub["mode"][0]) == ("sub", True, "d")
    deep = client.tb(sandbox, "GET", "/files", params={"path": "/tmp/ls", "depth": "2"})
    assert [e["path"] for e in deep.json()] == ["/tmp/ls/a.txt", "/tmp/ls/sub", "/tmp/ls/sub/b.txt"]
    missing = client.tb(sandbox, "GET", "/files", params={"path": "/tmp/ls/none"})
    not_dir = client.tb(sandbox, "GET", "/files", params={"path": "/tmp/ls/a.txt"})
    bad_depth = client.tb(sandbox, "GET", "/files", params={"path": "/tmp", "depth": "0"})
    assert (missing.status_code, not_dir.status_code, bad_depth.status_code) == (404, 400, 400)


@pytest.mark.skipif(
    os.geteuid() == 0 and not isolation.support().available,
    reason="a root caller's sandbox has no user of its own without isolation",
)
def test_what_the_sandboxs_user_may_not_use_is_refused_as_the_daemon_refuses_it(
    client: Client, sandbox: dict[str, Any]
) -> None:
    _upload(client, sandbox, "rights/secret", b"x")
    _upload(client, sandbox, "rights/closed/inside", b"x")
    chmod = {"command": "chmod 000 rights/secret rights/closed"}
    assert client.tb(sandbox, "POST", "/process/execute", json=chmod).json()["exitCode"] == 0
    download = client.tb(sandbox, "POST", "/files/bulk-download", json={"paths": ["rights/secret"]})
    ((part, content),) = _multipart_parts(download)
    assert part["content-disposition"] == 'form-data; name="error"; filename="rights/secret"'
    error = json.loads(content)
    assert (error["statusCode"], error["code"], error["message"]) == (
        403,
        "FILE_ACCESS_DENIED",
        "permission denied: rights/secret",
    )
    listed = client.tb(sandbox, "GET", "/files", params={"path": "rights/closed"})
    assert (listed.status_code, listed.json()["code"], listed.json()["message"]) == (
        403,
        "FORBIDDEN",
        "open rights/closed: permission denied",
    )
    uploaded = client.tb(
        sandbox,
        "POST",
        "/files/bulk-upload",
        files=[("files[0].path", (None, "rights/closed/new")), ("files[0].file", ("f", b"y"))],
    )
    assert uploaded.status_code == 400 and uploaded.json()["files"] == []
    (line,) = uploaded.json()["errors"]
    assert re.fullmatch(
        r"rights/closed/new: create temp: open rights/closed/\.daytona-upload-\d+: "
        r"permission denied",
        line,
    ), line
    single = client.tb(
        sandbox,
        "POST",
        "/files/upload",
        params={"path": "rights/closed/new"},
        files={"file": ("new", b"y")},
    )
    assert (single.status_code, single.json()["message"]) == (
        400,
        "bad request: open rights/closed/new: permission denied",
    )


def test_go_mode_renders_every_file_type_as_go_does() -> None:
    assert go_mode(stat.S_IFREG | 0o644) == "-rw-r--r--"
    assert go_mode(stat.S_IFDIR | 0o1777) == "dtrwxrwxrwx"
    assert go_mode(stat.S_IFLNK | 0o777) == "Lrwxrwxrwx"
    assert go_mode(stat.S_IFIFO | 0o600) == "prw-------"
    assert go_mode(stat.S_IFSOCK | 0o755) == "Srwxr-xr-x"
    assert go_mode(stat.S_IFCHR | 0o666) == "Dcrw-rw-rw-"
    assert go_mode(stat.S_IFBLK | 0o660) == "Drw-rw----"
    assert go_mode(stat.S_IFREG | 0o6755) == "ugrwxr-xr-x"


# -- faults ------------------------------------------------------------------------------


def test_rate_limit_fault_sends_suffixed_headers(client: Client, emulator: DaytonaEmulator) -> None:
    emulator.rate_limit(
        path="^/api/sandbox$", method="POST", throttler="sandbox-create", retry_after=7, times=2
    )
    for _ in range(2):
        answer = client.call("POST", "/sandbox", json={"name": "rl"})
        assert answer.status_code == 429
        assert answer.headers["Retry-After-sandbox-create"] == "7"
        assert answer.headers["X-RateLimit-Remaining-sandbox-create"] == "0"
        assert answer.json()["message"] == "ThrottlerException: Too Many Requests"
    assert client.call("POST", "/sandbox", json={"name": "rl"}).status_code == 200


def test_503_as_json_and_as_text(client: Client, emulator: DaytonaEmulator) -> None:
    emulator.unavailable(as_json=True)
    assert client.call("GET", "/sandbox").json()["statusCode"] == 503
    emulator.unavailable(as_json=False)
    text = client.call("GET", "/sandbox")
    assert text.status_code == 503 and text.text.startswith("<html>")
    assert client.call("GET", "/sandbox").status_code == 200


def test_dropped_connection(client: Client, emulator: DaytonaEmulator) -> None:
    emulator.drop_connections(path="^/api/sandbox$")
    with pytest.raises(requests.ConnectionError):
        client.call("GET", "/sandbox")
    assert client.call("GET", "/sandbox").status_code == 200


def test_create_faults(client: Client, emulator: DaytonaEmulator) -> None:
    emulator.fail_next_create("disk full")
    failed = client.call("POST", "/sandbox", json={"name": "bad"})
    assert failed.status_code == 400
    assert failed.json()["message"] == "Sandbox failed to start: disk full"
    assert client.call("GET", "/sandbox/bad").json()["state"] == "error"
    emulator.drop_next_create_response()
    with pytest.raises(requests.ConnectionError):
        client.call("POST", "/sandbox", json={"name": "dropped"})
    assert client.call("POST", "/sandbox", json={"name": "dropped"}).status_code == 409


def test_log_stream_closes_early_and_rereads_replay_from_zero(
    client: Client, emulator: DaytonaEmulator, sandbox: dict[str, Any]
) -> None:
    client.session(sandbox)
    command_id = client.run(sandbox, "echo 12345; read never")
    assert wait_until(lambda: client.logs(sandbox, command_id, SPLIT).content, 10)
    emulator.close_log_stream_early(after_bytes=5)
    frames, code = _ws_read(_ws_url(client, sandbox, command_id), SPLIT)
    assert (b"".join(frames), code) == (b"\x01\x01\x0112", 1000)
    assert "exitCode" not in client.record(sandbox, command_id)
    emulator.close_log_stream_early(after_bytes=4)
    chunked = client.logs(sandbox, command_id, SPLIT, params={"follow": "true"})
    assert chunked.content == b"1"
    emulator.serve_stale_log_prefix(6)
    assert client.logs(sandbox, command_id, SPLIT).content == b"\x01\x01\x01123"
    assert client.logs(sandbox, command_id, SPLIT).content == b"\x01\x01\x0112345\n"


def test_listing_that_changes_while_walked(client: Client, emulator: DaytonaEmulator) -> None:
    for name in ("a", "b", "c", "d"):
        client.create(name)
    emulator.mutate_listing(1, [("touch", "a"), ("create", "e"), ("delete", "c")])
    assert _walk(client, limit=2) == ["d", "c", "b"]
    emulator.mutate_listing(1, [("touch", "a"), ("create", "f"), ("delete", "b")])
    assert _walk(client, limit=2, sort="createdAt", order="asc") == ["a", "b", "d", "e", "f"]


def test_cursor_is_opaque_base64_keyset(client: Client) -> None:
    client.create("k1")
    client.create("k2")
    cursor = client.call("GET", "/sandbox", params={"limit": 1}).json()["nextCursor"]
    assert set(json.loads(base64.b64decode(cursor))) == {"sortValue", "id"}


# -- isolation: the sandbox's own files and processes --------------------------------------

needs_isolation = pytest.mark.skipif(
    not isolation.support().available, reason="this host cannot isolate a sandbox"
)


def _execute(client: Client, sandbox: dict[str, Any], command: str) -> str:
    answer = client.tb(sandbox, "POST", "/process/execute", json={"command": command})
    assert answer.status_code == 200 and answer.json()["exitCode"] == 0, answer.text
    return str(answer.json()["result"])


@needs_isolation
def test_a_file_uploaded_to_app_env_is_what_commands_read_there_never_the_hosts(
    client: Client, sandbox: dict[str, Any]
) -> None:
    folder = f"/app/{secrets.token_hex(12)}"
    assert not os.path.exists(folder)
    single = client.tb(
        sandbox,
        "POST",
        "/files/upload-v2",
        params={"path": f"{folder}/.env"},
        files={"file": (".env", b"TOKEN=uploaded\n")},
    )
    assert single.status_code == 200 and single.json()["path"] == f"{folder}/.env"
    bulk = client.tb(
        sandbox,
        "POST",
        "/files/bulk-upload",
        files=[
            ("files[0].path", (None, f"{folder}/bulk/.env")),
            ("files[0].file", (".env", b"TOKEN=bulk\n")),
        ],
    )
    assert bulk.status_code == 200 and bulk.json()["files"][0]["path"] == f"{folder}/bulk/.env"
    read = _execute(client, sandbox, f"cat {folder}/.env {folder}/bulk/.env")
    assert read == "TOKEN=uploaded\nTOKEN=bulk\n"
    _execute(client, sandbox, f"echo TOKEN=written > {folder}/.env")
    download = client.tb(sandbox, "GET", "/files/download", params={"path": f"{folder}/.env"})
    assert download.content == b"TOKEN=written\n"
    assert not os.path.exists(folder), "the sandbox's /app is not the host's"


@needs_isolation
def test_a_command_sees_only_its_own_sandboxs_processes(client: Client) -> None:
    mine, other = client.create("mine"), client.create("other")
    sleepers = {}
    for sandbox in (mine, other):
        client.session(sandbox)
        sleepers[sandbox["name"]] = _sleeper()
        client.run(sandbox, sleepers[sandbox["name"]])
    assert wait_until(lambda: all(_host_processes(s) for s in sleepers.values()), 10)
    listing = _execute(client, mine, "ls /proc")
    pids = sorted(int(name) for name in listing.split() if name.isdigit())
    assert 1 in pids and len(pids) < 16, pids
    command_lines = _execute(
        client, mine, "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done"
    )
    assert sleepers["mine"] in command_lines
    assert sleepers["other"] not in command_lines
    assert "pytest" not in command_lines, "the host's processes are not the sandbox's"


@needs_isolation
def test_network_block_all_closes_the_sandboxs_egress_and_a_domain_list_names_its_hosts(
    client: Client, emulator: DaytonaEmulator
) -> None:
    sandbox = client.create("net", networkBlockAll=True)
    probe = "(exec 3<>/dev/tcp/127.0.0.1/3128) 2>/dev/null && echo open || echo closed"
    path = "/sandbox/net/network-settings"
    assert _execute(client, sandbox, probe) == "closed\n", "blocked from its first command"
    client.call("POST", path, json={"networkBlockAll": False})
    assert _execute(client, sandbox, probe) == "open\n"
    client.call("POST", path, json={"networkBlockAll": True, "domainAllowList": "hex.pm"})
    assert _execute(client, sandbox, probe) == "open\n"
    box = emulator.daemon_for(emulator.store.find("net")).box
    assert box.policy().allow == ("hex.pm",)
    client.call("POST", path, json={"domainAllowList": ""})
    assert _execute(client, sandbox, probe) == "closed\n"


# -- process hygiene and the shell entry point ---------------------------------------------


def test_stop_leaves_no_thread_and_no_process_behind() -> None:
    baseline = threading.active_count()
    sleeper = _sleeper()
    with DaytonaEmulator(credential=KEY) as running:
        client = Client(running)
        sandbox = client.create("t")
        client.session(sandbox)
        client.run(sandbox, sleeper)
        assert wait_until(lambda: _host_processes(sleeper), 10)
        workdir = running.workdir
    assert wait_until(lambda: not _host_processes(sleeper), 10)
    assert wait_until(lambda: threading.active_count() <= baseline, 10)
    assert not workdir.exists(), "every sandbox's box is removed with the emulator's workdir"


def test_stop_ends_every_process_the_emulator_started() -> None:
    with DaytonaEmulator(credential=KEY) as running:
        client = Client(running)
        sandbox = client.create("sessions")
        for session_id in ("s1", "s2", "s3"):
            client.session(sandbox, session_id)
            client.run(sandbox, "cat", session_id)  # an async command: its stdin is held open
        assert wait_until(lambda: len(_marked(running)) >= 3, 10)
        holders = [pid for pid in _marked(running) if b"sleep\x002147483647" in _cmdline(pid)]
        assert holders, "each async session command has its stdin holder, marked"
    assert not _marked(running), "no process the emulator started outlives it"


def test_stop_ends_a_marked_process_that_escaped_its_sandbox(tmp_path: Any) -> None:
    with DaytonaEmulator(credential=KEY) as running:
        env = {**running.marker_env(), "PATH": "/bin:/usr/bin"}
        # As a command that left its sandbox would be: detached, still marked.
        escaped = subprocess.Popen(["sleep", "60"], env=env, start_new_session=True, cwd=tmp_path)
        assert _marked(running) == [escaped.pid]
    assert escaped.wait(10) == -signal.SIGKILL


def _marked(emulator: DaytonaEmulator) -> list[int]:
    """Live processes carrying the emulator's marker (read from /proc only)."""
    return [pid for pid in marked_processes(MARKER_ENV, emulator.marker) if _cmdline(pid)]


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return file.read()
    except OSError:
        return b""


def test_shell_entry_point_serves_until_terminated(tmp_path: Any) -> None:
    env = {**os.environ, "DAYTONA_API_KEY": "shell-key"}
    process = subprocess.Popen(
        [sys.executable, "-m", "managoat_sandbox.emulators", "daytona", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        base = process.stdout.readline().strip()
        assert base.startswith("http://127.0.0.1:")
        headers = {"Authorization": "Bearer shell-key"}
        created = requests.post(
            base + "/api/sandbox", json={"name": "cli"}, headers=headers, timeout=10
        )
        assert created.status_code == 200
        assert requests.get(base + "/api/sandbox", timeout=10).status_code == 401
    finally:
        process.terminate()
        assert process.wait(timeout=20) == 0
