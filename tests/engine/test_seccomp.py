"""The system call filter's verdicts, run through a small classic-BPF interpreter.

The kernel test (tests/local/test_kernel_surface.py) checks what a sandboxed
command meets on this machine; this one checks every architecture's program,
call by call, without a kernel: what each denied name gets, what stays allowed,
and that a foreign ABI is killed.
"""

from __future__ import annotations

import errno
import struct

import pytest

from managoat_sandbox._engine import seccomp

# Common calls every program makes: none may be refused.
ALLOWED = {
    "x86_64": {"read": 0, "write": 1, "openat": 257, "execve": 59, "ptrace": 101, "wait4": 61},
    "aarch64": {"read": 63, "write": 64, "openat": 56, "execve": 221, "ptrace": 117, "wait4": 260},
}
FORK_FLAGS = 0x01200011  # CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD, as fork() uses
THREAD_FLAGS = 0x003D0F00  # what pthread_create passes to clone


def run(program: bytes, *, nr: int, arch: int, arg0: int = 0) -> int:
    """Run ``program`` on one ``struct seccomp_data`` and return its verdict."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    code = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    acc, pc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif op in (0x15, 0x35, 0x45):
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[op]
            pc += 1 + (jt if taken else jf)
        elif op == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected instruction {op:#x}")


@pytest.mark.parametrize("name", sorted(seccomp.TABLES))
class TestEachArchitecture:
    def test_every_denied_call_is_refused_with_eperm(self, name: str) -> None:
        arch = seccomp.TABLES[name]
        program = seccomp.compile_for(arch)
        denied = [call for call in seccomp.DENIED if call in arch.numbers]
        assert {"keyctl", "add_key", "request_key", "bpf", "unshare", "mount"} <= set(denied)
        for call in denied:
            verdict = run(program, nr=arch.numbers[call], arch=arch.audit)
            assert verdict == seccomp.ERRNO | errno.EPERM, call

    def test_ordinary_calls_and_processes_are_allowed(self, name: str) -> None:
        arch = seccomp.TABLES[name]
        program = seccomp.compile_for(arch)
        for call, number in ALLOWED[name].items():
            assert run(program, nr=number, arch=arch.audit) == seccomp.ALLOW, call
        for flags in (FORK_FLAGS, THREAD_FLAGS):
            verdict = run(program, nr=arch.numbers["clone"], arch=arch.audit, arg0=flags)
            assert verdict == seccomp.ALLOW

    def test_clone_into_a_new_namespace_is_refused(self, name: str) -> None:
        arch = seccomp.TABLES[name]
        program = seccomp.compile_for(arch)
        for flag in (0x10000000, 0x20000, 0x40000000, 0x20000000, 0x80):
            verdict = run(program, nr=arch.numbers["clone"], arch=arch.audit, arg0=flag | 17)
            assert verdict == seccomp.ERRNO | errno.EPERM, hex(flag)

    def test_clone3_answers_enosys_so_libraries_fall_back(self, name: str) -> None:
        arch = seccomp.TABLES[name]
        verdict = run(seccomp.compile_for(arch), nr=arch.numbers["clone3"], arch=arch.audit)
        assert verdict == seccomp.ERRNO | errno.ENOSYS

    def test_another_abi_is_killed(self, name: str) -> None:
        arch = seccomp.TABLES[name]
        program = seccomp.compile_for(arch)
        assert run(program, nr=0, arch=0x40000003) == seccomp.KILL_PROCESS  # i386
        if arch.foreign_from is not None:
            assert run(program, nr=arch.foreign_from | 1, arch=arch.audit) == seccomp.KILL_PROCESS


def test_an_unknown_architecture_has_no_filter_and_says_why() -> None:
    built = seccomp.build("riscv64")
    assert built.program is None
    assert built.reason is not None and "riscv64" in built.reason
