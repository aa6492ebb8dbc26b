"""The app and its run controller call panes by typed methods, never by a method's name in a
string (``getattr(pane, "refresh_list")()``, ``call_later("analyze")``): a renamed method then
fails the type check instead of failing at run time, on the one key that calls it.

Read from the source (ast), every module of fibtui/ui: the app's shell (app.py, run_keys.py,
palette.py, theming.py), the run controller (controller.py, gates.py, watch.py) and the panes.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
UI = REPO / "fibtui" / "ui"
#: the modules the brief names first: they must exist (a rename must move this test along)
SHELL_AND_CONTROLLER = ("app.py", "controller.py", "gates.py", "watch.py", "run_keys.py")
#: attribute access by a name held in a string
BY_NAME = {"getattr", "setattr", "hasattr", "delattr", "methodcaller", "attrgetter"}
#: Textual calls that take a callable, given a string instead (an action name, a method name)
CALLBACK_TAKERS = {
    "call_later",
    "call_after_refresh",
    "call_next",
    "call_from_thread",
    "set_timer",
    "set_interval",
    "run_worker",
    "when_built",
    "run_action",
}


def _by_string(source: str, name: str) -> list[str]:
    """Each use in ``source`` of getattr and its kin, and each Textual call handed a string where
    it takes a callable."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename=name)):
        named = (
            node.id
            if isinstance(node, ast.Name)
            else node.attr
            if isinstance(node, ast.Attribute)
            else None
        )
        if named in BY_NAME:  # called, or handed on (call_from_thread(setattr, ...))
            found.append((node.lineno, f"{name}:{node.lineno}: {named}"))
            continue
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = (
            func.id
            if isinstance(func, ast.Name)
            else func.attr
            if isinstance(func, ast.Attribute)
            else ""
        )
        if called in CALLBACK_TAKERS and any(
            isinstance(arg, ast.Constant) and isinstance(arg.value, str)
            for arg in node.args[: 2 if called == "set_timer" else 1]
        ):
            found.append((node.lineno, f"{name}:{node.lineno}: {called} with a string"))
    return [text for _, text in sorted(found)]


def test_the_finder_sees_a_call_by_name() -> None:
    planted = (
        "def f(app, pane):\n"
        '    getattr(pane, "refresh_list")()\n'
        '    app.call_from_thread(setattr, app, "_history", 1)\n'
        '    app.call_later("analyze")\n'
        '    app.set_timer(0.2, "toggle")\n'
        "    pane.when_built(pane.reload)\n"
        '    app.notify("a string that is only a message")\n'
    )
    assert _by_string(planted, "planted.py") == [
        "planted.py:2: getattr",
        "planted.py:3: setattr",
        "planted.py:4: call_later with a string",
        "planted.py:5: set_timer with a string",
    ]


def test_no_ui_module_calls_a_pane_by_a_method_name_in_a_string() -> None:
    modules = sorted(UI.rglob("*.py"))
    names = {p.name for p in modules}
    assert set(SHELL_AND_CONTROLLER) <= names, sorted(names)
    found = [
        hit
        for path in modules
        for hit in _by_string(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    ]
    assert found == [], "\n".join(found)


def test_no_ui_module_is_over_600_lines() -> None:
    long = {
        str(p.relative_to(REPO)): n
        for p in UI.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600
    }
    assert long == {}, long
