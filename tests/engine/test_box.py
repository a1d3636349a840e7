"""The library's connection to an agent: what it does when the agent goes away under it,
and that no request, however malformed, ends the agent."""

from __future__ import annotations

import os
import select
import socket
import threading

import pytest

from managoat_sandbox._engine.box import Box, Refused


def test_a_request_meeting_a_dying_agent_is_sent_again_to_the_next_one(box: Box) -> None:
    """An agent that died leaves dead pooled connections, and while it dies its socket
    may still accept one more connection that is then reset: neither was read, so the
    request is sent again, and reaches a new agent."""
    assert box.stop()
    dead, peer = socket.socketpair()
    peer.close()
    box.checkin(dead)
    lingering = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = box.state / "agent.sock"
    path.unlink(missing_ok=True)
    lingering.bind(str(path))
    lingering.listen(1)
    reset = threading.Event()

    def linger_for_one_connection() -> None:
        readable, _, _ = select.select([lingering], [], [], 30)
        if readable:
            lingering.close()
            os.unlink(path)
            reset.set()

    threading.Thread(target=linger_for_one_connection, daemon=True).start()
    reply = box.request({"op": "hello"})
    assert reset.is_set()
    assert isinstance(reply.get("pid"), int) and box.alive()


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"env": {"A=B": "1"}}, "bad_env"),
        ({"env": {"": "1"}}, "bad_env"),
        ({"env": {"A": "x\0y"}}, "bad_env"),
        ({"argv": ["echo", "a\0b"]}, "bad_argv"),
        ({"rows": "many"}, "bad_request"),
    ],
)
def test_a_request_the_agent_cannot_run_is_refused_and_the_agent_serves_on(
    box: Box, fields: dict[str, object], code: str
) -> None:
    """Each of these once reached ``subprocess.Popen`` (or ``int``) unchecked, and the
    exception ended the agent, with every session it served."""
    pid = box.request({"op": "hello"})["pid"]
    request = {
        "op": "spawn",
        "id": "s" + os.urandom(6).hex(),
        "argv": ["echo", "hi"],
        "env": {},
        "cwd": box.agent_path("/"),
        "journal": False,
        **fields,
    }
    with pytest.raises(Refused) as refused:
        box.request(request)
    assert refused.value.code == code
    assert box.request({"op": "hello"})["pid"] == pid, "the same agent still serves"
