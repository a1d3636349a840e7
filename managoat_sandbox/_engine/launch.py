"""Starting a box's agent: under bubblewrap (isolated) or as a plain host process.

An isolated sandbox sees, and only sees:

* its own directory ``fs/`` as ``/``, writable (``/tmp``, ``/home/<user>`` and
  anything a command or ``write_file`` creates live there);
* the host's ``/usr`` (and ``/bin``, ``/lib``… as the host has them), a
  chosen set of system files from ``/etc`` (:data:`ETC`), and the Python
  installation that runs the agent, all read-only;
* generated ``/etc/passwd``, ``group``, ``hosts`` and ``hostname``;
* its own ``/proc`` (only its processes), a minimal ``/dev``, a ``/run``
  tmpfs, and the agent's code read-only under ``/run/managoat``;
* a network namespace holding only loopback.

Its processes: ``bwrap`` → the agent (process 1 of the sandbox) → commands,
and beside them a *keeper* (a host process, :mod:`.keeper`: it runs the egress
proxy and lives as long as the agent). Without isolation the agent is started
directly. Either way the agent gets
its state directory, control socket and ready pipe as inherited descriptors,
and an environment holding nothing but ``PATH`` and ``LANG``.

Mount points that bubblewrap needs inside ``fs/`` are checked before each
start: whatever a command left in their place (a symlink where ``/bin`` goes,
a file where ``/proc`` goes) is moved aside to ``<name>.displaced-<hex>``,
so a sandbox can never make its own agent unstartable.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

from . import isolation, process_tree
from .agent_process import write_record
from .errors import EngineError
from .keeper import LOG_LIMIT
from .limits import CHILD_OPEN_FILES
from .mounts import Mount, system_mounts
from .mounts import args as mount_args
from .options import SOCKET
from .records import open_regular
from .settings import DEFAULT_PATH, BoxSettings

ENGINE_DIR = Path(__file__).resolve().parent
AGENT_HOME = "/run/managoat"
LOG = "agent.log"
LAUNCH_LOCK = "launch.lock"
POLICY = "policy.json"
_INFO_LIMIT = 64 * 1024
#: Longest socket path bound or connected by name (sun_path holds 108 bytes).
SUN_PATH = 100
_LAUNCH_ENV = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8"}

#: Run a module of the engine as a top-level package, from the directory given
#: as the first argument: the engine imports nothing outside itself, so the
#: interpreter starts isolated (-I) and without site-packages (-S).
BOOTSTRAP = (
    "import sys; sys.path.append(sys.argv.pop(1)); "
    "from _engine.{module} import main; sys.exit(main(sys.argv[1:]))"
)

#: System files of /etc that commands commonly need, bound read-only where the host has them.
ETC = (
    "alternatives",
    "bash.bashrc",
    "ca-certificates",
    "ca-certificates.conf",
    "crypto-policies",
    "debian_version",
    "gai.conf",
    "host.conf",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "localtime",
    "magic",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "pki",
    "profile",
    "profile.d",
    "protocols",
    "services",
    "ssl",
    "terminfo",
    "timezone",
)
GENERATED_ETC = ("passwd", "group", "hosts", "hostname")
#: An empty file of ``state/etc``, bound over the /proc files of :data:`PROC_MASKED`.
EMPTY = ".empty"
#: /proc files every user may read that tell of the host rather than the sandbox: the
#: keys of the caller's keyring (names and owners), kernel timers and scheduler state.
PROC_MASKED = ("keys", "key-users", "timer_list", "sched_debug")


class _Launched(subprocess.Popen[bytes]):
    """A process started to outlive this one if need be (an agent, its keeper).

    Still running when the interpreter drops it at exit, it is serving its
    sandbox, as designed (sessions outlive the caller): not a leak to warn about.
    One that has ended is reaped, as any ``Popen`` is.
    """

    keeper = False

    def __del__(self) -> None:
        self.poll()


#: What this process started for each box directory (its agent, and its keeper when
#: isolated): polled at every launch so that none stays a zombie, and waited for when
#: its box stops (:func:`reap`), so that none outlives the box as our child.
_launched: dict[Path, list[_Launched]] = {}
_launched_lock = threading.Lock()


def agent_python() -> tuple[str, tuple[str, ...]]:
    """The interpreter that runs the agent, and the host paths it needs inside.

    This process's own interpreter: a version known to run the engine. Its
    installation is bound read-only at the same path unless it is under ``/usr``.
    """
    executable = os.path.realpath(sys.executable)
    prefixes = {os.path.realpath(sys.base_prefix)}
    home = os.path.dirname(os.path.dirname(executable))
    if not any(executable.startswith(p + os.sep) for p in prefixes):
        prefixes.add(home)
    return executable, tuple(sorted(p for p in prefixes if not _under(p, "/usr")))


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top + os.sep)


def mounts(settings: BoxSettings, state: Path, python_paths: tuple[str, ...]) -> list[Mount]:
    """Everything mounted over ``fs/`` in an isolated sandbox, in bubblewrap order.

    The kernel's settings (``/proc/sys``) are read-only whoever the sandbox's user
    is, and the ``/proc`` files of :data:`PROC_MASKED` read as empty files.
    """
    found = system_mounts()
    found += [
        Mount("ro-bind", f"/etc/{name}", f"/etc/{name}")
        for name in ETC
        if os.path.lexists(f"/etc/{name}")
    ]
    found += [Mount("ro-bind", f"/etc/{name}", str(state / "etc" / name)) for name in GENERATED_ETC]
    found += [Mount("proc", "/proc"), Mount("ro-bind", "/proc/sys", "/proc/sys")]
    found += [
        Mount("ro-bind", f"/proc/{name}", str(state / "etc" / EMPTY))
        for name in PROC_MASKED
        if os.path.exists(f"/proc/{name}")
    ]
    found += [Mount("dev", "/dev"), Mount("tmpfs", "/run")]
    found += [Mount("ro-bind", path, path) for path in python_paths]
    return found


def identity_args(settings: BoxSettings, userns_block_fd: int | None) -> list[str]:
    """How bubblewrap makes the sandbox's user.

    An unprivileged caller: bubblewrap maps ``settings.uid`` to the caller and
    forbids further user namespaces. A root caller (``settings.host_uid`` set):
    bubblewrap would map the sandbox user to host root, so it waits on
    ``userns_block_fd`` while :func:`launch` writes a map of its own (the
    namespace's root to host root, so that bubblewrap can reach the paths it
    mounts, and ``settings.uid`` to ``settings.host_uid``), and keeps the three
    capabilities the agent needs to drop to ``settings.uid`` before it does
    anything else; the system call filter forbids new namespaces there.
    """
    if settings.host_uid is None:
        uid = str(settings.uid)
        return ["--uid", uid, "--gid", uid, "--disable-userns"]
    if userns_block_fd is None:
        raise EngineError("a root caller's sandbox needs its user namespace mapped")
    caps = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")
    return [
        "--userns-block-fd",
        str(userns_block_fd),
        *(arg for cap in caps for arg in ("--cap-add", cap)),
    ]


def map_user(pid: int, settings: BoxSettings) -> None:
    """Write the user namespace map of bubblewrap's process ``pid`` (a root caller's
    sandbox, see :func:`identity_args`)."""
    line = f"0 0 1\n{settings.uid} {settings.host_uid} 1\n"
    for name in ("uid_map", "gid_map"):
        fd = os.open(f"/proc/{pid}/{name}", os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def bwrap_command(
    bwrap: str,
    settings: BoxSettings,
    *,
    fs: Path,
    state: Path,
    python: str,
    python_paths: tuple[str, ...],
    seccomp_fd: int | None = None,
    userns_block_fd: int | None = None,
) -> list[str]:
    """The bubblewrap command line that starts the agent inside the sandbox, under the
    system call filter read from ``seccomp_fd`` if given."""
    args = [
        bwrap,
        *isolation.NAMESPACE_FLAGS,
        *identity_args(settings, userns_block_fd),
        *([] if seccomp_fd is None else ["--seccomp", str(seccomp_fd)]),
        "--hostname",
        settings.hostname,
        "--bind",
        str(fs),
        "/",
    ]
    args += mount_args(mounts(settings, state, python_paths))
    args += [
        "--ro-bind",
        str(ENGINE_DIR),
        f"{AGENT_HOME}/_engine",
        "--clearenv",
        "--setenv",
        "PATH",
        DEFAULT_PATH,
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--chdir",
        "/",
        "--",
        python,
        "-I",
        "-S",
        "-c",
        BOOTSTRAP.format(module="agent"),
        AGENT_HOME,
    ]
    return args


def write_generated_etc(state: Path, settings: BoxSettings) -> None:
    """The sandbox's own passwd, group, hosts and hostname (in ``state/etc``)."""
    etc = state / "etc"
    etc.mkdir(mode=0o755, exist_ok=True)
    user, uid, home = settings.user, settings.uid, settings.home
    files = {
        "passwd": f"root:x:0:0:root:/root:/bin/sh\n{user}:x:{uid}:{uid}:{user}:{home}:/bin/bash\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
        "group": f"root:x:0:\n{user}:x:{uid}:\nnogroup:x:65534:\n",
        "hosts": f"127.0.0.1\tlocalhost {settings.hostname}\n::1\tlocalhost ip6-localhost\n",
        "hostname": f"{settings.hostname}\n",
        EMPTY: "",
    }
    for name, text in files.items():
        (etc / name).write_text(text)


