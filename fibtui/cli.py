"""The headless command line: a thin layer over the same services the TUI uses.

Each module in ``fibtui/verbs/`` registers its own verbs (``register(sub, common)``) and keeps
heavy imports inside its handlers, so ``fibtui --version`` and the TUI start stay fast.

Exit codes: 0 ok, 1 a check failed, 2 bad input or usage. A user's mistake is one line on stderr,
never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from fibtui import __version__
from fibtui.core.errors import FibError
from fibtui.core.text import printable


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exits 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(
            f"{self.prog}: error: {printable(message, one_line=True)} (see {self.prog} --help)\n"
        )
        raise SystemExit(2)


def common_options(p: argparse.ArgumentParser) -> None:
    """--workspace, --dataset and --wide, accepted before or after any verb."""
    p.add_argument(
        "--workspace",
        "-w",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="the solution repo (default: found from the current folder upward)",
    )
    p.add_argument(
        "--dataset",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="FlashInfer-Trace folder (default: FIB_DATASET_PATH, then dataset/ in the workspace)",
    )
    p.add_argument(
        "--wide",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print every column and every cell whole, lines as long as they are (the default "
        "when stdout is not a terminal); on a terminal, tables fit its width",
    )


def _verb_modules():
    import fibtui.verbs as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"fibtui.verbs.{info.name}")
        if hasattr(module, "register"):
            yield module


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="fibtui", description="Optimize GPU kernels against FlashInfer-Bench definitions."
    )
    parser.add_argument("--version", action="version", version=f"fibtui {__version__}")
    common_options(parser)
    parser.add_argument("--watch", action="store_true", help="start the TUI with watch mode on")
    parser.add_argument(
        "--or-demo",
        action="store_true",
        help="open the bundled demo workspace when no workspace is found",
    )
    sub = parser.add_subparsers(dest="verb", parser_class=_Parser, metavar="VERB")
    for module in _verb_modules():
        module.register(sub, common_options)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from fibtui.verbs._common import set_wide

    set_wide(getattr(args, "wide", False))
    try:
        handler = getattr(args, "func", None)
        if handler is None:
            from fibtui.verbs.tui import tui

            handler = tui
        return int(handler(args) or 0)
    except FibError as exc:
        # a file's name or contents in the message: its control characters are shown, never obeyed
        sys.stderr.write(f"fibtui: error: {printable(exc.one_line(), one_line=True)}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("fibtui: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    finally:
        set_wide(False)  # one invocation's flag (main runs many times in one test process)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
