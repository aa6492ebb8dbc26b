"""The six panes of the main screen (keys 1-6)."""
