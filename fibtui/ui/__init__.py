"""The Textual UI. Widgets hold no domain logic: they call fibtui.core / fibtui.runners from
workers and receive results as messages."""
