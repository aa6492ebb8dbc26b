"""Pilot tests of the TUI: each pane's behaviour with real core data, messages captured, workers
awaited (no sleeps)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from textual.widgets import DataTable, Markdown, TabbedContent

from fibtui.core.workspace import open_workspace
from fibtui.ui import messages
from fibtui.ui.app import PANES, make_app
from fibtui.ui.panes.ncu import NcuPane
from fibtui.ui.panes.recon import ReconPane
from fibtui.ui.panes.regimes import RegimesPane
from fibtui.ui.panes.runs import RunsPane
from fibtui.ui.screens.confirm import ConfirmScreen
from fibtui.ui.screens.error import ErrorScreen
from fibtui.ui.screens.help import HelpKeysScreen
from fibtui.ui.screens.no_workspace import NoWorkspaceScreen
from tests.tui_helpers import copy_ncu_reports, settle, synthetic_gpu_run, write_round

SIZE = (120, 40)


@pytest.fixture(autouse=True)
def _user_config(tmp_path_factory, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path_factory.mktemp("config")
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(folder))
    return folder


async def test_keys_switch_panes_and_list_bindings(demo_ws: Path) -> None:
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert "demo_gdn_decode_qk4_v8_d128_k_last" in app.sub_title
        tabs = app.query_one("#main-tabs", TabbedContent)
        for pane in PANES:
            await pilot.press(pane.key)
            assert tabs.active == pane.id
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpKeysScreen)
        ids = {
            str(row[1])
            for row in (
                app.screen.query_one(DataTable).get_row_at(i)
                for i in range(app.screen.query_one(DataTable).row_count)
            )
        }
        assert {"pane.runs", "run.gate", "run.sweep", "app.watch", "app.quit", "regimes.pin"} <= ids
        await pilot.press("escape")
        await pilot.press("q")
    assert app.return_code == 0


async def test_the_app_shortens_the_lock_switch_interval_while_it_runs(demo_ws: Path) -> None:
    import sys

    from fibtui.ui.app import SWITCH_INTERVAL_S

    before = sys.getswitchinterval()
    assert before != SWITCH_INTERVAL_S
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert sys.getswitchinterval() == SWITCH_INTERVAL_S
        await pilot.press("q")
    assert sys.getswitchinterval() == before


async def test_no_key_acts_once_the_app_is_quitting(demo_ws: Path) -> None:
    # in a terminal, "o" typed right after "q" opened the candidate dialog on an app being taken
    # down, and its mount failed with a traceback on exit
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.check_action("pick_candidate", ())
        app.exit(0)
        assert not app.check_action("pick_candidate", ())
        assert not app.check_action("gate", ())
    assert app.return_code == 0


async def test_regimes_pane_counts_only_then_with_a_gpu_run_and_pins(demo_ws: Path) -> None:
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        pane = app.query_one(RegimesPane)
        assert not pane.report.has_latency
        assert "counts only" in str(pane.query_one("#regimes-summary").render())
        assert pane.query_one("#bands-table", DataTable).row_count == 9
        assert pane.query_one("#workloads-table", DataTable).row_count == 50
    synthetic_gpu_run(demo_ws)
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        pane = app.query_one(RegimesPane)
        assert (
            pane.report.has_latency and "20260101-000000_demo_local" in pane.report.latency_source
        )
        shares = [b.latency_share for b in pane.report.bands]
        assert sum(shares) == pytest.approx(1.0)
        assert len(pane.query("PlotextPlot")) == 1  # the chart is drawn once there is latency
        reps = pane.query_one("#reps-table", DataTable).row_count
        assert 2 <= reps <= 3  # 50 workloads > 40: 2-3 representatives
        table = pane.query_one("#workloads-table", DataTable)
        table.focus()
        table.move_cursor(row=7)
        uuid = str(table.get_row_at(7)[1])
        await pilot.press("p")
        await settle(app, pilot)
        assert uuid in pane.representatives()
        assert uuid in (demo_ws / "fibtui.toml").read_text()


async def test_runs_pane_lists_runs_and_opens_one(demo_ws: Path) -> None:
    synthetic_gpu_run(demo_ws)
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("3")
        runs = app.query_one(RunsPane)
        assert runs.query_one("#runs-list", DataTable).row_count == 1
        assert runs.shown_run == "20260101-000000_demo_local"
        jobs = runs.query_one("#jobs-table", DataTable)
        assert jobs.row_count == 100
        assert str(jobs.get_row_at(0)[0]) == "PASSED"
        assert "100/100 done" in str(runs.query_one("#runs-status").render())


async def test_gate_runs_live_after_the_recon_note_warning(tmp_path: Path) -> None:
    from tests.runner_helpers import make_tiny_workspace

    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    subprocess.run(
        ["git", "init", "-q", str(root / "reference" / "flashinfer")], check=True
    )  # a repo to take notes of
    events = []
    app = make_app(open_workspace(root))
    async with app.run_test(size=SIZE, message_hook=events.append) as pilot:
        await settle(app, pilot)
        await pilot.press("g")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)  # no recon note for this round yet
        await pilot.press("y")
        await settle(app, pilot)
        from fibtui.runners.events import JobFinished, RunFinished

        unique = list(
            {id(m): m for m in events if isinstance(m, messages.RunEvent)}.values()
        )  # messages bubble
        finished = [m.event for m in unique if isinstance(m.event, RunFinished)]
        assert finished and finished[0].state == "complete"
        assert sum(isinstance(m.event, JobFinished) for m in unique) == 2
        runs = app.query_one(RunsPane)
        jobs = runs.query_one("#jobs-table", DataTable)
        assert [str(jobs.get_row_at(i)[0]) for i in range(jobs.row_count)] == ["PASSED", "PASSED"]
        assert "CPU-interpreter" in str(runs.query_one("#runs-status").render())
        assert app.query_one("#main-tabs", TabbedContent).active == "runs"
        # the next gate's worker is started ahead of time (torch and triton imported)
        deadline = time.monotonic() + 120
        while not (
            app.run_control.gates.warm is not None and app.run_control.gates.warm.count() == 1
        ):
            assert time.monotonic() < deadline, "no worker was kept warm after the gate"
            await pilot.pause(0.1)
    assert app.run_control.gates.warm.count() == 0  # closed with the app


async def test_no_warm_worker_when_the_workspace_says_so(tmp_path: Path) -> None:
    from fibtui.runners.events import RunFinished
    from tests.runner_helpers import make_tiny_workspace

    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    (root / "fibtui.toml").write_text("[tui]\nkeep_worker_warm = false\n")
    events = []
    app = make_app(open_workspace(root))
    app.run_control.note_acknowledged = True
    async with app.run_test(size=SIZE, message_hook=events.append) as pilot:
        await settle(app, pilot)
        await pilot.press("g")
        deadline = time.monotonic() + 120
        while not any(
            isinstance(m, messages.RunEvent) and isinstance(m.event, RunFinished) for m in events
        ):
            assert time.monotonic() < deadline, "the gate never finished"
            await pilot.pause(0.1)
        await pilot.pause(1.0)
        # no idle worker kept (the gate itself asked where started workers are kept)
        assert app.run_control.gates.warm is None or app.run_control.gates.warm.count() == 0


async def test_full_sweep_of_more_than_40_workloads_asks_first(demo_ws: Path) -> None:
    app = make_app(open_workspace(demo_ws))
    app.run_control.note_acknowledged = True
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("s")
        await settle(app, pilot)  # the workloads are counted in a worker
        assert isinstance(app.screen, ConfirmScreen)
        facts = str(app.screen.query_one("#confirm-facts").render())
        assert "50" in facts and "jobs" in facts and "estimated time" in facts
        await pilot.press("n")
        await pilot.pause()
        assert app.query_one(RunsPane).active_run is None


async def test_ncu_pane_table_and_diff(demo_ws: Path) -> None:
    copy_ncu_reports(demo_ws)
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("4")
        pane = app.query_one(NcuPane)
        names = [p.name for p in pane.reports]
        assert "demo_v1_b1_b64_details.csv" in names and "demo_v2_b1_b64_details.csv" in names
        reports = pane.query_one("#ncu-reports", DataTable)
        reports.focus()
        v1 = names.index("demo_v1_b1_b64_details.csv")
        reports.move_cursor(row=v1)
        await settle(app, pilot)
        table = pane.query_one("#ncu-table", DataTable)
        assert str(table.get_row_at(0)[0]) == "duration us"
        await pilot.press("b")
        reports.move_cursor(row=names.index("demo_v2_b1_b64_details.csv"))
        await settle(app, pilot)
        rows = [table.get_row_at(i) for i in range(table.row_count)]
        assert [str(c.label) for c in table.ordered_columns] == ["metric", "Δ %", "before", "after"]
        block = diff_block(rows, "batch_size=1")
        assert str(block["duration us"][1]) == "-18.9%"
        assert str(block["duration us"][2]) == "4.70" and str(block["duration us"][3]) == "3.81"
        wide = diff_block(rows, "batch_size=64")
        assert [str(c) for c in wide["grid blocks"][2:]] == [
            "2,048",
            "2,048",
        ]  # a count: no decimals
        assert [str(c) for c in wide["regs/thread"][2:]] == ["64", "64"] and str(
            wide["waves/SM"][2]
        ) == "1.94"
        assert [str(c) for c in wide["limiter"][1:]] == ["same", "registers", "registers"]
        log = log_text(pane)
        assert "bottleneck latency, limiter registers" in log and "batch_size=64" in log
        # a load of the earlier report that finishes last (a busy machine) changes nothing
        v1_path = pane.reports[v1]
        pane.post_message(messages.NcuLoaded(v1_path, [], None, None))
        pane.post_message(messages.NcuFailed("stale failure", v1_path))
        await settle(app, pilot)
        assert [table.get_row_at(i) for i in range(table.row_count)] == rows
        assert "diff:" in str(pane.query_one("#ncu-status").render())


def diff_block(rows: list, heading: str) -> dict[str, list]:
    """The rows of one kernel/band block of the NCU diff table, by metric label."""
    start = next(i for i, r in enumerate(rows) if str(r[0]) == heading and not str(r[1]))
    block: dict[str, list] = {}
    for r in rows[start + 1 :]:
        if not str(r[1]):  # the next heading
            break
        block[str(r[0])] = r
    return block


def log_text(pane) -> str:
    log = pane.query_one("#ncu-findings")
    return " ".join(" ".join(strip.text for strip in log.lines).split())


def copy_long_named_reports(ws: Path) -> list[str]:
    """The demo reports again under the long names fibtui profile gives (definition, solution,
    workloads, set): two solutions, each as a CSV and a text page."""
    target = copy_ncu_reports(ws)
    names = []
    for solution, src in (
        ("demo_gdn_decode_triton_v1", "demo_v1_b1_b64"),
        ("v2_smallb_splitv", "demo_v2_b1_b64"),
    ):
        for ext in ("csv", "txt"):
            name = f"demo_gdn_decode_qk4_v8_d128_k_last_{solution}_a8efeb8a-200a3ebd_detailed_details.{ext}"
            (target / name).write_bytes((target / f"{src}_details.{ext}").read_bytes())
            os.utime(target / name, (1_700_000_000, 1_700_000_000))
            names.append(name)
        stem = f"demo_gdn_decode_qk4_v8_d128_k_last_{solution}_a8efeb8a-200a3ebd_detailed"
        (target / f"{stem}_request.json").write_bytes((target / f"{src}_request.json").read_bytes())
    return names


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_ncu_pane_labels_are_distinct_and_the_diff_fits(
    demo_ws: Path, size: tuple[int, int]
) -> None:
    copy_long_named_reports(demo_ws)
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        await pilot.press("4")
        await settle(app, pilot)
        pane = app.query_one(NcuPane)
        reports = pane.query_one("#ncu-reports", DataTable)
        labels = [str(reports.get_row_at(i)[0]) for i in range(reports.row_count)]
        assert len(pane.reports) == 8 and len(set(labels)) == 8, labels
        assert labels == pane.labels
        assert (
            "demo_v1_b1_b64.csv" in labels and "demo_v2_b1_b64.txt" in labels
        )  # short names stay whole
        for p, label in zip(pane.reports, labels, strict=True):
            assert label.endswith(p.suffix)  # the CSV and the text page of one profile stay apart
            if "triton_v1" in p.name or "smallb_splitv" in p.name:
                assert ("triton_v1" if "triton_v1" in p.name else "smallb_splitv") in label
        # every column of the list is on screen
        assert (
            sum(c.get_render_width(reports) for c in reports.ordered_columns) <= reports.size.width
        )
        assert pane.has_class("-narrow") == (size[0] < 100)

        names = [p.name for p in pane.reports]
        reports.focus()
        reports.move_cursor(
            row=names.index(
                "demo_gdn_decode_qk4_v8_d128_k_last_demo_gdn_decode_triton_v1_a8efeb8a-200a3ebd_detailed_details.csv"
            )
        )
        await settle(app, pilot)
        await pilot.press("b")
        await settle(app, pilot)
        reports.move_cursor(
            row=names.index(
                "demo_gdn_decode_qk4_v8_d128_k_last_v2_smallb_splitv_a8efeb8a-200a3ebd_detailed_details.csv"
            )
        )
        await settle(app, pilot)
        table = pane.query_one("#ncu-table", DataTable)
        rows = [table.get_row_at(i) for i in range(table.row_count)]
        assert str(diff_block(rows, "batch_size=1")["duration us"][1]) == "-18.9%"
        # metric, change %, before and after all fit the table's width: nothing to scroll to
        widths = [c.get_render_width(table) for c in table.ordered_columns]
        assert sum(widths) <= table.size.width, (widths, table.size.width)
        # the whole classification is in the findings log, and the full names in the status line
        assert "bottleneck latency, limiter registers, grid too small" in log_text(pane)
        assert "v2_smallb_splitv" in str(pane.query_one("#ncu-status").render())


async def test_history_pane_renders_rounds(demo_ws: Path) -> None:
    write_round(demo_ws)
    synthetic_gpu_run(demo_ws)
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("6")
        await settle(app, pilot)
        pane = app.query_one("#history-pane")
        # the round summary, then the paired run (enter opens its verdict in Promotion)
        assert pane.query_one("#history-rounds", DataTable).row_count == 2
        md = pane.query_one("#history-markdown", Markdown)
        assert "v2_smallb_splitv" in md.source
        assert len(pane.query("PlotextPlot")) == 1


async def test_recon_pane_refresh_search_and_note(demo_ws: Path) -> None:
    ref = demo_ws / "reference" / "kernels_ref"
    ref.mkdir(parents=True)
    (ref / "csrc").mkdir()
    (ref / "csrc" / "gdn_decode.cu").write_text(
        "// a gated delta rule decode kernel\nvoid gdn_decode_qk4() {}\n"
    )
    for cmd in (
        ["git", "init", "-q"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
    ):
        subprocess.run(cmd, cwd=ref, check=True)
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("1")
        await pilot.press("r")
        await settle(app, pilot)
        pane = app.query_one(ReconPane)
        repos = pane.query_one("#recon-repos", DataTable)
        assert repos.row_count == 1 and str(repos.get_row_at(0)[0]) == "kernels_ref"
        pane.search("")
        await settle(app, pilot)
        assert any(h.path == "csrc/gdn_decode.cu" and h.line == 2 for h in pane.hits)
        pane.query_one("#recon-hits", DataTable).focus()
        await pilot.press("a")
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        notes = list(
            (demo_ws / "optimize_ops" / "docs").glob(
                "recon_*_demo_gdn_decode_qk4_v8_d128_k_last.md"
            )
        )
        assert len(notes) == 1 and "csrc/gdn_decode.cu:2" in notes[0].read_text()


async def test_theme_switch_is_remembered(demo_ws: Path, _user_config: Path) -> None:
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.theme == "fibtui-dark"
        await pilot.press("ctrl+t")
        assert app.theme == "fibtui-light"
    assert 'theme = "fibtui-light"' in (_user_config / "settings.toml").read_text()
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.theme == "fibtui-light"
        await pilot.press("ctrl+t")
        assert app.theme == "fibtui-high-contrast"


async def test_keys_are_remappable_from_the_user_config(demo_ws: Path, _user_config: Path) -> None:
    (_user_config / "keymap.toml").write_text('"pane.runs" = "f3"\n')
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("f3")
        assert app.query_one("#main-tabs", TabbedContent).active == "runs"


async def test_worker_failures_land_in_the_error_dialog(demo_ws: Path) -> None:
    folder = demo_ws / "optimize_ops" / "runs" / "20260101-000000_broken"
    folder.mkdir(parents=True)
    (folder / "journal.jsonl").write_text('{"kind": "header", "run_id": 5}\n')
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.query_one(RunsPane).open_run("20260101-000000_broken")
        await settle(app, pilot)
        assert isinstance(app.screen, ErrorScreen)
        text = " ".join(str(w.render()) for w in app.screen.query("Static"))
        assert "journal header is malformed" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, ErrorScreen)


async def test_no_workspace_offers_the_demo(tmp_path: Path) -> None:
    demo_dir = tmp_path / "demo-here"
    app = make_app(None, cwd=str(tmp_path), demo_dir=str(demo_dir))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, NoWorkspaceScreen)
        await pilot.press("d")
        await settle(app, pilot)
        assert app.workspace is not None and app.workspace.root == demo_dir.resolve()
        assert app.query_one(RegimesPane).query_one("#workloads-table", DataTable).row_count == 50


async def test_no_workspace_quit(tmp_path: Path) -> None:
    app = make_app(None, cwd=str(tmp_path), demo_dir=str(tmp_path / "unused"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("q")
    assert app.return_code == 0 and not (tmp_path / "unused").exists()


def test_palette_commands_depend_on_state(demo_ws: Path) -> None:
    app = make_app(None)
    texts = [t for t, _, _ in app.palette_commands()]
    assert "Open the bundled demo workspace" in texts and "Start a full sweep" not in texts
    assert json.dumps(texts)  # plain strings


async def test_promotion_pane_verdict_and_archive(demo_ws: Path) -> None:
    """The synthetic paired run: candidate 25% faster at batch <= 16, equal above."""
    from fibtui.ui.panes.promotion import PromotionPane

    synthetic_gpu_run(demo_ws)
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("5")
        pane = app.query_one(PromotionPane)
        assert pane.run_id == "20260101-000000_demo_local"
        c = pane.outcome.single
        assert c.verdict == "PROMOTE" and c.geomean_ratio < 0.9
        text = str(pane.query_one("#verdict").render())
        assert "verdict PROMOTE" in text and "tau" in text and "\nG 0." in text
        # avg and p95 latency first, speedup (G, the projected score) as context
        assert text.index("avg latency ") < text.index("\nG 0.") < text.index("worst: ")
        assert pane.query_one("#bands", DataTable).row_count == 9
        await pilot.press("A")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(app, pilot)
        assert list((demo_ws / "optimize_ops" / "docs").glob("round_*_v2_smallb_splitv.md"))
        await pilot.press("R")  # reject needs a confirmation too
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")


async def test_modal_sweep_asks_with_the_plan(demo_ws: Path) -> None:
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        commands = {text: cb for text, cb, _ in app.palette_commands()}
        commands["Start a full sweep on Modal (B200 containers)"]()
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        facts = str(app.screen.query_one("#confirm-facts").render())
        assert "GPU B200" in facts and "container-seconds" in facts and "$" in facts
        await pilot.press("n")
        await pilot.pause()
        assert app.query_one(RunsPane).active_run is None


async def test_promotion_pane_says_when_parity_is_missing(demo_ws: Path) -> None:
    from fibtui.ui.panes.promotion import PromotionPane

    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("5")
        text = str(app.query_one(PromotionPane).query_one("#verdict").render())
        assert "official parity: none yet" in text


async def test_keeping_a_worker_warm_without_a_backend_is_silent(
    demo_ws: Path, monkeypatch
) -> None:
    """After a Modal sweep on a machine without torch, say: nothing to keep warm, and no dialog."""
    from fibtui.core.errors import UsageError
    from fibtui.services import runs

    def no_backend(*_a, **_k):
        raise UsageError("the interpreter backend needs torch and triton")

    monkeypatch.setattr(runs, "check_backend", no_backend)
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.run_control.gates.prewarm()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not isinstance(app.screen, ErrorScreen)
        assert app.run_control.gates.warm is not None and app.run_control.gates.warm.count() == 0


@pytest.mark.slow  # every pane key from each focusable widget of each pane: 33 s alone here
async def test_pane_keys_work_from_every_table_and_input(demo_ws: Path) -> None:
    """No focus trap: with focus on each focusable widget of each pane (reached by Tab, as a
    user does), every pane key shows its pane, and focus moves into it."""
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        for source in PANES:
            await pilot.press(source.key)
            await pilot.pause()
            seen = set()
            for _ in range(6):  # each widget Tab reaches inside the pane
                await pilot.press("tab")
                await pilot.pause()
                focused = app.focused
                if (
                    focused is None
                    or app.pane(source.id) not in focused.ancestors
                    or focused in seen
                ):
                    continue
                seen.add(focused)
                for target in PANES:
                    if target.id == source.id:
                        continue
                    await pilot.press(source.key)
                    await pilot.pause()
                    focused.focus()
                    await pilot.pause()
                    await pilot.press(target.key)
                    await pilot.pause()
                    assert app.active_pane == target.id, (source.id, focused.id, target.id)
                    assert app.focused is None or app.pane(target.id) in app.focused.ancestors, (
                        target.id,
                        app.focused,
                    )
            assert seen or source.id == "promotion", f"Tab reached nothing in {source.id}"


async def test_search_box_is_left_by_enter_or_escape_and_never_reached_by_tab(
    demo_ws: Path,
) -> None:
    from textual.widgets import Input

    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("1")
        await pilot.pause()
        for _ in range(8):
            await pilot.press("tab")
            await pilot.pause()
            assert not isinstance(app.focused, Input), "Tab landed in the search box"
        for leave in ("enter", "escape"):
            await pilot.press("f")
            await pilot.pause()
            assert isinstance(app.focused, Input)
            await pilot.press("2", "5", leave)  # digits are text in the box ...
            await pilot.pause()
            assert not isinstance(app.focused, Input) and app.active_pane == "recon", leave
            await pilot.press("3")  # ... and a pane key once it is left
            await pilot.pause()
            assert app.active_pane == "runs", leave
            await pilot.press("1")
            await pilot.pause()


async def test_q_during_a_run_asks_and_back_keeps_the_run(tmp_path: Path) -> None:
    from fibtui.ui.screens.confirm import ChoiceScreen
    from tests.runner_helpers import make_tiny_workspace

    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2), kernel="slow_py")
    app = make_app(open_workspace(root))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("g")  # no reference repos: no recon-note question
        runs = app.query_one(RunsPane)
        deadline = time.monotonic() + 60
        while runs.active_run is None:
            assert time.monotonic() < deadline and not isinstance(app.screen, ConfirmScreen)
            await pilot.pause(0.05)
        run_id = runs.active_run
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, ChoiceScreen)
        assert run_id in str(app.screen.query_one("#choice-facts").render())
        await pilot.press("b")
        await pilot.pause()
        assert (
            not isinstance(app.screen, ChoiceScreen)
            and runs.active_run == run_id
            and app.is_running
        )
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("e")  # quit when it ends
        await pilot.pause()
        assert (
            app.run_control.quit_when_run_ends
            and "QUITS AFTER THE RUN" in app.sub_title
            and app.is_running
        )
        deadline = time.monotonic() + 120
        while app.is_running:
            assert time.monotonic() < deadline, "the app did not quit when the run ended"
            await pilot.pause(0.1)
    record = json.loads(next((root / "optimize_ops" / "runs").glob("*/run.json")).read_text())
    assert record["state"] == "complete" and app.return_code == 0


async def test_q_during_a_run_then_cancel_quits_and_the_run_reads_interrupted(
    tmp_path: Path,
) -> None:
    from fibtui.ui.screens.confirm import ChoiceScreen
    from tests.runner_helpers import make_tiny_workspace

    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2, 3), kernel="sleeps")
    app = make_app(open_workspace(root))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("g")
        runs = app.query_one(RunsPane)
        deadline = time.monotonic() + 60
        while runs.active_run is None:
            assert time.monotonic() < deadline
            await pilot.pause(0.05)
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, ChoiceScreen)
        await pilot.press("c")
        await pilot.pause()
    deadline = time.monotonic() + 60
    journal = next((root / "optimize_ops" / "runs").glob("*/journal.jsonl"))
    while '"kind": "end"' not in journal.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    ends = [
        json.loads(line) for line in journal.read_text().splitlines() if '"kind": "end"' in line
    ]
    assert ends and ends[-1]["state"] == "interrupted", ends


async def test_no_recon_note_question_without_reference_repos(tmp_path: Path) -> None:
    from tests.runner_helpers import make_tiny_workspace

    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    app = make_app(open_workspace(root))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("g")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert app.query_one(RunsPane).active_run is not None or list(
            (root / "optimize_ops" / "runs").glob("*")
        )


async def test_a_cancelled_runs_unfinished_jobs_read_pending_and_the_detail_line_follows(
    tmp_path: Path,
) -> None:
    from textual.widgets import RichLog

    from tests.runner_helpers import make_tiny_workspace

    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2, 3), kernel="sleeps")
    app = make_app(open_workspace(root))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("g")
        runs = app.query_one(RunsPane)
        deadline = time.monotonic() + 60
        while not any(v.status == "RUNNING" for v in runs._jobs.values()):
            assert time.monotonic() < deadline, "no job started"
            await pilot.pause(0.05)
        jobs = runs.query_one("#jobs-table", DataTable)
        jobs.focus()
        jobs.move_cursor(row=0)
        await pilot.pause(0.2)
        await pilot.press("c")
        while runs.active_run is not None:
            assert time.monotonic() < deadline + 60, "the cancel never ended the run"
            await pilot.pause(0.1)
        await pilot.pause(0.5)
        statuses = {str(jobs.get_row_at(i)[0]) for i in range(jobs.row_count)}
        assert "RUNNING" not in statuses and "QUEUED" not in statuses and "NOT RUN" in statuses, (
            statuses
        )
        first = str(jobs.get_row_at(0)[0])
        detail = "\n".join(str(line.text) for line in runs.query_one("#job-log", RichLog).lines)
        assert detail.splitlines()[0].endswith(first), (first, detail)


async def test_the_empty_palette_lists_fibtuis_commands(demo_ws: Path) -> None:
    from textual.command import CommandPalette
    from textual.widgets import OptionList

    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+p")
        deadline = time.monotonic() + 10
        shown: list[str] = []
        while time.monotonic() < deadline:
            await pilot.pause(0.1)
            if isinstance(app.screen, CommandPalette):
                options = app.screen.query_one(OptionList)
                shown = [
                    str(options.get_option_at_index(i).prompt) for i in range(options.option_count)
                ]
                if any("Start a representative gate" in t for t in shown):
                    break
        assert any("Show Runs pane" in t for t in shown) and any(
            "Start a representative gate" in t for t in shown
        ), shown


async def test_the_candidate_picker_chooses_what_g_and_watch_mode_run(demo_ws: Path) -> None:
    from textual.widgets import OptionList

    from fibtui.ui.screens.candidate import CandidateScreen

    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert (
            app.run_control.gates.gate_options("rep").solutions == []
        )  # the workspace's solution by default
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, CandidateScreen)
        gates = app.screen.query_one("#pick-gate", OptionList)
        labels = [str(gates.get_option_at_index(i).prompt) for i in range(gates.option_count)]
        assert "the workspace's solution" in labels[0] and any(
            "v2_smallb_splitv" in t for t in labels[1:]
        ), labels
        target = next(i for i, t in enumerate(labels) if "v2_smallb_splitv" in t)
        gates.highlighted = target
        await pilot.press("enter")  # to the baseline list
        await pilot.pause()
        base = app.screen.query_one("#pick-base", OptionList)
        base_labels = [str(base.get_option_at_index(i).prompt) for i in range(base.option_count)]
        base.highlighted = next(
            i for i, t in enumerate(base_labels) if "the workspace's solution" in t
        )
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, CandidateScreen)
        options = app.run_control.gates.gate_options("rep")
        cand = demo_ws / "candidates" / "v2_smallb_splitv"
        assert [Path(p).resolve() for p in options.solutions] == [cand.resolve()]
        assert (
            options.baseline is not None and Path(options.baseline).resolve() == demo_ws.resolve()
        )
        assert app.sub_title.startswith("v2_smallb_splitv vs "), app.sub_title
        assert (
            app.run_control.gates.watch_folder() == cand
        )  # watch mode watches the picked candidate's sources
        # Escape keeps the choice
        await pilot.press("o")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert (
            app.run_control.gates.gate_choice is not None
            and app.run_control.gates.gate_choice.path == cand
        )


async def test_a_gate_runs_the_picked_candidate_against_the_picked_baseline(tmp_path: Path) -> None:
    from fibtui.ui.screens.candidate import Choice
    from tests.runner_helpers import make_candidate, make_tiny_workspace

    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    make_candidate(root, "plain_py", "good_py")
    app = make_app(open_workspace(root))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        gates, baselines = app.run_control.gates.choices()
        app.run_control.gates.gate_choice = next(c for c in gates if c.label == "plain_py")
        app.run_control.gates.base_choice = next(c for c in baselines if c.key == "solution")
        assert isinstance(app.run_control.gates.gate_choice, Choice)
        await pilot.press("g")
        runs = app.query_one(RunsPane)
        deadline = time.monotonic() + 300
        while runs.active_run is None:
            assert time.monotonic() < deadline
            await pilot.pause(0.05)
        run_id = runs.active_run
        while runs.active_run is not None:
            assert time.monotonic() < deadline, "the gate did not finish"
            await pilot.pause(0.2)
    header = json.loads(
        (root / "optimize_ops" / "runs" / run_id / "journal.jsonl").read_text().splitlines()[0]
    )
    roles = {s["role"]: s["name"] for s in header["solutions"]}
    assert roles["baseline"] == "tiny_v1" and roles["candidate"] == "plain_py", roles


async def test_the_eta_counts_down_between_results_and_says_when_it_has_passed(
    demo_ws: Path,
) -> None:
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        runs = app.query_one(RunsPane)
        runs._header_info = {
            "run_id": "r1",
            "backend": "local",
            "timing_kind": "cupti",
            "l2_policy": "cold",
        }
        runs.active_run = "r1"
        runs._update_progress(1, 10, 1, 0, 6.0)
        status = runs.query_one("#runs-status")
        assert "ETA 0:05" in str(status.render()) or "ETA 0:06" in str(status.render())
        await pilot.pause(2.3)  # two ticks, no new result
        shown = str(status.render())
        assert "ETA 0:03" in shown or "ETA 0:04" in shown, shown
        runs._eta_deadline = time.monotonic() - 1
        await pilot.pause(1.2)
        assert "ETA passed" in str(status.render())
        runs.active_run = None


async def test_g_on_the_interpreter_is_the_quick_correctness_gate_and_G_the_full_one(
    demo_ws: Path, monkeypatch
) -> None:
    from fibtui.core import regimes

    app = make_app(open_workspace(demo_ws))
    monkeypatch.setattr(app.run_control.gates, "backend", lambda: "interpreter")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        pane = app.query_one(RegimesPane)
        quick = app.run_control.gates.gate_options("rep")
        # the smallest of each band within the estimated-time cap (core.quick), in band order
        assert (
            app.run_control.gates.is_quick_gate(quick.backend, quick.workloads)
            and app.run_control.gates.quick_gate is not None
        )
        assert quick.representatives == app.run_control.gates.quick_gate.workloads
        assert set(quick.representatives) <= set(regimes.smallest_per_band(pane.report))
        assert "batch_size=64" in {e.band for e in app.run_control.gates.quick_gate.excluded}
        sizes = {r["uuid"]: r["batch_size"] for r in pane.report.table.iter_rows(named=True)}
        assert sizes[quick.representatives[0]] == 1  # the smallest workload of the first band
        full = app.run_control.gates.gate_options("rep", quick=False)
        assert (
            full.representatives == pane.representatives()
            and not app.run_control.gates.is_quick_gate(full.backend, full.workloads, quick=False)
        )
    gpu = make_app(open_workspace(demo_ws))
    monkeypatch.setattr(gpu.run_control.gates, "backend", lambda: "local")
    async with gpu.run_test(size=SIZE) as pilot:  # on a GPU, g is the representative gate
        await settle(gpu, pilot)
        assert (
            gpu.run_control.gates.gate_options("rep").representatives
            == gpu.query_one(RegimesPane).representatives()
        )


async def test_the_runs_pane_names_a_quick_correctness_gate(tmp_path: Path, monkeypatch) -> None:
    from tests.runner_helpers import make_tiny_workspace

    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    app = make_app(open_workspace(root))
    monkeypatch.setattr(app.run_control.gates, "backend", lambda: "interpreter")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("g")
        runs = app.query_one(RunsPane)
        deadline = time.monotonic() + 120
        while runs.active_run is None or not runs._header_info.get("run_id"):
            assert time.monotonic() < deadline
            await pilot.pause(0.05)
        while runs.active_run is not None:
            assert time.monotonic() < deadline
            await pilot.pause(0.1)
        assert "CPU quick gate: 2 workload(s), the smallest of each band" in str(
            runs.query_one("#runs-status").render()
        )
