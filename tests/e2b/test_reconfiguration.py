"""A settings change mid-run keeps every adapter instance and what it holds.

Changing retry settings used to replace every cached adapter: Fake sandboxes
vanished, and the E2B adapter forgot the policy it re-applies after a resume
(egress could silently reopen). Only a change of the ``adapters`` map may
replace an instance.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox import Exit, NetworkPolicy, Stdout, config
from managoat_sandbox.emulators.e2b import E2BEmulator

from .emulated import point_at

#: Seconds allowed for each frame of the running command.
FRAME_WAIT = 30.0


@pytest.fixture
def pointed(emulator: E2BEmulator) -> Iterator[E2BEmulator]:
    point_at(emulator)
    emulator.faults.clear()
    yield emulator


def _policy_puts(emulator: E2BEmulator, sandbox_id: str) -> list[bytes]:
    return [
        r.body
        for r in emulator.requests
        if r.method == "PUT" and r.path == f"/sandboxes/{sandbox_id}/network"
    ]


def test_retry_settings_change_keeps_fake_sandboxes_commands_and_policies(
    pointed: E2BEmulator,
) -> None:
    fake_box = sandbox.create("fake", "survives-reconfiguration")
    e2b_box = sandbox.create("e2b", f"reconf-{time.monotonic_ns()}")
    try:
        adapters_before = (sandbox.adapter_for("fake"), sandbox.adapter_for("e2b"))
        sandbox.apply_network_policy(e2b_box, NetworkPolicy(allow=["example.com"]))
        command = sandbox.spawn(e2b_box, "bash", ["-c", "read line; echo got-$line"], stdin=True)

        config.configure("retry", attempts=2)
        with config.override("retry", base_ms=2):
            assert (sandbox.adapter_for("fake"), sandbox.adapter_for("e2b")) == adapters_before
            assert sandbox.get(fake_box).status == "running"

            sandbox.write_stdin(command, "x\n")
            sandbox.close_stdin(command)
            frames = list(sandbox.iter_frames(command, timeout=FRAME_WAIT))
            assert b"".join(f.data for f in frames if isinstance(f, Stdout)) == b"got-x\n"
            assert isinstance(frames[-1], Exit) and frames[-1].code == 0

            sandbox_id = sandbox.get(e2b_box).raw["sandboxID"]
            pointed.clear_requests()
            sandbox.suspend(e2b_box)
            sandbox.resume(e2b_box)
            assert _policy_puts(pointed, sandbox_id) == [
                b'{"allowOut":["example.com"],"denyOut":["0.0.0.0/0"]}'
            ], "the policy was not re-applied after the resume"
        assert sandbox.get(fake_box).status == "running"
    finally:
        sandbox.destroy(fake_box)
        sandbox.destroy(e2b_box)


def test_a_new_adapters_map_does_replace_the_instance() -> None:
    before = sandbox.adapter_for("fake")
    config.configure(adapters={"other": before})
    assert sandbox.adapter_for("fake") is not before
