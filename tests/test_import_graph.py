"""The package's modules import each other without circles.

The graph is built from the source (``ast``), not by importing anything. An
edge is every ``import``/``from … import`` statement of a module, wherever
it stands: at module level, inside a function (a lazy import), or under
``if TYPE_CHECKING:``. The last two count on purpose: moving an import into
a function or behind ``TYPE_CHECKING`` hides a circle from the interpreter,
not from the design, which stays two modules that each need the other.

``from pkg import name`` is an edge to the submodule ``pkg.name`` when there
is one, else to ``pkg`` itself. The implicit import of a module's parent
packages is not an edge (a package's ``__init__`` importing its own
submodules is how a package presents them, not a circle). Imports made from
a string (``importlib.import_module``) are not seen.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import managoat_sandbox

Graph = Mapping[str, frozenset[str]]

PACKAGE_DIR = Path(managoat_sandbox.__file__).parent


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Every module under package directory ``root``: dotted name → (file, is a package)."""
    modules: dict[str, tuple[Path, bool]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        modules[".".join(parts)] = (path, is_package)
    return modules


def _imported(module: str, is_package: bool, node: ast.AST) -> Iterator[str]:
    """The dotted names an import statement names (resolved when relative)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            anchor = module.split(".")
            anchor = anchor if is_package else anchor[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, *([node.module] if node.module else [])])
        else:
            base = node.module or ""
        yield base
        yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph(root: Path) -> dict[str, frozenset[str]]:
    """Module → the package's modules it imports (see the module docstring)."""
    modules = _modules(root)
    graph: dict[str, frozenset[str]] = {}
    for module, (path, is_package) in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                names = list(_imported(module, is_package, node))
                base, members = names[0], names[1:]
                targets.update(m if m in modules else base for m in members)
            else:
                targets.update(_imported(module, is_package, node))
        graph[module] = frozenset(_owner(t, modules) for t in targets) - {"", module}
    return graph


def _owner(name: str, modules: Mapping[str, object]) -> str:
    """The deepest module of the package that ``name`` is or lies in; "" if none."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def circles(graph: Graph) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def one_cycle(graph: Graph, component: frozenset[str]) -> list[str]:
    """A closed path through ``component``'s modules, for the failure message."""
    start = min(component)
    path, seen = [start], {start}
    while True:
        following = sorted(graph[path[-1]] & component)
        if start in following and len(path) > 1:
            return [*path, start]
        step = next((m for m in following if m not in seen), None)
        if step is None:  # every neighbour seen: close the loop at the first one
            again = following[0]
            return [*path[path.index(again) :], again]
        path.append(step)
        seen.add(step)


def _describe(graph: Graph, components: list[frozenset[str]]) -> str:
    """One closed path per circle, then every module of the circle."""
    return "\n".join(
        f"{' -> '.join(one_cycle(graph, c))}\n  (all of: {', '.join(sorted(c))})"
        for c in components
    )


def test_the_package_has_no_import_circle() -> None:
    graph = import_graph(PACKAGE_DIR)
    found = circles(graph)
    assert not found, "import circles:\n" + _describe(graph, found)


def test_the_graph_holds_the_imports_that_once_closed_circles() -> None:
    graph = import_graph(PACKAGE_DIR)
    daytona = "managoat_sandbox.emulators.daytona"
    engine = "managoat_sandbox._engine"
    assert graph[f"{daytona}.emulator"] >= {f"{daytona}.api", f"{daytona}.toolbox"}
    assert f"{engine}.agent_process" in graph[f"{engine}.agent"]


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_circle_behind_type_checking_or_in_a_function_is_found(tmp_path: Path) -> None:
    root = _write(
        tmp_path / "pkg",
        {
            "__init__.py": "from .a import A\n",
            "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n",
            "b.py": "def f():\n    from . import c\n",
            "c.py": "import pkg.sub.d\n",
            "sub/__init__.py": "",
            "sub/d.py": "from ..a import A\n",
            "e.py": "from . import a\n",
        },
    )
    graph = import_graph(root)
    assert graph["pkg.sub.d"] == {"pkg.a"}
    assert graph["pkg.e"] == {"pkg.a"}
    assert circles(graph) == [frozenset({"pkg.a", "pkg.b", "pkg.c", "pkg.sub.d"})]
    assert one_cycle(graph, circles(graph)[0]) == ["pkg.a", "pkg.b", "pkg.c", "pkg.sub.d", "pkg.a"]


def test_a_package_importing_its_own_submodules_is_no_circle(tmp_path: Path) -> None:
    root = _write(
        tmp_path / "pkg",
        {
            "__init__.py": "from .a import A\nfrom . import b\n",
            "a.py": "from .b import B\n",
            "b.py": "import os\n",
        },
    )
    graph = import_graph(root)
    assert graph["pkg"] == {"pkg.a", "pkg.b"}
    assert circles(graph) == []
