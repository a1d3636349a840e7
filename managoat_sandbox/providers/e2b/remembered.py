"""Remembered sandboxes: the sandbox a name resolved to, and when to look it up again.

The operations that only talk to envd use, per adapter instance and per
control plane and account (:func:`key`), the sandbox a name last resolved to
and its envd access token, without a lookup. The entry is replaced by each
lookup, and dropped by a failed envd call (the next operation looks the name
up again) unless envd itself answered it (:func:`answered_by_envd`: a missing
file, a bad path, a path the user may not use, a read past ``max_bytes`` say
nothing against the entry, which reached the sandbox with its token); the
adapter also replaces it on ``create`` and ``resume``, drops it on ``destroy``
and ``suspend``, and :meth:`Remembered.reconcile`\\ s it with every listing it
reads. At most :data:`CAPACITY` names are kept (the least recently used goes
first).

The stale-retry rule (:meth:`Remembered.first_call`): when envd refuses an
operation's first call in a way that says the entry is out of date
(:func:`is_stale`: 401 for the token, or the edge proxy's 502 for a sandbox it
cannot reach) and the call was never dispatched (a refusal of the request,
not an error from a started process), the name is looked up again (the lookup
resumes a paused sandbox) and, only when that finds another sandbox, a new
token or had to resume it, the call is made once more. A refusal that the
lookup cannot explain stands, and a command that may have started is never
sent twice.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ...errors import Denied, Invalid, NotFound, SandboxError, Truncated
from ...reasons import Reason
from .api import SandboxAccess, sandbox_id_of
from .envd import Envd
from .settings import Settings

__all__ = [
    "CAPACITY",
    "FirstCall",
    "Key",
    "Lookup",
    "Remembered",
    "answered_by_envd",
    "envd_of",
    "is_stale",
    "key",
]

#: How many names an adapter remembers.
CAPACITY = 4096

T = TypeVar("T")
#: What a name is remembered under: control plane, account (a digest of the key), name.
Key = tuple[str, str, str]
#: An operation's first envd call; the event is given to a ``Start`` as ``accepted``.
FirstCall = Callable[[Envd, threading.Event], T]
#: Finds a name's running sandbox (resuming it if paused): its access, and whether it
#: had to be resumed.
Lookup = Callable[[Settings, str], tuple[SandboxAccess, bool]]


def key(s: Settings, name: str) -> Key:
    """The same name under another control plane or API key (:attr:`.Settings.account`)
    is another sandbox."""
    return (s.base_url, s.account, name)


def envd_of(s: Settings, access: SandboxAccess) -> Envd:
    """envd of the sandbox ``access`` reaches, as the settings address and call it."""
    return Envd(
        s.envd_url(access.sandbox_id, access.domain),
        access.sandbox_id,
        access.token,
        s.user,
        s.timeout,
    )


def is_stale(error: SandboxError, sandbox_id: str) -> bool:
    """Whether envd's refusal says a remembered sandbox or token is out of date.

    401 (the token), or the edge proxy's 502 for a sandbox it cannot reach
    (``"The sandbox was not found"``, for a killed or paused one) naming this
    sandbox, or no sandbox at all. Any other 502 (say, a gateway that lost an
    upstream it had already sent the request to) is not.
    """
    status, body = error.status, error.body
    if status is None:
        return False
    if status == 401:
        return isinstance(error, Denied)
    if status != 502 or not isinstance(body, Mapping):
        return False
    message = str(body.get("message", "")).lower()
    return body.get("sandboxId", sandbox_id) == sandbox_id and (
        "not found" in message or "paused" in message
    )


def answered_by_envd(error: SandboxError) -> bool:
    """Whether ``error`` is envd's own answer about the request, which reached the
    sandbox with the remembered token: ``Invalid`` (a bad path, a directory read as a
    file), ``NotFound`` (nothing at the path, no such process), ``Truncated`` (a
    read past ``max_bytes``) or the ``Denied(("path", path))`` of a path the user may
    not use. What says the entry may be out of date is none of these: 401 is the
    token's ``Denied(("http", 401, body))``, the edge proxy's 502 for a sandbox it
    cannot reach is ``Unavailable``."""
    if isinstance(error, Denied):
        return error.reason is Reason.PATH
    return isinstance(error, (Invalid, NotFound, Truncated))


class Remembered:
    """The remembered sandboxes of one adapter, and the stale-retry rule built on them.

    Thread-safe. ``lookup`` is how a name is resolved when it is not
    remembered or its entry went stale; what it finds is remembered.
    """

    def __init__(self, lookup: Lookup, *, capacity: int = CAPACITY) -> None:
        self._lookup = lookup
        self._capacity = capacity
        self._lock = threading.Lock()
        self._entries: OrderedDict[Key, SandboxAccess] = OrderedDict()

    # -- the entries ------------------------------------------------------------

    def recall(self, s: Settings, name: str) -> SandboxAccess | None:
        """The name's entry, if remembered (it becomes the most recently used)."""
        k = key(s, name)
        with self._lock:
            access = self._entries.get(k)
            if access is not None:
                self._entries.move_to_end(k)
            return access

    def remember(self, s: Settings, name: str, access: SandboxAccess) -> None:
        """Make ``access`` the name's entry, dropping the least recently used past capacity."""
        k = key(s, name)
        with self._lock:
            self._entries[k] = access
            self._entries.move_to_end(k)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)

    def forget(self, s: Settings, name: str) -> None:
        """Drop the name's entry, whatever it holds."""
        with self._lock:
            self._entries.pop(key(s, name), None)

    def reconcile(self, s: Settings, name: str, item: Mapping[str, Any]) -> None:
        """After a lookup found ``item``: drop the entry if the name now means a paused
        or another sandbox."""
        k = key(s, name)
        with self._lock:
            access = self._entries.get(k)
        if access is not None and (
            item.get("state") == "paused" or access.sandbox_id != sandbox_id_of(item)
        ):
            self._forget_if(k, access.sandbox_id, access.token)

    def _forget_if(self, k: Key, sandbox_id: str, token: str | None) -> None:
        """Drop the entry only if it still holds that sandbox and token (an entry another
        thread has just refreshed stays)."""
        with self._lock:
            access = self._entries.get(k)
            if access is not None and (access.sandbox_id, access.token) == (sandbox_id, token):
                del self._entries[k]

    def _resolve(self, s: Settings, name: str) -> tuple[SandboxAccess, bool]:
        access, resumed = self._lookup(s, name)
        self.remember(s, name, access)
        return access, resumed

    # -- the stale-retry rule ------------------------------------------------------

    def first_call(self, s: Settings, name: str, call: FirstCall[T]) -> tuple[Envd, T]:
        """Make an operation's first envd call on the name's sandbox: its envd and answer.

        A remembered sandbox is used without a lookup; a stale refusal of an
        undispatched call is looked up and retried once (see the module
        docstring). ``call`` gets the envd and an event a ``Start`` sets once
        accepted (a refusal raised while it is clear started nothing). A
        failure drops the entry unless envd itself answered it
        (:func:`answered_by_envd`).
        """
        access = self.recall(s, name)
        remembered = access is not None
        if access is None:
            access, _ = self._resolve(s, name)
        envd = envd_of(s, access)
        accepted = threading.Event()
        try:
            return envd, call(envd, accepted)
        except SandboxError as error:
            if answered_by_envd(error):
                raise
            self._forget_if(key(s, name), access.sandbox_id, access.token)
            if not remembered or accepted.is_set() or not is_stale(error, access.sandbox_id):
                raise
            fresh, resumed = self._resolve(s, name)
            if fresh == access and not resumed:
                raise
        envd = envd_of(s, fresh)
        return envd, call(envd, threading.Event())

    def later_call(self, s: Settings, name: str, envd: Envd, call: Callable[[], T]) -> T:
        """A later envd call of an operation (on the ``envd`` its first call used): if it
        fails, the entry is dropped (unless envd itself answered the failure, or the
        entry already holds another sandbox or token)."""
        try:
            return call()
        except SandboxError as error:
            if not answered_by_envd(error):
                self._forget_if(key(s, name), envd.sandbox_id, envd.token)
            raise
