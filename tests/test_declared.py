"""Each built-in provider declares itself beside its code, and the central places read the
declarations: the registry's built-ins, the settings' rules, defaults and environment
variables, the emulators' command line — without importing any adapter to do so."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

from managoat_sandbox import _declared, config, registry
from managoat_sandbox._setting_rules import LIBRARY, RULES
from managoat_sandbox.contract import Adapter
from managoat_sandbox.emulators.__main__ import _emulated


def test_every_provider_package_is_found_and_names_its_adapter() -> None:
    found = _declared.declarations()
    assert sorted(found) == ["daytona", "e2b", "local", "sprites"]
    for name, declaration in found.items():
        module, _, attribute = declaration.target.partition(":")
        adapter = getattr(importlib.import_module(module), attribute)
        assert issubclass(adapter, Adapter) and adapter.provider == name
        assert registry.BUILTINS[name] == declaration.target


def test_the_central_tables_are_the_declared_settings() -> None:
    declared = {
        (name, key): setting
        for name, declaration in _declared.declarations().items()
        for key, setting in declaration.settings.items()
    }
    assert dict(RULES) == {**LIBRARY, **declared}
    assert config.ENV_VARS[("sprites", "token")] == "SPRITES_TOKEN"
    assert {key for key, setting in declared.items() if setting.env} <= set(config.ENV_VARS)
    assert config.get("e2b", "template") == "base"  # a declared default
    assert config.get("retry", "attempts") == 3  # a library setting's default


def test_reading_the_declarations_imports_no_adapter() -> None:
    probe = (
        "import json, sys\n"
        "from managoat_sandbox import config, registry\n"
        "config.get('local', 'root'); sorted(registry.BUILTINS)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.endswith('.adapter'))))\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(ran.stdout) == []


def test_the_emulators_command_line_serves_each_emulator_package() -> None:
    assert _emulated() == ["daytona", "e2b", "sprites"]
