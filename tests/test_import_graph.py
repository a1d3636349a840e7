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
submodules is how a package presents them, not a circle). A module imported
from a string (``importlib.import_module``, the registry's ``"module:Class"``
table) is an edge too: every string constant of a module that names one of the
package's modules (``"managoat_sandbox.testing.fake:Fake"``) counts.

Beyond circles, :data:`LAYERS` says what each layer may import, so an arrow
from a lower layer up, or between providers, fails with its place.
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


def _named_in_string(node: ast.AST, modules: Mapping[str, object]) -> str | None:
    """The package module a string names as an import: ``"pkg.mod:Attr"`` (an entry
    point's form), or the argument of an ``import_module`` call. Other strings (a
    logger's name, a message) are not imports."""
    if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module"):
        argument = node.args[0] if node.args else None
        if isinstance(argument, ast.Constant) and argument.value in modules:
            return str(argument.value)
        return None
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return None
    name, colon, attr = node.value.partition(":")
    return name if colon and attr.isidentifier() and name in modules else None


def import_graph(root: Path) -> dict[str, frozenset[str]]:
    """Module → the package's modules it imports (see the module docstring)."""
    modules = _modules(root)
    graph: dict[str, frozenset[str]] = {}
    for module, (path, is_package) in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            named = _named_in_string(node, modules)
            if named is not None:
                targets.add(named)
            elif isinstance(node, ast.ImportFrom):
                names = list(_imported(module, is_package, node))
                base, members = names[0], names[1:]
                targets.update(m if m in modules else base for m in members)
            elif isinstance(node, ast.Import):
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


#: Each layer and the layers it may import (its own modules always). A module's layer
#: is the first entry whose prefix it starts with; the rest of the package is the core
#: (the contract, the facade and the shared machinery providers build on).
PREFIX = "managoat_sandbox."
LAYERS: dict[str, frozenset[str]] = {
    # The isolation engine runs inside the sandbox agent: self-contained.
    "_engine": frozenset(),
    # Emulators are built from the providers' references, never from the adapters
    # (their commands run on the engine).
    "emulators": frozenset({"_engine"}),
    # A provider builds on the core; only `local` runs the engine; no provider
    # reaches into another (`providers._endpoint` is shared by the hosted ones).
    "providers._endpoint": frozenset({"core"}),
    "providers.local": frozenset({"core", "_engine", "_trees"}),
    "providers.sprites": frozenset({"core", "_trees", "providers._endpoint"}),
    "providers.e2b": frozenset({"core", "_trees", "providers._endpoint"}),
    "providers.daytona": frozenset({"core", "_trees", "providers._endpoint"}),
    "_trees": frozenset({"core"}),
    "testing": frozenset({"core", "_trees"}),
    "_cli": frozenset({"core"}),
    "pytest_plugin": frozenset({"core", "testing", "emulators"}),
}
#: Core modules any layer may import: the one secret sanitiser, which imports nothing
#: of the package (the emulators' request log redacts by its rule).
SHARED = frozenset({f"{PREFIX}_secrets"})
#: Core modules allowed to reach up, and to which layers: the registry names the
#: reference adapter (by string, imported on first use; the providers' adapters it
#: learns from their declarations), the CLI entry its commands, the transfers API
#: its tree machinery.
CORE_REACHES: dict[str, frozenset[str]] = {
    "registry": frozenset({"testing"}),
    "cli": frozenset({"_cli"}),
    "transfers": frozenset({"_trees"}),
}


def layer_of(module: str) -> str:
    """The layer of a module of the package (see :data:`LAYERS`)."""
    name = module.removeprefix(PREFIX)
    for layer in sorted(LAYERS, key=len, reverse=True):
        if name == layer or name.startswith(layer + "."):
            return layer
    return "core"


def forbidden_imports(graph: Graph) -> list[str]:
    """Every edge from a layer to one it may not import, as ``"a -> b"``."""
    found = []
    for module, targets in sorted(graph.items()):
        source = layer_of(module)
        allowed = LAYERS.get(source)
        if allowed is None:
            allowed = CORE_REACHES.get(module.removeprefix(PREFIX), frozenset()) | {"core"}
        for target in sorted(targets):
            wanted = layer_of(target)
            if wanted != source and wanted not in allowed and target not in SHARED:
                found.append(f"{module} -> {target}")
    return found


def test_each_layer_imports_only_what_it_may() -> None:
    graph = import_graph(PACKAGE_DIR)
    assert forbidden_imports(graph) == []
    assert all(not graph[shared] for shared in SHARED), "a shared module imports the package"


def test_an_import_from_a_string_is_an_edge_and_a_layer_breach_is_named(tmp_path: Path) -> None:
    graph = import_graph(PACKAGE_DIR)
    assert f"{PREFIX}testing.fake" in graph[f"{PREFIX}registry"]
    breach = {
        f"{PREFIX}providers.e2b.adapter": frozenset({f"{PREFIX}providers.sprites.api"}),
        f"{PREFIX}emulators.e2b.envd": frozenset({f"{PREFIX}providers.e2b.envd"}),
        f"{PREFIX}errors": frozenset({f"{PREFIX}facade"}),
    }
    assert forbidden_imports(breach) == [
        f"{PREFIX}emulators.e2b.envd -> {PREFIX}providers.e2b.envd",
        f"{PREFIX}providers.e2b.adapter -> {PREFIX}providers.sprites.api",
    ]