# -- keeping mount points startable ------------------------------------------------------


def _displace(dir_fd: int, name: str) -> None:
    os.rename(
        name, f"{name}.displaced-{secrets.token_hex(4)}", src_dir_fd=dir_fd, dst_dir_fd=dir_fd
    )


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None


def _fits(name: str, dir_fd: int, info: os.stat_result, mount: Mount) -> bool:
    node = mount.node()
    if node == "symlink":
        return stat.S_ISLNK(info.st_mode) and os.readlink(name, dir_fd=dir_fd) == mount.source
    if node == "file":
        return stat.S_ISREG(info.st_mode)
    return stat.S_ISDIR(info.st_mode)


def prepare_mount_point(fs_fd: int, mount: Mount, owner: int | None = None) -> None:
    """Make ``mount.dest`` mountable under the root ``fs_fd``: real directories on the
    way (made ``owner``'s, when given, like the rest of the sandbox's files), and either
    nothing or the right kind of node at the end (anything else is moved aside). Never
    follows a symlink."""
    parts = [p for p in mount.dest.split("/") if p]
    fd = os.dup(fs_fd)
    try:
        for part in parts[:-1]:
            info = _lstat(part, fd)
            if info is not None and not stat.S_ISDIR(info.st_mode):
                _displace(fd, part)
                info = None
            if info is None:
                os.mkdir(part, 0o755, dir_fd=fd)
                if owner is not None:
                    os.chown(part, owner, owner, dir_fd=fd, follow_symlinks=False)
            child = os.open(
                part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
            )
            os.close(fd)
            fd = child
        info = _lstat(parts[-1], fd)
        if info is not None and not _fits(parts[-1], fd, info, mount):
            _displace(fd, parts[-1])
    finally:
        os.close(fd)


