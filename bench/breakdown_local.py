"""Where a local sandbox's life goes, step by step: ``python bench/breakdown.py --only local``.

The table's reference is one ``bwrap`` run with the sandbox's namespaces and
the system mounts, running ``true``. Each step below adds one thing a sandbox
needs, in alternating rounds, so that the difference of two medians is what
that one thing costs:

1. that reference;
2. bubblewrap with the sandbox's whole command line — every mount (the chosen
   ``/etc`` files, the generated ones, ``/proc`` with its masks, the
   interpreter's installation, the engine) and the system call filter — still
   running ``true``;
3. the same, running the agent's interpreter with nothing to do
   (``python -I -S -c pass``);
4. the same, importing the agent's modules (what its start loads);
5. our ``create`` (directories and records, bubblewrap, the agent until it
   serves, its keeper started beside it);
6. a sandbox's whole life: ``create``, one ``exec``, ``destroy``.

Steps 2-4 start bubblewrap as the launch does for the caller running the
benchmark: for root, held until the user namespace is mapped.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from local_sandbox import agent_pid, bwrap_true, directory_of, first_frame, local_root
from measure import WAIT, elapsed, rotated, scratch

import managoat_sandbox as sandbox
from managoat_sandbox import Handle, config
from managoat_sandbox._engine import isolation, launch
from managoat_sandbox._engine.box import Box

Step = tuple[str, Callable[[], object]]
Runner = Callable[[list[str]], Callable[[], object]]


@contextmanager
def a_sandbox() -> Iterator[Runner]:
    """What runs a program under the command line a live sandbox's agent was started
    with (the same ``fs/``, mounts and system call filter; for a root caller, the same
    held start while the launch maps the user namespace)."""
    with local_root():
        handle = sandbox.create("local", "breakdown")
        try:
            yield functools.partial(_running, directory_of(handle))
        finally:
            sandbox.destroy(handle)


def _running(directory: Path, program: list[str]) -> Callable[[], object]:
    settings = Box.open(directory).settings
    support = isolation.support()
    python, python_paths = launch.agent_python()
    held = settings.host_uid is not None

    def run() -> object:
        owned: list[int] = []
        passed: list[int] = []
        try:
            block_r = block_w = None
            if held:
                block_r, block_w = os.pipe()
                owned.append(block_w)
                passed.append(block_r)
            info_r, info_w = os.pipe()
            owned.append(info_r)
            passed.append(info_w)
            seccomp = None
            if support.filter is not None:
                seccomp = isolation.program_fd(support.filter)
                passed.append(seccomp)
            command = launch.bwrap_command(
                support.bwrap or "bwrap",
                settings,
                fs=directory / "fs",
                state=directory / "state",
                python=python,
                python_paths=python_paths,
                seccomp_fd=seccomp,
                userns_block_fd=block_r,
            )
            argv = [command[0], "--info-fd", str(info_w), *command[1 : command.index("--") + 1]]
            proc = subprocess.Popen([*argv, *program], pass_fds=passed)
            while passed:
                os.close(passed.pop())
            if block_w is not None:
                info = launch._read_info(info_r, time.monotonic() + WAIT)
                launch.map_user(int(str(info["child-pid"])), settings)
                os.write(block_w, b"1")
            if proc.wait(WAIT) != 0:
                raise RuntimeError(f"{program[0]} under bubblewrap exited {proc.returncode}")
            return proc
        finally:
            for fd in (*owned, *passed):
                os.close(fd)

    return run


@contextmanager
def steps() -> Iterator[list[Step]]:
    """The steps of the module docstring, ready to be timed."""
    reference = bwrap_true()
    if reference is None:
        raise SystemExit("local isolation is unavailable here: nothing to break down")
    python, _ = launch.agent_python()
    imports = launch.BOOTSTRAP.replace("sys.exit(main(sys.argv[1:]))", "").format(module="agent")
    made = itertools.count()
    handles: list[Handle] = []

    def create() -> None:
        handles.append(sandbox.create("local", f"breakdown-{next(made)}"))

    def life() -> None:
        handle = sandbox.create("local", f"breakdown-{next(made)}")
        try:
            sandbox.exec(handle, "true", timeout=WAIT)
        finally:
            sandbox.destroy(handle)

    with a_sandbox() as running:
        try:
            yield [
                (
                    "bwrap alone, same namespaces, true (the reference)",
                    lambda: subprocess.run(reference, check=True),
                ),
                ("+ the sandbox's mounts and filter, true", running(["true"])),
                (
                    "+ the agent's interpreter (python -I -S -c pass)",
                    running([python, "-I", "-S", "-c", "pass"]),
                ),
                (
                    "+ the agent's imports",
                    running([python, "-I", "-S", "-c", imports, launch.AGENT_HOME]),
                ),
                ("our create (agent serving, keeper started)", create),
                ("create + exec true + destroy", life),
            ]
        finally:
            for handle in handles:
                sandbox.destroy(handle)


def exec_costs(count: int) -> list[tuple[str, float]]:
    """Seconds per ``exec true`` and per ``subprocess.run(["true"])``, each ``count``
    times in a row: the wall time, this process's CPU time, and for ours the agent's
    CPU time (read from ``/proc``, so counted in clock ticks: hence the many calls)."""
    with local_root():
        handle = sandbox.create("local", "breakdown-exec")
        try:
            pid = agent_pid(handle)
            for _ in range(count // 10):
                sandbox.exec(handle, "true", timeout=WAIT)
            ours = _costs(lambda: sandbox.exec(handle, "true", timeout=WAIT), count, pid)
            theirs = _costs(lambda: subprocess.run(["true"], check=True), count, None)
            box = Box.open(directory_of(handle))
            hello = _costs(lambda: box.request({"op": "hello"}), count, None)
        finally:
            sandbox.destroy(handle)
    return [
        ("subprocess.run: wall time", theirs[0]),
        ("subprocess.run: this process's CPU", theirs[1]),
        ("our exec: wall time", ours[0]),
        ("our exec: this process's CPU", ours[1]),
        ("our exec: the agent's CPU (its fork included)", ours[2]),
        ("a request answered at once by the agent (hello): wall time", hello[0]),
    ]


#: Where a sandbox's files cost no disk at all, to tell the disk's share apart.
TMPFS = Path("/dev/shm")


def first_frame_places(rounds: int) -> list[tuple[str, float]]:
    """Median seconds of one spawn -> first stdout with the local root on the disk
    users' sandboxes live on (as in the table, which takes the mean of a batch) and
    on tmpfs, and of the files a spawn makes before it answers (its session's
    directory, ``spec.json`` written and renamed, the journal) in each place."""
    if not TMPFS.is_dir():
        raise SystemExit(f"no {TMPFS} here: nothing to compare the disk with")
    places = [("on this disk", scratch), ("on tmpfs", _tmpfs)]
    with contextlib.ExitStack() as stack:
        steps: list[Step] = []
        for name, place in places:
            root = stack.enter_context(place())
            with config.override("local", root=str(root)):
                handle = sandbox.create("local", "breakdown-first")
            stack.callback(sandbox.destroy, handle)
            steps.append(
                (f"spawn -> first stdout, root {name}", functools.partial(first_frame, handle))
            )
            steps.append((f"a spawn's session files, {name}", _session_files(root)))
        samples = rotated([elapsed(call) for _, call in steps], rounds)
    return [
        (name, statistics.median(taken)) for (name, _), taken in zip(steps, samples, strict=True)
    ]


@contextmanager
def _tmpfs() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(dir=TMPFS) as found:
        yield Path(found)


def _session_files(root: Path) -> Callable[[], object]:
    """What a spawn writes before it answers, done by hand under ``root`` (left there:
    the scratch directory goes at the end)."""
    made = itertools.count()
    spec = json.dumps({"argv": ["echo", "x"], "cwd": "/root", "tty": False}).encode()
    base = root / "session-files"
    base.mkdir()

    def write() -> None:
        directory = base / str(next(made))
        directory.mkdir(mode=0o700)
        fd = os.open(directory / "spec.json.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, spec)
        os.close(fd)
        os.replace(directory / "spec.json.tmp", directory / "spec.json")
        os.close(os.open(directory / "journal", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))

    return write


def _costs(call: Callable[[], object], count: int, agent: int | None) -> tuple[float, ...]:
    ticks = os.sysconf("SC_CLK_TCK")
    agent_before = 0 if agent is None else _cpu_ticks(agent)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(count):
        call()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    agent_cpu = 0.0 if agent is None else (_cpu_ticks(agent) - agent_before) / ticks
    return wall / count, cpu / count, agent_cpu / count


def _cpu_ticks(pid: int) -> int:
    """User plus system clock ticks process ``pid`` has run for."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])
