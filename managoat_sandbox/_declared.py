"""What each built-in provider declares about itself, found where it lives.

A provider package ``managoat_sandbox/providers/<name>/`` holds a
``declaration.py`` whose ``DECLARATION`` is a :class:`Declaration`: its name
(also its config scope), how messages name it, the adapter class its package
exports, and every setting it reads — the rule a value must pass, its
built-in default, the environment variable that stands in for it, and whether
a refused value may be shown. The central places read the declarations instead
of keeping tables of their own: the registry's built-ins
(:mod:`managoat_sandbox.registry`), the settings' rules
(:mod:`managoat_sandbox._setting_rules`), and the defaults and environment
variables :func:`managoat_sandbox.config.get` falls back on. Adding a provider
adds its package; nothing central changes (docs/adding-a-provider.md).

A declaration module imports only the rule kinds it uses, never its adapter:
:func:`declarations` imports every one of them on first use, and a provider
package's ``__init__`` imports its adapter only when the adapter is asked for.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import threading
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

import attrs

__all__ = ["PROVIDERS_PACKAGE", "Declaration", "LazyTable", "Setting", "declarations"]

#: The package whose subpackages are the built-in providers.
PROVIDERS_PACKAGE = "managoat_sandbox.providers"


@attrs.frozen
class Setting:
    """One setting of a provider's scope.

    ``convert`` is its rule (one of :mod:`managoat_sandbox._setting_rules`' kinds:
    it normalises a value or refuses it); ``default`` is the built-in value
    (``None``: none); ``env`` the environment variable read when the setting is
    not configured; ``shown`` whether a refused value may appear in the message
    (never for a credential, nor for a URL, which may carry one).
    """

    convert: Callable[[Any], Any]
    default: Any = None
    env: str | None = None
    shown: bool = True


def _frozen(settings: Mapping[str, Setting]) -> Mapping[str, Setting]:
    return MappingProxyType(dict(settings))


@attrs.frozen
class Declaration:
    """A built-in provider: ``name`` (its registry name and config scope), ``label``
    (how messages name it), ``adapter`` (the name of the adapter class its package
    exports, imported on first use: :attr:`target`) and its ``settings`` by key."""

    name: str
    label: str
    adapter: str
    settings: Mapping[str, Setting] = attrs.field(converter=_frozen)

    @property
    def target(self) -> str:
        """Where the adapter class is, as ``"module:Class"`` (the provider's package)."""
        return f"{PROVIDERS_PACKAGE}.{self.name}:{self.adapter}"


_lock = threading.Lock()
_found: Mapping[str, Declaration] | None = None


def _discover() -> Iterator[Declaration]:
    package = importlib.import_module(PROVIDERS_PACKAGE)
    for module in pkgutil.iter_modules(package.__path__):
        name = f"{PROVIDERS_PACKAGE}.{module.name}.declaration"
        if module.ispkg and importlib.util.find_spec(name) is not None:
            declaration = importlib.import_module(name).DECLARATION
            if not isinstance(declaration, Declaration) or declaration.name != module.name:
                raise TypeError(f"{name}.DECLARATION must be the Declaration of {module.name!r}")
            yield declaration


def declarations() -> Mapping[str, Declaration]:
    """Every built-in provider's declaration by name (found once, on first use)."""
    global _found
    with _lock:
        if _found is None:
            _found = MappingProxyType({found.name: found for found in _discover()})
        return _found


class LazyTable(Mapping[Any, Any]):
    """A read-only mapping built on first use by ``build`` (a table the central places
    derive from the declarations, so importing them costs nothing until it is read)."""

    def __init__(self, build: Callable[[], Mapping[Any, Any]]) -> None:
        self._build = build
        self._table: dict[Any, Any] | None = None
        self._lock = threading.Lock()

    def _get(self) -> Mapping[Any, Any]:
        table = self._table
        if table is None:
            with self._lock:
                if self._table is None:
                    self._table = dict(self._build())
                table = self._table
        return table

    def __getitem__(self, key: Any) -> Any:
        return self._get()[key]

    def get(self, key: Any, default: Any = None) -> Any:
        """The table's own ``get`` (``config.get`` asks for keys most tables lack: the
        mixin's, by ``KeyError``, would cost a raised exception each time)."""
        return (self._table or self._get()).get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._get()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())
