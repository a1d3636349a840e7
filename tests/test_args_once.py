"""Arguments are checked once, in one place: the facade passes every contract parameter
through ``_args.normalised`` (one check per parameter name), and no adapter checks them
again."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox import _args

PACKAGE = Path(sandbox.__file__).parent

#: Facade functions whose parameters all go through ``normalised`` (the others take only
#: a provider, a handle or a command, or have their own documented rule).
NORMALISED = (
    "build_handle",
    "create",
    "create_new",
    "exec",
    "spawn",
    "attach",
    "write_file",
    "read_file",
    "write_stdin",
    "create_checkpoint",
)
#: Parameters that are not arguments to check: what the call dispatches on.
DISPATCH = {"provider", "handle", "command", "opts"}


@pytest.mark.parametrize("operation", NORMALISED)
def test_every_parameter_of_the_facade_has_its_one_check(operation: str) -> None:
    parameters = set(inspect.signature(getattr(sandbox, operation)).parameters) - DISPATCH
    if operation == "create_new":
        parameters.discard("timeout")  # a bounded operation's limit is its adapter's
    missing = parameters - set(_args.CHECKS)
    assert not missing, f"{operation}: no check for {sorted(missing)}"


def test_no_adapter_checks_the_contract_arguments_again() -> None:
    pattern = re.compile(
        r"_args\.(command_name|str_args|env_map|flag|session_id|"
        r"flatten_bytes|file_path|dir_path|max_bytes|optional_seconds|"
        r"optional_str|file_mode|sandbox_name|normalised)\("
    )
    found = []
    for directory in ("providers", "testing"):
        for path in sorted((PACKAGE / directory).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line):
                    found.append(f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}")
    # local's own rule for names that become one path component builds on the generic one.
    allowed = {"providers/local/layout.py"}
    assert [f for f in found if f.split(":")[0] not in allowed] == []


def test_normalised_checks_by_parameter_name() -> None:
    clean = _args.normalised(args=["a"], data=["x", b"y"], timeout=float("inf"), stdin=True)
    assert clean == {"args": ("a",), "data": b"xy", "timeout": None, "stdin": True}
    with pytest.raises(TypeError):
        _args.normalised(stdin="yes")
    with pytest.raises(KeyError):
        _args.normalised(no_such_parameter=1)
