"""The suite-wide secrets canary: one token, configured for every adapter, watched everywhere.

:data:`CANARY` is the credential of every hosted adapter in the whole suite:
the provider environment variables (``SPRITES_TOKEN``, ``E2B_API_KEY``,
``DAYTONA_API_KEY``) hold it for the whole session, so any configuration that
is reset falls back to it, and the provider test packages use it as the
credential they configure and their emulators accept. :class:`Watch` then
looks for it, for every test, in:

* every log record of any logger (message, formatted exception and stack),
  with the package's loggers opened down to DEBUG so nothing is filtered out
  before it is seen;
* the text and ``repr`` of every taxonomy error (``SandboxError`` and its
  subclasses, ``UnknownProvider``) the moment it is built, raised or not;
* the ``repr`` of every ``Handle``, ``Command``, ``Session`` and ``Info`` the
  moment it is built;
* every test report: the failure text and the captured output and logs.

A sighting fails the test it happened in (or, when it arrives after the test
ended, from a background thread, the run) with a message that says where,
never the token itself.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from managoat_sandbox import errors, types

CANARY = "mgs-canary-7f3a9c41-SECRET"

#: The environment variables through which every hosted adapter finds its credential.
CREDENTIAL_ENV = ("SPRITES_TOKEN", "E2B_API_KEY", "DAYTONA_API_KEY")

_ERROR_CLASSES = tuple(
    value
    for value in vars(errors).values()
    if isinstance(value, type)
    and issubclass(value, Exception)
    and value.__module__ == errors.__name__
)
_VALUE_CLASSES = (types.Handle, types.Command, types.Session, types.Info)


class Watch:
    """Collects every place the canary was seen; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sightings: list[str] = []
        self._building = threading.local()
        self._restore: list[Callable[[], None]] = []
        #: The handler :meth:`install` puts on the root logger.
        self.handler: logging.Handler = _Handler(self)

    def see(self, where: str, text: str) -> None:
        """Record ``where`` if ``text`` holds the canary."""
        if CANARY in text:
            with self._lock:
                self._sightings.append(where)

    def take(self) -> list[str]:
        """The sightings so far, forgotten once taken."""
        with self._lock:
            taken, self._sightings = self._sightings, []
        return taken

    def install(self) -> None:
        """Start watching: environment, loggers, and the constructors of errors and values."""
        saved_env = {name: os.environ.get(name) for name in CREDENTIAL_ENV}
        os.environ.update({name: CANARY for name in CREDENTIAL_ENV})
        self._restore.append(functools.partial(_restore_env, saved_env))

        handler = self.handler
        root = logging.getLogger()
        root.addHandler(handler)
        package = logging.getLogger("managoat_sandbox")
        level = package.level
        package.setLevel(logging.DEBUG)
        self._restore.append(functools.partial(root.removeHandler, handler))
        self._restore.append(functools.partial(package.setLevel, level))

        for cls in (*_ERROR_CLASSES, *_VALUE_CLASSES):
            if "__init__" in vars(cls):
                self._wrap_init(cls)

    def uninstall(self) -> None:
        """Undo :meth:`install`."""
        while self._restore:
            self._restore.pop()()

    def _wrap_init(self, cls: type) -> None:
        original = vars(cls)["__init__"]
        building = self._building

        @functools.wraps(original)
        def init(instance: Any, *args: Any, **kwargs: Any) -> None:
            depth = getattr(building, "depth", 0)
            building.depth = depth + 1
            try:
                original(instance, *args, **kwargs)
            finally:
                building.depth = depth
            if depth == 0:
                kind = type(instance).__name__
                self.see(f"repr of a {kind}", repr(instance))
                if isinstance(instance, BaseException):
                    self.see(f"text of a {kind}", str(instance))

        type.__setattr__(cls, "__init__", init)
        self._restore.append(lambda: type.__setattr__(cls, "__init__", original))

    def sightings_in_report(self, sections: Iterable[tuple[str, str]]) -> list[str]:
        """The report sections (title, text) that hold the canary."""
        return [title for title, text in sections if CANARY in text]


class _Handler(logging.Handler):
    """A root handler that shows every record's full text to the watch."""

    def __init__(self, watch: Watch) -> None:
        super().__init__(logging.DEBUG)
        self._watch = watch

    def emit(self, record: logging.LogRecord) -> None:
        parts = [record.getMessage()]
        if record.exc_info:
            parts.append("".join(traceback.format_exception(*record.exc_info)))
        if record.stack_info:
            parts.append(record.stack_info)
        self._watch.see(f"a log record of {record.name!r} at {record.levelname}", "\n".join(parts))


def _restore_env(saved: dict[str, str | None]) -> None:
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
