"""Which adapter serves a provider name.

Three sources, the first that names a provider wins: the explicit map
(``config.configure(adapters={...})``), the entry-point group
``managoat_sandbox.adapters`` (loaded lazily, once), and the built-ins. A map
value is an :class:`Adapter` instance, or an ``Adapter`` subclass instantiated
once, lazily, with no arguments. An instance is cached until the source serving
its provider may have changed — the ``adapters`` map is configured, or
``config.reset`` runs — and never on any other setting change: adapters read
their settings at call time, so a retry tweak mid-run keeps every sandbox,
connection pool and remembered policy an instance holds.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from . import config
from ._declared import LazyTable, declarations
from ._settings import read
from .contract import Adapter
from .errors import UnknownProvider

__all__ = ["BUILTINS", "ENTRY_POINT_GROUP", "adapter_for", "adapters", "provider_names"]

log = logging.getLogger("managoat_sandbox.registry")

ENTRY_POINT_GROUP = "managoat_sandbox.adapters"

#: The reference adapter, built in beside the providers' declared ones.
_FAKE = "managoat_sandbox.testing.fake:Fake"

#: Built-in providers (``"module:Class"``), imported only when first used: the Fake and
#: every provider package's declared adapter (:mod:`managoat_sandbox._declared`).
BUILTINS: Mapping[str, str] = LazyTable(
    lambda: {"fake": _FAKE, **{name: d.target for name, d in declarations().items()}}
)

_lock = threading.RLock()
_instances: dict[tuple[str, int], Adapter] = {}
_cache_generation = -1
_entry_points: dict[str, Any] | None = None


def _load_entry_points() -> dict[str, Any]:
    global _entry_points
    if _entry_points is None:
        # importlib.metadata costs ~15 ms to import: paid at the first resolution, not at import.
        metadata = importlib.import_module("importlib.metadata")
        found: dict[str, Any] = {}
        for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
            found[entry.name] = entry
        _entry_points = found
    return _entry_points


def _explicit() -> Mapping[str, Any]:
    """The explicit map, checked by its rule (``Invalid(("config", None, "adapters"))``)."""
    value = read(None, "adapters")
    return {} if value is None else value


def provider_names() -> frozenset[str]:
    """Every provider name that resolves to an adapter."""
    with _lock:
        return frozenset(_explicit()) | frozenset(_load_entry_points()) | frozenset(BUILTINS)


def _source(provider: str) -> Any:
    explicit = _explicit()
    if provider in explicit:
        return explicit[provider]
    entry = _load_entry_points().get(provider)
    if entry is not None:
        return entry.load()
    target = BUILTINS.get(provider)
    if target is not None:
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)
    return None


def _instantiate(provider: str, source: Any) -> Adapter:
    if isinstance(source, Adapter):
        return source
    if isinstance(source, type) and issubclass(source, Adapter):
        return source()
    raise TypeError(f"adapter for {provider!r} must be an Adapter instance or subclass")


def adapter_for(provider: str) -> Adapter:
    """The adapter serving ``provider``, or :class:`UnknownProvider`."""
    global _cache_generation
    if not isinstance(provider, str):
        raise TypeError(f"provider must be a str, got {type(provider).__name__}")
    with _lock:
        generation = config.generation()
        if generation != _cache_generation:
            _instances.clear()
            _cache_generation = generation
        cached = _instances.get((provider, generation))
        if cached is not None:
            return cached
        source = _source(provider)
        if source is None:
            raise UnknownProvider(provider, provider_names())
        adapter = _instantiate(provider, source)
        _instances[(provider, generation)] = adapter
        return adapter


def adapters() -> Mapping[str, Adapter]:
    """A read-only snapshot: provider name → adapter instance."""
    return MappingProxyType({name: adapter_for(name) for name in sorted(provider_names())})
