"""``managoat_sandbox.exec`` is public — to type checkers too — while a star import
leaves Python's builtin ``exec`` alone."""

from __future__ import annotations

import ast
from pathlib import Path

import managoat_sandbox
from managoat_sandbox import facade

PACKAGE_INIT = Path(managoat_sandbox.__file__)


def test_exec_is_the_facade_s_and_kept_out_of_a_star_import() -> None:
    assert managoat_sandbox.exec is facade.exec
    assert "exec" not in managoat_sandbox.__all__
    namespace: dict[str, object] = {}
    exec("from managoat_sandbox import *", namespace)
    assert "exec" not in namespace


def test_exec_is_re_exported_in_the_form_strict_type_checkers_accept() -> None:
    """Outside ``__all__``, only ``from .facade import exec as exec`` tells mypy --strict
    (no implicit re-export) that ``managoat_sandbox.exec`` is public."""
    tree = ast.parse(PACKAGE_INIT.read_text())
    aliases = [
        alias
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module == "facade" and node.level == 1
        for alias in node.names
        if alias.name == "exec"
    ]
    assert [alias.asname for alias in aliases] == ["exec"]
