"""The in-sandbox toolbox daemon, reached through ``{toolboxProxyUrl}/{sandboxId}``.

Only the calls the adapter needs: sessions and their async commands, the
command record (``exitCode`` appears once the daemon recorded it), the command
log (requested with ``X-Daytona-Split-Output: true`` so stdout and stderr stay
apart), command input, one-shot execute (for the adapter's own housekeeping,
never for user commands, whose stderr it would merge) and bulk upload.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import attrs

from ..._http import Response
from ...errors import ProviderError
from .api import PROVIDER, Api

__all__ = ["LOG_LIMIT", "LogSnapshot", "Toolbox"]

#: The largest command log read; a longer one fails the stream as ``Unavailable``.
LOG_LIMIT = 64 * 1024 * 1024
SPLIT_OUTPUT = {"X-Daytona-Split-Output": "true"}
_EXECUTE_MARGIN = 5.0


@attrs.frozen
class LogSnapshot:
    """One read of a command's whole log, in whichever shape the daemon answered.

    ``raw`` is the journal (with channel markers, or without them from a
    daemon that strips them); ``split`` is the JSON shape's
    ``(stdout, stderr)`` when the daemon demultiplexed it itself.
    """

    raw: bytes | None = attrs.field(default=None, repr=False)
    split: tuple[bytes, bytes] | None = attrs.field(default=None, repr=False)


def _text(value: Any) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else b""


def parse_logs(response: Response) -> LogSnapshot:
    """A log answer: raw bytes, or JSON ``{output, stdout, stderr}`` (``output`` preferred)."""
    content_type = response.headers.get("Content-Type") or response.headers.get("content-type")
    if content_type and content_type.startswith("application/json"):
        try:
            answer = response.json()
        except Exception:
            answer = None
        if isinstance(answer, Mapping):
            if isinstance(answer.get("output"), str):
                return LogSnapshot(raw=_text(answer["output"]))
            return LogSnapshot(split=(_text(answer.get("stdout")), _text(answer.get("stderr"))))
    return LogSnapshot(raw=response.body)


def command_id_of(answer: Any) -> str:
    """The id of an async exec answer: ``cmdId``, else ``commandId``, else ``id``."""
    if isinstance(answer, Mapping):
        for key in ("cmdId", "commandId", "id"):
            value = answer.get(key)
            if isinstance(value, str) and value:
                return value
    raise ProviderError(PROVIDER, ("no_command_id", answer))


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
        answer = self._call("GET", "/process/session").json()
        if isinstance(answer, Mapping):
            answer = answer.get("sessions")
        if not isinstance(answer, list):
            raise ProviderError(PROVIDER, ("not_a_session_list", answer))
        return answer

    def session(self, session_id: str) -> Mapping[str, Any]:
        """``GET /process/session/{id}``; an unknown session is ``NotFound``."""
        answer = self._call("GET", self._session(session_id)).json()
        if not isinstance(answer, Mapping):
            raise ProviderError(PROVIDER, ("not_a_session", answer))
        return answer

    def exec_async(self, session_id: str, command: str) -> str:
        """Run ``command`` in the session without waiting (202); returns the command id."""
        response = self._call(
            "POST",
            self._session(session_id) + "/exec",
            json={"command": command, "runAsync": True, "suppressInputEcho": True},
        )
        return command_id_of(response.json())

    def command(self, session_id: str, command_id: str) -> Mapping[str, Any]:
        """The command record; ``exitCode`` is absent (or null) while it runs."""
        answer = self._call("GET", self._command(session_id, command_id)).json()
        if not isinstance(answer, Mapping):
            raise ProviderError(PROVIDER, ("not_a_command", answer))
        return answer

    def logs(self, session_id: str, command_id: str, *, read_timeout: float) -> LogSnapshot:
        """The command's whole log from byte zero, channel markers kept."""
        response = self._call(
            "GET",
            self._command(session_id, command_id) + "/logs",
            headers=SPLIT_OUTPUT,
            limit=LOG_LIMIT,
            read_timeout=read_timeout,
        )
        return parse_logs(response)

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
            raise ProviderError(PROVIDER, ("not_an_execute_result", answer))
        code = answer.get("exitCode", answer.get("code"))
        output = answer.get("result", answer.get("output"))
        if isinstance(code, bool) or not isinstance(code, int):
            raise ProviderError(PROVIDER, ("no_exit_code", answer))
        return code, _text(output)

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
