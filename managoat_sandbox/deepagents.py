"""A LangChain Deep Agents sandbox backend over any provider of this library.

:class:`ManagoatSandbox` implements Deep Agents' ``BaseSandbox`` (the
``deepagents`` package, installed by the extra ``managoat-sandbox[deepagents]``)
with the facade, so an agent's shell and file tools run in whatever sandbox a
:class:`~managoat_sandbox.Handle` names — ``local``, Sprites, E2B, Daytona, or
a registered adapter::

    backend = ManagoatSandbox.create("local", "agent-box")
    backend.execute("echo hi; exit 3")   # ExecuteResponse(output="hi\\n", exit_code=3)

What each method maps to:

* ``execute`` is one :func:`managoat_sandbox.exec` of ``<shell> -c <command>``
  with stderr merged into the output (``stderr_to_stdout=True``). A command
  longer than :data:`INLINE_COMMAND_BYTES` is first written to a file in the
  sandbox's ``/tmp`` (:func:`managoat_sandbox.write_file`), which the shell
  reads, deletes, then runs: some providers carry a command in a URL (Sprites
  puts each argument in the exec request's query string), and Deep Agents'
  own file tools send scripts of tens of kilobytes. ``exit_code``
  is the command's own code; it is ``None`` only when no code is known — the
  deadline expired, the output limit was passed, or the library failed — and
  the output then says why. Output is decoded as UTF-8, undecodable bytes
  replaced.
* ``upload_files`` is one :func:`managoat_sandbox.write_file` per file (parent
  directories created, bytes exact); ``download_files`` one
  :func:`managoat_sandbox.read_file` per path (bytes exact, no size limit).
  Both answer per file, in input order, and never raise for a file's failure:
  the library's errors become the protocol's error codes (see
  :func:`file_error`; a directory downloaded is ``"is_directory"``).
* ``id`` is ``"<provider>:<name>"``.
* ``ls``, ``read``, ``write``, ``edit``, ``grep``, ``glob``, ``delete`` and
  the async variants are Deep Agents' own, built on the three above (they run
  ``python3`` and POSIX tools inside the sandbox).

Importing this module without ``deepagents`` installed raises ``ImportError``
naming the extra to install.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

try:
    from deepagents.backends.protocol import (
        ExecuteResponse,
        FileDownloadResponse,
        FileOperationError,
        FileUploadResponse,
    )
    from deepagents.backends.sandbox import BaseSandbox
except ImportError as missing:  # pragma: no cover - depends on the environment
    raise ImportError(
        'managoat_sandbox.deepagents needs Deep Agents: pip install "managoat-sandbox[deepagents]"'
    ) from missing

from . import facade
from .errors import DeadlineExpired, Denied, Invalid, NotFound, SandboxError, Truncated
from .streaming import EXEC_MAX_BYTES
from .types import Handle

__all__ = ["DEFAULT_TIMEOUT", "INLINE_COMMAND_BYTES", "ManagoatSandbox", "file_error"]

#: Seconds a command may run when ``execute`` is given no timeout (30 minutes).
DEFAULT_TIMEOUT = 30 * 60.0

#: The longest command (UTF-8 bytes) ``execute`` passes as an argument; a longer one
#: goes through a file (see the module docstring).
INLINE_COMMAND_BYTES = 2048

#: The shell script that runs a staged command: read the file named by ``$0``,
#: delete it, then run its text as ``-c`` would (the exit code is the command's).
_RUN_STAGED = 'command=$(cat -- "$0") && rm -f -- "$0" && eval "$command"'


def file_error(error: SandboxError) -> FileOperationError | str:
    """The protocol's error for a file operation that raised ``error``.

    ``NotFound`` is ``"file_not_found"``, ``Denied`` ``"permission_denied"``,
    ``Invalid`` ``"invalid_path"`` (a relative path, a ``.`` or ``..``
    component, a directory where a file belongs, a host system path on
    ``local``…). Any other error is ``"<ErrorClass>: <detail>"``, a
    backend-specific string the protocol allows.
    """
    if isinstance(error, NotFound):
        return "file_not_found"
    if isinstance(error, Denied):
        return "permission_denied"
    if isinstance(error, Invalid):
        return "invalid_path"
    return f"{type(error).__name__}: {error}"


class ManagoatSandbox(BaseSandbox):
    """A Deep Agents sandbox backend acting on the sandbox ``handle`` names.

    ``timeout`` is the seconds a command may run when ``execute`` is given
    none (``None``: no limit); ``max_output_bytes`` bounds the output one
    command may produce (``None``: no limit) — past it the command is stopped
    and the response is ``truncated``. ``shell`` runs each command as
    ``<shell> -c <command>`` (``"sh"``: POSIX, in every image; ``"bash"`` for
    bash syntax). ``env`` is added to every command's environment (say a
    ``PATH`` naming a directory of your own tools).

    The backend holds no connection and no lock: one instance may be used from
    many threads, and by the async methods (each runs the blocking call in a
    worker thread). It never destroys the sandbox unless :meth:`destroy` is
    called.
    """

    def __init__(
        self,
        handle: Handle,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        max_output_bytes: int | None = EXEC_MAX_BYTES,
        shell: str = "sh",
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(handle, Handle):
            raise TypeError(f"handle must be a Handle, got {type(handle).__name__}")
        self.handle = handle
        self.timeout = timeout
        self.max_output_bytes = max_output_bytes
        self.shell = shell
        self.env = dict(env) if env is not None else None

    @classmethod
    def create(cls, provider: str, name: str, /, **options: Any) -> ManagoatSandbox:
        """A backend over sandbox ``name`` at ``provider``, created or adopted with
        :func:`managoat_sandbox.create` (its errors propagate).

        ``options`` are this class's keyword arguments (``timeout``,
        ``max_output_bytes``, ``shell``, ``env``); the provider's creation options
        go through :func:`managoat_sandbox.create` and the constructor instead.
        """
        return cls(facade.create(provider, name), **options)

    @property
    def id(self) -> str:
        """``"<provider>:<name>"``: unique among the sandboxes this library reaches."""
        return f"{self.handle.provider}:{self.handle.name}"

    def destroy(self) -> None:
        """Destroy the sandbox (already gone is fine; other errors propagate)."""
        facade.destroy(self.handle)

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        """Run ``command`` through the shell until it exits; never raises for its failure.

        ``timeout`` is seconds (``None``: the instance's ``timeout``; ``0``: no
        limit). The response's ``output`` is stdout and stderr merged,
        ``exit_code`` the real exit code. When the deadline expires, the output
        passes ``max_output_bytes``, or the library fails, ``exit_code`` is
        ``None`` and ``output`` is one ``Error: ...`` line saying which (output
        the command wrote before is not kept); ``truncated`` is ``True`` only for
        the output limit. On expiry the command may go on running remotely.
        """
        seconds = self.timeout if timeout is None else (timeout or None)
        try:
            result = facade.exec(
                self.handle,
                self.shell,
                self._shell_args(command),
                env=self.env,
                timeout=seconds,
                stderr_to_stdout=True,
                max_bytes=self.max_output_bytes,
            )
        except DeadlineExpired:
            return ExecuteResponse(
                output=f"Error: the command did not finish within {seconds:g} seconds "
                "and was abandoned; it may still be running.",
                exit_code=None,
            )
        except Truncated:
            return ExecuteResponse(
                output=f"Error: the command wrote more than {self.max_output_bytes} bytes "
                "of output and was stopped; write large output to a file and read it "
                "in pages.",
                exit_code=None,
                truncated=True,
            )
        except SandboxError as error:
            return ExecuteResponse(
                output=f"Error: the command could not be run: {type(error).__name__}: {error}",
                exit_code=None,
            )
        return ExecuteResponse(
            output=result.output.decode("utf-8", errors="replace"),
            exit_code=result.exit_code,
        )

    def _shell_args(self, command: str) -> list[str]:
        """The shell's arguments that run ``command``: inline, or staged in a file
        when longer than :data:`INLINE_COMMAND_BYTES` (``write_file``'s errors
        propagate)."""
        if len(command.encode("utf-8", errors="surrogatepass")) <= INLINE_COMMAND_BYTES:
            return ["-c", command]
        path = f"/tmp/.managoat-deepagents-{secrets.token_hex(8)}.sh"
        facade.write_file(self.handle, path, command, mode=0o600)
        return ["-c", _RUN_STAGED, path]

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Write each ``(path, content)``: one response per file, in order.

        Parent directories are created; an existing file is replaced. A file's
        failure is its response's ``error`` (:func:`file_error`), never an
        exception, and does not stop the others.
        """
        responses = []
        for path, content in files:
            try:
                facade.write_file(self.handle, path, content)
            except SandboxError as error:
                responses.append(FileUploadResponse(path, file_error(error)))
            else:
                responses.append(FileUploadResponse(path))
        return responses

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Read each path's bytes: one response per path, in order.

        A path's failure is its response's ``error`` (:func:`file_error`) with
        ``content`` ``None``, never an exception, and does not stop the others.
        A path refused as ``Invalid`` that lists as a directory is
        ``"is_directory"`` (providers word that refusal differently; the listing
        is the same everywhere).
        """
        responses = []
        for path in paths:
            try:
                content = facade.read_file(self.handle, path)
            except SandboxError as error:
                code = file_error(error)
                if isinstance(error, Invalid) and self._is_directory(path):
                    code = "is_directory"
                responses.append(FileDownloadResponse(path, None, code))
            else:
                responses.append(FileDownloadResponse(path, content))
        return responses

    def _is_directory(self, path: str) -> bool:
        """Whether ``path`` lists as a directory (any error listing it: no)."""
        try:
            facade.list_files(self.handle, path)
        except SandboxError:
            return False
        return True
