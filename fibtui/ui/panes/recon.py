"""Recon pane: the reference repos and their state, a search over them for the definition's terms,
and the round's recon note (rows added from hits, saved as Markdown in optimize_ops/docs/).

Keys: r refresh the repos, f search, a add the selected hit to the note (relevance cycles with
1/2/3 after adding: direct/partial/concept), x delete the selected note row, ctrl+s writes the note.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import DataTable, Input, Static

from fibtui.ui.messages import NoteLoaded, ReconFailed, ReconRefreshed, Searched
from fibtui.ui.panes.base import Pane

if TYPE_CHECKING:
    from fibtui.core.recon import ReconNote, SearchHit
    from fibtui.core.workspace import Workspace

    pass

RELEVANCE = ("direct", "partial", "concept")


class SearchBox(Input):
    """The search terms box: focused by ``f`` or a click, left by Enter or Escape, and never
    reached by Tab, so that Tab then a pane key switches panes instead of typing a digit."""

    armed = False

    def allow_focus(self) -> bool:
        return self.armed or self.has_focus

    def arm(self) -> None:
        self.armed = True
        self.focus()

    def on_mouse_down(self) -> None:
        if not self.has_focus:
            self.arm()

    def on_blur(self) -> None:
        self.armed = False


class ReconPane(Pane):
    #: reference repos found in the workspace (None until the pane has looked)
    repo_count: int | None = None

    DEFAULT_CSS = """
    ReconPane #recon-status { height: auto; padding: 0 1; }
    ReconPane #recon-repos { height: 7; }
    ReconPane #recon-search-row { height: 3; }
    ReconPane #recon-terms { width: 1fr; }
    ReconPane #recon-hits { height: 1fr; }
    ReconPane #recon-note-title { height: 1; padding: 0 1; }
    ReconPane #recon-note { height: 8; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hits: list[SearchHit] = []
        self.note: ReconNote | None = None
        self.dirty = False

    def compose_body(self) -> ComposeResult:
        yield Static(
            "reference repos under reference/ and support checkouts in the workspace",
            id="recon-status",
        )
        yield DataTable(id="recon-repos", cursor_type="row")
        with Horizontal(id="recon-search-row"):
            yield SearchBox(
                placeholder="search terms (empty: the definition's own terms and operator keywords)  f to type",
                id="recon-terms",
            )
        yield DataTable(id="recon-hits", cursor_type="row", zebra_stripes=True)
        yield Static("recon note: none for this round yet", id="recon-note-title")
        yield DataTable(id="recon-note", cursor_type="row")

    def built_hook(self) -> None:
        self.query_one("#recon-repos", DataTable).add_columns(
            "repo", "kind", "branch", "state", "head", "ahead/behind", "refreshed"
        )
        self.query_one("#recon-hits", DataTable).add_columns("repo", "path:line", "term", "text")
        self.query_one("#recon-note", DataTable).add_columns(
            "repo", "commit", "path", "relevance", "reusable piece", "next action"
        )

    def reload(self) -> None:
        self.refresh_repos()

    def set_workspace(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.load()

    @work(thread=True, exclusive=True, group="recon-load", exit_on_error=False)
    def load(self) -> None:
        from fibtui.core import recon

        ws = self.workspace
        if ws is None:
            return
        repos = recon.discover_repos(ws.root)
        last = recon.last_refresh(ws.root) or []
        self.post_message(ReconRefreshed(last, repos))
        if ws.active is not None:
            self.post_message(NoteLoaded(recon.latest_note(ws.root, ws.active.definition)))

    @work(thread=True, exclusive=True, group="recon-refresh", exit_on_error=False)
    def refresh_repos(self) -> None:
        from fibtui.core import recon

        ws = self.workspace
        if ws is None:
            return
        repos = recon.discover_repos(ws.root)
        if not repos:
            self.post_message(
                ReconFailed(
                    "no reference repos: clone some under reference/ (e.g. flashinfer, flashinfer-bench)"
                )
            )
            return
        results = recon.refresh_all(repos)
        recon.save_refresh(ws.root, results)
        self.post_message(ReconRefreshed(results, repos))

    @on(ReconRefreshed)
    def _refreshed(self, message: ReconRefreshed) -> None:
        self.repo_count = len(message.repos)
        table = self.query_one("#recon-repos", DataTable)
        table.clear()
        by_name = {r.name: r for r in message.results}
        for repo in message.repos:
            r = by_name.get(repo.name)
            if r is None:
                table.add_row(
                    repo.name, repo.kind, "-", Text("not refreshed yet", style="dim"), "-", "-", "-"
                )
                continue
            style = "red" if r.error else ("yellow" if r.dirty or r.diverged else "green")
            state = r.state + (" (dirty)" if r.dirty else "")
            ab = f"+{r.ahead}/-{r.behind}" if r.ahead is not None else "-"
            table.add_row(
                r.name,
                r.kind,
                r.branch or "-",
                Text(state if not r.error else f"error: {r.error}"[:50], style=style),
                (r.head or "-")[:12],
                ab,
                r.refreshed_at or "-",
            )
        n = len(message.repos)
        self.query_one("#recon-status", Static).update(
            f"{n} repo(s) · r refresh (clean: fast-forward; dirty: fetch only, never stash) · f search · a add hit · ctrl+s write note"
        )

    @on(ReconFailed)
    def _failed(self, message: ReconFailed) -> None:
        self.query_one("#recon-status", Static).update(Text(message.reason, style="yellow"))

    def focus_search(self) -> None:
        self.query_one("#recon-terms", SearchBox).arm()

    @on(Input.Submitted, "#recon-terms")
    def _terms(self, event: Input.Submitted) -> None:
        self.search(event.value)
        # the hits are what comes next: keys go to them (a for add), not into the box
        self.query_one("#recon-hits", DataTable).focus()

    @work(thread=True, exclusive=True, group="recon-search", exit_on_error=False)
    def search(self, text: str = "") -> None:
        from fibtui.core import recon

        ws = self.workspace
        if ws is None or ws.active is None:
            return
        definition = ws.active.definition
        op_type = None
        try:
            op_type = ws.dataset().definition(definition).op_type
        except Exception:  # noqa: BLE001 - search still works from the name alone
            op_type = None
        user = [t for t in text.split() if t]
        if user:
            terms = recon.search_terms(None, None, extra=user)
        else:
            terms = recon.search_terms(definition, op_type, table=recon.keyword_table(ws.root))
        self.post_message(Searched(recon.search_repos(recon.discover_repos(ws.root), terms)))

    @on(Searched)
    def _searched(self, message: Searched) -> None:
        self.hits = list(message.result.hits)
        table = self.query_one("#recon-hits", DataTable)
        table.clear()
        for i, h in enumerate(self.hits):
            table.add_row(h.repo, f"{h.path}:{h.line}", h.term, h.text.strip()[:100], key=str(i))
        self.notify(f"{len(self.hits)} hit(s) for {len(message.result.terms)} term(s)")

    @on(NoteLoaded)
    def _note_loaded(self, message: NoteLoaded) -> None:
        self.note = message.note
        self.dirty = False
        self._draw_note()

    def _draw_note(self) -> None:
        table = self.query_one("#recon-note", DataTable)
        table.clear()
        title = self.query_one("#recon-note-title", Static)
        if self.note is None:
            title.update("recon note: none for this round yet (a adds the selected hit)")
            return
        for row in self.note.rows:
            table.add_row(*row.cells())
        where = self.note.path.name if self.note.path else "not saved"
        title.update(
            f"recon note {self.note.date} · {len(self.note.rows)} row(s) · {where}"
            + (" · [yellow]unsaved[/]" if self.dirty else "")
        )

    def add_selected_hit(self) -> None:
        from fibtui.core import recon

        if not self.hits or self.workspace is None or self.workspace.active is None:
            self.notify("search first (f), then pick a hit", severity="warning")
            return
        table = self.query_one("#recon-hits", DataTable)
        hit = self.hits[table.cursor_row]
        if self.note is None:
            self.note = recon.new_note(self.workspace.active.definition)
        self.note.rows.append(recon.row_from_hit(hit, recon.suggested_relevance(hit)))
        self.dirty = True
        self._draw_note()

    def set_relevance(self, index: int) -> None:
        if self.note is None or not self.note.rows:
            return
        table = self.query_one("#recon-note", DataTable)
        row = self.note.rows[min(table.cursor_row, len(self.note.rows) - 1)]
        row.relevance = RELEVANCE[index]
        self.dirty = True
        self._draw_note()

    def delete_note_row(self) -> None:
        if self.note is None or not self.note.rows:
            return
        table = self.query_one("#recon-note", DataTable)
        del self.note.rows[min(table.cursor_row, len(self.note.rows) - 1)]
        self.dirty = True
        self._draw_note()

    def write_note(self) -> None:
        from fibtui.core import recon

        if self.note is None or self.workspace is None:
            self.notify("nothing to write yet", severity="warning")
            return
        path = recon.save_note(self.workspace.root, self.note)
        self.note.path = path
        self.dirty = False
        self._draw_note()
        self.notify(f"recon note written: {path}")
