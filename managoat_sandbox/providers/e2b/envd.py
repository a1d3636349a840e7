"""envd, the daemon inside each sandbox: Connect RPCs over HTTP/1.1 and the files API.

Every request goes to :attr:`Envd.base_url` (``sandbox_url`` when configured,
else ``https://49983-<id>.<domain>``) and carries ``E2b-Sandbox-Id`` and
``E2b-Sandbox-Port`` (the edge proxy's header routing, harmless elsewhere),
the sandbox's ``X-Access-Token``, ``Authorization: Basic <user:>`` selecting
the Linux user, and ``Keepalive-Ping-Interval``. Unary calls are JSON in, JSON
out; streaming calls send one envelope and read envelopes back (see
:mod:`.connect`). No gRPC, no protobuf: plain ``requests``/``urllib3``.

Files: ``POST /files`` (multipart part ``file``) writes, ``GET /files`` reads,
both with ``path`` and ``username`` query parameters; a read is streamed (its
``Content-Length``, under ``Accept-Encoding: identity``, is the file's size),
404 when nothing is there, 400 for a directory. A listing is the unary
``filesystem.Filesystem/ListDir`` with ``{"path", "depth": 1}``
(:mod:`.files`).

Every call goes through the shared :meth:`~.._http.HttpClient.send` /
:meth:`~.._http.HttpClient.open` with E2B's :data:`.errors.POLICY`, and a
stream's body is read by the shared :func:`~.._http.body_chunks` /
:func:`~.._http.raw_chunks`, which map its failures: only the URL, the headers
and which statuses count as success are envd's own.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

import attrs

from ..._http import ErrorPolicy, HttpClient, body_chunks, is_success, raw_chunks
from ..._multipart import StreamedForm
from ...files import collect
from . import connect
from .errors import POLICY, files_policy
from .settings import ENVD_PORT

if TYPE_CHECKING:
    import requests

__all__ = [
    "KEEPALIVE_SECONDS",
    "Envd",
    "read_chunks",
    "start_request",
]

#: Seconds of silence after which envd sends a keepalive event on a stream.
KEEPALIVE_SECONDS = 50
_READ_SIZE = 64 * 1024
STREAM_TYPE = "application/connect+json"


@attrs.frozen
class Envd:
    """One sandbox's envd and how to call it; ``token`` never appears in ``repr``."""

    base_url: str
    sandbox_id: str
    token: str | None = attrs.field(repr=False)
    user: str
    timeout: float

    def headers(self, content_type: str | None = None) -> dict[str, str]:
        """The headers every envd request carries (plus ``Content-Type`` if given)."""
        headers = {
            "E2b-Sandbox-Id": self.sandbox_id,
            "E2b-Sandbox-Port": _PORT,
            "Authorization": _basic(self.user),
            "Keepalive-Ping-Interval": _KEEPALIVE,
        }
        if self.token:
            headers["X-Access-Token"] = self.token
        if content_type:
            headers["Content-Type"] = content_type
            headers["Connect-Protocol-Version"] = "1"
        return headers

    # -- unary RPCs ---------------------------------------------------------

    def call(
        self,
        http: HttpClient,
        method: str,
        body: Mapping[str, Any],
        *,
        service: str = "process.Process",
        policy: ErrorPolicy = POLICY,
    ) -> Any:
        """A unary call of ``service`` (``process.Process`` unless given); its JSON answer,
        or the error ``policy`` maps it to."""
        response = http.send(
            "POST",
            f"{self.base_url}/{service}/{method}",
            policy=policy,
            timeout=(self.timeout, self.timeout),
            headers=self.headers("application/json"),
            data=json.dumps(body, separators=(",", ":")).encode("utf-8"),
            accept=_only_200,
        )
        return response.json() if response.body.strip() else {}

    # -- streaming RPCs -----------------------------------------------------

    def stream(
        self,
        http: HttpClient,
        method: str,
        request: Mapping[str, Any],
        *,
        read_timeout: float,
        extra_headers: Mapping[str, str] | None = None,
    ) -> AbstractContextManager[requests.Response]:
        """An open server stream (``Start``/``Connect``) answered 200, as a context
        manager that closes it on exit (:meth:`~..._http.HttpClient.open`).

        A non-200 answer (the proxy's 502, a 415…) is raised as its taxonomy
        error after reading its bounded body.
        """
        headers = {
            **self.headers(STREAM_TYPE),
            "Accept-Encoding": "identity",
            **(extra_headers or {}),
        }
        return http.open(
            "POST",
            f"{self.base_url}/process.Process/{method}",
            policy=POLICY,
            timeout=(self.timeout, read_timeout),
            headers=headers,
            data=connect.encode(request),
            accept=_only_200,
        )

    # -- files --------------------------------------------------------------

    def upload(self, http: HttpClient, path: str, data: bytes) -> None:
        """``POST /files``: write ``data`` at ``path`` (parents created) as the user; a
        refusal is its taxonomy error (:func:`.errors.files_policy`: a path the user may
        not write ``Denied(("path", path))``)."""
        name = path.rsplit("/", 1)[-1]
        http.send(
            "POST",
            f"{self.base_url}/files",
            policy=files_policy(path),
            timeout=(self.timeout, self.timeout),
            headers=self.headers(),
            params=[("path", path), ("username", self.user)],
            files={"file": (name, data, "application/octet-stream")},
        )

    def upload_stream(self, http: HttpClient, path: str, chunks: Iterable[bytes]) -> None:
        """``POST /files`` of ``chunks`` as they come (chunked transfer encoding), for a
        staged transfer's archive; ``path`` must be plain text
        (:mod:`managoat_sandbox._multipart`). Refused as :meth:`upload` is."""
        form = StreamedForm((), "file", path.rsplit("/", 1)[-1] or "file", chunks)
        http.send(
            "POST",
            f"{self.base_url}/files",
            policy=files_policy(path),
            timeout=(self.timeout, self.timeout),
            headers={**self.headers(), "Content-Type": form.content_type},
            params=[("path", path), ("username", self.user)],
            data=form,
        )

    @contextmanager
    def _file(self, http: HttpClient, path: str) -> Iterator[requests.Response]:
        """``GET /files``, open, with ``Accept-Encoding: identity`` (so the length announced
        is the file's); a non-200 answer is :func:`.errors.files_policy`'s error."""
        headers = {**self.headers(), "Accept-Encoding": "identity"}
        with http.open(
            "GET",
            f"{self.base_url}/files",
            policy=files_policy(path),
            timeout=(self.timeout, self.timeout),
            headers=headers,
            params=[("path", path), ("username", self.user)],
            accept=_only_200,
        ) as response:
            yield response

    @contextmanager
    def file_stream(self, http: HttpClient, path: str) -> Iterator[Iterator[bytes]]:
        """``GET /files``, its body as it arrives (refused as :meth:`read` is)."""
        with self._file(http, path) as response:
            yield body_chunks(response, size=_READ_SIZE)

    def download(self, http: HttpClient, path: str, limit: int) -> bytes | None:
        """``GET /files``: the file's bytes (at most ``limit``), or ``None`` if it is missing."""
        response = http.send(
            "GET",
            f"{self.base_url}/files",
            policy=POLICY,
            timeout=(self.timeout, self.timeout),
            headers=self.headers(),
            params=[("path", path), ("username", self.user)],
            limit=limit,
            accept=lambda status: is_success(status) or status == 404,
        )
        return None if response.status == 404 else response.body

    def read(self, http: HttpClient, path: str, max_bytes: int | None) -> bytes:
        """``GET /files``, streamed: the file's bytes, gathered by :func:`.files.collect` as
        they arrive (``Truncated`` past ``max_bytes``, at once when ``Content-Length``
        says so). ``Accept-Encoding: identity``, so the length announced is the file's.
        A non-200 answer is its taxonomy error (404 ``NotFound``, 400 ``Invalid``, a path
        through a file ``Invalid``, one the user may not read ``Denied(("path", path))``:
        :func:`.errors.files_policy`)."""
        with self._file(http, path) as response:
            return collect(
                body_chunks(response, size=_READ_SIZE),
                max_bytes,
                size=_content_length(response.headers.get("Content-Length")),
            )


