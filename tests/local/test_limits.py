"""Resource limits: set per sandbox, inherited by every process, enforced by the kernel.

Each probe is bounded (it tries a fixed number of processes, one allocation, one
file): if a limit did not hold here, the probe would still do no harm.
"""

from __future__ import annotations

import re

from managoat_sandbox._engine.limits import Limits
from managoat_sandbox.errors import Unavailable
from managoat_sandbox.frames import Error
from managoat_sandbox.providers.local import Local
from managoat_sandbox.testing.mailbox import Mailbox

from .conftest import requires_isolation

FORKS = """
import os, time
children = []
for _ in range(100):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children.append(pid)
print(len(children))
for pid in children:
    os.kill(pid, 9)
"""


def limit_of(limits_text: str, name: str) -> tuple[str, str]:
    line = next(line for line in limits_text.splitlines() if line.startswith(name))
    soft, hard = re.split(r"\s{2,}", line.strip())[1:3]
    return soft, hard


def test_every_process_inherits_the_default_limits(local: Local) -> None:
    handle = local.create("defaults")
    text = local.exec(handle, "cat", ["/proc/self/limits"]).output.decode()
    defaults = Limits()
    assert limit_of(text, "Max address space") == (str(defaults.memory),) * 2
    assert limit_of(text, "Max open files") == ("1024", str(defaults.open_files))
    assert limit_of(text, "Max file size") == (str(defaults.file_size),) * 2
    if local.get(handle).raw["isolation"] == "namespaces":
        assert limit_of(text, "Max processes") == (str(defaults.processes),) * 2


def test_with_hundreds_of_live_commands_a_new_one_runs_with_the_default_limits(
    local: Local,
) -> None:
    """The agent then holds more descriptors than a child may open: the child's limit
    must still be set, and the command must still run (it once failed with 126)."""
    handle = local.create("crowded")
    live = [local.spawn(handle, "cat", [], owner=Mailbox(), stdin=True) for _ in range(300)]
    try:
        text = local.exec(handle, "cat", ["/proc/self/limits"], timeout=30).output.decode()
        assert limit_of(text, "Max open files") == ("1024", str(Limits().open_files))
    finally:
        for command in live:
            local.stop_command(command)


@requires_isolation
def test_the_process_limit_stops_a_fork_flood(local: Local) -> None:
    """Whoever the caller is: a root caller's sandbox runs as an unprivileged host uid of
    its own, which the kernel's process limit binds like any other."""
    handle = local.create("forks", limits={"processes": 32})
    forked = int(local.exec(handle, "python3", ["-c", FORKS], timeout=60).output)
    assert 0 < forked < 32


def test_the_memory_limit_stops_a_runaway_allocation(local: Local) -> None:
    handle = local.create("memory", limits={"memory": 512 * 1024**2})
    result = local.exec(
        handle,
        "python3",
        ["-c", "b = bytearray(2 << 30); print('allocated')"],
        stderr_to_stdout=True,
        timeout=60,
    )
    assert result.exit_code == 1 and b"MemoryError" in result.output


def test_the_file_size_limit_stops_a_runaway_file_and_a_runaway_journal(local: Local) -> None:
    handle = local.create("files", limits={"file_size": 1024**2})
    result = local.exec(handle, "bash", ["-c", "head -c 3000000 /dev/zero > /tmp/big"])
    assert result.exit_code == 128 + 25
    assert local.exec(handle, "stat", ["-c", "%s", "/tmp/big"]).output == b"1048576\n"
    box = Mailbox()
    command = local.spawn(handle, "head", ["-c", "3000000", "/dev/zero"], owner=box)
    error = box.expect(lambda f: f.ref == command.ref and f.terminal, 30)
    assert isinstance(error, Error)
    assert error.reason == Unavailable(("journal_failed", "EFBIG"))


def test_commands_may_raise_open_files_up_to_the_limit_only(local: Local) -> None:
    handle = local.create("fds", limits={"open_files": 300})
    script = (
        "import resource\nprint(resource.getrlimit(resource.RLIMIT_NOFILE))\n"
        "try:\n    resource.setrlimit(resource.RLIMIT_NOFILE, (301, 301))\n"
        "except ValueError as e:\n    print('refused')\n"
    )
    assert local.exec(handle, "python3", ["-c", script]).output == b"(300, 300)\nrefused\n"
