"""What a command cannot reach of the host's kernel, whoever the caller is.

Every test attacks an isolated sandbox and is skipped where the host cannot
isolate. Kernel settings and device nodes are only ever checked for
writability (``test -w``, ownership and capabilities): nothing here writes or
re-permissions them. The keyring test adds a key only to a session keyring of
its own, made fresh in a child process, never to the session running the tests.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from managoat_sandbox._engine import seccomp
from managoat_sandbox._engine.box import Box
from managoat_sandbox._engine.errors import EngineError
from managoat_sandbox._engine.settings import BoxSettings
from managoat_sandbox.providers.local import Local
from managoat_sandbox.types import Handle

from .conftest import requires_isolation

pytestmark = requires_isolation

KERNEL_SETTINGS = (
    "/proc/sys/kernel/core_pattern",
    "/proc/sys/vm/drop_caches",
    "/proc/sys/kernel/randomize_va_space",
    "/proc/sys/fs/protected_symlinks",
    "/proc/sysrq-trigger",
)
DEVICES = ("/dev/null", "/dev/zero", "/dev/tty", "/dev/urandom")

#: Makes system calls by number from inside a sandbox and prints {name: errno or 0}.
SYSCALLS = r"""
import ctypes, json, os, platform, sys
numbers = json.loads(sys.argv[1])[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
calls = {
    "keyctl": (0, -3, 0),             # KEYCTL_GET_KEYRING_ID of the session keyring
    "add_key": (b"user", b"managoat-probe", b"x", 1, -3),
    "request_key": (b"user", b"managoat-probe", None, -3),
    "unshare": (0x10000000,),         # CLONE_NEWUSER
    "setns": (-1, 0),
    "mount": (b"none", b"/tmp", b"tmpfs", 0, None),
    "bpf": (0, None, 0),
    "perf_event_open": (None, 0, -1, -1, 0),
    "userfaultfd": (0,),
    "clone3": (None, 0),
    "kexec_load": (0, 0, None, 0),
    "init_module": (None, 0, b""),
}
found = {}
for name, args in calls.items():
    ctypes.set_errno(0)
    answer = libc.syscall(ctypes.c_long(numbers[name]), *args)
    found[name] = ctypes.get_errno() if answer == -1 else 0
pid = os.fork()
if pid == 0:
    os._exit(7)
found["fork"] = os.waitpid(pid, 0)[1] >> 8
print(json.dumps(found))
"""


def sh(local: Local, handle: Handle, script: str) -> str:
    result = local.exec(handle, "bash", ["-c", script])
    assert result.exit_code == 0, result.stderr
    return result.output.decode()


def numbers() -> str:
    return json.dumps({name: arch.numbers for name, arch in seccomp.TABLES.items()})


@pytest.fixture
def box(local: Local) -> Handle:
    return local.create("kernel")


def test_kernel_settings_are_read_only_to_a_command(local: Local, box: Handle) -> None:
    checks = "; ".join(f"test -w {path} && echo {path}" for path in KERNEL_SETTINGS)
    assert sh(local, box, f"{checks}; true") == ""


def test_device_nodes_are_not_the_command_s_to_re_permission(local: Local, box: Handle) -> None:
    # Changing a node's mode takes owning it or CAP_FOWNER: neither holds (checked, not tried).
    owners = sh(local, box, f"stat -c %u {' '.join(DEVICES)}").split()
    assert owners and "1000" not in owners
    status = sh(local, box, "grep -E '^Cap(Eff|Prm|Amb)' /proc/self/status")
    assert {line.split()[1] for line in status.splitlines()} == {"0000000000000000"}


def test_keyring_module_bpf_and_namespace_calls_are_refused(local: Local, box: Handle) -> None:
    if seccomp.build().program is None:
        pytest.skip(seccomp.build().reason or "no system call filter here")
    output = sh(local, box, f"python3 -c '{SYSCALLS}' '{numbers()}'")
    found = json.loads(output)
    assert found.pop("clone3") == errno.ENOSYS  # so C libraries fall back to clone
    assert found.pop("fork") == 7  # ordinary processes still start
    assert found == dict.fromkeys(found, errno.EPERM)


def test_the_caller_s_keyring_is_out_of_reach(root: Path) -> None:
    if seccomp.build().program is None:
        pytest.skip(seccomp.build().reason or "no system call filter here")
    if not seccomp_arch_known():
        pytest.skip("no key calls known for this architecture")
    child = subprocess.run(
        [sys.executable, "-c", KEYRING_CALLER, str(root), numbers()],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr.decode()
    seen: dict[str, Any] = json.loads(child.stdout)
    assert seen["caller_sees_key"], "the caller could not even add its key"
    assert "managoat-canary" not in seen["proc_keys"]
    assert seen["keyctl_read"] == errno.EPERM


def seccomp_arch_known() -> bool:
    import platform  # noqa: PLC0415

    return platform.machine() in seccomp.TABLES


#: A caller with a key in its (fresh) session keyring: what does its sandbox see of it?
KEYRING_CALLER = r"""
import ctypes, json, platform, sys
import managoat_sandbox as sandbox
from managoat_sandbox import config
numbers = json.loads(sys.argv[2])[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
assert libc.syscall(ctypes.c_long(numbers["keyctl"]), 1, None) > 0  # join a new session keyring
key = libc.syscall(ctypes.c_long(numbers["add_key"]), b"user", b"managoat-canary", b"s3cret", 6, -3)
assert key > 0
config.configure("local", root=sys.argv[1], isolation="require")
handle = sandbox.create_new("local", "keys")
try:
    listed = sandbox.exec(handle, "cat", ["/proc/keys"]).output.decode()
    probe = (
        "import ctypes,sys; l=ctypes.CDLL(None,use_errno=True); l.syscall.restype=ctypes.c_long;"
        f"r=l.syscall(ctypes.c_long({numbers['keyctl']}), 11, {key}, None, 0);"
        "print(ctypes.get_errno() if r == -1 else 0)"
    )
    read = sandbox.exec(handle, "python3", ["-c", probe]).output.decode().strip()
finally:
    sandbox.destroy(handle)
print(json.dumps({"caller_sees_key": key > 0, "proc_keys": listed, "keyctl_read": int(read)}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="what a root caller's sandbox is needs a root caller")
class TestRootCaller:
    """A root caller's sandbox runs as an unprivileged host uid of its own."""

    def test_no_process_of_the_sandbox_runs_as_host_root(self, local: Local, root: Path) -> None:
        handle = local.create("uids")
        command = local.spawn(handle, "sleep", ["60"])
        try:
            agent = json.loads((root / "uids" / "state" / "agent.json").read_text())["pid"]
            members = [agent, *children_of(agent)]
            assert len(members) >= 2  # the agent and the command
            uids = {host_uids(pid) for pid in members}
            assert all(0 not in ids for ids in uids), uids
            assert len({ids[0] for ids in uids}) == 1
        finally:
            local.stop_command(command)

    def test_a_setuid_file_a_command_makes_is_not_root_s(self, local: Local, root: Path) -> None:
        handle = local.create("setuid")
        sh(local, handle, "cp /bin/true ~/escalate && chmod 4755 ~/escalate")
        made = os.stat(root / "setuid" / "fs" / "home" / "user" / "escalate")
        assert made.st_mode & 0o4000  # the bit is there: it must not be root's
        assert made.st_uid != 0
        assert made.st_gid != 0

    def test_a_sandbox_whose_user_would_be_root_is_never_run(self, tmp_path: Path) -> None:
        directory = tmp_path / "made-unprivileged"
        directory.mkdir()
        box = Box.layout(directory, BoxSettings(isolated=True, host_uid=None))
        with pytest.raises(EngineError, match="host root"):
            box.ensure(timeout=20)
        assert not box.alive()

    def test_the_host_s_root_only_files_stay_closed(self, local: Local) -> None:
        if not os.path.isdir("/etc/ssl/private") or os.stat("/etc/ssl/private").st_mode & 0o005:
            pytest.skip("this host has no root-only /etc/ssl/private to check")
        handle = local.create("keys")
        assert sh(local, handle, "test -r /etc/ssl/private && echo readable; true") == ""

    def test_sandboxes_of_one_caller_run_as_different_users(self, local: Local, root: Path) -> None:
        owners = set()
        for name in ("one", "two"):
            local.create(name)
            owners.add(os.stat(root / name / "fs").st_uid)
        assert len(owners) == 2
        assert 0 not in owners

    def test_a_sandbox_s_files_are_closed_to_other_users(self, local: Local, root: Path) -> None:
        local.create("closed")
        assert os.stat(root / "closed" / "fs").st_mode & 0o077 == 0
        assert os.stat(root / "closed" / "state").st_mode & 0o077 == 0


def children_of(pid: int) -> list[int]:
    """Every descendant of host process ``pid`` (through /proc/<pid>/task/*/children)."""
    found, queue = [], [pid]
    while queue:
        parent = queue.pop()
        for task in os.listdir(f"/proc/{parent}/task"):
            with open(f"/proc/{parent}/task/{task}/children") as source:
                kids = [int(kid) for kid in source.read().split()]
            found += kids
            queue += kids
    return found


def host_uids(pid: int) -> tuple[int, ...]:
    """Real, effective, saved and file-system uid of host process ``pid``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return tuple(int(field) for field in line.split()[1:])
    raise AssertionError(f"no Uid line for {pid}")
