"""``fibtui run --quick`` (``--workloads quick``): the quick gate from the CLI (fibtui.core.quick,
a minimal selection beside the TUI's; issue 38 item 8)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli


def test_the_quick_gate_is_the_smallest_of_each_band_within_its_budget(demo_ws: Path) -> None:
    from fibtui.core import regimes
    from fibtui.core.plan import workspace_regimes
    from fibtui.core.quick import select_quick
    from fibtui.core.workspace import open_workspace

    report = workspace_regimes(open_workspace(demo_ws)).report
    smallest = regimes.smallest_per_band(report)
    gate = select_quick(report, solutions=2, budget_s=20.0, base_s=3.7)
    assert gate.uuids and set(gate.uuids) <= set(smallest)
    assert gate.uuids == [u for u in smallest if u in gate.uuids]  # band order kept
    assert gate.estimated_s <= 20.0
    assert {u for u, _, _ in gate.excluded} == set(smallest) - set(gate.uuids)
    assert gate.excluded and "past the 20 s budget" in gate.describe_excluded()
    assert "batch_size=64" in gate.describe_excluded()  # the GDN demo's 384 s gate left these in
    # the smallest band is always there, even when it alone is over the budget
    assert select_quick(report, solutions=2, budget_s=0.1).uuids == [smallest[0]]
    assert len(select_quick(report, budget_s=1e9).uuids) == len(smallest)


def test_quick_goes_without_workloads(capsys, demo_ws: Path) -> None:
    code, out, err = run_cli(
        capsys, "run", "--quick", "--workloads", "all", "--workspace", str(demo_ws)
    )
    assert code == 2 and "--quick" in err and len(err.strip().splitlines()) == 1
