"""``fibtui run --quick`` (``--workloads quick``): the quick gate from the CLI (fibtui.core.quick,
the same selection as the TUI's g; issue 38 item 8)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli


def test_the_cli_quick_gate_is_the_tuis(demo_ws: Path, monkeypatch) -> None:
    """``--quick`` runs what the TUI's g runs on the CPU: core.quick.quick_gate_for, the smallest
    workload of each band within the budget, the rest named on one stderr line."""
    from fibtui.core import quick
    from fibtui.core.workspace import open_workspace

    gate = quick.quick_gate_for(open_workspace(demo_ws), solutions=1)
    assert gate.workloads and gate.excluded  # the GDN demo's big batches are left out
    assert gate.estimate_s <= gate.budget_s or len(gate.workloads) == 1
    seen: list = []
    real = quick.quick_gate_for

    def spy(ws, definition=None, **kw):
        seen.append(real(ws, definition, **kw))
        return seen[-1]

    monkeypatch.setattr(quick, "quick_gate_for", spy)
    from fibtui.runners.session import RunOptions
    from fibtui.verbs.run import _representatives

    options = RunOptions(backend="interpreter", workloads="quick")
    chosen = _representatives(open_workspace(demo_ws), options)
    assert chosen == seen[0].workloads and options.workloads == "rep"


def test_quick_goes_without_workloads(capsys, demo_ws: Path) -> None:
    code, out, err = run_cli(
        capsys, "run", "--quick", "--workloads", "all", "--workspace", str(demo_ws)
    )
    assert code == 2 and "--quick" in err and len(err.strip().splitlines()) == 1
