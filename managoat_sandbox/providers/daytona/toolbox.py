"""The in-sandbox toolbox daemon, reached through ``{toolboxProxyUrl}/{sandboxId}``.

Only the calls the adapter needs: sessions; commands run in them
synchronously (the answer carries the journal and the exit code) or
asynchronously (the answer carries the command id); the command record; the
command log, followed over a WebSocket (:mod:`.follow`) or read whole as a
snapshot, streamed, never held whole; command input; one-shot execute (for
the adapter's own housekeeping, never for user commands, whose stderr it
would merge), bulk upload, bulk download (streamed) and the directory
listing. Every request for a journal carries ``X-Daytona-Split-Output: true``
so that stdout and stderr stay apart; the JSON shapes of SDK-versioned
daemons are accepted too.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import attrs

from ..._http import Response, body_chunks, set_read_timeout
from ..._multipart import StreamedForm
from ...errors import ProviderError, Truncated, Unavailable
from ...reasons import Reason
from .api import Api
from .follow import LogSocket
from .settings import PROVIDER, auth_headers

if TYPE_CHECKING:
    import requests

__all__ = [
    "LISTING_LIMIT",
    "RECORD_LIMIT",
    "ExecAnswer",
    "LogBody",
    "Toolbox",
    "command_id_of",
    "listed_command_id",
]

SPLIT_OUTPUT = {"X-Daytona-Split-Output": "true"}
#: The most bytes read of a session or command record. Records echo the text of the
#: commands run (an exec session's, of every exec it kept running: see
#: :data:`.exec.ECHO_BUDGET`; a command's text is at most :data:`.shim.COMMAND_LIMIT`).
RECORD_LIMIT = 1024 * 1024
#: The most bytes read of the session listing (every session's record).
LISTING_LIMIT = 16 * 1024 * 1024
_EXECUTE_MARGIN = 5.0
_CHUNK = 64 * 1024


def _text(value: Any) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else b""


def _journal_of(answer: Mapping[str, Any]) -> tuple[bytes | None, tuple[bytes, bytes] | None]:
    """A log or sync-exec JSON answer as ``(journal, None)`` — ``output``, the journal
    with its markers — or, without a usable ``output``, ``(None, (stdout, stderr))``."""
    if isinstance(answer.get("output"), str) and (
        "\x01" in answer["output"]
        or "\x02" in answer["output"]
        or not isinstance(answer.get("stdout"), str)
    ):
        return _text(answer["output"]), None
    return None, (_text(answer.get("stdout")), _text(answer.get("stderr")))


@attrs.frozen
class LogBody:
    """A log read: ``chunks`` of the journal from byte zero, or — from a daemon that
    answered JSON — its channels already ``split`` as ``(stdout, stderr)``."""

    chunks: Iterator[bytes] | None = attrs.field(default=None, repr=False)
    split: tuple[bytes, bytes] | None = attrs.field(default=None, repr=False)


@attrs.frozen
class ExecAnswer:
    """A synchronous exec's answer: the command id, the recorded exit code, and the
    journal (``raw``, markers kept) or its channels (``split``)."""

    command_id: str | None
    exit_code: int | None
    raw: bytes | None = attrs.field(default=None, repr=False)
    split: tuple[bytes, bytes] | None = attrs.field(default=None, repr=False)


def command_id_of(answer: Any) -> str:
    """The id of an async exec answer: ``cmdId``, else ``commandId``, else ``id``."""
    if isinstance(answer, Mapping):
        for key in ("cmdId", "commandId", "id"):
            value = answer.get(key)
            if isinstance(value, str) and value:
                return value
    raise ProviderError(PROVIDER, Reason.NO_COMMAND_ID, answer=type(answer).__name__)


def listed_command_id(entry: object) -> str | None:
    """The id of a command as its session lists it: ``id``, else ``cmdId``; else None."""
    if isinstance(entry, Mapping):
        for key in ("id", "cmdId"):
            value = entry.get(key)
            if isinstance(value, str) and value:
                return value
    return None


def _is_json(response: requests.Response) -> bool:
    return (response.headers.get("Content-Type") or "").startswith("application/json")


class Toolbox:
    """One sandbox's toolbox; ``base`` is ``{toolboxProxyUrl}/{sandboxId}``."""

    def __init__(self, api: Api, base: str) -> None:
        self.api = api
        self.base = base.rstrip("/")

    def _call(self, method: str, path: str, **kwargs: Any) -> Response:
        kwargs.setdefault("read_timeout", self.api.timeouts.toolbox)
        return self.api.call(method, self.base + path, **kwargs)

    @staticmethod
    def _session(session_id: str) -> str:
        return "/process/session/" + quote(session_id, safe="")

    def _command(self, session_id: str, command_id: str) -> str:
        return self._session(session_id) + "/command/" + quote(command_id, safe="")

    # -- sessions -----------------------------------------------------------

    def create_session(self, session_id: str) -> None:
        """``POST /process/session`` (201)."""
        self._call("POST", "/process/session", json={"sessionId": session_id})

    def delete_session(self, session_id: str, *, read_timeout: float | None = None) -> None:
        """``DELETE /process/session/{id}`` (204): the daemon kills the session's process group
        (TERM, a grace period, KILL) before it answers."""
        timeout = self.api.timeouts.toolbox if read_timeout is None else read_timeout
        self._call("DELETE", self._session(session_id), read_timeout=timeout)

    def sessions(self) -> list[Any]:
        """``GET /process/session``: a bare list (or ``{"sessions": [...]}``)."""
        try:
            answer = self._call("GET", "/process/session", limit=LISTING_LIMIT).json()
        except Unavailable as error:
            if error.reason is Reason.RESPONSE_TOO_LARGE:
                raise Truncated(
                    Reason.LISTING_BYTES,
                    limit=LISTING_LIMIT,
                    message=f"the session listing is larger than {LISTING_LIMIT} bytes",
                ) from None
            raise
        if isinstance(answer, Mapping):
            answer = answer.get("sessions")
        if not isinstance(answer, list):
            raise ProviderError(PROVIDER, Reason.NOT_A_SESSION_LIST, answer=type(answer).__name__)
        return answer

    def session(self, session_id: str) -> Mapping[str, Any]:
        """``GET /process/session/{id}``; an unknown session is ``NotFound``."""
        answer = self._call("GET", self._session(session_id), limit=RECORD_LIMIT).json()
        if not isinstance(answer, Mapping):
            raise ProviderError(PROVIDER, Reason.NOT_A_SESSION, answer=type(answer).__name__)
        return answer

    def exec_async(self, session_id: str, command: str) -> str:
        """Run ``command`` in the session without waiting (202); returns the command id."""
        response = self._call(
            "POST",
            self._session(session_id) + "/exec",
            json={"command": command, "runAsync": True, "suppressInputEcho": True},
        )
        return command_id_of(response.json())

    def exec_sync(
        self,
        session_id: str,
        command: str,
        *,
        wait: float,
        check: Callable[[], float],
        limit: int | None = None,
    ) -> ExecAnswer:
        """Run ``command`` in the session and wait for its end (200).

        The answer must start within ``wait`` seconds (else ``Unavailable("timeout")``);
        ``check()`` runs before each read of the body, raises to abandon it, and
        returns how long the next read may take. An answer of more than ``limit``
        bytes is abandoned as it arrives: ``Unavailable(("response_too_large", limit))``.
        """
        with self.api.stream(
            "POST",
            self.base + self._session(session_id) + "/exec",
            read_timeout=wait,
            headers=SPLIT_OUTPUT,
            json={"command": command, "runAsync": False},
        ) as response:
            chunks: list[bytes] = []
            size = 0
            for chunk in body_chunks(
                response, size=_CHUNK, before_read=lambda: set_read_timeout(response, check())
            ):
                size += len(chunk)
                if limit is not None and size > limit:
                    raise Unavailable(Reason.RESPONSE_TOO_LARGE, limit=limit)
                chunks.append(chunk)
            body = b"".join(chunks)
            del chunks
        try:
            answer = json.loads(body)
        except ValueError:
            raise Unavailable(Reason.MALFORMED_JSON, status=response.status_code) from None
        if not isinstance(answer, Mapping):
            raise ProviderError(PROVIDER, Reason.NOT_AN_EXEC_RESULT, answer=type(answer).__name__)
        code = answer.get("exitCode")
        command_id = answer.get("cmdId")
        raw, split = _journal_of(answer)
        return ExecAnswer(
            command_id if isinstance(command_id, str) else None,
            code if isinstance(code, int) and not isinstance(code, bool) else None,
            raw,
            split,
        )

    def command(self, session_id: str, command_id: str) -> Mapping[str, Any]:
        """The command record; ``exitCode`` is absent (or null) while it runs."""
        answer = self._call("GET", self._command(session_id, command_id), limit=RECORD_LIMIT).json()
        if not isinstance(answer, Mapping):
            raise ProviderError(PROVIDER, Reason.NOT_A_COMMAND, answer=type(answer).__name__)
        return answer

    def follow(self, session_id: str, command_id: str) -> LogSocket:
        """Open the WebSocket follow of the command's log (replayed from byte zero)."""
        scheme, rest = self.base.split("://", 1)
        url = ("wss" if scheme == "https" else "ws") + "://" + rest
        return LogSocket.open(
            url + self._command(session_id, command_id) + "/logs?follow=true",
            auth_headers(SPLIT_OUTPUT),
            timeout=self.api.timeouts.connect,
            transport=self.api.http.transport,
        )

    @contextmanager
    def log(self, session_id: str, command_id: str, *, read_timeout: float) -> Iterator[LogBody]:
        """A snapshot of the command's whole log, from byte zero, streamed as it is read."""
        with self.api.stream(
            "GET",
            self.base + self._command(session_id, command_id) + "/logs",
            read_timeout=read_timeout,
            headers=SPLIT_OUTPUT,
        ) as response:
            if not _is_json(response):
                yield LogBody(chunks=body_chunks(response, size=_CHUNK))
                return
            body = b"".join(body_chunks(response, size=_CHUNK))
            try:
                answer = json.loads(body)
            except ValueError:
                answer = None
            if not isinstance(answer, Mapping):
                yield LogBody(chunks=iter((body,)))
                return
            raw, split = _journal_of(answer)
            yield LogBody(chunks=iter((raw,)) if raw is not None else None, split=split)

    def send_input(self, session_id: str, command_id: str, data: str) -> None:
        """``POST …/input`` (204); a finished command is 410."""
        self._call("POST", self._command(session_id, command_id) + "/input", json={"data": data})

    # -- one-shot execute and files -----------------------------------------

    def execute(self, command: str, *, timeout: int = 15) -> tuple[int, bytes]:
        """``POST /process/execute``: ``(exitCode, merged output)`` of a housekeeping command."""
        response = self._call(
            "POST",
            "/process/execute",
            json={"command": command, "timeout": timeout},
            read_timeout=timeout + _EXECUTE_MARGIN,
        )
        answer = response.json()
        if not isinstance(answer, Mapping):
            raise ProviderError(
                PROVIDER, Reason.NOT_AN_EXECUTE_RESULT, answer=type(answer).__name__
            )
        code = answer.get("exitCode", answer.get("code"))
        output = answer.get("result", answer.get("output"))
        if isinstance(code, bool) or not isinstance(code, int):
            raise ProviderError(PROVIDER, Reason.NO_EXIT_CODE, answer=type(answer).__name__)
        return code, _text(output)

    @contextmanager
    def download(self, path: str) -> Iterator[tuple[str | None, Iterator[bytes]]]:
        """``POST /files/bulk-download {"paths": [path]}``: the answer's Content-Type and
        its multipart body (one part for the file, or an error part), streamed as read."""
        with self.api.stream(
            "POST",
            self.base + "/files/bulk-download",
            read_timeout=self.api.timeouts.toolbox,
            headers={"Accept": "multipart/form-data"},
            json={"paths": [path]},
        ) as response:
            yield response.headers.get("Content-Type"), body_chunks(response, size=_CHUNK)

    def list_files(self, path: str) -> Any:
        """``GET /files?path=``: the directory's entries (a JSON list of FileInfo)."""
        return self._call("GET", "/files", params={"path": path}, limit=LISTING_LIMIT).json()

    def upload_stream(self, path: str, chunks: Iterable[bytes]) -> None:
        """``POST /files/bulk-upload`` of one file whose bytes are ``chunks``, sent as they
        come (chunked transfer encoding; memory does not grow with the file). ``path``
        must be plain text (:mod:`managoat_sandbox._multipart`): the adapter's own
        staging paths."""
        name = posixpath.basename(path) or "file"
        form = StreamedForm((("files[0].path", path),), "files[0].file", name, chunks)
        self._call(
            "POST",
            "/files/bulk-upload",
            data=form,
            headers={"Content-Type": form.content_type},
        )

    def upload(self, path: str, data: bytes) -> None:
        """``POST /files/bulk-upload`` of one file (the daemon creates parent directories)."""
        name = posixpath.basename(path) or "file"
        self._call(
            "POST",
            "/files/bulk-upload",
            files=[
                ("files[0].path", (None, path)),
                ("files[0].file", (name, data, "application/octet-stream")),
            ],
        )