# -- starting -------------------------------------------------------------------------------


def _open_log(state_fd: int) -> int:
    """The sandbox's log (``state/agent.log``) for its agent, bubblewrap and keeper to
    append to, emptied first once it has grown past :data:`.keeper.LOG_LIMIT`.

    The bound holds while they run too: the keeper — which serves what a command
    sends, and so could be made to write without end — writes through
    :class:`.keeper.BoundedLog`, which stops at the limit; the agent and bubblewrap
    write only when they fail to start or end, a few lines each start.
    """
    fd = os.open(
        LOG,
        os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
        dir_fd=state_fd,
    )
    if os.fstat(fd).st_size > LOG_LIMIT:
        os.ftruncate(fd, 0)
    return fd


def log_tail(state: Path, limit: int = 2000) -> str:
    """The last lines of the agent's log, for an error message."""
    with contextlib.suppress(OSError, EngineError):
        fd = open_regular(state / LOG)
        try:
            size = os.fstat(fd).st_size
            text = os.pread(fd, limit, max(0, size - limit)).decode(errors="replace")
        finally:
            os.close(fd)
        lines = [line for line in text.strip().splitlines() if line.strip()]
        return lines[-1] if lines else ""
    return ""


def _start(
    directory: Path,
    argv: list[str],
    pass_fds: tuple[int, ...],
    log: int,
    *,
    keeper: bool = False,
) -> _Launched:
    """Start a process of the box at ``directory`` (its agent, or its ``keeper``) in a
    session of its own, from ``/``, with the launch environment, output to ``log``;
    tracked."""
    proc = _Launched(
        argv,
        pass_fds=pass_fds,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
        env=_LAUNCH_ENV,
        cwd="/",
    )
    proc.keeper = keeper
    with _launched_lock:
        _launched.setdefault(directory, []).append(proc)
    return proc


