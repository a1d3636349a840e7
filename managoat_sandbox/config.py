"""Process-global configuration of the library.

Settings live in scopes (``"sprites"``, ``"e2b"``, ``"daytona"``, ``"local"``,
``"retry"``; ``None`` is the top level, which holds the ``adapters`` map).
:func:`get` answers, in order: the configured value unless it is ``None``; the
key's environment variable (read at call time) for keys that have one; the
library's built-in default; the caller's ``default``. Every setting the
library reads has a rule (:mod:`managoat_sandbox._setting_rules`):
:func:`configure` refuses a value its rule refuses, before storing anything.
Everything here is thread-safe. The library reads only its own settings,
never a host's.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ._declared import LazyTable
from ._setting_rules import RULES, check

__all__ = [
    "ENV_VARS",
    "configure",
    "generation",
    "get",
    "override",
    "reset",
    "snapshot",
    "version",
]

#: (scope, key) → the environment variable that stands in for the setting when it is not
#: configured (from each setting's declaration; built on first use).
ENV_VARS: Mapping[tuple[str | None, str], str] = LazyTable(
    lambda: {key: setting.env for key, setting in RULES.items() if setting.env is not None}
)

#: (scope, key) → the library's built-in value of the setting (from its declaration).
_DEFAULTS: Mapping[tuple[str | None, str], Any] = LazyTable(
    lambda: {key: setting.default for key, setting in RULES.items() if setting.default is not None}
)

#: The top-level key whose changes replace adapter instances (see :func:`generation`).
_SOURCES_KEY = "adapters"

_lock = threading.RLock()
_settings: dict[str | None, dict[str, Any]] = {}
_generation = 0
_version = 0


def _bump() -> None:
    global _generation
    _generation += 1


def _changed() -> None:
    """Note that what is configured changed (called with the lock held)."""
    global _version
    _version += 1


def version() -> int:
    """A counter that changes whenever anything configured changes: every
    :func:`configure`, :func:`override` (on entry and on exit) and :func:`reset`.

    While it stays the same, :func:`get` answers every key as it did before, except
    for what comes from the environment (read at each call), so a reader that keeps
    what it made of the settings may reuse it until the counter or the environment
    variables it read change.
    """
    return _version


def generation() -> int:
    """A counter that changes whenever what serves a provider may have changed: the
    ``adapters`` map is configured (or overridden, or restored after an override), or
    :func:`reset` runs.

    The registry replaces its cached adapter instances only then. Every other setting
    (retry, credentials, URLs, ``local``) is read by the live instance at call time, so
    changing one never discards an adapter's sandboxes, pools or remembered policies.
    """
    return _generation


def _check_scope(scope: object) -> str | None:
    if scope is not None and not isinstance(scope, str):
        raise TypeError(f"scope must be a str or None, got {type(scope).__name__}")
    return scope


def configure(scope: str | None = None, **settings: Any) -> None:
    """Merge ``settings`` into ``scope``; a key set to ``None`` is unset.

    ``configure(adapters={...})`` replaces the explicit adapter map. A value
    its setting's rule refuses is ``Invalid(("config", scope, key))``, with a
    ``message`` naming the setting and what it must be; then nothing is stored.
    """
    scope = _check_scope(scope)
    for key, value in settings.items():
        check(scope, key, value)
    with _lock:
        current = _settings.setdefault(scope, {})
        for key, value in settings.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value
        _changed()
        if scope is None and _SOURCES_KEY in settings:
            _bump()


def get(scope: str | None, key: str, default: Any = None) -> Any:
    """The effective value of ``key`` in ``scope`` (see the module docstring)."""
    scope = _check_scope(scope)
    with _lock:
        value = _settings.get(scope, {}).get(key)
    if value is not None:
        return value
    if scope is not None:
        env = ENV_VARS.get((scope, key))
        if env is not None and os.environ.get(env):
            return os.environ[env]
        builtin = _DEFAULTS.get((scope, key))
        if builtin is not None:
            return builtin
    return default


def snapshot() -> dict[str | None, dict[str, Any]]:
    """A copy of everything configured explicitly."""
    with _lock:
        return {scope: dict(values) for scope, values in _settings.items()}


@contextmanager
def override(scope: str | None = None, **settings: Any) -> Iterator[None]:
    """Set ``settings`` for the duration of the block, then restore what was there.

    Meant for tests, which (config being process-global) must run serially.
    """
    scope = _check_scope(scope)
    missing = object()
    with _lock:
        saved = {key: _settings.get(scope, {}).get(key, missing) for key in settings}
        configure(scope, **settings)
    try:
        yield
    finally:
        with _lock:
            current = _settings.setdefault(scope, {})
            for key, value in saved.items():
                if value is missing:
                    current.pop(key, None)
                else:
                    current[key] = value
            _changed()
            if scope is None and _SOURCES_KEY in saved:
                _bump()


def reset() -> None:
    """Forget every configured setting and drop cached adapter instances (a full restart,
    meant for tests)."""
    with _lock:
        _settings.clear()
        _changed()
        _bump()
