"""The adapters shipped with the package, one subpackage per provider.

(Named ``providers`` rather than ``adapters`` so that importing a subpackage
never shadows the facade function ``managoat_sandbox.adapters``.) Adapters
never import each other. Each declares itself in its ``declaration.py``
(:mod:`managoat_sandbox._declared`), which the registry and the settings read
without importing the adapter: a provider package's ``__init__`` imports its
adapter class only when it is asked for (:func:`lazily`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["lazily"]


def lazily(module: str, *names: str) -> Callable[[str], Any]:
    """A package's ``__getattr__`` (PEP 562) that imports each of ``names`` from
    ``module`` when first asked for, so importing the package (to read its
    declaration) costs nothing of its adapter's imports."""

    def attribute(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(module), name)
        raise AttributeError(f"module {module.rpartition('.')[0]!r} has no attribute {name!r}")

    return attribute
