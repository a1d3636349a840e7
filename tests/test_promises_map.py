"""docs/promises.md, the map from each README promise to the tests that hold it, cannot rot.

Every test the map names must exist (found in the source, so a module whose
optional dependency is missing still counts: its tests exist, they are only
skipped); every section it names must be a README heading; and every README
heading must either have rows or be listed among the promises no test holds
yet. The one heading that promises nothing is :data:`NO_PROMISES`.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "docs" / "promises.md"
README = ROOT / "README.md"
NO_PROMISES = {"Licence"}

#: A test's pytest node id in backticks: ``path.py::function`` or ``path.py::Class::method``.
NODE = re.compile(r"`((?:tests|managoat_sandbox)/[\w/]+\.py(?:::\w+){1,2})`")
HEADING = re.compile(r"^#{1,6} +(.+?) *$")
UNHELD = re.compile(r"^- \*\*(.+?)\*\*")


def rows() -> list[tuple[str, list[str]]]:
    """Each table row's README section and the node ids in its tests column."""
    found = []
    for line in MAP.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 3 or set(cells[0]) <= {"-"}:
            continue
        if cells[0] == "README section":
            continue
        found.append((cells[0], NODE.findall(cells[2])))
    return found


def headings(text: str) -> list[str]:
    """The markdown headings of ``text``, outside fenced code blocks."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (match := HEADING.match(line)):
            found.append(match[1])
    return found


@cache
def module(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def source_of(importer: Path, node: ast.ImportFrom) -> Path | None:
    """The file an ``import from`` statement in ``importer`` reads, if it is in this repository."""
    base = importer.parent
    for _ in range(node.level - 1):
        base = base.parent
    if node.level == 0:
        base = ROOT
    target = base.joinpath(*(node.module or "").split(".")) if node.module else base
    for candidate in (target.with_suffix(".py"), target / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def find_class(path: Path, name: str, depth: int = 0) -> tuple[Path, ast.ClassDef] | None:
    """Where class ``name``, as seen from ``path``, is defined (following imports)."""
    if depth > 10:
        return None
    for node in module(path).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return path, node
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    source = source_of(path, node)
                    if source is not None:
                        return find_class(source, alias.name, depth + 1)
    return None


def has_method(path: Path, cls: ast.ClassDef, name: str, depth: int = 0) -> bool:
    """Whether ``cls`` defines or inherits a method ``name``."""
    if any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name
        for node in cls.body
    ):
        return True
    for base in cls.bases:
        if depth < 10 and isinstance(base, ast.Name):
            found = find_class(path, base.id)
            if found is not None and has_method(*found, name, depth + 1):
                return True
    return False


def exists(node_id: str) -> bool:
    """Whether the test ``node_id`` names is defined in the repository's source."""
    relative, *names = node_id.split("::")
    path = ROOT / relative
    if not path.is_file() or not names[-1].startswith("test"):
        return False
    if len(names) == 1:
        return any(
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == names[0]
            for node in module(path).body
        )
    found = find_class(path, names[0])
    return found is not None and found[0] == path and has_method(*found, names[1])


def test_the_map_has_rows_and_each_names_a_test() -> None:
    table = rows()
    assert len(table) >= 20
    assert [section for section, nodes in table if not nodes] == []


def test_every_named_test_exists() -> None:
    missing = [node for _, nodes in rows() for node in nodes if not exists(node)]
    assert missing == []


def test_every_readme_heading_with_promises_is_mapped_and_every_section_is_a_heading() -> None:
    readme = headings(README.read_text(encoding="utf-8"))
    mapped = {section for section, _ in rows()}
    unheld = {
        match[1]
        for line in MAP.read_text(encoding="utf-8").splitlines()
        if (match := UNHELD.match(line))
    }
    assert sorted((mapped | unheld) - set(readme)) == []
    assert sorted(set(readme) - mapped - unheld - NO_PROMISES) == []


def test_the_check_refuses_what_does_not_exist_and_follows_inheritance() -> None:
    assert exists("tests/test_promises_map.py::test_every_named_test_exists")
    assert not exists("tests/test_promises_map.py::test_no_such_test")
    assert not exists("tests/no_such_file.py::test_every_named_test_exists")
    assert not exists("tests/test_promises_map.py::rows")
    inherited = "tests/test_fake_conformance.py::FakeConformanceTest::"
    assert exists(inherited + "test_exec_returns_a_nonzero_exit_as_data")
    assert not exists(inherited + "test_no_such_conformance_test")
    assert not exists("tests/test_fake_conformance.py::NoSuchClass::test_exec_ok")
