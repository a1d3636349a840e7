"""The seccomp filter every isolated sandbox runs under.

bubblewrap loads it (``--seccomp FD``) just before it starts the agent, so
the agent and every command inherit it and none can lift it (filters only
ever add up, and ``no_new_privs`` is set). It refuses, with ``EPERM``, the
kernel surface a sandboxed command has no use for and that the major
container runtimes deny by default:

* the kernel keyring (``add_key``, ``keyctl``, ``request_key``): the caller's
  session keyring is inherited, and must stay out of reach;
* kernel modules, ``kexec``, ``reboot``, swap, ``acct``, ``syslog``, quotas,
  setting the clock;
* ``bpf``, ``perf_event_open``, ``userfaultfd``, ``io_uring`` (frequent
  sources of kernel exploits);
* new namespaces and mounts: ``unshare``, ``setns``, ``mount`` and the new
  mount API, ``pivot_root``, and ``clone`` with any ``CLONE_NEW*`` flag;
  ``clone3`` (whose flags a classic filter cannot read) answers ``ENOSYS``,
  so C libraries fall back to ``clone``, as under Docker;
* file handles (``open_by_handle_at`` walks past mount boundaries) and
  obsolete calls (``uselib``, ``ustat``, ``sysfs``, ``_sysctl``, ``nfsservctl``,
  ``iopl``/``ioperm``…).

A system call of another ABI than the native one (32-bit x86 or x32 on
x86-64) kills the process: the numbers above would not apply to it. The
program is assembled here as classic BPF for the architectures listed in
:data:`TABLES`; elsewhere :func:`build` says why there is none.
"""

from __future__ import annotations

import errno
import platform
import struct
from dataclasses import dataclass

__all__ = ["DENIED", "TABLES", "Arch", "Filter", "build"]

#: What the filter refuses with EPERM, by name (a name an architecture lacks is skipped).
DENIED = (
    # the kernel keyring
    "add_key",
    "keyctl",
    "request_key",
    # the kernel itself
    "init_module",
    "finit_module",
    "delete_module",
    "create_module",
    "query_module",
    "get_kernel_syms",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "syslog",
    "quotactl",
    "quotactl_fd",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    # frequent sources of kernel exploits
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "fanotify_init",
    # namespaces and mounts
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "mount_setattr",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    # file handles, and calls that are obsolete or privileged
    "name_to_handle_at",
    "open_by_handle_at",
    "lookup_dcookie",
    "nfsservctl",
    "uselib",
    "ustat",
    "sysfs",
    "_sysctl",
    "iopl",
    "ioperm",
)

#: ``clone`` flags that create namespaces: CLONE_NEWTIME (0x80), CLONE_NEWNS (0x20000),
#: CLONE_NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID and NEWNET (0x02000000 … 0x40000000).
NAMESPACE_FLAGS = 0x80 | 0x20000 | 0x7E000000


@dataclass(frozen=True)
class Arch:
    """One architecture's audit number and system call numbers (from its kernel headers).

    ``foreign_from``: numbers at or above it belong to another ABI sharing the
    audit number (x32 on x86-64), or None.
    """

    audit: int
    numbers: dict[str, int]
    foreign_from: int | None = None


