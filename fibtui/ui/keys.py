"""The panes of the main screen and every key binding: which pane a key acts on, what the
footer and the ``?`` list show."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding

from fibtui.ui.panes.base import Pane
from fibtui.ui.panes.history import HistoryPane
from fibtui.ui.panes.ncu import NcuPane
from fibtui.ui.panes.promotion import PromotionPane
from fibtui.ui.panes.recon import ReconPane
from fibtui.ui.panes.regimes import RegimesPane
from fibtui.ui.panes.runs import RunsPane

#: actions that belong to one pane: elsewhere their key does nothing and the footer hides it
PANE_ACTIONS = {
    "search": "recon",
    "add_hit": "recon",
    "delete_note_row": "recon",
    "write_note": "recon",
    "pin": "regimes",
    "retry_failed": "runs",
    "mark_baseline": "ncu",
    "decide": "promotion",
}


@dataclass(frozen=True)
class PaneInfo:
    id: str
    title: str
    key: str
    about: str
    widget: type[Pane]


PANES: tuple[PaneInfo, ...] = (
    PaneInfo("recon", "Recon", "1", "reference repos, their state and the recon note", ReconPane),
    PaneInfo(
        "regimes",
        "Regimes",
        "2",
        "bands of the real workloads, shares, representatives, floors",
        RegimesPane,
    ),
    PaneInfo("runs", "Runs", "3", "live runs: per-workload status, progress, logs", RunsPane),
    PaneInfo("ncu", "NCU", "4", "Nsight Compute tables and baseline-vs-candidate diffs", NcuPane),
    PaneInfo(
        "promotion",
        "Promotion",
        "5",
        "the verdict with its statistics, and the decision",
        PromotionPane,
    ),
    PaneInfo("history", "History", "6", "past rounds and runs from optimize_ops/", HistoryPane),
)


def B(
    key: str,
    action: str,
    description: str,
    id: str,
    tooltip: str,
    show: bool = True,
    key_display: str | None = None,
) -> Binding:
    return Binding(
        key, action, description, show=show, id=id, tooltip=tooltip, key_display=key_display
    )


BINDINGS: list[Binding] = [
    # the tab bar already shows each pane's digit: the footer keeps its room for the keys below
    *[
        B(
            p.key,
            f"show_pane('{p.id}')",
            p.title,
            f"pane.{p.id}",
            f"Show the {p.title} pane: {p.about}",
            show=False,
        )
        for p in PANES
    ],
    # the keys of one pane (PANE_ACTIONS): the footer shows them only on that pane
    B("f", "search", "Search", "recon.search", "Search the reference repos"),
    B("a", "add_hit", "Add to note", "recon.add", "Add the selected hit to the recon note"),
    B(
        "x",
        "delete_note_row",
        "Delete row",
        "recon.delete",
        "Delete the selected recon note row",
        show=False,
    ),
    B(
        "ctrl+s",
        "write_note",
        "Write note",
        "recon.write",
        "Write the recon note to optimize_ops/docs/",
    ),
    B(
        "p",
        "pin",
        "Pin",
        "regimes.pin",
        "Pin, exclude or return the selected workload to automatic (cycles)",
    ),
    B(
        "t",
        "retry_failed",
        "Retry",
        "run.retry",
        "Run the failed jobs of the selected run again",
    ),
    B(
        "b",
        "mark_baseline",
        "Baseline",
        "ncu.baseline",
        "Mark the selected NCU report as the diff baseline",
    ),
    B(
        "A",
        "decide('archive')",
        "Archive",
        "promotion.archive",
        "Archive the candidate and write the round summary",
    ),
    B(
        "P",
        "decide('promote')",
        "Promote",
        "promotion.promote",
        "Promote the candidate (asks first; needs PROMOTE)",
    ),
    B(
        "R",
        "decide('reject')",
        "Reject",
        "promotion.reject",
        "Reject the candidate and restore the previous best (asks first)",
    ),
    # everywhere
    B("g", "gate", "Gate", "run.gate", "Start a paired gate on the representative workloads"),
    B(
        "o",
        "pick_candidate",
        "Candidate",
        "run.pick",
        "Pick what g, s and watch mode run, and the baseline",
    ),
    B(
        "G",
        "gate_full",
        "Full gate",
        "run.gate_full",
        "The representative gate even on the CPU interpreter (g there checks the smallest workload of each band)",
        show=False,
    ),
    B(
        "s",
        "sweep",
        "Sweep",
        "run.sweep",
        "Start a full sweep of every workload (asks first when large)",
    ),
    B(
        "c",
        "cancel_run",
        "Cancel",
        "run.cancel",
        "Cancel the run in flight (it can be resumed)",
    ),
    B(
        "w",
        "toggle_watch",
        "Watch",
        "app.watch",
        "Watch the kernel files: rerun the gate on every save",
    ),
    B(
        "r",
        "refresh",
        "Refresh",
        "pane.refresh",
        "Refresh the current pane (Recon: refresh the repos; Runs: resume a cancelled or interrupted run)",
        show=False,
    ),
    B(
        "z",
        "maximize_panel",
        "Maximize",
        "app.maximize",
        "Maximize the focused panel (History's summary, NCU's diff, a table); z again restores",
        show=False,
    ),
    B(
        "ctrl+t",
        "next_theme",
        "Theme",
        "app.theme",
        "Switch to the next theme (remembered)",
        show=False,
    ),
    B("q", "quit", "Quit", "app.quit", "Quit fibtui (asks first while a run is in flight)"),
    B(
        "question_mark",
        "show_keys",
        "Keys",
        "app.keys",
        "List every key binding",
        key_display="?",
    ),
    B(
        "escape",
        "leave_input",
        "Leave box",
        "app.leave_input",
        "Leave a text box: focus goes back to the pane",
        show=False,
    ),
]


def key_rows() -> list[tuple[str, str, str, str, str]]:
    """Every key for the ``?`` list, grouped by the pane it acts on: (group, key, action,
    what it does, id), with the keys remapped in keymap.toml shown as remapped."""
    keymap: dict[str, str] = {}
    try:
        from fibtui.ui.user_config import load_keymap

        keymap = load_keymap()
    except Exception:  # noqa: BLE001 - the list still shows the defaults
        keymap = {}
    titles = {p.id: p.title for p in PANES}
    order = ["Panes", "Everywhere", *(p.title for p in PANES)]
    rows = []
    for binding in BINDINGS:
        assert isinstance(binding, Binding)
        bid = binding.id or ""
        action = binding.action.split("(")[0]
        if bid.startswith("pane.") and bid != "pane.refresh":
            group = "Panes"
        elif action in PANE_ACTIONS:
            group = titles[PANE_ACTIONS[action]]
        elif binding.action in PANE_ACTIONS:
            group = titles[PANE_ACTIONS[binding.action]]
        else:
            group = "Everywhere"
        key = keymap.get(bid, binding.key_display or binding.key)
        rows.append((group, key, binding.description or binding.action, binding.tooltip, bid))
    rows.append(
        ("Everywhere", "ctrl+p", "Palette", "The command palette: every action by name", "")
    )
    rows.append(("Everywhere", "tab", "Next", "Focus the next panel (shift+tab: back)", ""))
    rows.sort(key=lambda r: order.index(r[0]) if r[0] in order else len(order))
    return rows
