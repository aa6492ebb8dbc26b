"""The application layer, fibtui.services: the CLI (fibtui/verbs) and the TUI (fibtui/ui) plan,
start, resume and decide runs through it alone, and what it holds is defined once, there.

Read statically with ``ast`` (every import, those inside functions and under ``if TYPE_CHECKING:``
included), as tests/test_layers.py reads the layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_import_cycles import import_graph

REPO = Path(__file__).resolve().parents[1]

#: what the upper layers reach only through fibtui.services: the run set-up the runners keep
#: (fibtui.services.runs names it) and the decisions that used to live in the core
BEHIND_SERVICES = ("fibtui.runners.session", "fibtui.core.decisions")
#: the application's run orchestration: defined in fibtui/services/runs.py and nowhere else
RUN_SERVICES = ("prepare_run", "prepare_resume", "prepare_retry", "refuse_unsupported")
#: the decisions of a round: defined in fibtui/services/decide.py and nowhere else
DECISIONS = ("compare_loaded", "run_verdict", "adaptive_rule", "band_shares", "score_numerators")


def _imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports from (``from a.b import c``: ``a.b`` and ``a.b.c``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _upper_files() -> list[Path]:
    return sorted([*(REPO / "fibtui/verbs").rglob("*.py"), *(REPO / "fibtui/ui").rglob("*.py")])


def _defined_at_top(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_the_cli_and_the_tui_plan_and_decide_only_through_services() -> None:
    files = _upper_files()
    assert any(p.name == "run.py" for p in files) and any(p.name == "app.py" for p in files)
    found = [
        f"{p.relative_to(REPO)} imports {m}"
        for p in files
        for m in sorted(_imported_modules(p))
        if m in BEHIND_SERVICES or m.startswith(tuple(b + "." for b in BEHIND_SERVICES))
    ]
    assert not found, "import these through fibtui.services:\n" + "\n".join(found)


def test_the_verbs_and_the_ui_do_reach_the_services() -> None:
    """The graph sees the services as the CLI's and the TUI's own dependencies: ``fibtui run``,
    ``fibtui compare``, ``fibtui promote`` and the Runs and Promotion panes."""
    graph = import_graph()
    assert "fibtui.services.runs" in graph and "fibtui.services.decide" in graph
    for module, service in (
        ("fibtui.verbs.run", "fibtui.services.runs"),
        ("fibtui.verbs.run", "fibtui.services.decide"),
        ("fibtui.verbs.compare", "fibtui.services.decide"),
        ("fibtui.verbs.decide", "fibtui.services.decide"),
        ("fibtui.ui.panes.runs_launch", "fibtui.services.runs"),
        ("fibtui.ui.panes.runs", "fibtui.services.decide"),
        ("fibtui.ui.panes.promotion", "fibtui.services.decide"),
    ):
        assert service in graph[module], f"{module} does not use {service}"
    # nothing below the application layer reaches up to it
    below = ("fibtui.core", "fibtui.worker", "fibtui.runners")
    up = sorted(
        f"{m} imports {d}"
        for m, deps in graph.items()
        if m.startswith(below)
        for d in deps
        if d.startswith("fibtui.services")
    )
    assert not up, up


def test_each_service_is_defined_once_in_its_module() -> None:
    assert not (REPO / "fibtui/core/decisions.py").exists()
    owners: dict[str, list[str]] = {}
    for path in sorted((REPO / "fibtui").rglob("*.py")):
        for name in _defined_at_top(path) & {*RUN_SERVICES, *DECISIONS}:
            owners.setdefault(name, []).append(path.relative_to(REPO).as_posix())
    for name in RUN_SERVICES:
        assert owners.get(name) == ["fibtui/services/runs.py"], (name, owners.get(name))
    for name in DECISIONS:
        assert owners.get(name) == ["fibtui/services/decide.py"], (name, owners.get(name))


def test_the_run_service_names_the_runners_own_set_up() -> None:
    """``fibtui.services.runs`` hands the CLI and the TUI the runners' RunOptions, PreparedRun and
    engine config themselves (one definition, in fibtui.runners.session), and ``prepare_run``
    builds on them."""
    import inspect

    from fibtui.runners import session
    from fibtui.services import runs

    for name in ("RunOptions", "PreparedRun", "check_backend", "engine_config", "profile_request"):
        assert getattr(runs, name) is getattr(session, name), name
        assert name in runs.__all__
    assert set(RUN_SERVICES) <= set(runs.__all__)
    assert all(name not in vars(session) for name in RUN_SERVICES)
    assert inspect.signature(runs.prepare_run).return_annotation == "PreparedRun"


def test_the_modal_doctor_prepares_its_gate_through_the_service_it_is_given() -> None:
    """A runner may not import the services: ``run_doctor`` takes the preparer, and ``fibtui
    modal doctor`` passes :func:`fibtui.services.runs.prepare_run`."""
    import inspect

    from fibtui.runners import modal_doctor

    param = inspect.signature(modal_doctor.run_doctor).parameters["prepare"]
    assert param.kind is inspect.Parameter.KEYWORD_ONLY and param.default is inspect.Parameter.empty
    verb = (REPO / "fibtui/verbs/modal.py").read_text(encoding="utf-8")
    assert "prepare=prepare_run" in verb
    assert "fibtui.services.runs" in _imported_modules(REPO / "fibtui/verbs/modal.py")


#: core modules that still run git themselves (issue 35, item 6: not moved yet; the list only
#: shrinks): the demo workspace's first commit, the reference repositories of recon, and the
#: submission's tag and push (fibtui.runners.parity reads its pack_solution)
GIT_IN_CORE_STILL = ("fibtui/core/demo.py", "fibtui/core/recon.py", "fibtui/core/submission.py")


def test_git_is_run_only_by_the_application_layer() -> None:
    """The archive's git operations are one module, fibtui/services/archive/vcs.py: the archive's
    domain (core/archive) reads and builds the records but never runs git or changes the
    workspace."""
    importers = sorted(
        path.relative_to(REPO).as_posix()
        for path in (REPO / "fibtui").rglob("*.py")
        if {"git", "git.exc"} & _imported_modules(path)
        or any(m.startswith("git.") for m in _imported_modules(path))
    )
    assert importers == sorted(["fibtui/services/archive/vcs.py", *GIT_IN_CORE_STILL]), importers
    core_archive = {p.name for p in (REPO / "fibtui/core/archive").glob("*.py")}
    assert core_archive == {
        "__init__.py",
        "layout.py",
        "markdown.py",
        "report.py",
        "rounds.py",
        "run_data.py",
    }, core_archive
