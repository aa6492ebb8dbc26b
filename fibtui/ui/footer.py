"""The footer: Textual's, showing the same keys in the same order, that updates only what changed,
and keeps to the keys that fit the width."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.widgets import Footer
from textual.widgets._footer import FooterKey

if TYPE_CHECKING:
    from textual.app import ComposeResult
    from textual.screen import Screen

#: the footer's keys dropped first when they do not fit the width (? and q never are)
FOOTER_DROP_ORDER = ("pick_candidate", "sweep", "toggle_watch", "gate", "cancel_run")
#: cells the footer keeps for the command palette's key at its right
FOOTER_PALETTE_CELLS = 13

#: one key of the footer: (key, label, description, action, enabled, tooltip)
Entry = tuple[str, str, str, str, bool, str]


class PaneFooter(Footer):
    """Textual's Footer, showing the same keys in the same order, that changes only what changed.
    Textual's recomposes (every key removed, mounted again and restyled: ~30 ms here) on every
    bindings signal: each focus change and each refresh_bindings, several times a pane switch,
    mostly to show the same keys again. This one keeps every key it has shown: a pane switch shows
    and hides keys (display) and a recompose happens only for a key it has not met yet in a place
    it can take, a changed label or state, or a binding group (Textual's own compose then)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # the first compose shows the keys: Textual's Footer composes empty and recomposes on the
        # first bindings signal, a frame (and ~30 ms of mounting here) later
        self.set_reactive(Footer._bindings_ready, True)
        #: what was composed: every key entry in order, the palette key's entry; None: Textual's compose
        self._layout: tuple[list[Entry], Entry | None] | None = None
        self._key_widgets: list[FooterKey] = []

    def _wanted(self) -> tuple[list[Entry], Entry | None] | None:
        """What Textual's Footer would show now: one entry per key (key, label, description, action,
        enabled, tooltip), the first binding of each action in binding order, and the palette key;
        None when a binding group is shown (left to Textual's compose)."""
        app = self.app
        active = self.screen.active_bindings
        by_action: dict[str, Entry] = {}
        for _, binding, enabled, tooltip in active.values():
            if not binding.show:
                continue
            if binding.group is not None:
                return None
            by_action.setdefault(
                binding.action,
                (
                    binding.key,
                    app.get_key_display(binding),
                    binding.description,
                    binding.action,
                    enabled,
                    tooltip,
                ),
            )
        palette: Entry | None = None
        if self.show_command_palette and app.ENABLE_COMMAND_PALETTE:
            found = active.get(app.COMMAND_PALETTE_BINDING)
            if found is not None:
                _, binding, enabled, _ = found
                palette = (
                    binding.key,
                    app.get_key_display(binding),
                    binding.description,
                    binding.action,
                    enabled,
                    binding.tooltip or binding.description,
                )
        return _fitting(list(by_action.values()), app.size.width), palette

    def _merged(self, entries: list[Entry]) -> list[Entry]:
        """The keys composed before with the new ones each placed right after the key shown before
        it; the new entries alone where that order cannot hold them all."""
        if self._layout is None:
            return entries
        merged = list(self._layout[0])
        for i, entry in enumerate(entries):
            if entry not in merged:
                merged.insert(merged.index(entries[i - 1]) + 1 if i else 0, entry)
        return merged if _in_order(entries, merged) else entries

    def compose(self) -> ComposeResult:
        wanted = self._wanted()
        if wanted is None:
            self._layout, self._key_widgets = None, []
            yield from super().compose()
            return
        entries, palette = wanted
        layout = self._merged(entries)
        self._layout = (layout, palette)
        self._key_widgets = []
        shown = set(entries)
        self.styles.grid_size_columns = len(entries)
        for key, label, description, action, enabled, tooltip in layout:
            widget = FooterKey(
                key, label, description, action, disabled=not enabled, tooltip=tooltip
            )
            widget.data_bind(compact=Footer.compact)
            if (key, label, description, action, enabled, tooltip) not in shown:
                widget.display = False
            self._key_widgets.append(widget)
            yield widget
        if palette is not None:
            key, label, description, action, enabled, tooltip = palette
            yield FooterKey(
                key,
                label,
                description,
                action,
                classes="-command-palette",
                disabled=not enabled,
                tooltip=tooltip,
            )

    def bindings_changed(self, screen: Screen[Any]) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen:
            self.call_after_refresh(self._update_keys)

    async def _update_keys(self) -> None:
        if not self.is_attached:
            return
        wanted = self._wanted()
        if wanted is not None and self._layout is not None:
            entries, palette = wanted
            layout, composed_palette = self._layout
            if palette == composed_palette and _in_order(entries, layout):
                shown = set(entries)
                for entry, widget in zip(layout, self._key_widgets, strict=True):
                    if widget.display != (entry in shown):
                        widget.display = entry in shown
                self.styles.grid_size_columns = len(entries)
                return
        await self.recompose()


def _fitting(entries: list[Entry], width: int) -> list[Entry]:
    """The footer's keys that fit ``width`` cells (compact: "k Label " each, the palette's key
    at the right): the global keys of FOOTER_DROP_ORDER go first, ``?`` and ``q`` never."""
    if width <= 0:
        return entries

    def cells(entry: Entry) -> int:
        return len(entry[1]) + len(entry[2]) + 2

    room = width - FOOTER_PALETTE_CELLS
    kept = list(entries)
    for action in FOOTER_DROP_ORDER:
        if sum(cells(e) for e in kept) <= room:
            break
        kept = [e for e in kept if e[3] != action]
    return kept


def _in_order(entries: list[Entry], layout: list[Entry]) -> bool:
    """Are ``entries`` all in ``layout``, in the same order?"""
    rest = iter(layout)
    return all(entry in rest for entry in entries)