TABLES: dict[str, Arch] = {
    "x86_64": Arch(
        audit=0xC000003E,
        foreign_from=0x40000000,
        numbers={
            "add_key": 248,
            "keyctl": 250,
            "request_key": 249,
            "init_module": 175,
            "finit_module": 313,
            "delete_module": 176,
            "create_module": 174,
            "query_module": 178,
            "get_kernel_syms": 177,
            "kexec_load": 246,
            "kexec_file_load": 320,
            "reboot": 169,
            "swapon": 167,
            "swapoff": 168,
            "acct": 163,
            "syslog": 103,
            "quotactl": 179,
            "quotactl_fd": 443,
            "settimeofday": 164,
            "clock_settime": 227,
            "clock_adjtime": 305,
            "bpf": 321,
            "perf_event_open": 298,
            "userfaultfd": 323,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "fanotify_init": 300,
            "unshare": 272,
            "setns": 308,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "mount_setattr": 442,
            "move_mount": 429,
            "open_tree": 428,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "name_to_handle_at": 303,
            "open_by_handle_at": 304,
            "lookup_dcookie": 212,
            "nfsservctl": 180,
            "uselib": 134,
            "ustat": 136,
            "sysfs": 139,
            "_sysctl": 156,
            "iopl": 172,
            "ioperm": 173,
            "clone": 56,
            "clone3": 435,
        },
    ),
    "aarch64": Arch(
        audit=0xC00000B7,
        numbers={
            "add_key": 217,
            "keyctl": 219,
            "request_key": 218,
            "init_module": 105,
            "finit_module": 273,
            "delete_module": 106,
            "kexec_load": 104,
            "kexec_file_load": 294,
            "reboot": 142,
            "swapon": 224,
            "swapoff": 225,
            "acct": 89,
            "syslog": 116,
            "quotactl": 60,
            "quotactl_fd": 443,
            "settimeofday": 170,
            "clock_settime": 112,
            "clock_adjtime": 266,
            "bpf": 280,
            "perf_event_open": 241,
            "userfaultfd": 282,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "fanotify_init": 262,
            "unshare": 97,
            "setns": 268,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "mount_setattr": 442,
            "move_mount": 429,
            "open_tree": 428,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "name_to_handle_at": 264,
            "open_by_handle_at": 265,
            "lookup_dcookie": 18,
            "nfsservctl": 42,
            "clone": 220,
            "clone3": 435,
        },
    ),
}

# Classic BPF, as seccomp runs it over struct seccomp_data {int nr; u32 arch;
# u64 instruction_pointer; u64 args[6];} (little-endian: an argument's low half first).
_LOAD = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
NR, ARCH, ARG0 = 0, 4, 16
ALLOW = 0x7FFF0000
KILL_PROCESS = 0x80000000
ERRNO = 0x00050000


@dataclass(frozen=True)
class Filter:
    """The compiled program (``struct sock_filter`` array), or why there is none."""

    program: bytes | None
    reason: str | None = None


# One instruction before label resolution: (code, k, jump-if-true, jump-if-false),
# a jump target being a label name or None for the next instruction.
_Op = tuple[int, int, "str | None", "str | None"]


def _assemble(ops: list[tuple[str | None, _Op]]) -> bytes:
    """Encode ``(label, op)`` pairs, resolving jump labels to relative offsets."""
    where = {label: index for index, (label, _) in enumerate(ops) if label is not None}
    out = bytearray()
    for index, (_, (code, k, true, false)) in enumerate(ops):
        jumps = []
        for target in (true, false):
            offset = 0 if target is None else where[target] - index - 1
            if not 0 <= offset <= 255:
                raise ValueError(f"a jump of {offset} does not fit classic BPF")
            jumps.append(offset)
        out += struct.pack("=HBBI", code, jumps[0], jumps[1], k)
    return bytes(out)


def compile_for(arch: Arch) -> bytes:
    """The filter program for ``arch`` (see the module docstring for what it refuses)."""
    ops: list[tuple[str | None, _Op]] = [
        (None, (_LOAD, ARCH, None, None)),
        (None, (_JEQ, arch.audit, None, "kill")),
        (None, (_LOAD, NR, None, None)),
    ]
    if arch.foreign_from is not None:
        ops.append((None, (_JGE, arch.foreign_from, "kill", None)))
    ops.append((None, (_JEQ, arch.numbers["clone3"], "enosys", None)))
    ops.append((None, (_JEQ, arch.numbers["clone"], "clone", None)))
    ops += [
        (None, (_JEQ, arch.numbers[name], "deny", None)) for name in DENIED if name in arch.numbers
    ]
    ops += [
        (None, (_RET, ALLOW, None, None)),
        ("clone", (_LOAD, ARG0, None, None)),
        (None, (_JSET, NAMESPACE_FLAGS, "deny", None)),
        (None, (_RET, ALLOW, None, None)),
        ("deny", (_RET, ERRNO | errno.EPERM, None, None)),
        ("enosys", (_RET, ERRNO | errno.ENOSYS, None, None)),
        ("kill", (_RET, KILL_PROCESS, None, None)),
    ]
    return _assemble(ops)


def build(machine: str | None = None) -> Filter:
    """The filter for this machine's architecture (or ``machine``), or why there is none."""
    name = machine or platform.machine()
    arch = TABLES.get(name)
    if arch is None:
        known = ", ".join(sorted(TABLES))
        return Filter(None, f"no system call filter is defined for {name} (only {known})")
    return Filter(compile_for(arch))
