"""Arguments are checked once, in one place: the facade passes every contract parameter
through ``_args.normalised`` (one check per parameter name), and no adapter checks them
again."""

from __future__ import annotations

import ast
import inspect
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


#: The checks of contract arguments (each run once, by the facade).
_CHECKS = {
    "command_name",
    "str_args",
    "env_map",
    "flag",
    "session_id",
    "flatten_bytes",
    "file_path",
    "dir_path",
    "max_bytes",
    "seconds",
    "optional_seconds",
    "optional_str",
    "file_mode",
    "sandbox_name",
    "normalised",
    "termination_request",
    "bounded_timeout",
}


def _rechecks(path: Path, root: Path = PACKAGE) -> list[str]:
    """Where ``path`` checks a contract argument again: a call of one of :data:`_CHECKS`
    outside a constructor (whose parameters are the adapter's own, not the contract's),
    or a test that a ``handle`` is a ``Handle`` (the facade resolves the adapter by it)."""
    tree = ast.parse(path.read_text(), str(path))
    found: list[tuple[int, str]] = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef) or function.name == "__init__":
            continue
        for node in ast.walk(function):
            if not isinstance(node, ast.Call):
                continue
            called = ast.unparse(node.func)
            handle_test = called == "isinstance" and ast.unparse(node).startswith(
                "isinstance(handle, Handle"
            )
            if handle_test or (called.startswith("_args.") and called[6:] in _CHECKS):
                found.append((node.lineno, ast.unparse(node)))
    return [f"{path.relative_to(root)}:{line}: {text}" for line, text in sorted(found)]


def test_no_adapter_checks_the_contract_arguments_again() -> None:
    found = [
        place
        for directory in ("providers", "testing")
        for path in sorted((PACKAGE / directory).rglob("*.py"))
        for place in _rechecks(path)
    ]
    # local's own rule for names that become one path component builds on the generic one.
    allowed = {"providers/local/layout.py"}
    assert [f for f in found if f.split(":")[0] not in allowed] == []


def test_the_guard_finds_a_recheck(tmp_path: Path) -> None:
    module = tmp_path / "adapter.py"
    module.write_text(
        "class A:\n"
        "    def __init__(self, keepalive):\n"
        "        _args.seconds(keepalive)\n"
        "    def terminate_session(self, handle, session_id, timeout, mode):\n"
        "        if not isinstance(handle, Handle):\n"
        "            raise TypeError\n"
        "        _args.termination_request(session_id, timeout, mode)\n"
    )
    assert [place.split(": ")[1] for place in _rechecks(module, tmp_path)] == [
        "isinstance(handle, Handle)",
        "_args.termination_request(session_id, timeout, mode)",
    ]
