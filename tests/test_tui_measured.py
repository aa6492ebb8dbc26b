"""The panes show what a sample measured: the Runs pane's verdict line and the Promotion pane
lead with the word of a representative gate (the archived full run's rows of the demo's three
representatives, written as a run of their own), never with PROMOTE."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from fibtui.core.runs import write_record
from fibtui.core.workspace import open_workspace
from fibtui.ui.app import make_app
from fibtui.ui.panes.runs import RunsPane
from tests.tui_helpers import settle

SWEEP_RUN = "20261129-103545_demo_local"
GATE = "20261201-000000_demo_local"
REPRESENTATIVES = {
    "200a3ebd-2fb4-5e97-8569-f37d1f3d4443",
    "a8efeb8a-8b7b-5ea6-9f13-0d763ae059b8",
    "17f81457-465f-55f2-806a-efa293ff429b",
}


@pytest.fixture(autouse=True)
def _user_config(tmp_path_factory, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path_factory.mktemp("config")))
    return Path()


def representative_gate(ws_root: Path) -> Path:
    """A run of the three representatives made of the archived full run's journal lines."""
    runs = ws_root / "optimize_ops" / "runs"
    source, folder = runs / SWEEP_RUN, runs / GATE
    folder.mkdir()
    shutil.copytree(source / "snapshots", folder / "snapshots")
    lines = []
    for raw in (source / "journal.jsonl").read_text().splitlines():
        obj = json.loads(raw)
        if obj["kind"] == "header":
            obj["run_id"] = GATE
            obj["workload_selection"] = "rep"
            obj["jobs"] = [j for j in obj["jobs"] if j["uuid"] in REPRESENTATIVES]
        elif obj["kind"] == "result" and obj["uuid"] not in REPRESENTATIVES:
            continue
        lines.append(json.dumps(obj))
    (folder / "journal.jsonl").write_text("\n".join(lines) + "\n")
    write_record(folder)
    return folder


async def test_panes_lead_with_what_a_representative_gate_measured(tmp_path: Path) -> None:
    from fibtui.core.demo import create_demo_workspace

    runs = Path(__file__).resolve().parents[1] / "optimize_ops" / "runs"
    assert (runs / SWEEP_RUN).is_dir(), (
        "the archived demo round (optimize_ops/runs/) is committed with the repository and is missing"
    )
    root = create_demo_workspace(tmp_path / "ws", git_init=False)
    representative_gate(root)
    app = make_app(open_workspace(root))
    async with app.run_test(size=(130, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("5")
        await settle(app, pilot)
        verdict = str(app.query_one("#verdict", Static).render())
        assert f"run {GATE}, scope sample, 3 paired workloads" in verdict
        assert "measured MIXED  mixed: faster at batch_size=1 by 24% (4.9% of latency)" in verdict
        assert "verdict PROMOTE" not in verdict
        bands = app.query_one("#bands", DataTable)
        tags = {str(bands.get_row_at(i)[0]): str(bands.get_row_at(i)[-1]) for i in range(3)}
        assert tags["batch_size=1"].startswith("faster")
        assert tags["batch_size=48"] == tags["batch_size=64"] == "unchanged"
        await pilot.press("3")
        await settle(app, pilot)
        runs = app.query_one(RunsPane)
        runs.open_run(GATE)
        await settle(app, pilot)
        await settle(app, pilot)
        status = str(runs.query_one("#runs-status").render())
        assert "MIXED v2_smallb_splitv: mixed: faster at batch_size=1 by 24%" in status
