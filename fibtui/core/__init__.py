"""The domain of fibtui: pure Python + polars.

Nothing under ``fibtui.core`` may import Textual, torch, triton or Modal; a test spawns a fresh
interpreter, imports every core module and checks ``sys.modules``.
"""
