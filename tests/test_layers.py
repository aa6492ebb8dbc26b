"""The layer contract, proven statically: cli > verbs > ui > services > runners > worker > core.

A module may import its own layer and any layer below it, never one above. The graph is the one
tests/test_import_cycles.py reads with ``ast`` (imports inside functions count; imports under
``if TYPE_CHECKING:`` do not, since they never run). ``fibtui.resources`` and
``fibtui.verdict_colours`` are leaves beside core (paths of bundled files, colour names): they
may import nothing of fibtui's.
"""

from __future__ import annotations

from tests.test_import_cycles import import_graph

#: lowest first; ``fibtui.services`` is the application layer shared by the CLI and the TUI
LAYERS = (
    "fibtui.core",
    "fibtui.worker",
    "fibtui.runners",
    "fibtui.services",
    "fibtui.ui",
    "fibtui.verbs",
    "fibtui.cli",
)
LEAVES = ("fibtui.resources", "fibtui.verdict_colours")
TOP = ("fibtui", "fibtui.__main__")


def layer(module: str) -> int | None:
    for rank, name in enumerate(LAYERS):
        if module == name or module.startswith(name + "."):
            return rank
    if module in LEAVES:
        return -1
    return None


def violations(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for module, deps in sorted(graph.items()):
        rank = layer(module)
        if rank is None:
            continue
        for dep in sorted(deps):
            other = layer(dep)
            if other is not None and (other > rank or (rank == -1 and dep.startswith("fibtui"))):
                out.append(f"{module} ({LAYERS[rank] if rank >= 0 else 'leaf'}) imports {dep}")
    return out


def test_every_module_belongs_to_a_layer() -> None:
    graph = import_graph()
    loose = sorted(m for m in graph if layer(m) is None and m not in TOP)
    assert not loose, f"modules outside every layer (add them to LAYERS or LEAVES): {loose}"


def test_no_module_imports_a_layer_above_its_own() -> None:
    found = violations(import_graph())
    assert not found, "layer contract broken:\n" + "\n".join(found)


def test_the_contract_catches_an_upward_import() -> None:
    graph = {
        "fibtui.core.stats": {"fibtui.ui.app"},
        "fibtui.worker.engine": {"fibtui.core.stats"},
        "fibtui.resources": {"fibtui.core.stats"},
        "fibtui.verbs.run": {"fibtui.runners.local", "fibtui.ui.app"},
    }
    assert violations(graph) == [
        "fibtui.core.stats (fibtui.core) imports fibtui.ui.app",
        "fibtui.resources (leaf) imports fibtui.core.stats",
    ]
