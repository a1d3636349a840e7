"""A fourth adapter, proven by the conformance suite: ``Directory``.

WARNING: ``Directory`` is NOT a sandbox and isolates nothing: its commands are
plain host subprocesses running as you, with your files and network, started in
a temporary directory per "sandbox". It illustrates the adapter API (built on
``StreamingAdapter``, ``Stream`` and ``CommandEnd``); never run untrusted code on it.

It implements only the required operations and advertises no capability, so
the optional ones raise ``NotSupported`` (``Adapter``'s defaults) and the tests
needing them skip. Run the suite: ``python examples/fourth_adapter.py``.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import unittest
import weakref
from collections.abc import Sequence
from contextlib import suppress
from typing import Any

from managoat_sandbox.contract import Owner
from managoat_sandbox.errors import CommandExited, Invalid, NotFound, WriteFailed
from managoat_sandbox.streaming import Deadline, Stream, StreamingAdapter, collect_exec, new_ref
from managoat_sandbox.testing import ConformanceTests
from managoat_sandbox.types import Command, ExecResult, Handle, Info, Session

#: Commands the suite runs: the four required fixtures (shapes: FIXTURE_SHAPES).
FIXTURES: dict[str, tuple[Any, ...]] = {
    "exec_ok": ("bash", ["-c", "echo hello"], "hello"),
    "exec_fail": ("bash", ["-c", "echo oops; exit 3"], 3),
    "spawn_ok": ("bash", ["-c", "echo hello"]),
    "spawn_stay": ("bash", ["-c", "echo ready; cat"]),
}


class DirectoryCommandEnd:
    """One command's local end (a ``CommandEnd``): its ``Stream``, process and stdin."""

    def __init__(self, stream: Stream, process: subprocess.Popen[bytes]) -> None:
        self.stream, self.process = stream, process
        self._wake_r, self._wake_w = os.pipe()  # closing the write end wakes the reader
        self._lock, self._wake_lock = threading.Lock(), threading.Lock()  # stdin's, wake's

    def pump(self, stream: Stream) -> None:
        """The reader thread: stdout and stderr into frames, then the real exit code."""
        out, err = self.process.stdout, self.process.stderr
        assert out is not None and err is not None
        with selectors.DefaultSelector() as selector:
            selector.register(out, selectors.EVENT_READ, stream.stdout)
            selector.register(err, selectors.EVENT_READ, stream.stderr)
            selector.register(self._wake_r, selectors.EVENT_READ, None)
            try:
                # A command ends when its process has exited AND both pipes are at EOF.
                while len(selector.get_map()) > 1 and not stream.stopped.is_set():
                    for key, _ in selector.select():
                        if key.data is None:  # stop_command: leave the process running
                            return
                        chunk = os.read(key.fd, 65536)
                        if chunk:
                            key.data(chunk)
                        else:
                            selector.unregister(key.fileobj)
                code = self.process.wait()
                stream.exit(code if code >= 0 else 128 - code)  # killed by signal N: 128+N
                self.close_stdin_pipe()  # it has ended: nothing more to write
            finally:
                self.wake()
                os.close(self._wake_r)
                out.close()
                err.close()

    def wake(self) -> None:  # Stream.stop's on_stop: interrupt the reader, once
        with self._wake_lock:
            if self._wake_w >= 0:
                os.close(self._wake_w)
                self._wake_w = -1

    def write(self, data: bytes) -> None:
        self.stream.check_writable()  # detached or exited: CommandExited; no stdin: Invalid
        try:
            with self._lock:
                assert self.process.stdin is not None
                self.process.stdin.write(data)
                self.process.stdin.flush()
        except (OSError, ValueError) as error:
            if isinstance(error, BrokenPipeError) or self.stream.finished.is_set():
                raise CommandExited("exited") from None  # the write raced the command's exit
            raise WriteFailed(("transport", type(error).__name__)) from None

    def close_stdin(self) -> None:
        self.stream.check_stdin()
        self.close_stdin_pipe()

    def close_stdin_pipe(self) -> None:  # idempotent, never raises
        with self._lock, suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()

    def stop(self) -> None:
        self.stream.stop()  # calls wake(); nothing is delivered once this returns

    def kill(self) -> None:  # the whole process group: exec past max_bytes, destroy
        with suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)


