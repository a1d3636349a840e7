"""Every error the package raises names its reason from the one enumeration.

Read from the source: each construction of a taxonomy error in the package
(the emulators, which answer on the wire and raise none, aside) must give as its
detail a member of :class:`managoat_sandbox.reasons.Reason` — ``Reason.X``, one of
the module's constants, a ``Reason`` returned by one of its functions — a
``Capability`` (what a ``NotSupported`` names), a parameter the function
declares as a ``Reason``, or the detail of an error it re-raises. A string or a
tuple spelled at the raise site fails, naming the place.
"""

from __future__ import annotations

import ast
import unittest
from collections.abc import Iterator
from pathlib import Path

from managoat_sandbox import errors, reasons

PACKAGE = Path(__file__).resolve().parent.parent / "managoat_sandbox"

#: Taxonomy classes whose first argument is a detail (``RateLimited`` takes the
#: provider's delay, not a reason; ``ProviderError`` takes the provider first).
_BUILT_FROM_A_REASON = {
    name
    for name in errors.__all__
    if name not in {"RateLimited", "ProviderError", "SandboxError", "UnknownProvider"}
}
_REASON_FUNCTIONS = {"timed_out", "transport_failed", "unconfirmed"}


def _sources() -> Iterator[Path]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if "emulators" not in path.relative_to(PACKAGE).parts:
            yield path


def _name_of(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _reason_parameters(function: ast.AST | None) -> set[str]:
    if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        return set()
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    return {
        argument.arg
        for argument in every
        if argument.annotation is not None and "Reason" in ast.unparse(argument.annotation)
    }


def _names_a_reason(node: ast.expr, parameters: set[str]) -> bool:
    if isinstance(node, ast.Attribute):
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in {"Reason", "reasons", "Capability"}:
            return owner.id != "reasons" or node.attr.isupper()
        return node.attr in {"detail", "reason"}
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return func.id == "Reason"
        return (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "reasons"
            and func.attr in _REASON_FUNCTIONS
        )
    return isinstance(node, ast.Name) and node.id in parameters


def _unnamed(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(), str(path))
    enclosing: dict[ast.AST, ast.AST] = {}
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            enclosing[child] = parent
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _name_of(node)
        if name == "ProviderError":
            detail = node.args[1] if len(node.args) > 1 else None
        elif name in _BUILT_FROM_A_REASON:
            detail = node.args[0] if node.args else None
        else:
            continue
        function: ast.AST | None = enclosing.get(node)
        while function is not None and not isinstance(
            function, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
        ):
            function = enclosing.get(function)
        if detail is None or not _names_a_reason(detail, _reason_parameters(function)):
            shown = "nothing" if detail is None else ast.unparse(detail)
            yield f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {name}({shown})"


class EveryRaiseNamesAReason(unittest.TestCase):
    def test_every_taxonomy_error_in_the_package_is_built_from_a_reason(self) -> None:
        unnamed = [place for path in _sources() for place in _unnamed(path)]
        self.assertEqual(unnamed, [], "errors built from a spelled-out detail")

    def test_the_module_constants_are_the_enumerations_members(self) -> None:
        constants = [name for name in reasons.__all__ if name.isupper() and name != "FIELDS"]
        for name in constants:
            with self.subTest(name=name):
                self.assertIs(getattr(reasons, name), reasons.Reason[name])

    def test_every_shape_names_only_known_fields(self) -> None:
        for reason in reasons.Reason:
            with self.subTest(reason=reason):
                fields = [name.rstrip("?") for name in reasons.shape(reason)]
                self.assertLessEqual(set(fields), set(reasons.FIELDS))
                self.assertEqual(fields, sorted(fields, key=reasons.FIELDS.index))


if __name__ == "__main__":
    unittest.main()