_compiled = threading.Event()


def _compile_engine() -> None:
    """Byte-compile the engine's modules once per process, where its directory is
    writable and a module's cached code is missing or stale.

    An isolated agent imports them from a read-only mount, so it can never cache
    what it compiles: without this an editable install or a fresh checkout would
    compile the whole agent at every sandbox start (tens of milliseconds).
    """
    if _compiled.is_set():
        return
    _compiled.set()
    import compileall  # noqa: PLC0415 - once per process, on the first launch

    with contextlib.suppress(OSError):
        compileall.compile_dir(ENGINE_DIR, maxlevels=0, quiet=2)


def _reap_launched() -> None:
    """Reap whatever this process launched that has ended, whichever its box."""
    with _launched_lock:
        for directory, procs in list(_launched.items()):
            procs[:] = [proc for proc in procs if proc.poll() is None]
            if not procs:
                del _launched[directory]


def reap(directory: Path, deadline: float) -> None:
    """End and reap, until ``deadline`` (``time.monotonic()``), the processes this
    process launched for the box at ``directory``; those still running then stay
    tracked (reaped by a later launch's poll).

    Called once the box's agent is gone. Bubblewrap follows its agent by
    itself and is waited for; the keeper, whose work ended with the agent, is
    killed rather than waited for. A box stopped from this process leaves
    no child behind (no zombie, and nothing for ``subprocess`` to warn about at
    exit). Processes another process launched are not this one's to end: their
    keeper ends by itself when it sees the agent gone.
    """
    with _launched_lock:
        procs = _launched.pop(directory, [])
    for proc in procs:
        if proc.keeper:
            with contextlib.suppress(OSError):
                proc.kill()
    left = []
    for proc in procs:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            left.append(proc)
    if left:
        with _launched_lock:
            _launched.setdefault(directory, []).extend(left)


def agent_config(settings: BoxSettings, *, egress_open: bool) -> dict[str, object]:
    """The configuration the agent starts with (``user``: the uid it drops to first, for
    a root caller's sandbox)."""
    limits = settings.limits.to_json()
    if not settings.isolated:
        limits["processes"] = None
    config: dict[str, object] = {
        "namespace": settings.isolated,
        "limits": limits,
        "child_open_files": CHILD_OPEN_FILES if settings.limits.open_files else None,
        "egress": egress_open,
    }
    if settings.host_uid is not None:
        config["user"] = settings.uid
    return config


def check_identity(settings: BoxSettings) -> None:
    """EngineError for an isolated box whose user would be host root (one made by an
    unprivileged caller or by an earlier version, now used by root): never run it."""
    if settings.isolated and settings.host_uid is None and os.geteuid() == 0:
        raise EngineError(
            "this sandbox was not created by root, and started by root its user would be "
            "host root: destroy it and create it again"
        )