class Directory(StreamingAdapter):
    """Host subprocesses in a temporary directory per sandbox. NOT isolated."""

    provider = "directory"
    command_type = DirectoryCommandEnd

    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="directory-adapter-")
        weakref.finalize(self, shutil.rmtree, self.root, ignore_errors=True)
        self._lock = threading.Lock()
        self._ends: dict[str, list[DirectoryCommandEnd]] = {}  # commands by sandbox name

    def _path(self, name: str, inner: str = "/") -> str:
        """The host path of ``inner`` (absolute, as the command sees it) in sandbox ``name``."""
        if not name or "/" in name or name in (".", ".."):
            raise Invalid(("name", name))
        base = os.path.join(self.root, name)
        path = os.path.normpath(os.path.join(base, inner.lstrip("/")))
        if path != base and not path.startswith(base + os.sep):
            raise Invalid(("path", inner))
        return path

    def capabilities(self) -> frozenset[str]:
        return frozenset()

    def build_handle(self, name: str) -> Handle:
        return Handle(self.provider, name)

    def create(self, name: str, **opts: Any) -> Handle:
        os.makedirs(self._path(name), exist_ok=True)  # an existing sandbox is adopted
        return self.build_handle(name)

    def get(self, handle: Handle) -> Info:
        if not os.path.isdir(self._path(handle.name)):
            raise NotFound(("sandbox", handle.name))
        return Info("running", raw={"path": self._path(handle.name)})

    def destroy(self, handle: Handle) -> None:
        with self._lock:
            ends = self._ends.pop(handle.name, [])
        for end in ends:  # every process it started, detached or not
            end.kill()
            end.stop()
            end.process.wait()
            end.close_stdin_pipe()
        shutil.rmtree(self._path(handle.name), ignore_errors=True)

    def list_all_names(self) -> frozenset[str]:
        return frozenset(os.listdir(self.root))

    def write_file(
        self, handle: Handle, path: str, data: bytes, *, mode: int | None = None
    ) -> None:
        target = self._path(handle.name, path)
        self.get(handle)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as file:
            file.write(data)
        if mode is not None:
            os.chmod(target, mode)

    def exec(
        self,
        handle: Handle,
        cmd: str,
        args: Sequence[str] = (),
        *,
        env: dict[str, str] | None = None,
        dir: str | None = None,
        timeout: float | None = None,
        stderr_to_stdout: bool = False,
        max_bytes: int | None = None,
    ) -> ExecResult:
        return collect_exec(  # one deadline, checked before anything runs
            lambda sink: self.spawn(handle, cmd, args, owner=sink, env=env, dir=dir),
            self.stop_command,
            deadline=Deadline(timeout),
            stderr_to_stdout=stderr_to_stdout,
            max_bytes=max_bytes,
            kill=lambda command: command.private.kill(),
        )

    def spawn(
        self,
        handle: Handle,
        cmd: str,
        args: Sequence[str] = (),
        *,
        owner: Owner | None = None,
        env: dict[str, str] | None = None,
        dir: str | None = None,
        stdin: bool = False,
        tty: bool = False,
        detachable: bool = False,
    ) -> Command:
        self.get(handle)  # (tty and detachable need capabilities: the facade refuses them)
        cwd = self._path(handle.name, dir or "/")
        if not os.path.isdir(cwd):
            raise Invalid(("dir", dir))
        home = self._path(handle.name)
        try:
            process = subprocess.Popen(
                [cmd, *args],
                cwd=cwd,
                env={"PATH": os.environ.get("PATH", os.defpath), "HOME": home, **(env or {})},
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group, killed by destroy
            )
        except OSError as error:
            raise Invalid(("command", cmd, type(error).__name__)) from None
        stream = Stream(new_ref(self.provider), owner, label=self.provider, stdin=stdin)
        end = DirectoryCommandEnd(stream, process)
        with self._lock:
            self._ends.setdefault(handle.name, []).append(end)
        stream.start(end.pump, on_stop=end.wake)
        return Command(self.provider, stream.ref, frames=stream.frames, private=end)

    def list_sessions(self, handle: Handle) -> list[Session]:
        self.get(handle)
        with self._lock:
            ends = list(self._ends.get(handle.name, []))
        codes = [(str(end.stream.ref), end.process.poll()) for end in ends]
        return [Session(ref, ended=code is not None, exit_code=code) for ref, code in codes]


class DirectoryConformanceTest(ConformanceTests, unittest.TestCase):
    """The shipped conformance suite, run against ``Directory``."""

    adapter = Directory
    fixtures = FIXTURES
    frame_timeout = 5.0  # seconds per frame wait: generous on a busy machine


if __name__ == "__main__":
    unittest.main()
