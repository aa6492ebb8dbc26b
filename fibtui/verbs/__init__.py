"""CLI verbs, one module per family. Each module defines ``register(sub, common)`` that adds its
subparsers (with ``set_defaults(func=handler)``), imports only the standard library at module
level, and keeps heavy imports (polars, rich, textual...) inside the handlers."""