_PORT = str(ENVD_PORT)
_KEEPALIVE = str(KEEPALIVE_SECONDS)


@functools.lru_cache(maxsize=16)
def _basic(user: str) -> str:
    """``Authorization`` selecting the Linux ``user`` (no password: the access token
    authenticates)."""
    return "Basic " + base64.b64encode(f"{user}:".encode()).decode("ascii")


def _only_200(status: int) -> bool:
    """envd's success is exactly 200 (any other 2xx is an answer it does not give)."""
    return status == 200


def _content_length(value: str | None) -> int | None:
    """The announced body length, or None when absent or not a plain decimal count."""
    if value is None or not value.strip().isdigit():
        return None
    return int(value)


def start_request(
    cmd: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    cwd: str | None,
    tag: str,
    stdin: bool,
) -> dict[str, Any]:
    """A ``StartRequest``: ``envs`` always present, ``cwd`` only when given."""
    process: dict[str, Any] = {"cmd": cmd, "args": list(args), "envs": dict(env or {})}
    if cwd is not None:
        process["cwd"] = cwd
    return {"process": process, "tag": tag, "stdin": stdin}


def read_chunks(response: requests.Response) -> Iterator[bytes]:
    """The body's bytes as they arrive (chunk boundaries are the transport's), read by
    the shared :func:`~..._http.raw_chunks`, which maps its failures: it ends at the
    body's clean end; a read timeout is ``DeadlineExpired("timeout")``; a reset or an
    incomplete chunked body is ``Unavailable``.
    """
    return raw_chunks(response, _READ_SIZE)
