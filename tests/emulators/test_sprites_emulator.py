"""The Sprites emulator over raw HTTP: routes, status codes, bodies, faults, shell entry point.

The WebSocket side (exec, attach, kill) is in ``test_sprites_exec.py``; the
cross-check with the vendor's SDK in ``test_sprites_sdk.py``.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import requests
import websocket

from managoat_sandbox.emulators.sprites import SpritesEmulator
from tests.conftest import wait_until
from tests.sprites.host import marked_process, process_state

pytestmark = pytest.mark.timeout(60)
TOKEN = "sprites-test-token"


class Api:
    """A raw HTTP client for the emulator."""

    def __init__(self, emulator: SpritesEmulator, token: str | None = TOKEN) -> None:
        self.base = emulator.base_url
        self.headers = {} if token is None else {"Authorization": f"Bearer {token}"}

    def __call__(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", 10)
        return requests.request(method, self.base + path, headers=self.headers, **kwargs)

    def create(self, name: str, **fields: Any) -> requests.Response:
        return self("POST", "/v1/sprites", json={"name": name, **fields})


@pytest.fixture
def emulator() -> Iterator[SpritesEmulator]:
    with SpritesEmulator(credential=TOKEN) as server:
        yield server  # type: ignore[misc]


@pytest.fixture
def api(emulator: SpritesEmulator) -> Api:
    return Api(emulator)


def ndjson(response: requests.Response) -> list[dict[str, Any]]:
    return [json.loads(line) for line in response.text.splitlines() if line.strip()]


def run(
    api: Api, emulator: SpritesEmulator, name: str, script: str, outcome: list[str] | None = None
) -> None:
    """Run ``bash -c script`` over the WebSocket; append how it ended to ``outcome``:
    ``exit:<code>``, ``closed`` (close frame without exit) or ``dropped``."""
    url = emulator.base_url.replace("http", "ws", 1) + f"/v1/sprites/{name}/exec"
    ws = websocket.create_connection(
        url + "?" + urlencode([("cmd", "bash"), ("cmd", "-c"), ("cmd", script)]),
        header=[f"Authorization: Bearer {TOKEN}"],
        timeout=10,
    )
    ended = "dropped"
    try:
        while True:
            opcode, data = ws.recv_data(control_frame=True)
            if opcode == 2 and data[:1] == b"\x03":
                ended = f"exit:{data[1]}"
                break
            if opcode == 8:
                ended = "closed"
                break
    except websocket.WebSocketConnectionClosedException:
        pass
    finally:
        ws.close()
        if outcome is not None:
            outcome.append(ended)


# -- auth and generic shape -------------------------------------------------------------------


def test_requests_without_or_with_a_wrong_token_get_the_providers_401(
    emulator: SpritesEmulator,
) -> None:
    for token in (None, "wrong"):
        answer = Api(emulator, token)("GET", "/v1/sprites")
        assert answer.status_code == 401
        assert answer.json()["error"] == "unauthorized"
    assert all(r.headers.get("Authorization") in (None, "<redacted>") for r in emulator.requests)


def test_every_answer_carries_sprite_version_and_unknown_routes_are_json_404(api: Api) -> None:
    assert api("GET", "/v1/sprites").headers["Sprite-Version"] == "0.0.1-rc46"
    api.create("box")
    probe = api("HEAD", "/v1/sprites/box/exec")
    assert probe.status_code == 200 and probe.headers["Sprite-Version"] == "0.0.1-rc46"
    for path in ("/v1/nothing", "/v1/sprites/box/control"):
        answer = api("GET", path)
        assert answer.status_code == 404
        assert answer.json()["error"] == "not_found"
        assert answer.headers["Sprite-Version"]


# -- create, get, update, delete ---------------------------------------------------------------


def test_create_answers_201_with_the_full_cold_sprite(api: Api) -> None:
    answer = api.create("box-1", url_settings={"auth": "public"}, labels=["a"])
    assert answer.status_code == 201
    body = answer.json()
    assert body["name"] == "box-1" and isinstance(body["id"], str) and body["id"]
    assert body["status"] == "cold"
    assert body["url"].startswith("https://box-1-") and body["url"].endswith(".sprites.app")
    assert body["url_settings"] == {"auth": "public"}
    assert body["labels"] == ["a"]
    assert body["created_at"].endswith("Z")
    assert api("GET", "/v1/sprites/box-1").json()["id"] == body["id"]


def test_create_of_a_taken_name_is_409_or_the_400_variant(
    api: Api, emulator: SpritesEmulator
) -> None:
    api.create("dup")
    again = api.create("dup")
    assert again.status_code == 409
    assert again.json()["error"] == "already_exists"
    emulator.behaviour.conflict_status = 400
    assert api.create("dup").status_code == 400


def test_create_rejects_a_missing_name_and_bad_fields(api: Api) -> None:
    assert api("POST", "/v1/sprites", data=b"not json").status_code == 400
    assert api("POST", "/v1/sprites", json={"name": ""}).status_code == 400
    assert api.create("x", url_settings={"auth": "everyone"}).status_code == 400
    assert api("GET", "/v1/sprites").json()["sprites"] == []


def test_names_are_percent_decoded_path_segments(api: Api) -> None:
    assert api.create("owned worker/x").status_code == 201
    assert api("GET", "/v1/sprites/owned%20worker%2Fx").json()["name"] == "owned worker/x"


def test_update_merges_url_settings_and_labels(api: Api) -> None:
    api.create("upd", labels=["keep"])
    answer = api("PUT", "/v1/sprites/upd", json={"url_settings": {"auth": "public"}})
    assert answer.status_code == 200
    assert answer.json()["url_settings"]["auth"] == "public"
    assert answer.json()["labels"] == ["keep"]
    cleared = api("PUT", "/v1/sprites/upd", json={"clear_labels": True}).json()
    assert cleared["labels"] == [] and cleared["url_settings"]["auth"] == "public"
    assert api("PUT", "/v1/sprites/nope", json={}).status_code == 404


def test_delete_answers_204_then_the_sprite_is_gone(api: Api, emulator: SpritesEmulator) -> None:
    api.create("gone")
    root = emulator.sprite_root("gone")
    assert api("GET", "/v1/sprites/unknown").status_code == 404
    assert api("DELETE", "/v1/sprites/gone").status_code == 204
    assert api("GET", "/v1/sprites/gone").status_code == 404
    assert api("DELETE", "/v1/sprites/gone").status_code == 404
    assert not root.exists()


def test_a_removed_url_is_absent_from_the_sprite_object(
    api: Api, emulator: SpritesEmulator
) -> None:
    api.create("nourl")
    emulator.remove_url("nourl")
    assert "url" not in api("GET", "/v1/sprites/nourl").json()


# -- listing -----------------------------------------------------------------------------------


def test_listing_walks_sorted_pages_by_continuation_token(api: Api) -> None:
    for name in ("e", "c", "a", "d", "b"):
        api.create(name)
    seen: list[str] = []
    token: str | None = None
    pages = 0
    while True:
        params: dict[str, Any] = {"max_results": 2}
        if token:
            params["continuation_token"] = token
        page = api("GET", "/v1/sprites", params=params).json()
        pages += 1
        seen += [s["name"] for s in page["sprites"]]
        assert page["has_more"] == (page["next_continuation_token"] is not None)
        if not page["has_more"]:
            break
        token = page["next_continuation_token"]
    assert pages == 3
    assert seen == ["a", "b", "c", "d", "e"]


def test_listing_clamps_max_results_filters_by_prefix_and_counts_statuses(
    api: Api, emulator: SpritesEmulator
) -> None:
    emulator.behaviour.page_size = 3
    for index in range(5):
        api.create(f"p-{index}")
    api.create("other")
    page = api("GET", "/v1/sprites", params={"max_results": 100}).json()
    assert len(page["sprites"]) == 3 and page["has_more"]
    page = api("GET", "/v1/sprites", params={"prefix": "oth"}).json()
    assert [s["name"] for s in page["sprites"]] == ["other"]
    assert page == {
        **page,
        "has_more": False,
        "next_continuation_token": None,
        "cold": 6,
        "warm": 0,
        "running": 0,
    }
    assert api("GET", "/v1/sprites", params={"continuation_token": "%%%"}).status_code == 400


# -- status ------------------------------------------------------------------------------------


def test_status_is_cold_then_running_while_a_command_runs_then_warm(
    api: Api, emulator: SpritesEmulator
) -> None:
    api.create("st")
    assert api("GET", "/v1/sprites/st").json()["status"] == "cold"
    worker = threading.Thread(
        target=run, args=(api, emulator, "st", "while [ ! -e go ]; do sleep 0.01; done")
    )
    worker.start()
    assert wait_until(lambda: api("GET", "/v1/sprites/st").json()["status"] == "running")
    (emulator.sprite_root("st") / "go").touch()
    worker.join(10)
    assert api("GET", "/v1/sprites/st").json()["status"] == "warm"


def test_set_status_warm_freezes_commands_until_an_exec_wakes_the_sprite(
    api: Api, emulator: SpritesEmulator
) -> None:
    api.create("frz")
    marker = f"frozen-{secrets.token_hex(6)}"
    worker = threading.Thread(
        target=run,
        args=(api, emulator, "frz", f"while [ ! -e go ]; do sleep 0.01; done # {marker}"),
    )
    worker.start()
    assert wait_until(lambda: emulator.status_of("frz") == "running")
    assert wait_until(lambda: marked_process(marker) is not None)
    pid = marked_process(marker)
    assert pid is not None
    emulator.set_status("frz", "warm")
    assert api("GET", "/v1/sprites/frz").json()["status"] == "warm"
    assert wait_until(lambda: process_state(pid) == "T")
    run(api, emulator, "frz", "true")
    assert process_state(pid) != "T"
    assert emulator.status_of("frz") == "running"
    (emulator.sprite_root("frz") / "go").touch()
    worker.join(10)


def test_set_status_cold_kills_commands_and_keeps_files(
    api: Api, emulator: SpritesEmulator
) -> None:
    api.create("cld")
    (emulator.sprite_root("cld") / "kept").write_text("disk")
    outcome: list[str] = []
    worker = threading.Thread(target=run, args=(api, emulator, "cld", "sleep 30", outcome))
    worker.start()
    assert wait_until(lambda: emulator.status_of("cld") == "running")
    emulator.set_status("cld", "cold")
    worker.join(10)
    assert outcome == ["dropped"]
    assert wait_until(lambda: api("GET", "/v1/sprites/cld").json()["status"] == "cold")
    assert (emulator.sprite_root("cld") / "kept").read_text() == "disk"
    with pytest.raises(ValueError):
        emulator.set_status("cld", "paused")


# -- network policy ----------------------------------------------------------------------------


def test_network_policy_round_trips_and_answers_204(api: Api) -> None:
    api.create("net")
    assert api("GET", "/v1/sprites/net/policy/network").json() == {"rules": []}
    deny_all = {"rules": [{"domain": "*", "action": "deny"}]}
    answer = api("POST", "/v1/sprites/net/policy/network", json=deny_all)
    assert answer.status_code == 204 and answer.content == b""
    assert api("GET", "/v1/sprites/net/policy/network").json() == deny_all
    allow = {"rules": [{"domain": "example.com", "action": "allow"}, {"include": "defaults"}]}
    assert api("POST", "/v1/sprites/net/policy/network", json=allow).status_code == 204
    assert api("GET", "/v1/sprites/net/policy/network").json() == allow


def test_an_invalid_network_policy_is_400_invalid_policy(api: Api) -> None:
    api.create("bad")
    for body in (
        {"rules": [{"domain": "x.com", "action": "maybe"}]},
        {"rules": "all"},
        {"rules": [{"action": "allow"}]},
    ):
        answer = api("POST", "/v1/sprites/bad/policy/network", json=body)
        assert answer.status_code == 400
        assert answer.json()["error"] == "invalid_policy"
    assert api("POST", "/v1/sprites/none/policy/network", json={"rules": []}).status_code == 404


# -- files -------------------------------------------------------------------------------------


def test_write_file_stores_bytes_and_mode_creating_parents(
    api: Api, emulator: SpritesEmulator
) -> None:
    api.create("fs")
    answer = api(
        "PUT",
        "/v1/sprites/fs/fs/write",
        data=b"\x00secret\xff",
        params={"path": "/app/conf/key", "workingDir": "/", "mode": "0600", "mkdirParents": "true"},
    )
    assert answer.status_code == 200
    stored = emulator.sprite_root("fs") / "app" / "conf" / "key"
    assert stored.read_bytes() == b"\x00secret\xff"
    assert stored.stat().st_mode & 0o777 == 0o600
    chrooted = api(
        "PUT",
        "/v1/sprites/fs/fs/write",
        data=b"x",
        params={"path": "../../../etc/x", "workingDir": "/app", "mkdirParents": "true"},
    )
    assert chrooted.status_code == 200
    assert (emulator.sprite_root("fs") / "etc" / "x").read_bytes() == b"x"
    read = api("GET", "/v1/sprites/fs/fs/read", params={"path": "conf/key", "workingDir": "/app"})
    assert read.content == b"\x00secret\xff"


def test_write_file_refuses_bad_requests(api: Api) -> None:
    api.create("fsb")
    write = "/v1/sprites/fsb/fs/write"
    assert api("PUT", write, data=b"x", params={"path": "/a"}).status_code == 400
    assert api("PUT", write, data=b"x", params={"path": "/", "workingDir": "/"}).status_code == 400
    no_parent = api("PUT", write, data=b"x", params={"path": "/a/b", "workingDir": "/"})
    assert no_parent.status_code == 404 and no_parent.json()["code"] == "ENOENT"
    missing = api("GET", "/v1/sprites/fsb/fs/read", params={"path": "/nope", "workingDir": "/"})
    assert missing.status_code == 404


def test_written_files_are_visible_to_commands(api: Api, emulator: SpritesEmulator) -> None:
    api.create("fsc")
    api(
        "PUT",
        "/v1/sprites/fsc/fs/write",
        data=b"hello",
        params={"path": "/in.txt", "workingDir": "/"},
    )
    run(api, emulator, "fsc", "cat in.txt > out.txt")
    read = api("GET", "/v1/sprites/fsc/fs/read", params={"path": "/out.txt", "workingDir": "/"})
    assert read.content == b"hello"


def test_read_streams_the_files_bytes_with_their_length(
    api: Api, emulator: SpritesEmulator
) -> None:
    api.create("fsr")
    data = os.urandom(3 * 1024 * 1024 + 17)
    (emulator.sprite_root("fsr") / "big.bin").write_bytes(data)
    answer = api(
        "GET", "/v1/sprites/fsr/fs/read", params={"path": "big.bin", "workingDir": "/"}, stream=True
    )
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "application/octet-stream"
    assert answer.headers["Content-Length"] == str(len(data))
    assert b"".join(answer.iter_content(65536)) == data
    (emulator.sprite_root("fsr") / "empty").write_bytes(b"")
    empty = api("GET", "/v1/sprites/fsr/fs/read", params={"path": "/empty", "workingDir": "/"})
    assert (empty.status_code, empty.content, empty.headers["Content-Length"]) == (200, b"", "0")


def test_a_file_that_shrinks_while_read_ends_the_body_short_of_its_length(
    api: Api, emulator: SpritesEmulator
) -> None:
    """The answer promised the size at open; a file cut meanwhile ends the connection
    before it (never a short body passed off as whole). That the cut shows at all
    also proves the file is streamed as read, not read whole before answering."""
    api.create("fss")
    host = emulator.sprite_root("fss") / "shrinks.bin"
    host.write_bytes(b"s" * (32 * 1024 * 1024))
    answer = api(
        "GET",
        "/v1/sprites/fss/fs/read",
        params={"path": "/shrinks.bin", "workingDir": "/"},
        stream=True,
    )
    assert answer.headers["Content-Length"] == str(32 * 1024 * 1024)
    pieces = answer.iter_content(65536)
    received = len(next(pieces))
    os.truncate(host, 0)
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        for piece in pieces:
            received += len(piece)
    assert received < 32 * 1024 * 1024


def test_read_refuses_directories_and_answers_404_for_missing_files(api: Api) -> None:
    api.create("fsd")
    api(
        "PUT",
        "/v1/sprites/fsd/fs/write",
        data=b"x",
        params={"path": "/dir/file", "workingDir": "/", "mkdirParents": "true"},
    )
    read = "/v1/sprites/fsd/fs/read"
    directory = api("GET", read, params={"path": "/dir", "workingDir": "/"})
    assert directory.status_code == 400
    assert directory.json() == {**directory.json(), "code": "EISDIR", "error": "is a directory"}
    root = api("GET", read, params={"path": "/", "workingDir": "/"})
    assert (root.status_code, root.json()["code"]) == (400, "EISDIR")
    missing = api("GET", read, params={"path": "/dir/none", "workingDir": "/"})
    assert (missing.status_code, missing.json()["code"]) == (404, "ENOENT")
    through = api("GET", read, params={"path": "/dir/file/x", "workingDir": "/"})
    assert (through.status_code, through.json()["code"]) == (400, "ENOTDIR")


def test_list_shows_each_entry_with_the_fields_the_sdks_parse(
    api: Api, emulator: SpritesEmulator
) -> None:
    api.create("fsl")
    api(
        "PUT",
        "/v1/sprites/fsl/fs/write",
        data=b"abc",
        params={"path": "/d/a.txt", "workingDir": "/", "mode": "0640", "mkdirParents": "true"},
    )
    api(
        "PUT",
        "/v1/sprites/fsl/fs/write",
        data=b"inner",
        params={"path": "/d/sub/in.txt", "workingDir": "/", "mkdirParents": "true"},
    )
    root = emulator.sprite_root("fsl")
    os.symlink("a.txt", root / "d" / "ln")
    os.mkfifo(root / "d" / "pipe")
    answer = api("GET", "/v1/sprites/fsl/fs/list", params={"path": "d", "workingDir": "/"})
    assert answer.status_code == 200
    body = answer.json()
    assert (body["path"], body["count"]) == ("/d", 4)
    entries = {entry["name"]: entry for entry in body["entries"]}
    assert sorted(entries) == ["a.txt", "ln", "pipe", "sub"]
    a_txt = entries["a.txt"]
    assert {k: v for k, v in a_txt.items() if k != "modTime"} == {
        "name": "a.txt",
        "path": "/d/a.txt",
        "type": "file",
        "size": 3,
        "mode": "0640",
        "isDir": False,
    }
    assert datetime.fromisoformat(a_txt["modTime"].replace("Z", "+00:00")).tzinfo is not None
    assert (entries["sub"]["type"], entries["sub"]["isDir"]) == ("directory", True)
    assert (entries["ln"]["type"], entries["ln"]["size"]) == ("symlink", len("a.txt"))
    assert (entries["pipe"]["type"], entries["pipe"]["isDir"]) == ("other", False)


def test_list_of_anything_but_a_directory_describes_the_path_itself(
    api: Api, emulator: SpritesEmulator
) -> None:
    api.create("fsf")
    api(
        "PUT",
        "/v1/sprites/fsf/fs/write",
        data=b"abc",
        params={"path": "/d/a.txt", "workingDir": "/", "mkdirParents": "true"},
    )
    os.mkfifo(emulator.sprite_root("fsf") / "d" / "pipe")
    listed = "/v1/sprites/fsf/fs/list"
    file = api("GET", listed, params={"path": "/d/a.txt", "workingDir": "/"}).json()
    assert (file["count"], file["entries"][0]["path"], file["entries"][0]["size"]) == (
        1,
        "/d/a.txt",
        3,
    )
    fifo = api("GET", listed, params={"path": "/d/pipe", "workingDir": "/"}).json()
    assert [(e["name"], e["type"]) for e in fifo["entries"]] == [("pipe", "other")]
    missing = api("GET", listed, params={"path": "/d/none", "workingDir": "/"})
    assert (missing.status_code, missing.json()["code"]) == (404, "ENOENT")
    through = api("GET", listed, params={"path": "/d/a.txt/x", "workingDir": "/"})
    assert (through.status_code, through.json()["code"]) == (400, "ENOTDIR")
    whole = api("GET", listed, params={"path": "/", "workingDir": "/"}).json()
    assert "d" in {entry["name"] for entry in whole["entries"]}


def test_read_and_list_never_follow_a_symlink_out_of_the_sprite(
    api: Api, emulator: SpritesEmulator, tmp_path: Path
) -> None:
    secret = secrets.token_hex(8)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text(secret)
    api.create("fse")
    root = emulator.sprite_root("fse")
    os.symlink(tmp_path / "outside", root / "abs")
    os.symlink("../" * 40 + str(tmp_path / "outside").lstrip("/"), root / "rel")
    for link in ("/abs", "/rel"):
        read = api(
            "GET",
            "/v1/sprites/fse/fs/read",
            params={"path": f"{link}/secret.txt", "workingDir": "/"},
        )
        assert read.status_code == 404 and secret not in read.text
        listed = api("GET", "/v1/sprites/fse/fs/list", params={"path": link, "workingDir": "/"})
        assert listed.status_code == 404 and "secret.txt" not in listed.text


# -- checkpoints -------------------------------------------------------------------------------


def test_checkpoint_streams_ndjson_ending_in_complete_and_is_listed_after_current(
    api: Api, emulator: SpritesEmulator
) -> None:
    api.create("cp")
    (emulator.sprite_root("cp") / "f").write_text("one")
    answer = api("POST", "/v1/sprites/cp/checkpoint", json={"comment": "first"})
    assert answer.status_code == 200
    assert answer.headers["Content-Type"].startswith("application/x-ndjson")
    events = ndjson(answer)
    assert [e["type"] for e in events[:-1]] == ["info"] * (len(events) - 1)
    assert events[-1] == {**events[-1], "type": "complete", "data": "Checkpoint v1 created"}
    assert all("time" in e and "error" not in e for e in events)
    api("POST", "/v1/sprites/cp/checkpoint", json={})
    listing = api("GET", "/v1/sprites/cp/checkpoints").json()
    assert [c["id"] for c in listing] == ["Current", "v2", "v1"]
    assert listing[2]["comment"] == "first"
    assert api("GET", "/v1/sprites/cp/checkpoints/v1").json()["comment"] == "first"
    assert api("GET", "/v1/sprites/cp/checkpoints/v9").status_code == 404


def test_restore_brings_back_files_and_policy(api: Api, emulator: SpritesEmulator) -> None:
    api.create("rs")
    root = emulator.sprite_root("rs")
    (root / "f").write_text("original")
    api("POST", "/v1/sprites/rs/checkpoint", json={"comment": "c"})
    (root / "f").write_text("changed")
    (root / "new").write_text("extra")
    api(
        "POST", "/v1/sprites/rs/policy/network", json={"rules": [{"domain": "*", "action": "deny"}]}
    )
    answer = api("POST", "/v1/sprites/rs/checkpoints/v1/restore")
    assert answer.status_code == 200
    assert ndjson(answer)[-1]["type"] == "complete"
    assert (root / "f").read_text() == "original"
    assert not (root / "new").exists()
    assert api("GET", "/v1/sprites/rs/policy/network").json() == {"rules": []}


def test_restoring_an_unknown_checkpoint_fails_in_band_or_with_404(
    api: Api, emulator: SpritesEmulator
) -> None:
    api.create("ru")
    answer = api("POST", "/v1/sprites/ru/checkpoints/v7/restore")
    assert answer.status_code == 200
    assert ndjson(answer)[-1] == {
        **ndjson(answer)[-1],
        "type": "error",
        "error": "checkpoint not found",
    }
    emulator.behaviour.restore_unknown_status = 404
    assert api("POST", "/v1/sprites/ru/checkpoints/v7/restore").status_code == 404


# -- faults ------------------------------------------------------------------------------------


def test_rate_limit_carries_retry_after_in_the_header_and_or_the_body(
    api: Api, emulator: SpritesEmulator
) -> None:
    emulator.rate_limit(retry_after=17, path="^/v1/sprites$", method="POST")
    both = api.create("rl")
    assert both.status_code == 429
    assert both.headers["Retry-After"] == "17"
    assert both.json()["retry_after_seconds"] == 17
    assert both.json()["error"] == "sprite_creation_rate_limited"
    assert int(both.headers["X-RateLimit-Reset"]) >= int(time.time()) + 16
    emulator.rate_limit(retry_after=3, in_body=False)
    header_only = api("GET", "/v1/sprites")
    assert header_only.headers["Retry-After"] == "3"
    assert "retry_after_seconds" not in header_only.json()
    emulator.rate_limit(retry_after=4, header=False)
    body_only = api("GET", "/v1/sprites")
    assert "Retry-After" not in body_only.headers
    assert body_only.json()["retry_after_seconds"] == 4
    assert api.create("rl").status_code == 201


def test_fail_answers_the_status_the_given_number_of_times(
    api: Api, emulator: SpritesEmulator
) -> None:
    api.create("f5")
    emulator.fail(503, path="/v1/sprites/f5$", times=2)
    assert [api("GET", "/v1/sprites/f5").status_code for _ in range(3)] == [503, 503, 200]
    emulator.fail(302, headers={"Location": "https://elsewhere.example"}, body="")
    moved = api("GET", "/v1/sprites", allow_redirects=False)
    assert moved.status_code == 302 and moved.headers["Location"] == "https://elsewhere.example"


def test_endless_listing_always_has_more_with_a_fresh_token(
    api: Api, emulator: SpritesEmulator
) -> None:
    api.create("one")
    emulator.endless_listing(times=3)
    tokens = []
    params: dict[str, Any] = {}
    for _ in range(3):
        page = api("GET", "/v1/sprites", params=params).json()
        assert page["has_more"] is True and page["next_continuation_token"]
        tokens.append(page["next_continuation_token"])
        params = {"continuation_token": tokens[-1]}
    assert len(set(tokens)) == 3
    assert api("GET", "/v1/sprites", params=params).json()["has_more"] is False


def test_truncated_listing_body_cannot_be_read_whole(api: Api, emulator: SpritesEmulator) -> None:
    emulator.truncate()
    with pytest.raises(requests.RequestException):
        api("GET", "/v1/sprites").json()
    assert api("GET", "/v1/sprites").status_code == 200


def test_stall_holds_the_request_past_a_client_timeout(api: Api, emulator: SpritesEmulator) -> None:
    # Held for 2 s, the request can only end in the client's 0.2 s timeout: an answer
    # would mean the stall did not hold it.
    emulator.stall(2.0, path="^/v1/sprites$")
    with pytest.raises(requests.Timeout):
        api("GET", "/v1/sprites", timeout=0.2)


def test_oversize_and_dropped_connections(api: Api, emulator: SpritesEmulator) -> None:
    emulator.oversize(100_000, path="^/v1/sprites$")
    assert len(api("GET", "/v1/sprites").content) == 100_000
    emulator.drop_connection(path="^/v1/sprites$")
    with pytest.raises(requests.ConnectionError):
        api("GET", "/v1/sprites")


def test_malformed_checkpoint_stream_is_sent_as_given_and_creates_nothing(
    api: Api, emulator: SpritesEmulator
) -> None:
    api.create("mc")
    emulator.malformed_ndjson("checkpoint")
    answer = api("POST", "/v1/sprites/mc/checkpoint", json={})
    assert answer.status_code == 200
    assert answer.text == '{"type":"signal","signal":"SIGTERM"\nnot json at all\n'
    assert [c["id"] for c in api("GET", "/v1/sprites/mc/checkpoints").json()] == ["Current"]
    emulator.script_ndjson([{"type": "info", "data": "x", "error": None}], path="/restore$")
    scripted = api("POST", "/v1/sprites/mc/checkpoints/v1/restore")
    assert ndjson(scripted) == [{"type": "info", "data": "x", "error": None}]


# -- shell entry point -------------------------------------------------------------------------


def test_the_shell_entry_point_prints_its_base_url_and_serves() -> None:
    env = {**os.environ, "SPRITES_TOKEN": "shell-token"}
    process = subprocess.Popen(
        [sys.executable, "-m", "managoat_sandbox.emulators", "sprites", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")
        headers = {"Authorization": "Bearer shell-token"}
        created = requests.post(
            f"{base_url}/v1/sprites", json={"name": "sh"}, headers=headers, timeout=10
        )
        assert created.status_code == 201
        wrong = requests.get(
            f"{base_url}/v1/sprites", headers={"Authorization": "Bearer x"}, timeout=10
        )
        assert wrong.status_code == 401
    finally:
        process.terminate()
        assert process.wait(20) == 0
