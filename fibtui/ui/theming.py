"""Themes: fibtui's registered before the first style, the remembered one set, and a theme switch
that restyles only what is on screen (the panes out of view as they are shown next)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import App
from textual.css.query import NoMatches
from textual.widgets import TabbedContent, TabPane

from fibtui.ui.themes import DEFAULT_THEME, load_themes

if TYPE_CHECKING:
    from textual.css.model import RuleSet
    from textual.css.stylesheet import CssSource
    from textual.dom import DOMNode
    from textual.theme import Theme


@contextmanager
def _one_refresh_each(nodes: list[DOMNode]) -> Iterator[None]:
    """While the styles of ``nodes`` are replaced, each style set asks its widget (and, for an
    inherited one such as a colour, every widget below it) to refresh: thousands of refreshes
    per theme switch, most of its time. Within this block they are skipped, and each node is
    refreshed once after, its layout included (what any of the skipped calls asked, at most).
    Safe because ``update_nodes`` runs to its end without yielding to the event loop."""
    from textual.css.styles import Styles

    real = Styles.refresh

    def skipped(self: Styles, **_: bool) -> None:
        return None

    Styles.refresh = skipped  # type: ignore[method-assign]
    try:
        yield
    finally:
        Styles.refresh = real  # type: ignore[method-assign]
    from textual.widget import Widget

    for node in nodes:
        if isinstance(node, Widget) and node.is_mounted:
            node.refresh(layout=True)


class ThemedApp(App[int]):
    """An app with fibtui's themes, whose main screen is a TabbedContent of panes
    (``main_tabs``, ``active_pane``: given by the subclass)."""

    def __init__(self) -> None:
        super().__init__()
        self.fib_themes: list[Theme] = load_themes()
        #: (theme, CSS sources) -> the stylesheet's parsed rules and sources (refresh_css)
        self._parsed_css: dict[
            tuple[str, tuple[tuple[str, str], ...]], tuple[list[RuleSet], dict[Any, CssSource]]
        ] = {}
        #: a theme switch is under way: refresh_css restyles what is on screen only
        self._theme_switching = False
        #: the panes hidden during the last theme switch, restyled as they are shown
        self._css_stale: set[str] = set()

    @property
    def main_tabs(self) -> TabbedContent | None:
        """The tabs of the panes, once composed."""
        return None

    @property
    def active_pane(self) -> str:
        """The id of the pane in view."""
        raise NotImplementedError

    def choose_theme(self) -> None:
        """Called at the end of the subclass's __init__. Register fibtui's themes and set the remembered one before anything is styled: set in
        on_mount, the theme change restyled every widget once more (a full CSS refresh) before the
        first frame. Set here, Textual applies it when the stylesheet is first parsed."""
        from fibtui.ui.user_config import load_settings

        for theme in self.fib_themes:
            self.register_theme(theme)
        wanted = load_settings().get("theme", DEFAULT_THEME)
        names = {t.name for t in self.fib_themes} | set(self.available_themes)
        self.theme = (
            wanted if wanted in names else (DEFAULT_THEME if DEFAULT_THEME in names else self.theme)
        )

    def refresh_css(self, animate: bool = True) -> None:
        """A theme switch restyles what is on screen only: the header, the footer, the pane in
        view and any dialog. The five hidden panes (most of the widgets) are restyled when they
        are shown next (restyle_stale), one at a time: Textual restyles every widget of the app
        at once, which took most of a theme switch here. Any other CSS refresh is Textual's own."""
        tabs = self.main_tabs
        if not self._theme_switching or tabs is None or not self.is_running:
            super().refresh_css(animate)
            return
        self._theme_switching = False
        stylesheet = self.stylesheet
        stylesheet.set_variables(self.get_css_variables())
        # the rules parsed for a theme are kept: switching back to it parses nothing (the
        # sources are the same while no new widget class brought its own CSS)
        key = (self.theme, tuple(stylesheet.source))
        cached = self._parsed_css.get(key)
        if cached is not None:
            stylesheet._rules, stylesheet.source = list(cached[0]), dict(cached[1])
            stylesheet._rules_map = None
            stylesheet._require_parse = False
        else:
            stylesheet.reparse()
            self._parsed_css[key] = (list(stylesheet.rules), dict(stylesheet.source))
        shown = self.active_pane
        hidden = {tp for tp in tabs.query(TabPane) if tp.id != shown}

        def walk(node: DOMNode) -> Iterator[DOMNode]:
            yield node
            for child in list(node._nodes):
                if child not in hidden:
                    yield from walk(child)

        shown_nodes = list(walk(self))
        with _one_refresh_each(shown_nodes):
            stylesheet.update_nodes(shown_nodes, animate=animate)
        self._css_stale = {tp.id for tp in hidden if tp.id is not None}
        try:
            if self.screen.is_mounted:
                self.screen._refresh_layout(self.size)
                self.screen._css_update_count = self._css_update_count
        except Exception:  # noqa: BLE001 - no screen yet (Textual's own guard)
            pass
        for screen in self.screen_stack:  # a dialog on top: the screens below it too
            if screen is not self.screen:
                stylesheet.update_nodes(walk(screen), animate=animate)
                screen._css_update_count = self._css_update_count

    def restyle_stale(self, pane_id: str) -> None:
        """A pane hidden during a theme switch takes the theme's styles as it is shown."""
        stale = self._css_stale
        if not stale or pane_id not in stale:
            return
        stale.discard(pane_id)
        try:
            tab_pane = self.query_one(f"#{pane_id}", TabPane)
        except NoMatches:
            return
        self.stylesheet.update_nodes(tab_pane.walk_children(with_self=True), animate=False)

    def action_next_theme(self) -> None:
        names = [t.name for t in self.fib_themes] or list(self.available_themes)
        current = names.index(self.theme) if self.theme in names else -1
        self._theme_switching = True
        self.theme = names[(current + 1) % len(names)]
        self._remember_theme(self.theme)
        self.notify(f"theme: {self.theme}")

    def set_theme_by_name(self, name: str) -> None:
        self._theme_switching = True
        self.theme = name
        self._remember_theme(name)

    @work(thread=True, exclusive=True, group="theme-save", exit_on_error=False)
    def _remember_theme(self, name: str) -> None:
        """settings.toml is written (parsed, rewritten, fsync'd) in a thread: on the event loop
        it held the theme's repaint back."""
        from fibtui.ui.user_config import save_setting

        save_setting("theme", name)
