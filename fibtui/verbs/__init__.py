"""CLI verbs, one module per family. Each module defines ``register(sub, common)`` that adds its
subparsers (with ``set_defaults(func=handler)``), imports only the standard library at module
level, and keeps heavy imports (polars, rich, textual...) inside the handlers.

:data:`VERBS` names the module of every verb, so the command line imports only the module of the
verb it runs (``fibtui --help`` imports them all). A new verb goes into its module's ``register``
and into this table (tests/test_cli.py checks that they agree)."""

#: verb -> the module under fibtui.verbs that registers it, in the order ``fibtui --help`` lists
#: them (each module's verbs in its register's order, the modules by name)
VERBS: dict[str, str] = {
    "compare": "compare",
    "promote": "decide",
    "reject": "decide",
    "archive": "decide",
    "round": "decide",
    "demo": "demo",
    "status": "info",
    "check": "info",
    "modal": "modal",
    "ncu": "ncu",
    "parity": "parity",
    "recon": "recon",
    "regimes": "regimes",
    "results": "results",
    "run": "run",
    "runs": "run",
    "pack": "submission",
    "tag": "submission",
    "tui": "tui",
    "workers": "workers",
}
