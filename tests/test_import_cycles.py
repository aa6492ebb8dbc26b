"""No import cycle inside fibtui/, proven statically.

Every module's imports are read with ``ast``, those inside functions included (a deferred import
is still a dependency; it only hides it). An import under ``if TYPE_CHECKING:`` is left out: it
never runs, and it is the way to name a type without depending on its module. ``import a.b`` and
``from a import b`` (``b`` a module) depend on ``a.b``; ``from a.b import name`` on ``a.b``. The
implicit import of a parent package is not an edge (a package's ``__init__`` that re-exports its
modules is not a cycle with them, as long as they import each other and not the package).

Cycles that exist today outside the packages this test was written with are listed in
:data:`KNOWN_CYCLES`; a new cycle fails naming its path, and an entry that no longer exists fails
too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "fibtui"

#: Strongly connected groups of modules that import each other today. Remove an entry when its
#: cycle is gone (the test says so); never add one.
KNOWN_CYCLES: list[frozenset[str]] = []

#: Packages that must be in no cycle at all, known or not.
CYCLE_FREE = ("fibtui.core", "fibtui.runners.ncu")


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, in functions too, not under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the fibtui modules it imports."""
    modules = _modules()

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        deps: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [known(a.name) for a in node.names]
            else:
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    origin = ".".join(base + ([node.module] if node.module else []))
                else:
                    origin = node.module or ""
                targets = [
                    f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else known(origin)
                    for a in node.names
                ]
            deps.update(t for t in targets if t is not None and t != name)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected groups of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[frozenset[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(frozenset(group))
    return groups


def cycle_path(graph: dict[str, set[str]], group: frozenset[str]) -> str:
    """One cycle through a group, as ``a -> b -> a`` (the shortest back to its first module)."""
    start = min(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node] & group):
            if child == start:
                return " -> ".join([*paths[node], start])
            if child not in paths:
                paths[child] = [*paths[node], child]
                queue.append(child)
    return " <-> ".join(sorted(group))


def test_the_graph_sees_imports_inside_functions() -> None:
    graph = import_graph()
    assert (
        "fibtui.core.results.fibtui_run" in graph["fibtui.core.runs"]
    )  # imported inside latest_rows
    assert "fibtui.core.results.fib_traces" in graph["fibtui.core.results.registry"]
    assert "fibtui.core.ncu" in graph["fibtui.runners.ncu"]


def test_no_new_import_cycle() -> None:
    graph = import_graph()
    found = cycles(graph)
    new = [g for g in found if g not in KNOWN_CYCLES]
    assert not new, "import cycle(s) in fibtui/: " + "; ".join(cycle_path(graph, g) for g in new)
    gone = [sorted(g) for g in KNOWN_CYCLES if g not in found]
    assert not gone, f"cycles no longer there (drop them from KNOWN_CYCLES): {gone}"


def test_core_is_in_no_cycle() -> None:
    graph = import_graph()
    for group in cycles(graph):
        inside = sorted(m for m in group if m.startswith(CYCLE_FREE))
        assert not inside, f"{inside} in an import cycle: {cycle_path(graph, group)}"
