"""Without the ``emulators`` extra, importing or starting an emulator fails with one line
naming the extra: a ``ModuleNotFoundError`` whose message is ``MISSING_EXTRA``, the
failed import chained. Nothing is uninstalled: each check runs in a subprocess where
the extra's modules cannot be imported."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from managoat_sandbox.emulators import MISSING_EXTRA

#: Makes every import of the modules named in argv[1] (comma-separated) fail, with a
#: finder (``finder``) or a ``None`` in ``sys.modules`` (``none``, argv[2]), runs the
#: statement argv[3] and prints, as JSON, what it raised.
PROBE = """
import json, sys

blocked = sys.argv[1].split(",")

class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

if sys.argv[2] == "finder":
    sys.meta_path.insert(0, Blocked())
else:
    for name in blocked:
        sys.modules[name] = None
try:
    exec(sys.argv[3])
except BaseException as error:
    cause = error.__cause__
    print(json.dumps({
        "type": [kind.__name__ for kind in type(error).__mro__],
        "message": str(error),
        "name": getattr(error, "name", None),
        "cause": None if cause is None else [type(cause).__name__, cause.name],
    }))
else:
    print(json.dumps(None))
"""

IMPORTS = [
    "import managoat_sandbox.emulators.daytona",
    "import managoat_sandbox.emulators.e2b",
    "import managoat_sandbox.emulators.sprites",
    "from managoat_sandbox.emulators.daytona import DaytonaEmulator; DaytonaEmulator().start()",
    "from managoat_sandbox.emulators import Emulator",
]


def _probe(blocked: str, how: str, statement: str) -> object:
    ran = subprocess.run(
        [sys.executable, "-c", PROBE, blocked, how, statement],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(ran.stdout)


@pytest.mark.parametrize("how", ["finder", "none"])
@pytest.mark.parametrize("statement", IMPORTS)
def test_an_emulator_without_aiohttp_is_one_line_naming_the_extra(statement: str, how: str) -> None:
    raised = _probe("aiohttp", how, statement)
    assert isinstance(raised, dict)
    assert "ModuleNotFoundError" in raised["type"]
    assert raised["message"] == MISSING_EXTRA
    assert len(raised["message"].splitlines()) == 1
    assert raised["name"] == "aiohttp"
    assert raised["cause"] == ["ModuleNotFoundError", "aiohttp"]


def test_an_emulator_without_re2_is_the_same_line() -> None:
    raised = _probe("re2", "finder", IMPORTS[0])
    assert isinstance(raised, dict)
    assert (raised["message"], raised["name"]) == (MISSING_EXTRA, "re2")


def test_the_package_itself_imports_without_the_extra() -> None:
    assert _probe("aiohttp,re2", "finder", "import managoat_sandbox.emulators") is None


def test_the_command_line_without_re2_is_one_line_naming_the_extra() -> None:
    statement = (
        "import runpy; sys.argv = ['x', 'daytona', '--port', '0']; "
        "runpy.run_module('managoat_sandbox.emulators', run_name='__main__')"
    )
    ran = subprocess.run(
        [sys.executable, "-c", PROBE, "re2", "finder", statement],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.stderr.splitlines() == [MISSING_EXTRA]
    assert json.loads(ran.stdout)["type"][0] == "SystemExit"
