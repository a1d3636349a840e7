"""Which providers sandbox tests run on, and the checks made while collecting them."""

from __future__ import annotations

import re
from collections.abc import Iterable

import pytest

from ..contract import KNOWN_CAPABILITIES
from ..registry import provider_names
from ._emulated import EMULATED

__all__ = [
    "CHOICES",
    "DEFAULT",
    "EMULATOR_SUFFIX",
    "INI",
    "MARKER",
    "OPTION",
    "check_marker",
    "chosen",
    "emulated_provider",
    "required_capabilities",
    "sandbox_prefix",
]

#: The command-line option (repeatable) and the ini option that name the providers.
OPTION = "--sandbox-provider"
INI = "sandbox_providers"
#: The marker naming capabilities a test needs.
MARKER = "sandbox_requires"
DEFAULT = "local"
EMULATOR_SUFFIX = "-emulator"
#: The choices always offered; besides them, any provider name the registry resolves.
CHOICES = ("local", "fake", *(f"{provider}{EMULATOR_SUFFIX}" for provider in EMULATED))

#: The longest prefix given to ``temporary``: with ``-`` and 12 hex digits the name
#: stays within 63 characters, the most a Sprites name may have.
_MAX_PREFIX = 50


def chosen(config: pytest.Config) -> list[str]:
    """The providers named by ``--sandbox-provider`` (else the ini option ``sandbox_providers``,
    else ``local``), each once, in the order given; ``pytest.UsageError`` naming the choices
    when one is unknown."""
    given: list[str] = config.getoption("sandbox_providers") or config.getini(INI) or [DEFAULT]
    names = list(dict.fromkeys(given))
    known = set(CHOICES)
    if all(name in known for name in names):  # the registry is not consulted for these
        return names
    known |= provider_names()
    unknown = [name for name in names if name not in known]
    if unknown:
        raise pytest.UsageError(
            f"{OPTION}: unknown provider {unknown[0]!r}; choose from {', '.join(sorted(known))}"
        )
    return names


def emulated_provider(choice: str) -> str | None:
    """The adapter a ``<provider>-emulator`` choice stands for; ``None`` for other choices."""
    provider = choice.removesuffix(EMULATOR_SUFFIX)
    return provider if provider != choice and provider in EMULATED else None


def required_capabilities(marks: Iterable[pytest.Mark]) -> list[str]:
    """The capabilities ``marks`` (a test's ``sandbox_requires`` markers) name, each once."""
    return list(dict.fromkeys(capability for mark in marks for capability in mark.args))


def check_marker(definition: pytest.Function, uses_provider: bool) -> None:
    """Fail collection (one line) when ``sandbox_requires`` on ``definition`` names no
    capability, an unknown one, or is put on a test that uses no sandbox fixture."""
    marks = list(definition.iter_markers(MARKER))
    if not marks:
        return
    where = f"{MARKER} on {definition.name}"
    if not uses_provider:
        pytest.fail(f"{where}: the test uses neither sandbox nor sandbox_provider", pytrace=False)
    for mark in marks:
        if not mark.args:
            pytest.fail(f"{where}: name at least one capability", pytrace=False)
        for capability in mark.args:
            if capability not in KNOWN_CAPABILITIES:
                known = ", ".join(sorted(KNOWN_CAPABILITIES))
                message = f"{where}: unknown capability {capability!r}; known: {known}"
                pytest.fail(message, pytrace=False)


def sandbox_prefix(test_name: str) -> str:
    """A ``temporary`` prefix from a test's name: lower case, runs of anything but
    ``[a-z0-9]`` made one ``-``, trimmed to 50 characters, never empty — a prefix every
    provider takes in a sandbox name."""
    cleaned = re.sub(r"[^a-z0-9]+", "-", test_name.lower()).strip("-")
    return cleaned[:_MAX_PREFIX].rstrip("-") or "test"