def launch(
    directory: Path, settings: BoxSettings, *, deadline: float, egress_open: bool = True
) -> None:
    """Start the box's agent and return once it serves; EngineError naming the reason if not.

    An isolated box's keeper is started as soon as bubblewrap names the agent's
    process, beside it and without waiting for it: it starts small
    (:mod:`.keeper_start`), and connections a command makes to the proxy wait
    in its channel until it serves them. The caller holds the box's launch lock, has made
    sure no agent runs, and has refused a box whose user would be host root
    (:func:`check_identity`).
    """
    _reap_launched()
    _compile_engine()
    state = directory / "state"
    fds = _Descriptors()
    try:
        state_fd = fds.own(
            os.open(state, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        )
        ready_r, ready_w = os.pipe()
        fds.own(ready_r)
        fds.give(ready_w)
        log = fds.own(_open_log(state_fd))
        agent_args = _agent_args(
            settings, state, state_fd=state_fd, ready_w=ready_w, egress_open=egress_open
        )
        python, python_paths = agent_python()
        sandbox: _Sandbox | None = None
        if settings.isolated:
            argv, sandbox = _isolate(
                directory,
                settings,
                python=python,
                python_paths=python_paths,
                agent_args=agent_args,
                fds=fds,
            )
        else:
            argv = [*_host_command(python, "agent"), *agent_args]
        proc = _start(directory, argv, (state_fd, *fds.passed), log)
        fds.close_passed()
        if sandbox is not None:
            pid = _admit(sandbox, proc, settings, state, deadline)
            _start_keeper(
                directory,
                state_fd,
                pid=pid,
                channel=sandbox.channel,
                log=log,
                processes=settings.limits.processes,
            )
        _await_ready(ready_r, proc, state, deadline)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EngineError(f"cannot start the agent: {exc}") from None
    finally:
        fds.close()


class _Descriptors:
    """The descriptors a launch opens: its own (``ours``, closed once the launch ends)
    and those the agent inherits (``passed``, closed here once it has them)."""

    def __init__(self) -> None:
        self.ours: list[int] = []
        self.passed: list[int] = []

    def own(self, fd: int) -> int:
        """Keep ``fd`` until the launch ends; ``fd``."""
        self.ours.append(fd)
        return fd

    def give(self, fd: int) -> int:
        """Pass ``fd`` to the agent's process; ``fd``."""
        self.passed.append(fd)
        return fd

    def close_passed(self) -> None:
        """Close the passed descriptors (the agent's process has its own copies)."""
        while self.passed:
            os.close(self.passed.pop())

    def close(self) -> None:
        """Close every descriptor still open."""
        for fd in (*self.ours, *self.passed):
            os.close(fd)


class _Sandbox(NamedTuple):
    """What an isolated launch needs once bubblewrap runs: the read end of its
    ``--info-fd`` (``info_r``), the pipe that releases it once a root caller's user
    namespace is mapped (``block_w``, else None) and the keeper's end of its channel
    to the agent (``channel``)."""

    info_r: int
    block_w: int | None
    channel: int


def _agent_args(
    settings: BoxSettings, state: Path, *, state_fd: int, ready_w: int, egress_open: bool
) -> list[str]:
    """The agent's own options (:mod:`.agent`): its state directory, ready pipe and
    configuration, and where to bind its control socket when that is reached by name."""
    config = json.dumps(agent_config(settings, egress_open=egress_open))
    agent_args = ["--state", str(state_fd), "--ready", str(ready_w), "--config", config]
    socket_path = state / SOCKET
    if not settings.isolated and len(os.fsencode(socket_path)) < SUN_PATH:
        agent_args += ["--socket", str(socket_path)]
    return agent_args


def _host_command(python: str, module: str) -> list[str]:
    """The command that runs the engine's ``module`` (its ``main``) on the host."""
    return [python, "-I", "-S", "-c", BOOTSTRAP.format(module=module), str(ENGINE_DIR.parent)]


def _isolate(
    directory: Path,
    settings: BoxSettings,
    *,
    python: str,
    python_paths: tuple[str, ...],
    agent_args: list[str],
    fds: _Descriptors,
) -> tuple[list[str], _Sandbox]:
    """The command that starts the agent under bubblewrap, with ``agent_args``, and what
    the launch needs once it runs; the descriptors it makes are added to ``fds``.

    The mount points are made ready first (:func:`prepare_mount_point`).
    EngineError when isolation is unavailable.
    """
    support = isolation.support()
    if not support.available or support.bwrap is None:
        raise EngineError(f"isolation is unavailable: {support.reason}")
    state = directory / "state"
    _prepare(directory / "fs", mounts(settings, state, python_paths), settings.host_uid)
    block_r: int | None = None
    block_w: int | None = None
    if settings.host_uid is not None:
        block_r, block_w = os.pipe()
        fds.own(block_w)
        fds.give(block_r)
    seccomp_fd: int | None = None
    if support.filter is not None:
        seccomp_fd = fds.give(isolation.program_fd(support.filter))
    keeper_sock, agent_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    channel = fds.own(keeper_sock.detach())
    agent_end = fds.give(agent_sock.detach())
    info_r, info_w = os.pipe()
    fds.own(info_r)
    fds.give(info_w)
    command = bwrap_command(
        support.bwrap,
        settings,
        fs=directory / "fs",
        state=state,
        python=python,
        python_paths=python_paths,
        seccomp_fd=seccomp_fd,
        userns_block_fd=block_r,
    )
    argv = [command[0], "--info-fd", str(info_w), *command[1:], *agent_args]
    argv += ["--egress", str(agent_end)]
    return argv, _Sandbox(info_r=info_r, block_w=block_w, channel=channel)


def _admit(
    sandbox: _Sandbox,
    proc: subprocess.Popen[bytes],
    settings: BoxSettings,
    state: Path,
    deadline: float,
) -> int:
    """The host pid of the agent's process, once bubblewrap says which it is.

    A root caller's sandbox has bubblewrap's child (the agent's process) held
    before it does anything: its user namespace is mapped (:func:`map_user`),
    and only then is it released; if that fails, bubblewrap and its child are
    killed.
    """
    pid = _agent_pid(sandbox.info_r, state, deadline)
    if sandbox.block_w is not None:
        try:
            map_user(pid, settings)
        except OSError:
            for target in (pid, proc.pid):
                with contextlib.suppress(OSError):
                    os.kill(target, signal.SIGKILL)
            raise
        os.write(sandbox.block_w, b"1")
    return pid


def _prepare(fs: Path, found: list[Mount], owner: int | None) -> None:
    fs_fd = os.open(fs, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for mount in found:
            prepare_mount_point(fs_fd, mount, owner)
    finally:
        os.close(fs_fd)


def _agent_pid(info_r: int, state: Path, deadline: float) -> int:
    """The host pid of the process bubblewrap starts the agent in (from ``--info-fd``);
    EngineError with the reason from the log when bubblewrap never got that far."""
    try:
        pid = _read_info(info_r, deadline).get("child-pid")
    except EngineError as error:
        tail = log_tail(state)
        raise EngineError(f"the agent failed to start: {tail}" if tail else str(error)) from None
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        raise EngineError("bubblewrap did not say which process runs the agent")
    return pid


def _read_info(fd: int, deadline: float) -> dict[str, object]:
    """bubblewrap's ``--info-fd`` record (the agent's host pid is ``child-pid``)."""
    data = b""
    while len(data) < _INFO_LIMIT and time.monotonic() < deadline:
        readable, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        if not readable:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        with contextlib.suppress(ValueError):
            info = json.loads(data)
            if isinstance(info, dict):
                return info
    raise EngineError("bubblewrap did not say which process runs the agent")


def _start_keeper(
    directory: Path,
    state_fd: int,
    *,
    pid: int,
    channel: int,
    log: int,
    processes: int | None,
) -> None:
    """Record the agent's host pid ``pid`` (``agent.json``) and start the keeper beside it."""
    write_record(state_fd, "agent.json", {"pid": pid, "start": process_tree.start_time(pid)})
    python, _ = agent_python()
    argv = [
        *_host_command(python, "keeper_start"),
        "--state",
        str(state_fd),
        "--egress",
        str(channel),
        "--agent",
        str(pid),
    ]
    if processes is not None:
        argv += ["--processes", str(processes)]
    _start(directory, argv, (state_fd, channel), log, keeper=True)


def _await_ready(ready_r: int, proc: subprocess.Popen[bytes], state: Path, deadline: float) -> None:
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            raise EngineError(
                "the agent did not start in time"
                + (f": {tail}" if (tail := log_tail(state)) else "")
            )
        readable, _, _ = select.select([ready_r], [], [], remaining)
        if readable:
            break
    if os.read(ready_r, 1) != b"R":
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        raise EngineError("the agent failed to start: " + (log_tail(state) or "no reason given"))
