"""The pytest plugin (``managoat_sandbox.pytest_plugin``), driven as a user's suite drives
it: each test writes a test module and runs pytest on it with ``pytester``, in this
process where it can, in a child process where the process itself is the subject
(what loading the plugin imports, a real Ctrl-C, a missing extra).

Every Python sample of docs/testing.md runs here too, with the command line its first
line names. Every ``local`` run uses a root of the test's own
(``MANAGOAT_SANDBOX_LOCAL_ROOT``), checked empty afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import managoat_sandbox as ms
from managoat_sandbox import config
from managoat_sandbox.emulators import MISSING_EXTRA

from .local_cli import ROOT
from .test_fake_conformance import FAKE_FIXTURES

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.timeout(60)

DOC = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
FENCE = re.compile(r"^```python\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)
RUN_WITH = "# run with: pytest"
SAMPLES = [match["body"] for match in FENCE.finditer(DOC)]


@pytest.fixture(autouse=True)
def only_this_plugin(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner runs load this plugin by its module and no other installed one: the test
    extras bring plugins whose loading is most of an inner run's second and a half.
    The test of the entry point itself (``test_loading_the_plugin_...``) lifts this.
    (After ``pytester``, which clears ``PYTEST_ADDOPTS`` when it is made.)"""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p managoat_sandbox.pytest_plugin")


@pytest.fixture
def local_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A ``local`` root of the test's own, for this process and its children; whatever a
    run leaves in it is listed by the test, then destroyed here."""
    root = tmp_path / "local-root"
    monkeypatch.setenv("MANAGOAT_SANDBOX_LOCAL_ROOT", str(root))
    yield root
    with config.override("local", root=str(root)):
        for name in ms.list_all_names("local"):
            ms.destroy(ms.build_handle("local", name))


def left_in(root: Path) -> frozenset[str]:
    """The sandboxes that exist under the ``local`` root ``root``."""
    with config.override("local", root=str(root)):
        return ms.list_all_names("local")


# -- the docs' samples ----------------------------------------------------------------


def test_every_sample_of_the_page_names_how_it_runs() -> None:
    assert len(SAMPLES) >= 5
    assert all(sample.startswith(RUN_WITH) for sample in SAMPLES)


def first_test(sample: str) -> str:
    """The name of the first test function or class a sample defines."""
    return str(re.findall(r"^(?:def|class) (\w+)", sample, re.MULTILINE)[0])


@pytest.mark.parametrize("sample", SAMPLES, ids=first_test)
def test_each_sample_of_the_page_passes(
    sample: str, pytester: pytest.Pytester, local_root: Path
) -> None:
    pytester.makepyfile(test_sample=sample)
    result = pytester.runpytest_subprocess(*sample.splitlines()[0].removeprefix(RUN_WITH).split())
    outcomes = result.parseoutcomes()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert outcomes["passed"] >= 1 and "failed" not in outcomes and "errors" not in outcomes
    assert left_in(local_root) == frozenset()


# -- providers, ids and cleanup -------------------------------------------------------

SANDBOX_TEST = """
import managoat_sandbox as ms

def test_runs(sandbox, sandbox_provider):
    assert sandbox.provider == sandbox_provider
    assert sandbox.name.startswith("test-runs-")
    assert ms.get(sandbox).status == "running"
"""


def test_a_sandbox_test_runs_once_per_provider_named_in_its_id(
    pytester: pytest.Pytester, local_root: Path
) -> None:
    pytester.makepyfile(test_user=SANDBOX_TEST)
    result = pytester.runpytest_subprocess(
        "-v", "--sandbox-provider", "local", "--sandbox-provider", "fake"
    )
    result.stdout.fnmatch_lines(["*test_runs?local? PASSED*", "*test_runs?fake? PASSED*"])
    result.assert_outcomes(passed=2)
    assert left_in(local_root) == frozenset()


def test_without_the_option_sandbox_tests_run_on_local(
    pytester: pytest.Pytester, local_root: Path
) -> None:
    pytester.makepyfile(test_user=SANDBOX_TEST)
    result = pytester.runpytest_subprocess("-v")
    result.stdout.fnmatch_lines(["*test_runs?local? PASSED*"])
    result.assert_outcomes(passed=1)


def test_the_ini_option_names_the_providers(pytester: pytest.Pytester, local_root: Path) -> None:
    pytester.makeini("[pytest]\nsandbox_providers = fake local\n")
    pytester.makepyfile(test_user=SANDBOX_TEST)
    result = pytester.runpytest_subprocess("-v")
    result.stdout.fnmatch_lines(["*test_runs?fake? PASSED*", "*test_runs?local? PASSED*"])


def test_a_test_that_parametrizes_sandbox_provider_keeps_its_own_list(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_user="""
        import pytest

        @pytest.mark.parametrize("sandbox_provider", ["fake"], indirect=True)
        def test_pinned(sandbox):
            assert sandbox.provider == "fake"
        """
    )
    result = pytester.runpytest_subprocess("-v", "--sandbox-provider", "local")
    result.stdout.fnmatch_lines(["*test_pinned?fake? PASSED*"])
    result.assert_outcomes(passed=1)


EMULATED_TEST = """
import managoat_sandbox as ms

def test_through_the_emulator(sandbox, sandbox_provider, e2b_emulator):
    assert sandbox_provider == sandbox.provider == "e2b"
    assert ms.exec(sandbox, "bash", ["-lc", "echo hi"]).output == b"hi\\n"
    assert {r.method for r in e2b_emulator.emulator.requests} >= {"POST"}
    assert e2b_emulator.env["E2B_API_URL"] == e2b_emulator.url == e2b_emulator.base_url
    assert e2b_emulator.settings["api_key"] == e2b_emulator.credential
    assert ms.list_all_names("e2b") == {sandbox.name}

