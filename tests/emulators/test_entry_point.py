"""``python -m managoat_sandbox.emulators`` explains why it cannot serve, in one line on
stderr saying what to do, and exits nonzero: a busy port, a missing ``emulators`` extra."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

ENTRY = "managoat_sandbox.emulators"

#: Runs the entry point as ``python -m`` would, with every import of aiohttp failing
#: as it does when the ``emulators`` extra is not installed.
WITHOUT_AIOHTTP = """
import runpy, sys

class NoAiohttp:
    def find_spec(self, name, path=None, target=None):
        if name == "aiohttp" or name.startswith("aiohttp."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoAiohttp())
sys.argv = ["managoat_sandbox.emulators", *sys.argv[1:]]
runpy.run_module("managoat_sandbox.emulators", run_name="__main__", alter_sys=True)
"""


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port something is listening on for the test's duration."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


@pytest.mark.parametrize("provider", ["sprites", "e2b", "daytona"])
def test_a_busy_port_is_one_line_saying_what_to_do(busy_port: int, provider: str) -> None:
    ran = _run("-m", ENTRY, provider, "--port", str(busy_port))
    assert ran.returncode != 0
    assert ran.stdout == ""
    assert ran.stderr.splitlines() == [
        f"port {busy_port} on 127.0.0.1 is in use; pass --port 0 (a free port) or another port"
    ]


def test_a_missing_extra_is_one_line_naming_it() -> None:
    ran = _run("-c", WITHOUT_AIOHTTP, "e2b", "--port", "0")
    assert ran.returncode != 0
    assert ran.stdout == ""
    assert ran.stderr.splitlines() == [
        "the emulators need the 'emulators' extra: pip install 'managoat_sandbox[emulators]'"
    ]
