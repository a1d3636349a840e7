"""langchain-tests' ``SandboxIntegrationTests`` against the backend, on every provider.

One class per provider: ``local`` (real processes, kernel-isolated where the host
allows it) and the Sprites, E2B and Daytona emulators (each sandbox a real one on
the local engine behind the provider's wire protocol). Each class creates one
sandbox for all of its tests and destroys it afterwards.

Two standard tests run ``python``, not ``python3``. Every sandbox here runs on the
local engine, whose commands see the host's ``/usr`` read-only with a fixed
``PATH`` (:data:`SANDBOX_PATH`), so they find ``python`` exactly when the host has
one in those directories; a Debian or Ubuntu host has it only with the
``python-is-python3`` package. Where it has none, those two tests are strict
xfails (``test_backend.py`` checks that the premise holds in a real sandbox).

Seven more standard tests are strict xfails on every provider: they assert what
Deep Agents' own ``BaseSandbox`` (0.7.x), which this backend inherits ``glob`` and
``write`` from, deliberately does not do — five expect ``glob`` to return relative
paths and directories (it returns absolute paths of regular files only, which its
permission rules rely on), one expects ``write`` to refuse an existing file (it
overwrites, as its protocol says). Every ``BaseSandbox`` backend shares them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from langchain_tests.integration_tests import SandboxIntegrationTests

import managoat_sandbox as sandbox
from managoat_sandbox.deepagents import ManagoatSandbox

from .conftest import Target

pytestmark = pytest.mark.anyio

#: The ``PATH`` of every command in a sandbox on the local engine.
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#: Whether those directories hold a ``python`` on this host.
SANDBOX_HAS_PYTHON = any(
    os.access(os.path.join(directory, "python"), os.X_OK) for directory in SANDBOX_PATH.split(":")
)

NO_PYTHON = pytest.mark.xfail(
    not SANDBOX_HAS_PYTHON,
    reason="the sandbox has python3 but no `python` (the host's /usr has none: install "
    "python-is-python3 on the host, or see docs/deepagents.md#getting-a-python)",
    strict=True,
)

GLOB_CONTRACT = pytest.mark.xfail(
    reason="deepagents' BaseSandbox.glob returns absolute paths of regular files only "
    "(its protocol's contract); this standard test expects relative paths and directories",
    strict=True,
)

WRITE_CONTRACT = pytest.mark.xfail(
    reason="deepagents' BaseSandbox.write overwrites an existing file (its protocol's "
    "contract); this standard test expects a refusal",
    strict=True,
)


class _OnProvider(SandboxIntegrationTests):
    """The standard suite on the provider a subclass names (``provider``)."""

    provider: str

    @pytest.fixture(scope="class")
    @classmethod
    def target(cls, request: pytest.FixtureRequest) -> Target:
        found: Target = request.getfixturevalue(f"{cls.provider}_target")
        return found

    @pytest.fixture(scope="class")
    @classmethod
    def sandbox(cls, target: Target) -> Iterator[ManagoatSandbox]:
        target.point()
        with sandbox.temporary(target.provider, "deepagents") as handle:
            yield ManagoatSandbox(handle)
            target.point()  # tests reset the configuration; destroy needs it

    @pytest.fixture(autouse=True)
    def pointed(self, clean_config: None, target: Target) -> None:
        """The library's configuration names the target (after ``clean_config`` reset it)."""
        target.point()

    @NO_PYTHON
    def test_execute_large_stdout_payload(self, sandbox_backend: ManagoatSandbox) -> None:
        super().test_execute_large_stdout_payload(sandbox_backend)

    @NO_PYTHON
    async def test_aexecute_large_stdout_payload(self, sandbox_backend: ManagoatSandbox) -> None:
        await super().test_aexecute_large_stdout_payload(sandbox_backend)

    @WRITE_CONTRACT
    def test_write_existing_file_fails(
        self, sandbox_backend: ManagoatSandbox, sandbox_test_root: str
    ) -> None:
        super().test_write_existing_file_fails(sandbox_backend, sandbox_test_root)

    @GLOB_CONTRACT
    def test_glob(self, sandbox_backend: ManagoatSandbox, sandbox_test_root: str) -> None:
        super().test_glob(sandbox_backend, sandbox_test_root)

    @GLOB_CONTRACT
    def test_glob_basic_pattern(
        self, sandbox_backend: ManagoatSandbox, sandbox_test_root: str
    ) -> None:
        super().test_glob_basic_pattern(sandbox_backend, sandbox_test_root)

    @GLOB_CONTRACT
    def test_glob_with_directories(
        self, sandbox_backend: ManagoatSandbox, sandbox_test_root: str
    ) -> None:
        super().test_glob_with_directories(sandbox_backend, sandbox_test_root)

    @GLOB_CONTRACT
    def test_glob_hidden_files_explicitly(
        self, sandbox_backend: ManagoatSandbox, sandbox_test_root: str
    ) -> None:
        super().test_glob_hidden_files_explicitly(sandbox_backend, sandbox_test_root)

    @GLOB_CONTRACT
    def test_glob_with_character_class(
        self, sandbox_backend: ManagoatSandbox, sandbox_test_root: str
    ) -> None:
        super().test_glob_with_character_class(sandbox_backend, sandbox_test_root)

    @GLOB_CONTRACT
    def test_glob_with_question_mark(
        self, sandbox_backend: ManagoatSandbox, sandbox_test_root: str
    ) -> None:
        super().test_glob_with_question_mark(sandbox_backend, sandbox_test_root)


class TestLocal(_OnProvider):
    provider = "local"


class TestSprites(_OnProvider):
    provider = "sprites"


class TestE2B(_OnProvider):
    provider = "e2b"


class TestDaytona(_OnProvider):
    provider = "daytona"
