"""The headless command line: a thin layer over the same services the TUI uses.

Each module in ``fibtui/verbs/`` registers its own verbs (``register(sub, common)``) and keeps
heavy imports inside its handlers; the command line imports only the module of the verb it runs
(``fibtui.verbs.VERBS``), so ``fibtui --version``, a verb and the TUI start stay fast.

Exit codes: 0 ok, 1 a check failed, 2 bad input or usage. A user's mistake is one line on stderr,
never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fibtui import __version__
from fibtui.core.errors import FibError
from fibtui.core.text import printable


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exits 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        message = did_you_mean(message)
        sys.stderr.write(
            f"{self.prog}: error: {printable(message, one_line=True)} (see {self.prog} --help)\n"
        )
        raise SystemExit(2)

    def format_help(self) -> str:
        """The help lists every verb: their modules are imported first."""
        for action in self._actions:
            if isinstance(action, _Verbs):
                action.load_all()
        return super().format_help()


_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


def did_you_mean(message: str) -> str:
    """argparse's "invalid choice" message with the nearest valid choice first (a mistyped verb
    or action: ``fibtui stauts`` -> did you mean 'status'?); any other message as it is."""
    import difflib

    m = _INVALID_CHOICE.search(message)
    if m is None:
        return message
    choices = re.findall(r"'([^']*)'", m.group(2))
    close = difflib.get_close_matches(m.group(1), choices, n=1, cutoff=0.6)
    if not close:
        return message
    return f"{message[: m.start()]}invalid choice: '{m.group(1)}': did you mean '{close[0]}'? " + (
        f"(choose from {m.group(2)})"
    )


#: a verb whose module is not imported yet
_PENDING = argparse.ArgumentParser(add_help=False)

if TYPE_CHECKING:  # argparse's action is generic in its stubs only
    _SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    _SubParsers = argparse._SubParsersAction


class _Verbs(_SubParsers):
    """The verb argument: every verb is a valid choice from the start (``fibtui.verbs.VERBS``),
    and a verb's module is imported, and registers its subparsers, when that verb is given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from fibtui.verbs import VERBS

        self._module_of = dict(VERBS)
        self._loaded: set[str] = set()
        for name in VERBS:
            self._name_parser_map[name] = _PENDING

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if self._name_parser_map.get(name) is _PENDING:
            del self._name_parser_map[name]
        return super().add_parser(name, **kwargs)

    def load(self, module: str) -> None:
        if module not in self._loaded:
            self._loaded.add(module)
            importlib.import_module(f"fibtui.verbs.{module}").register(self, common_options)

    def load_all(self) -> None:
        for module in dict.fromkeys(self._module_of.values()):
            self.load(module)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        module = self._module_of.get(values[0]) if isinstance(values, list) else None
        if module is not None:
            self.load(module)
        super().__call__(parser, namespace, values, option_string)


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


def build_parser(*, lazy: bool = False) -> argparse.ArgumentParser:
    """The whole command line; ``lazy``: a verb's module is imported only when the verb is given
    (or the help is printed)."""
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
    sub = parser.add_subparsers(dest="verb", parser_class=_Parser, metavar="VERB", action=_Verbs)
    if not lazy:
        assert isinstance(sub, _Verbs)
        sub.load_all()
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; a signal at any moment of start-up (parsing, importing the verb, opening
    the workspace) is one line and 130, never a traceback."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return _interrupted()


def _interrupted() -> int:
    try:
        sys.stderr.write("fibtui: interrupted\n")
    except (OSError, ValueError):
        pass
    return 130


def _main(argv: Sequence[str] | None = None) -> int:
    args = build_parser(lazy=True).parse_args(argv)
    handler = getattr(args, "func", None)
    if handler is None:  # no verb: the TUI (it prints no tables, so --wide means nothing to it)
        from fibtui.verbs.tui import tui

        return _run(tui, args)
    from fibtui.verbs._common import set_wide

    set_wide(getattr(args, "wide", False))
    try:
        return _run(handler, args)
    finally:
        set_wide(False)  # one invocation's flag (main runs many times in one test process)


def _run(handler: Callable[[argparse.Namespace], int | None], args: argparse.Namespace) -> int:
    """A verb's handler, its errors as one line and an exit code."""
    try:
        return int(handler(args) or 0)
    except FibError as exc:
        # a file's name or contents in the message: its control characters are shown, never obeyed
        sys.stderr.write(f"fibtui: error: {printable(exc.one_line(), one_line=True)}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        return _interrupted()
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
