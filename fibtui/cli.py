"""The headless command line: a thin layer over the same services the TUI uses.

Exit codes: 0 ok, 1 a check failed, 2 bad input or usage. A user's mistake is one line on stderr,
never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from fibtui import __version__
from fibtui.core.errors import FibError


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exits 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workspace", "-w", metavar="DIR", default=argparse.SUPPRESS,
                   help="the solution repo (default: found from the current folder upward)")
    p.add_argument("--dataset", metavar="DIR", default=argparse.SUPPRESS,
                   help="FlashInfer-Trace folder (default: FIB_DATASET_PATH, then dataset/ in the workspace)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fibtui", description="Optimize GPU kernels against FlashInfer-Bench definitions.")
    parser.add_argument("--version", action="version", version=f"fibtui {__version__}")
    _common(parser)
    parser.add_argument("--watch", action="store_true", help="start the TUI with watch mode on")
    parser.add_argument("--or-demo", action="store_true",
                        help="open the bundled demo workspace when no workspace is found")
    sub = parser.add_subparsers(dest="verb", parser_class=_Parser, metavar="VERB")

    p = sub.add_parser("status", help="workspace, solution, definitions, dataset, topology, backends")
    _common(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("check", help="check the workspace topology (exit 1 when invalid)")
    _common(p)
    p.add_argument("dir", nargs="?", metavar="DIR")
    p.add_argument("--json", action="store_true")
    p.add_argument("--deep", action="store_true", help="also validate every workload line strictly")

    p = sub.add_parser("results", help="read result files")
    rsub = p.add_subparsers(dest="results_verb", parser_class=_Parser, metavar="ACTION", required=True)
    rp = rsub.add_parser("show", help="normalize any result file into one run table")
    _common(rp)
    rp.add_argument("file", metavar="FILE")
    rp.add_argument("--solution", metavar="NAME")
    rp.add_argument("--json", action="store_true")

    p = sub.add_parser("demo", help="copy the bundled demo operator into a new workspace DIR")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--no-tui", action="store_true", help="only create it; do not open the TUI")
    p.add_argument("--no-history", action="store_true", help="leave out the archived demo rounds")

    p = sub.add_parser("tui", help="open the terminal UI (the default when no verb is given)")
    _common(p)
    p.add_argument("--watch", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        from fibtui import verbs

        handler = verbs.HANDLERS.get(args.verb or "tui")
        if handler is None:  # pragma: no cover - argparse rejects unknown verbs first
            parser.error(f"unknown verb {args.verb}")
        return int(handler(args) or 0)
    except FibError as exc:
        sys.stderr.write(f"fibtui: error: {exc.one_line()}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("fibtui: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