def test_the_configuration_is_restored_after_each_test():
    from managoat_sandbox import config
    assert config.snapshot().get("e2b", {}) == {}
"""


def test_an_emulated_provider_points_the_library_at_the_session_emulator(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_user=EMULATED_TEST)
    result = pytester.runpytest_subprocess("-v", "--sandbox-provider", "e2b-emulator")
    result.stdout.fnmatch_lines(["*test_through_the_emulator?e2b-emulator? PASSED*"])
    result.assert_outcomes(passed=2)


def test_a_failing_test_still_destroys_its_sandbox(
    pytester: pytest.Pytester, local_root: Path, tmp_path: Path
) -> None:
    made = tmp_path / "made"
    pytester.makepyfile(
        test_user=f"""
        from pathlib import Path

        def test_fails(sandbox):
            Path({str(made)!r}).write_text(sandbox.name)
            assert False, "the user's test failed"
        """
    )
    result = pytester.runpytest_subprocess("--sandbox-provider", "local")
    result.assert_outcomes(failed=1)
    assert made.read_text().startswith("test-fails-")
    assert left_in(local_root) == frozenset()


def test_ctrl_c_during_a_test_still_destroys_its_sandbox(
    pytester: pytest.Pytester, local_root: Path, tmp_path: Path
) -> None:
    made = tmp_path / "made"
    pytester.makepyfile(
        test_user=f"""
        import os
        import signal
        from pathlib import Path

        def test_interrupted(sandbox):
            Path({str(made)!r}).write_text(sandbox.name)
            os.kill(os.getpid(), signal.SIGINT)

        def test_never_reached(sandbox):
            pass
        """
    )
    result = pytester.runpytest_subprocess("--sandbox-provider", "local", timeout=50)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*KeyboardInterrupt*"])
    assert made.read_text().startswith("test-interrupted-")
    assert left_in(local_root) == frozenset()


# -- the marker -----------------------------------------------------------------------


def test_the_marker_skips_a_provider_without_the_capability_naming_both(
    pytester: pytest.Pytester, local_root: Path
) -> None:
    pytester.makepyfile(
        test_user="""
        import pytest

        @pytest.mark.sandbox_requires("public_url", "attach")
        def test_needs(sandbox_provider):
            pass
        """
    )
    result = pytester.runpytest_subprocess(
        "-rs", "--strict-markers", "--sandbox-provider", "local", "--sandbox-provider", "fake"
    )
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*'local' does not advertise the capability 'public_url'"])


def test_an_unknown_capability_fails_collection_naming_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_user="""
        import pytest

        @pytest.mark.sandbox_requires("atach")
        def test_needs(sandbox_provider):
            pass
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*sandbox_requires on test_needs: unknown capability 'atach'*"])


# -- usage errors, inertness, the missing extra ---------------------------------------


def test_an_unknown_provider_is_a_usage_error_naming_the_choices(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_user=SANDBOX_TEST)
    result = pytester.runpytest_subprocess("--sandbox-provider", "nowhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*unknown provider 'nowhere'; choose from *daytona-emulator*e2b-emulator*fake*local*"]
    )


def test_loading_the_plugin_imports_configures_and_starts_nothing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD")  # the entry point loads it
    monkeypatch.delenv("PYTEST_ADDOPTS")
    pytester.makepyfile(
        test_user="""
        import sys
        import threading

        from managoat_sandbox import config

        def test_plain(request):
            assert request.config.pluginmanager.has_plugin("managoat_sandbox")
            heavy = ("aiohttp", "managoat_sandbox.emulators", "managoat_sandbox.providers",
                     "managoat_sandbox.testing")
            assert [name for name in sys.modules if name.startswith(heavy)] == []
            assert config.snapshot() == {}
            assert [t.name for t in threading.enumerate()] == ["MainThread"]
        """
    )
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider", timeout=50)
    result.stdout.fnmatch_lines(["*::test_plain PASSED*"])


def test_an_emulator_fixture_without_the_extra_fails_with_one_line_naming_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest("import sys\nsys.modules['aiohttp'] = None\n")
    pytester.makepyfile(test_user="def test_sdk(e2b_emulator):\n    pass\n")
    result = pytester.runpytest_subprocess(timeout=50)
    result.assert_outcomes(errors=1)
    lines = result.stdout.lines
    at = next(i for i, line in enumerate(lines) if "ERROR at setup of test_sdk" in line)
    assert lines[at + 1] == MISSING_EXTRA and lines[at + 2].startswith("=====")


# -- ConformanceTests -----------------------------------------------------------------


def test_a_conformance_suite_subclass_is_collected_and_passes_under_pytest(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_conformance=f"""
        import unittest

        from managoat_sandbox.testing import ConformanceTests, Fake

        class FakeConformanceTest(ConformanceTests, unittest.TestCase):
            adapter = Fake()
            fixtures = {dict(FAKE_FIXTURES)!r}

            def setUp(self):
                super().setUp()
                self.adapter.reset()
        """
    )
    result = pytester.runpytest_subprocess("-q")
    outcomes = result.parseoutcomes()
    assert result.ret == pytest.ExitCode.OK
    assert outcomes["passed"] >= 40 and "failed" not in outcomes and "errors" not in outcomes
